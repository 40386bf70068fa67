/* gpu_profile.c - where a decode step's time goes, measured on the device: each op of one
 * recorded step replayed alone (20 times per command buffer, best of 3), the whole step
 * replayed without the host read, and the cost of an empty dispatch with and without a
 * barrier between dispatches. Turned on with pl_gpu_backend_opts.profile_path (report appended
 * there) at the profile_at-th submit of a step (default 40). The replays run ops again
 * (accumulating ones add twice), so a profiled run's later outputs are meaningless: it is
 * for measurements only (pooled bench -r 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file_write.h"
#include "../base/limits.h"
#include "gpu_internal.h"
#include "repack.h"

#define REPS 20

static const char *kind_name(op_kind k) {
    static const char *n[] = {"embed",       "rmsnorm",   "matmul",    "add",       "rope",
                              "kv_store",    "attention", "swiglu",    "argmax",    "topk",
                              "copy",        "softmax",   "topk_rows", "matmul_id", "moe_combine",
                              "sigmoid_mul", "ssm_conv",  "delta_rule"};
    _Static_assert(sizeof n / sizeof n[0] == OP_DELTA_RULE + 1, "a name for every op kind");
    return (unsigned)k < sizeof n / sizeof n[0] ? n[k] : "?";
}

static uint64_t weight_bytes(const gbuf *w) {
    if (!w || !w->h.weight) return 0;
    uint32_t cols = (uint32_t)w->h.ne0, rows = (uint32_t)w->h.ne1;
    return pl_gpu_quant_bytes(w->wt, cols, rows) + pl_gpu_scale_bytes(w->wt, cols, rows);
}

/* Best-of-3 seconds of encoding ops[i0..i1) `reps` times into one command buffer, with
 * the host's share of the best run: encoding, and the submit call. */
static double replay(gpu_backend *gb, int i0, int i1, int reps, double *enc, double *sub) {
    double best = 1e9;
    for (int t = 0; t < 3; t++) {
        pl_gpu_finish(gb->g);
        double t0 = pl_gpu_now();
        pl_gpu_begin(gb->g);
        for (int r = 0; r < reps; r++)
            for (int i = i0; i < i1; i++)
                if (!gb->ops[i].dead && pl_gpu_encode_op(gb, &gb->ops[i]) != PL_OK) return -1;
        if (gb->args_used)
            pl_gpu_write(gb->g, gb->args, 0, gb->args_host,
                         (size_t)gb->args_used * gb->args_stride);
        gb->args_used = 0;
        double t1 = pl_gpu_now();
        if (pl_gpu_submit(gb->g) != PL_OK) return -1;
        double t2 = pl_gpu_now();
        if (pl_gpu_finish(gb->g) != PL_OK) return -1;
        double s = (pl_gpu_now() - t0) / reps;
        if (s < best) {
            best = s;
            if (enc) *enc = (t1 - t0) / reps, *sub = (t2 - t1) / reps;
        }
    }
    return best;
}

/* Seconds per empty dispatch, n in one command buffer; `chain` makes each depend on the
 * previous (a read-write buffer: Dawn puts a barrier between them). */
static double empty_dispatch(gpu_backend *gb, int chain, int n) {
    const char *src =
        chain
            ? "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
              "@compute @workgroup_size(32)\n"
              "fn main(@builtin(local_invocation_index) l: u32) { if (l == 0u) { b[0] = b[0] + 1u; "
              "} }\n"
            : "@group(0) @binding(0) var<storage, read> b: array<u32>;\n"
              "@compute @workgroup_size(32)\n"
              "fn main(@builtin(local_invocation_index) l: u32) { if (l == 99u) { _ = b[0]; } }\n";
    pl_gpu_kernel *k = NULL;
    pl_gpu_buf *buf = NULL;
    pl_gpu_bind *b = NULL;
    double best = -1;
    if (pl_gpu_kernel_new(gb->g, src, "empty", &k) == PL_OK &&
        pl_gpu_buf_new(gb->g, 256, PL_GPU_STORAGE, "empty", &buf) == PL_OK) {
        pl_gpu_ref r = {buf, 0, 0};
        if (pl_gpu_bind_new(gb->g, k, &r, 1, &b) == PL_OK) {
            best = 1e9;
            for (int t = 0; t < 3; t++) {
                pl_gpu_finish(gb->g);
                double t0 = pl_gpu_now();
                pl_gpu_begin(gb->g);
                for (int i = 0; i < n; i++) pl_gpu_dispatch(gb->g, k, b, 1);
                pl_gpu_submit(gb->g);
                pl_gpu_finish(gb->g);
                double s = (pl_gpu_now() - t0) / n;
                if (s < best) best = s;
            }
        }
    }
    pl_gpu_bind_free(b);
    pl_gpu_buf_free(buf);
    pl_gpu_kernel_free(k);
    return best;
}

void pl_gpu_profile(gpu_backend *gb, const char *path, double step_seconds) {
    /* written in memory, then appended through a temporary file (base/file_write.h) */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    fprintf(f, "== GPU profile: %s\n", gb->info->name);
    fprintf(f, "GEMV tune (threads x rows per workgroup, +sg: subgroup reduce):");
    static const char *tn[PL_GPU_TUNE_CLASSES] = {"f32",  "f16",      "q4_0",
                                                  "q8_0", "q4_0/q8x", "q8_0/q8x"};
    for (int i = 0; i < PL_GPU_TUNE_CLASSES; i++)
        fprintf(f, " %s %ux%u u%u%s%s", tn[i], gb->tune[i].threads, gb->tune[i].rows,
                gb->tune[i].unroll, gb->tune[i].subgroups ? "+sg" : "",
                gb->tune[i].sg_rows ? "+sgrows" : "");
    fprintf(f, "\n");
    for (int i = 0; i < gb->n_shapes; i++) {
        const shape_tune *e = &gb->shapes[i];
        fprintf(f, "tuned: class %d %ux%u -> %ux%u u%u%s%s\n", e->wt, e->rows, e->cols,
                e->t.threads, e->t.rows, e->t.unroll, e->t.subgroups ? "+sg" : "",
                e->t.sg_rows ? "+sgrows" : "");
    }
    double sum = 0, mm = 0;
    uint64_t bytes = 0;
    int live = 0, disp = 0;
    for (int i = 0; i < gb->n_ops; i++) {
        op *o = &gb->ops[i];
        if (o->dead) continue;
        live++;
        uint64_t d0 = pl_gpu_get_stats(gb->g)->dispatches;
        double s = replay(gb, i, i + 1, REPS, NULL, NULL);
        disp += (int)((pl_gpu_get_stats(gb->g)->dispatches - d0) / (3 * REPS));
        uint64_t wb = o->kind == OP_MATMUL
                          ? weight_bytes(o->fqkv.w ? o->fqkv.w : o->a) + weight_bytes(o->fgate.w_up)
                          : 0;
        if (o->kind == OP_MATMUL_ID) { /* the slots' experts, as if all different (decode) */
            int64_t used = o->n * o->count < o->k ? o->n * o->count : o->k;
            wb = (weight_bytes(o->a) + weight_bytes(o->fgate.w_up)) / (uint64_t)o->k *
                 (uint64_t)used;
        }
        sum += s;
        if (o->kind == OP_MATMUL || o->kind == OP_MATMUL_ID) mm += s, bytes += wb;
        const gbuf *w = o->fqkv.w ? o->fqkv.w : o->a;
        fprintf(f, "op %3d %-9s%s%s%s%s%s%s%s%s%s n %lld %lldx%lld  %8.2f us", i,
                kind_name(o->kind), o->fnorm.x ? " +norm" : "", o->fgate.w_up ? " +gate/up" : "",
                o->fqkv.w ? " +q/k/v" : "", o->frope.nw ? " +qknorm" : "",
                o->frope.kc ? " +store" : "", o->fsoftmax ? " +softmax" : "",
                o->fshgate.w ? " +shared gate" : "",
                o->acc ? (o->kind == OP_MATMUL_ID ? " +shared x" : " +acc") : "",
                o->fcomb.y ? " +gated shared" : "", (long long)(o->rows ? o->rows : o->n),
                (long long)(w && w->h.weight ? w->h.ne1 : 0),
                (long long)(w && w->h.weight ? w->h.ne0 : 0), s * 1e6);
        if (wb) fprintf(f, "  %7.1f GB/s of %.2f MB", wb / s / 1e9, wb / 1e6);
        fprintf(f, "\n");
    }
    double enc = 0, sub = 0, whole = replay(gb, 0, gb->n_ops, 5, &enc, &sub);
    double chained = empty_dispatch(gb, 1, 500), free_ = empty_dispatch(gb, 0, 500);
    fprintf(f, "ops %d live, %d dispatches per step\n", live, disp);
    fprintf(f, "sum of ops alone %.1f us (matmuls %.1f us, %.1f GB/s over %.1f MB)\n", sum * 1e6,
            mm * 1e6, bytes / mm / 1e9, bytes / 1e6);
    fprintf(f,
            "whole step replayed (GPU + submit, no read back) %.1f us (host: encode %.1f us, "
            "submit call %.1f us); measured step %.1f us\n",
            whole * 1e6, enc * 1e6, sub * 1e6, step_seconds * 1e6);
    fprintf(f, "empty dispatch: %.2f us chained (barrier), %.2f us independent\n", chained * 1e6,
            free_ * 1e6);
    if (fclose(f) == 0 && pl_file_append(path, text, len, PL_LIMIT_PROFILE_FILE) != PL_OK)
        fprintf(stderr, "pooled: GPU profile not written: %s\n", pl_last_error());
    free(text);
}

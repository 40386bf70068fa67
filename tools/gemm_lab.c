/* gemm_lab.c - time prefill's q8x GEMM (wgsl_gemm.c) and its Q8_0 pre-pass on one GPU, on
 * random weights of a model's matmul shapes, for n columns (default 512: pp512).
 *
 * For each shape (q/k/v with its split, o, gate/up with SwiGLU, down) and weight type, and
 * each tile in the list, it builds the GEMM, checks two columns' first rows against the
 * CPU reference (kernel_ref.c), and times it: a ~40 ms warm-up (clocks drop when idle),
 * then the difference of a long and a short run of dispatches in one command buffer each,
 * median of 5. It prints us per GEMM, the pre-pass's us (once per input), effective
 * integer TOP/s (2 * rows * cols * n, gate/up twice) and GB/s of weights read once.
 * Build: `make lab`; run from the repo root: build/gemm_lab [--model 8b|27b|1.7b|35b|all]
 * [--n N] [--type q4_0|q8_0|all] [--tile tm,tn,rm,rn,bk[,version]] (repeatable; default: a
 * list) [--peak] (first the adapter's dp4a and f32 fma peak) [--probe] (the subgroup-matrix
 * configurations the adapter offers and the one the prefill GEMM takes) [--smx] (the tile
 * list: the pinned portable tiles and the subgroup-matrix versions 5-7) [--i8 m,n,k]
 * (version 6's matrix shape, default 16,16,32). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "gpu/device.h"
#include "gpu/kernel_ref.h"
#include "gpu/wgsl_gen.h"
#include "lab_util.h"

typedef struct {
    const char *name;
    uint32_t rows, cols;
    pl_gemv_mode mode;
    uint32_t split0, split1;
} shape;

static pl_gpu_kernel *build(pl_gpu *g, pl_status st, char *src, const char *label) {
    pl_gpu_kernel *k = NULL;
    if (st != PL_OK || pl_gpu_kernel_new(g, src, label, &k) != PL_OK) k = NULL;
    free(src);
    return k;
}

/* Seconds per dispatch of k: warm-up, then (long - short run) / difference, median of 5. */
static double time_dispatch(pl_gpu *g, pl_gpu_kernel *k, pl_gpu_bind *b, uint32_t groups) {
    double w0 = pl_gpu_now(), one;
    int reps = 0;
    while (pl_gpu_now() - w0 < 0.04 || reps < 2) {
        pl_gpu_begin(g);
        pl_gpu_dispatch(g, k, b, groups);
        pl_gpu_submit(g);
        pl_gpu_finish(g);
        reps++;
    }
    one = (pl_gpu_now() - w0) / reps;
    int lo = 4, hi = 4 + (int)(0.03 / (one > 1e-6 ? one : 1e-6));
    if (hi > 404) hi = 404;
    if (hi < 12) hi = 12;
    double t[5];
    for (int r = 0; r < 5; r++) {
        double tn[2];
        for (int j = 0; j < 2; j++) {
            double t0 = pl_gpu_now();
            pl_gpu_begin(g);
            for (int i = 0; i < (j ? hi : lo); i++) pl_gpu_dispatch(g, k, b, groups);
            pl_gpu_submit(g);
            pl_gpu_finish(g);
            tn[j] = pl_gpu_now() - t0;
        }
        t[r] = (tn[1] - tn[0]) / (hi - lo);
    }
    qsort(t, 5, sizeof *t, cmpd);
    return t[2];
}

/* v6's i8 x i8 -> i32 matrix shape (M, N, K): not in the pinned Dawn's config list, which
 * keeps only f32/f16/u32/i32 operands; NVIDIA's Vulkan driver offers 16 x 16 x 32 */
static uint32_t i8cfg[3] = {16, 16, 32};

static void run_shape(pl_gpu *g, const char *model, const shape *sh, pl_gpu_wtype wt, uint32_t n,
                      const uint32_t (*tiles)[6], int ntiles) {
    const pl_gpu_info *info = pl_gpu_get_info(g);
    uint32_t R = sh->rows, K = sh->cols, NB = K / 32;
    int nm = sh->mode == PL_GEMV_GATE_UP ? 2 : 1;
    uint64_t qb = (uint64_t)R * NB * (wt == PL_GW_Q4_0 ? 16 : 32), sb = (uint64_t)R * NB * 2;
    unsigned char *q[2] = {0};
    uint16_t *s[2] = {0};
    pl_gpu_buf *Q[2] = {0}, *S[2] = {0};
    for (int m = 0; m < nm; m++) {
        q[m] = malloc(qb), s[m] = malloc(sb + 4);
        for (uint64_t i = 0; i < qb; i++) q[m][i] = (unsigned char)rnd();
        for (uint64_t i = 0; i < (uint64_t)R * NB; i++)
            s[m][i] = pl_f32_to_f16(unif(-0.02f, 0.02f));
        Q[m] = upload(g, q[m], qb, "q"), S[m] = upload(g, s[m], sb + 4, "s");
    }
    size_t nx = (size_t)n * K, ny = (size_t)n * R;
    float *x = malloc(nx * 4), *got = malloc(ny * 4), *zero = calloc(ny, 4);
    for (size_t i = 0; i < nx; i++) x[i] = unif(-2, 2);
    pl_gpu_buf *X = upload(g, x, nx * 4, "x"), *XQ = upload(g, NULL, (uint64_t)n * NB * 32, "xq"),
               *XD = upload(g, NULL, (uint64_t)n * NB * 4, "xd"), *Y = upload(g, NULL, ny * 4, "y");
    pl_gpu_buf *Y1 = sh->split0 ? upload(g, NULL, ny * 4, "y1") : NULL;
    pl_gpu_buf *Y2 = sh->split0 ? upload(g, NULL, ny * 4, "y2") : NULL, *A = NULL, *A2 = NULL;
    pl_gpu_buf_new(g, 32, PL_GPU_UNIFORM, "args", &A);
    pl_gpu_buf_new(g, 32, PL_GPU_UNIFORM, "args", &A2);
    /* the pre-pass (no norm: the norm costs one more pass over x in L2) */
    pl_q8pre_params pp = {.threads = NB >= 256 ? 256 : NB >= 128 ? 128 : 64};
    char *src = NULL;
    pl_status st = pl_wgsl_q8pre(&pp, &src);
    pl_gpu_kernel *kp = build(g, st, src, "q8pre");
    pl_gpu_args pa = {{n, K}};
    pl_gpu_write(g, A2, 0, &pa, sizeof pa);
    pl_gpu_ref pr[4] = {{X, 0, 0}, {XQ, 0, 0}, {XD, 0, 0}, {A2, 0, 32}};
    pl_gpu_bind *bp = NULL;
    double tpre = -1;
    if (kp && pl_gpu_bind_new(g, kp, pr, 4, &bp) == PL_OK) tpre = time_dispatch(g, kp, bp, n);
    /* reference of columns 0 and n - 1, first rows, each matrix alone */
    uint32_t chk = R < 256 ? R : 256, cols[2] = {0, n - 1};
    float *ref[2][2];
    double *mag[2][2];
    for (int m = 0; m < nm; m++) {
        pl_gemv_params rp = {.type = wt, .rows = chk, .cols = K, .mode = PL_GEMV_STORE, .q8x = 1};
        pl_gpu_ref_mat rm = {{q[m]}, {s[m]}};
        for (int c = 0; c < 2; c++) {
            ref[m][c] = malloc(chk * 4), mag[m][c] = malloc(chk * 8);
            pl_gpu_ref_gemv(&rp, &rm, 1, x + (size_t)cols[c] * K, NULL, NULL, ref[m][c], mag[m][c]);
        }
    }
    double flops = 2.0 * R * K * n * nm, bytes = (double)nm * (qb + sb);
    for (int ti = 0; ti < ntiles; ti++) {
        pl_gemm_params p = {.type = wt,
                            .rows = R,
                            .cols = K,
                            .mode = sh->mode,
                            .split = {sh->split0, sh->split1},
                            .tm = tiles[ti][0],
                            .tn = tiles[ti][1],
                            .rm = tiles[ti][2],
                            .rn = tiles[ti][3],
                            .bk = tiles[ti][4],
                            .version = tiles[ti][5]};
        if (p.version >= 5) { /* subgroup matrices: the probed f16 config, or i8 (v6) */
            int pk = pl_gpu_smx_pick(info);
            p.sg = info->subgroup_max;
            if (p.version == 6)
                p.sm = i8cfg[0], p.sn = i8cfg[1], p.sk = i8cfg[2];
            else if (pk >= 0)
                p.sm = info->smx[pk].m, p.sn = info->smx[pk].n, p.sk = info->smx[pk].k;
        }
        while (p.bk > 1 && pl_gemm_wg_bytes(&p) > info->max_wg_storage) p.bk /= 2;
        char label[64];
        snprintf(label, sizeof label, "%ux%u/%ux%u/bk%u/v%u", p.tm, p.tn, p.rm, p.rn, p.bk,
                 p.version);
        pl_gemm_params key = pl_gemm_kernel_key(&p);
        src = NULL;
        st = pl_gemm_check_shape(&p);
        if (st == PL_OK) st = pl_wgsl_gemm(&key, &src);
        pl_gpu_kernel *k = build(g, st, src, label);
        if (!k || !kp) {
            printf("%s %s %s q%d: FAILED %s\n", model, sh->name, label, wt == PL_GW_Q4_0 ? 4 : 8,
                   pl_last_error());
            continue;
        }
        pl_gpu_args a = pl_gemm_args(&p, n);
        pl_gpu_write(g, A, 0, &a, sizeof a);
        pl_gpu_ref refs[10];
        int nr = 0;
        refs[nr++] = (pl_gpu_ref){XQ, 0, 0};
        refs[nr++] = (pl_gpu_ref){XD, 0, 0};
        refs[nr++] = (pl_gpu_ref){Y, 0, 0};
        for (int m = 0; m < nm; m++) {
            refs[nr++] = (pl_gpu_ref){Q[m], 0, 0};
            refs[nr++] = (pl_gpu_ref){S[m], 0, 0};
        }
        if (sh->split0) refs[nr++] = (pl_gpu_ref){Y1, 0, 0}, refs[nr++] = (pl_gpu_ref){Y2, 0, 0};
        refs[nr++] = (pl_gpu_ref){A, 0, 32};
        pl_gpu_bind *b = NULL;
        if (pl_gpu_bind_new(g, k, refs, nr, &b) != PL_OK) {
            printf("%s %s %s: bind failed: %s\n", model, sh->name, label, pl_last_error());
            pl_gpu_kernel_free(k);
            continue;
        }
        uint32_t groups = pl_gemm_groups(&p, n);
        /* check (STORE and split: y rows [0, split0) of columns 0 and n - 1; gate/up: the
         * SwiGLU of the two references) */
        pl_gpu_write(g, Y, 0, zero, ny * 4); /* ACCUM adds into y */
        pl_gpu_begin(g);
        pl_gpu_dispatch(g, kp, bp, n);
        pl_gpu_dispatch(g, k, b, groups);
        double err = -1;
        uint32_t yr = sh->split0 ? sh->split0 : R, cr = chk < yr ? chk : yr;
        if (pl_gpu_submit(g) == PL_OK &&
            pl_gpu_download(g, Y, 0, got, (size_t)n * yr * 4) == PL_OK) {
            err = 0;
            for (int c = 0; c < 2; c++)
                for (uint32_t i = 0; i < cr; i++) {
                    double want = ref[0][c][i], mg = mag[0][c][i];
                    if (nm == 2) {
                        double sg = want / (1 + exp(-want)), u = ref[1][c][i];
                        mg = mg * fabs(u) + mag[1][c][i] * fabs(sg), want = sg * u;
                    }
                    double e = fabs((double)got[(size_t)cols[c] * yr + i] - want) / (mg + 1e-30);
                    if (!(e <= err)) err = e;
                }
        }
        double t = time_dispatch(g, k, b, groups);
        printf("%s %s %ux%u n%u %s %s: %.1f us (pre-pass %.1f us), %.1f TOP/s, %.0f GB/s, err "
               "%.2g\n",
               model, sh->name, R, K, n, wt == PL_GW_Q4_0 ? "q4_0" : "q8_0", label, t * 1e6,
               tpre * 1e6, flops / t / 1e12, bytes / t / 1e9, err);
        fflush(stdout);
        pl_gpu_bind_free(b);
        pl_gpu_kernel_free(k);
    }
    for (int m = 0; m < nm; m++) {
        for (int c = 0; c < 2; c++) free(ref[m][c]), free(mag[m][c]);
        pl_gpu_buf_free(Q[m]), pl_gpu_buf_free(S[m]), free(q[m]), free(s[m]);
    }
    pl_gpu_bind_free(bp);
    pl_gpu_kernel_free(kp);
    pl_gpu_buf_free(X), pl_gpu_buf_free(XQ), pl_gpu_buf_free(XD), pl_gpu_buf_free(Y);
    pl_gpu_buf_free(Y1), pl_gpu_buf_free(Y2), pl_gpu_buf_free(A), pl_gpu_buf_free(A2);
    free(x), free(got), free(zero);
}

/* The adapter's peak of one instruction: 256-thread workgroups, each thread 8 independent
 * chains of ITER steps (v = dot4I8Packed(v, k) + v: one dp4a with its accumulator; or
 * v = fma(v, k, v)), k read from memory so nothing folds. Counted as 8 integer ops per
 * dp4a (4 multiply-adds), 2 per fma, like the GEMM's TOP/s. */
static void run_peak(pl_gpu *g) {
    enum { ITER = 2048, GROUPS = 8192 };
    const char *name[2] = {"dp4a", "fma"};
    for (int f = 0; f < 2; f++) {
        char src[2048];
        snprintf(src, sizeof src,
                 "@group(0) @binding(0) var<storage, read_write> y: array<%s>;\n"
                 "@compute @workgroup_size(256)\n"
                 "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
                 "  let k = y[gid.x & 7u];\n"
                 "  var v0 = %s(gid.x); var v1 = v0 + %s(1); var v2 = v0 + %s(2);\n"
                 "  var v3 = v0 + %s(3); var v4 = v0 + %s(4); var v5 = v0 + %s(5);\n"
                 "  var v6 = v0 + %s(6); var v7 = v0 + %s(7);\n"
                 "  for (var i = 0u; i < %du; i++) {\n"
                 "    v0 = %s; v1 = %s; v2 = %s; v3 = %s; v4 = %s; v5 = %s; v6 = %s; v7 = %s;\n"
                 "  }\n"
                 "  y[gid.x + 8u] = v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7;\n"
                 "}\n",
                 f ? "f32" : "u32", f ? "f32" : "u32", f ? "f32" : "u32", f ? "f32" : "u32",
                 f ? "f32" : "u32", f ? "f32" : "u32", f ? "f32" : "u32", f ? "f32" : "u32",
                 f ? "f32" : "u32", ITER, f ? "fma(v0, k, v0)" : "u32(dot4I8Packed(v0, k)) + v0",
                 f ? "fma(v1, k, v1)" : "u32(dot4I8Packed(v1, k)) + v1",
                 f ? "fma(v2, k, v2)" : "u32(dot4I8Packed(v2, k)) + v2",
                 f ? "fma(v3, k, v3)" : "u32(dot4I8Packed(v3, k)) + v3",
                 f ? "fma(v4, k, v4)" : "u32(dot4I8Packed(v4, k)) + v4",
                 f ? "fma(v5, k, v5)" : "u32(dot4I8Packed(v5, k)) + v5",
                 f ? "fma(v6, k, v6)" : "u32(dot4I8Packed(v6, k)) + v6",
                 f ? "fma(v7, k, v7)" : "u32(dot4I8Packed(v7, k)) + v7");
        pl_gpu_kernel *k = NULL;
        pl_gpu_buf *y = upload(g, NULL, (uint64_t)(GROUPS * 256 + 8) * 4, "y");
        pl_gpu_ref r = {y, 0, 0};
        pl_gpu_bind *b = NULL;
        if (!y || pl_gpu_kernel_new(g, src, name[f], &k) != PL_OK ||
            pl_gpu_bind_new(g, k, &r, 1, &b) != PL_OK) {
            printf("peak %s: FAILED %s\n", name[f], pl_last_error());
        } else {
            double t = time_dispatch(g, k, b, GROUPS);
            double ops = (double)GROUPS * 256 * ITER * 8 * (f ? 2 : 8);
            printf("peak %s: %.1f us, %.1f %s/s (%.3g instructions/s)\n", name[f], t * 1e6,
                   ops / t / 1e12, f ? "TFLOP" : "integer TOP", ops / (f ? 2 : 8) / t);
        }
        pl_gpu_bind_free(b);
        pl_gpu_kernel_free(k);
        pl_gpu_buf_free(y);
    }
}

int main(int argc, char **argv) {
    const char *model = "all", *type = "all";
    uint32_t n = 512, tiles[16][6];
    int peak = 0, probe = 0, smxl = 0;
    int ntiles = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--type") && i + 1 < argc)
            type = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc && atoi(argv[i + 1]) > 0)
            n = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--peak"))
            peak = 1;
        else if (!strcmp(argv[i], "--probe"))
            probe = 1;
        else if (!strcmp(argv[i], "--i8") && i + 1 < argc &&
                 sscanf(argv[i + 1], "%u,%u,%u", &i8cfg[0], &i8cfg[1], &i8cfg[2]) == 3)
            i++;
        else if (!strcmp(argv[i], "--smx"))
            smxl = 1;
        else if (!strcmp(argv[i], "--tile") && i + 1 < argc && ntiles < 16 &&
                 (tiles[ntiles][5] = 4,
                  sscanf(argv[i + 1], "%u,%u,%u,%u,%u,%u", &tiles[ntiles][0], &tiles[ntiles][1],
                         &tiles[ntiles][2], &tiles[ntiles][3], &tiles[ntiles][4],
                         &tiles[ntiles][5]) >= 5))
            ntiles++, i++;
        else {
            fprintf(stderr, "usage: gemm_lab [--model 8b|27b|1.7b|35b|all] [--n N] "
                            "[--type q4_0|q8_0|all] [--tile tm,tn,rm,rn,bk[,version]]... [--peak] "
                            "[--probe] [--smx] "
                            "[--i8 m,n,k]\n");
            return 2;
        }
    }
    if (!ntiles && smxl) { /* the pinned portable tiles, then the subgroup-matrix versions */
        const uint32_t def[7][6] = {
            {64, 64, 4, 4, 4, 3}, {128, 64, 8, 4, 2, 4}, {64, 64, 4, 4, 2, 5}, {64, 64, 4, 4, 2, 6},
            {64, 64, 4, 4, 2, 7}, {64, 32, 4, 2, 4, 7},  {32, 64, 2, 4, 4, 7}};
        memcpy(tiles, def, sizeof def);
        ntiles = 7;
    }
    if (!ntiles) { /* the built-in tile first, then wider register tiles */
        const uint32_t def[6][6] = {{64, 64, 4, 4, 4, 1},   {64, 64, 4, 4, 4, 2},
                                    {128, 64, 8, 4, 2, 2},  {64, 128, 4, 8, 2, 2},
                                    {128, 128, 8, 8, 2, 2}, {64, 64, 4, 4, 8, 2}};
        memcpy(tiles, def, sizeof def);
        ntiles = 6;
    }
    /* (hidden, q rows, kv rows, ffn) per model: qwen3-8b, qwen3.5-27b (its full-attention
     * layers' q/k/v; the FFN is every layer's), qwen3-1.7b */
    const struct {
        const char *name;
        uint32_t h, q, kv, f;
    } models[4] = {{"8b", 4096, 4096, 1024, 12288},
                   {"27b", 5120, 6144, 1024, 17408},
                   {"1.7b", 2048, 2048, 1024, 6144},
                   /* qwen3.5-35b-a3b: its shared expert's gate/up (512 rows) and down, the
                    * small matrices a 64-row tile gives few workgroups */
                   {"35b", 2048, 4096, 512, 512}};
    pl_gpu *g = NULL;
    pl_gpu_open_opts go = {.smx = 1}; /* take subgroup matrices where offered */
    if (pl_gpu_open_with(&go, &g) != PL_OK) {
        fprintf(stderr, "gemm_lab: %s\n", pl_last_error());
        return 1;
    }
    const pl_gpu_info *gi = pl_gpu_get_info(g);
    printf("# %s, max workgroup memory %u, subgroups %u..%u\n", gi->name, gi->max_wg_storage,
           gi->subgroup_min, gi->subgroup_max);
    if (probe) {
        char nm[64];
        printf("probe: subgroup matrices %s, %d configs%s; shader-f16 %s by the adapter\n",
               gi->has_smx ? "taken by the device" : "not taken", gi->n_smx,
               gi->n_smx ? ":" : " (the adapter offers none)",
               gi->f16_offered ? "offered" : "not offered");
        for (int i = 0; i < gi->n_smx && i < 16; i++)
            printf("probe:   %s\n", pl_gpu_smx_name(gi, i, nm, sizeof nm));
        int pk = pl_gpu_smx_pick(gi);
        printf("probe: prefill GEMM %s\n",
               pk >= 0 ? pl_gpu_smx_name(gi, pk, nm, sizeof nm) : "portable (dot4I8Packed)");
    }
    if (peak) run_peak(g);
    for (int mi = 0; mi < 4; mi++) {
        if (strcmp(model, "all") ? strcmp(model, models[mi].name) : mi >= 2) continue;
        uint32_t h = models[mi].h, qr = models[mi].q, kv = models[mi].kv, f = models[mi].f;
        shape shapes[4] = {{"qkv", qr + 2 * kv, h, PL_GEMV_STORE, qr, qr + kv},
                           {"o", h, qr, PL_GEMV_ACCUM, 0, 0},
                           {"gate_up", f, h, PL_GEMV_GATE_UP, 0, 0},
                           {"down", h, f, PL_GEMV_ACCUM, 0, 0}};
        for (int ti = 0; ti < 2; ti++) {
            pl_gpu_wtype wt = ti ? PL_GW_Q8_0 : PL_GW_Q4_0;
            if (strcmp(type, "all") && strcmp(type, ti ? "q8_0" : "q4_0")) continue;
            for (int si = 0; si < 4; si++)
                run_shape(g, models[mi].name, &shapes[si], wt, n, (const uint32_t(*)[6])tiles,
                          ntiles);
        }
    }
    pl_gpu_close(g);
    return 0;
}

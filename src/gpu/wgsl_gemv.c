/* wgsl_gemv.c - the cooperative GEMV template (decode's matrix-vector products).
 *
 * A workgroup of T threads owns R consecutive rows. Thread t walks the blocks t, t+T, ...
 * of all R rows at once: it loads the x values of a block once, then one block of each row,
 * so neighbouring threads read neighbouring 16-byte pieces of the same row (a contiguous
 * stripe) and each x load is reused R times. Partial sums live in named scalars (a0, a1, ...)
 * because an accumulator array indexed by a variable spills to memory. Quants are decoded
 * in registers; nothing accumulates in f16. See wgsl_gen.h for the bindings.
 *
 * Two arithmetics: float activations (the exact reference: each weight becomes a float and
 * meets x in an FMA), or q8x (Q4_0/Q8_0 only): the thread quantises its x block to Q8_0 once
 * and every row's block is 8 integer dot4I8Packed, as llama.cpp and our CPU backend compute
 * with --act q8 (docs/gpu-notes.md v8: 1.2-1.4x faster on the H200's big matrices). */
#include <stdio.h>
#include <string.h>

#include "wgsl_gen.h"
#include "wgsl_text.h"

/* How one weight type is read: `elems` weights per block, `xv` vec4 loads of x per block
 * (0: x is read as scalars), `words` vec4<u32> per block for packed types. */
typedef struct {
    unsigned elems, xv;
    int scaled;
    const char *qtype;
} wfmt;

static wfmt fmt_of(pl_gpu_wtype type, unsigned cols) {
    switch (type) {
    case PL_GW_Q4_0: return (wfmt){32, 8, 1, "vec4<u32>"};
    case PL_GW_Q8_0: return (wfmt){32, 8, 1, "vec4<u32>"};
    case PL_GW_F16: return cols % 8 == 0 ? (wfmt){8, 2, 0, "vec4<u32>"} : (wfmt){1, 0, 0, "u32"};
    case PL_GW_F32:
    default: return cols % 4 == 0 ? (wfmt){4, 1, 0, "vec4<f32>"} : (wfmt){1, 0, 0, "f32"};
    }
}

static unsigned n_mats(const pl_gemv_params *p) {
    return p->mode == PL_GEMV_GATE_UP ? 2 : 1;
}
static unsigned n_parts(const pl_gemv_params *p) {
    return p->parts ? p->parts : 1;
}

uint32_t pl_gemv_rows_per_group(const pl_gemv_params *p) {
    return p->sg_rows ? p->threads / p->sg_rows * p->rows_per_wg : p->rows_per_wg;
}

uint32_t pl_gemv_groups(const pl_gemv_params *p) {
    uint32_t rw = pl_gemv_rows_per_group(p);
    return (p->rows + rw - 1) / rw;
}

static unsigned n_cols(const pl_gemv_params *p) {
    return p->ncols > 1 ? p->ncols : 1;
}

uint32_t pl_gemv_dispatch(const pl_gemv_params *p, uint32_t n) {
    return pl_gemv_groups(p) * ((n + n_cols(p) - 1) / n_cols(p));
}

uint32_t pl_gemv_wg_bytes(const pl_gemv_params *p) {
    uint32_t ev = p->ids ? 4 : 0; /* the slot's expert id */
    if (p->sg_rows) return ev;
    return (n_mats(p) * p->rows_per_wg * n_cols(p) + (p->norm && !p->q8x)) * p->threads * 4 + ev;
}

int pl_gemv_bindings(const pl_gemv_params *p) {
    wfmt f = fmt_of(p->type, p->cols);
    return 3 + (int)(n_mats(p) * n_parts(p)) * (f.scaled ? 2 : 1) + (p->norm != 0 || p->xpre) +
           (p->norm_out != 0) + (p->bias != 0) + (p->gate_out != 0) + (p->up_out != 0) +
           (p->split[0] ? 2 + (p->split[2] != 0) : 0) + (p->ids != 0);
}

static pl_status check(const pl_gemv_params *p) {
    unsigned T = p->threads, R = p->rows_per_wg;
    if (!p->rows || !p->cols || T < 8 || T > 1024 || (T & (T - 1)) || R < 1 || R > 32)
        return pl_fail(PL_ERR_ARG, "GEMV %ux%u: bad threads %u / rows %u", p->rows, p->cols, T, R);
    if ((p->type == PL_GW_Q4_0 || p->type == PL_GW_Q8_0) && p->cols % 32)
        return pl_fail(PL_ERR_ARG, "GEMV: %u columns is not a whole number of blocks", p->cols);
    if (p->unroll > 4 || p->unroll == 3)
        return pl_fail(PL_ERR_ARG, "GEMV: unroll %u (1, 2 or 4)", p->unroll);
    if (p->sg_rows && (p->sg_rows < 4 || (p->sg_rows & (p->sg_rows - 1)) || T % p->sg_rows))
        return pl_fail(PL_ERR_ARG, "GEMV: %u threads are not whole subgroups of %u", T, p->sg_rows);
    unsigned parts = n_parts(p), rw = pl_gemv_rows_per_group(p);
    uint64_t all = (uint64_t)p->rows * (p->ids ? p->n_exp : 1); /* rows of the weight */
    if (p->ids && (!p->n_exp || !p->n_used || p->mode == PL_GEMV_ACCUM || p->norm || p->bias ||
                   p->split[0] || all > UINT32_MAX || (parts > 1 && p->rows % rw)))
        return pl_fail(PL_ERR_ARG, "GEMV: bad gathered experts (%u of %u rows)", p->n_exp, p->rows);
    if (parts > PL_GEMV_MAX_PARTS ||
        (parts > 1 && (p->rows_per_part % rw || (uint64_t)p->rows_per_part * parts < all ||
                       (uint64_t)p->rows_per_part * (parts - 1) >= all)))
        return pl_fail(PL_ERR_ARG, "GEMV: bad split into %u parts of %u rows", parts,
                       p->rows_per_part);
    if (p->q8x && p->type != PL_GW_Q4_0 && p->type != PL_GW_Q8_0)
        return pl_fail(PL_ERR_ARG, "GEMV: quantised activations need Q4_0 or Q8_0 weights");
    if (p->mode == PL_GEMV_GATE_UP && p->bias)
        return pl_fail(PL_ERR_ARG, "GEMV: gate/up takes no bias");
    if ((p->norm_out && !p->norm) || ((p->gate_out || p->up_out) && p->mode != PL_GEMV_GATE_UP))
        return pl_fail(PL_ERR_ARG, "GEMV: side output without its fusion");
    uint32_t last = p->split[2] ? p->split[2] : p->split[1]; /* start of the last range */
    if (p->split[0] &&
        (p->mode != PL_GEMV_STORE || p->bias || parts > 1 || p->split[0] % rw || p->split[1] % rw ||
         last % rw || p->split[0] >= p->split[1] || p->split[1] > last ||
         (p->split[2] && p->split[2] == p->split[1]) || last >= p->rows))
        return pl_fail(PL_ERR_ARG, "GEMV: bad output split %u/%u/%u of %u rows", p->split[0],
                       p->split[1], p->split[2], p->rows);
    if (!p->split[0] && (p->split[1] || p->split[2]))
        return pl_fail(PL_ERR_ARG, "GEMV: output split without its first range");
    if (p->xpre && (!p->q8x || p->norm || p->ids))
        return pl_fail(PL_ERR_ARG, "GEMV: pre-quantised x needs q8x, no norm, no experts");
    if (p->ncols > PL_GEMV_MAX_COLS ||
        (p->ncols > 1 && (!p->xpre || p->ids || p->sg_rows || p->unroll > 1)))
        return pl_fail(PL_ERR_ARG,
                       "GEMV: %u columns a workgroup (pre-quantised x, no experts, no subgroup "
                       "rows, unroll 1; at most %d)",
                       p->ncols, PL_GEMV_MAX_COLS);
    return PL_OK;
}

static void decl_weights(pl_wtext *t, const pl_gemv_params *p, wfmt f, int *binding) {
    for (unsigned m = 0; m < n_mats(p); m++) {
        for (unsigned q = 0; q < n_parts(p); q++) {
            pl_wtext_add(t, "@group(0) @binding(%d) var<storage, read> q%c%u: array<%s>;\n",
                         (*binding)++, 'A' + m, q, f.qtype);
            if (f.scaled)
                pl_wtext_add(t, "@group(0) @binding(%d) var<storage, read> s%c%u: array<u32>;\n",
                             (*binding)++, 'A' + m, q);
        }
    }
}

/* Dequantisation without integer-to-float conversions (a slow instruction on GPUs): the
 * bits 0x4B000000 | n are the float 2^23 + n exactly, so subtracting a constant gives the
 * small integer. Q4_0: n - 8 for a nibble; Q8_0: the byte flipped to 0..255 (^ 0x80), so
 * 2^23 + 128 + s - that constant is the signed value s. */
static const char *helpers =
    "fn lo4(v: u32) -> vec4<f32> {\n"
    "  let m = (vec4<u32>(v, v >> 8u, v >> 16u, v >> 24u) & vec4<u32>(15u)) | "
    "vec4<u32>(0x4B000000u);\n"
    "  return bitcast<vec4<f32>>(m) - vec4<f32>(8388616.0);\n"
    "}\n"
    "fn hi4(v: u32) -> vec4<f32> {\n"
    "  let m = (vec4<u32>(v >> 4u, v >> 12u, v >> 20u, v >> 28u) & vec4<u32>(15u)) | "
    "vec4<u32>(0x4B000000u);\n"
    "  return bitcast<vec4<f32>>(m) - vec4<f32>(8388616.0);\n"
    "}\n"
    "fn i8x4(v: u32) -> vec4<f32> {\n"
    "  let m = ((vec4<u32>(v, v >> 8u, v >> 16u, v >> 24u) & vec4<u32>(255u)) ^ vec4<u32>(128u))\n"
    "          | vec4<u32>(0x4B000000u);\n"
    "  return bitcast<vec4<f32>>(m) - vec4<f32>(8388736.0);\n"
    "}\n"
    "fn h4(a: u32, b: u32) -> vec4<f32> {\n"
    "  return vec4<f32>(unpack2x16float(a), unpack2x16float(b));\n"
    "}\n"
    "fn sq(a: f32, b: f32) -> f32 { return a * b; }\n";

/* Round half away from zero (C's roundf; WGSL's round() goes to even), as packed int8:
 * the activation quantiser of q8x. v - trunc(v) is exact, so the tie test is too. */
const char *const pl_wgsl_q8_helpers =
    /* f32 -> the nearest f16 value (ties to even) as f32, in integer steps: pack2x16float's
     * rounding is the driver's choice (lavapipe truncates), the CPU's quantiser rounds */
    "fn f16r(v: f32) -> f32 {\n"
    "  if (v < 6.103515625e-05) { return round(v * 16777216.0) * 5.9604644775390625e-08; }\n"
    "  let b = bitcast<u32>(v);\n"
    "  let r = (b + 0xFFFu + ((b >> 13u) & 1u)) & 0xFFFFE000u;\n"
    "  return bitcast<f32>(select(r, 0x7F800000u, r > 0x477FE000u));\n"
    "}\n"
    /* a / b rounded as the CPU's division is: a GPU's may be an ulp or two off, which can
     * move a block scale across an f16 rounding step or a quant across .5. One fma step on
     * the residual brings it within an ulp; then of it and its two neighbours the one with
     * the smallest residual a - q * b is the correctly rounded quotient (a quotient of two
     * floats is never exactly halfway between two floats). The residual is computed exactly
     * without trusting fma to be fused (lavapipe's is not always: a quant came out one
     * higher than the CPU's): q * b = p + e exactly by Dekker's product of Veltkamp halves
     * (each partial product exact, so contraction cannot change it), a - p exact (p is
     * within a factor 2 of a), one rounding of (a - p) - e, far below the candidates'
     * differences. Only the last step's inputs are normal floats here (scales of blocks). */
    "fn vhi(x: f32) -> f32 { let c = 4097.0 * x; return c - (c - x); }\n"
    "fn resid(a: f32, q: f32, b: f32) -> f32 {\n"
    "  let p = q * b;\n"
    "  let qh = vhi(q); let ql = q - qh; let bh = vhi(b); let bl = b - bh;\n"
    "  let e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl;\n"
    "  return abs((a - p) - e);\n"
    "}\n"
    "fn cdiv(a: f32, b: f32) -> f32 {\n"
    "  let q0 = a / b;\n"
    "  var q = fma(fma(-q0, b, a), 1.0 / b, q0);\n"
    "  let lo = bitcast<f32>(bitcast<u32>(q) - 1u);\n"
    "  let hi = bitcast<f32>(bitcast<u32>(q) + 1u);\n"
    "  let r = resid(a, q, b);\n"
    "  let rl = resid(a, lo, b);\n"
    "  let rh = resid(a, hi, b);\n"
    "  if (q != 0.0 && rl < r && rl <= rh) { q = lo; }\n"
    "  else if (q != 0.0 && rh < r) { q = hi; }\n"
    "  return q;\n"
    "}\n"
    "fn q8r(v: vec4<f32>) -> u32 {\n"
    "  let t = trunc(v);\n"
    "  return pack4xI8(vec4<i32>(select(round(v), t + sign(v), abs(v - t) == vec4<f32>(0.5))));\n"
    "}\n";

void pl_wgsl_quantize_block(pl_wtext *t, int sum) {
    pl_wtext_add(t, "      let am = max(max(max(abs(x0), abs(x1)), max(abs(x2), abs(x3))),\n"
                    "                   max(max(abs(x4), abs(x5)), max(abs(x6), abs(x7))));\n"
                    "      let dq = cdiv(max(max(am.x, am.y), max(am.z, am.w)), 127.0);\n"
                    "      let iq = select(0.0, cdiv(1.0, dq), dq != 0.0);\n"
                    "      let dx = f16r(dq);\n");
    for (int j = 0; j < 8; j++) pl_wtext_add(t, "      let p%d = q8r(x%d * iq);\n", j, j);
    if (sum)
        pl_wtext_add(t,
                     "      let ps = dot4I8Packed(p0, 0x01010101u) + dot4I8Packed(p1, 0x01010101u)"
                     " + dot4I8Packed(p2, 0x01010101u) + dot4I8Packed(p3, 0x01010101u)\n"
                     "        + dot4I8Packed(p4, 0x01010101u) + dot4I8Packed(p5, 0x01010101u)"
                     " + dot4I8Packed(p6, 0x01010101u) + dot4I8Packed(p7, 0x01010101u);\n");
}

/* acc += the dot of block `idx` of matrix (m, part) with the x values of this block. */
static void block_dot(pl_wtext *t, const pl_gemv_params *p, wfmt f, char m, unsigned part,
                      const char *idx, const char *acc, const char *pre) {
    if (p->q8x) { /* integer dots: the Q4_0 nibbles (minus 8 x the quants' sum) or Q8_0 bytes */
        char w[96], v[96], sc[96]; /* the block's words and scale: loads, or the preloaded */
        if (pre) {                 /* issued up front (preload): lw, lv, ls + pre */
            snprintf(w, sizeof w, "lw%s", pre), snprintf(v, sizeof v, "lv%s", pre);
            snprintf(sc, sizeof sc, "ls%s", pre);
        } else {
            snprintf(w, sizeof w, p->type == PL_GW_Q4_0 ? "q%c%u[%s]" : "q%c%u[2u * %s]", m, part,
                     idx);
            snprintf(v, sizeof v, "q%c%u[2u * %s + 1u]", m, part, idx);
            snprintf(sc, sizeof sc, "s%c%u[%s >> 1u]", m, part, idx);
        }
        if (p->type == PL_GW_Q4_0)
            pl_wtext_add(t,
                         "      { let w0 = %s;\n"
                         "        let w = w0 & vec4<u32>(0x0F0F0F0Fu); let v = (w0 >> "
                         "vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);\n",
                         w);
        else
            pl_wtext_add(t, "      { let w = %s; let v = %s;\n", w, v);
        pl_wtext_add(
            t,
            "        let d = unpack2x16float(%s)[%s & 1u];\n"
            "        let si = dot4I8Packed(w.x, p0) + dot4I8Packed(w.y, p1) + dot4I8Packed(w.z, p2)"
            " + dot4I8Packed(w.w, p3)\n"
            "          + dot4I8Packed(v.x, p4) + dot4I8Packed(v.y, p5) + dot4I8Packed(v.z, p6)"
            " + dot4I8Packed(v.w, p7)%s;\n"
            "        %s += f32(si) * d * dx; }\n",
            sc, idx, p->type == PL_GW_Q4_0 ? " - 8 * ps" : "", acc);
        return;
    }
    switch (p->type) {
    case PL_GW_Q4_0:
        pl_wtext_add(t,
                     "      { let w = q%c%u[%s];\n"
                     "        let d = unpack2x16float(s%c%u[%s >> 1u])[%s & 1u];\n"
                     "        %s += d * (dot(lo4(w.x), x0) + dot(lo4(w.y), x1) + dot(lo4(w.z), x2)"
                     " + dot(lo4(w.w), x3)\n"
                     "          + dot(hi4(w.x), x4) + dot(hi4(w.y), x5) + dot(hi4(w.z), x6)"
                     " + dot(hi4(w.w), x7)); }\n",
                     m, part, idx, m, part, idx, idx, acc);
        break;
    case PL_GW_Q8_0:
        pl_wtext_add(
            t,
            "      { let w = q%c%u[2u * %s]; let v = q%c%u[2u * %s + 1u];\n"
            "        let d = unpack2x16float(s%c%u[%s >> 1u])[%s & 1u];\n"
            "        %s += d * (dot(i8x4(w.x), x0) + dot(i8x4(w.y), x1) + dot(i8x4(w.z), x2)"
            " + dot(i8x4(w.w), x3)\n"
            "          + dot(i8x4(v.x), x4) + dot(i8x4(v.y), x5) + dot(i8x4(v.z), x6)"
            " + dot(i8x4(v.w), x7)); }\n",
            m, part, idx, m, part, idx, m, part, idx, idx, acc);
        break;
    case PL_GW_F16:
        if (f.xv)
            pl_wtext_add(t,
                         "      { let w = q%c%u[%s];\n"
                         "        %s += dot(h4(w.x, w.y), x0) + dot(h4(w.z, w.w), x1); }\n",
                         m, part, idx, acc);
        else
            pl_wtext_add(t, "      %s += unpack2x16float(q%c%u[(%s) >> 1u])[(%s) & 1u] * x0;\n",
                         acc, m, part, idx, idx);
        break;
    case PL_GW_F32:
        if (f.xv)
            pl_wtext_add(t, "      %s += dot(q%c%u[%s], x0);\n", acc, m, part, idx);
        else
            pl_wtext_add(t, "      %s += q%c%u[%s] * x0;\n", acc, m, part, idx);
        break;
    }
}

void pl_wgsl_gemv_store(pl_wtext *t, const pl_gemv_params *p, const char *v0, const char *v1) {
    switch (p->mode) {
    case PL_GEMV_STORE:
        if (p->split[0]) { /* q, k, v (, u): each range to its own buffer */
            unsigned a = p->split[0], b = p->split[1], c = p->split[2] ? p->split[2] : p->rows;
            pl_wtext_add(t,
                         "      if (row < %uu) { y[col * %uu + row] = %s; }\n"
                         "      else if (row < %uu) { y1[col * %uu + row - %uu] = %s; }\n",
                         a, a, v0, b, b - a, a, v0);
            if (p->split[2])
                pl_wtext_add(t,
                             "      else if (row < %uu) { y2[col * %uu + row - %uu] = %s; }\n"
                             "      else { y3[col * %uu + row - %uu] = %s; }\n",
                             c, c - b, b, v0, p->rows - c, c, v0);
            else
                pl_wtext_add(t, "      else { y2[col * %uu + row - %uu] = %s; }\n", c - b, b, v0);
            break;
        }
        pl_wtext_add(t, "      y[yo + row] = %s%s;\n", v0, p->bias ? " + bias[row]" : "");
        break;
    case PL_GEMV_ACCUM:
        pl_wtext_add(t, "      y[yo + row] = y[yo + row] + %s%s;\n", v0,
                     p->bias ? " + bias[row]" : "");
        break;
    case PL_GEMV_GATE_UP:
        pl_wtext_add(t, "      y[yo + row] = %s / (1.0 + exp(-%s)) * %s;\n", v0, v0, v1);
        if (p->gate_out) pl_wtext_add(t, "      go[yo + row] = %s;\n", v0);
        if (p->up_out) pl_wtext_add(t, "      uo[yo + row] = %s;\n", v1);
        break;
    }
}

/* The block loop over one part: load x for the block (normalised if fused), then one block
 * of each of the R rows (of both matrices for gate/up). */
static void part_loop(pl_wtext *t, const pl_gemv_params *p, wfmt f, unsigned part) {
    unsigned R = p->rows_per_wg, U = p->unroll ? p->unroll : 1;
    const char *nb = f.elems == 1 ? "K" : "NB";
    const char *start = p->sg_rows ? "sid" : "lid", *step = p->sg_rows ? "SG" : "T";
    /* the sweepers: the workgroup's threads, or one subgroup's lanes; with U > 1 each turn
     * takes blocks b, b + step, ...: those past the row are clamped to its last block and
     * weighted 0, so every load is unconditional and can be issued up front */
    pl_wtext_add(t, "    for (var b0 = %s; b0 < %s; b0 += %uu * %s) {\n", start, nb, U, step);
    for (unsigned u = 0; u < U; u++) {
        pl_wtext_add(t, "      {\n");
        if (U == 1) {
            pl_wtext_add(t, "      let b = b0;\n");
        } else {
            pl_wtext_add(t, "      let b = min(b0 + %uu * %s, %s - 1u);\n", u, step, nb);
            pl_wtext_add(t, "      let live = select(0.0, 1.0, b0 + %uu * %s < %s);\n", u, step,
                         nb);
        }
        /* preload: every row's weight block and scale is loaded before the x block is
         * read and quantised, so they are all in flight at once */
        int pre = p->q8x && (p->preload || n_cols(p) > 1) && U == 1;
        for (unsigned m = 0; pre && m < n_mats(p); m++) {
            for (unsigned r = 0; r < R; r++) {
                char idx[64];
                snprintf(idx, sizeof idx, "(r%u * %s + b)", r, nb);
                if (p->type == PL_GW_Q4_0)
                    pl_wtext_add(t, "      let lw%u_%u = q%c%u[%s];\n", m, r, 'A' + m, part, idx);
                else
                    pl_wtext_add(
                        t,
                        "      let lw%u_%u = q%c%u[2u * %s]; let lv%u_%u = q%c%u[2u * %s + 1u];\n",
                        m, r, 'A' + m, part, idx, m, r, 'A' + m, part, idx);
                pl_wtext_add(t, "      let ls%u_%u = s%c%u[%s >> 1u];\n", m, r, 'A' + m, part, idx);
            }
        }
        unsigned nx = p->xpre ? 0 : f.xv ? f.xv : 1;
        /* several columns: the weights above, then each column's x block and dots in a
         * scope of its own, its x offset (and 1/rms) under the one-column kernel's names */
        for (unsigned c = 0; c < n_cols(p); c++) {
            if (n_cols(p) > 1) pl_wtext_add(t, "      {\n      let xo = xo_%u;\n", c);
            if (p->xpre) /* the pre-pass's quants and scale of this block (block_dot's p0..p7, dx)
                          */
                pl_wtext_add(t,
                             "      let xb = xo + b;\n"
                             "      let qa = xq[2u * xb]; let qb = xq[2u * xb + 1u];\n"
                             "      let p0 = qa.x; let p1 = qa.y; let p2 = qa.z; let p3 = qa.w;\n"
                             "      let p4 = qb.x; let p5 = qb.y; let p6 = qb.z; let p7 = qb.w;\n"
                             "      let dx = xd[xb];\n%s",
                             p->type == PL_GW_Q4_0
                                 ? "      let ps = dot4I8Packed(p0, 0x01010101u) + "
                                   "dot4I8Packed(p1, 0x01010101u) + dot4I8Packed(p2, "
                                   "0x01010101u) + dot4I8Packed(p3, 0x01010101u)\n"
                                   "        + dot4I8Packed(p4, 0x01010101u) + "
                                   "dot4I8Packed(p5, 0x01010101u) + dot4I8Packed(p6, "
                                   "0x01010101u) + dot4I8Packed(p7, 0x01010101u);\n"
                                 : "");
            for (unsigned j = 0; j < nx; j++) {
                char at[64], wat[48]; /* x index (vector xo), norm weight index */
                if (f.xv)
                    snprintf(wat, sizeof wat, "b * %uu + %uu", f.xv, j);
                else
                    snprintf(wat, sizeof wat, "b");
                snprintf(at, sizeof at, "xo + %s", wat);
                /* fused RMSNorm: the dot uses x * w, its square sum comes from the same loads
                 * and the 1/rms factor multiplies the finished dot (no pass over x before) */
                if (p->norm && p->q8x) /* the normalised x, as the CPU's rms_norm makes it */
                    pl_wtext_add(t, "      let x%u = (x[%s] * inv) * nw[%s];\n", j, at, wat);
                else if (p->norm)
                    pl_wtext_add(
                        t,
                        "      let u%u = x[%s];\n      ss += %s%s(u%u, u%u);\n      let x%u = "
                        "u%u * nw[%s];\n",
                        j, at, U > 1 ? "live * " : "", f.xv ? "dot" : "sq", j, j, j, j, wat);
                else
                    pl_wtext_add(t, "      let x%u = x[%s];\n", j, at);
            }
            if (p->q8x && !p->xpre) pl_wgsl_quantize_block(t, p->type == PL_GW_Q4_0);
            for (unsigned m = 0; m < n_mats(p); m++) {
                for (unsigned r = 0; r < R; r++) {
                    char idx[64], acc[32];
                    snprintf(idx, sizeof idx, "(r%u * %s + b)", r, nb);
                    if (n_cols(p) > 1)
                        snprintf(acc, sizeof acc, "a%u_%u", m * R + r, c);
                    else
                        snprintf(acc, sizeof acc, U > 1 ? "c%u_%u" : "a%u", m * R + r, u);
                    if (U > 1) pl_wtext_add(t, "      var %s = 0.0;\n", acc);
                    char pn[24]; /* two 10-digit unsigned values and the separator */
                    snprintf(pn, sizeof pn, "%u_%u", m, r);
                    block_dot(t, p, f, (char)('A' + m), part, idx, acc, pre ? pn : NULL);
                    if (U > 1) pl_wtext_add(t, "      a%u += live * %s;\n", m * R + r, acc);
                }
            }
            if (n_cols(p) > 1) pl_wtext_add(t, "      }\n");
        }
        pl_wtext_add(t, "      }\n");
    }
    pl_wtext_add(t, "    }\n");
}

/* `let inv` = 1/rms of x from the square sum `sum` (a WGSL expression). */
static void emit_inv(pl_wtext *t, const pl_gemv_params *p, const char *sum) {
    pl_wtext_add(t, "  let inv = 1.0 / sqrt(%s / f32(K) + ", sum);
    pl_wtext_f32(t, p->eps);
    pl_wtext_add(t, ");\n");
}

/* The first row group of each vector also stores the normalised x (norm_out), its threads
 * (or one subgroup's lanes) walking x from `start` by `step`. */
static void emit_norm_out(pl_wtext *t, const char *start, const char *step, unsigned xn_len,
                          const char *live) {
    pl_wtext_add(
        t,
        "  if (row0 == 0u%s) {\n"
        "    for (var j = %s; j < %uu; j += %s) { xn[xo + j] = (x[xo + j] * inv) * nw[j]; }\n"
        "  }\n",
        live ? live : "", start, xn_len, step);
}

/* The reduction of the accumulators over the workgroup (not subgroup rows) and the stores
 * of its rows. One column: a0, a1, ... Several (NC > 1): a0_0, a1_0, ... of column 0, then
 * column 1's, all reduced at once (copy c * nacc + a of the workgroup memory: nothing
 * lives across a barrier but the sums, which lavapipe's LLVM would otherwise spill around
 * every barrier of a column-by-column reduction), then each column's stores in a scope of
 * their own, under the one-column kernel's names and guarded by the column's existence. */
static void emit_tail(pl_wtext *t, const pl_gemv_params *p, unsigned xn_len) {
    unsigned T = p->threads, R = p->rows_per_wg, M = n_mats(p), nacc = M * R, NC = n_cols(p);
    int post = p->norm && !p->q8x;
    char acc[24];
#define ACC(a, c)                                                                                  \
    (NC > 1 ? snprintf(acc, sizeof acc, "a%u_%u", a, c) : snprintf(acc, sizeof acc, "a%u", a), acc)
    /* the square sum of x rides along as one more accumulator (copy nacc; one column) */
    unsigned ncopy = nacc * NC + (post ? 1 : 0);
    if (p->subgroups) {
        for (unsigned c = 0; c < NC; c++)
            for (unsigned a = 0; a < nacc; a++)
                pl_wtext_add(t, "  let s%u = subgroupAdd(%s);\n", c * nacc + a, ACC(a, c));
        if (post) pl_wtext_add(t, "  let s%u = subgroupAdd(ss);\n", nacc);
        pl_wtext_add(t, "  let nsg = (T + ssz - 1u) / ssz;\n  if (sid == 0u) {\n");
        for (unsigned a = 0; a < ncopy; a++)
            pl_wtext_add(t, "    red[%uu + lid / ssz] = s%u;\n", a * T, a);
        pl_wtext_add(t, "  }\n  workgroupBarrier();\n");
        if (post)
            pl_wtext_add(t,
                         "  var sst = 0.0;\n"
                         "  for (var i = 0u; i < nsg; i++) { sst += red[%uu + i]; }\n",
                         nacc * T);
        /* every thread sums for row min(lid, R-1); threads lid < R store */
        pl_wtext_add(t, "  let lr = min(lid, R - 1u);\n");
    } else {
        for (unsigned c = 0; c < NC; c++)
            for (unsigned a = 0; a < nacc; a++)
                pl_wtext_add(t, "  red[%uu + lid] = %s;\n", (c * nacc + a) * T, ACC(a, c));
        if (post) pl_wtext_add(t, "  red[%uu + lid] = ss;\n", nacc * T);
        pl_wtext_reduce(t, T, ncopy, 0);
        if (post) pl_wtext_add(t, "  let sst = red[%uu];\n", nacc * T);
    }
#undef ACC
    for (unsigned c = 0; c < NC; c++) {
        char live[48] = "";
        if (NC > 1) {
            pl_wtext_add(t, "  {\n  let col = col_%u; let yo = yo_%u; let xo = xo_%u;\n", c, c, c);
            snprintf(live, sizeof live, " && cg * NC + %uu < args.a0", c);
        }
        if (p->subgroups)
            for (unsigned m = 0; m < M; m++)
                pl_wtext_add(
                    t,
                    "  var tt%u = 0.0;\n"
                    "  for (var i = 0u; i < nsg; i++) { tt%u += red[(%uu + lr) * T + i]; }\n",
                    m, m, c * nacc + m * R);
        if (post) emit_inv(t, p, "sst"); /* one column */
        if (p->norm_out) emit_norm_out(t, "lid", "T", xn_len, NC > 1 ? live : NULL);
        pl_wtext_add(t, "  if (lid < R%s) {\n", live);
        if (!p->subgroups)
            for (unsigned m = 0; m < M; m++)
                pl_wtext_add(t, "    let t%u = red[(%uu + lid) * T];\n", m, c * nacc + m * R);
        else
            for (unsigned m = 0; m < M; m++) pl_wtext_add(t, "    let t%u = tt%u;\n", m, m);
        pl_wtext_add(t, "    let row = row0 + lid;\n    if (row < N) {\n");
        pl_wgsl_gemv_store(t, p, post ? "(inv * t0)" : "t0", post ? "(inv * t1)" : "t1");
        pl_wtext_add(t, "    }\n  }\n");
        if (NC > 1) pl_wtext_add(t, "  }\n");
    }
}

pl_status pl_wgsl_gemv(const pl_gemv_params *p, char **out) {
    *out = NULL;
    if (check(p) != PL_OK) return PL_ERR_ARG;
    wfmt f = fmt_of(p->type, p->cols);
    unsigned T = p->threads, R = p->rows_per_wg, M = n_mats(p), parts = n_parts(p);
    unsigned nacc = M * R;
    int post = p->norm && !p->q8x; /* 1/rms from the sweep's square sum, applied after */
    unsigned sg = p->sg_rows, xn_len = f.xv ? p->cols / 4 : p->cols;
    pl_wtext t = {0};
    if (p->subgroups || sg) pl_wtext_add(&t, "enable subgroups;\n");
    pl_wtext_add(&t,
                 "const N = %uu;\nconst K = %uu;\nconst NB = %uu;\nconst T = %uu;\nconst R = %uu;\n"
                 "const SG = %uu;\nconst RW = %uu;\n",
                 p->rows, p->cols, p->cols / f.elems, T, R, sg ? sg : 1, pl_gemv_rows_per_group(p));
    if (p->ids) pl_wtext_add(&t, "const NU = %uu;\n", p->n_used);
    const char *xt = f.xv ? "vec4<f32>" : "f32";
    if (p->xpre)
        pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read> xq: array<vec4<u32>>;\n");
    else
        pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read> x: array<%s>;\n", xt);
    pl_wtext_add(&t, "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n");
    int binding = 2;
    decl_weights(&t, p, f, &binding);
    if (p->xpre)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> xd: array<f32>;\n", binding++);
    if (p->norm)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> nw: array<%s>;\n", binding++,
                     xt);
    if (p->norm_out)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> xn: array<%s>;\n",
                     binding++, xt);
    if (p->bias)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> bias: array<f32>;\n",
                     binding++);
    if (p->gate_out)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> go: array<f32>;\n",
                     binding++);
    if (p->up_out)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> uo: array<f32>;\n",
                     binding++);
    if (p->split[0]) {
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> y1: array<f32>;\n",
                     binding++);
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> y2: array<f32>;\n",
                     binding++);
        if (p->split[2])
            pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> y3: array<f32>;\n",
                         binding++);
    }
    if (p->ids)
        pl_wtext_add(&t,
                     "@group(0) @binding(%d) var<storage, read> eids: array<i32>;\n"
                     "var<workgroup> ev: i32;\n",
                     binding++);
    pl_wtext_args(&t, binding++);
    if (!sg) {
        unsigned copies = nacc * n_cols(p) + (post ? 1 : 0);
        pl_wtext_add(&t, "var<workgroup> red: array<f32, %u>;\n", copies * T);
        pl_wtext_reduce_decl(&t, T, copies);
    }
    pl_wtext_add(&t, "%s%s", helpers, p->q8x ? pl_wgsl_q8_helpers : "");
    pl_wtext_add(&t, "@compute @workgroup_size(%u)\nfn main(" PL_WGSL_MAIN_ARGS "%s) {\n", T,
                 p->subgroups || sg ? ", @builtin(subgroup_invocation_id) sid: u32, "
                                      "@builtin(subgroup_size) ssz: u32"
                                    : "");
    /* workgroup g: vector g % n of x (n = args.a0 columns), row group rg = g / n (rows
     * rg * R ..): the n workgroups of one row group are neighbours, so the columns of a
     * verify pass or a batched step read each weight block at about the same time (from
     * L2 after the first) instead of streaming the matrix once per column. Not the
     * experts' (ids): their columns read different experts' rows, and interleaving those
     * streams took the MoE's decode from 234 to 197 tok/s on the H200; there column
     * g / NGR, row group g % NGR. */
    char col[24] = "g % args.a0", rg[24] = "g / args.a0";
    if (p->ids) {
        snprintf(col, sizeof col, "g / %uu", pl_gemv_groups(p));
        snprintf(rg, sizeof rg, "g %% %uu", pl_gemv_groups(p));
    }
    unsigned NC = n_cols(p), xstride = p->xpre ? p->cols / 32 : xn_len; /* xpre: in blocks */
    if (NC > 1) { /* column group cg: columns cg * NC .. (the last clamped), the column
                   * groups of one row group neighbours as the columns are above */
        pl_wtext_add(&t,
                     "  const NC = %uu;\n"
                     "  let g = wid.x + wid.y * nwg.x;\n"
                     "  let ncg = (args.a0 + NC - 1u) / NC;\n"
                     "  if (g >= %uu * ncg) { return; }\n"
                     "  let cg = g %% ncg;\n"
                     "  let rg = g / ncg;\n"
                     "  let row0 = rg * RW;\n",
                     NC, pl_gemv_groups(p));
        for (unsigned c = 0; c < NC; c++)
            pl_wtext_add(&t,
                         "  let col_%u = min(cg * NC + %uu, args.a0 - 1u);\n"
                         "  let xo_%u = col_%u * %uu;\n  let yo_%u = col_%u * N;\n",
                         c, c, c, c, xstride, c, c);
        for (unsigned a = 0; a < nacc; a++)
            for (unsigned c = 0; c < NC; c++) pl_wtext_add(&t, "  var a%u_%u = 0.0;\n", a, c);
    } else {
        pl_wtext_add(&t,
                     "  let g = wid.x + wid.y * nwg.x;\n"
                     "  if (g >= %uu * args.a0) { return; }\n"
                     "  let col = %s;\n"
                     "  let rg = %s;\n",
                     pl_gemv_groups(p), col, rg);
        pl_wtext_add(&t,
                     "  let row0 = rg * RW%s;\n"
                     "  let xo = col%s * %uu;\n"
                     "  let yo = col * N;\n",
                     sg ? " + (lid / SG) * R" : "", p->ids && p->x_shared ? " / NU" : "", xstride);
        if (p->ids) /* the slot's expert, uniform over the workgroup; a bad id: a zero row */
            pl_wtext_add(&t,
                         "  if (lid == 0u) { ev = eids[col]; }\n"
                         "  let e = workgroupUniformLoad(&ev);\n"
                         "  if (e < 0 || e >= %di) {\n"
                         "    let gr0 = rg * RW;\n"
                         "    for (var r = lid; r < RW; r += T) {\n"
                         "      if (gr0 + r < N) { y[yo + gr0 + r] = 0.0;%s%s }\n"
                         "    }\n"
                         "    return;\n"
                         "  }\n"
                         "  let erow = u32(e) * N;\n",
                         (int)p->n_exp, p->gate_out ? " go[yo + gr0 + r] = 0.0;" : "",
                         p->up_out ? " uo[yo + gr0 + r] = 0.0;" : "");
        if (post) pl_wtext_add(&t, "  var ss = 0.0;\n");
        for (unsigned a = 0; a < nacc; a++) pl_wtext_add(&t, "  var a%u = 0.0;\n", a);
    }
    /* q8x with the norm: quantising must see the normalised x (the f16 rounding of a block
     * scale does not commute with 1/rms), so 1/rms comes first, from a pass over x (in
     * L2: every workgroup reads the same vector) */
    if (p->q8x && p->norm) {
        pl_wtext_add(&t,
                     "  var sq0 = 0.0;\n  for (var j = %s; j < %uu; j += %s) { let v = x[xo + j]; "
                     "sq0 += dot(v, v); }\n",
                     sg ? "sid" : "lid", xn_len, sg ? "SG" : "T");
        if (sg) {
            emit_inv(&t, p, "subgroupAdd(sq0)");
        } else {
            pl_wtext_add(&t, "  red[lid] = sq0;\n");
            pl_wtext_reduce(&t, T, 1, 0);
            emit_inv(&t, p, "red[0]");
            pl_wtext_add(&t, "  workgroupBarrier();\n");
        }
    }
    /* rows past N (last workgroup) read row N-1 and are not written */
    const char *erow = p->ids ? "erow + " : "";
    if (parts > 1)
        pl_wtext_add(&t, "  let part = (%srow0) / %uu;\n  let base = part * %uu;\n", erow,
                     p->rows_per_part, p->rows_per_part);
    else
        pl_wtext_add(&t, "  let base = 0u;\n");
    for (unsigned r = 0; r < R; r++)
        pl_wtext_add(&t, "  let r%u = %smin(row0 + %uu, N - 1u) - base;\n", r, erow, r);
    for (unsigned q = 0; q < parts; q++) {
        if (parts > 1)
            pl_wtext_add(&t, "  %sif (part == %uu) {\n", q ? "else " : "", q);
        else
            pl_wtext_add(&t, "  {\n");
        part_loop(&t, p, f, q);
        pl_wtext_add(&t, "  }\n");
    }
    /* reduce the accumulators over the workgroup (or the subgroup) */
    if (sg) {
        for (unsigned a = 0; a < nacc; a++)
            pl_wtext_add(&t, "  let s%u = subgroupAdd(a%u);\n", a, a);
        if (post) emit_inv(&t, p, "subgroupAdd(ss)");
        if (p->norm_out) emit_norm_out(&t, "sid", "SG", xn_len, NULL);
        pl_wtext_add(&t, "  if (sid == 0u) {\n");
        for (unsigned r = 0; r < R; r++) {
            char t0[24], t1[24];
            snprintf(t0, sizeof t0, post ? "(inv * s%u)" : "s%u", r);
            snprintf(t1, sizeof t1, post ? "(inv * s%u)" : "s%u", R + r);
            pl_wtext_add(&t, "    if (row0 + %uu < N) {\n      let row = row0 + %uu;\n", r, r);
            pl_wgsl_gemv_store(&t, p, t0, t1);
            pl_wtext_add(&t, "    }\n");
        }
        pl_wtext_add(&t, "  }\n}\n");
        return pl_wtext_finish(&t, out);
    }
    emit_tail(&t, p, xn_len);
    pl_wtext_add(&t, "}\n");
    return pl_wtext_finish(&t, out);
}

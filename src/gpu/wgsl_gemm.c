/* wgsl_gemm.c - prefill's tiled GEMM over pre-quantised activations (q8x, Q4_0/Q8_0).
 *
 * Two kernels per matmul of a batch of n columns:
 * - the pre-pass quantises each column of x (RMS-normalised first if the matmul fuses the
 *   norm, exactly as the q8x GEMV's prologue does) to Q8_0 blocks in a scratch buffer, once
 *   per input: q, k and v (one fused matmul) or gate and up share it;
 * - the GEMM: a workgroup owns a tile of TM rows x TN columns, each thread an RM x RN
 *   register tile (rows ty + i * TY, columns tx + j * TX). Per step of BK blocks of K the
 *   workgroup stages the weight blocks of its rows (Q4_0 packed as in memory) and the
 *   activation blocks of its columns in workgroup memory, then each thread takes every
 *   (row, column) pair of its tile through the step's blocks in order: 8 dot4I8Packed per
 *   block (Q4_0 nibbles turned into signed bytes first), the sum scaled in f32 exactly as
 *   the GEMV does (f32(sum) * weight scale * activation scale) and added to the pair's
 *   accumulator. Blocks past K are zeros, so each output is the sum over blocks
 *   0, 1, ..., NB - 1 in that order whatever the tile shape, the batch size or the column's
 *   place in it: a column's bits do not depend on the batch (the fixed-order property the
 *   tests check). It is not the GEMV's order (that one is per-thread slices and a tree), so
 *   prefill is within tolerance of decode, not bit-exact. Versions 8-10 stage the same
 *   blocks through two buffers (the next step's loads in flight during the step's
 *   products, emit_db_loop); 5-7 run the products on subgroup matrices. */
#include <stdio.h>
#include <string.h>

#include "wgsl_gen.h"
#include "wgsl_text.h"

uint32_t pl_gemm_threads(const pl_gemm_params *p) {
    return p->rm && p->rn ? (p->tm / p->rm) * (p->tn / p->rn) : 0;
}

static unsigned mats(const pl_gemm_params *p) {
    return p->mode == PL_GEMV_GATE_UP ? 2 : 1;
}
static unsigned wvecs(const pl_gemm_params *p) { /* vec4<u32> per weight block in memory */
    return p->type == PL_GW_Q4_0 ? 1 : 2;
}
/* vec4<u32> per weight block in workgroup memory: v2, v4, v8 and v10 store Q4_0 unpacked
 * to bytes */
static unsigned svecs(const pl_gemm_params *p) {
    unsigned v = p->version;
    return v == 2 || v == 4 || v == 8 || v == 10 ? 2 : wvecs(p);
}
/* v3, v4 and v8-10 turn the integer sums into f32 without a conversion instruction */
static int magic(const pl_gemm_params *p) {
    return p->version == 3 || p->version == 4 || p->version >= 8;
}
/* v5-7: subgroup matrices; v6 with i8 operands; v7 with operands scaled in f16 */
static int smx(const pl_gemm_params *p) {
    return p->version >= 5 && p->version <= 7;
}
/* v8 (v4's staging), v9 (v3's) and v10 (v8 with warps of 8 columns x 4 rows): two staging
 * buffers, the next step's share of each thread loaded into registers before the step's
 * products and stored after them */
static int dbuf(const pl_gemm_params *p) {
    return p->version >= 8;
}
/* The four staged pieces of a step: weight vectors, weight scales, activation vectors
 * (two a block), activation scales; elements per step and per thread (v8/v9's registers). */
enum { PIECE_W, PIECE_S, PIECE_A, PIECE_D, PIECES };
static unsigned piece_count(const pl_gemm_params *p, int k) {
    return k == PIECE_W   ? mats(p) * p->tm * p->bk * wvecs(p)
           : k == PIECE_S ? mats(p) * p->tm * p->bk
           : k == PIECE_A ? p->tn * p->bk * 2
                          : p->tn * p->bk;
}
static unsigned piece_regs(const pl_gemm_params *p, int k) {
    unsigned T = pl_gemm_threads(p);
    return T ? (piece_count(p, k) + T - 1) / T : 0;
}
/* bytes per staged operand element: i8 (v6), f16, or f32 (the emulation) */
static unsigned smx_esize(const pl_gemm_params *p) {
    return p->version == 6 ? 1 : p->mock ? 4 : 2;
}
/* Q4_0 nibbles 0..15 -> signed bytes -8..7, no carries (low nibbles: elements 0..15) */
static const char unpack_lo[] = "((%s & vec4<u32>(0x0F0F0F0Fu)) + vec4<u32>(0x78787878u)) ^ "
                                "vec4<u32>(0x80808080u)";
static const char unpack_hi[] = "(((%s >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu)) + "
                                "vec4<u32>(0x78787878u)) ^ vec4<u32>(0x80808080u)";

uint32_t pl_gemm_wg_bytes(const pl_gemm_params *p) {
    if (smx(p)) /* operands, the products (tm x tn f32), the scales (not v7) */
        return (mats(p) * p->tm + p->tn) * p->bk * 32 * smx_esize(p) + p->tm * p->tn * 4 +
               (p->version == 7 ? 0 : (mats(p) * p->tm + p->tn) * p->bk * 4);
    return ((mats(p) * p->tm * p->bk * (svecs(p) * 16 + 4)) + p->tn * p->bk * (32 + 4)) *
           (dbuf(p) ? 2 : 1);
}

uint32_t pl_gemm_groups(const pl_gemm_params *p, uint32_t n) {
    if (!p->tm || !p->tn) return 0;
    return ((p->rows + p->tm - 1) / p->tm) * ((n + p->tn - 1) / p->tn);
}

int pl_gemm_bindings(const pl_gemm_params *p) {
    return 3 + 2 * (int)mats(p) + (p->bias != 0) + (p->gate_out != 0) + (p->up_out != 0) +
           (p->split[0] ? 2 : 0) + (p->split[2] != 0) + (p->ids != 0) + 1;
}

static pl_gemv_params store_params(const pl_gemm_params *p) {
    pl_gemv_params s;
    memset(&s, 0, sizeof s);
    s.type = p->type, s.rows = p->rows, s.cols = p->cols, s.mode = p->mode, s.bias = p->bias;
    s.gate_out = p->gate_out, s.up_out = p->up_out;
    s.split[0] = p->split[0], s.split[1] = p->split[1], s.split[2] = p->split[2];
    return s;
}

static pl_status check(const pl_gemm_params *p) {
    unsigned T = pl_gemm_threads(p);
    if (p->type != PL_GW_Q4_0 && p->type != PL_GW_Q8_0)
        return pl_fail(PL_ERR_ARG, "GEMM: Q4_0 or Q8_0 weights only");
    if (!T || p->tm % p->rm || p->tn % p->rn || T < 16 || T > 1024 || p->rm > 8 || p->rn > 8 ||
        !p->bk || p->bk > 8 || p->version < 1 || p->version > 10 ||
        (p->version == 10 && ((p->tn / p->rn) % 8 || (p->tm / p->rm) % 4)))
        return pl_fail(PL_ERR_ARG, "GEMM: bad tile %ux%u / %ux%u, %u blocks, v%u", p->tm, p->tn,
                       p->rm, p->rn, p->bk, p->version);
    for (int k = 0; dbuf(p) && k < PIECES; k++)
        if (piece_regs(p, k) > PL_GEMM_DB_REGS)
            return pl_fail(
                PL_ERR_ARG, "GEMM v%u: tile %ux%u/%ux%u stages %u elements a thread (at most %d)",
                p->version, p->tm, p->tn, p->rm, p->rn, piece_regs(p, k), PL_GEMM_DB_REGS);
    if (smx(p)) { /* whole matrix tiles, shared evenly by the subgroups, one row each */
        unsigned nsg = p->sg ? T / p->sg : 0,
                 nt = p->sm && p->sn ? (p->tm / p->sm) * (p->tn / p->sn) : 0;
        if (!p->sm || !p->sn || !p->sk || p->tm % p->sm || p->tn % p->sn || 32 % p->sk || !p->sg ||
            T % p->sg || !nsg || !nt || nt % nsg || (p->tn / p->sn) % (nt / nsg) || p->ids ||
            (p->mock && (p->sm * p->sn) % p->sg))
            return pl_fail(PL_ERR_ARG,
                           "GEMM v%u: tile %ux%u does not split into %ux%ux%u matrices over "
                           "subgroups of %u",
                           p->version, p->tm, p->tn, p->sm, p->sn, p->sk, p->sg);
    }
    if (p->mode == PL_GEMV_GATE_UP && p->bias)
        return pl_fail(PL_ERR_ARG, "GEMM: gate/up takes no bias");
    if ((p->gate_out || p->up_out) && p->mode != PL_GEMV_GATE_UP)
        return pl_fail(PL_ERR_ARG, "GEMM: side output without its fusion");
    if (p->split[0] && (p->mode != PL_GEMV_STORE || p->bias))
        return pl_fail(PL_ERR_ARG, "GEMM: a split output is a plain store");
    if (p->ids && (p->mode == PL_GEMV_ACCUM || p->bias || p->split[0]))
        return pl_fail(PL_ERR_ARG, "GEMM: the expert matmul stores or takes gate/up");
    if (p->gt &&
        (p->gt < 8 || p->gt > 1024 || (p->gt & (p->gt - 1)) || !dbuf(p) || p->ids || p->gj < 1 ||
         p->gj > 4096 || (p->cols && (p->cols / 32 + p->gt - 1) / p->gt != p->gj)))
        return pl_fail(PL_ERR_ARG,
                       "GEMM: the GEMV's order of %u threads, %u blocks a slice (8..1024 threads, "
                       "a power of two; the slices K's; versions 8-10, no experts)",
                       p->gt, p->gj);
    return PL_OK;
}

pl_status pl_gemm_check_shape(const pl_gemm_params *p) {
    if (!p->rows || !p->cols || p->cols % 32)
        return pl_fail(PL_ERR_ARG, "GEMM %ux%u: not whole blocks", p->rows, p->cols);
    if (p->split[0] && (p->split[0] >= p->split[1] || p->split[1] >= p->rows ||
                        (p->split[2] && (p->split[2] <= p->split[1] || p->split[2] >= p->rows))))
        return pl_fail(PL_ERR_ARG, "GEMM: bad output split %u/%u/%u of %u rows", p->split[0],
                       p->split[1], p->split[2], p->rows);
    if (!p->split[0] && p->split[2]) return pl_fail(PL_ERR_ARG, "GEMM: a third split alone");
    return check(p);
}

pl_gemm_params pl_gemm_kernel_key(const pl_gemm_params *p) {
    pl_gemm_params k = *p;
    k.rows = k.cols = 0;
    k.split[0] = p->split[0] != 0, k.split[1] = 0, k.split[2] = p->split[2] != 0;
    return k;
}

pl_gpu_args pl_gemm_args(const pl_gemm_params *p, uint32_t n) {
    return (pl_gpu_args){{n, p->rows, p->cols / 32, p->split[0], p->split[1], p->split[2]}};
}

/* Stage blocks b0 .. b0 + BK - 1 of the tile's rows and columns in workgroup memory:
 * wq[((m * BK + b) * SV + v) * TM + r] (SV = 2 vec4: the block's 32 signed bytes; v1 keeps
 * Q4_0 packed, SV = 1), ws[(m * BK + b) * TM + r], aq[(b * 2 + h) * TN + c],
 * ad[b * TN + c], so a warp's neighbouring columns read neighbouring words. Rows past N and
 * columns past n repeat the last one (never stored); blocks past K are zeros. */
/* The activation scales ad[b * TN + c] of the step's blocks (zeros past K); ac: the x
 * column of tile column c. */
static void emit_stage_ad(pl_wtext *t, const pl_gemm_params *p, const char *ac) {
    pl_wtext_add(t,
                 "    for (var i = lid; i < %uu; i += T) {\n"
                 "      let b = i %% BK; let c = i / BK;\n"
                 "      let gb = b0 + b; let ac = %s;\n"
                 "      var d = 0.0;\n"
                 "      if (gb < NB) { d = xd[ac * NB + gb]; }\n"
                 "      ad[b * TN + c] = d;\n"
                 "    }\n",
                 p->tn * p->bk, ac);
}

/* The weight scales ws[(m * BK + b) * TM + r] of the step's blocks (zeros past K), then
 * the activation scales unless ac is NULL. */
static void emit_stage_scales(pl_wtext *t, const pl_gemm_params *p, const char *ac) {
    unsigned M = mats(p);
    pl_wtext_add(t,
                 "    for (var i = lid; i < %uu; i += T) {\n"
                 "      let b = i %% BK; let r = (i / BK) %% TM; let m = i / (BK * TM);\n"
                 "      let gb = b0 + b; let wb = (EB + min(row0 + r, N - 1u)) * NB + gb;\n"
                 "      var d = 0.0;\n"
                 "      if (gb < NB) {\n",
                 M * p->tm * p->bk);
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(t,
                     "        %sif (m == %uu) { d = unpack2x16float(s%c[wb >> 1u])[wb & 1u]; }\n",
                     m ? "else " : "", m, 'A' + m);
    pl_wtext_add(t, "      }\n"
                    "      ws[(m * BK + b) * TM + r] = d;\n"
                    "    }\n");
    if (!ac) return;
    emit_stage_ad(t, p, ac);
}

/* The head of the loop over the step's weight vectors: w (vec4<u32> v of block b of row r
 * of matrix m; zeros past K). */
static void emit_wload(pl_wtext *t, const pl_gemm_params *p) {
    unsigned M = mats(p), WV = wvecs(p);
    pl_wtext_add(t,
                 "    for (var i = lid; i < %uu; i += T) {\n"
                 "      let v = i %% WV; let b = (i / WV) %% BK; let r = (i / (WV * BK)) %% TM;\n"
                 "      let m = i / (WV * BK * TM);\n"
                 "      let gb = b0 + b; let wr = EB + min(row0 + r, N - 1u);\n"
                 "      var w = vec4<u32>(0u);\n"
                 "      if (gb < NB) {\n",
                 M * p->tm * p->bk * WV);
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(t, "        %sif (m == %uu) { w = q%c[(wr * NB + gb) * WV + v]; }\n",
                     m ? "else " : "", m, 'A' + m);
    pl_wtext_add(t, "      }\n");
}

/* Stage blocks b0 .. b0 + BK - 1 of the tile's rows and columns in workgroup memory:
 * wq[((m * BK + b) * SV + v) * TM + r] (SV = 2 vec4: the block's 32 signed bytes; v1 keeps
 * Q4_0 packed, SV = 1), ws[(m * BK + b) * TM + r], aq[(b * 2 + h) * TN + c],
 * ad[b * TN + c], so a warp's neighbouring columns read neighbouring words. Rows past N and
 * columns past n repeat the last one (never stored); blocks past K are zeros. */
static void emit_stage(pl_wtext *t, const pl_gemm_params *p) {
    unsigned WV = wvecs(p);
    /* the x column: the batch's (clamped), or the slot's token (ids) */
    const char *ac = p->ids ? "cs[c] / XS" : "min(col0 + c, n - 1u)";
    emit_wload(t, p);
    if (svecs(p) != WV) { /* v2 Q4_0: unpacked once here, not per use */
        pl_wtext_add(t, "      wq[((m * BK + b) * 2u) * TM + r] = ");
        pl_wtext_add(t, unpack_lo, "w");
        pl_wtext_add(t, ";\n      wq[((m * BK + b) * 2u + 1u) * TM + r] = ");
        pl_wtext_add(t, unpack_hi, "w");
        pl_wtext_add(t, ";\n");
    } else {
        pl_wtext_add(t, "      wq[((m * BK + b) * WV + v) * TM + r] = w;\n");
    }
    pl_wtext_add(t, "    }\n");
    emit_stage_scales(t, p, NULL);
    pl_wtext_add(t,
                 "    for (var i = lid; i < %uu; i += T) {\n"
                 "      let h = i %% 2u; let b = (i / 2u) %% BK; let c = i / (2u * BK);\n"
                 "      let gb = b0 + b; let ac = %s;\n"
                 "      var a = vec4<u32>(0u);\n"
                 "      if (gb < NB) { a = xq[(ac * NB + gb) * 2u + h]; }\n"
                 "      aq[(b * 2u + h) * TN + c] = a;\n"
                 "    }\n",
                 p->tn * p->bk * 2, ac);
    emit_stage_ad(t, p, ac);
    pl_wtext_add(t, "    workgroupBarrier();\n");
}

/* Subgroup matrices (v5-7): 4 signed bytes (the u32 `val`) to operand elements eo .. eo + 3
 * of `arr`: one i32 word as it is (v6), or f16 values (v7: times the f32 scale d first). */
static void emit_put4(pl_wtext *t, const pl_gemm_params *p, const char *arr) {
    if (p->version == 6) {
        pl_wtext_add(t, "      %s[eo / 4u] = bitcast<i32>(val);\n", arr);
        return;
    }
    pl_wtext_add(t,
                 "      let e = vec4<%s>(vec4<f32>(unpack4xI8(val))%s);\n"
                 "      %s[eo] = e.x; %s[eo + 1u] = e.y; %s[eo + 2u] = e.z; %s[eo + 3u] = e.w;\n",
                 p->mock ? "f32" : "f16", p->version == 7 ? " * d" : "", arr, arr, arr, arr);
}

/* v5-7 staging, one thread per word of 4 elements: operands wo[(m * TM + r) * LS + b * 32
 * + e] (row-major, LS = BK * 32 elements a row) and ao[c * LS + b * 32 + e] (column c's
 * elements in a row: the right matrix column-major), and for v5/v6 the scales as versions
 * 1-4. Q4_0 word k < 4 holds elements 4k .. 4k + 3 in its low nibbles, k >= 4 elements
 * 16 + 4(k - 4) .. in the high nibbles of the same word. */
static void emit_stage_smx(pl_wtext *t, const pl_gemm_params *p) {
    unsigned M = mats(p), q4 = p->type == PL_GW_Q4_0;
    const char *ac = "min(col0 + c, n - 1u)";
    pl_wtext_add(t,
                 "    for (var i = lid; i < %uu; i += T) {\n"
                 "      let k = i %% 8u; let b = (i / 8u) %% BK; let r = (i / (8u * BK)) %% TM;\n"
                 "      let m = i / (8u * BK * TM);\n"
                 "      let gb = b0 + b; let wr = EB + min(row0 + r, N - 1u);\n"
                 "      let wi = (wr * NB + gb) * WV + %s;\n"
                 "      var raw = 0u;\n"
                 "      var d = 0.0;\n"
                 "      if (gb < NB) {\n",
                 M * p->tm * p->bk * 8, q4 ? "0u" : "k / 4u");
    for (unsigned m = 0; m < M; m++) {
        pl_wtext_add(t, "        %sif (m == %uu) { raw = q%c[wi][k %% 4u];", m ? "else " : "", m,
                     'A' + m);
        if (p->version == 7)
            pl_wtext_add(t, " let wb = wr * NB + gb; d = unpack2x16float(s%c[wb >> 1u])[wb & 1u];",
                         'A' + m);
        pl_wtext_add(t, " }\n");
    }
    pl_wtext_add(t, "      }\n");
    if (q4)
        pl_wtext_add(t, "      let val = ((select(raw, raw >> 4u, k >= 4u) & 0x0F0F0F0Fu) + "
                        "0x78787878u) ^ 0x80808080u;\n");
    else
        pl_wtext_add(t, "      let val = raw;\n");
    pl_wtext_add(t, "      let eo = (m * TM + r) * LS + b * 32u + k * 4u;\n");
    emit_put4(t, p, "wo");
    pl_wtext_add(
        t,
        "    }\n"
        "    for (var i = lid; i < %uu; i += T) {\n"
        "      let k = i %% 8u; let b = (i / 8u) %% BK; let c = i / (8u * BK);\n"
        "      let gb = b0 + b; let ac = %s;\n"
        "      var val = 0u;\n"
        "      var d = 0.0;\n"
        "      if (gb < NB) { val = xq[(ac * NB + gb) * 2u + k / 4u][k %% 4u]; d = xd[ac * NB "
        "+ gb]; }\n"
        "      let eo = c * LS + b * 32u + k * 4u;\n",
        p->tn * p->bk * 8, ac);
    emit_put4(t, p, "ao");
    pl_wtext_add(t, "    }\n");
    if (p->version != 7) emit_stage_scales(t, p, ac);
    pl_wtext_add(t, "    workgroupBarrier();\n");
}

/* The matrix products of block `b` (a WGSL expression; v7: of the whole step) of matrix m
 * for the subgroup's TPS tiles, all in row tr of the tile grid: the left operand loaded
 * once per K piece. into: "acc%u_%u" (v7: accumulate over the steps) or a fresh result
 * stored to cs. */
static void emit_mma(pl_wtext *t, const pl_gemm_params *p, unsigned m, const char *b) {
    unsigned T = pl_gemm_threads(p), nsg = T / p->sg, tps = (p->tm / p->sm) * (p->tn / p->sn) / nsg;
    const char *et = p->version == 6 ? "i8" : "f16", *rt = p->version == 6 ? "i32" : "f32";
    char ty[64], left[96], right[96], mma[64];
    if (p->mock) /* the emulation (emit_mock) */
        snprintf(ty, sizeof ty, "MA"), snprintf(left, sizeof left, "ml_load("),
            snprintf(right, sizeof right, "mr_load("), snprintf(mma, sizeof mma, "mma(");
    else
        snprintf(ty, sizeof ty, "subgroup_matrix_result<%s, SN, SM>", rt),
            snprintf(left, sizeof left,
                     "subgroupMatrixLoad<subgroup_matrix_left<%s, SK, SM>>(&wo, ", et),
            snprintf(right, sizeof right,
                     "subgroupMatrixLoad<subgroup_matrix_right<%s, SN, SK>>(&ao, ", et),
            snprintf(mma, sizeof mma, "subgroupMatrixMultiplyAccumulate(");
    const char *ltail = p->mock ? ")" : ", false, LS)", *rtail = p->mock ? ")" : ", true, LS)";
    if (p->version != 7)
        for (unsigned k = 0; k < tps; k++)
            pl_wtext_add(t, "      var acc%u_%u = %s();\n", m, k, ty);
    for (unsigned kk = 0; kk < 32 / p->sk; kk++) {
        pl_wtext_add(t,
                     "      {\n        let l = %s(%uu * TM + tr * SM) * LS + (%s) * 32u + %uu%s;\n",
                     left, m, b, kk * p->sk, ltail);
        for (unsigned k = 0; k < tps; k++)
            pl_wtext_add(t,
                         "        acc%u_%u = %sl, %s(tc0 + %uu) * SN * LS + (%s) * 32u + %uu%s, "
                         "acc%u_%u);\n",
                         m, k, mma, right, k, b, kk * p->sk, rtail, m, k);
        pl_wtext_add(t, "      }\n");
    }
}

/* The emulated builtins (p->mock), spread over the subgroup's invocations as the hardware
 * spreads them: a left or right operand is its offset (left M x K row-major in wo, right
 * K x N column-major in ao, both LS elements apart); invocation `lane` of the subgroup
 * holds result elements lane, lane + SG, ... (row-major M x N), stored to cs TN apart. */
static void emit_mock(pl_wtext *t, const pl_gemm_params *p) {
    const char *el =
        p->version == 6 ? "f32(extractBits(%s[(%s) / 4u], ((%s) %% 4u) * 8u, 8u))" : "%s[%s]";
    char lw[160], rw[160];
    snprintf(lw, sizeof lw, el, "wo", "l.o + i * LS + k", "l.o + i * LS + k");
    snprintf(rw, sizeof rw, el, "ao", "r.o + j * LS + k", "r.o + j * LS + k");
    pl_wtext_add(t,
                 "var<private> lane: u32;\n"
                 "struct ML { o: u32 }\n"
                 "struct MR { o: u32 }\n"
                 "struct MA { v: array<f32, SM * SN / SG> }\n"
                 "fn ml_load(o: u32) -> ML { return ML(o); }\n"
                 "fn mr_load(o: u32) -> MR { return MR(o); }\n"
                 "fn mma(l: ML, r: MR, a: MA) -> MA {\n"
                 "  var m = a;\n"
                 "  for (var q = 0u; q < SM * SN / SG; q++) {\n"
                 "    let i = (lane + q * SG) / SN; let j = (lane + q * SG) %% SN;\n"
                 "    var s = m.v[q];\n"
                 "    for (var k = 0u; k < SK; k++) { s += %s * %s; }\n"
                 "    m.v[q] = s;\n"
                 "  }\n"
                 "  return m;\n"
                 "}\n"
                 "fn ma_store(o: u32, a: MA) {\n"
                 "  for (var q = 0u; q < SM * SN / SG; q++) {\n"
                 "    let e = lane + q * SG;\n"
                 "    cs[o + (e / SN) * TN + e %% SN] = %s(a.v[q]);\n"
                 "  }\n"
                 "}\n",
                 lw, rw, p->version == 6 ? "i32" : "");
}

/* Store the subgroup's results of matrix m into cs (row-major, TN a row). */
static void emit_mma_store(pl_wtext *t, const pl_gemm_params *p, unsigned m) {
    unsigned T = pl_gemm_threads(p), nsg = T / p->sg, tps = (p->tm / p->sm) * (p->tn / p->sn) / nsg;
    for (unsigned k = 0; k < tps; k++)
        pl_wtext_add(t,
                     p->mock ? "      ma_store(tr * SM * TN + (tc0 + %uu) * SN, acc%u_%u);\n"
                             : "      subgroupMatrixStore(&cs, tr * SM * TN + (tc0 + %uu) * SN, "
                               "acc%u_%u, false, TN);\n",
                     k, m, k);
}

/* One block b of the step for the thread's tile: acc += f32(integer dot) * dw * dx (v8/v9:
 * in the step's buffer, at offsets ow, os, oa, od of the staging arrays). */
static void emit_block(pl_wtext *t, const pl_gemm_params *p) {
    unsigned M = mats(p), RM = p->rm, RN = p->rn;
    int d = dbuf(p);
    const char *ow = d ? "ow + " : "", *os = d ? "os + " : "", *oa = d ? "oa + " : "",
               *od = d ? "od + " : "";
    for (unsigned j = 0; j < RN; j++)
        pl_wtext_add(t,
                     "      let xl%u = aq[%s(b * 2u) * TN + tx + %uu * TX];\n"
                     "      let xh%u = aq[%s(b * 2u + 1u) * TN + tx + %uu * TX];\n"
                     "      let dx%u = ad[%sb * TN + tx + %uu * TX];\n",
                     j, oa, j, j, oa, j, j, od, j);
    for (unsigned m = 0; m < M; m++) {
        for (unsigned i = 0; i < RM; i++) {
            pl_wtext_add(t, "      {\n        let r = ty + %uu * TY;\n", i);
            if (svecs(p) == 1) { /* v1 Q4_0: unpacked at each use */
                pl_wtext_add(
                    t, "        let w0 = wq[%s(%uu * BK + b) * TM + r];\n        let wl = ", ow, m);
                pl_wtext_add(t, unpack_lo, "w0");
                pl_wtext_add(t, ";\n        let wh = ");
                pl_wtext_add(t, unpack_hi, "w0");
                pl_wtext_add(t, ";\n");
            } else
                pl_wtext_add(t,
                             "        let wl = wq[%s((%uu * BK + b) * 2u) * TM + r];\n"
                             "        let wh = wq[%s((%uu * BK + b) * 2u + 1u) * TM + r];\n",
                             ow, m, ow, m);
            pl_wtext_add(t, "        let dw = ws[%s(%uu * BK + b) * TM + r];\n", os, m);
            /* v3/v4: f32(sum) without the int-to-float conversion (a quarter of the dp4a
             * rate on NVIDIA): |sum| <= 32 * 128 * 127 < 2^22, so the bits of
             * 0x4B400000 + sum are the f32 12582912 + sum, and subtracting 12582912 gives
             * f32(sum) exactly: the same bits as v1/v2 */
            for (unsigned j = 0; j < RN; j++)
                pl_wtext_add(
                    t,
                    "        c%u_%u_%u += %s(%sdot4I8Packed(wl.x, xl%u.x) + dot4I8Packed(wl.y, "
                    "xl%u.y) + dot4I8Packed(wl.z, xl%u.z) + dot4I8Packed(wl.w, xl%u.w)\n"
                    "          + dot4I8Packed(wh.x, xh%u.x) + dot4I8Packed(wh.y, xh%u.y) + "
                    "dot4I8Packed(wh.z, xh%u.z) + dot4I8Packed(wh.w, xh%u.w))%s * dw * dx%u;\n",
                    m, i, j, magic(p) ? "(bitcast<f32>" : "f32", magic(p) ? "0x4B400000i + " : "",
                    j, j, j, j, j, j, j, j, magic(p) ? " - 12582912.0)" : "", j);
            pl_wtext_add(t, "      }\n");
        }
    }
}

/* v8/v9: the element of piece k that thread share j holds, i = lid + j * T (skipped past
 * the piece's count), loaded into its register (`load`: zeros past K, rows and columns
 * clamped as emit_stage does) or stored from it into buffer `buf` of the staging arrays,
 * at emit_stage's places. s0: the step's first block; ac: the x column of tile column c. */
static void emit_piece(pl_wtext *t, const pl_gemm_params *p, int k, unsigned j, int load,
                       const char *s0, const char *buf, const char *ac) {
    static const char
        *const reg = "wsad",
               *const idx[PIECES] = {
                   ("let v = i % WV; let b = (i / WV) % BK; let r = (i / (WV * BK)) % TM; "
                    "let m = i / (WV * BK * TM);"),
                   "let b = i % BK; let r = (i / BK) % TM; let m = i / (BK * TM);",
                   "let h = i % 2u; let b = (i / 2u) % BK; let c = i / (2u * BK);",
                   "let b = i % BK; let c = i / BK;"};
    unsigned cnt = piece_count(p, k), M = mats(p);
    pl_wtext_add(t, "    {\n      let i = lid + %uu * T;\n", j);
    if (cnt % pl_gemm_threads(p)) pl_wtext_add(t, "      if (i < %uu) {\n", cnt);
    pl_wtext_add(t, "      %s\n", idx[k]);
    const char *gb = p->gt ? "blk(%s + b, NB)" : "%s + b";
    char gbs[64];
    snprintf(gbs, sizeof gbs, gb, s0 ? s0 : "");
    if (load && k <= PIECE_S) {
        pl_wtext_add(t,
                     "      let gb = %s; let wr = EB + min(row0 + r, N - 1u);\n"
                     "      if (gb < NB) {\n",
                     gbs);
        for (unsigned m = 0; m < M; m++)
            pl_wtext_add(t,
                         k == PIECE_W ? "        %sif (m == %uu) { r%c%u = q%c[(wr * NB + gb) * WV "
                                        "+ v]; }\n"
                                      : "        %sif (m == %uu) { let wb = wr * NB + gb; r%c%u = "
                                        "unpack2x16float(s%c[wb >> 1u])[wb & 1u]; }\n",
                         m ? "else " : "", m, reg[k], j, 'A' + m);
        pl_wtext_add(t, "      } else { r%c%u = %s; }\n", reg[k], j,
                     k == PIECE_W ? "vec4<u32>(0u)" : "0.0");
    } else if (load) {
        pl_wtext_add(t, "      let gb = %s; let ac = %s;\n", gbs, ac);
        pl_wtext_add(t,
                     k == PIECE_A
                         ? "      r%c%u = select(vec4<u32>(0u), xq[(ac * NB + min(gb, NB - "
                           "1u)) * 2u + h], gb < NB);\n"
                         : "      r%c%u = select(0.0, xd[ac * NB + min(gb, NB - 1u)], "
                           "gb < NB);\n",
                     reg[k], j);
    } else if (k == PIECE_W && svecs(p) != wvecs(p)) { /* v8 Q4_0: unpacked once here */
        char w[16];
        snprintf(w, sizeof w, "rw%u", j);
        pl_wtext_add(t, "      wq[%s * WQS + ((m * BK + b) * 2u) * TM + r] = ", buf);
        pl_wtext_add(t, unpack_lo, w);
        pl_wtext_add(t, ";\n      wq[%s * WQS + ((m * BK + b) * 2u + 1u) * TM + r] = ", buf);
        pl_wtext_add(t, unpack_hi, w);
        pl_wtext_add(t, ";\n");
    } else {
        static const char *const dst[PIECES] = {"wq[%s * WQS + ((m * BK + b) * WV + v) * TM + r]",
                                                "ws[%s * WSS + (m * BK + b) * TM + r]",
                                                "aq[%s * AQS + (b * 2u + h) * TN + c]",
                                                "ad[%s * ADS + b * TN + c]"};
        pl_wtext_add(t, "      ");
        pl_wtext_add(t, dst[k], buf);
        pl_wtext_add(t, " = r%c%u;\n", reg[k], j);
    }
    if (cnt % pl_gemm_threads(p)) pl_wtext_add(t, "      }\n");
    pl_wtext_add(t, "    }\n");
}

/* Every share of every piece (load or store, as emit_piece). */
static void emit_pieces(pl_wtext *t, const pl_gemm_params *p, int load, const char *s0,
                        const char *buf, const char *ac) {
    for (int k = 0; k < PIECES; k++)
        for (unsigned j = 0; j < piece_regs(p, k); j++) emit_piece(t, p, k, j, load, s0, buf, ac);
}

/* The GEMV's order (p->gt): after K-loop position i = b0 + b (a block of thread slice
 * th = i / J), the slice's last block folds the slice (c) into its run's sum (gp), and a
 * run's last slice folds the run into the total (gs), as pl_wtext_reduce adds them: the
 * first of each from itself, the others in turn. Positions past K's blocks add nothing
 * (their slices' sums are +0.0, which leaves any sum that is not -0.0 as it is, and these
 * never are: each starts from 0.0 + a term), so with one block a slice the loop stops at
 * K's last block and folds the unfinished run there. */
static void emit_folds(pl_wtext *t, const pl_gemm_params *p) {
    unsigned M = mats(p);
    pl_wtext_add(t, "      let si = b0 + b;\n"
                    "      if (si < SEQ && si %% J == J - 1u) {\n"
                    "        let th = si / J;\n"
                    "        let first = th %% RUN == 0u;\n"
                    "        let last = th %% RUN == RUN - 1u || si == SEQ - 1u;\n");
    for (unsigned m = 0; m < M; m++)
        for (unsigned i = 0; i < p->rm; i++)
            for (unsigned j = 0; j < p->rn; j++)
                pl_wtext_add(
                    t,
                    "        gp%u_%u_%u = select(gp%u_%u_%u + c%u_%u_%u, c%u_%u_%u, first); "
                    "c%u_%u_%u = 0.0;\n"
                    "        if (last) { gs%u_%u_%u = select(gs%u_%u_%u + gp%u_%u_%u, "
                    "gp%u_%u_%u, th < RUN); }\n",
                    m, i, j, m, i, j, m, i, j, m, i, j, m, i, j, m, i, j, m, i, j, m, i, j, m, i,
                    j);
    pl_wtext_add(t, "      }\n");
}

/* v8/v9's loop over K: step 0 staged in buffer 0 before it; each step loads the next
 * step's share into registers, takes its blocks from buffer `cur` (emit_block), then
 * stores the registers into the other buffer: one barrier a step, the next step's global
 * loads in flight during the products. The same blocks in the same order as v3/v4. */
static void emit_db_loop(pl_wtext *t, const pl_gemm_params *p) {
    const char *ac = p->ids ? "cs[c] / XS" : "min(col0 + c, n - 1u)";
    static const char *const ty[PIECES] = {"vec4<u32>(0u)", "0.0", "vec4<u32>(0u)", "0.0"};
    for (int k = 0; k < PIECES; k++)
        for (unsigned j = 0; j < piece_regs(p, k); j++)
            pl_wtext_add(t, "  var r%c%u = %s;\n", "wsad"[k], j, ty[k]);
    emit_pieces(t, p, 1, "0u", NULL, ac);
    emit_pieces(t, p, 0, NULL, "0u", ac);
    pl_wtext_add(t,
                 "  workgroupBarrier();\n"
                 "  var cur = 0u;\n"
                 "  for (var b0 = 0u; b0 < %s; b0 += BK) {\n",
                 p->gt ? "SEQ" : "NB");
    emit_pieces(t, p, 1, "(b0 + BK)", NULL, ac);
    pl_wtext_add(t, "    let ow = cur * WQS; let os = cur * WSS; let oa = cur * AQS; "
                    "let od = cur * ADS;\n"
                    "    for (var b = 0u; b < BK; b++) {\n");
    if (p->gt) pl_wtext_add(t, "      if (blk(b0 + b, NB) < NB) {\n");
    emit_block(t, p);
    if (p->gt) pl_wtext_add(t, "      }\n"); /* the products of a block past K skipped */
    if (p->gt) emit_folds(t, p);
    pl_wtext_add(t, "    }\n    cur = 1u - cur;\n");
    emit_pieces(t, p, 0, NULL, "cur", ac);
    pl_wtext_add(t, "    workgroupBarrier();\n  }\n");
}

/* v5-7's loop over K. Subgroup sgi (of T / SG) owns TPS matrix tiles of the TM x TN tile,
 * tiles sgi * TPS .. sgi * TPS + TPS - 1 of the row-major grid (NC a row): row tr, columns
 * tc0 .. tc0 + TPS - 1. v5/v6 per block: the products of the block to cs, then each thread
 * adds f32(sum) * weight scale * activation scale to its outputs as versions 1-4 do; v7:
 * the products accumulate over all of K in the matrices, then go through cs once. */
static void emit_smx_loop(pl_wtext *t, const pl_gemm_params *p) {
    unsigned M = mats(p), T = pl_gemm_threads(p),
             tps = (p->tm / p->sm) * (p->tn / p->sn) / (T / p->sg);
    if (p->mock) pl_wtext_add(t, "  lane = lid %% SG;\n");
    pl_wtext_add(t, "  let sgi = lid / SG;\n"
                    "  let tr = (sgi * TPS) / NC;\n"
                    "  let tc0 = (sgi * TPS) %% NC;\n");
    if (p->version == 7)
        for (unsigned m = 0; m < M; m++)
            for (unsigned k = 0; k < tps; k++)
                pl_wtext_add(t, "  var acc%u_%u = %s();\n", m, k,
                             p->mock ? "MA" : "subgroup_matrix_result<f32, SN, SM>");
    pl_wtext_add(t, "  for (var b0 = 0u; b0 < NB; b0 += BK) {\n");
    emit_stage_smx(t, p);
    pl_wtext_add(t, "    for (var b = 0u; b < BK; b++) {\n");
    for (unsigned m = 0; m < M; m++) {
        emit_mma(t, p, m, "b");
        if (p->version == 7) continue;
        emit_mma_store(t, p, m);
        pl_wtext_add(t, "      workgroupBarrier();\n");
        for (unsigned i = 0; i < p->rm; i++)
            for (unsigned j = 0; j < p->rn; j++)
                pl_wtext_add(
                    t,
                    "      c%u_%u_%u += %s(cs[(ty + %uu * TY) * TN + tx + %uu * TX]) * "
                    "ws[(%uu * BK + b) * TM + ty + %uu * TY] * ad[b * TN + tx + %uu * TX];\n",
                    m, i, j, p->version == 6 ? "f32" : "", i, j, m, i, j);
        pl_wtext_add(t, "      workgroupBarrier();\n");
    }
    pl_wtext_add(t, "    }\n    workgroupBarrier();\n  }\n");
    if (p->version != 7) return;
    for (unsigned m = 0; m < M; m++) {
        emit_mma_store(t, p, m);
        pl_wtext_add(t, "  workgroupBarrier();\n");
        for (unsigned i = 0; i < p->rm; i++)
            for (unsigned j = 0; j < p->rn; j++)
                pl_wtext_add(t, "  c%u_%u_%u = cs[(ty + %uu * TY) * TN + tx + %uu * TX];\n", m, i,
                             j, i, j);
        pl_wtext_add(t, "  workgroupBarrier();\n");
    }
}

pl_status pl_wgsl_gemm(const pl_gemm_params *p, char **out) {
    *out = NULL;
    if (check(p) != PL_OK) return PL_ERR_ARG;
    unsigned M = mats(p), WV = wvecs(p), T = pl_gemm_threads(p);
    pl_wtext t = {0};
    if (smx(p)) /* the offsets are uniform per subgroup (lid / SG), which the analysis cannot see */
        pl_wtext_add(&t,
                     "%s%s"
                     "const SM = %uu;\nconst SN = %uu;\nconst SK = %uu;\nconst SG = %uu;\n"
                     "const NC = %uu;\nconst TPS = %uu;\nconst LS = %uu;\n",
                     p->version == 6 || p->mock ? "" : "enable f16;\n",
                     p->mock
                         ? ""
                         : "enable chromium_experimental_subgroup_matrix;\n"
                           "diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);\n",
                     p->sm, p->sn, p->sk, p->sg, p->tn / p->sn,
                     (p->tm / p->sm) * (p->tn / p->sn) / (T / p->sg), p->bk * 32);
    pl_wtext_add(&t,
                 "const T = %uu;\nconst TM = %uu;\nconst TN = %uu;\nconst TX = %uu;\n"
                 "const TY = %uu;\nconst BK = %uu;\nconst WV = %uu;\n",
                 T, p->tm, p->tn, p->tn / p->rn, p->tm / p->rm, p->bk, WV);
    if (p->gt) /* K-loop position i -> block: thread slice i / J, its (i % J)-th block */
        pl_wtext_add(&t,
                     "const GT = %uu;\nconst RUN = %uu;\nconst J = %uu;\n"
                     "fn blk(i: u32, nb: u32) -> u32 {\n"
                     "  return select(nb, i / J + (i %% J) * GT, i < GT * J);\n"
                     "}\n",
                     p->gt, p->gt / (p->gt < 8 ? p->gt : 8), p->gj);
    pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read> xq: array<vec4<u32>>;\n"
                     "@group(0) @binding(1) var<storage, read> xd: array<f32>;\n"
                     "@group(0) @binding(2) var<storage, read_write> y: array<f32>;\n");
    int binding = 3;
    for (unsigned m = 0; m < M; m++) {
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> q%c: array<vec4<u32>>;\n",
                     binding++, 'A' + m);
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> s%c: array<u32>;\n", binding++,
                     'A' + m);
    }
    const char *side[6] = {p->bias ? "bias" : NULL,   p->gate_out ? "go" : NULL,
                           p->up_out ? "uo" : NULL,   p->split[0] ? "y1" : NULL,
                           p->split[0] ? "y2" : NULL, p->split[2] ? "y3" : NULL};
    for (int i = 0; i < 6; i++)
        if (side[i])
            pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, %s> %s: array<f32>;\n", binding++,
                         i ? "read_write" : "read", side[i]);
    if (p->ids)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> grp: array<u32>;\n", binding++);
    pl_wtext_args(&t, binding++);
    if (smx(p)) {
        const char *et = p->version == 6 ? "i32"
                         : p->mock       ? "f32"
                                         : "f16",
                   *rt = p->version == 6 ? "i32" : "f32";
        unsigned per = p->version == 6 ? 8 : 32; /* array elements per block */
        if (p->mock) emit_mock(&t, p);
        pl_wtext_add(&t,
                     "var<workgroup> wo: array<%s, %u>;\nvar<workgroup> ao: array<%s, %u>;\n"
                     "var<workgroup> cs: array<%s, %u>;\n",
                     et, M * p->tm * p->bk * per, et, p->tn * p->bk * per, rt, p->tm * p->tn);
        if (p->version != 7)
            pl_wtext_add(&t,
                         "var<workgroup> ws: array<f32, %u>;\nvar<workgroup> ad: array<f32, %u>;\n",
                         M * p->tm * p->bk, p->tn * p->bk);
    } else {
        unsigned nbuf = dbuf(p) ? 2 : 1, wqs = M * p->tm * p->bk * svecs(p);
        if (dbuf(p)) /* one buffer's elements of each staging array */
            pl_wtext_add(
                &t, "const WQS = %uu;\nconst WSS = %uu;\nconst AQS = %uu;\nconst ADS = %uu;\n", wqs,
                piece_count(p, PIECE_S), piece_count(p, PIECE_A), piece_count(p, PIECE_D));
        pl_wtext_add(
            &t,
            "var<workgroup> wq: array<vec4<u32>, %u>;\nvar<workgroup> ws: array<f32, %u>;\n"
            "var<workgroup> aq: array<vec4<u32>, %u>;\nvar<workgroup> ad: array<f32, %u>;\n",
            nbuf * wqs, nbuf * piece_count(p, PIECE_S), nbuf * piece_count(p, PIECE_A),
            nbuf * piece_count(p, PIECE_D));
    }
    if (p->ids)
        pl_wtext_add(&t, "var<workgroup> tinfo: vec4<u32>;\nvar<workgroup> cs: array<u32, %u>;\n",
                     p->tn);
    pl_wtext_add(&t, "@compute @workgroup_size(%u)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n", T);
    /* workgroup g: row tile g % RT, column tile g / RT (args.a0 = n columns) */
    pl_wtext_add(&t,
                 "  let n = args.a0;\n"
                 "  let N = args.a1;\n"
                 "  let NB = args.a2;\n"
                 "  let RT = (N + TM - 1u) / TM;\n"
                 "  let g = wid.x + wid.y * nwg.x;\n"
                 "%s"
                 "  let row0 = (g %% RT) * TM;\n",
                 /* v10: each 32 invocations 8 neighbouring columns x 4 rows of the thread
                  * grid, so a warp's activation loads touch 8 vectors, not 16 */
                 p->version == 10 ? "  let tx = lid % 8u + 8u * ((lid / 32u) % (TX / 8u));\n"
                                    "  let ty = (lid / 8u) % 4u + 4u * (lid / (32u * (TX / 8u)));\n"
                                  : "  let tx = lid % TX;\n"
                                    "  let ty = lid / TX;\n");
    if (p->ids) /* column tile g / RT of the grouping's list: expert te, pairs p0 .. pe - 1
                 * (their slots in cs); te = E: bad ids, zeros */
        pl_wtext_add(&t, "  let E = args.a3;\n"
                         "  let XS = args.a4;\n"
                         "  let MT = (n + TN - 1u) / TN + min(E + 1u, n);\n"
                         "  let TB = E + 3u;\n"
                         "  let ct = g / RT;\n"
                         "  if (lid == 0u) {\n"
                         "    var ti = vec4<u32>(0u);\n"
                         "    if (g < RT * MT && ct < grp[0]) {\n"
                         "      ti = vec4<u32>(1u, grp[TB + 3u * ct], grp[TB + 3u * ct + 1u], "
                         "grp[TB + 3u * ct + 2u]);\n"
                         "    }\n"
                         "    tinfo = ti;\n"
                         "  }\n"
                         "  let tinf = workgroupUniformLoad(&tinfo);\n"
                         "  if (tinf.x == 0u) { return; }\n"
                         "  let bad = tinf.y >= E;\n"
                         "  let EB = min(tinf.y, E - 1u) * N;\n"
                         "  let p0 = tinf.z;\n"
                         "  let pe = tinf.w;\n"
                         "  for (var c = lid; c < TN; c += T) {\n"
                         "    cs[c] = grp[TB + 3u * MT + min(p0 + c, pe - 1u)];\n"
                         "  }\n"
                         "  workgroupBarrier();\n");
    else
        pl_wtext_add(&t, "  if (g >= RT * ((n + TN - 1u) / TN)) { return; }\n"
                         "  let col0 = (g / RT) * TN;\n"
                         "  let EB = 0u;\n");
    for (unsigned m = 0; m < M; m++)
        for (unsigned i = 0; i < p->rm; i++)
            for (unsigned j = 0; j < p->rn; j++)
                pl_wtext_add(&t, "  var c%u_%u_%u = 0.0;\n", m, i, j);
    if (p->gt) { /* the run and total sums; one slice only when K has a block for each
                  * thread at most (past that, the slices without blocks add nothing) */
        pl_wtext_add(&t, "  let SEQ = select(GT * J, NB, J == 1u);\n");
        for (unsigned m = 0; m < M; m++)
            for (unsigned i = 0; i < p->rm; i++)
                for (unsigned j = 0; j < p->rn; j++)
                    pl_wtext_add(&t, "  var gp%u_%u_%u = 0.0;\n  var gs%u_%u_%u = 0.0;\n", m, i, j,
                                 m, i, j);
    }
    if (smx(p))
        emit_smx_loop(&t, p);
    else if (dbuf(p))
        emit_db_loop(&t, p);
    else {
        pl_wtext_add(&t, "  for (var b0 = 0u; b0 < NB; b0 += BK) {\n");
        emit_stage(&t, p);
        pl_wtext_add(&t, "    for (var b = 0u; b < BK; b++) {\n");
        emit_block(&t, p);
        pl_wtext_add(&t, "    }\n    workgroupBarrier();\n  }\n");
    }
    pl_gemv_params s = store_params(p);
    for (unsigned i = 0; i < p->rm; i++) {
        for (unsigned j = 0; j < p->rn; j++) {
            char v0[64], v1[64];
            /* ids: the pair's slot; a bad id stores zeros */
            const char *vf = p->ids  ? "select(c%u_%u_%u, 0.0, bad)"
                             : p->gt ? "gs%u_%u_%u"
                                     : "c%u_%u_%u";
            snprintf(v0, sizeof v0, vf, 0, i, j);
            snprintf(v1, sizeof v1, vf, 1, i, j);
            pl_wtext_add(&t, "  {\n    let row = row0 + ty + %uu * TY;\n", i);
            if (p->ids)
                pl_wtext_add(&t,
                             "    let c = tx + %uu * TX;\n"
                             "    if (row < N && p0 + c < pe) {\n"
                             "      let yo = cs[c] * N;\n",
                             j);
            else
                pl_wtext_add(&t,
                             "    let col = col0 + tx + %uu * TX;\n"
                             "    let yo = col * N;\n"
                             "    if (row < N && col < n) {\n",
                             j);
            if (p->split[2]) /* q, k, v, u: each range to its own buffer */
                pl_wtext_add(&t,
                             "      let s0 = args.a3; let s1 = args.a4; let s2 = args.a5;\n"
                             "      if (row < s0) { y[col * s0 + row] = %s; }\n"
                             "      else if (row < s1) { y1[col * (s1 - s0) + row - s0] = %s; }\n"
                             "      else if (row < s2) { y2[col * (s2 - s1) + row - s1] = %s; }\n"
                             "      else { y3[col * (N - s2) + row - s2] = %s; }\n",
                             v0, v0, v0, v0);
            else if (p->split[0]) /* q, k, v: each range to its own buffer */
                pl_wtext_add(&t,
                             "      let s0 = args.a3; let s1 = args.a4;\n"
                             "      if (row < s0) { y[col * s0 + row] = %s; }\n"
                             "      else if (row < s1) { y1[col * (s1 - s0) + row - s0] = %s; }\n"
                             "      else { y2[col * (N - s1) + row - s1] = %s; }\n",
                             v0, v0, v0);
            else
                pl_wgsl_gemv_store(&t, &s, v0, v1);
            pl_wtext_add(&t, "    }\n  }\n");
        }
    }
    pl_wtext_add(&t, "}\n");
    return pl_wtext_finish(&t, out);
}

pl_status pl_wgsl_q8pre(const pl_q8pre_params *p, char **out) {
    *out = NULL;
    unsigned T = p->threads;
    if (T < 8 || T > 1024 || (T & (T - 1)))
        return pl_fail(PL_ERR_ARG, "Q8_0 pre-pass: bad %u threads", T);
    if (p->norm_out && !p->norm) return pl_fail(PL_ERR_ARG, "Q8_0 pre-pass: norm_out needs norm");
    pl_wtext t = {0};
    pl_wtext_add(&t, "const T = %uu;\n", T);
    pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;\n"
                     "@group(0) @binding(1) var<storage, read_write> xq: array<vec4<u32>>;\n"
                     "@group(0) @binding(2) var<storage, read_write> xd: array<f32>;\n");
    int binding = 3;
    if (p->norm)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> nw: array<vec4<f32>>;\n",
                     binding++);
    if (p->norm_out)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> xn: array<vec4<f32>>;\n",
                     binding++);
    pl_wtext_args(&t, binding++);
    if (p->norm) {
        pl_wtext_add(&t, "var<workgroup> red: array<f32, %u>;\n", T);
        pl_wtext_reduce_decl(&t, T, 1);
    }
    pl_wtext_add(&t, "%s", pl_wgsl_q8_helpers);
    pl_wtext_add(&t, "@compute @workgroup_size(%u)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n", T);
    pl_wtext_group_guard(&t, "args.a0");
    pl_wtext_add(&t, "  let K = args.a1;\n  let NB = K / 32u;\n  let xo = g * (K / 4u);\n");
    if (p->norm) { /* 1/rms as the q8x GEMV's prologue computes it */
        pl_wtext_add(&t,
                     "  var sq0 = 0.0;\n"
                     "  for (var j = lid; j < K / 4u; j += T) { let v = x[xo + j]; sq0 += dot(v, "
                     "v); }\n"
                     "  red[lid] = sq0;\n");
        pl_wtext_reduce(&t, T, 1, 0);
        pl_wtext_add(&t, "  let inv = 1.0 / sqrt(red[0] / f32(K) + ");
        pl_wtext_f32(&t, p->eps);
        pl_wtext_add(&t, ");\n");
    }
    pl_wtext_add(&t, "  for (var b = lid; b < NB; b += T) {\n");
    for (int j = 0; j < 8; j++) {
        if (p->norm)
            pl_wtext_add(&t, "    let x%d = (x[xo + b * 8u + %du] * inv) * nw[b * 8u + %du];\n", j,
                         j, j);
        else
            pl_wtext_add(&t, "    let x%d = x[xo + b * 8u + %du];\n", j, j);
        if (p->norm_out) pl_wtext_add(&t, "    xn[xo + b * 8u + %du] = x%d;\n", j, j);
    }
    pl_wgsl_quantize_block(&t, 0);
    pl_wtext_add(&t, "    xq[(g * NB + b) * 2u] = vec4<u32>(p0, p1, p2, p3);\n"
                     "    xq[(g * NB + b) * 2u + 1u] = vec4<u32>(p4, p5, p6, p7);\n"
                     "    xd[g * NB + b] = dx;\n"
                     "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

uint32_t pl_gemm_max_tiles(uint32_t n_exp, uint32_t tn, uint32_t slots) {
    return (slots + tn - 1) / tn + (n_exp + 1 < slots ? n_exp + 1 : slots);
}

uint64_t pl_gemm_grp_words(uint32_t n_exp, uint32_t tn, uint32_t slots) {
    return (uint64_t)n_exp + 3 + 3ull * pl_gemm_max_tiles(n_exp, tn, slots) + slots;
}

pl_status pl_wgsl_moe_group(const pl_moe_group_params *p, char **out) {
    *out = NULL;
    if (!p->n_exp || p->n_exp > 4096 || !p->tn)
        return pl_fail(PL_ERR_ARG, "MoE grouping: bad %u experts / tile %u", p->n_exp, p->tn);
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const E = %uu;\nconst TN = %uu;\nconst T = 256u;\n"
                 "@group(0) @binding(0) var<storage, read> eids: array<i32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> grp: array<u32>;\n",
                 p->n_exp, p->tn);
    pl_wtext_args(&t, 2);
    pl_wtext_add(&t,
                 "var<workgroup> cnt: array<atomic<u32>, %u>;\n"
                 "fn bucket(s: u32) -> u32 {\n"
                 "  let e = eids[s];\n"
                 "  return select(E, u32(e), e >= 0i && e < i32(E));\n"
                 "}\n"
                 "@compute @workgroup_size(T)\n"
                 "fn main(@builtin(local_invocation_index) lid: u32) {\n"
                 "  let n = args.a0;\n"
                 "  let MT = (n + TN - 1u) / TN + min(E + 1u, n);\n"
                 "  let TB = E + 3u;\n"
                 "  for (var e = lid; e <= E; e += T) { atomicStore(&cnt[e], 0u); }\n"
                 "  workgroupBarrier();\n"
                 "  for (var s = lid; s < n; s += T) { atomicAdd(&cnt[bucket(s)], 1u); }\n"
                 "  workgroupBarrier();\n"
                 "  if (lid == 0u) {\n"
                 "    var off = 0u;\n"
                 "    var nt = 0u;\n"
                 "    for (var e = 0u; e <= E; e++) {\n"
                 "      let c = atomicLoad(&cnt[e]);\n"
                 "      grp[1u + e] = off;\n"
                 "      for (var q = 0u; q < c; q += TN) {\n"
                 "        grp[TB + 3u * nt] = e;\n"
                 "        grp[TB + 3u * nt + 1u] = off + q;\n"
                 "        grp[TB + 3u * nt + 2u] = off + c;\n"
                 "        nt++;\n"
                 "      }\n"
                 "      atomicStore(&cnt[e], off);\n"
                 "      off += c;\n"
                 "    }\n"
                 "    grp[E + 2u] = off;\n"
                 "    grp[0] = nt;\n"
                 "  }\n"
                 "  workgroupBarrier();\n"
                 "  for (var s = lid; s < n; s += T) {\n"
                 "    grp[TB + 3u * MT + atomicAdd(&cnt[bucket(s)], 1u)] = s;\n"
                 "  }\n"
                 "}\n",
                 p->n_exp + 1);
    return pl_wtext_finish(&t, out);
}

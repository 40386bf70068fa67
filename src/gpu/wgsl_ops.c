/* wgsl_ops.c - WGSL templates of the small per-token kernels: RMSNorm, RoPE with the K/V
 * cache store, split-K flash-decoding attention and its combine, top-k / argmax, and the
 * embedding lookup from a token id that stays on the GPU. Bindings: see wgsl_gen.h. */
#include <stdio.h>
#include <string.h>

#include "wgsl_gen.h"
#include "wgsl_text.h"

static int pow2(unsigned v) { return v && !(v & (v - 1)); }

static const char *step_struct =
    "struct Step { pos: u32, n_kv: u32, n_splits: u32, pad: u32 };\n";

/* ------------------------------------------------------------------ RMSNorm */

pl_status pl_wgsl_rmsnorm(const pl_rmsnorm_params *p, char **out) {
    *out = NULL;
    if (!p->n || !pow2(p->threads) || p->threads > 1024)
        return pl_fail(PL_ERR_ARG, "RMSNorm: bad size %u / threads %u", p->n, p->threads);
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
                 "@group(0) @binding(2) var<storage, read> w: array<f32>;\n"
                 "var<workgroup> red: array<f32, %u>;\n"
                 "@compute @workgroup_size(%u)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n",
                 p->threads, p->threads);
    pl_wtext_group_index(&t, 1);
    pl_wtext_add(&t,
                 "  var ss = 0.0;\n"
                 "  for (var j = lid; j < %uu; j += %uu) { ss += x[j] * x[j]; }\n"
                 "  red[lid] = ss;\n",
                 p->n, p->threads);
    pl_wtext_tree_sum(&t, p->threads, 1);
    pl_wtext_add(&t, "  let inv = 1.0 / sqrt(red[0] / f32(%uu) + ", p->n);
    pl_wtext_f32(&t, p->eps);
    pl_wtext_add(&t,
                 ");\n"
                 "  for (var j = lid; j < %uu; j += %uu) { y[j] = (x[j] * inv) * w[j]; }\n}\n",
                 p->n, p->threads);
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ RoPE + cache store */

pl_status pl_wgsl_rope(const pl_rope_params *p, char **out) {
    *out = NULL;
    unsigned HD = p->head_dim, T = p->threads;
    if (!p->n_head || !p->n_kv_head || p->n_head % p->n_kv_head || !HD || HD % 2 || HD > 1024 ||
        p->rot_dim > HD || p->rot_dim % 2 || !p->ctx || !pow2(T) || T > 1024)
        return pl_fail(PL_ERR_ARG, "RoPE: bad shape (heads %u/%u, head_dim %u, rot %u)",
                       p->n_head, p->n_kv_head, HD, p->rot_dim);
    unsigned half = p->rot_dim / 2;
    pl_wtext t = {0};
    pl_wtext_add(&t, "%s", step_struct);
    pl_wtext_add(&t,
                 "const HD = %uu;\nconst NH = %uu;\nconst NKV = %uu;\nconst CTX = %uu;\n"
                 "const HALF = %uu;\nconst T = %uu;\n",
                 HD, p->n_head, p->n_kv_head, p->ctx, half, T);
    pl_wtext_add(&t,
                 "@group(0) @binding(0) var<storage, read> qkv: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> qo: array<f32>;\n"
                 "@group(0) @binding(2) var<storage, read_write> kc: array<u32>;\n"
                 "@group(0) @binding(3) var<storage, read_write> vc: array<u32>;\n"
                 "@group(0) @binding(4) var<storage, read> tab: array<f32>;\n"
                 "@group(0) @binding(5) var<uniform> st: Step;\n");
    if (p->qk_norm)
        pl_wtext_add(&t, "@group(0) @binding(6) var<storage, read> qn: array<f32>;\n"
                         "@group(0) @binding(7) var<storage, read> kn: array<f32>;\n");
    pl_wtext_add(&t,
                 "var<workgroup> red: array<f32, T>;\n"
                 "var<workgroup> hv: array<f32, HD>;\n"
                 "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_index(&t, p->n_head + p->n_kv_head);
    pl_wtext_add(&t,
                 "  let is_q = g < NH;\n"
                 "  let src = select(NH * HD + (g - NH) * HD, g * HD, is_q);\n"
                 "  for (var d = lid; d < HD; d += T) { hv[d] = qkv[src + d]; }\n");
    if (p->qk_norm) {
        /* per-head RMSNorm with the q or k weight */
        pl_wtext_add(&t,
                     "  var ss = 0.0;\n"
                     "  for (var d = lid; d < HD; d += T) { ss += hv[d] * hv[d]; }\n"
                     "  red[lid] = ss;\n");
        pl_wtext_tree_sum(&t, T, 1);
        pl_wtext_add(&t, "  let inv = 1.0 / sqrt(red[0] / f32(HD) + ");
        pl_wtext_f32(&t, p->eps);
        pl_wtext_add(&t,
                     ");\n"
                     "  for (var d = lid; d < HD; d += T) {\n"
                     "    if (is_q) { hv[d] = (hv[d] * inv) * qn[d]; }\n"
                     "    else { hv[d] = (hv[d] * inv) * kn[d]; }\n"
                     "  }\n");
    }
    pl_wtext_add(&t,
                 "  workgroupBarrier();\n"
                 "  let pos = st.pos;\n"
                 "  for (var i = lid; i < HALF; i += T) {\n"
                 "    let ia = %s;\n    let ib = %s;\n"
                 "    let c = tab[(pos * HALF + i) * 2u];\n"
                 "    let s = tab[(pos * HALF + i) * 2u + 1u];\n"
                 "    let a = hv[ia];\n    let b = hv[ib];\n"
                 "    hv[ia] = a * c - b * s;\n    hv[ib] = a * s + b * c;\n"
                 "  }\n"
                 "  workgroupBarrier();\n",
                 p->neox ? "i" : "2u * i", p->neox ? "i + HALF" : "2u * i + 1u");
    pl_wtext_add(&t,
                 "  if (is_q) {\n"
                 "    for (var d = lid; d < HD; d += T) { qo[g * HD + d] = hv[d]; }\n"
                 "  } else {\n"
                 "    let kv = g - NH;\n"
                 "    let dst = (kv * CTX + pos) * (HD / 2u);\n"
                 "    let vsrc = (NH + NKV + kv) * HD;\n"
                 "    for (var j = lid; j < HD / 2u; j += T) {\n"
                 "      kc[dst + j] = pack2x16float(vec2<f32>(hv[2u * j], hv[2u * j + 1u]));\n"
                 "      vc[dst + j] = pack2x16float(vec2<f32>(qkv[vsrc + 2u * j], "
                 "qkv[vsrc + 2u * j + 1u]));\n"
                 "    }\n"
                 "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ attention */

uint32_t pl_attn_splits(const pl_attn_params *p, uint32_t n_kv) {
    return n_kv ? (n_kv + p->chunk - 1) / p->chunk : 1;
}

static unsigned max_splits(unsigned ctx, unsigned chunk) { return (ctx + chunk - 1) / chunk; }

pl_status pl_wgsl_attn(const pl_attn_params *p, char **out) {
    *out = NULL;
    unsigned HD = p->head_dim, T = p->threads;
    if (!p->n_head || !p->n_kv_head || p->n_head % p->n_kv_head || !HD || HD % 2 || !p->ctx ||
        !p->chunk || p->chunk > 4096 || !pow2(T) || T > 1024)
        return pl_fail(PL_ERR_ARG, "attention: bad shape (heads %u/%u, head_dim %u, chunk %u)",
                       p->n_head, p->n_kv_head, HD, p->chunk);
    /* the output pass gives each (group of positions, dim) pair to one thread */
    unsigned ng = (T + HD - 1) / HD;
    pl_wtext t = {0};
    pl_wtext_add(&t, "%s", step_struct);
    pl_wtext_add(&t,
                 "const HD = %uu;\nconst NH = %uu;\nconst GQ = %uu;\nconst CTX = %uu;\n"
                 "const CH = %uu;\nconst MAXS = %uu;\nconst T = %uu;\nconst NG = %uu;\n",
                 HD, p->n_head, p->n_head / p->n_kv_head, p->ctx, p->chunk,
                 max_splits(p->ctx, p->chunk), T, ng);
    pl_wtext_add(&t,
                 "@group(0) @binding(0) var<storage, read> q: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read> kc: array<u32>;\n"
                 "@group(0) @binding(2) var<storage, read> vc: array<u32>;\n"
                 "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n"
                 "@group(0) @binding(4) var<storage, read_write> part: array<f32>;\n"
                 "@group(0) @binding(5) var<uniform> st: Step;\n"
                 "var<workgroup> sc: array<f32, CH>;\n"
                 "var<workgroup> red: array<f32, T>;\n"
                 "var<workgroup> qs: array<f32, HD>;\n"
                 "var<workgroup> ob: array<f32, NG * HD>;\n"
                 "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n"
                 "  let g = wid.x + wid.y * nwg.x;\n"
                 "  let ns = st.n_splits;\n"
                 "  if (g >= NH * ns) { return; }\n"
                 "  let h = g / ns;\n  let sp = g %% ns;\n  let kvh = h / GQ;\n"
                 "  let p0 = sp * CH;\n  let np = min(st.n_kv, p0 + CH) - p0;\n"
                 "  let row0 = kvh * CTX + p0;\n"
                 "  for (var d = lid; d < HD; d += T) { qs[d] = q[h * HD + d]; }\n"
                 "  workgroupBarrier();\n");
    /* scores of this chunk's positions */
    pl_wtext_add(&t,
                 "  var m = bitcast<f32>(0xff7fffffu);\n"
                 "  for (var i = lid; i < np; i += T) {\n"
                 "    let base = (row0 + i) * (HD / 2u);\n"
                 "    var acc = 0.0;\n"
                 "    for (var j = 0u; j < HD / 2u; j++) {\n"
                 "      let k2 = unpack2x16float(kc[base + j]);\n"
                 "      acc += qs[2u * j] * k2.x + qs[2u * j + 1u] * k2.y;\n"
                 "    }\n"
                 "    let s = acc * ");
    pl_wtext_f32(&t, p->scale);
    pl_wtext_add(&t,
                 ";\n"
                 "    sc[i] = s;\n    m = max(m, s);\n"
                 "  }\n"
                 "  red[lid] = m;\n"
                 "  workgroupBarrier();\n"
                 "  for (var s = T / 2u; s > 0u; s >>= 1u) {\n"
                 "    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }\n"
                 "    workgroupBarrier();\n"
                 "  }\n"
                 "  let mx = red[0];\n"
                 "  workgroupBarrier();\n"
                 "  var l = 0.0;\n"
                 "  for (var i = lid; i < np; i += T) { let e = exp(sc[i] - mx); sc[i] = e; l += e; }\n"
                 "  red[lid] = l;\n");
    pl_wtext_tree_sum(&t, T, 1);
    pl_wtext_add(&t,
                 "  let sum = red[0];\n"
                 "  for (var e = lid; e < NG * HD; e += T) {\n"
                 "    let grp = e / HD;\n    let d = e %% HD;\n"
                 "    var acc = 0.0;\n"
                 "    for (var i = grp; i < np; i += NG) {\n"
                 "      acc += sc[i] * unpack2x16float(vc[(row0 + i) * (HD / 2u) + d / 2u])[d & 1u];\n"
                 "    }\n"
                 "    ob[e] = acc;\n"
                 "  }\n"
                 "  workgroupBarrier();\n"
                 "  for (var d = lid; d < HD; d += T) {\n"
                 "    var acc = 0.0;\n"
                 "    for (var j = 0u; j < NG; j++) { acc += ob[j * HD + d]; }\n"
                 "    if (ns == 1u) {\n"
                 "      o[h * HD + d] = acc / sum;\n"
                 "    } else {\n"
                 "      let pb = (h * MAXS + sp) * (HD + 2u);\n"
                 "      part[pb + d] = acc;\n"
                 "      if (d == 0u) { part[pb + HD] = mx; part[pb + HD + 1u] = sum; }\n"
                 "    }\n"
                 "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

pl_status pl_wgsl_attn_combine(const pl_attn_combine_params *p, char **out) {
    *out = NULL;
    unsigned HD = p->head_dim, T = p->threads;
    if (!p->n_head || !HD || !p->ctx || !p->chunk || !pow2(T) || T > 1024)
        return pl_fail(PL_ERR_ARG, "attention combine: bad shape");
    pl_wtext t = {0};
    pl_wtext_add(&t, "%s", step_struct);
    pl_wtext_add(&t,
                 "const HD = %uu;\nconst MAXS = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> part: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> o: array<f32>;\n"
                 "@group(0) @binding(2) var<uniform> st: Step;\n"
                 "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n",
                 HD, max_splits(p->ctx, p->chunk), T);
    pl_wtext_group_index(&t, p->n_head);
    pl_wtext_add(&t,
                 "  let ns = st.n_splits;\n"
                 "  var mx = bitcast<f32>(0xff7fffffu);\n"
                 "  for (var s = 0u; s < ns; s++) { mx = max(mx, part[(g * MAXS + s) * (HD + 2u) + HD]); }\n"
                 "  var sum = 0.0;\n"
                 "  for (var s = 0u; s < ns; s++) {\n"
                 "    let pb = (g * MAXS + s) * (HD + 2u);\n"
                 "    sum += exp(part[pb + HD] - mx) * part[pb + HD + 1u];\n"
                 "  }\n"
                 "  for (var d = lid; d < HD; d += T) {\n"
                 "    var acc = 0.0;\n"
                 "    for (var s = 0u; s < ns; s++) {\n"
                 "      let pb = (g * MAXS + s) * (HD + 2u);\n"
                 "      acc += exp(part[pb + HD] - mx) * part[pb + d];\n"
                 "    }\n"
                 "    o[g * HD + d] = acc / sum;\n"
                 "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ top-k / argmax */

uint32_t pl_topk_groups(const pl_topk_params *p) {
    return p->pairs_in ? 1 : (p->n + p->chunk - 1) / p->chunk;
}

pl_status pl_wgsl_topk(const pl_topk_params *p, char **out) {
    *out = NULL;
    unsigned T = p->threads;
    if (!p->n || !p->k || p->k > 256 || !pow2(T) || T > 1024 || (!p->pairs_in && !p->chunk))
        return pl_fail(PL_ERR_ARG, "top-k: bad parameters (n %u, k %u)", p->n, p->k);
    unsigned chunk = p->pairs_in ? p->n : p->chunk;
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const N = %uu;\nconst KK = %uu;\nconst CH = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> inp: array<%s>;\n"
                 "@group(0) @binding(1) var<storage, read_write> outp: array<vec2<u32>>;\n",
                 p->n, p->k, chunk, T, p->pairs_in ? "vec2<u32>" : "f32");
    if (p->ids_out)
        pl_wtext_add(&t, "@group(0) @binding(2) var<storage, read_write> ids: array<u32>;\n");
    pl_wtext_add(&t,
                 "var<workgroup> rv: array<f32, T>;\n"
                 "var<workgroup> ri: array<u32, T>;\n"
                 /* a goes before b: larger value, or equal value and lower index */
                 "fn before(av: f32, ai: u32, bv: f32, bi: u32) -> bool {\n"
                 "  return av > bv || (av == bv && ai < bi);\n"
                 "}\n"
                 "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_index(&t, pl_topk_groups(p));
    pl_wtext_add(&t,
                 "  let lo = g * CH;\n  let hi = min(N, lo + CH);\n"
                 "  var pv = 0.0;\n  var pi = 0u;\n"
                 "  for (var r = 0u; r < KK; r++) {\n"
                 /* best of the entries that come after the previous pick */
                 "    var bv = bitcast<f32>(0xff7fffffu);\n    var bi = 0xffffffffu;\n    var found = false;\n"
                 "    for (var j = lo + lid; j < hi; j += T) {\n");
    if (p->pairs_in)
        pl_wtext_add(&t, "      let e = inp[j];\n      let v = bitcast<f32>(e.x);\n      let i = e.y;\n");
    else pl_wtext_add(&t, "      let v = inp[j];\n      let i = j;\n");
    pl_wtext_add(&t,
                 "      let after = r == 0u || before(pv, pi, v, i);\n"
                 "      if (after && (!found || before(v, i, bv, bi)) && v == v) {\n"
                 "        bv = v; bi = i; found = true;\n"
                 "      }\n"
                 "    }\n"
                 /* -inf from a run-time value: a constant -inf is rejected by WGSL */
                 "    if (!found) { bv = bitcast<f32>(0xff800000u | (lid & 0u)); bi = 0xffffffffu; }\n"
                 "    rv[lid] = bv;\n    ri[lid] = bi;\n"
                 "    workgroupBarrier();\n"
                 "    for (var s = T / 2u; s > 0u; s >>= 1u) {\n"
                 "      if (lid < s && before(rv[lid + s], ri[lid + s], rv[lid], ri[lid])) {\n"
                 "        rv[lid] = rv[lid + s]; ri[lid] = ri[lid + s];\n"
                 "      }\n"
                 "      workgroupBarrier();\n"
                 "    }\n"
                 "    pv = rv[0];\n    pi = ri[0];\n"
                 "    if (lid == 0u) {\n"
                 "      outp[g * KK + r] = vec2<u32>(bitcast<u32>(pv), pi);\n");
    if (p->ids_out) pl_wtext_add(&t, "      ids[r] = pi;\n");
    pl_wtext_add(&t,
                 "    }\n"
                 "    workgroupBarrier();\n"
                 "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ embedding */

pl_status pl_wgsl_embed(const pl_embed_params *p, char **out) {
    *out = NULL;
    unsigned parts = p->parts ? p->parts : 1, T = p->threads;
    int scaled = p->type == PL_GW_Q4_0 || p->type == PL_GW_Q8_0;
    if (!p->rows || !p->cols || !pow2(T) || T > 1024 || parts > PL_GEMV_MAX_PARTS ||
        (scaled && p->cols % 32) ||
        (parts > 1 && (!p->rows_per_part || (uint64_t)p->rows_per_part * parts < p->rows)))
        return pl_fail(PL_ERR_ARG, "embedding: bad shape %ux%u", p->rows, p->cols);
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const ROWS = %uu;\nconst K = %uu;\nconst NB = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> ids: array<u32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
                 p->rows, p->cols, p->cols / 32, T);
    const char *qt = scaled ? "vec4<u32>" : p->type == PL_GW_F16 ? "u32" : "f32";
    int b = 2;
    for (unsigned q = 0; q < parts; q++) {
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> q%u: array<%s>;\n", b++, q, qt);
        if (scaled)
            pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> s%u: array<u32>;\n", b++, q);
    }
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_index(&t, 1);
    pl_wtext_add(&t, "  let id = min(ids[%uu], ROWS - 1u);\n", p->slot);
    if (parts > 1)
        pl_wtext_add(&t, "  let part = id / %uu;\n  let r = id - part * %uu;\n", p->rows_per_part,
                     p->rows_per_part);
    else pl_wtext_add(&t, "  let part = 0u;\n  let r = id;\n");
    pl_wtext_add(&t, "  for (var c = lid; c < K; c += T) {\n    var v = 0.0;\n");
    for (unsigned q = 0; q < parts; q++) {
        pl_wtext_add(&t, "    %sif (part == %uu) {\n", q ? "else " : "", q);
        switch (p->type) {
        case PL_GW_Q4_0:
            pl_wtext_add(&t,
                         "      let blk = r * NB + c / 32u;\n      let j = c %% 32u;\n"
                         "      let w = q%u[blk][(j %% 16u) / 4u] >> (8u * (j %% 4u) + 4u * (j / 16u));\n"
                         "      v = (f32(w & 15u) - 8.0) * unpack2x16float(s%u[blk >> 1u])[blk & 1u];\n",
                         q, q);
            break;
        case PL_GW_Q8_0:
            pl_wtext_add(&t,
                         "      let blk = r * NB + c / 32u;\n      let j = c %% 32u;\n"
                         "      let w = q%u[2u * blk + j / 16u][(j %% 16u) / 4u];\n"
                         "      let sb = bitcast<i32>(w << (24u - 8u * (j %% 4u))) >> 24u;\n"
                         "      v = f32(sb) * unpack2x16float(s%u[blk >> 1u])[blk & 1u];\n",
                         q, q);
            break;
        case PL_GW_F16:
            pl_wtext_add(&t,
                         "      let e = r * K + c;\n"
                         "      v = unpack2x16float(q%u[e >> 1u])[e & 1u];\n",
                         q);
            break;
        case PL_GW_F32: pl_wtext_add(&t, "      v = q%u[r * K + c];\n", q); break;
        }
        pl_wtext_add(&t, "    }\n");
    }
    if (p->scale != 1.0f) {
        pl_wtext_add(&t, "    v = v * ");
        pl_wtext_f32(&t, p->scale);
        pl_wtext_add(&t, ";\n");
    }
    pl_wtext_add(&t, "    x[c] = v;\n  }\n}\n");
    return pl_wtext_finish(&t, out);
}

/* wgsl_ops.c - WGSL templates of the small per-token kernels: RMSNorm, RoPE, copies (KV
 * cache stores), split-K flash-decoding attention and its combine, top-k / argmax, the
 * embedding lookup from ids that stay on the GPU, and element-wise add / SwiGLU.
 * Bindings and arguments: see wgsl_gen.h. */
#include <stdio.h>
#include <string.h>

#include "wgsl_gen.h"
#include "wgsl_text.h"

static int pow2(unsigned v) {
    return v && !(v & (v - 1));
}

/* ------------------------------------------------------------------ RMSNorm */

pl_status pl_wgsl_rmsnorm(const pl_rmsnorm_params *p, char **out) {
    *out = NULL;
    if (!p->cols || !pow2(p->threads) || p->threads > 1024 || p->gate < 0 || p->gate > 2 ||
        (p->gate && !p->inplace))
        return pl_fail(PL_ERR_ARG, "RMSNorm: bad size %u / threads %u / gate %d", p->cols,
                       p->threads, p->gate);
    pl_wtext t = {0};
    pl_wtext_add(&t, "const C = %uu;\nconst T = %uu;\n", p->cols, p->threads);
    if (p->inplace) {
        pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
                         "@group(0) @binding(1) var<storage, read> w: array<f32>;\n");
        if (p->gate)
            pl_wtext_add(&t, "@group(0) @binding(2) var<storage, %s> z: array<f32>;\n",
                         p->gate == 1 ? "read_write" : "read");
        if (p->gate == 2)
            pl_wtext_add(&t, "@group(0) @binding(3) var<storage, read_write> gz: array<f32>;\n");
        pl_wtext_args(&t, 2 + (p->gate > 0) + (p->gate == 2));
    } else {
        pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
                         "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
                         "@group(0) @binding(2) var<storage, read> w: array<f32>;\n");
        pl_wtext_args(&t, 3);
    }
    pl_wtext_add(&t, "var<workgroup> red: array<f32, T>;\n");
    pl_wtext_reduce_decl(&t, p->threads, 1);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(&t, "args.a0");
    pl_wtext_add(&t, "  let o = g * C;\n"
                     "  var ss = 0.0;\n"
                     "  for (var j = lid; j < C; j += T) { ss += x[o + j] * x[o + j]; }\n"
                     "  red[lid] = ss;\n");
    pl_wtext_reduce(&t, p->threads, 1, 0);
    pl_wtext_add(&t, "  let inv = 1.0 / sqrt(red[0] / f32(C) + ");
    pl_wtext_f32(&t, p->eps);
    if (p->gate) { /* the gate as the element-wise SwiGLU computes it */
        pl_wtext_add(&t,
                     ");\n  for (var j = lid; j < C; j += T) {\n"
                     "    let v = (x[o + j] * inv) * w[j];\n"
                     "    x[o + j] = v;\n"
                     "    let zv = z[o + j];\n"
                     "    %s[o + j] = zv / (1.0 + exp(-zv)) * v;\n  }\n}\n",
                     p->gate == 1 ? "z" : "gz");
        return pl_wtext_finish(&t, out);
    }
    pl_wtext_add(
        &t, ");\n  for (var j = lid; j < C; j += T) { %s[o + j] = (x[o + j] * inv) * w[j]; }\n}\n",
        p->inplace ? "x" : "y");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ RoPE */

/* The body for one head of tensor `x` (heads `nh`, norm weight `nw` or NULL, stores). The
 * head index is `hh`, the workgroup's index within the tensor `gg`. */
static void rope_head(pl_wtext *t, const pl_rope_params_gpu *p, const char *x, const char *nh,
                      const char *nw, int store, int store_v) {
    pl_wtext_add(t,
                 "    let row = gg / %s;\n"
                 "    let hh = gg %% %s;\n",
                 nh, nh);
    /* the cache row of the position: the position itself, or (cols) in the column's slot */
    const char *crow = p->cols ? "crow" : "pos";
    if (p->cols)
        pl_wtext_add(t, "    let pos = u32(sq[2u * row + 1u]);\n"
                        "    let crow = u32(sq[2u * row]) * args.a2 + pos;\n");
    else
        pl_wtext_add(t, "    let pos = args.a0 + row;\n");
    pl_wtext_add(t,
                 "    let base = gg * HD;\n"
                 "    for (var d = lid; d < HD; d += T) { hv[d] = %s[base + d]; }\n"
                 "    workgroupBarrier();\n",
                 x);
    if (nw) {
        pl_wtext_add(t, "    var ss = 0.0;\n"
                        "    for (var d = lid; d < HD; d += T) { ss += hv[d] * hv[d]; }\n");
        if (p->sg) {
            pl_wtext_add(
                t, "    let s1 = subgroupAdd(ss);\n"
                   "    if (sid == 0u) { red[lid / ssz] = s1; }\n"
                   "    workgroupBarrier();\n"
                   "    var tot = 0.0;\n"
                   "    for (var j = 0u; j < (T + ssz - 1u) / ssz; j++) { tot += red[j]; }\n");
        } else {
            pl_wtext_add(t, "    red[lid] = ss;\n");
            pl_wtext_reduce(t, p->threads, 1, 0);
        }
        pl_wtext_add(t, "    let inv = 1.0 / sqrt(%s / f32(HD) + ", p->sg ? "tot" : "red[0]");
        pl_wtext_f32(t, p->eps);
        pl_wtext_add(t,
                     ");\n"
                     "    for (var d = lid; d < HD; d += T) { hv[d] = (hv[d] * inv) * %s[d]; }\n"
                     "    workgroupBarrier();\n",
                     nw);
    }
    /* each pair is read and written by one thread */
    pl_wtext_add(t,
                 "    for (var i = lid; i < HALF; i += T) {\n"
                 "      let ia = %s;\n      let ib = %s;\n"
                 "      let c = tab[(pos * HALF + i) * 2u];\n"
                 "      let s = tab[(pos * HALF + i) * 2u + 1u];\n"
                 "      let a = hv[ia];\n      let b = hv[ib];\n"
                 "      hv[ia] = a * c - b * s;\n      hv[ib] = a * s + b * c;\n"
                 "    }\n"
                 "    workgroupBarrier();\n"
                 "    for (var d = lid; d < HD; d += T) { %s[base + d] = hv[d]; }\n",
                 p->neox ? "i" : "2u * i", p->neox ? "i + HALF" : "2u * i + 1u", x);
    if (store && p->cache_f16)
        pl_wtext_add(t,
                     "    let kb = (%s * %s + hh) * (HD / 2u);\n"
                     "    for (var j = lid; j < HD / 2u; j += T) {\n"
                     "      kc[kb + j] = pack2x16float(vec2<f32>(hv[2u * j], hv[2u * j + 1u]));\n"
                     "    }\n",
                     crow, nh);
    else if (store)
        pl_wtext_add(
            t, "    for (var d = lid; d < HD; d += T) { kc[(%s * %s + hh) * HD + d] = hv[d]; }\n",
            crow, nh);
    if (store_v && p->cache_f16)
        pl_wtext_add(
            t,
            "    let vb = (%s * %s + hh) * (HDV / 2u);\n"
            "    let vs = gg * HDV;\n"
            "    for (var j = lid; j < HDV / 2u; j += T) {\n"
            "      vc[vb + j] = pack2x16float(vec2<f32>(v[vs + 2u * j], v[vs + 2u * j + 1u]));\n"
            "    }\n",
            crow, nh);
    else if (store_v)
        pl_wtext_add(t,
                     "    for (var d = lid; d < HDV; d += T) { vc[(%s * %s + hh) * HDV + d] = "
                     "v[gg * HDV + d]; }\n",
                     crow, nh);
}

pl_status pl_wgsl_rope(const pl_rope_params_gpu *p, char **out) {
    *out = NULL;
    unsigned HD = p->head_dim, HDV = p->head_dim_v;
    if (!p->n_heads || !HD || HD > 1024 || !p->rot_dim || p->rot_dim % 2 || p->rot_dim > HD ||
        !pow2(p->threads) || p->threads > 1024 || (p->store_v && !p->store) ||
        (p->pair_norm && !p->pair_heads) ||
        (p->store && p->cache_f16 && (HD % 2 || (p->store_v && (!HDV || HDV % 2)))))
        return pl_fail(PL_ERR_ARG, "RoPE: bad shape (%u heads of %u, rotating %u)", p->n_heads, HD,
                       p->rot_dim);
    const char *ct = p->cache_f16 ? "u32" : "f32";
    int pair = p->pair_heads > 0;
    pl_wtext t = {0};
    if (p->sg) pl_wtext_add(&t, "enable subgroups;\n");
    pl_wtext_add(&t,
                 "const NH = %uu;\nconst NH2 = %uu;\nconst HD = %uu;\nconst HDV = %uu;\n"
                 "const HALF = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read> tab: array<f32>;\n",
                 p->n_heads, pair ? p->pair_heads : 1, HD, HDV, p->rot_dim / 2, p->threads);
    int b = 2;
    if (p->norm)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> nw: array<f32>;\n", b++);
    if (pair) {
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> x2: array<f32>;\n", b++);
        if (p->pair_norm)
            pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> nw2: array<f32>;\n", b++);
    }
    if (p->store)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> kc: array<%s>;\n", b++,
                     ct);
    if (p->store_v) {
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> v: array<f32>;\n", b++);
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> vc: array<%s>;\n", b++,
                     ct);
    }
    if (p->cols)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> sq: array<i32>;\n", b++);
    pl_wtext_args(&t, b);
    pl_wtext_add(&t, "var<workgroup> hv: array<f32, HD>;\n");
    if (p->norm || p->pair_norm) {
        pl_wtext_add(&t, "var<workgroup> red: array<f32, T>;\n");
        if (!p->sg) pl_wtext_reduce_decl(&t, p->threads, 1);
    }
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS "%s) {\n",
                 p->sg ? ", @builtin(subgroup_invocation_id) sid: u32, "
                         "@builtin(subgroup_size) ssz: u32"
                       : "");
    pl_wtext_group_guard(&t, pair ? "(NH + NH2) * args.a1" : "NH * args.a1");
    /* the tensor is uniform over the workgroup, so the barriers inside stay legal */
    pl_wtext_add(&t, "  if (g < NH * args.a1) {\n    let gg = g;\n");
    rope_head(&t, p, "x", "NH", p->norm ? "nw" : NULL, !pair && p->store, !pair && p->store_v);
    if (pair) {
        pl_wtext_add(&t, "  } else {\n    let gg = g - NH * args.a1;\n");
        rope_head(&t, p, "x2", "NH2", p->pair_norm ? "nw2" : NULL, p->store, p->store_v);
    }
    pl_wtext_add(&t, "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ copy / convert */

static unsigned per_word(pl_gpu_etype e) {
    return e == PL_GE_F16 ? 2 : 1;
}

uint32_t pl_copy_groups(const pl_copy_params *p, uint32_t dst0, uint32_t count) {
    if (!count) return 0;
    unsigned e = per_word(p->dst);
    uint32_t words = (dst0 + count - 1) / e - dst0 / e + 1;
    return (words + p->threads - 1) / p->threads;
}

/* WGSL expression: source element `i` as the destination type (f32 value, f16 bits, i32). */
static const char *src_expr(pl_gpu_etype s, pl_gpu_etype d) {
    if (d == PL_GE_I32) return "src[i]";
    if (d == PL_GE_F32) return s == PL_GE_F16 ? "unpack2x16float(src[i >> 1u])[i & 1u]" : "src[i]";
    /* f16 destination: 16 bits */
    return s == PL_GE_F16 ? "((src[i >> 1u] >> (16u * (i & 1u))) & 0xffffu)"
                          : "(pack2x16float(vec2<f32>(src[i], 0.0)) & 0xffffu)";
}

pl_status pl_wgsl_copy(const pl_copy_params *p, char **out) {
    *out = NULL;
    if ((p->src == PL_GE_I32) != (p->dst == PL_GE_I32) || !pow2(p->threads) || p->threads > 1024)
        return pl_fail(PL_ERR_ARG, "copy: cannot convert between these types");
    static const char *arr[3] = {"f32", "u32", "i32"}; /* by pl_gpu_etype */
    pl_wtext t = {0};
    pl_wtext_add(&t, "const T = %uu;\n", p->threads);
    if (p->inplace) {
        pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read_write> src: array<%s>;\n",
                     arr[p->src]);
        pl_wtext_args(&t, 1);
    } else {
        pl_wtext_add(&t,
                     "@group(0) @binding(0) var<storage, read> src: array<%s>;\n"
                     "@group(0) @binding(1) var<storage, read_write> dst: array<%s>;\n",
                     arr[p->src], arr[p->dst]);
        pl_wtext_args(&t, 2);
    }
    const char *dst = p->inplace ? "src" : "dst";
    unsigned e = per_word(p->dst);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_add(&t,
                 "  let g = wid.x + wid.y * nwg.x;\n"
                 "  let w = args.a1 / %uu + g * T + lid;\n"
                 "  if (w > (args.a1 + args.a2 - 1u) / %uu) { return; }\n",
                 e, e);
    if (e == 1) {
        pl_wtext_add(&t, "  let i = w - args.a1 + args.a0;\n  %s[w] = %s;\n}\n", dst,
                     src_expr(p->src, p->dst));
        return pl_wtext_finish(&t, out);
    }
    /* an f16 word: replace the halves inside [a1, a1 + a2), keep the others' bits */
    pl_wtext_add(&t,
                 "  var word = %s[w];\n"
                 "  for (var h = 0u; h < 2u; h++) {\n"
                 "    let e = 2u * w + h;\n"
                 "    if (e >= args.a1 && e < args.a1 + args.a2) {\n"
                 "      let i = e - args.a1 + args.a0;\n"
                 "      let bits = %s;\n"
                 "      word = (word & ~(0xffffu << (16u * h))) | (bits << (16u * h));\n"
                 "    }\n"
                 "  }\n"
                 "  %s[w] = word;\n}\n",
                 dst, src_expr(p->src, p->dst), dst);
    return pl_wtext_finish(&t, out);
}

pl_status pl_wgsl_store_cols(const pl_store_cols_params *p, char **out) {
    *out = NULL;
    if (!p->d || (p->f16 && p->d % 2) || !pow2(p->threads) || p->threads > 1024)
        return pl_fail(PL_ERR_ARG, "column store: bad shape (%u values)", p->d);
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const D = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> src: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> kc: array<%s>;\n"
                 "@group(0) @binding(2) var<storage, read> sq: array<i32>;\n",
                 p->d, p->threads, p->f16 ? "u32" : "f32");
    pl_wtext_args(&t, 3);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(&t, "args.a1");
    pl_wtext_add(&t, "  let crow = u32(sq[2u * g]) * args.a0 + u32(sq[2u * g + 1u]);\n");
    if (p->f16)
        pl_wtext_add(&t, "  for (var j = lid; j < D / 2u; j += T) {\n"
                         "    kc[crow * (D / 2u) + j] = pack2x16float(vec2<f32>(src[g * D + 2u * "
                         "j], src[g * D + 2u * j + 1u]));\n"
                         "  }\n}\n");
    else
        pl_wtext_add(&t, "  for (var d = lid; d < D; d += T) { kc[crow * D + d] = src[g * D + d]; "
                         "}\n}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ Q8_0 KV cache */

/* WGSL: h16 - an f16 value held in an f32 (f16r's result, >= 0) to its 16 bits; hf - the
 * half `i` of word w as f32, subnormals kept (unpack2x16float may flush them). */
static const char *const q8_halves =
    "fn h16(v: f32) -> u32 {\n"
    "  if (v < 6.103515625e-05) { return u32(v * 16777216.0); }\n"
    "  let b = bitcast<u32>(v);\n"
    "  if (b > 0x7F800000u) { return 0x7E00u; }\n"
    "  if (b == 0x7F800000u) { return 0x7C00u; }\n"
    "  return (((b >> 23u) - 112u) << 10u) | ((b >> 13u) & 0x3FFu);\n"
    "}\n"
    "fn hf(w: u32, i: u32) -> f32 {\n"
    "  let h = (w >> (16u * i)) & 0xFFFFu;\n"
    "  let e = (h >> 10u) & 31u;\n"
    "  let m = h & 0x3FFu;\n"
    "  var v = bitcast<f32>(((e + 112u) << 23u) | (m << 13u));\n"
    "  if (e == 0u) { v = f32(m) * 5.9604644775390625e-08; }\n"
    "  if (e == 31u) { v = bitcast<f32>(0x7F800000u | (m << 13u)); }\n"
    "  return select(v, -v, (h & 0x8000u) != 0u);\n"
    "}\n";

uint32_t pl_kv_q8_groups(const pl_kv_q8_params *p, uint32_t blk0, uint32_t count) {
    if (!count) return 0;
    uint32_t words = (blk0 + count - 1) / 2 - blk0 / 2 + 1;
    return (words + p->threads - 1) / p->threads;
}

pl_status pl_wgsl_kv_q8(const pl_kv_q8_params *p, char **out) {
    *out = NULL;
    if (!pow2(p->threads) || p->threads > 1024)
        return pl_fail(PL_ERR_ARG, "Q8_0 KV store: bad %u threads", p->threads);
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;\n"
                 "@group(0) @binding(1) var<storage, read_write> kc: array<u32>;\n",
                 p->threads);
    pl_wtext_args(&t, 2);
    pl_wtext_add(&t, "%s%s", pl_wgsl_q8_helpers, q8_halves);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n"
                     "  let g = wid.x + wid.y * nwg.x;\n"
                     "  let w = args.a0 / 2u + g * T + lid;\n"
                     "  if (w > (args.a0 + args.a1 - 1u) / 2u) { return; }\n"
                     "  var word = kc[args.a2 + w];\n"
                     "  for (var h = 0u; h < 2u; h++) {\n"
                     "    let blk = 2u * w + h;\n"
                     "    if (blk >= args.a0 && blk < args.a0 + args.a1) {\n"
                     "      let sb = (blk - args.a0) * 8u;\n");
    for (int j = 0; j < 8; j++) pl_wtext_add(&t, "      let x%d = src[sb + %du];\n", j, j);
    pl_wgsl_quantize_block(&t, 0);
    for (int j = 0; j < 8; j++) pl_wtext_add(&t, "      kc[blk * 8u + %du] = p%d;\n", j, j);
    pl_wtext_add(&t, "      word = (word & ~(0xFFFFu << (16u * h))) | (h16(dx) << (16u * h));\n"
                     "    }\n"
                     "  }\n"
                     "  kc[args.a2 + w] = word;\n"
                     "}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ attention */

/* Scores: one thread per cache position, the key row read in 16-byte pieces (8 halves or
 * 4 floats) against q held in workgroup memory, so a thread's loads are independent and
 * few. Values: threads split into NG groups of positions, each thread one word of the row
 * (two halves, or one float), then the groups are summed. */
pl_status pl_wgsl_attn(const pl_attn_params_gpu *p, char **out) {
    *out = NULL;
    unsigned HD = p->head_dim, HDV = p->head_dim_v, T = p->threads;
    if (!p->n_head || !p->n_kv_head || p->n_head % p->n_kv_head || !HD || !HDV || HD > 1024 ||
        (p->kv_f16 && (HD % 2 || HDV % 2)) || (p->kv_q8 && (HD % 4 || HDV % 4 || !p->ctx)) ||
        (p->kv_q8 && p->kv_f16) || !p->chunk || p->chunk > 4096 || !pow2(T) || T > 1024 ||
        !p->max_splits || !p->block_rows || (p->cols && p->kv_q8))
        return pl_fail(PL_ERR_ARG, "attention: bad shape (heads %u/%u, head_dim %u/%u, chunk %u)",
                       p->n_head, p->n_kv_head, HD, HDV, p->chunk);
    unsigned kvd = p->n_kv_head * HD, vd = p->n_kv_head * HDV;
    /* key rows in 16-byte pieces when every row starts on one */
    unsigned per16 = p->kv_q8 ? 16 : p->kv_f16 ? 8 : 4;
    int kvec = HD % per16 == 0 && kvd % per16 == 0;
    /* values per word of a value row: 4 int8 quants, 2 halves or a float */
    unsigned per = p->kv_q8 ? 4 : p->kv_f16 ? 2 : 1;
    unsigned nw = HDV / per; /* value words per row */
    unsigned ng = T > nw ? T / nw : 1;
    const char *kt = kvec ? (p->kv_f16 || p->kv_q8 ? "vec4<u32>" : "vec4<f32>")
                          : (p->kv_f16 || p->kv_q8 ? "u32" : "f32");
    static const char *const acc_t[5] = {"", "f32", "vec2<f32>", "", "vec4<f32>"}; /* by per */
    pl_wtext t = {0};
    if (p->sg) pl_wtext_add(&t, "enable subgroups;\n");
    pl_wtext_add(&t,
                 "const HD = %uu;\nconst HDV = %uu;\nconst NH = %uu;\nconst GQ = %uu;\n"
                 "const KVD = %uu;\nconst VD = %uu;\nconst CH = %uu;\nconst MAXS = %uu;\n"
                 "const T = %uu;\nconst NW = %uu;\nconst NG = %uu;\n",
                 HD, HDV, p->n_head, p->n_head / p->n_kv_head, kvd, vd, p->chunk, p->max_splits, T,
                 nw, ng);
    pl_wtext_add(&t,
                 "@group(0) @binding(0) var<storage, read> q: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read> kc: array<%s>;\n"
                 "@group(0) @binding(2) var<storage, read> vc: array<%s>;\n"
                 "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n"
                 "@group(0) @binding(4) var<storage, read_write> part: array<f32>;\n",
                 kt, p->kv_f16 || p->kv_q8 ? "u32" : "f32");
    if (p->cols) pl_wtext_add(&t, "@group(0) @binding(5) var<storage, read> sq: array<i32>;\n");
    pl_wtext_args(&t, p->cols ? 6 : 5);
    if (p->kv_q8) /* the words where the caches' f16 scales start */
        pl_wtext_add(&t,
                     "const SK = %uu;\nconst SV = %uu;\n%s"
                     "fn vq(e: u32) -> vec4<f32> {\n"
                     "  return vec4<f32>(unpack4xI8(vc[e >> 2u])) * hf(vc[SV + (e >> 6u)], (e >> "
                     "5u) & 1u);\n"
                     "}\n",
                     p->ctx * (kvd / 4), p->ctx * (vd / 4), q8_halves);
    pl_wtext_add(&t,
                 "var<workgroup> sc: array<f32, CH>;\n"
                 "var<workgroup> red: array<f32, T>;\n"
                 "var<workgroup> qs: array<f32, %u>;\n"
                 "var<workgroup> ob: array<%s, NG * NW>;\n",
                 (HD + 3) & ~3u, acc_t[per]);
    if (p->sg)
        pl_wtext_add(&t, "var<workgroup> rm: array<f32, T>;\nvar<workgroup> rl: array<f32, T>;\n");
    else
        pl_wtext_reduce_decl(&t, T, 1);
    pl_wtext_add(&t,
                 "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS "%s) {\n"
                 "  let ns = args.a3;\n",
                 p->sg ? ", @builtin(subgroup_invocation_id) sid: u32, "
                         "@builtin(subgroup_size) ssz: u32"
                       : "");
    pl_wtext_group_guard(&t, "args.a2 * NH * ns");
    pl_wtext_add(&t, "  let r = g / (NH * ns);\n  let h = (g / ns) %% NH;\n  let sp = g %% ns;\n"
                     "  let qr = args.a1 + r;\n");
    if (p->cols) /* the column's position, and where its slot's rows start */
        pl_wtext_add(&t, "  let nk = u32(sq[2u * qr + 1u]) + 1u;\n"
                         "  let kb0 = u32(sq[2u * qr]) * args.a4;\n");
    else
        pl_wtext_add(&t, "  let nk = args.a0 + qr + 1u;\n");
    /* the split's positions p0 .. p1 - 1, held in cache rows r0 .. (a slot's, with cols) */
    pl_wtext_add(&t,
                 "  let kvh = h / GQ;\n"
                 "  let p0 = sp * CH;\n  let p1 = min(nk, p0 + CH);\n"
                 "  let r0 = %sp0;\n",
                 p->cols ? "kb0 + " : "");
    pl_wtext_add(&t, "  let np = select(0u, p1 - p0, p1 > p0);\n"
                     "  for (var d = lid; d < HD; d += T) { qs[d] = q[(qr * NH + h) * HD + d]; }\n"
                     "  workgroupBarrier();\n"
                     "  var m = bitcast<f32>(0xff7fffffu);\n"
                     "  for (var i = lid; i < np; i += T) {\n"
                     "    var acc = 0.0;\n");
    if (kvec && p->kv_q8) /* 16 quants a load (half a block: SK is a multiple of 4 words) */
        pl_wtext_add(&t,
                     "    let kb = ((r0 + i) * KVD + kvh * HD) / 16u;\n"
                     "    for (var j = 0u; j < HD / 16u; j++) {\n"
                     "      let b = (kb + j) >> 1u;\n"
                     "      let ks = hf(kc[SK / 4u + (b >> 3u)][(b >> 1u) & 3u], b & 1u);\n"
                     "      let w = kc[kb + j];\n"
                     "      let q0 = 16u * j;\n"
                     "      acc += dot(vec4<f32>(unpack4xI8(w.x)) * ks, vec4<f32>(qs[q0], qs[q0 + "
                     "1u], qs[q0 + 2u], qs[q0 + 3u]))\n"
                     "           + dot(vec4<f32>(unpack4xI8(w.y)) * ks, vec4<f32>(qs[q0 + 4u], "
                     "qs[q0 + 5u], qs[q0 + 6u], qs[q0 + 7u]))\n"
                     "           + dot(vec4<f32>(unpack4xI8(w.z)) * ks, vec4<f32>(qs[q0 + 8u], "
                     "qs[q0 + 9u], qs[q0 + 10u], qs[q0 + 11u]))\n"
                     "           + dot(vec4<f32>(unpack4xI8(w.w)) * ks, vec4<f32>(qs[q0 + 12u], "
                     "qs[q0 + 13u], qs[q0 + 14u], qs[q0 + 15u]));\n"
                     "    }\n");
    else if (p->kv_q8) /* dequantised (quant x scale: exact), the block's scale read once */
        pl_wtext_add(&t,
                     "    let kb = (r0 + i) * KVD + kvh * HD;\n"
                     "    var ks = 0.0;\n"
                     "    for (var j = 0u; j < HD / 4u; j++) {\n"
                     "      let e = kb + 4u * j;\n"
                     "      if (j == 0u || (e & 31u) == 0u) {\n"
                     "        ks = hf(kc[SK + (e >> 6u)], (e >> 5u) & 1u);\n"
                     "      }\n"
                     "      acc += dot(vec4<f32>(unpack4xI8(kc[e >> 2u])) * ks, vec4<f32>(qs[4u * "
                     "j], qs[4u * j + 1u], qs[4u * j + 2u], qs[4u * j + 3u]));\n"
                     "    }\n");
    else if (kvec && p->kv_f16)
        pl_wtext_add(
            &t, "    let kb = ((r0 + i) * KVD + kvh * HD) / 8u;\n"
                "    for (var j = 0u; j < HD / 8u; j++) {\n"
                "      let w = kc[kb + j];\n"
                "      let qa = vec4<f32>(qs[8u * j], qs[8u * j + 1u], qs[8u * j + 2u], qs[8u * j "
                "+ 3u]);\n"
                "      let qb = vec4<f32>(qs[8u * j + 4u], qs[8u * j + 5u], qs[8u * j + 6u], qs[8u "
                "* j + 7u]);\n"
                "      acc += dot(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)), qa)\n"
                "           + dot(vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)), qb);\n"
                "    }\n");
    else if (kvec)
        pl_wtext_add(&t, "    let kb = ((r0 + i) * KVD + kvh * HD) / 4u;\n"
                         "    for (var j = 0u; j < HD / 4u; j++) {\n"
                         "      acc += dot(kc[kb + j], vec4<f32>(qs[4u * j], qs[4u * j + 1u], "
                         "qs[4u * j + 2u], qs[4u * j + 3u]));\n"
                         "    }\n");
    else if (p->kv_f16)
        pl_wtext_add(&t, "    let kb = ((r0 + i) * KVD + kvh * HD) / 2u;\n"
                         "    for (var j = 0u; j < HD / 2u; j++) {\n"
                         "      let k2 = unpack2x16float(kc[kb + j]);\n"
                         "      acc += qs[2u * j] * k2.x + qs[2u * j + 1u] * k2.y;\n"
                         "    }\n");
    else
        pl_wtext_add(&t, "    let kb = (r0 + i) * KVD + kvh * HD;\n"
                         "    for (var d = 0u; d < HD; d++) { acc += qs[d] * kc[kb + d]; }\n");
    pl_wtext_add(&t, "    let s = acc * ");
    pl_wtext_f32(&t, p->scale);
    pl_wtext_add(&t, ";\n"
                     "    sc[i] = s;\n    m = max(m, s);\n"
                     "  }\n");
    if (p->sg) {
        /* each thread's (max, sum of exp) over its own positions, merged in subgroups, the
         * subgroups' pairs merged by every thread after one barrier */
        pl_wtext_add(&t, "  var l = 0.0;\n"
                         "  for (var i = lid; i < np; i += T) { l += exp(sc[i] - m); }\n"
                         "  let msg = subgroupMax(m);\n"
                         "  let lsg = subgroupAdd(l * exp(m - msg));\n"
                         "  if (sid == 0u) { rm[lid / ssz] = msg; rl[lid / ssz] = lsg; }\n"
                         "  workgroupBarrier();\n"
                         "  let nsg = (T + ssz - 1u) / ssz;\n"
                         "  var mx = rm[0];\n"
                         "  for (var j = 1u; j < nsg; j++) { mx = max(mx, rm[j]); }\n"
                         "  var sum = 0.0;\n"
                         "  for (var j = 0u; j < nsg; j++) { sum += rl[j] * exp(rm[j] - mx); }\n"
                         "  for (var i = lid; i < np; i += T) { sc[i] = exp(sc[i] - mx); }\n"
                         "  workgroupBarrier();\n");
    } else {
        pl_wtext_add(&t, "  red[lid] = m;\n");
        pl_wtext_reduce(&t, T, 1, 1);
        pl_wtext_add(
            &t,
            "  let mx = red[0];\n"
            "  workgroupBarrier();\n"
            "  var l = 0.0;\n"
            "  for (var i = lid; i < np; i += T) { let e = exp(sc[i] - mx); sc[i] = e; l += e; }\n"
            "  red[lid] = l;\n");
        pl_wtext_reduce(&t, T, 1, 0);
        pl_wtext_add(&t, "  let sum = red[0];\n");
    }
    pl_wtext_add(&t,
                 "  for (var e = lid; e < NG * NW; e += T) {\n"
                 "    let grp = e / NW;\n    let w = e %% NW;\n"
                 "    var acc = %s;\n"
                 "    var i = grp;\n",
                 p->kv_q8    ? "vec4<f32>(0.0)"
                 : p->kv_f16 ? "vec2<f32>(0.0)"
                             : "0.0");
    /* four positions per turn, their loads issued before any is used; then the rest */
    const char *vload = p->kv_q8    ? "vq((r0 + %s) * VD + kvh * HDV + 4u * w)"
                        : p->kv_f16 ? "unpack2x16float(vc[((r0 + %s) * VD + kvh * HDV) / 2u + w])"
                                    : "vc[(r0 + %s) * VD + kvh * HDV + w]";
    pl_wtext_add(&t, "    for (; i + 3u * NG < np; i += 4u * NG) {\n");
    const char *pos[4] = {"i", "i + NG", "i + 2u * NG", "i + 3u * NG"};
    for (int u = 0; u < 4; u++) {
        pl_wtext_add(&t, "      let v%d = ", u);
        pl_wtext_add(&t, vload, pos[u]);
        pl_wtext_add(&t, ";\n");
    }
    pl_wtext_add(
        &t,
        "      acc += sc[i] * v0 + sc[i + NG] * v1 + sc[i + 2u * NG] * v2 + sc[i + 3u * NG] * v3;\n"
        "    }\n"
        "    for (; i < np; i += NG) {\n"
        "      acc += sc[i] * ");
    pl_wtext_add(&t, vload, "i");
    pl_wtext_add(&t, ";\n"
                     "    }\n"
                     "    ob[e] = acc;\n"
                     "  }\n"
                     "  workgroupBarrier();\n"
                     "  for (var w = lid; w < NW; w += T) {\n"
                     "    var acc = ob[w];\n"
                     "    for (var j = 1u; j < NG; j++) { acc += ob[j * NW + w]; }\n");
    /* the value dims of word w: per * w + c */
    for (unsigned c = 0; c < per; c++) {
        char v[16], d[24];
        snprintf(v, sizeof v, per > 1 ? "acc[%u]" : "acc", c);
        snprintf(d, sizeof d, per > 1 ? "%uu * w + %uu" : "w", per, c);
        pl_wtext_add(&t,
                     "    if (ns == 1u) {\n"
                     "      o[(qr * NH + h) * HDV + %s] = %s / sum;\n"
                     "    } else {\n"
                     "      part[((r * NH + h) * MAXS + sp) * (HDV + 2u) + %s] = %s;\n"
                     "    }\n",
                     d, v, d, v);
    }
    pl_wtext_add(&t, "    if (w == 0u && ns > 1u) {\n"
                     "      let pb = ((r * NH + h) * MAXS + sp) * (HDV + 2u);\n"
                     "      part[pb + HDV] = mx;\n      part[pb + HDV + 1u] = sum;\n"
                     "    }\n"
                     "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

pl_status pl_wgsl_attn_combine(const pl_attn_combine_params *p, char **out) {
    *out = NULL;
    unsigned HDV = p->head_dim_v, T = p->threads;
    if (!p->n_head || !HDV || !p->max_splits || !pow2(T) || T > 1024)
        return pl_fail(PL_ERR_ARG, "attention combine: bad shape");
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const HDV = %uu;\nconst NH = %uu;\nconst MAXS = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> part: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> o: array<f32>;\n",
                 HDV, p->n_head, p->max_splits, T);
    pl_wtext_args(&t, 2);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(&t, "args.a2 * NH");
    pl_wtext_add(
        &t, "  let ns = args.a3;\n"
            "  let qr = args.a1 + g / NH;\n  let h = g %% NH;\n"
            "  let pb0 = g * MAXS * (HDV + 2u);\n"
            "  var mx = bitcast<f32>(0xff7fffffu);\n"
            "  for (var s = 0u; s < ns; s++) { mx = max(mx, part[pb0 + s * (HDV + 2u) + HDV]); }\n"
            "  var sum = 0.0;\n"
            "  for (var s = 0u; s < ns; s++) {\n"
            "    let pb = pb0 + s * (HDV + 2u);\n"
            "    sum += exp(part[pb + HDV] - mx) * part[pb + HDV + 1u];\n"
            "  }\n"
            "  for (var d = lid; d < HDV; d += T) {\n"
            "    var acc = 0.0;\n"
            "    for (var s = 0u; s < ns; s++) {\n"
            "      let pb = pb0 + s * (HDV + 2u);\n"
            "      acc += exp(part[pb + HDV] - mx) * part[pb + d];\n"
            "    }\n"
            "    o[(qr * NH + h) * HDV + d] = acc / sum;\n"
            "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ top-k / argmax */

uint32_t pl_topk_chunks(const pl_topk_params *p) {
    return (p->n + p->chunk - 1) / p->chunk;
}

pl_status pl_wgsl_topk(const pl_topk_params *p, char **out) {
    *out = NULL;
    if (p->rank) return pl_wgsl_topk_rank(p, out);
    unsigned T = p->threads;
    if (!p->n || !p->k || p->k > 1024 || !pow2(T) || T > 1024 || (!p->stage2 && !p->chunk) ||
        (p->direct && (p->stage2 || pl_topk_chunks(p) != 1)) ||
        (p->softmax && (!p->vals || !(p->stage2 || p->direct))) || p->gate_cols)
        return pl_fail(PL_ERR_ARG, "top-k: bad parameters (n %u, k %u)", p->n, p->k);
    unsigned chunk = p->stage2 ? p->n : p->chunk, nc = p->stage2 ? 1 : pl_topk_chunks(p);
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const N = %uu;\nconst KK = %uu;\nconst CH = %uu;\nconst NC = %uu;\n"
                 "const T = %uu;\n",
                 p->n, p->k, chunk, nc, T);
    int b = 0;
    if (p->stage2 || p->direct) {
        pl_wtext_add(&t,
                     "@group(0) @binding(0) var<storage, read> inp: array<%s>;\n"
                     "@group(0) @binding(1) var<storage, read_write> ids: array<i32>;\n",
                     p->direct ? "f32" : "vec2<u32>");
        b = 2;
        if (p->vals)
            pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> vals: array<f32>;\n",
                         b++);
    } else {
        pl_wtext_add(&t,
                     "@group(0) @binding(0) var<storage, read> inp: array<f32>;\n"
                     "@group(0) @binding(1) var<storage, read_write> outp: array<vec2<u32>>;\n");
        b = 2;
    }
    pl_wtext_args(&t, b);
    unsigned parts = T < 8 ? T : 8;
    pl_wtext_add(&t,
                 "const PARTS = %uu;\nconst RUN = %uu;\n"
                 "var<workgroup> rv: array<f32, T>;\n"
                 "var<workgroup> ri: array<u32, T>;\n"
                 "var<workgroup> rv2: array<f32, PARTS>;\n"
                 "var<workgroup> ri2: array<u32, PARTS>;\n"
                 /* a goes before b: larger value, or equal value and lower index */
                 "fn before(av: f32, ai: u32, bv: f32, bi: u32) -> bool {\n"
                 "  return av > bv || (av == bv && ai < bi);\n"
                 "}\n"
                 "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n",
                 parts, T / parts);
    pl_wtext_group_guard(&t, "args.a1 * NC");
    pl_wtext_add(&t,
                 "  let r = g / NC;\n"
                 "  let lo = %s;\n  let hi = min(lo + CH, %s);\n"
                 "  var pv = 0.0;\n  var pi = 0u;\n"
                 "  for (var rd = 0u; rd < KK; rd++) {\n"
                 /* best of the entries that come after the previous pick */
                 "    var bv = 0.0;\n    var bi = 0xffffffffu;\n    var found = false;\n"
                 "    for (var j = lo + lid; j < hi; j += T) {\n",
                 p->stage2 ? "r * N" : "(args.a0 + r) * N + (g % NC) * CH",
                 p->stage2 ? "(r + 1u) * N" : "(args.a0 + r + 1u) * N");
    if (p->stage2)
        pl_wtext_add(
            &t, "      let e = inp[j];\n      let v = bitcast<f32>(e.x);\n      let i = e.y;\n");
    else
        pl_wtext_add(&t, "      let v = inp[j];\n      let i = j - (args.a0 + r) * N;\n");
    pl_wtext_add(
        &t, "      let after = rd == 0u || before(pv, pi, v, i);\n"
            "      if (after && (!found || before(v, i, bv, bi)) && v == v && i != 0xffffffffu) {\n"
            "        bv = v; bi = i; found = true;\n"
            "      }\n"
            "    }\n"
            /* -inf from a run-time value: a constant -inf is rejected by WGSL */
            "    if (!found) { bv = bitcast<f32>(0xff800000u | (lid & 0u)); bi = 0xffffffffu; }\n"
            "    rv[lid] = bv;\n    ri[lid] = bi;\n"
            "    workgroupBarrier();\n"
            /* two levels: PARTS threads scan T / PARTS entries each, then everyone
             * takes the best of the PARTS (no loop around a barrier, see wgsl_text.c) */
            "    for (var e = lid; e < PARTS; e += T) {\n"
            "      var cv = rv[e * RUN];\n      var ci = ri[e * RUN];\n"
            "      for (var j = 1u; j < RUN; j++) {\n"
            "        if (before(rv[e * RUN + j], ri[e * RUN + j], cv, ci)) { cv = rv[e * RUN + j]; "
            "ci = ri[e * RUN + j]; }\n"
            "      }\n"
            "      rv2[e] = cv;\n      ri2[e] = ci;\n"
            "    }\n"
            "    workgroupBarrier();\n"
            "    pv = rv2[0];\n    pi = ri2[0];\n"
            "    for (var j = 1u; j < PARTS; j++) {\n"
            "      if (before(rv2[j], ri2[j], pv, pi)) { pv = rv2[j]; pi = ri2[j]; }\n"
            "    }\n"
            "    if (lid == 0u) {\n");
    if (p->stage2 || p->direct) {
        pl_wtext_add(&t, "      ids[%s + r * KK + rd] = bitcast<i32>(pi);\n",
                     p->direct ? "args.a2" : "args.a0");
        if (p->vals) pl_wtext_add(&t, "      vals[r * KK + rd] = pv;\n");
    } else {
        pl_wtext_add(&t, "      outp[g * KK + rd] = vec2<u32>(bitcast<u32>(pv), pi);\n");
    }
    pl_wtext_add(&t, "    }\n"
                     "    workgroupBarrier();\n"
                     "  }\n");
    if (p->softmax) /* thread 0 wrote the k values: it normalises them in place */
        pl_wtext_add(
            &t, "  if (lid == 0u) {\n"
                "    let o = r * KK;\n"
                "    var m = vals[o];\n"
                "    for (var j = 1u; j < KK; j++) { m = max(m, vals[o + j]); }\n"
                "    var s = 0.0;\n"
                "    for (var j = 0u; j < KK; j++) { s += exp(vals[o + j] - m); }\n"
                "    for (var j = 0u; j < KK; j++) { vals[o + j] = exp(vals[o + j] - m) / s; }\n"
                "  }\n");
    pl_wtext_add(&t, "}\n");
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
                 "@group(0) @binding(0) var<storage, read> ids: array<i32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
                 p->rows, p->cols, p->cols / 32, T);
    const char *qt = scaled ? "vec4<u32>" : p->type == PL_GW_F16 ? "u32" : "f32";
    int b = 2;
    for (unsigned q = 0; q < parts; q++) {
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> q%u: array<%s>;\n", b++, q, qt);
        if (scaled)
            pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> s%u: array<u32>;\n", b++,
                         q);
    }
    pl_wtext_args(&t, b);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(&t, "args.a0");
    pl_wtext_add(&t, "  let idv = ids[g];\n"
                     "  let ok = idv >= 0 && u32(idv) < ROWS;\n"
                     "  let id = select(0u, u32(idv), ok);\n");
    if (parts > 1)
        pl_wtext_add(&t, "  let part = id / %uu;\n  let r = id - part * %uu;\n", p->rows_per_part,
                     p->rows_per_part);
    else
        pl_wtext_add(&t, "  let part = 0u;\n  let r = id;\n");
    pl_wtext_add(&t, "  for (var c = lid; c < K; c += T) {\n    var v = 0.0;\n");
    for (unsigned q = 0; q < parts; q++) {
        pl_wtext_add(&t, "    %sif (part == %uu) {\n", q ? "else " : "", q);
        switch (p->type) {
        case PL_GW_Q4_0:
            pl_wtext_add(
                &t,
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
    pl_wtext_add(&t, "    x[g * K + c] = select(0.0, v, ok);\n  }\n}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ element-wise */

pl_status pl_wgsl_ew(const pl_ew_params *p, char **out) {
    *out = NULL;
    if (p->alias < 0 || p->alias > 3 || !pow2(p->threads) || p->threads > 1024)
        return pl_fail(PL_ERR_ARG, "element-wise: bad parameters");
    /* names of a, b and out in the shader: aliased ones share a binding */
    static const char *names[4][3] = {
        {"a", "b", "o"}, {"a", "b", "a"}, {"a", "b", "b"}, {"a", "a", "a"}};
    const char *const *n = names[p->alias];
    pl_wtext t = {0};
    pl_wtext_add(&t, "const T = %uu;\n", p->threads);
    int b = 0;
    pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, %s> a: array<f32>;\n", b++,
                 p->alias == 1 || p->alias == 3 ? "read_write" : "read");
    if (p->alias != 3)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, %s> b: array<f32>;\n", b++,
                     p->alias == 2 ? "read_write" : "read");
    if (p->alias == 0)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> o: array<f32>;\n", b++);
    pl_wtext_args(&t, b);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n"
                     "  let i = (wid.x + wid.y * nwg.x) * T + lid;\n"
                     "  if (i >= args.a0) { return; }\n");
    if (p->op == PL_EW_ADD)
        pl_wtext_add(&t, "  %s[i] = %s[i] + %s[i];\n}\n", n[2], n[0], n[1]);
    else
        pl_wtext_add(&t, "  let x = %s[i];\n  %s[i] = x / (1.0 + exp(-x)) * %s[i];\n}\n", n[0],
                     n[2], n[1]);
    return pl_wtext_finish(&t, out);
}

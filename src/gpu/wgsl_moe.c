/* wgsl_moe.c - WGSL templates of the mixture-of-experts kernels besides the gathered
 * expert GEMV (wgsl_gemv.c, `ids`) and top-k (wgsl_ops.c): the row softmax of the router
 * and the weighted combine of the experts' outputs. Bindings: see wgsl_gen.h. */
#include "wgsl_gen.h"
#include "wgsl_text.h"

static int pow2(unsigned v) {
    return v && !(v & (v - 1));
}

pl_status pl_wgsl_softmax(const pl_softmax_params *p, char **out) {
    *out = NULL;
    if (!p->cols || !pow2(p->threads) || p->threads > 1024)
        return pl_fail(PL_ERR_ARG, "softmax: bad size %u / threads %u", p->cols, p->threads);
    pl_wtext t = {0};
    pl_wtext_add(&t, "const C = %uu;\nconst T = %uu;\n", p->cols, p->threads);
    if (p->inplace) {
        pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n");
        pl_wtext_args(&t, 1);
    } else {
        pl_wtext_add(&t, "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
                         "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n");
        pl_wtext_args(&t, 2);
    }
    pl_wtext_add(&t, "var<workgroup> red: array<f32, T>;\n");
    pl_wtext_reduce_decl(&t, p->threads, 1);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(&t, "args.a0");
    pl_wtext_add(&t, "  let o = g * C;\n"
                     "  var m = bitcast<f32>(0xff800000u | (lid & 0u));\n"
                     "  for (var j = lid; j < C; j += T) { m = max(m, x[o + j]); }\n"
                     "  red[lid] = m;\n");
    pl_wtext_reduce(&t, p->threads, 1, 1);
    pl_wtext_add(&t, "  let mx = red[0];\n"
                     "  workgroupBarrier();\n"
                     "  var s = 0.0;\n"
                     "  for (var j = lid; j < C; j += T) { s += exp(x[o + j] - mx); }\n"
                     "  red[lid] = s;\n");
    pl_wtext_reduce(&t, p->threads, 1, 0);
    pl_wtext_add(
        &t,
        "  let sum = red[0];\n"
        "  for (var j = lid; j < C; j += T) { %s[o + j] = exp(x[o + j] - mx) / sum; }\n}\n",
        p->inplace ? "x" : "y");
    return pl_wtext_finish(&t, out);
}

pl_status pl_wgsl_moe_combine(const pl_moe_combine_params *p, char **out) {
    *out = NULL;
    if (!p->cols || !p->n_used || !pow2(p->threads) || p->threads > 1024 || (p->shared && !p->acc))
        return pl_fail(PL_ERR_ARG, "MoE combine: bad shape %u x %u", p->n_used, p->cols);
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const C = %uu;\nconst NU = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> y: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read> wts: array<f32>;\n"
                 "@group(0) @binding(2) var<storage, read_write> o: array<f32>;\n",
                 p->cols, p->n_used, p->threads);
    if (p->shared)
        pl_wtext_add(&t, "@group(0) @binding(3) var<storage, read> ysh: array<f32>;\n"
                         "@group(0) @binding(4) var<storage, read> gt: array<f32>;\n");
    pl_wtext_args(&t, p->shared ? 5 : 3);
    pl_wtext_add(&t,
                 "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n"
                 "  let i = (wid.x + wid.y * nwg.x) * T + lid;\n"
                 "  if (i >= args.a0 * C) { return; }\n"
                 "  let tok = i / C;\n  let c = i %% C;\n"
                 "  var acc = 0.0;\n"
                 "  for (var j = 0u; j < NU; j++) {\n"
                 "    let s = tok * NU + j;\n"
                 "    acc += wts[s] * y[s * C + c];\n"
                 "  }\n"
                 "  let r = %sacc;\n",
                 p->acc ? "o[i] + " : "");
    if (p->shared) /* the two roundings of combine then sigmoid_mul, in that order */
        pl_wtext_add(&t, "  o[i] = r + ysh[i] * (1.0 / (1.0 + exp(-gt[tok])));\n}\n");
    else
        pl_wtext_add(&t, "  o[i] = r;\n}\n");
    return pl_wtext_finish(&t, out);
}

/* The router's top-k by rank (pl_topk_params.rank): workgroup r puts row args.a0 + r in
 * workgroup memory (as vec4s, padded with -inf), counts its values that are not NaN, and
 * each thread counts, for each of its values, the values that go before it: larger, or
 * equal at a lower index (one comparison each, four per load; NaN compares false both
 * ways, so it neither counts nor is placed). A value whose count is under k is the pick of
 * that place. Places past the number of values get (-1, -inf), as the reduction kernel
 * and pl_gpu_ref_topk do. Why not the reduction kernel: it runs k rounds of a scan and two
 * barriers each (16 barriers for the MoE's top-8), the place count runs one pass. */
pl_status pl_wgsl_topk_rank(const pl_topk_params *p, char **out) {
    *out = NULL;
    unsigned T = p->threads;
    if (!p->rank || !p->direct || p->stage2 || !p->n || p->n > PL_TOPK_RANK_MAX || !p->k ||
        p->k > PL_TOPK_RANK_MAX || !pow2(T) || T < 8 || T > 1024 || (p->softmax && !p->vals))
        return pl_fail(PL_ERR_ARG, "top-k by rank: bad parameters (n %u, k %u)", p->n, p->k);
    unsigned n4 = (p->n + 3) / 4;
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const N = %uu;\nconst N4 = %uu;\nconst KK = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> inp: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read_write> ids: array<i32>;\n",
                 p->n, n4, p->k, T);
    int b = 2;
    if (p->vals)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read_write> vals: array<f32>;\n",
                     b++);
    if (p->gate_cols) {
        pl_wtext_add(&t,
                     "const GC = %uu;\n"
                     "@group(0) @binding(%d) var<storage, read> gx: array<f32>;\n"
                     "@group(0) @binding(%d) var<storage, read> gw: array<f32>;\n"
                     "@group(0) @binding(%d) var<storage, read_write> gout: array<f32>;\n"
                     "var<workgroup> red: array<f32, T>;\n",
                     p->gate_cols, b, b + 1, b + 2);
        b += 3;
        pl_wtext_reduce_decl(&t, T, 1);
    }
    pl_wtext_args(&t, b);
    pl_wtext_add(&t, "var<workgroup> sv: array<vec4<f32>, N4>;\n"
                     "var<workgroup> pk: array<f32, KK>;\n"
                     "var<workgroup> nn: atomic<u32>;\n"
                     /* NaN by its bits: a compiler may fold v != v away (WGSL lets it assume no
                      * NaN) */
                     "fn num(v: f32) -> bool {\n"
                     "  return (bitcast<u32>(v) & 0x7fffffffu) <= 0x7f800000u;\n"
                     "}\n"
                     "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(&t, "args.a1");
    pl_wtext_add(&t, "  let r = g;\n  let base = (args.a0 + r) * N;\n"
                     "  if (lid == 0u) { atomicStore(&nn, 0u); }\n"
                     "  workgroupBarrier();\n"
                     "  var cnt = 0u;\n"
                     "  for (var j = lid; j < N4; j += T) {\n"
                     "    var w = vec4<f32>(0.0);\n"
                     "    for (var c = 0u; c < 4u; c++) {\n"
                     /* padding -inf past the row: it never goes before a value (the
                      * equal ones are at a lower index) */
                     "      var v = bitcast<f32>(0xff800000u | (lid & 0u));\n"
                     "      if (j * 4u + c < N) {\n"
                     "        v = inp[base + j * 4u + c];\n"
                     "        if (num(v)) { cnt++; }\n"
                     "      }\n"
                     "      w[c] = v;\n"
                     "    }\n"
                     "    sv[j] = w;\n"
                     "  }\n"
                     "  if (cnt > 0u) { atomicAdd(&nn, cnt); }\n"
                     "  workgroupBarrier();\n"
                     "  let nv = atomicLoad(&nn);\n"
                     "  for (var i = lid; i < N; i += T) {\n"
                     "    let v = sv[i / 4u][i %% 4u];\n"
                     "    if (!num(v)) { continue; }\n"
                     "    let vv = vec4<f32>(v);\n"
                     "    let iv = vec4<u32>(i);\n"
                     "    var place = vec4<u32>(0u);\n"
                     "    for (var j = 0u; j < N4; j++) {\n"
                     "      let w = sv[j];\n"
                     "      let at = vec4<u32>(j * 4u) + vec4<u32>(0u, 1u, 2u, 3u);\n"
                     "      place += select(vec4<u32>(0u), vec4<u32>(1u), (w > vv) | ((w == vv) & "
                     "(at < iv)));\n"
                     "    }\n"
                     "    let pl = place.x + place.y + place.z + place.w;\n"
                     "    if (pl < KK) {\n"
                     "      ids[args.a2 + r * KK + pl] = bitcast<i32>(i);\n"
                     "      pk[pl] = v;\n");
    if (p->vals && !p->softmax) pl_wtext_add(&t, "      vals[r * KK + pl] = v;\n");
    pl_wtext_add(&t, "    }\n  }\n"
                     "  for (var s = lid; s < KK; s += T) {\n"
                     "    if (s >= nv) {\n"
                     "      ids[args.a2 + r * KK + s] = -1;\n"
                     /* -inf from a run-time value: a constant -inf is rejected by WGSL */
                     "      pk[s] = bitcast<f32>(0xff800000u | (s & 0u));\n");
    if (p->vals && !p->softmax) pl_wtext_add(&t, "      vals[r * KK + s] = pk[s];\n");
    pl_wtext_add(&t, "    }\n  }\n");
    if (p->gate_cols) { /* the shared expert's gate: one dot product of the row's x */
        pl_wtext_add(&t, "  var ga = 0.0;\n"
                         "  let gb = (args.a0 + r) * GC;\n"
                         "  for (var c = lid; c < GC; c += T) { ga += gw[c] * gx[gb + c]; }\n"
                         "  red[lid] = ga;\n");
        pl_wtext_reduce(&t, T, 1, 0);
        pl_wtext_add(&t, "  if (lid == 0u) { gout[args.a0 + r] = red[0]; }\n");
    }
    if (p->softmax) /* the reduction kernel's formula, over the k picks in order */
        pl_wtext_add(&t, "  workgroupBarrier();\n"
                         "  if (lid == 0u) {\n"
                         "    let o = r * KK;\n"
                         "    var m = pk[0];\n"
                         "    for (var j = 1u; j < KK; j++) { m = max(m, pk[j]); }\n"
                         "    var s = 0.0;\n"
                         "    for (var j = 0u; j < KK; j++) { s += exp(pk[j] - m); }\n"
                         "    for (var j = 0u; j < KK; j++) { vals[o + j] = exp(pk[j] - m) / s; }\n"
                         "  }\n");
    pl_wtext_add(&t, "}\n");
    return pl_wtext_finish(&t, out);
}

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
    if (!p->cols || !p->n_used || !pow2(p->threads) || p->threads > 1024)
        return pl_fail(PL_ERR_ARG, "MoE combine: bad shape %u x %u", p->n_used, p->cols);
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const C = %uu;\nconst NU = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> y: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read> wts: array<f32>;\n"
                 "@group(0) @binding(2) var<storage, read_write> o: array<f32>;\n",
                 p->cols, p->n_used, p->threads);
    pl_wtext_args(&t, 3);
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
                 "  o[i] = %sacc;\n}\n",
                 p->acc ? "o[i] + " : "");
    return pl_wtext_finish(&t, out);
}

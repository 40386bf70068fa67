/* wgsl_ssm.c - WGSL templates of the Gated DeltaNet kernels: the sigmoid gate, the causal
 * depthwise conv1d (+ SiLU) of the linear-attention input, and the delta-rule recurrence
 * with its state held in registers across the tokens of a call. Bindings: see wgsl_gen.h. */
#include "wgsl_gen.h"
#include "wgsl_text.h"

static int pow2(unsigned v) {
    return v && !(v & (v - 1));
}

/* ------------------------------------------------------------------ sigmoid gate */

pl_status pl_wgsl_sigmoid_mul(const pl_sigmoid_mul_params *p, char **out) {
    *out = NULL;
    if (!p->cols || !pow2(p->threads) || p->threads > 1024 || (p->inplace && p->acc))
        return pl_fail(PL_ERR_ARG, "sigmoid_mul: bad parameters");
    pl_wtext t = {0};
    pl_wtext_add(&t, "const C = %uu;\nconst T = %uu;\n", p->cols, p->threads);
    pl_wtext_add(&t,
                 "@group(0) @binding(0) var<storage, %s> x: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read> gt: array<f32>;\n",
                 p->inplace ? "read_write" : "read");
    if (!p->inplace)
        pl_wtext_add(&t, "@group(0) @binding(2) var<storage, read_write> o: array<f32>;\n");
    pl_wtext_args(&t, p->inplace ? 2 : 3);
    pl_wtext_add(&t,
                 "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n"
                 "  let i = (wid.x + wid.y * nwg.x) * T + lid;\n"
                 "  if (i >= args.a0) { return; }\n"
                 "  let v = x[i] * (1.0 / (1.0 + exp(-gt[%s])));\n"
                 "  %s[i] = %sv;\n}\n",
                 p->per_row ? "i / C" : "i", p->inplace ? "x" : "o", p->acc ? "o[i] + " : "");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ conv1d */

uint32_t pl_ssm_conv_groups(const pl_ssm_conv_params *p) {
    return (p->channels + p->cw - 1) / p->cw;
}

pl_status pl_wgsl_ssm_conv(const pl_ssm_conv_params *p, char **out) {
    *out = NULL;
    unsigned K = p->k, T = p->threads, CW = p->cw;
    if (!p->channels || K < 2 || K > 16 || !pow2(T) || T > 1024 || !pow2(CW) || CW > T)
        return pl_fail(PL_ERR_ARG, "ssm_conv: bad shape (%u channels, kernel %u)", p->channels, K);
    unsigned TL = T / CW, per = (K - 1 + TL - 1) / TL; /* state rows per thread */
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const C = %uu;\nconst K = %uu;\nconst KM1 = %uu;\nconst CW = %uu;\n"
                 "const TL = %uu;\nconst T = %uu;\n"
                 "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read> w: array<f32>;\n"
                 "@group(0) @binding(2) var<storage, read_write> st: array<f32>;\n"
                 "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
                 p->channels, K, K - 1, CW, TL, T);
    if (p->snaps)
        pl_wtext_add(&t, "@group(0) @binding(4) var<storage, read_write> sn: array<f32>;\n");
    pl_wtext_args(&t, p->snaps ? 5 : 4);
    /* input row r of channel c: the state's rows, then x's */
    pl_wtext_add(&t, "fn inp(r: u32, c: u32) -> f32 {\n"
                     "  if (r < KM1) { return st[r * C + c]; }\n"
                     "  return x[(r - KM1) * C + c];\n"
                     "}\n"
                     "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(&t, "(C + CW - 1u) / CW");
    pl_wtext_add(&t, "  let n = args.a0;\n"
                     "  let c = g * CW + lid %% CW;\n"
                     "  let live = c < C;\n"
                     "  let cc = min(c, C - 1u);\n"
                     "  let lane = lid / CW;\n");
    for (unsigned j = 0; j < K; j++) pl_wtext_add(&t, "  let w%u = w[cc * K + %uu];\n", j, j);
    pl_wtext_add(&t, "  for (var r = lane; r < n; r += TL) {\n    var acc = 0.0;\n");
    for (unsigned j = 0; j < K; j++) pl_wtext_add(&t, "    acc += w%u * inp(r + %uu, cc);\n", j, j);
    pl_wtext_add(&t, "    if (live) {\n"
                     "      o[r * C + c] = acc / (1.0 + exp(-acc));\n");
    if (p->snaps)
        pl_wtext_add(&t, "      for (var j = 0u; j < KM1; j++) {\n"
                         "        sn[(r * KM1 + j) * C + c] = inp(r + 1u + j, c);\n"
                         "      }\n");
    pl_wtext_add(&t, "    }\n  }\n");
    /* the new state: every read of the old one first, then (after a barrier) the writes */
    for (unsigned m = 0; m < per; m++)
        pl_wtext_add(&t,
                     "  let j%u = lane + %uu * TL;\n"
                     "  var v%u = 0.0;\n"
                     "  if (j%u < KM1) { v%u = inp(n + j%u, cc); }\n",
                     m, m, m, m, m, m);
    pl_wtext_add(&t, "  workgroupBarrier();\n");
    for (unsigned m = 0; m < per; m++)
        pl_wtext_add(&t, "  if (live && j%u < KM1) { st[j%u * C + c] = v%u; }\n", m, m, m);
    pl_wtext_add(&t, "}\n");
    return pl_wtext_finish(&t, out);
}

/* ------------------------------------------------------------------ delta rule */

uint32_t pl_delta_rule_groups(const pl_delta_rule_params *p) {
    return p->n_v * ((p->d_v + p->cols - 1) / p->cols);
}

uint32_t pl_delta_rule_rows(const pl_delta_rule_params *p) {
    return (p->d_k + p->parts - 1) / p->parts;
}

pl_status pl_wgsl_delta_rule(const pl_delta_rule_params *p, char **out) {
    *out = NULL;
    unsigned J = p->cols, P = p->parts, T = J * P;
    if (!p->n_k || !p->n_v || p->n_v % p->n_k || !p->d_k || !p->d_v || p->d_k > 1024 ||
        p->d_v > 1024 || !pow2(J) || !pow2(P) || T > 1024 || pl_delta_rule_rows(p) > 64)
        return pl_fail(PL_ERR_ARG, "delta_rule: bad shape (%u/%u heads of %u/%u, %u x %u threads)",
                       p->n_k, p->n_v, p->d_k, p->d_v, J, P);
    unsigned M = pl_delta_rule_rows(p), DK = p->d_k, DV = p->d_v;
    pl_wtext t = {0};
    pl_wtext_add(&t,
                 "const NK = %uu;\nconst NV = %uu;\nconst DK = %uu;\nconst DV = %uu;\n"
                 "const J = %uu;\nconst P = %uu;\nconst T = %uu;\nconst M = %uu;\n"
                 "const NS = %uu;\nconst QKV = %uu;\n",
                 p->n_k, p->n_v, DK, DV, J, P, T, M, (DV + J - 1) / J,
                 2 * p->n_k * DK + p->n_v * DV);
    static const char *names[] = {"qkv", "ga", "gb", "sa", "dtb"};
    for (int i = 0; i < 5; i++)
        pl_wtext_add(&t, "@group(0) @binding(%d) var<storage, read> %s: array<f32>;\n", i,
                     names[i]);
    pl_wtext_add(&t, "@group(0) @binding(5) var<storage, read_write> st: array<f32>;\n"
                     "@group(0) @binding(6) var<storage, read_write> o: array<f32>;\n");
    if (p->snaps)
        pl_wtext_add(&t, "@group(0) @binding(7) var<storage, read_write> sn: array<f32>;\n");
    pl_wtext_args(&t, p->snaps ? 8 : 7);
    /* two copies of the five partial sums per thread: token t uses copy t & 1, so the one
     * barrier per token also separates a copy's reads from its next writes */
    pl_wtext_add(&t, "var<workgroup> red: array<f32, %u>;\n", 10 * T);
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(&t, "NV * NS");
    pl_wtext_add(&t, "  let h = g / NS;\n"
                     "  let jj = lid %% J;\n"
                     "  let pp = lid / J;\n"
                     "  let j = (g %% NS) * J + jj;\n"
                     "  let live = j < DV;\n"
                     "  let jc = min(j, DV - 1u);\n"
                     "  let kh = h %% NK;\n"
                     "  let sb = h * DK * DV;\n"
                     "  let sah = sa[h];\n"
                     "  let dth = dtb[h];\n");
    /* this thread's key rows i = pp * M + m, and their state values */
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(&t,
                     "  let i%u = pp * M + %uu;\n"
                     "  var s%u = select(0.0, st[sb + min(i%u, DK - 1u) * DV + jc], i%u < DK);\n",
                     m, m, m, m, m);
    pl_wtext_add(&t, "  let qs = 1.0 / sqrt(f32(DK));\n"
                     "  for (var t = 0u; t < args.a0; t++) {\n"
                     "    let qo = t * QKV + kh * DK;\n"
                     "    let ko = qo + NK * DK;\n"
                     "    let av = ga[t * NV + h] + dth;\n"
                     "    let spl = select(log(1.0 + exp(av)), av, av > 20.0);\n"
                     "    let gd = exp(sah * spl);\n"
                     "    let beta = 1.0 / (1.0 + exp(-gb[t * NV + h]));\n"
                     "    var pk = 0.0;\n    var pq = 0.0;\n    var kk = 0.0;\n"
                     "    var qq = 0.0;\n    var kq = 0.0;\n");
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(&t,
                     "    let k%u = select(0.0, qkv[ko + min(i%u, DK - 1u)], i%u < DK);\n"
                     "    let q%u = select(0.0, qkv[qo + min(i%u, DK - 1u)], i%u < DK);\n"
                     "    s%u = s%u * gd;\n"
                     "    pk += s%u * k%u;  pq += s%u * q%u;\n"
                     "    kk += k%u * k%u;  qq += q%u * q%u;  kq += k%u * q%u;\n",
                     m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m);
    pl_wtext_add(&t, "    let rb = (t & 1u) * 5u * T;\n"
                     "    red[rb + lid] = pk;\n"
                     "    red[rb + T + lid] = pq;\n"
                     "    red[rb + 2u * T + lid] = kk;\n"
                     "    red[rb + 3u * T + lid] = qq;\n"
                     "    red[rb + 4u * T + lid] = kq;\n"
                     "    workgroupBarrier();\n"
                     "    var tk = 0.0;\n    var tq = 0.0;\n    var tkk = 0.0;\n"
                     "    var tqq = 0.0;\n    var tkq = 0.0;\n"
                     "    for (var e = rb + jj; e < rb + T; e += J) {\n"
                     "      tk += red[e];\n"
                     "      tq += red[e + T];\n"
                     "      tkk += red[e + 2u * T];\n"
                     "      tqq += red[e + 3u * T];\n"
                     "      tkq += red[e + 4u * T];\n"
                     "    }\n"
                     /* k and q l2-normalised (q also by 1/sqrt(d_k)); S' = g S.
                      * delta = beta (v - S'^T k); S = S' + k delta^T;
                      * S^T q = S'^T q + delta (k . q) */
                     "    let rk = 1.0 / sqrt(tkk + ");
    pl_wtext_f32(&t, p->eps);
    pl_wtext_add(&t, ");\n    let rq = qs / sqrt(tqq + ");
    pl_wtext_f32(&t, p->eps);
    pl_wtext_add(&t, ");\n"
                     "    let vj = qkv[t * QKV + 2u * NK * DK + h * DV + jc];\n"
                     "    let delta = beta * (vj - tk * rk);\n"
                     "    let kd = rk * delta;\n");
    for (unsigned m = 0; m < M; m++) pl_wtext_add(&t, "    s%u += k%u * kd;\n", m, m);
    pl_wtext_add(&t, "    if (live && pp == 0u) {\n"
                     "      o[(t * NV + h) * DV + j] = tq * rq + delta * tkq * rk * rq;\n"
                     "    }\n");
    if (p->snaps) {
        pl_wtext_add(&t, "    let nb = (t * NV + h) * DK * DV;\n");
        for (unsigned m = 0; m < M; m++)
            pl_wtext_add(&t, "    if (live && i%u < DK) { sn[nb + i%u * DV + j] = s%u; }\n", m, m,
                         m);
    }
    pl_wtext_add(&t, "  }\n");
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(&t, "  if (live && i%u < DK) { st[sb + i%u * DV + j] = s%u; }\n", m, m, m);
    pl_wtext_add(&t, "}\n");
    return pl_wtext_finish(&t, out);
}

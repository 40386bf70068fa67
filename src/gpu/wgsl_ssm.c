/* wgsl_ssm.c - WGSL templates of the Gated DeltaNet kernels: the sigmoid gate, the causal
 * depthwise conv1d (+ SiLU) of the linear-attention input, and the delta-rule recurrence
 * with its state held in registers across the tokens of a call (token by token, or with
 * prefill's tokens staged in chunks). Bindings: see wgsl_gen.h. */
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

/* Threads that sum one token's |k|^2, |q|^2 and k.q when a chunk is staged. */
static uint32_t dr_lanes(const pl_delta_rule_params *p) {
    uint32_t T = p->cols * p->parts;
    return T >= p->chunk ? T / p->chunk : 1;
}

/* Floats of the reduction scratch. The chunked kernel's: two copies (token parity) of S k
 * and S q per thread, reused for the chunk's norms (three sums per lane). */
static uint32_t dr_red(const pl_delta_rule_params *p) {
    uint32_t T = p->cols * p->parts;
    if (!p->chunk) return 10 * T; /* the token kernel: two copies of five sums */
    uint32_t nr = 3 * p->chunk * dr_lanes(p);
    return 4 * T > nr ? 4 * T : nr;
}

uint32_t pl_delta_rule_wg_bytes(const pl_delta_rule_params *p) {
    uint32_t C = p->chunk;
    return 4 * (dr_red(p) + C * (2 * p->d_k + p->cols + 5));
}

/* The constants, bindings, workgroup memory and this thread's place and state registers. */
static void dr_head(pl_wtext *t, const pl_delta_rule_params *p) {
    unsigned J = p->cols, P = p->parts, T = J * P, M = pl_delta_rule_rows(p);
    unsigned DK = p->d_k, DV = p->d_v, C = p->chunk;
    pl_wtext_add(t,
                 "const NK = %uu;\nconst NV = %uu;\nconst DK = %uu;\nconst DV = %uu;\n"
                 "const J = %uu;\nconst P = %uu;\nconst T = %uu;\nconst M = %uu;\n"
                 "const NS = %uu;\nconst QKV = %uu;\n",
                 p->n_k, p->n_v, DK, DV, J, P, T, M, (DV + J - 1) / J,
                 2 * p->n_k * DK + p->n_v * DV);
    static const char *names[] = {"qkv", "ga", "gb", "sa", "dtb"};
    for (int i = 0; i < 5; i++)
        pl_wtext_add(t, "@group(0) @binding(%d) var<storage, read> %s: array<f32>;\n", i, names[i]);
    pl_wtext_add(t, "@group(0) @binding(5) var<storage, read_write> st: array<f32>;\n"
                    "@group(0) @binding(6) var<storage, read_write> o: array<f32>;\n");
    if (p->snaps)
        pl_wtext_add(t, "@group(0) @binding(7) var<storage, read_write> sn: array<f32>;\n");
    pl_wtext_args(t, p->snaps ? 8 : 7);
    pl_wtext_add(t, "var<workgroup> red: array<f32, %u>;\n", dr_red(p));
    /* a chunk's raw k and q, this workgroup's columns of v, and per token (5 x C): the
     * gate, beta, 1/|k|, 1/sqrt(d_k)/|q| and k.q/(|k||q|) */
    if (C)
        pl_wtext_add(t,
                     "const C = %uu;\nconst G = %uu;\n"
                     "var<workgroup> kc: array<f32, %u>;\n"
                     "var<workgroup> qc: array<f32, %u>;\n"
                     "var<workgroup> vc: array<f32, %u>;\n"
                     "var<workgroup> sc: array<f32, %u>;\n",
                     C, dr_lanes(p), C * DK, C * DK, C * J, 5 * C);
    pl_wtext_add(t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n");
    pl_wtext_group_guard(t, "NV * NS");
    pl_wtext_add(t, "  let h = g / NS;\n"
                    "  let jj = lid %% J;\n"
                    "  let pp = lid / J;\n"
                    "  let j = (g %% NS) * J + jj;\n"
                    "  let live = j < DV;\n"
                    "  let jc = min(j, DV - 1u);\n"
                    "  let kh = h %% NK;\n"
                    "  let sb = h * DK * DV;\n"
                    "  let sah = sa[h];\n"
                    "  let dth = dtb[h];\n"
                    "  let qs = 1.0 / sqrt(f32(DK));\n");
    /* this thread's key rows i = pp * M + m, and their state values */
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(t,
                     "  let i%u = pp * M + %uu;\n"
                     "  var s%u = select(0.0, st[sb + min(i%u, DK - 1u) * DV + jc], i%u < DK);\n",
                     m, m, m, m, m);
}

/* The gate and beta of token tt (a WGSL expression) into gd, beta. */
static void dr_gate(pl_wtext *t, const char *ind, const char *tt) {
    pl_wtext_add(t,
                 "%slet av = ga[%s * NV + h] + dth;\n"
                 "%slet spl = select(log(1.0 + exp(av)), av, av > 20.0);\n"
                 "%slet gd = exp(sah * spl);\n"
                 "%slet beta = 1.0 / (1.0 + exp(-gb[%s * NV + h]));\n",
                 ind, tt, ind, ind, ind, tt);
}

/* Token t's update from tk = S'^T k and tq = S'^T q: delta = beta (v - tk rk), S += k rk
 * delta (beta and v: WGSL expressions), then its output (column j, by part 0: the
 * expression y) and its snapshot. */
static void dr_update(pl_wtext *t, const pl_delta_rule_params *p, const char *ind, const char *beta,
                      const char *v, const char *y) {
    unsigned M = pl_delta_rule_rows(p);
    pl_wtext_add(t, "%slet delta = %s * (%s - tk * rk);\n%slet kd = rk * delta;\n", ind, beta, v,
                 ind);
    for (unsigned m = 0; m < M; m++) pl_wtext_add(t, "%ss%u += k%u * kd;\n", ind, m, m);
    pl_wtext_add(t,
                 "%sif (live && pp == 0u) {\n"
                 "%s  o[(t * NV + h) * DV + j] = %s;\n"
                 "%s}\n",
                 ind, ind, y, ind);
    if (!p->snaps) return;
    pl_wtext_add(t, "%slet nb = (t * NV + h) * DK * DV;\n", ind);
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(t, "%sif (live && i%u < DK) { sn[nb + i%u * DV + j] = s%u; }\n", ind, m, m, m);
}

/* rk = 1/|k| and rq = 1/sqrt(d_k)/|q| from the sums of squares kk and qq (WGSL names). */
static void dr_norms(pl_wtext *t, const pl_delta_rule_params *p, const char *ind, const char *kk,
                     const char *qq) {
    pl_wtext_add(t, "%slet rk = 1.0 / sqrt(%s + ", ind, kk);
    pl_wtext_f32(t, p->eps);
    pl_wtext_add(t, ");\n%slet rq = qs / sqrt(%s + ", ind, qq);
    pl_wtext_f32(t, p->eps);
    pl_wtext_add(t, ");\n");
}

/* Token by token (decode, verify): each token's k and q read from global memory, all five
 * dot products summed over the parts after the one barrier. */
static void dr_tokens(pl_wtext *t, const pl_delta_rule_params *p) {
    unsigned M = pl_delta_rule_rows(p);
    pl_wtext_add(t, "  for (var t = 0u; t < args.a0; t++) {\n"
                    "    let qo = t * QKV + kh * DK;\n"
                    "    let ko = qo + NK * DK;\n");
    dr_gate(t, "    ", "t");
    pl_wtext_add(t, "    var pk = 0.0;\n    var pq = 0.0;\n    var kk = 0.0;\n"
                    "    var qq = 0.0;\n    var kq = 0.0;\n");
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(t,
                     "    let k%u = select(0.0, qkv[ko + min(i%u, DK - 1u)], i%u < DK);\n"
                     "    let q%u = select(0.0, qkv[qo + min(i%u, DK - 1u)], i%u < DK);\n"
                     "    s%u = s%u * gd;\n"
                     "    pk += s%u * k%u;  pq += s%u * q%u;\n"
                     "    kk += k%u * k%u;  qq += q%u * q%u;  kq += k%u * q%u;\n",
                     m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m);
    /* two copies of the five partial sums per thread: token t uses copy t & 1, so the one
     * barrier per token also separates a copy's reads from its next writes */
    pl_wtext_add(t, "    let rb = (t & 1u) * 5u * T;\n"
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
                    "    }\n");
    /* k and q l2-normalised (q also by 1/sqrt(d_k)); S' = g S.
     * delta = beta (v - S'^T k); S = S' + k delta^T; S^T q = S'^T q + delta (k . q) */
    dr_norms(t, p, "    ", "tkk", "tqq");
    pl_wtext_add(t, "    let vj = qkv[t * QKV + 2u * NK * DK + h * DV + jc];\n");
    dr_update(t, p, "    ", "beta", "vj", "tq * rq + delta * tkq * rk * rq");
    pl_wtext_add(t, "  }\n");
}

/* Chunks of C tokens: stage what does not depend on the state for all C at once, then the
 * serial loop over workgroup memory with two sums per token. */
static void dr_chunks(pl_wtext *t, const pl_delta_rule_params *p) {
    unsigned M = pl_delta_rule_rows(p);
    pl_wtext_add(t, "  let n = args.a0;\n"
                    "  for (var t0 = 0u; t0 < n; t0 += C) {\n"
                    "    let cn = min(C, n - t0);\n"
                    /* raw k and q of the chunk's tokens (zeros past n), this workgroup's
                     * columns of v, each token's gate and beta */
                    "    for (var e = lid; e < C * DK; e += T) {\n"
                    "      let c = e / DK;\n"
                    "      let ok = t0 + c < n;\n"
                    "      let qo = min(t0 + c, n - 1u) * QKV + kh * DK + e %% DK;\n"
                    "      kc[e] = select(0.0, qkv[qo + NK * DK], ok);\n"
                    "      qc[e] = select(0.0, qkv[qo], ok);\n"
                    "    }\n"
                    "    for (var e = lid; e < C * J; e += T) {\n"
                    "      let tt = min(t0 + e / J, n - 1u);\n"
                    "      let jv = min((g %% NS) * J + e %% J, DV - 1u);\n"
                    "      vc[e] = qkv[tt * QKV + 2u * NK * DK + h * DV + jv];\n"
                    "    }\n"
                    "    for (var c = lid; c < C; c += T) {\n"
                    "      let tt = min(t0 + c, n - 1u);\n");
    dr_gate(t, "      ", "tt");
    pl_wtext_add(t, "      sc[c] = gd;\n"
                    "      sc[C + c] = beta;\n"
                    "    }\n"
                    "    workgroupBarrier();\n"
                    /* |k|^2, |q|^2, k.q: G lanes per token, then one thread per token */
                    "    for (var e = lid; e < C * G; e += T) {\n"
                    "      let kb = (e / G) * DK;\n"
                    "      var kk = 0.0;\n      var qq = 0.0;\n      var kq = 0.0;\n"
                    "      for (var i = e %% G; i < DK; i += G) {\n"
                    "        let kv = kc[kb + i];\n"
                    "        let qv = qc[kb + i];\n"
                    "        kk += kv * kv;  qq += qv * qv;  kq += kv * qv;\n"
                    "      }\n"
                    "      red[e] = kk;\n"
                    "      red[C * G + e] = qq;\n"
                    "      red[2u * C * G + e] = kq;\n"
                    "    }\n"
                    "    workgroupBarrier();\n"
                    "    for (var c = lid; c < C; c += T) {\n"
                    "      var kk = 0.0;\n      var qq = 0.0;\n      var kq = 0.0;\n"
                    "      for (var e = c * G; e < c * G + G; e++) {\n"
                    "        kk += red[e];\n"
                    "        qq += red[C * G + e];\n"
                    "        kq += red[2u * C * G + e];\n"
                    "      }\n");
    dr_norms(t, p, "      ", "kk", "qq");
    pl_wtext_add(t, "      sc[2u * C + c] = rk;\n"
                    "      sc[3u * C + c] = rq;\n"
                    "      sc[4u * C + c] = kq * rk * rq;\n"
                    "    }\n"
                    "    workgroupBarrier();\n"
                    "    for (var c = 0u; c < cn; c++) {\n"
                    "      let t = t0 + c;\n"
                    "      let kb = c * DK;\n"
                    "      let gd = sc[c];\n"
                    "      var pk = 0.0;\n      var pq = 0.0;\n");
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(t,
                     "      let k%u = select(0.0, kc[kb + min(i%u, DK - 1u)], i%u < DK);\n"
                     "      let q%u = select(0.0, qc[kb + min(i%u, DK - 1u)], i%u < DK);\n"
                     "      s%u = s%u * gd;\n"
                     "      pk += s%u * k%u;  pq += s%u * q%u;\n",
                     m, m, m, m, m, m, m, m, m, m, m, m);
    /* as the token kernel, two copies by token parity, of two sums */
    pl_wtext_add(t, "      let rb = (c & 1u) * 2u * T;\n"
                    "      red[rb + lid] = pk;\n"
                    "      red[rb + T + lid] = pq;\n"
                    "      workgroupBarrier();\n"
                    "      var tk = 0.0;\n      var tq = 0.0;\n"
                    "      for (var e = rb + jj; e < rb + T; e += J) {\n"
                    "        tk += red[e];\n"
                    "        tq += red[e + T];\n"
                    "      }\n"
                    "      let rk = sc[2u * C + c];\n"
                    "      let rq = sc[3u * C + c];\n"
                    "      let kqn = sc[4u * C + c];\n");
    dr_update(t, p, "      ", "sc[C + c]", "vc[c * J + jj]", "tq * rq + delta * kqn");
    /* the next chunk overwrites what this one's last token reads after its barrier */
    pl_wtext_add(t, "    }\n    workgroupBarrier();\n  }\n");
}

pl_status pl_wgsl_delta_rule(const pl_delta_rule_params *p, char **out) {
    *out = NULL;
    unsigned J = p->cols, P = p->parts, T = J * P, C = p->chunk;
    if (!p->n_k || !p->n_v || p->n_v % p->n_k || !p->d_k || !p->d_v || p->d_k > 1024 ||
        p->d_v > 1024 || !pow2(J) || !pow2(P) || T > 1024 || pl_delta_rule_rows(p) > 64 ||
        (C && (!pow2(C) || C > 256)))
        return pl_fail(PL_ERR_ARG,
                       "delta_rule: bad shape (%u/%u heads of %u/%u, %u x %u threads, chunk %u)",
                       p->n_k, p->n_v, p->d_k, p->d_v, J, P, C);
    unsigned M = pl_delta_rule_rows(p);
    pl_wtext t = {0};
    dr_head(&t, p);
    if (C)
        dr_chunks(&t, p);
    else
        dr_tokens(&t, p);
    for (unsigned m = 0; m < M; m++)
        pl_wtext_add(&t, "  if (live && i%u < DK) { st[sb + i%u * DV + j] = s%u; }\n", m, m, m);
    pl_wtext_add(&t, "}\n");
    return pl_wtext_finish(&t, out);
}

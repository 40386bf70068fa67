/* wgsl_attn_prefill.c - the WGSL template of prefill attention ("flash attention"): every
 * query row of a prompt (or a chain frame) over an F16 or F32 KV cache in one dispatch,
 * instead of the decode kernel's dispatch per 8 rows (wgsl_ops.c, pl_wgsl_attn).
 *
 * Design. A workgroup owns one kv head and `rows` (BQ) consecutive query vectors of its
 * GQA group, taken row-major over (row, head of the group): with GQ query heads per kv head
 * a tile of 32 vectors is 32 / GQ rows of every head of the group, so each staged key and
 * value is used by all BQ vectors, whatever GQ is. Each vector has `lanes` (L) threads,
 * neighbours in one subgroup; thread j holds words j, j + L, ... of its q row and of its
 * output row in registers (HD / L and HDV / L values), so a score is L partial dots summed
 * by log2(L) subgroupShuffleXor steps, and no scores or partial outputs go through
 * workgroup memory. The cache is walked in tiles of `keys` (BC) positions: the tile's key
 * and value rows of the kv head are staged in workgroup memory as the cache stores them
 * (f16 pairs stay packed: half the bytes; unpacked at use), one barrier after the load and
 * one before the next. Per tile a thread computes its vector's BC scores into registers,
 * then the tile's maximum rescales the running (max, sum, output) once, and the values are
 * added with the exponentials (online softmax). Tiles past the workgroup's last row are not
 * visited; inside the diagonal tile a position after the vector's own is masked to
 * -FLT_MAX (its exponential is 0; every vector sees position 0, in the first tile, so its
 * running max is finite from there on). Loads past the last visible position are clamped
 * to it, so rows of the cache beyond what was written (NaN poison) are never read.
 *
 * Sizes (the encoder's choice, gpu_encode.c): BQ 32 on a hardware adapter (8B: 8 kv heads
 * x 2,048 vectors / 32 = 512 workgroups at 512 tokens, about 4 per SM of an H200), L 4 /
 * 8 / 16 for head dims up to 64 / 128 / 256 (16 registers each of q and output per thread),
 * BC 32 halved until the staged tiles fit maxComputeWorkgroupStorageSize (K + V at head
 * dim 128: 32 KB f32, 16 KB f16; 256: f16 32 KB, f32 16 keys a tile). The workgroups take their
 * tiles longest first (the last rows see the most positions). Summation order differs from the
 * decode kernel's, so results agree within float rounding, not bit for bit. */
#include "wgsl_gen.h"
#include "wgsl_text.h"

static int pow2(unsigned v) {
    return v && !(v & (v - 1));
}

uint32_t pl_attn_prefill_wg_bytes(const pl_attn_prefill_params *p) {
    unsigned e = p->kv_f16 ? 2 : 1; /* values per staged word */
    return p->keys * (p->head_dim / e + p->head_dim_v / e) * 4;
}

uint32_t pl_attn_prefill_groups(const pl_attn_prefill_params *p, uint32_t n) {
    uint64_t nv = (uint64_t)n * (p->n_head / p->n_kv_head);
    return (uint32_t)((nv + p->rows - 1) / p->rows * p->n_kv_head);
}

pl_status pl_wgsl_attn_prefill(const pl_attn_prefill_params *p, char **out) {
    *out = NULL;
    unsigned HD = p->head_dim, HDV = p->head_dim_v, L = p->lanes, E = p->kv_f16 ? 2 : 1;
    if (!p->n_head || !p->n_kv_head || p->n_head % p->n_kv_head || !HD || !HDV || HD > 1024 ||
        HDV > 1024 || HD % E || HDV % E || !pow2(L) || L > 64 || (HD / E) % L || (HDV / E) % L ||
        !p->rows || p->rows * L > 1024 || !p->keys || p->keys > 256)
        return pl_fail(PL_ERR_ARG,
                       "prefill attention: bad shape (heads %u/%u, head_dim %u/%u, lanes %u, "
                       "rows %u, keys %u)",
                       p->n_head, p->n_kv_head, HD, HDV, L, p->rows, p->keys);
    unsigned nwk = HD / E, nwv = HDV / E; /* words of a key / value row of one head */
    const char *word = p->kv_f16 ? "u32" : "f32", *vt = p->kv_f16 ? "vec2<f32>" : "f32";
    pl_wtext t = {0};
    if (L > 1) pl_wtext_add(&t, "enable subgroups;\n");
    pl_wtext_add(&t,
                 "const HD = %uu;\nconst HDV = %uu;\nconst NH = %uu;\nconst NKV = %uu;\n"
                 "const GQ = %uu;\nconst NWK = %uu;\nconst NWV = %uu;\nconst L = %uu;\n"
                 "const BQ = %uu;\nconst BC = %uu;\nconst T = %uu;\n"
                 "const QW = %uu;\nconst VW = %uu;\n",
                 HD, HDV, p->n_head, p->n_kv_head, p->n_head / p->n_kv_head, nwk, nwv, L, p->rows,
                 p->keys, p->rows * L, nwk / L, nwv / L);
    pl_wtext_add(&t,
                 "@group(0) @binding(0) var<storage, read> q: array<f32>;\n"
                 "@group(0) @binding(1) var<storage, read> kc: array<%s>;\n"
                 "@group(0) @binding(2) var<storage, read> vc: array<%s>;\n"
                 "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
                 word, word);
    pl_wtext_args(&t, 4);
    pl_wtext_add(&t,
                 "var<workgroup> ks: array<%s, BC * NWK>;\n"
                 "var<workgroup> vs: array<%s, BC * NWV>;\n",
                 word, word);
    /* a staged word as values: two unpacked halves or the float */
    pl_wtext_add(&t, "fn kv(w: %s) -> %s { return %s; }\n", word, vt,
                 p->kv_f16 ? "unpack2x16float(w)" : "w");
    pl_wtext_add(&t, "@compute @workgroup_size(T)\nfn main(" PL_WGSL_MAIN_ARGS ") {\n"
                     "  let nv = args.a1 * GQ;\n"
                     "  let ntl = (nv + BQ - 1u) / BQ;\n");
    pl_wtext_group_guard(&t, "ntl * NKV");
    pl_wtext_add(&t,
                 "  let kvh = g / ntl;\n"
                 "  let tile = ntl - 1u - g %% ntl;\n" /* the longest tiles first */
                 "  let j = lid %% L;\n"
                 "  let jv = tile * BQ + lid / L;\n"
                 "  let jc = min(jv, nv - 1u);\n" /* a vector past the end computes the last */
                 "  let r = jc / GQ;\n"
                 "  let h = kvh * GQ + jc %% GQ;\n"
                 "  let qpos = args.a0 + r;\n"
                 "  let kend = args.a0 + (min(nv, tile * BQ + BQ) - 1u) / GQ + 1u;\n"
                 "  var qr: array<%s, QW>;\n"
                 "  var acc: array<%s, VW>;\n"
                 "  var s: array<f32, BC>;\n"
                 "  let qb = (r * NH + h) * HD;\n"
                 "  for (var i = 0u; i < QW; i++) {\n",
                 vt, vt);
    if (p->kv_f16)
        pl_wtext_add(&t, "    let w = 2u * (j + L * i);\n"
                         "    qr[i] = vec2<f32>(q[qb + w], q[qb + w + 1u]);\n");
    else
        pl_wtext_add(&t, "    qr[i] = q[qb + j + L * i];\n");
    pl_wtext_add(&t, "  }\n"
                     "  var m = bitcast<f32>(0xff7fffffu);\n"
                     "  var l = 0.0;\n"
                     "  for (var k0 = 0u; k0 < kend; k0 += BC) {\n"
                     "    workgroupBarrier();\n"
                     "    for (var e = lid; e < BC * NWK; e += T) {\n"
                     "      let ps = min(k0 + e / NWK, kend - 1u);\n"
                     "      ks[e] = kc[(ps * NKV + kvh) * NWK + e %% NWK];\n"
                     "    }\n"
                     "    for (var e = lid; e < BC * NWV; e += T) {\n"
                     "      let ps = min(k0 + e / NWV, kend - 1u);\n"
                     "      vs[e] = vc[(ps * NKV + kvh) * NWV + e %% NWV];\n"
                     "    }\n"
                     "    workgroupBarrier();\n"
                     "    var mt = bitcast<f32>(0xff7fffffu);\n"
                     "    for (var c = 0u; c < BC; c++) {\n"
                     "      var a = 0.0;\n"
                     "      for (var i = 0u; i < QW; i++) {\n");
    pl_wtext_add(&t, "        a += %s;\n",
                 p->kv_f16 ? "dot(qr[i], kv(ks[c * NWK + j + L * i]))"
                           : "qr[i] * ks[c * NWK + j + L * i]");
    pl_wtext_add(&t, "      }\n");
    for (unsigned b = 1; b < L; b *= 2)
        pl_wtext_add(&t, "      a += subgroupShuffleXor(a, %uu);\n", b);
    pl_wtext_add(&t, "      let sv = select(bitcast<f32>(0xff7fffffu), a * ");
    pl_wtext_f32(&t, p->scale);
    pl_wtext_add(
        &t, ", k0 + c <= qpos);\n"
            "      s[c] = sv;\n"
            "      mt = max(mt, sv);\n"
            "    }\n"
            "    let mn = max(m, mt);\n"
            "    let al = exp(m - mn);\n"
            "    m = mn;\n"
            "    l *= al;\n"
            "    for (var i = 0u; i < VW; i++) { acc[i] *= al; }\n"
            "    for (var c = 0u; c < BC; c++) {\n"
            "      let pc = exp(s[c] - mn);\n"
            "      l += pc;\n"
            "      for (var i = 0u; i < VW; i++) { acc[i] += pc * kv(vs[c * NWV + j + L * i]); }\n"
            "    }\n"
            "  }\n"
            "  if (jv >= nv) { return; }\n"
            "  let ob = (r * NH + h) * HDV;\n"
            "  for (var i = 0u; i < VW; i++) {\n");
    if (p->kv_f16)
        pl_wtext_add(&t, "    let w = 2u * (j + L * i);\n"
                         "    o[ob + w] = acc[i].x / l;\n"
                         "    o[ob + w + 1u] = acc[i].y / l;\n");
    else
        pl_wtext_add(&t, "    o[ob + j + L * i] = acc[i] / l;\n");
    pl_wtext_add(&t, "  }\n}\n");
    return pl_wtext_finish(&t, out);
}

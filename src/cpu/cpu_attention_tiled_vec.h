/* cpu_attention_tiled_vec.h - cpu_attention_tiled.c's tile pass on vectors (GCC vector
 * extensions), included there once per width: TV_W query vectors to a vector, TV_CH vectors
 * of values at a time in the accumulators' update, the pass named TV_NAME with the
 * attributes TV_TARGET. Each lane is its own query vector with tile_ref's operations in
 * tile_ref's order, so every width gives tile_ref's bits. The widths are the targets'
 * native ones: GCC keeps vectors wider than the target's registers on the stack (16 lanes
 * compiled for AVX2 ran the pass 30 times slower than 8). */
#define TV_CAT2(a, b) a##b
#define TV_CAT(a, b)  TV_CAT2(a, b)
#define TV_(n)        TV_CAT(n, TV_W)
#define VF            TV_(tv_f)
#define VI            TV_(tv_i)
typedef float VF __attribute__((vector_size(TV_W * 4)));
typedef int32_t VI __attribute__((vector_size(TV_W * 4)));
/* x in every lane: the scalar minus a zero vector (exactly x, -0 and NaN included), one
 * broadcast */
#define VS(x) ((float)(x) - (VF){0})
/* keep ? a : b, lane by lane (keep all ones or zero) */
#define VSEL(keep, a, b) ((VF)(((VI)(a) & (keep)) | ((VI)(b) & ~(keep))))
#define VSTORE(p, x)     memcpy((p), (const VF[1]){x}, sizeof(VF))

ALWAYS VF TV_(tv_load)(const float *p) {
    VF x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* attn_exp lane by lane (*xp: vector arguments by value draw GCC's ABI notes) */
ALWAYS VF TV_(tv_exp)(const VF *xp) {
    VF x = *xp;
    VI keep = x >= VS(EXP_MIN), nan = x != x;
    VF xc = VSEL(keep, x, VS(EXP_MIN));
    VF n = (xc * VS(LOG2E) + VS(EXP_MAGIC)) - VS(EXP_MAGIC);
    VF r = xc - n * VS(LN2_HI);
    r = r - n * VS(LN2_LO);
    VF p = VS(EXP_P0);
    p = p * r + VS(EXP_P1);
    p = p * r + VS(EXP_P2);
    p = p * r + VS(EXP_P3);
    p = p * r + VS(EXP_P4);
    p = p * r + VS(EXP_P5);
    VF y = (p * r) * r + r + VS(1.0f);
    VI e = (__builtin_convertvector(n, VI) + 127) * (1 << 23);
    y = (VF)((VI)(y * (VF)e) & keep);
    return VSEL(nan, x, y);
}

/* Scores of lane groups u0 and u1 (TV_W query vectors each; u1 may be u0) for keys t..t+3
 * (repeating key nt - 1 past the tile), into it->sc (group u0's key t at t * TV_W, u1's
 * TILE_KEYS * TV_W further). */
ALWAYS void TV_(tv_scores4)(const tiled_item *it, int64_t u0, int64_t u1, int64_t t, int64_t nt) {
    int64_t hd = it->hd, nqp = it->nqp, tk[4];
    for (int i = 0; i < 4; i++) tk[i] = t + i < nt ? t + i : nt - 1;
    const float *k0 = it->kr + tk[0] * hd, *k1 = it->kr + tk[1] * hd, *k2 = it->kr + tk[2] * hd,
                *k3 = it->kr + tk[3] * hd, *q = it->qt;
    VF a0 = VS(0.0f), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t d = 0; d < hd; d++, q += nqp) {
        VF x = TV_(tv_load)(q + u0), y = TV_(tv_load)(q + u1);
        a0 = a0 + x * VS(k0[d]), b0 = b0 + y * VS(k0[d]);
        a1 = a1 + x * VS(k1[d]), b1 = b1 + y * VS(k1[d]);
        a2 = a2 + x * VS(k2[d]), b2 = b2 + y * VS(k2[d]);
        a3 = a3 + x * VS(k3[d]), b3 = b3 + y * VS(k3[d]);
    }
    float *s0 = it->sc + t * TV_W, *s1 = it->sc + (TILE_KEYS + t) * TV_W;
    VSTORE(s0, a0), VSTORE(s0 + TV_W, a1), VSTORE(s0 + 2 * TV_W, a2), VSTORE(s0 + 3 * TV_W, a3);
    VSTORE(s1, b0), VSTORE(s1 + TV_W, b1), VSTORE(s1 + 2 * TV_W, b2), VSTORE(s1 + 3 * TV_W, b3);
}

/* The softmax step of lane group u0 over its scores s (nt keys): scale and mask them, the
 * running maximum, the weights into pt, the rescales into rs, the running sums. */
ALWAYS void TV_(tv_softmax)(const tiled_item *it, int64_t u0, const float *s, int64_t t0,
                            int64_t nt) {
    int64_t nqp = it->nqp;
    VI lim;
    for (int i = 0; i < TV_W; i++) lim[i] = (int32_t)lim_of(it, u0 + i);
    VF sv[TILE_KEYS], mt = VS(-INFINITY);
    for (int64_t t = 0; t < nt; t++) {
        VI key = {0};
        key = key + (int32_t)(t0 + t);
        sv[t] = VSEL(key <= lim, TV_(tv_load)(s + t * TV_W) * VS(it->scale), VS(-INFINITY));
        mt = VSEL(sv[t] > mt, sv[t], mt);
    }
    VF mx = TV_(tv_load)(it->mx + u0), mn = VSEL(mt > mx, mt, mx), dm = mx - mn;
    VF r = TV_(tv_exp)(&dm), l = TV_(tv_load)(it->lsum + u0) * r;
    for (int64_t t = 0; t < nt; t++) {
        VF x = sv[t] - mn, p = TV_(tv_exp)(&x);
        l = l + p;
        VSTORE(it->pt + t * nqp + u0, p);
    }
    VSTORE(it->mx + u0, mn), VSTORE(it->lsum + u0, l), VSTORE(it->rs + u0, r);
}

/* Accumulators of query vectors u and w (w may be u) over the tile: rescaled, then their
 * weighted values key by key, TV_CH vectors of each at a time, the values loaded once for
 * both. */
ALWAYS void TV_(tv_pv_pair)(const tiled_item *it, int64_t u, int64_t w, int64_t t0, int64_t nt) {
    int64_t hdv = it->hdv, nqp = it->nqp;
    int64_t nu = lim_of(it, u) - t0 + 1, nw = lim_of(it, w) - t0 + 1;
    nu = nu < nt ? nu : nt, nw = w == u ? 0 : nw < nt ? nw : nt;
    int64_t both = nu < nw ? nu : nw;
    float ru = it->rs[u], rw = it->rs[w], *au = it->acc + u * hdv, *aw = it->acc + w * hdv;
    for (int64_t d = 0; d + TV_W * TV_CH <= hdv; d += TV_W * TV_CH) {
        VF a[TV_CH], b[TV_CH];
#pragma GCC unroll 4
        for (int c = 0; c < TV_CH; c++) {
            a[c] = TV_(tv_load)(au + d + TV_W * c), b[c] = TV_(tv_load)(aw + d + TV_W * c);
            if (ru != 1.0f) a[c] = a[c] * VS(ru);
            if (rw != 1.0f) b[c] = b[c] * VS(rw);
        }
        int64_t t = 0;
        for (; t < both; t++) {
            const float *v = it->vr + t * hdv + d;
            VF pu = VS(it->pt[t * nqp + u]), pw = VS(it->pt[t * nqp + w]);
#pragma GCC unroll 4
            for (int c = 0; c < TV_CH; c++) {
                VF x = TV_(tv_load)(v + TV_W * c);
                a[c] = a[c] + pu * x, b[c] = b[c] + pw * x;
            }
        }
        for (int64_t t1 = t; t1 < nu; t1++) {
            VF pu = VS(it->pt[t1 * nqp + u]);
#pragma GCC unroll 4
            for (int c = 0; c < TV_CH; c++)
                a[c] = a[c] + pu * TV_(tv_load)(it->vr + t1 * hdv + d + TV_W * c);
        }
        for (int64_t t1 = t; t1 < nw; t1++) {
            VF pw = VS(it->pt[t1 * nqp + w]);
#pragma GCC unroll 4
            for (int c = 0; c < TV_CH; c++)
                b[c] = b[c] + pw * TV_(tv_load)(it->vr + t1 * hdv + d + TV_W * c);
        }
#pragma GCC unroll 4
        for (int c = 0; c < TV_CH; c++) {
            VSTORE(au + d + TV_W * c, a[c]);
            if (w != u) VSTORE(aw + d + TV_W * c, b[c]);
        }
    }
}

/* Every query vector of the item over the tile t0.. (nt keys): scores two lane groups at a
 * time, their softmax steps, then the accumulators two at a time. */
TV_TARGET static void TV_NAME(const tiled_item *it, int64_t t0, int64_t nt) {
    for (int64_t u0 = 0; u0 < it->nqp; u0 += 2 * TV_W) {
        int64_t u1 = u0 + TV_W < it->nqp ? u0 + TV_W : u0;
        for (int64_t t = 0; t < nt; t += 4) TV_(tv_scores4)(it, u0, u1, t, nt);
        TV_(tv_softmax)(it, u0, it->sc, t0, nt);
        if (u1 != u0) TV_(tv_softmax)(it, u1, it->sc + TILE_KEYS * TV_W, t0, nt);
    }
    for (int64_t u = 0; u < it->nq; u += 2)
        TV_(tv_pv_pair)(it, u, u + 1 < it->nq ? u + 1 : u, t0, nt);
}

#undef VSTORE
#undef VSEL
#undef VS
#undef VI
#undef VF
#undef TV_
#undef TV_CAT
#undef TV_CAT2
#undef TV_W
#undef TV_CH
#undef TV_NAME
#undef TV_TARGET

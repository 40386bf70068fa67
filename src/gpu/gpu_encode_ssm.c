/* gpu_encode_ssm.c - records the Gated DeltaNet ops: the sigmoid gate, the conv1d of the
 * linear-attention input and the delta-rule recurrence (one dispatch for all the tokens of
 * a call, in order, its state in registers; prefill's tokens staged in chunks). */
#include <string.h>

#include "gpu_internal.h"

static pl_status enc_sigmoid_mul(gpu_backend *gb, const op *o) {
    pl_sigmoid_mul_params p;
    memset(&p, 0, sizeof p);
    p.cols = (uint32_t)o->cols;
    p.threads = 256;
    p.per_row = o->k == 1;
    p.acc = o->acc;
    p.inplace = o->a == o->out;
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_SIGMOID_MUL, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_sigmoid_mul,
                          "sigmoid_mul", &k) != PL_OK)
        return PL_ERR;
    uint64_t count = (uint64_t)o->rows * p.cols;
    pl_gpu_ref refs[4];
    int n = 0;
    refs[n++] = pl_gpu_at(o->a);
    refs[n++] = pl_gpu_at(o->b);
    if (!p.inplace) refs[n++] = pl_gpu_at(o->out);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)count}}, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, (uint32_t)((count + p.threads - 1) / p.threads));
}

static pl_status enc_ssm_conv(gpu_backend *gb, const op *o) {
    pl_ssm_conv_params p;
    memset(&p, 0, sizeof p);
    p.channels = (uint32_t)o->b->h.ne1;
    p.k = (uint32_t)o->b->h.ne0;
    /* decode: 64 channels a workgroup, a row each; prefill: 16 channels x 16 rows at a time,
     * so a prompt spreads over four times as many workgroups (64 x 4 gave the 27B's 10,240
     * channels 160 workgroups for 132 SMs: 163 us per 512 tokens on the H200, latency) */
    p.cw = pl_gpu_threads_for(p.channels, 8, o->n > 1 ? 16 : 64);
    p.threads = o->n > 1 ? 16 * p.cw : p.cw;
    p.snaps = o->out3 != NULL;
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_SSM_CONV, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_ssm_conv, "ssm_conv",
                          &k) != PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[6];
    int n = 0;
    refs[n++] = pl_gpu_at(o->a);
    refs[n++] = pl_gpu_at(o->b);
    refs[n++] = pl_gpu_at(o->out2);
    refs[n++] = pl_gpu_at(o->out);
    if (p.snaps) refs[n++] = pl_gpu_at(o->out3);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)o->n}}, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, pl_ssm_conv_groups(&p));
}

static pl_status enc_delta_rule(gpu_backend *gb, const op *o) {
    const pl_delta_params *d = &o->delta;
    pl_delta_rule_params p;
    memset(&p, 0, sizeof p);
    p.n_k = (uint32_t)d->n_k_heads;
    p.n_v = (uint32_t)d->n_v_heads;
    p.d_k = (uint32_t)d->d_k;
    p.d_v = (uint32_t)d->d_v;
    p.eps = d->eps;
    p.snaps = o->out3 != NULL;
    /* at most 16 key rows per thread (registers), at most 256 threads (workgroup memory:
     * 10 floats each) */
    p.parts = pl_gpu_threads_for((p.d_k + 15) / 16, 1, 64);
    p.cols = pl_gpu_threads_for(p.d_v, 1, 32);
    while (p.cols > 1 && p.cols * p.parts > 256) p.cols /= 2;
    /* prefill: chunks staged in workgroup memory, as many tokens as fit (at most 32, at
     * least 4). Only past PL_GPU_DR_MIN_COLS columns, where the GEMM already gives other
     * bits than decode: a verify pass keeps decode's (speculation changes no output). */
    if (gb->dr_chunk && o->n > PL_GPU_DR_MIN_COLS) {
        for (p.chunk = 32; p.chunk >= 4; p.chunk /= 2)
            if (pl_delta_rule_wg_bytes(&p) <= gb->info->max_wg_storage) break;
        if (p.chunk < 4) p.chunk = 0;
    }
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_DELTA_RULE, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_delta_rule,
                          "delta_rule", &k) != PL_OK)
        return PL_ERR;
    const gbuf *in[5] = {o->a, o->b, o->c, o->d, o->e};
    pl_gpu_ref refs[9];
    int n = 0;
    for (int i = 0; i < 5; i++) refs[n++] = pl_gpu_at(in[i]);
    refs[n++] = pl_gpu_at(o->out2);
    refs[n++] = pl_gpu_at(o->out);
    if (p.snaps) refs[n++] = pl_gpu_at(o->out3);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)o->n}}, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, pl_delta_rule_groups(&p));
}

pl_status pl_gpu_encode_ssm(gpu_backend *gb, op *o) {
    switch (o->kind) {
    case OP_SIGMOID_MUL: return o->rows ? enc_sigmoid_mul(gb, o) : PL_OK;
    case OP_SSM_CONV: return o->n ? enc_ssm_conv(gb, o) : PL_OK;
    case OP_DELTA_RULE: return o->n ? enc_delta_rule(gb, o) : PL_OK;
    default: return pl_fail(PL_ERR, "GPU: op %d is not a DeltaNet op", (int)o->kind);
    }
}

/* cpu_qdot_test.c - the act_q8 row dot (cpu_qdot.c): the dispatched path (AVX2 where the CPU
 * has it) is bit-identical to the portable one on random rows, extreme values included
 * (nibbles 0 and 15, quants -128 and 127), and both equal the sum written out directly:
 * each block's integer dot, then (float)dot * d_w * d_x added in block order. The four-row
 * form gives the same bits as four single rows. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "format/quant.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static float direct(int q4, const unsigned char *w, const int8_t *y, const float *yd, int nb) {
    float sum = 0;
    for (int b = 0; b < nb; b++) {
        const unsigned char *blk = w + b * (q4 ? 18 : 34);
        int32_t s = 0;
        for (int j = 0; j < 32; j++) {
            int wq =
                q4 ? (j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4)) - 8 : (int8_t)blk[2 + j];
            s += wq * y[b * 32 + j];
        }
        uint16_t dh;
        memcpy(&dh, blk, 2);
        sum += (float)s * pl_f16_to_f32(dh) * yd[b];
    }
    return sum;
}

static void run_tests(void) {
    int bad_port = 0, bad_direct = 0, bad_rows4 = 0, cases = 0;
    for (int iter = 0; iter < 2000; iter++) {
        int q4 = iter & 1, nb = 1 + (int)(rnd() % 40), bs = q4 ? 18 : 34;
        unsigned char *w = malloc((size_t)nb * bs);
        int8_t *y = malloc((size_t)nb * 32);
        float *yd = malloc((size_t)nb * sizeof *yd);
        for (int i = 0; i < nb * bs; i++) w[i] = (unsigned char)rnd();
        /* activations as pl_quant_act_q8_0 makes them: -127..127 */
        for (int i = 0; i < nb * 32; i++)
            y[i] = (int8_t)(iter % 7 == 0 ? ((rnd() & 1) ? 127 : -127) : (int)(rnd() % 255) - 127);
        for (int b = 0; b < nb; b++) {
            uint16_t d = pl_f32_to_f16((float)(rnd() % 1000) / 1000.0f - 0.5f);
            memcpy(w + b * bs, &d, 2);
            yd[b] = pl_f16_to_f32(pl_f32_to_f16((float)(rnd() % 1000) / 50000.0f));
            if (iter % 5 == 0) memset(w + b * bs + 2, iter % 10 == 0 ? 0x00 : 0xff, (size_t)bs - 2);
            if (iter % 11 == 0 && !q4) memset(w + b * bs + 2, 0x80, 32); /* -128 */
        }
        float a = pl_cpu_qdot_row(q4, w, y, yd, nb), p = pl_cpu_qdot_row_portable(q4, w, y, yd, nb);
        float d = direct(q4, w, y, yd, nb);
        bad_port += memcmp(&a, &p, sizeof a) != 0;
        /* four activation rows: this one and three shifted copies of it */
        int8_t *y4 = malloc((size_t)nb * 32 * 4);
        float *yd4 = malloc((size_t)nb * sizeof *yd4 * 4);
        const int8_t *yp[4];
        const float *ydp[4];
        for (int t = 0; t < 4; t++) {
            for (int i = 0; i < nb * 32; i++) y4[t * nb * 32 + i] = y[(i + 5 * t) % (nb * 32)];
            for (int b = 0; b < nb; b++) yd4[t * nb + b] = yd[(b + t) % nb];
            yp[t] = y4 + t * nb * 32, ydp[t] = yd4 + t * nb;
        }
        float o4[4];
        pl_cpu_qdot_rows4(q4, w, yp, ydp, nb, o4);
        for (int t = 0; t < 4; t++) {
            float one = pl_cpu_qdot_row_portable(q4, w, yp[t], ydp[t], nb);
            bad_rows4 += memcmp(&one, &o4[t], sizeof one) != 0;
        }
        free(y4), free(yd4);
        bad_direct += memcmp(&p, &d, sizeof p) != 0;
        cases++;
        free(w), free(y), free(yd);
    }
    CHECK(bad_port == 0, "dispatched vs portable: %d of %d rows differ", bad_port, cases);
    CHECK(bad_rows4 == 0, "four-row form: %d of %d rows differ", bad_rows4, 4 * cases);
    CHECK(bad_direct == 0, "portable vs direct sum: %d of %d rows differ", bad_direct, cases);
}

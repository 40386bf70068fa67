/* quant_act.c - activations quantised for integer dot products (see quant.h). */
#include <math.h>

#include "quant.h"

void pl_quant_act_q8_0(const float *x, int64_t n, int8_t *q, uint16_t *d) {
    for (int64_t b = 0; b < n / 32; b++, x += 32, q += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float s = amax / 127;
        const float is = s != 0 ? 1.0f / s : 0.0f;
        d[b] = pl_f32_to_f16(s);
        for (int j = 0; j < 32; j++) {
            const float v = roundf(x[j] * is); /* -127..127 unless x holds NaN */
            q[j] = (int8_t)(v >= -128.0f && v <= 127.0f ? (int)v : 0);
        }
    }
}

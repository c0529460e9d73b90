/* presk 0.1.0: the nests of attend from 03_attention.psk at B = 2, T = 4 in f32, at point zero */
#include <math.h>
#include <stdint.h>

#include "../presk_rt.h"
#include "../presk_rng.h"
#include "../presk_libm.h"

/*
 * kernel softmax (%0 : f32[batch: 2, heads: 2, seq: 4, seq2: 4], %1 : i64[seq: 4, seq2: 4]) -> %2 : f32[batch: 2, heads: 2, seq: 4, seq2: 4] {
 *   for i0 in 0..2 {
 *     for i1 in 0..2 {
 *       for i2 in 0..4 {
 *         s3 = 0
 *         s0 = 0
 *         for i3 in 0..4 {
 *           s0 = ((%1[i2, i3] != 0) ? ((s3 == 0) ? %0[i0, i1, i2, i3] : ((%0[i0, i1, i2, i3] > s0) ? %0[i0, i1, i2, i3] : s0)) : s0)
 *           s3 = ((%1[i2, i3] != 0) ? 1 : s3)
 *         }
 *         s1 = 0
 *         for i3 in 0..4 {
 *           s1 = ((%1[i2, i3] != 0) ? (s1 + exp((%0[i0, i1, i2, i3] - s0))) : s1)
 *         }
 *         for i3 in 0..4 {
 *           s2 = ((%1[i2, i3] != 0) ? exp((%0[i0, i1, i2, i3] - s0)) : s2)
 *           %2[i0, i1, i2, i3] = ((%1[i2, i3] != 0) ? (s2 / s1) : 0)
 *         }
 *       }
 *     }
 *   }
 * }
 */
void attend_5(const float in0[restrict 2][2][4][4], const int64_t in1[restrict 4][4], float out[restrict 2][2][4][4]) {
    (void)in0;
    (void)in1;
    (void)out;
    int64_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
    float s0 = 0;
    float s1 = 0;
    float s2 = 0;
    float s3 = 0;
#pragma scop
    for (i0 = 0; i0 < 2; i0++) {
        for (i1 = 0; i1 < 2; i1++) {
            for (i2 = 0; i2 < 4; i2++) {
                s3 = 0.0f;
                s0 = 0.0f;
                for (i3 = 0; i3 < 4; i3++) {
                    s0 = ((in1[i2][i3] != 0) ? ((s3 == 0.0f) ? in0[i0][i1][i2][i3] : ((in0[i0][i1][i2][i3] > s0) ? in0[i0][i1][i2][i3] : s0)) : s0);
                    s3 = ((in1[i2][i3] != 0) ? 1.0f : s3);
                }
                s1 = 0.0f;
                for (i3 = 0; i3 < 4; i3++) {
                    s1 = ((in1[i2][i3] != 0) ? (s1 + presk_expf((in0[i0][i1][i2][i3] - s0))) : s1);
                }
                for (i3 = 0; i3 < 4; i3++) {
                    s2 = ((in1[i2][i3] != 0) ? presk_expf((in0[i0][i1][i2][i3] - s0)) : s2);
                    out[i0][i1][i2][i3] = ((in1[i2][i3] != 0) ? (s2 / s1) : 0.0f);
                }
            }
        }
    }
#pragma endscop
}

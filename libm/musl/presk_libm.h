/*
 * presk_libm.h -- presk's own deterministic elementary functions.
 *
 * Every program presk generates is linked with libm/musl/presk_libm.c so that
 * each backend and each export computes exactly the same bits for exp, log,
 * tanh, sin, cos and erf, independent of the host C library.  The algorithms
 * and constants follow musl (1.2.x, fdlibm / ARM optimized-routines lineage),
 * see docs/libm.md.
 *
 * Build requirements: C11, IEEE-754 binary32/binary64 evaluated without excess
 * precision (FLT_EVAL_METHOD == 0, e.g. SSE2 on x86-64), round-to-nearest, and
 * no floating-point contraction: compile with -ffp-contract=off and without
 * -ffast-math.  Results are then identical with and without -march=native.
 */
#ifndef PRESK_LIBM_H
#define PRESK_LIBM_H

#ifdef __cplusplus
extern "C" {
#endif

double presk_exp(double x);
double presk_log(double x);
double presk_tanh(double x);
double presk_sin(double x);
double presk_cos(double x);
double presk_erf(double x);

float presk_expf(float x);
float presk_logf(float x);
float presk_tanhf(float x);
float presk_sinf(float x);
float presk_cosf(float x);
float presk_erff(float x);

#ifdef __cplusplus
}
#endif

#endif /* PRESK_LIBM_H */

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

/* A unit that includes presk_libm.c itself (the native backend's, an exported model.c)
 * defines PRESK_LIBM_PRIVATE first: its copy of every function is then static, so two
 * such units link into one program, and its kernels take the lane forms inline. */
#if defined(PRESK_LIBM_PRIVATE) && defined(__GNUC__)
#define PRESK_LIBM_FN static __attribute__((unused))
#elif defined(PRESK_LIBM_PRIVATE)
#define PRESK_LIBM_FN static
#else
#define PRESK_LIBM_FN
#endif

/* Every function's result depends on its argument alone (no errno, no state): saying
 * so lets a compiler merge repeated calls and lets Polly model a nest that calls one. */
#if defined(__GNUC__)
#define PRESK_LIBM_CONST __attribute__((const))
#else
#define PRESK_LIBM_CONST
#endif

PRESK_LIBM_FN double presk_exp(double x) PRESK_LIBM_CONST;
PRESK_LIBM_FN double presk_log(double x) PRESK_LIBM_CONST;
PRESK_LIBM_FN double presk_tanh(double x) PRESK_LIBM_CONST;
PRESK_LIBM_FN double presk_sin(double x) PRESK_LIBM_CONST;
PRESK_LIBM_FN double presk_cos(double x) PRESK_LIBM_CONST;
PRESK_LIBM_FN double presk_erf(double x) PRESK_LIBM_CONST;

PRESK_LIBM_FN float presk_expf(float x) PRESK_LIBM_CONST;
PRESK_LIBM_FN float presk_logf(float x) PRESK_LIBM_CONST;
PRESK_LIBM_FN float presk_tanhf(float x) PRESK_LIBM_CONST;
PRESK_LIBM_FN float presk_sinf(float x) PRESK_LIBM_CONST;
PRESK_LIBM_FN float presk_cosf(float x) PRESK_LIBM_CONST;
PRESK_LIBM_FN float presk_erff(float x) PRESK_LIBM_CONST;

/* Lanes (GCC and Clang vector extensions): y[l] = presk_exp(x[l]) for each of
 * PRESK_LANES_F64 doubles, y[l] = presk_expf(x[l]) for each of PRESK_LANES_F32
 * floats, and so on; every lane has the scalar function's bits.  y may be x. */
#if defined(__GNUC__)
#define PRESK_LANES_F64 8
#define PRESK_LANES_F32 16
PRESK_LIBM_FN void presk_exp_lanes(double *y, const double *x);
PRESK_LIBM_FN void presk_log_lanes(double *y, const double *x);
PRESK_LIBM_FN void presk_tanh_lanes(double *y, const double *x);
PRESK_LIBM_FN void presk_erf_lanes(double *y, const double *x);
PRESK_LIBM_FN void presk_expf_lanes(float *y, const float *x);
PRESK_LIBM_FN void presk_logf_lanes(float *y, const float *x);
PRESK_LIBM_FN void presk_tanhf_lanes(float *y, const float *x);
PRESK_LIBM_FN void presk_erff_lanes(float *y, const float *x);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PRESK_LIBM_H */

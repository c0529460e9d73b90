/*
 * presk_libm.c -- deterministic exp/log/tanh/sin/cos/erf (double and float).
 *
 * Written for presk following musl's algorithms and published constants
 * (musl 1.2.3; fdlibm lineage for sin/cos/erf and the pi/2 reductions, ARM
 * optimized-routines lineage for exp/expf/log/logf).  The results are those of
 * musl on x86-64 bit for bit, except tanh and tanhf, where musl is up to 2.1
 * ulp off and presk uses its own algorithm (< 1 ulp); and they do not depend
 * on the host libm, the compiler, or -march.  See docs/libm.md for the
 * algorithm of each function, the measured errors and the musl comparison.
 *
 * Rules this file keeps:
 *   - C11, only <stdint.h>, <string.h>, <float.h>; no call into the system libm;
 *   - no global mutable state (all tables are const);
 *   - bit access through memcpy;
 *   - every expression is written so that the evaluation order is the one
 *     musl uses; it must be compiled with -ffp-contract=off (no FMA
 *     contraction) and without -ffast-math;
 *   - NaN results created from non-NaN inputs are the fixed quiet NaN
 *     0xfff8000000000000 (what x86-64 produces), NaN inputs propagate.
 *
 * The lookup tables between the BEGIN/END GENERATED TABLES markers are written
 * by libm/gen_tables.py (and checked by it with --check).
 */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "presk_libm.h"

#if defined(__FAST_MATH__)
#error "presk_libm.c must not be compiled with -ffast-math"
#endif
/* 0: float and double evaluate in their own type; 16 (ISO/IEC TS 18661-3,
   GCC in GNU mode with native _Float16) says the same for float and double. */
#if !defined(FLT_EVAL_METHOD) || (FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != 16)
#error "presk_libm.c needs FLT_EVAL_METHOD == 0 (no excess precision, e.g. SSE2)"
#endif
#if FLT_RADIX != 2 || DBL_MANT_DIG != 53 || FLT_MANT_DIG != 24
#error "presk_libm.c needs IEEE-754 binary32 and binary64"
#endif

/* Belt and braces: the build must use -ffp-contract=off, and these pragmas
   also switch contraction off for this file only (so that GCC's GNU-mode
   default -ffp-contract=fast and clang's default "on" cannot fuse a*b+c into
   an FMA under -march=native).  They are undone at the end of the file. */
#if defined(__clang__)
#if __clang_major__ >= 11
#pragma float_control(push)
#endif
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

/* ------------------------------------------------------------------------ */
/* Bit access and small helpers                                             */
/* ------------------------------------------------------------------------ */

static inline uint64_t pk_asu64(double x)
{
	uint64_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

static inline double pk_asf64(uint64_t u)
{
	double x;
	memcpy(&x, &u, sizeof x);
	return x;
}

static inline uint32_t pk_asu32(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

static inline float pk_asf32(uint32_t u)
{
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* High 32 bits of a double (fdlibm's GET_HIGH_WORD). */
static inline uint32_t pk_hi32(double x)
{
	return (uint32_t)(pk_asu64(x) >> 32);
}

#define PK_INF_BITS 0x7ff0000000000000ULL
#define PK_NEG_INF_BITS 0xfff0000000000000ULL
#define PK_QNAN_BITS 0xfff8000000000000ULL /* x86-64's default NaN */
#define PK_INFF_BITS 0x7f800000U
#define PK_NEG_INFF_BITS 0xff800000U
#define PK_QNANF_BITS 0xffc00000U

static inline int pk_isnan(double x)
{
	return (pk_asu64(x) & 0x7fffffffffffffffULL) > PK_INF_BITS;
}

static inline int pk_isnanf(float x)
{
	return (pk_asu32(x) & 0x7fffffffU) > PK_INFF_BITS;
}

/* Invalid operation: NaN inputs propagate (quieted), others give the
   canonical NaN (musl computes (x-x)/(x-x), whose sign is target dependent). */
static inline double pk_invalid(double x)
{
	return pk_isnan(x) ? x + x : pk_asf64(PK_QNAN_BITS);
}

static inline float pk_invalidf(float x)
{
	return pk_isnanf(x) ? x + x : pk_asf32(PK_QNANF_BITS);
}

static inline double pk_fabs(double x)
{
	return pk_asf64(pk_asu64(x) & 0x7fffffffffffffffULL);
}

static inline float pk_fabsf(float x)
{
	return pk_asf32(pk_asu32(x) & 0x7fffffffU);
}

/* x * 2^n, as musl's scalbn (single rounding also in the subnormal range). */
static double pk_scalbn(double x, int n)
{
	double y = x;

	if (n > 1023) {
		y *= 0x1p1023;
		n -= 1023;
		if (n > 1023) {
			y *= 0x1p1023;
			n -= 1023;
			if (n > 1023)
				n = 1023;
		}
	} else if (n < -1022) {
		y *= 0x1p-1022 * 0x1p53;
		n += 1022 - 53;
		if (n < -1022) {
			y *= 0x1p-1022 * 0x1p53;
			n += 1022 - 53;
			if (n < -1022)
				n = -1022;
		}
	}
	return y * pk_asf64((uint64_t)(0x3ff + n) << 52);
}

/* floor(x); exact in round-to-nearest (musl's algorithm). */
static double pk_floor(double x)
{
	const double toint = 1 / DBL_EPSILON;
	uint64_t u = pk_asu64(x);
	int e = (int)(u >> 52 & 0x7ff);
	double y;

	if (e >= 0x3ff + 52 || x == 0)
		return x;
	/* y = int(x) - x, where int(x) is an integer neighbour of x */
	if (u >> 63)
		y = x - toint + toint - x;
	else
		y = x + toint - toint - x;
	if (e <= 0x3ff - 1)
		return u >> 63 ? -1 : 0;
	if (y > 0)
		return x + y - 1;
	return x + y;
}

/* ------------------------------------------------------------------------ */
/* Tables                                                                   */
/* ------------------------------------------------------------------------ */

/* BEGIN GENERATED TABLES: libm/gen_tables.py --write; do not edit by hand. */
/* exp: 2^(k/128) ~= asdouble(tab[2k+1] + (k << 45)) * (1 + asdouble(tab[2k])). */
static const uint64_t EXP_TAB[256] = {
	0x0000000000000000, 0x3ff0000000000000,
	0x3c9b3b4f1a88bf6e, 0x3feff63da9fb3335,
	0xbc7160139cd8dc5d, 0x3fefec9a3e778061,
	0xbc905e7a108766d1, 0x3fefe315e86e7f85,
	0x3c8cd2523567f613, 0x3fefd9b0d3158574,
	0xbc8bce8023f98efa, 0x3fefd06b29ddf6de,
	0x3c60f74e61e6c861, 0x3fefc74518759bc8,
	0x3c90a3e45b33d399, 0x3fefbe3ecac6f383,
	0x3c979aa65d837b6d, 0x3fefb5586cf9890f,
	0x3c8eb51a92fdeffc, 0x3fefac922b7247f7,
	0x3c3ebe3d702f9cd1, 0x3fefa3ec32d3d1a2,
	0xbc6a033489906e0b, 0x3fef9b66affed31b,
	0xbc9556522a2fbd0e, 0x3fef9301d0125b51,
	0xbc5080ef8c4eea55, 0x3fef8abdc06c31cc,
	0xbc91c923b9d5f416, 0x3fef829aaea92de0,
	0x3c80d3e3e95c55af, 0x3fef7a98c8a58e51,
	0xbc801b15eaa59348, 0x3fef72b83c7d517b,
	0xbc8f1ff055de323d, 0x3fef6af9388c8dea,
	0x3c8b898c3f1353bf, 0x3fef635beb6fcb75,
	0xbc96d99c7611eb26, 0x3fef5be084045cd4,
	0x3c9aecf73e3a2f60, 0x3fef54873168b9aa,
	0xbc8fe782cb86389d, 0x3fef4d5022fcd91d,
	0x3c8a6f4144a6c38d, 0x3fef463b88628cd6,
	0x3c807a05b0e4047d, 0x3fef3f49917ddc96,
	0x3c968efde3a8a894, 0x3fef387a6e756238,
	0x3c875e18f274487d, 0x3fef31ce4fb2a63f,
	0x3c80472b981fe7f2, 0x3fef2b4565e27cdd,
	0xbc96b87b3f71085e, 0x3fef24dfe1f56381,
	0x3c82f7e16d09ab31, 0x3fef1e9df51fdee1,
	0xbc3d219b1a6fbffa, 0x3fef187fd0dad990,
	0x3c8b3782720c0ab4, 0x3fef1285a6e4030b,
	0x3c6e149289cecb8f, 0x3fef0cafa93e2f56,
	0x3c834d754db0abb6, 0x3fef06fe0a31b715,
	0x3c864201e2ac744c, 0x3fef0170fc4cd831,
	0x3c8fdd395dd3f84a, 0x3feefc08b26416ff,
	0xbc86a3803b8e5b04, 0x3feef6c55f929ff1,
	0xbc924aedcc4b5068, 0x3feef1a7373aa9cb,
	0xbc9907f81b512d8e, 0x3feeecae6d05d866,
	0xbc71d1e83e9436d2, 0x3feee7db34e59ff7,
	0xbc991919b3ce1b15, 0x3feee32dc313a8e5,
	0x3c859f48a72a4c6d, 0x3feedea64c123422,
	0xbc9312607a28698a, 0x3feeda4504ac801c,
	0xbc58a78f4817895b, 0x3feed60a21f72e2a,
	0xbc7c2c9b67499a1b, 0x3feed1f5d950a897,
	0x3c4363ed60c2ac11, 0x3feece086061892d,
	0x3c9666093b0664ef, 0x3feeca41ed1d0057,
	0x3c6ecce1daa10379, 0x3feec6a2b5c13cd0,
	0x3c93ff8e3f0f1230, 0x3feec32af0d7d3de,
	0x3c7690cebb7aafb0, 0x3feebfdad5362a27,
	0x3c931dbdeb54e077, 0x3feebcb299fddd0d,
	0xbc8f94340071a38e, 0x3feeb9b2769d2ca7,
	0xbc87deccdc93a349, 0x3feeb6daa2cf6642,
	0xbc78dec6bd0f385f, 0x3feeb42b569d4f82,
	0xbc861246ec7b5cf6, 0x3feeb1a4ca5d920f,
	0x3c93350518fdd78e, 0x3feeaf4736b527da,
	0x3c7b98b72f8a9b05, 0x3feead12d497c7fd,
	0x3c9063e1e21c5409, 0x3feeab07dd485429,
	0x3c34c7855019c6ea, 0x3feea9268a5946b7,
	0x3c9432e62b64c035, 0x3feea76f15ad2148,
	0xbc8ce44a6199769f, 0x3feea5e1b976dc09,
	0xbc8c33c53bef4da8, 0x3feea47eb03a5585,
	0xbc845378892be9ae, 0x3feea34634ccc320,
	0xbc93cedd78565858, 0x3feea23882552225,
	0x3c5710aa807e1964, 0x3feea155d44ca973,
	0xbc93b3efbf5e2228, 0x3feea09e667f3bcd,
	0xbc6a12ad8734b982, 0x3feea012750bdabf,
	0xbc6367efb86da9ee, 0x3fee9fb23c651a2f,
	0xbc80dc3d54e08851, 0x3fee9f7df9519484,
	0xbc781f647e5a3ecf, 0x3fee9f75e8ec5f74,
	0xbc86ee4ac08b7db0, 0x3fee9f9a48a58174,
	0xbc8619321e55e68a, 0x3fee9feb564267c9,
	0x3c909ccb5e09d4d3, 0x3feea0694fde5d3f,
	0xbc7b32dcb94da51d, 0x3feea11473eb0187,
	0x3c94ecfd5467c06b, 0x3feea1ed0130c132,
	0x3c65ebe1abd66c55, 0x3feea2f336cf4e62,
	0xbc88a1c52fb3cf42, 0x3feea427543e1a12,
	0xbc9369b6f13b3734, 0x3feea589994cce13,
	0xbc805e843a19ff1e, 0x3feea71a4623c7ad,
	0xbc94d450d872576e, 0x3feea8d99b4492ed,
	0x3c90ad675b0e8a00, 0x3feeaac7d98a6699,
	0x3c8db72fc1f0eab4, 0x3feeace5422aa0db,
	0xbc65b6609cc5e7ff, 0x3feeaf3216b5448c,
	0x3c7bf68359f35f44, 0x3feeb1ae99157736,
	0xbc93091fa71e3d83, 0x3feeb45b0b91ffc6,
	0xbc5da9b88b6c1e29, 0x3feeb737b0cdc5e5,
	0xbc6c23f97c90b959, 0x3feeba44cbc8520f,
	0xbc92434322f4f9aa, 0x3feebd829fde4e50,
	0xbc85ca6cd7668e4b, 0x3feec0f170ca07ba,
	0x3c71affc2b91ce27, 0x3feec49182a3f090,
	0x3c6dd235e10a73bb, 0x3feec86319e32323,
	0xbc87c50422622263, 0x3feecc667b5de565,
	0x3c8b1c86e3e231d5, 0x3feed09bec4a2d33,
	0xbc91bbd1d3bcbb15, 0x3feed503b23e255d,
	0x3c90cc319cee31d2, 0x3feed99e1330b358,
	0x3c8469846e735ab3, 0x3feede6b5579fdbf,
	0xbc82dfcd978e9db4, 0x3feee36bbfd3f37a,
	0x3c8c1a7792cb3387, 0x3feee89f995ad3ad,
	0xbc907b8f4ad1d9fa, 0x3feeee07298db666,
	0xbc55c3d956dcaeba, 0x3feef3a2b84f15fb,
	0xbc90a40e3da6f640, 0x3feef9728de5593a,
	0xbc68d6f438ad9334, 0x3feeff76f2fb5e47,
	0xbc91eee26b588a35, 0x3fef05b030a1064a,
	0x3c74ffd70a5fddcd, 0x3fef0c1e904bc1d2,
	0xbc91bdfbfa9298ac, 0x3fef12c25bd71e09,
	0x3c736eae30af0cb3, 0x3fef199bdd85529c,
	0x3c8ee3325c9ffd94, 0x3fef20ab5fffd07a,
	0x3c84e08fd10959ac, 0x3fef27f12e57d14b,
	0x3c63cdaf384e1a67, 0x3fef2f6d9406e7b5,
	0x3c676b2c6c921968, 0x3fef3720dcef9069,
	0xbc808a1883ccb5d2, 0x3fef3f0b555dc3fa,
	0xbc8fad5d3ffffa6f, 0x3fef472d4a07897c,
	0xbc900dae3875a949, 0x3fef4f87080d89f2,
	0x3c74a385a63d07a7, 0x3fef5818dcfba487,
	0xbc82919e2040220f, 0x3fef60e316c98398,
	0x3c8e5a50d5c192ac, 0x3fef69e603db3285,
	0x3c843a59ac016b4b, 0x3fef7321f301b460,
	0xbc82d52107b43e1f, 0x3fef7c97337b9b5f,
	0xbc892ab93b470dc9, 0x3fef864614f5a129,
	0x3c74b604603a88d3, 0x3fef902ee78b3ff6,
	0x3c83c5ec519d7271, 0x3fef9a51fbc74c83,
	0xbc8ff7128fd391f0, 0x3fefa4afa2a490da,
	0xbc8dae98e223747d, 0x3fefaf482d8e67f1,
	0x3c8ec3bc41aa2008, 0x3fefba1bee615a27,
	0x3c842b94c3a9eb32, 0x3fefc52b376bba97,
	0x3c8a64a931d185ee, 0x3fefd0765b6e4540,
	0xbc8e37bae43be3ed, 0x3fefdbfdad9cbe14,
	0x3c77893b4d91cd9d, 0x3fefe7c1819e90d8,
	0x3c5305c14160cc89, 0x3feff3c22b8f71f1,
};
/* expf: 2^(k/32) == asdouble(tab[k] + (k << 47)). */
static const uint64_t EXP2F_TAB[32] = {
	0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
	0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
	0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
	0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
	0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
	0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
	0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
	0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
/* log: {invc, logc = RN(log(1/invc))} and {chi, clo} = 1/invc as a double-double. */
static const struct { double invc, logc; } LOG_TAB[128] = {
	{0x1.734f0c3e0de9fp+0, -0x1.7cc7f79e69000p-2},
	{0x1.713786a2ce91fp+0, -0x1.76feec20d0000p-2},
	{0x1.6f26008fab5a0p+0, -0x1.713e31351e000p-2},
	{0x1.6d1a61f138c7dp+0, -0x1.6b85b38287800p-2},
	{0x1.6b1490bc5b4d1p+0, -0x1.65d5590807800p-2},
	{0x1.69147332f0cbap+0, -0x1.602d076180000p-2},
	{0x1.6719f18224223p+0, -0x1.5a8ca86909000p-2},
	{0x1.6524f99a51ed9p+0, -0x1.54f4356035000p-2},
	{0x1.63356aa8f24c4p+0, -0x1.4f637c36b4000p-2},
	{0x1.614b36b9ddc14p+0, -0x1.49da7fda85000p-2},
	{0x1.5f66452c65c4cp+0, -0x1.445923989a800p-2},
	{0x1.5d867b5912c4fp+0, -0x1.3edf439b0b800p-2},
	{0x1.5babccb5b90dep+0, -0x1.396ce448f7000p-2},
	{0x1.59d61f2d91a78p+0, -0x1.3401e17bda000p-2},
	{0x1.5805612465687p+0, -0x1.2e9e2ef468000p-2},
	{0x1.56397cee76bd3p+0, -0x1.2941b3830e000p-2},
	{0x1.54725e2a77f93p+0, -0x1.23ec58cda8800p-2},
	{0x1.52aff42064583p+0, -0x1.1e9e129279000p-2},
	{0x1.50f22dbb2bddfp+0, -0x1.1956d2b48f800p-2},
	{0x1.4f38f4734ded7p+0, -0x1.141679ab9f800p-2},
	{0x1.4d843cfde2840p+0, -0x1.0edd094ef9800p-2},
	{0x1.4bd3ec078a3c8p+0, -0x1.09aa518db1000p-2},
	{0x1.4a27fc3e0258ap+0, -0x1.047e65263b800p-2},
	{0x1.4880524d48434p+0, -0x1.feb224586f000p-3},
	{0x1.46dce1b192d0bp+0, -0x1.f474a7517b000p-3},
	{0x1.453d9d3391854p+0, -0x1.ea4443d103000p-3},
	{0x1.43a2744b4845ap+0, -0x1.e020d44e9b000p-3},
	{0x1.420b54115f8fbp+0, -0x1.d60a22977f000p-3},
	{0x1.40782da3ef4b1p+0, -0x1.cc00104959000p-3},
	{0x1.3ee8f5d57fe8fp+0, -0x1.c202956891000p-3},
	{0x1.3d5d9a00b4ce9p+0, -0x1.b81178d811000p-3},
	{0x1.3bd60c010c12bp+0, -0x1.ae2c9ccd3d000p-3},
	{0x1.3a5242b75dab8p+0, -0x1.a45402e129000p-3},
	{0x1.38d22cd9fd002p+0, -0x1.9a877681df000p-3},
	{0x1.3755bc5847a1cp+0, -0x1.90c6d69483000p-3},
	{0x1.35dce49ad36e2p+0, -0x1.87120a645c000p-3},
	{0x1.34679984dd440p+0, -0x1.7d68fb4143000p-3},
	{0x1.32f5cceffcb24p+0, -0x1.73cb83c627000p-3},
	{0x1.3187775a10d49p+0, -0x1.6a39a9b376000p-3},
	{0x1.301c8373e3990p+0, -0x1.60b3154b7a000p-3},
	{0x1.2eb4ebb95f841p+0, -0x1.5737d76243000p-3},
	{0x1.2d50a0219a9d1p+0, -0x1.4dc7b8fc23000p-3},
	{0x1.2bef9a8b7fd2ap+0, -0x1.4462c51d20000p-3},
	{0x1.2a91c7a0c1babp+0, -0x1.3b08abc830000p-3},
	{0x1.293726014b530p+0, -0x1.31b996b490000p-3},
	{0x1.27dfa5757a1f5p+0, -0x1.2875490a44000p-3},
	{0x1.268b39b1d3bbfp+0, -0x1.1f3b9f879a000p-3},
	{0x1.2539d838ff5bdp+0, -0x1.160c8252ca000p-3},
	{0x1.23eb7aac9083bp+0, -0x1.0ce7f57f72000p-3},
	{0x1.22a012ba940b6p+0, -0x1.03cdc49fea000p-3},
	{0x1.2157996cc4132p+0, -0x1.f57bdbc4b8000p-4},
	{0x1.201201dd2fc9bp+0, -0x1.e370896404000p-4},
	{0x1.1ecf4494d480bp+0, -0x1.d17983ef94000p-4},
	{0x1.1d8f5528f6569p+0, -0x1.bf9674ed8a000p-4},
	{0x1.1c52311577e7cp+0, -0x1.adc79202f6000p-4},
	{0x1.1b17c74cb26e9p+0, -0x1.9c0c3e7288000p-4},
	{0x1.19e010c2c1ab6p+0, -0x1.8a646b372c000p-4},
	{0x1.18ab07bb670bdp+0, -0x1.78d01b3ac0000p-4},
	{0x1.1778a25efbcb6p+0, -0x1.674f145380000p-4},
	{0x1.1648d354c31dap+0, -0x1.55e0e6d878000p-4},
	{0x1.151b990275fddp+0, -0x1.4485cdea1e000p-4},
	{0x1.13f0ea432d24cp+0, -0x1.333d94d6aa000p-4},
	{0x1.12c8b7210f9dap+0, -0x1.22079f8c56000p-4},
	{0x1.11a3028ecb531p+0, -0x1.10e4698622000p-4},
	{0x1.107fbda8434afp+0, -0x1.ffa6c6ad20000p-5},
	{0x1.0f5ee0f4e6bb3p+0, -0x1.dda8d4a774000p-5},
	{0x1.0e4065d2a9fcep+0, -0x1.bbcece4850000p-5},
	{0x1.0d244632ca521p+0, -0x1.9a1894012c000p-5},
	{0x1.0c0a77ce2981ap+0, -0x1.788583302c000p-5},
	{0x1.0af2f83c636d1p+0, -0x1.5715e67d68000p-5},
	{0x1.09ddb98a01339p+0, -0x1.35c8a49658000p-5},
	{0x1.08cabaf52e7dfp+0, -0x1.149e364154000p-5},
	{0x1.07b9f2f4e28fbp+0, -0x1.e72c082eb8000p-6},
	{0x1.06ab58c358f19p+0, -0x1.a55f152528000p-6},
	{0x1.059eea5ecf92cp+0, -0x1.63d62cf818000p-6},
	{0x1.04949cdd12c90p+0, -0x1.228fb8caa0000p-6},
	{0x1.038c6c6f0ada9p+0, -0x1.c317b20f90000p-7},
	{0x1.02865137932a9p+0, -0x1.419355daa0000p-7},
	{0x1.0182427ea7348p+0, -0x1.81203c2ec0000p-8},
	{0x1.008040614b195p+0, -0x1.0040979240000p-9},
	{0x1.fe01ff726fa1ap-1, 0x1.feff384900000p-9},
	{0x1.fa11cc261ea74p-1, 0x1.7dc41353d0000p-7},
	{0x1.f6310b081992ep-1, 0x1.3cea3c4c28000p-6},
	{0x1.f25f63ceeadcdp-1, 0x1.b9fc114890000p-6},
	{0x1.ee9c8039113e7p-1, 0x1.1b0d8ce110000p-5},
	{0x1.eae8078cbb1abp-1, 0x1.58a5bd001c000p-5},
	{0x1.e741aa29d0c9bp-1, 0x1.95c8340d88000p-5},
	{0x1.e3a91830a99b5p-1, 0x1.d276aef578000p-5},
	{0x1.e01e009609a56p-1, 0x1.07598e598c000p-4},
	{0x1.dca01e577bb98p-1, 0x1.253f5e30d2000p-4},
	{0x1.d92f20b7c9103p-1, 0x1.42edd8b380000p-4},
	{0x1.d5cac66fb5ccep-1, 0x1.606598757c000p-4},
	{0x1.d272caa5ede9dp-1, 0x1.7da76356a0000p-4},
	{0x1.cf26e3e6b2ccdp-1, 0x1.9ab434e1c6000p-4},
	{0x1.cbe6da2a77902p-1, 0x1.b78c7bb0d6000p-4},
	{0x1.c8b266d37086dp-1, 0x1.d431332e72000p-4},
	{0x1.c5894bd5d5804p-1, 0x1.f0a3171de6000p-4},
	{0x1.c26b533bb9f8cp-1, 0x1.067152b914000p-3},
	{0x1.bf583eeece73fp-1, 0x1.147858292b000p-3},
	{0x1.bc4fd75db96c1p-1, 0x1.2266ecdca3000p-3},
	{0x1.b951e0c864a28p-1, 0x1.303d7a6c55000p-3},
	{0x1.b65e2c5ef3e2cp-1, 0x1.3dfc33c331000p-3},
	{0x1.b374867c9888bp-1, 0x1.4ba366b7a8000p-3},
	{0x1.b094b211d304ap-1, 0x1.5933928d1f000p-3},
	{0x1.adbe885f2ef7ep-1, 0x1.66acd2418f000p-3},
	{0x1.aaf1d31603da2p-1, 0x1.740f8ec669000p-3},
	{0x1.a82e63fd358a7p-1, 0x1.815c0f51af000p-3},
	{0x1.a5740ef09738bp-1, 0x1.8e92954f68000p-3},
	{0x1.a2c2a90ab4b27p-1, 0x1.9bb3602f84000p-3},
	{0x1.a01a01393f2d1p-1, 0x1.a8bed1c2c0000p-3},
	{0x1.9d79f24db3c1bp-1, 0x1.b5b515c01d000p-3},
	{0x1.9ae2505c7b190p-1, 0x1.c2967ccbcc000p-3},
	{0x1.9852ef297ce2fp-1, 0x1.cf635d5486000p-3},
	{0x1.95cbaeea44b75p-1, 0x1.dc1bd3446c000p-3},
	{0x1.934c69de74838p-1, 0x1.e8c01b8cfe000p-3},
	{0x1.90d4f2f6752e6p-1, 0x1.f5509c0179000p-3},
	{0x1.8e6528effd79dp-1, 0x1.00e6c121fb800p-2},
	{0x1.8bfce9fcc007cp-1, 0x1.071b80e93d000p-2},
	{0x1.899c0dabec30ep-1, 0x1.0d46b9e867000p-2},
	{0x1.87427aa2317fbp-1, 0x1.13687334bd000p-2},
	{0x1.84f00acb39a08p-1, 0x1.1980d67234800p-2},
	{0x1.82a49e8653e55p-1, 0x1.1f8ffe0cc8000p-2},
	{0x1.8060195f40260p-1, 0x1.2595fd7636800p-2},
	{0x1.7e22563e0a329p-1, 0x1.2b9300914a800p-2},
	{0x1.7beb377dcb5adp-1, 0x1.3187210436000p-2},
	{0x1.79baa679725c2p-1, 0x1.377266dec1800p-2},
	{0x1.77907f2170657p-1, 0x1.3d54ffbaf3000p-2},
	{0x1.756cadbd6130cp-1, 0x1.432eee32fe000p-2},
};
static const struct { double chi, clo; } LOG_TAB2[128] = {
	{0x1.61000014fb66bp-1, 0x1.e026c91425b3cp-56},
	{0x1.63000034db495p-1, 0x1.dbfea48005d41p-55},
	{0x1.650000d94d478p-1, 0x1.e7fa786d6a5b7p-55},
	{0x1.67000074e6fadp-1, 0x1.1fcea6b54254cp-57},
	{0x1.68ffffedf0faep-1, -0x1.c7e274c590efdp-56},
	{0x1.6b0000763c5bcp-1, -0x1.ac16848dcda01p-55},
	{0x1.6d0001e5cc1f6p-1, 0x1.33f1c9d499311p-55},
	{0x1.6efffeb05f63ep-1, -0x1.e80041ae22d53p-56},
	{0x1.710000e869780p-1, 0x1.bff6671097952p-56},
	{0x1.72ffffc67e912p-1, 0x1.c00e226bd8724p-55},
	{0x1.74fffdf81116ap-1, -0x1.e02916ef101d2p-57},
	{0x1.770000f679c90p-1, -0x1.7fc71cd549c74p-57},
	{0x1.78ffffa7ec835p-1, 0x1.1bec19ef50483p-55},
	{0x1.7affffe20c2e6p-1, -0x1.07e1729cc6465p-56},
	{0x1.7cfffed3fc900p-1, -0x1.08072087b8b1cp-55},
	{0x1.7efffe9261a76p-1, 0x1.dc0286d9df9aep-55},
	{0x1.81000049ca3e8p-1, 0x1.97fd251e54c33p-55},
	{0x1.8300017932c8fp-1, -0x1.afee9b630f381p-55},
	{0x1.850000633739cp-1, 0x1.9bfbf6b6535bcp-55},
	{0x1.87000204289c6p-1, -0x1.bbf65f3117b75p-55},
	{0x1.88fffebf57904p-1, -0x1.9006ea23dcb57p-55},
	{0x1.8b00022bc04dfp-1, -0x1.d00df38e04b0ap-56},
	{0x1.8cfffe50c1b8ap-1, -0x1.8007146ff9f05p-55},
	{0x1.8effffc918e43p-1, 0x1.3817bd07a7038p-55},
	{0x1.910001efa5fc7p-1, 0x1.93e9176dfb403p-55},
	{0x1.9300013467bb9p-1, 0x1.f804e4b980276p-56},
	{0x1.94fffe6ee076fp-1, -0x1.f7ef0d9ff622ep-55},
	{0x1.96fffde3c12d1p-1, -0x1.082aa962638bap-56},
	{0x1.98ffff4458a0dp-1, -0x1.7801b9164a8efp-55},
	{0x1.9afffdd982e3ep-1, -0x1.740e08a5a9337p-55},
	{0x1.9cfffed49fb66p-1, 0x1.fce08c19be000p-60},
	{0x1.9f00020f19c51p-1, -0x1.a3faa27885b0ap-55},
	{0x1.a10001145b006p-1, 0x1.4ff489958da56p-56},
	{0x1.a300007bbf6fap-1, 0x1.cbeab8a2b6d18p-55},
	{0x1.a500010971d79p-1, 0x1.8fecadd787930p-55},
	{0x1.a70001df52e48p-1, -0x1.f41763dd8abdbp-55},
	{0x1.a90001c593352p-1, -0x1.ebf0284c27612p-55},
	{0x1.ab0002a4f3e4bp-1, -0x1.9fd043cff3f5fp-57},
	{0x1.acfffd7ae1ed1p-1, -0x1.23ee7129070b4p-55},
	{0x1.aefffee510478p-1, 0x1.a063ee00edea3p-57},
	{0x1.b0fffdb650d5bp-1, 0x1.a06c8381f0ab9p-58},
	{0x1.b2ffffeaaca57p-1, -0x1.9011e74233c1dp-56},
	{0x1.b4fffd995badcp-1, -0x1.9ff1068862a9fp-56},
	{0x1.b7000249e659cp-1, 0x1.aff45d0864f3ep-55},
	{0x1.b8ffff9871640p-1, 0x1.cfe7796c2c3f9p-56},
	{0x1.bafffd204cb4fp-1, -0x1.3ff27eef22bc4p-57},
	{0x1.bcfffd2415c45p-1, -0x1.cffb7ee3bea21p-57},
	{0x1.beffff86309dfp-1, -0x1.14103972e0b5cp-55},
	{0x1.c0fffe1b57653p-1, 0x1.bc16494b76a19p-55},
	{0x1.c2ffff1fa57e3p-1, -0x1.4feef8d30c6edp-57},
	{0x1.c4fffdcbfe424p-1, -0x1.43f68bcec4775p-55},
	{0x1.c6fffed54b9f7p-1, 0x1.47ea3f053e0ecp-55},
	{0x1.c8fffeb998fd5p-1, 0x1.383068df992f1p-56},
	{0x1.cb0002125219ap-1, -0x1.8fd8e64180e04p-57},
	{0x1.ccfffdd94469cp-1, 0x1.e7ebe1cc7ea72p-55},
	{0x1.cefffeafdc476p-1, 0x1.ebe39ad9f88fep-55},
	{0x1.d1000169af82bp-1, 0x1.57d91a8b95a71p-56},
	{0x1.d30000d0ff71dp-1, 0x1.9c1906970c7dap-55},
	{0x1.d4fffea790fc4p-1, -0x1.80e37c558fe0cp-58},
	{0x1.d70002edc87e5p-1, -0x1.f80d64dc10f44p-56},
	{0x1.d900021dc82aap-1, -0x1.47c8f94fd5c5cp-56},
	{0x1.dafffd86b0283p-1, 0x1.c7f1dc521617ep-55},
	{0x1.dd000296c4739p-1, 0x1.8019eb2ffb153p-55},
	{0x1.defffe54490f5p-1, 0x1.e00d2c652cc89p-57},
	{0x1.e0fffcdabf694p-1, -0x1.f8340202d69d2p-56},
	{0x1.e2fffdb52c8ddp-1, 0x1.b00c1ca1b0864p-56},
	{0x1.e4ffff24216efp-1, 0x1.2ffa8b094ab51p-56},
	{0x1.e6fffe88a5e11p-1, -0x1.7f673b1efbe59p-58},
	{0x1.e9000119eff0dp-1, -0x1.4808d5e0bc801p-55},
	{0x1.eafffdfa51744p-1, 0x1.80006d54320b5p-56},
	{0x1.ed0001a127fa1p-1, -0x1.002f860565c92p-58},
	{0x1.ef00007babcc4p-1, -0x1.540445d35e611p-55},
	{0x1.f0ffff57a8d02p-1, -0x1.ffb3139ef9105p-59},
	{0x1.f30001ee58ac7p-1, 0x1.a81acf2731155p-55},
	{0x1.f4ffff5823494p-1, 0x1.a3f41d4d7c743p-55},
	{0x1.f6ffffca94c6bp-1, -0x1.202f41c987875p-57},
	{0x1.f8fffe1f9c441p-1, 0x1.77dd1f477e74bp-56},
	{0x1.fafffd2e0e37ep-1, -0x1.f01199a7ca331p-57},
	{0x1.fd0001c77e49ep-1, 0x1.181ee4bceacb1p-56},
	{0x1.feffff7e0c331p-1, -0x1.e05370170875ap-57},
	{0x1.00ffff465606ep+0, -0x1.a7ead491c0adap-55},
	{0x1.02ffff3867a58p+0, -0x1.77f69c3fcb2e0p-54},
	{0x1.04ffffdfc0d17p+0, 0x1.7bffe34cb945bp-54},
	{0x1.0700003cd4d82p+0, 0x1.20083c0e456cbp-55},
	{0x1.08ffff9f2cbe8p+0, -0x1.dffdfbe37751ap-57},
	{0x1.0b000010cda65p+0, -0x1.13f7faee626ebp-54},
	{0x1.0d00001a4d338p+0, 0x1.07dfa79489ff7p-55},
	{0x1.0effffadafdfdp+0, -0x1.7040570d66bc0p-56},
	{0x1.110000bbafd96p+0, 0x1.e80d4846d0b62p-55},
	{0x1.12ffffae5f45dp+0, 0x1.dbffa64fd36efp-54},
	{0x1.150000dd59ad9p+0, 0x1.a0077701250aep-54},
	{0x1.170000f21559ap+0, 0x1.dfdf9e2e3deeep-55},
	{0x1.18ffffc275426p+0, 0x1.10030dc3b7273p-54},
	{0x1.1b000123d3c59p+0, 0x1.97f7980030188p-54},
	{0x1.1cffff8299eb7p+0, -0x1.5f932ab9f8c67p-57},
	{0x1.1effff48ad400p+0, 0x1.37fbf9da75bebp-54},
	{0x1.210000c8b86a4p+0, 0x1.f806b91fd5b22p-54},
	{0x1.2300003854303p+0, 0x1.3ffc2eb9fbf33p-54},
	{0x1.24fffffbcf684p+0, 0x1.601e77e2e2e72p-56},
	{0x1.26ffff52921d9p+0, 0x1.ffcbb767f0c61p-56},
	{0x1.2900014933a3cp+0, -0x1.202ca3c02412bp-56},
	{0x1.2b00014556313p+0, -0x1.2808233f21f02p-54},
	{0x1.2cfffebfe523bp+0, -0x1.8ff7e384fdcf2p-55},
	{0x1.2f0000bb8ad96p+0, -0x1.5ff51503041c5p-55},
	{0x1.30ffffb7ae2afp+0, -0x1.10071885e289dp-55},
	{0x1.32ffffeac5f7fp+0, -0x1.1ff5d3fb7b715p-54},
	{0x1.350000ca66756p+0, 0x1.57f82228b82bdp-54},
	{0x1.3700011fbf721p+0, 0x1.000bac40dd5ccp-55},
	{0x1.38ffff9592fb9p+0, -0x1.43f9d2db2a751p-54},
	{0x1.3b00004ddd242p+0, 0x1.57f6b707638e1p-55},
	{0x1.3cffff5b2c957p+0, 0x1.a023a10bf1231p-56},
	{0x1.3efffeab0b418p+0, 0x1.87f6d66b152b0p-54},
	{0x1.410001532aff4p+0, 0x1.7f8375f198524p-57},
	{0x1.4300017478b29p+0, 0x1.301e672dc5143p-55},
	{0x1.44fffe795b463p+0, 0x1.9ff69b8b2895ap-55},
	{0x1.46fffe80475e0p+0, -0x1.5c0b19bc2f254p-54},
	{0x1.48fffef6fc1e7p+0, 0x1.b4009f23a2a72p-54},
	{0x1.4afffe5bea704p+0, -0x1.4ffb7bf0d7d45p-54},
	{0x1.4d000171027dep+0, -0x1.9c06471dc6a3dp-54},
	{0x1.4f0000ff03ee2p+0, 0x1.77f890b85531cp-54},
	{0x1.5100012dc4bd1p+0, 0x1.004657166a436p-57},
	{0x1.530001605277ap+0, -0x1.6bfcece233209p-54},
	{0x1.54fffecdb704cp+0, -0x1.902720505a1d7p-55},
	{0x1.56fffef5f54a9p+0, 0x1.bbfe60ec96412p-54},
	{0x1.5900017e61012p+0, 0x1.87ec581afef90p-55},
	{0x1.5b00003c93e92p+0, -0x1.f41080abf0cc0p-54},
	{0x1.5d0001d4919bcp+0, -0x1.8812afb254729p-54},
	{0x1.5efffe7b87a89p+0, -0x1.47eb780ed6904p-54},
};
/* logf: {invc, logc = RN(log(1/invc))}. */
static const struct { double invc, logc; } LOGF_TAB[16] = {
	{0x1.661ec79f8f3bep+0, -0x1.57bf7808caadep-2},
	{0x1.571ed4aaf883dp+0, -0x1.2bef0a7c06ddbp-2},
	{0x1.49539f0f010b0p+0, -0x1.01eae7f513a67p-2},
	{0x1.3c995b0b80385p+0, -0x1.b31d8a68224e9p-3},
	{0x1.30d190c8864a5p+0, -0x1.6574f0ac07758p-3},
	{0x1.25e227b0b8ea0p+0, -0x1.1aa2bc79c8100p-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.a4e76ce8c0e5ep-4},
	{0x1.12358f08ae5bap+0, -0x1.1973c5a611cccp-4},
	{0x1.0953f419900a7p+0, -0x1.252f438e10c1ep-5},
	{0x1.0000000000000p+0, 0x0p+0},
	{0x1.e608cfd9a47acp-1, 0x1.aa5aa5df25984p-5},
	{0x1.ca4b31f026aa0p-1, 0x1.c5e53aa362eb4p-4},
	{0x1.b2036576afce6p-1, 0x1.526e57720db08p-3},
	{0x1.9c2d163a1aa2dp-1, 0x1.bc2860d224770p-3},
	{0x1.886e6037841edp-1, 0x1.1058bc8a07ee1p-2},
	{0x1.767dcf5534862p-1, 0x1.4043057b6ee09p-2},
};
/* tanh: (tanh(x) - x)/x^3 ~= sum TANH_P[k] x^(2k) for |x| < 0x1.193eb00000000p-1;
   Chebyshev interpolant, degree 10, max relative error 2^-54.01. */
static const double TANH_P[11] = {
	-0x1.5555555555555p-2,
	0x1.1111111111037p-3,
	-0x1.ba1ba1b9ff62ep-5,
	0x1.664f48774a774p-6,
	-0x1.226e32fa04fc3p-7,
	0x1.d6d33b41ba8ccp-9,
	-0x1.7d97f0bde1ec8p-10,
	0x1.34c6edb4bdb58p-11,
	-0x1.ec1fab1bb0558p-13,
	0x1.652f1b9849eb8p-14,
	-0x1.5a322b969979bp-16,
};
/* The 24-bit digits of 2/pi, for the large-argument reduction. */
static const int32_t IPIO2[66] = {
	0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62,
	0x95993C, 0x439041, 0xFE5163, 0xABDEBB, 0xC561B7, 0x246E3A,
	0x424DD2, 0xE00649, 0x2EEA09, 0xD1921C, 0xFE1DEB, 0x1CB129,
	0xA73EE8, 0x8235F5, 0x2EBB44, 0x84E99C, 0x7026B4, 0x5F7E41,
	0x3991D6, 0x398353, 0x39F49C, 0x845F8B, 0xBDF928, 0x3B1FF8,
	0x97FFDE, 0x05980F, 0xEF2F11, 0x8B5A0A, 0x6D1F6D, 0x367ECF,
	0x27CB09, 0xB74F46, 0x3F669E, 0x5FEA2D, 0x7527BA, 0xC7EBE5,
	0xF17B3D, 0x0739F7, 0x8A5292, 0xEA6BFB, 0x5FB11F, 0x8D5D08,
	0x560330, 0x46FC7B, 0x6BABF0, 0xCFBC20, 0x9AF436, 0x1DA9E3,
	0x91615E, 0xE61B08, 0x659985, 0x5F14A0, 0x68408D, 0xFFD880,
	0x4D7327, 0x310606, 0x1556CA, 0x73A8C9, 0x60E27B, 0xC08C6B,
};
/* pi/2 in pieces of 24 significant bits. */
static const double PIO2_PIECES[8] = {
	0x1.921fb40000000p+0,
	0x1.4442d00000000p-24,
	0x1.8469880000000p-48,
	0x1.8cc5160000000p-72,
	0x1.01b8380000000p-96,
	0x1.a252040000000p-120,
	0x1.3822280000000p-145,
	0x1.9f31d00000000p-169,
};
/* END GENERATED TABLES */

/* ------------------------------------------------------------------------ */
/* exp (double): table driven, N = 128, degree 5 polynomial                 */
/* (musl src/math/exp.c, exp_data.c; ARM optimized-routines)                */
/* ------------------------------------------------------------------------ */

#define EXP_TABLE_BITS 7
#define EXP_N (1 << EXP_TABLE_BITS)
static const double EXP_INVLN2N = 0x1.71547652b82fep0 * EXP_N;
static const double EXP_NEGLN2HIN = -0x1.62e42fefa0000p-8;
static const double EXP_NEGLN2LON = -0x1.cf79abc9e3b3ap-47;
static const double EXP_SHIFT = 0x1.8p52;
static const double EXP_C2 = 0x1.ffffffffffdbdp-2;
static const double EXP_C3 = 0x1.555555555543cp-3;
static const double EXP_C4 = 0x1.55555cf172b91p-5;
static const double EXP_C5 = 0x1.1111167a4d017p-7;

/* Top 12 bits (sign and exponent) of a double. */
static inline uint32_t pk_top12(double x)
{
	return (uint32_t)(pk_asu64(x) >> 52);
}

/* The result scale*(1+tmp) may overflow or underflow: redo the scaling with
   an exponent that cannot, and round once in the subnormal range. */
static double exp_specialcase(double tmp, uint64_t sbits, uint64_t ki)
{
	double scale, y;

	if ((ki & 0x80000000) == 0) {
		/* k > 0: the exponent of scale may have overflowed by <= 460. */
		sbits -= 1009ULL << 52;
		scale = pk_asf64(sbits);
		y = 0x1p1009 * (scale + scale * tmp);
		return y;
	}
	/* k < 0: take care of the subnormal range. */
	sbits += 1022ULL << 52;
	scale = pk_asf64(sbits);
	y = scale + scale * tmp;
	if (y < 1.0) {
		/* Round y to the right precision before scaling it into the subnormal
		   range, to avoid double rounding. */
		double hi, lo;
		lo = scale - y + scale * tmp;
		hi = 1.0 + y;
		lo = 1.0 - hi + y + lo;
		y = (hi + lo) - 1.0;
		if (y == 0.0)
			y = 0.0; /* avoid -0.0 */
	}
	y = 0x1p-1022 * y;
	return y;
}

PRESK_LIBM_FN double presk_exp(double x)
{
	uint32_t abstop;
	uint64_t ki, idx, top, sbits;
	double kd, z, r, r2, scale, tail, tmp;

	abstop = pk_top12(x) & 0x7ff;
	/* 0x3c9 = top12(0x1p-54), 0x408 = top12(512.0) */
	if (abstop - 0x3c9 >= 0x408 - 0x3c9) {
		if (abstop - 0x3c9 >= 0x80000000)
			/* |x| < 2^-54 (also 0): avoid spurious underflow. */
			return 1.0 + x;
		if (abstop >= 0x409) { /* |x| >= 1024 or inf/nan */
			if (pk_asu64(x) == PK_NEG_INF_BITS)
				return 0.0;
			if (abstop >= 0x7ff)
				return 1.0 + x;
			if (pk_asu64(x) >> 63)
				return 0x1p-767 * 0x1p-767; /* underflow to 0 */
			return 0x1p769 * 0x1p769;           /* overflow to inf */
		}
		/* Large |x| (512 <= |x| < 1024) is special cased below. */
		abstop = 0;
	}

	/* exp(x) = 2^(k/N) * exp(r), with exp(r) in [2^(-1/2N),2^(1/2N)]. */
	/* x = ln2/N*k + r, with int k and r in [-ln2/2N, ln2/2N]. */
	z = EXP_INVLN2N * x;
	kd = z + EXP_SHIFT;
	ki = pk_asu64(kd);
	kd -= EXP_SHIFT;
	r = x + kd * EXP_NEGLN2HIN + kd * EXP_NEGLN2LON;
	/* 2^(k/N) ~= scale * (1 + tail). */
	idx = 2 * (ki % EXP_N);
	top = ki << (52 - EXP_TABLE_BITS);
	tail = pk_asf64(EXP_TAB[idx]);
	/* Valid as a scale only when -1023*N < k < 1024*N. */
	sbits = EXP_TAB[idx + 1] + top;
	/* exp(x) ~= scale + scale * (tail + exp(r) - 1). */
	r2 = r * r;
	tmp = tail + r + r2 * (EXP_C2 + r * EXP_C3) + r2 * r2 * (EXP_C4 + r * EXP_C5);
	if (abstop == 0)
		return exp_specialcase(tmp, sbits, ki);
	scale = pk_asf64(sbits);
	return scale + scale * tmp;
}

/* ------------------------------------------------------------------------ */
/* log (double): table driven, N = 128, separate polynomial near 1          */
/* (musl src/math/log.c, log_data.c; the no-FMA variant)                    */
/* ------------------------------------------------------------------------ */

#define LOG_TABLE_BITS 7
#define LOG_N (1 << LOG_TABLE_BITS)
#define LOG_OFF 0x3fe6000000000000ULL
static const double LOG_LN2HI = 0x1.62e42fefa3800p-1;
static const double LOG_LN2LO = 0x1.ef35793c76730p-45;
/* relative error 0x1.926199e8p-56, abs error 0x1.882ff33p-65 on [-0x1.fp-9, 0x1.fp-9] */
static const double LOG_A[5] = {
	-0x1.0000000000001p-1, 0x1.555555551305bp-2, -0x1.fffffffeb459p-3,
	0x1.999b324f10111p-3, -0x1.55575e506c89fp-3,
};
/* relative error 0x1.c04d76cp-63 on [-0x1p-4, 0x1.09p-4] */
static const double LOG_B[11] = {
	-0x1p-1, 0x1.5555555555577p-2, -0x1.ffffffffffdcbp-3,
	0x1.999999995dd0cp-3, -0x1.55555556745a7p-3, 0x1.24924a344de3p-3,
	-0x1.fffffa4423d65p-4, 0x1.c7184282ad6cap-4, -0x1.999eb43b068ffp-4,
	0x1.78182f7afd085p-4, -0x1.5521375d145cdp-4,
};

PRESK_LIBM_FN double presk_log(double x)
{
	double w, z, r, r2, r3, y, invc, logc, kd, hi, lo;
	uint64_t ix, iz, tmp;
	uint32_t top;
	int k, i;

	ix = pk_asu64(x);
	top = (uint32_t)(ix >> 48);
	/* 0x3fee000000000000 = asuint64(1.0 - 0x1p-4),
	   0x3ff1090000000000 = asuint64(1.0 + 0x1.09p-4) */
	if (ix - 0x3fee000000000000ULL < 0x3ff1090000000000ULL - 0x3fee000000000000ULL) {
		/* log(1+r) near 1: one polynomial, with care for the leading terms. */
		if (ix == 0x3ff0000000000000ULL)
			return 0;
		r = x - 1.0;
		r2 = r * r;
		r3 = r * r2;
		y = r3 * (LOG_B[1] + r * LOG_B[2] + r2 * LOG_B[3] +
			  r3 * (LOG_B[4] + r * LOG_B[5] + r2 * LOG_B[6] +
				r3 * (LOG_B[7] + r * LOG_B[8] + r2 * LOG_B[9] + r3 * LOG_B[10])));
		/* Worst-case error is around 0.507 ULP. */
		w = r * 0x1p27;
		double rhi = r + w - w;
		double rlo = r - rhi;
		w = rhi * rhi * LOG_B[0]; /* B[0] == -0.5 */
		hi = r + w;
		lo = r - hi + w;
		lo += LOG_B[0] * rlo * (rhi + r);
		y += lo;
		y += hi;
		return y;
	}
	if (top - 0x0010 >= 0x7ff0 - 0x0010) {
		/* x < 0x1p-1022 or inf or nan. */
		if (ix * 2 == 0)
			return pk_asf64(PK_NEG_INF_BITS); /* log(+-0) = -inf */
		if (ix == PK_INF_BITS)
			return x;
		if ((top & 0x8000) || (top & 0x7ff0) == 0x7ff0)
			return pk_invalid(x);
		/* x is subnormal, normalize it. */
		ix = pk_asu64(x * 0x1p52);
		ix -= 52ULL << 52;
	}

	/* x = 2^k z; where z is in range [OFF,2*OFF) and exact.
	   The range is split into N subintervals; the ith subinterval contains z
	   and c is near its center. */
	tmp = ix - LOG_OFF;
	i = (int)((tmp >> (52 - LOG_TABLE_BITS)) % LOG_N);
	k = (int)((tmp >> 52) ^ 0x800) - 0x800; /* arithmetic shift of the 12 top bits */
	iz = ix - (tmp & 0xfffULL << 52);
	invc = LOG_TAB[i].invc;
	logc = LOG_TAB[i].logc;
	z = pk_asf64(iz);

	/* log(x) = log1p(z/c-1) + log(c) + k*Ln2.  r ~= z/c - 1, |r| < 1/(2*N). */
	r = (z - LOG_TAB2[i].chi - LOG_TAB2[i].clo) * invc;
	kd = (double)k;

	/* hi + lo = r + log(c) + k*Ln2. */
	w = kd * LOG_LN2HI + logc;
	hi = w + r;
	lo = w - hi + r + kd * LOG_LN2LO;

	/* log(x) = lo + (log1p(r) - r) + hi. */
	r2 = r * r;
	y = lo + r2 * LOG_A[0] +
	    r * r2 * (LOG_A[1] + r * LOG_A[2] + r2 * (LOG_A[3] + r * LOG_A[4])) + hi;
	return y;
}

/* ------------------------------------------------------------------------ */
/* expf: in double, N = 32 table, degree 3 polynomial (musl expf.c)         */
/* ------------------------------------------------------------------------ */

#define EXP2F_TABLE_BITS 5
#define EXP2F_N (1 << EXP2F_TABLE_BITS)
static const double EXPF_INVLN2N = 0x1.71547652b82fep+0 * EXP2F_N;
static const double EXPF_SHIFT = 0x1.8p+52;
static const double EXPF_C[3] = {
	0x1.c6af84b912394p-5 / EXP2F_N / EXP2F_N / EXP2F_N,
	0x1.ebfce50fac4f3p-3 / EXP2F_N / EXP2F_N,
	0x1.62e42ff0c52d6p-1 / EXP2F_N,
};

PRESK_LIBM_FN float presk_expf(float x)
{
	uint32_t abstop;
	uint64_t ki, t;
	double kd, xd, z, r, r2, y, s;

	xd = (double)x;
	abstop = (pk_asu32(x) >> 20) & 0x7ff;
	if (abstop >= 0x42b) { /* 0x42b = top12(88.0f) */
		/* |x| >= 88 or x is nan. */
		if (pk_asu32(x) == PK_NEG_INFF_BITS)
			return 0.0f;
		if (abstop >= 0x7f8)
			return x + x;
		if (x > 0x1.62e42ep6f) /* x > log(0x1p128) ~= 88.72 */
			return 0x1p97f * 0x1p97f;
		if (x < -0x1.9fe368p6f) /* x < log(0x1p-150) ~= -103.97 */
			return 0x1p-95f * 0x1p-95f;
	}

	/* x*N/Ln2 = k + r with r in [-1/2, 1/2] and int k. */
	z = EXPF_INVLN2N * xd;
	kd = z + EXPF_SHIFT;
	ki = pk_asu64(kd);
	kd -= EXPF_SHIFT;
	r = z - kd;

	/* exp(x) = 2^(k/N) * 2^(r/N) ~= s * (C0*r^3 + C1*r^2 + C2*r + 1) */
	t = EXP2F_TAB[ki % EXP2F_N];
	t += ki << (52 - EXP2F_TABLE_BITS);
	s = pk_asf64(t);
	z = EXPF_C[0] * r + EXPF_C[1];
	r2 = r * r;
	y = EXPF_C[2] * r + 1;
	y = z * r2 + y;
	y = y * s;
	return (float)y;
}

/* ------------------------------------------------------------------------ */
/* logf: in double, N = 16 table, degree 4 polynomial (musl logf.c)         */
/* ------------------------------------------------------------------------ */

#define LOGF_TABLE_BITS 4
#define LOGF_N (1 << LOGF_TABLE_BITS)
#define LOGF_OFF 0x3f330000U
static const double LOGF_LN2 = 0x1.62e42fefa39efp-1;
static const double LOGF_A[3] = {
	-0x1.00ea348b88334p-2, 0x1.5575b0be00b6ap-2, -0x1.ffffef20a4123p-2,
};

PRESK_LIBM_FN float presk_logf(float x)
{
	double z, r, r2, y, y0, invc, logc;
	uint32_t ix, iz, tmp;
	int k, i;

	ix = pk_asu32(x);
	/* Fix sign of zero with downward rounding when x==1. */
	if (ix == 0x3f800000)
		return 0;
	if (ix - 0x00800000 >= 0x7f800000 - 0x00800000) {
		/* x < 0x1p-126 or inf or nan. */
		if (ix * 2 == 0)
			return pk_asf32(PK_NEG_INFF_BITS);
		if (ix == PK_INFF_BITS)
			return x;
		if ((ix & 0x80000000) || ix * 2 >= 0xff000000)
			return pk_invalidf(x);
		/* x is subnormal, normalize it. */
		ix = pk_asu32(x * 0x1p23f);
		ix -= 23U << 23;
	}

	/* x = 2^k z; where z is in range [OFF,2*OFF] and exact. */
	tmp = ix - LOGF_OFF;
	i = (int)((tmp >> (23 - LOGF_TABLE_BITS)) % LOGF_N);
	k = (int)((tmp >> 23) ^ 0x100) - 0x100; /* arithmetic shift of the 9 top bits */
	iz = ix - (tmp & 0xff800000U);
	invc = LOGF_TAB[i].invc;
	logc = LOGF_TAB[i].logc;
	z = (double)pk_asf32(iz);

	/* log(x) = log1p(z/c-1) + log(c) + k*Ln2 */
	r = z * invc - 1;
	y0 = logc + (double)k * LOGF_LN2;

	/* Pipelined polynomial evaluation to approximate log1p(r). */
	r2 = r * r;
	y = LOGF_A[1] * r + LOGF_A[2];
	y = LOGF_A[0] * r2 + y;
	y = y * r2 + (y0 + r);
	return (float)y;
}

/* ------------------------------------------------------------------------ */
/* tanh / tanhf.  NOT musl's algorithm: musl computes t/(t+2) from          */
/* t = expm1(2|x|), which is up to 2.1 ulp off (measured); presk needs 1 ulp.*/
/* Same branch points and special cases as musl, but                        */
/*   |x| < 0.5493: x + x^3 P(x^2) (polynomial from libm/gen_tables.py);     */
/*   0.5493 <= |x| <= 20: 1 - 2/(e^2|x| + 1) in double-double arithmetic,   */
/*     e^2|x| as hi + lo from the exp tables;                               */
/*   |x| > 20: 1.  tanhf rounds the double result (error < 0.5 + 2^-28 ulp).*/
/* ------------------------------------------------------------------------ */

/* Exact product a*b = *p + *e (Dekker; no FMA, no overflow for our ranges). */
static inline void pk_two_prod(double a, double b, double *p, double *e)
{
	const double split = 134217729.0; /* 2^27 + 1 */
	double c, ah, al, bh, bl;

	*p = a * b;
	c = split * a;
	ah = c - (c - a);
	al = a - ah;
	c = split * b;
	bh = c - (c - b);
	bl = b - bh;
	*e = ((ah * bh - *p) + ah * bl + al * bh) + al * bl;
}

/* e^x = hi + *lo with a relative error around 2^-60, for 1 <= x <= 41: the
   reduction and polynomial of presk_exp, with the final sum kept exact. */
static double exp_hilo(double x, double *lo)
{
	uint64_t ki, idx, top, sbits;
	double kd, z, r, r2, scale, tail, tmp, sp, hi;

	z = EXP_INVLN2N * x;
	kd = z + EXP_SHIFT;
	ki = pk_asu64(kd);
	kd -= EXP_SHIFT;
	r = x + kd * EXP_NEGLN2HIN + kd * EXP_NEGLN2LON;
	idx = 2 * (ki % EXP_N);
	top = ki << (52 - EXP_TABLE_BITS);
	tail = pk_asf64(EXP_TAB[idx]);
	sbits = EXP_TAB[idx + 1] + top;
	r2 = r * r;
	tmp = tail + r + r2 * (EXP_C2 + r * EXP_C3) + r2 * r2 * (EXP_C4 + r * EXP_C5);
	scale = pk_asf64(sbits);
	sp = scale * tmp;
	hi = scale + sp;
	*lo = (scale - hi) + sp; /* |sp| < scale: exact */
	return hi;
}

PRESK_LIBM_FN double presk_tanh(double x)
{
	uint64_t u = pk_asu64(x);
	uint32_t w;
	int sign;
	double t;

	/* x = |x| */
	sign = (int)(u >> 63);
	u &= 0x7fffffffffffffffULL;
	x = pk_asf64(u);
	w = (uint32_t)(u >> 32);

	if (w > 0x3fe193ea) {
		/* |x| > log(3)/2 ~= 0.5493 or nan */
		if (w > 0x40340000) {
			/* |x| > 20 or nan: tanh rounds to 1 */
			t = 1 - 0 / x;
		} else {
			/* tanh(x) = 1 - q, q = 2/(E + 1), E = e^2x = ehi + elo >= 3 */
			double elo, ehi, s, e, q1, q2, p, pe, s1;
			ehi = exp_hilo(2 * x, &elo);
			s = ehi + 1;
			e = ((ehi - s) + 1) + elo; /* s + e = E + 1 */
			q1 = 2 / s;
			pk_two_prod(q1, s, &p, &pe);
			/* 2 - p is exact (p ~= 2); q1 + q2 = 2/(s + e) */
			q2 = (((2 - p) - pe) - q1 * e) / s;
			s1 = 1 - q1; /* q1 <= 1/2 */
			t = s1 + (((1 - s1) - q1) - q2);
		}
	} else if (w >= 0x00100000) {
		/* 0x1p-1022 <= |x| < 0.5493: x + x^3 P(x^2) */
		double z = x * x, p;
		p = TANH_P[0] + z * (TANH_P[1] + z * (TANH_P[2] + z * (TANH_P[3] + z * (TANH_P[4] +
		    z * (TANH_P[5] + z * (TANH_P[6] + z * (TANH_P[7] + z * (TANH_P[8] +
		    z * (TANH_P[9] + z * TANH_P[10])))))))));
		t = x + (x * z) * p;
	} else {
		/* |x| is subnormal (or zero) */
		t = x;
	}
	return sign ? -t : t;
}

PRESK_LIBM_FN float presk_tanhf(float x)
{
	/* The double result is within 0.51 ulp (of double): rounding it to float
	   is off by at most 0.5 + 2^-28 float ulp.  NaNs and signed zeros pass. */
	return (float)presk_tanh((double)x);
}

/* ------------------------------------------------------------------------ */
/* Argument reduction modulo pi/2 (fdlibm __rem_pio2, __rem_pio2f and the   */
/* Payne-Hanek __rem_pio2_large)                                            */
/* ------------------------------------------------------------------------ */

/*
 * rem_pio2_large(x, y, e0, nx, prec): y = x - N*pi/2 with |y| <= pi/4 for an
 * input given as nx 24-bit pieces x[i] * 2^(e0 - 24*i); returns N mod 8.
 * prec 0 gives y[0] (24+ bits, for float), prec 1 gives y[0] + y[1] (53+ bits).
 */
static int rem_pio2_large(const double *x, double *y, int e0, int nx, int prec)
{
	static const int init_jk[] = {3, 4}; /* terms of 2/pi needed, by prec */
	int32_t jz, jx, jv, jp, jk, carry, n, iq[20], i, j, k, m, q0, ih;
	double z, fw, f[20], fq[20] = {0}, q[20]; /* every fq read is written first; the zeros quiet gcc -Wmaybe-uninitialized */

	/* initialize jk */
	jk = init_jk[prec];
	jp = jk;

	/* determine jx, jv, q0; note that 3 > q0 */
	jx = nx - 1;
	jv = (e0 - 3) / 24;
	if (jv < 0)
		jv = 0;
	q0 = e0 - 24 * (jv + 1);

	/* set up f[0] to f[jx+jk] where f[jx+jk] = ipio2[jv+jk] */
	j = jv - jx;
	m = jx + jk;
	for (i = 0; i <= m; i++, j++)
		f[i] = j < 0 ? 0.0 : (double)IPIO2[j];

	/* compute q[0],q[1],...q[jk] */
	for (i = 0; i <= jk; i++) {
		for (j = 0, fw = 0.0; j <= jx; j++)
			fw += x[j] * f[jx + i - j];
		q[i] = fw;
	}

	jz = jk;
recompute:
	/* distill q[] into iq[] reversingly */
	for (i = 0, j = jz, z = q[jz]; j > 0; i++, j--) {
		fw = (double)(int32_t)(0x1p-24 * z);
		iq[i] = (int32_t)(z - 0x1p24 * fw);
		z = q[j - 1] + fw;
	}

	/* compute n */
	z = pk_scalbn(z, q0);           /* actual value of z */
	z -= 8.0 * pk_floor(z * 0.125); /* trim off integer >= 8 */
	n = (int32_t)z;
	z -= (double)n;
	ih = 0;
	if (q0 > 0) { /* need iq[jz-1] to determine n */
		i = iq[jz - 1] >> (24 - q0);
		n += i;
		iq[jz - 1] -= i << (24 - q0);
		ih = iq[jz - 1] >> (23 - q0);
	} else if (q0 == 0)
		ih = iq[jz - 1] >> 23;
	else if (z >= 0.5)
		ih = 2;

	if (ih > 0) { /* q > 0.5 */
		n += 1;
		carry = 0;
		for (i = 0; i < jz; i++) { /* compute 1-q */
			j = iq[i];
			if (carry == 0) {
				if (j != 0) {
					carry = 1;
					iq[i] = 0x1000000 - j;
				}
			} else
				iq[i] = 0xffffff - j;
		}
		if (q0 > 0) { /* rare case: chance is 1 in 12 */
			switch (q0) {
			case 1:
				iq[jz - 1] &= 0x7fffff;
				break;
			case 2:
				iq[jz - 1] &= 0x3fffff;
				break;
			}
		}
		if (ih == 2) {
			z = 1.0 - z;
			if (carry != 0)
				z -= pk_scalbn(1.0, q0);
		}
	}

	/* check if recomputation is needed */
	if (z == 0.0) {
		j = 0;
		for (i = jz - 1; i >= jk; i--)
			j |= iq[i];
		if (j == 0) { /* need recomputation */
			for (k = 1; iq[jk - k] == 0; k++) {
				/* k = no. of terms needed */
			}
			for (i = jz + 1; i <= jz + k; i++) { /* add q[jz+1] to q[jz+k] */
				f[jx + i] = (double)IPIO2[jv + i];
				for (j = 0, fw = 0.0; j <= jx; j++)
					fw += x[j] * f[jx + i - j];
				q[i] = fw;
			}
			jz += k;
			goto recompute;
		}
	}

	/* chop off zero terms */
	if (z == 0.0) {
		jz -= 1;
		q0 -= 24;
		while (iq[jz] == 0) {
			jz--;
			q0 -= 24;
		}
	} else { /* break z into 24-bit if necessary */
		z = pk_scalbn(z, -q0);
		if (z >= 0x1p24) {
			fw = (double)(int32_t)(0x1p-24 * z);
			iq[jz] = (int32_t)(z - 0x1p24 * fw);
			jz += 1;
			q0 += 24;
			iq[jz] = (int32_t)fw;
		} else
			iq[jz] = (int32_t)z;
	}

	/* convert integer "bit" chunk to floating-point value */
	fw = pk_scalbn(1.0, q0);
	for (i = jz; i >= 0; i--) {
		q[i] = fw * (double)iq[i];
		fw *= 0x1p-24;
	}

	/* compute PIo2[0,...,jp]*q[jz,...,0] */
	for (i = jz; i >= 0; i--) {
		for (fw = 0.0, k = 0; k <= jp && k <= jz - i; k++)
			fw += PIO2_PIECES[k] * q[i + k];
		fq[jz - i] = fw;
	}

	/* compress fq[] into y[] */
	fw = 0.0;
	for (i = jz; i >= 0; i--)
		fw += fq[i];
	y[0] = ih == 0 ? fw : -fw;
	if (prec != 0) {
		fw = fq[0] - fw;
		for (i = 1; i <= jz; i++)
			fw += fq[i];
		y[1] = ih == 0 ? fw : -fw;
	}
	return n & 7;
}

static const double RP_TOINT = 1.5 / DBL_EPSILON;
static const double RP_PIO4 = 0x1.921fb54442d18p-1;
static const double RP_INVPIO2 = 6.36619772367581382433e-01; /* 0x3FE45F30, 0x6DC9C883 */
static const double RP_PIO2_1 = 1.57079632673412561417e+00;  /* 0x3FF921FB, 0x54400000 */
static const double RP_PIO2_1T = 6.07710050650619224932e-11; /* 0x3DD0B461, 0x1A626331 */
static const double RP_PIO2_2 = 6.07710050630396597660e-11;  /* 0x3DD0B461, 0x1A600000 */
static const double RP_PIO2_2T = 2.02226624879595063154e-21; /* 0x3BA3198A, 0x2E037073 */
static const double RP_PIO2_3 = 2.02226624871116645580e-21;  /* 0x3BA3198A, 0x2E000000 */
static const double RP_PIO2_3T = 8.47842766036889956997e-32; /* 0x397B839A, 0x252049C1 */

/* x - n*pi/2 = y[0] + y[1], |y[0] + y[1]| <= pi/4 (roughly); returns n. */
static int rem_pio2(double x, double *y)
{
	uint64_t u = pk_asu64(x);
	double z, w, t, r, fn;
	double tx[3], ty[2];
	uint32_t ix;
	int sign, n, ex, ey, i;

	sign = (int)(u >> 63);
	ix = (uint32_t)(u >> 32) & 0x7fffffff;
	if (ix <= 0x400f6a7a) {           /* |x| ~<= 5pi/4 */
		if ((ix & 0xfffff) == 0x921fb) /* |x| ~= pi/2 or 2pi/2 */
			goto medium;           /* cancellation -- use medium case */
		if (ix <= 0x4002d97c) {        /* |x| ~<= 3pi/4 */
			if (!sign) {
				z = x - RP_PIO2_1; /* one round good to 85 bits */
				y[0] = z - RP_PIO2_1T;
				y[1] = (z - y[0]) - RP_PIO2_1T;
				return 1;
			} else {
				z = x + RP_PIO2_1;
				y[0] = z + RP_PIO2_1T;
				y[1] = (z - y[0]) + RP_PIO2_1T;
				return -1;
			}
		} else {
			if (!sign) {
				z = x - 2 * RP_PIO2_1;
				y[0] = z - 2 * RP_PIO2_1T;
				y[1] = (z - y[0]) - 2 * RP_PIO2_1T;
				return 2;
			} else {
				z = x + 2 * RP_PIO2_1;
				y[0] = z + 2 * RP_PIO2_1T;
				y[1] = (z - y[0]) + 2 * RP_PIO2_1T;
				return -2;
			}
		}
	}
	if (ix <= 0x401c463b) {            /* |x| ~<= 9pi/4 */
		if (ix <= 0x4015fdbc) {     /* |x| ~<= 7pi/4 */
			if (ix == 0x4012d97c) /* |x| ~= 3pi/2 */
				goto medium;
			if (!sign) {
				z = x - 3 * RP_PIO2_1;
				y[0] = z - 3 * RP_PIO2_1T;
				y[1] = (z - y[0]) - 3 * RP_PIO2_1T;
				return 3;
			} else {
				z = x + 3 * RP_PIO2_1;
				y[0] = z + 3 * RP_PIO2_1T;
				y[1] = (z - y[0]) + 3 * RP_PIO2_1T;
				return -3;
			}
		} else {
			if (ix == 0x401921fb) /* |x| ~= 4pi/2 */
				goto medium;
			if (!sign) {
				z = x - 4 * RP_PIO2_1;
				y[0] = z - 4 * RP_PIO2_1T;
				y[1] = (z - y[0]) - 4 * RP_PIO2_1T;
				return 4;
			} else {
				z = x + 4 * RP_PIO2_1;
				y[0] = z + 4 * RP_PIO2_1T;
				y[1] = (z - y[0]) + 4 * RP_PIO2_1T;
				return -4;
			}
		}
	}
	if (ix < 0x413921fb) { /* |x| ~< 2^20*(pi/2), medium size */
medium:
		/* rint(x/(pi/2)) */
		fn = x * RP_INVPIO2 + RP_TOINT - RP_TOINT;
		n = (int32_t)fn;
		r = x - fn * RP_PIO2_1;
		w = fn * RP_PIO2_1T; /* 1st round, good to 85 bits */
		/* Matters with directed rounding. */
		if (r - w < -RP_PIO4) {
			n--;
			fn--;
			r = x - fn * RP_PIO2_1;
			w = fn * RP_PIO2_1T;
		} else if (r - w > RP_PIO4) {
			n++;
			fn++;
			r = x - fn * RP_PIO2_1;
			w = fn * RP_PIO2_1T;
		}
		y[0] = r - w;
		ey = (int)(pk_asu64(y[0]) >> 52 & 0x7ff);
		ex = (int)(ix >> 20);
		if (ex - ey > 16) { /* 2nd round, good to 118 bits */
			t = r;
			w = fn * RP_PIO2_2;
			r = t - w;
			w = fn * RP_PIO2_2T - ((t - r) - w);
			y[0] = r - w;
			ey = (int)(pk_asu64(y[0]) >> 52 & 0x7ff);
			if (ex - ey > 49) { /* 3rd round, good to 151 bits, covers all cases */
				t = r;
				w = fn * RP_PIO2_3;
				r = t - w;
				w = fn * RP_PIO2_3T - ((t - r) - w);
				y[0] = r - w;
			}
		}
		y[1] = (r - y[0]) - w;
		return n;
	}
	/* all other (large) arguments; inf and nan are handled by the callers */
	/* set z = scalbn(|x|,-ilogb(x)+23) */
	u = pk_asu64(x);
	u &= (uint64_t)-1 >> 12;
	u |= (uint64_t)(0x3ff + 23) << 52;
	z = pk_asf64(u);
	for (i = 0; i < 2; i++) {
		tx[i] = (double)(int32_t)z;
		z = (z - tx[i]) * 0x1p24;
	}
	tx[i] = z;
	/* skip zero terms, first term is non-zero */
	while (tx[i] == 0.0)
		i--;
	n = rem_pio2_large(tx, ty, (int)(ix >> 20) - (0x3ff + 23), i + 1, 1);
	if (sign) {
		y[0] = -ty[0];
		y[1] = -ty[1];
		return -n;
	}
	y[0] = ty[0];
	y[1] = ty[1];
	return n;
}

static const double RPF_PIO4 = 0x1.921fb6p-1;
static const double RPF_PIO2_1 = 1.57079631090164184570e+00;  /* 0x3FF921FB, 0x50000000 */
static const double RPF_PIO2_1T = 1.58932547735281966916e-08; /* 0x3E5110b4, 0x611A6263 */

/* float x - n*pi/2 = *y (in double), returns n. */
static int rem_pio2f(float x, double *y)
{
	uint32_t u = pk_asu32(x);
	double tx[1], ty[1];
	double fn;
	uint32_t ix;
	int n, sign, e0;

	ix = u & 0x7fffffff;
	/* 25+53 bit pi is good enough for medium size */
	if (ix < 0x4dc90fdb) { /* |x| ~< 2^28*(pi/2), medium size */
		/* Use a specialized rint() to get fn. */
		fn = (double)x * RP_INVPIO2 + RP_TOINT - RP_TOINT;
		n = (int32_t)fn;
		*y = x - fn * RPF_PIO2_1 - fn * RPF_PIO2_1T;
		/* Matters with directed rounding. */
		if (*y < -RPF_PIO4) {
			n--;
			fn--;
			*y = x - fn * RPF_PIO2_1 - fn * RPF_PIO2_1T;
		} else if (*y > RPF_PIO4) {
			n++;
			fn++;
			*y = x - fn * RPF_PIO2_1 - fn * RPF_PIO2_1T;
		}
		return n;
	}
	/* inf and nan are handled by the callers */
	/* scale x into [2^23, 2^24-1] */
	sign = (int)(u >> 31);
	e0 = (int)(ix >> 23) - (0x7f + 23); /* e0 = ilogb(|x|)-23, positive */
	tx[0] = pk_asf32(ix - ((uint32_t)e0 << 23));
	n = rem_pio2_large(tx, ty, e0, 1, 0);
	if (sign) {
		*y = -ty[0];
		return -n;
	}
	*y = ty[0];
	return n;
}

/* ------------------------------------------------------------------------ */
/* Kernels on [-pi/4, pi/4] (fdlibm __sin, __cos, __sindf, __cosdf)         */
/* ------------------------------------------------------------------------ */

static const double KS1 = -1.66666666666666324348e-01; /* 0xBFC55555, 0x55555549 */
static const double KS2 = 8.33333333332248946124e-03;  /* 0x3F811111, 0x1110F8A6 */
static const double KS3 = -1.98412698298579493134e-04; /* 0xBF2A01A0, 0x19C161D5 */
static const double KS4 = 2.75573137070700676789e-06;  /* 0x3EC71DE3, 0x57B1FE7D */
static const double KS5 = -2.50507602534068634195e-08; /* 0xBE5AE5E6, 0x8A2B9CEB */
static const double KS6 = 1.58969099521155010221e-10;  /* 0x3DE5D93A, 0x5ACFD57C */

/* sin(x + y) for |x| <= pi/4, y a tail of x (iy == 0 means y == 0). */
static double k_sin(double x, double y, int iy)
{
	double z, r, v, w;

	z = x * x;
	w = z * z;
	r = KS2 + z * (KS3 + z * KS4) + z * w * (KS5 + z * KS6);
	v = z * x;
	if (iy == 0)
		return x + v * (KS1 + z * r);
	else
		return x - ((z * (0.5 * y - v * r) - y) - v * KS1);
}

static const double KC1 = 4.16666666666666019037e-02;  /* 0x3FA55555, 0x5555554C */
static const double KC2 = -1.38888888888741095749e-03; /* 0xBF56C16C, 0x16C15177 */
static const double KC3 = 2.48015872894767294178e-05;  /* 0x3EFA01A0, 0x19CB1590 */
static const double KC4 = -2.75573143513906633035e-07; /* 0xBE927E4F, 0x809C52AD */
static const double KC5 = 2.08757232129817482790e-09;  /* 0x3E21EE9E, 0xBDB4B1C4 */
static const double KC6 = -1.13596475577881948265e-11; /* 0xBDA8FAE9, 0xBE8838D4 */

/* cos(x + y) for |x| <= pi/4, y a tail of x. */
static double k_cos(double x, double y)
{
	double hz, z, r, w;

	z = x * x;
	w = z * z;
	r = z * (KC1 + z * (KC2 + z * KC3)) + w * w * (KC4 + z * (KC5 + z * KC6));
	hz = 0.5 * z;
	w = 1.0 - hz;
	return w + (((1.0 - w) - hz) + (z * r - x * y));
}

/* |sin(x)/x - s(x)| < 2**-37.5 (~[-4.89e-12, 4.824e-12]). */
static const double KSF1 = -0x15555554cbac77.0p-55; /* -0.166666666416265235595 */
static const double KSF2 = 0x111110896efbb2.0p-59;  /*  0.0083333293858894631756 */
static const double KSF3 = -0x1a00f9e2cae774.0p-65; /* -0.000198393348360966317347 */
static const double KSF4 = 0x16cd878c3b46a7.0p-71;  /*  0.0000027183114939898219064 */

static float k_sindf(double x)
{
	double r, s, w, z;

	/* Try to optimize for parallel evaluation as in __tandf.c. */
	z = x * x;
	w = z * z;
	r = KSF3 + z * KSF4;
	s = z * x;
	return (float)((x + s * (KSF1 + z * KSF2)) + s * w * r);
}

/* |cos(x) - c(x)| < 2**-34.1 (~[-5.37e-11, 5.295e-11]). */
static const double KCF0 = -0x1ffffffd0c5e81.0p-54; /* -0.499999997251031003120 */
static const double KCF1 = 0x155553e1053a42.0p-57;  /*  0.0416666233237390631894 */
static const double KCF2 = -0x16c087e80f1e27.0p-62; /* -0.00138867637746099294692 */
static const double KCF3 = 0x199342e0ee5069.0p-68;  /*  0.0000243904487962774090654 */

static float k_cosdf(double x)
{
	double r, w, z;

	/* Try to optimize for parallel evaluation as in __tandf.c. */
	z = x * x;
	w = z * z;
	r = KCF2 + z * KCF3;
	return (float)(((1.0 + z * KCF0) + w * KCF1) + (w * z) * r);
}

/* ------------------------------------------------------------------------ */
/* sin / cos (musl sin.c, cos.c)                                            */
/* ------------------------------------------------------------------------ */

PRESK_LIBM_FN double presk_sin(double x)
{
	double y[2];
	uint32_t ix;
	unsigned n;

	/* High word of x. */
	ix = pk_hi32(x) & 0x7fffffff;

	/* |x| ~< pi/4 */
	if (ix <= 0x3fe921fb) {
		if (ix < 0x3e500000) { /* |x| < 2**-26 */
			return x;
		}
		return k_sin(x, 0.0, 0);
	}

	/* sin(Inf or NaN) is NaN */
	if (ix >= 0x7ff00000)
		return pk_invalid(x);

	/* argument reduction needed */
	n = (unsigned)rem_pio2(x, y);
	switch (n & 3) {
	case 0:
		return k_sin(y[0], y[1], 1);
	case 1:
		return k_cos(y[0], y[1]);
	case 2:
		return -k_sin(y[0], y[1], 1);
	default:
		return -k_cos(y[0], y[1]);
	}
}

PRESK_LIBM_FN double presk_cos(double x)
{
	double y[2];
	uint32_t ix;
	unsigned n;

	ix = pk_hi32(x) & 0x7fffffff;

	/* |x| ~< pi/4 */
	if (ix <= 0x3fe921fb) {
		if (ix < 0x3e46a09e) { /* |x| < 2**-27 * sqrt(2) */
			return 1.0;
		}
		return k_cos(x, 0);
	}

	/* cos(Inf or NaN) is NaN */
	if (ix >= 0x7ff00000)
		return pk_invalid(x);

	/* argument reduction */
	n = (unsigned)rem_pio2(x, y);
	switch (n & 3) {
	case 0:
		return k_cos(y[0], y[1]);
	case 1:
		return -k_sin(y[0], y[1], 1);
	case 2:
		return -k_cos(y[0], y[1]);
	default:
		return k_sin(y[0], y[1], 1);
	}
}

/* ------------------------------------------------------------------------ */
/* sinf / cosf (musl sinf.c, cosf.c: double kernels, explicit multiples of  */
/* pi/2 up to 9pi/4)                                                        */
/* ------------------------------------------------------------------------ */

static const double PIO2_D = 1.57079632679489661923; /* M_PI_2 */
static const double S1PIO2 = 1 * PIO2_D;
static const double S2PIO2 = 2 * PIO2_D;
static const double S3PIO2 = 3 * PIO2_D;
static const double S4PIO2 = 4 * PIO2_D;

PRESK_LIBM_FN float presk_sinf(float x)
{
	double y;
	uint32_t ix;
	int n, sign;

	ix = pk_asu32(x);
	sign = (int)(ix >> 31);
	ix &= 0x7fffffff;

	if (ix <= 0x3f490fda) { /* |x| ~<= pi/4 */
		if (ix < 0x39800000) { /* |x| < 2**-12 */
			return x;
		}
		return k_sindf(x);
	}
	if (ix <= 0x407b53d1) {         /* |x| ~<= 5*pi/4 */
		if (ix <= 0x4016cbe3) { /* |x| ~<= 3pi/4 */
			if (sign)
				return -k_cosdf(x + S1PIO2);
			else
				return k_cosdf(x - S1PIO2);
		}
		return k_sindf(sign ? -(x + S2PIO2) : -(x - S2PIO2));
	}
	if (ix <= 0x40e231d5) {         /* |x| ~<= 9*pi/4 */
		if (ix <= 0x40afeddf) { /* |x| ~<= 7*pi/4 */
			if (sign)
				return k_cosdf(x + S3PIO2);
			else
				return -k_cosdf(x - S3PIO2);
		}
		return k_sindf(sign ? x + S4PIO2 : x - S4PIO2);
	}

	/* sin(Inf or NaN) is NaN */
	if (ix >= 0x7f800000)
		return pk_invalidf(x);

	/* general argument reduction needed */
	n = rem_pio2f(x, &y);
	switch (n & 3) {
	case 0:
		return k_sindf(y);
	case 1:
		return k_cosdf(y);
	case 2:
		return k_sindf(-y);
	default:
		return -k_cosdf(y);
	}
}

PRESK_LIBM_FN float presk_cosf(float x)
{
	double y;
	uint32_t ix;
	unsigned n, sign;

	ix = pk_asu32(x);
	sign = ix >> 31;
	ix &= 0x7fffffff;

	if (ix <= 0x3f490fda) { /* |x| ~<= pi/4 */
		if (ix < 0x39800000) { /* |x| < 2**-12 */
			return 1.0f;
		}
		return k_cosdf(x);
	}
	if (ix <= 0x407b53d1) {  /* |x| ~<= 5*pi/4 */
		if (ix > 0x4016cbe3) /* |x|  ~> 3*pi/4 */
			return -k_cosdf(sign ? x + S2PIO2 : x - S2PIO2);
		else {
			if (sign)
				return k_sindf(x + S1PIO2);
			else
				return k_sindf(S1PIO2 - x);
		}
	}
	if (ix <= 0x40e231d5) {  /* |x| ~<= 9*pi/4 */
		if (ix > 0x40afeddf) /* |x| ~> 7*pi/4 */
			return k_cosdf(sign ? x + S4PIO2 : x - S4PIO2);
		else {
			if (sign)
				return k_sindf(-x - S3PIO2);
			else
				return k_sindf(x - S3PIO2);
		}
	}

	/* cos(Inf or NaN) is NaN */
	if (ix >= 0x7f800000)
		return pk_invalidf(x);

	/* general argument reduction needed */
	n = (unsigned)rem_pio2f(x, &y);
	switch (n & 3) {
	case 0:
		return k_cosdf(y);
	case 1:
		return k_sindf(-y);
	case 2:
		return -k_cosdf(y);
	default:
		return k_sindf(y);
	}
}

/* ------------------------------------------------------------------------ */
/* erf (fdlibm erf, musl erf.c): rational approximations on [0, 0.84375),   */
/* [0.84375, 1.25), [1.25, 1/0.35), [1/0.35, 6), then 1 - tiny              */
/* ------------------------------------------------------------------------ */

static const double ERX = 8.45062911510467529297e-01; /* 0x3FEB0AC1, 0x60000000 */
/* Coefficients for approximation to erf on [0,0.84375] */
static const double EFX8 = 1.02703333676410069053e+00; /* 0x3FF06EBA, 0x8214DB69 */
static const double PP0 = 1.28379167095512558561e-01;  /* 0x3FC06EBA, 0x8214DB68 */
static const double PP1 = -3.25042107247001499370e-01; /* 0xBFD4CD7D, 0x691CB913 */
static const double PP2 = -2.84817495755985104766e-02; /* 0xBF9D2A51, 0xDBD7194F */
static const double PP3 = -5.77027029648944159157e-03; /* 0xBF77A291, 0x236668E4 */
static const double PP4 = -2.37630166566501626084e-05; /* 0xBEF8EAD6, 0x120016AC */
static const double QQ1 = 3.97917223959155352819e-01;  /* 0x3FD97779, 0xCDDADC09 */
static const double QQ2 = 6.50222499887672944485e-02;  /* 0x3FB0A54C, 0x5536CEBA */
static const double QQ3 = 5.08130628187576562776e-03;  /* 0x3F74D022, 0xC4D36B0F */
static const double QQ4 = 1.32494738004321644526e-04;  /* 0x3F215DC9, 0x221C1A10 */
static const double QQ5 = -3.96022827877536812320e-06; /* 0xBED09C43, 0x42A26120 */
/* Coefficients for approximation to erf in [0.84375,1.25] */
static const double PA0 = -2.36211856075265944077e-03; /* 0xBF6359B8, 0xBEF77538 */
static const double PA1 = 4.14856118683748331666e-01;  /* 0x3FDA8D00, 0xAD92B34D */
static const double PA2 = -3.72207876035701323847e-01; /* 0xBFD7D240, 0xFBB8C3F1 */
static const double PA3 = 3.18346619901161753674e-01;  /* 0x3FD45FCA, 0x805120E4 */
static const double PA4 = -1.10894694282396677476e-01; /* 0xBFBC6398, 0x3D3E28EC */
static const double PA5 = 3.54783043256182359371e-02;  /* 0x3FA22A36, 0x599795EB */
static const double PA6 = -2.16637559486879084300e-03; /* 0xBF61BF38, 0x0A96073F */
static const double QA1 = 1.06420880400844228286e-01;  /* 0x3FBB3E66, 0x18EEE323 */
static const double QA2 = 5.40397917702171048937e-01;  /* 0x3FE14AF0, 0x92EB6F33 */
static const double QA3 = 7.18286544141962662868e-02;  /* 0x3FB2635C, 0xD99FE9A7 */
static const double QA4 = 1.26171219808761642112e-01;  /* 0x3FC02660, 0xE763351F */
static const double QA5 = 1.36370839120290507362e-02;  /* 0x3F8BEDC2, 0x6B51DD1C */
static const double QA6 = 1.19844998467991074170e-02;  /* 0x3F888B54, 0x5735151D */
/* Coefficients for approximation to erfc in [1.25,1/0.35] */
static const double RA0 = -9.86494403484714822705e-03; /* 0xBF843412, 0x600D6435 */
static const double RA1 = -6.93858572707181764372e-01; /* 0xBFE63416, 0xE4BA7360 */
static const double RA2 = -1.05586262253232909814e+01; /* 0xC0251E04, 0x41B0E726 */
static const double RA3 = -6.23753324503260060396e+01; /* 0xC04F300A, 0xE4CBA38D */
static const double RA4 = -1.62396669462573470355e+02; /* 0xC0644CB1, 0x84282266 */
static const double RA5 = -1.84605092906711035994e+02; /* 0xC067135C, 0xEBCCABB2 */
static const double RA6 = -8.12874355063065934246e+01; /* 0xC0545265, 0x57E4D2F2 */
static const double RA7 = -9.81432934416914548592e+00; /* 0xC023A0EF, 0xC69AC25C */
static const double SA1 = 1.96512716674392571292e+01;  /* 0x4033A6B9, 0xBD707687 */
static const double SA2 = 1.37657754143519042600e+02;  /* 0x4061350C, 0x526AE721 */
static const double SA3 = 4.34565877475229228821e+02;  /* 0x407B290D, 0xD58A1A71 */
static const double SA4 = 6.45387271733267880336e+02;  /* 0x40842B19, 0x21EC2868 */
static const double SA5 = 4.29008140027567833386e+02;  /* 0x407AD021, 0x57700314 */
static const double SA6 = 1.08635005541779435134e+02;  /* 0x405B28A3, 0xEE48AE2C */
static const double SA7 = 6.57024977031928170135e+00;  /* 0x401A47EF, 0x8E484A93 */
static const double SA8 = -6.04244152148580987438e-02; /* 0xBFAEEFF2, 0xEE749A62 */
/* Coefficients for approximation to erfc in [1/.35,28] */
static const double RB0 = -9.86494292470009928597e-03; /* 0xBF843412, 0x39E86F4A */
static const double RB1 = -7.99283237680523006574e-01; /* 0xBFE993BA, 0x70C285DE */
static const double RB2 = -1.77579549177547519889e+01; /* 0xC031C209, 0x555F995A */
static const double RB3 = -1.60636384855821916062e+02; /* 0xC064145D, 0x43C5ED98 */
static const double RB4 = -6.37566443368389627722e+02; /* 0xC083EC88, 0x1375F228 */
static const double RB5 = -1.02509513161107724954e+03; /* 0xC0900461, 0x6A2E5992 */
static const double RB6 = -4.83519191608651397019e+02; /* 0xC07E384E, 0x9BDC383F */
static const double SB1 = 3.03380607434824582924e+01;  /* 0x403E568B, 0x261D5190 */
static const double SB2 = 3.25792512996573918826e+02;  /* 0x40745CAE, 0x221B9F0A */
static const double SB3 = 1.53672958608443695994e+03;  /* 0x409802EB, 0x189D5118 */
static const double SB4 = 3.19985821950859553908e+03;  /* 0x40A8FFB7, 0x688C246A */
static const double SB5 = 2.55305040643316442583e+03;  /* 0x40A3F219, 0xCEDF3BE6 */
static const double SB6 = 4.74528541206955367215e+02;  /* 0x407DA874, 0xE79FE763 */
static const double SB7 = -2.24409524465858183362e+01; /* 0xC03670E2, 0x42712D62 */

static double erfc1(double x)
{
	double s, P, Q;

	s = pk_fabs(x) - 1;
	P = PA0 + s * (PA1 + s * (PA2 + s * (PA3 + s * (PA4 + s * (PA5 + s * PA6)))));
	Q = 1 + s * (QA1 + s * (QA2 + s * (QA3 + s * (QA4 + s * (QA5 + s * QA6)))));
	return 1 - ERX - P / Q;
}

static double erfc2(uint32_t ix, double x)
{
	double s, R, S;
	double z;

	if (ix < 0x3ff40000) /* |x| < 1.25 */
		return erfc1(x);

	x = pk_fabs(x);
	s = 1 / (x * x);
	if (ix < 0x4006db6d) { /* |x| < 1/.35 ~ 2.85714 */
		R = RA0 + s * (RA1 + s * (RA2 + s * (RA3 + s * (RA4 + s * (
		     RA5 + s * (RA6 + s * RA7))))));
		S = 1.0 + s * (SA1 + s * (SA2 + s * (SA3 + s * (SA4 + s * (
		     SA5 + s * (SA6 + s * (SA7 + s * SA8)))))));
	} else { /* |x| > 1/.35 */
		R = RB0 + s * (RB1 + s * (RB2 + s * (RB3 + s * (RB4 + s * (
		     RB5 + s * RB6)))));
		S = 1.0 + s * (SB1 + s * (SB2 + s * (SB3 + s * (SB4 + s * (
		     SB5 + s * (SB6 + s * SB7))))));
	}
	z = pk_asf64(pk_asu64(x) & 0xffffffff00000000ULL); /* SET_LOW_WORD(z, 0) */
	return presk_exp(-z * z - 0.5625) * presk_exp((z - x) * (z + x) + R / S) / x;
}

PRESK_LIBM_FN double presk_erf(double x)
{
	double r, s, z, y;
	uint32_t ix;
	int sign;

	ix = pk_hi32(x);
	sign = (int)(ix >> 31);
	ix &= 0x7fffffff;
	if (ix >= 0x7ff00000) {
		/* erf(nan)=nan, erf(+-inf)=+-1 */
		return 1 - 2 * sign + 1 / x;
	}
	if (ix < 0x3feb0000) { /* |x| < 0.84375 */
		if (ix < 0x3e300000) { /* |x| < 2**-28 */
			/* avoid underflow */
			return 0.125 * (8 * x + EFX8 * x);
		}
		z = x * x;
		r = PP0 + z * (PP1 + z * (PP2 + z * (PP3 + z * PP4)));
		s = 1.0 + z * (QQ1 + z * (QQ2 + z * (QQ3 + z * (QQ4 + z * QQ5))));
		y = r / s;
		return x + x * y;
	}
	if (ix < 0x40180000) /* 0.84375 <= |x| < 6 */
		y = 1 - erfc2(ix, x);
	else
		y = 1 - 0x1p-1022;
	return sign ? -y : y;
}

/* erff: the same scheme with float coefficients and float arithmetic. */
static const float ERXF = 8.4506291151e-01f; /* 0x3f58560b */
static const float EFX8F = 1.0270333290e+00f; /* 0x3f8375d4 */
static const float PP0F = 1.2837916613e-01f;  /* 0x3e0375d4 */
static const float PP1F = -3.2504209876e-01f; /* 0xbea66beb */
static const float PP2F = -2.8481749818e-02f; /* 0xbce9528f */
static const float PP3F = -5.7702702470e-03f; /* 0xbbbd1489 */
static const float PP4F = -2.3763017452e-05f; /* 0xb7c756b1 */
static const float QQ1F = 3.9791721106e-01f;  /* 0x3ecbbbce */
static const float QQ2F = 6.5022252500e-02f;  /* 0x3d852a63 */
static const float QQ3F = 5.0813062117e-03f;  /* 0x3ba68116 */
static const float QQ4F = 1.3249473704e-04f;  /* 0x390aee49 */
static const float QQ5F = -3.9602282413e-06f; /* 0xb684e21a */
static const float PA0F = -2.3621185683e-03f; /* 0xbb1acdc6 */
static const float PA1F = 4.1485610604e-01f;  /* 0x3ed46805 */
static const float PA2F = -3.7220788002e-01f; /* 0xbebe9208 */
static const float PA3F = 3.1834661961e-01f;  /* 0x3ea2fe54 */
static const float PA4F = -1.1089469492e-01f; /* 0xbde31cc2 */
static const float PA5F = 3.5478305072e-02f;  /* 0x3d1151b3 */
static const float PA6F = -2.1663755178e-03f; /* 0xbb0df9c0 */
static const float QA1F = 1.0642088205e-01f;  /* 0x3dd9f331 */
static const float QA2F = 5.4039794207e-01f;  /* 0x3f0a5785 */
static const float QA3F = 7.1828655899e-02f;  /* 0x3d931ae7 */
static const float QA4F = 1.2617121637e-01f;  /* 0x3e013307 */
static const float QA5F = 1.3637083583e-02f;  /* 0x3c5f6e13 */
static const float QA6F = 1.1984500103e-02f;  /* 0x3c445aa3 */
static const float RA0F = -9.8649440333e-03f; /* 0xbc21a093 */
static const float RA1F = -6.9385856390e-01f; /* 0xbf31a0b7 */
static const float RA2F = -1.0558626175e+01f; /* 0xc128f022 */
static const float RA3F = -6.2375331879e+01f; /* 0xc2798057 */
static const float RA4F = -1.6239666748e+02f; /* 0xc322658c */
static const float RA5F = -1.8460508728e+02f; /* 0xc3389ae7 */
static const float RA6F = -8.1287437439e+01f; /* 0xc2a2932b */
static const float RA7F = -9.8143291473e+00f; /* 0xc11d077e */
static const float SA1F = 1.9651271820e+01f;  /* 0x419d35ce */
static const float SA2F = 1.3765776062e+02f;  /* 0x4309a863 */
static const float SA3F = 4.3456588745e+02f;  /* 0x43d9486f */
static const float SA4F = 6.4538726807e+02f;  /* 0x442158c9 */
static const float SA5F = 4.2900814819e+02f;  /* 0x43d6810b */
static const float SA6F = 1.0863500214e+02f;  /* 0x42d9451f */
static const float SA7F = 6.5702495575e+00f;  /* 0x40d23f7c */
static const float SA8F = -6.0424413532e-02f; /* 0xbd777f97 */
static const float RB0F = -9.8649431020e-03f; /* 0xbc21a092 */
static const float RB1F = -7.9928326607e-01f; /* 0xbf4c9dd4 */
static const float RB2F = -1.7757955551e+01f; /* 0xc18e104b */
static const float RB3F = -1.6063638306e+02f; /* 0xc320a2ea */
static const float RB4F = -6.3756646729e+02f; /* 0xc41f6441 */
static const float RB5F = -1.0250950928e+03f; /* 0xc480230b */
static const float RB6F = -4.8351919556e+02f; /* 0xc3f1c275 */
static const float SB1F = 3.0338060379e+01f;  /* 0x41f2b459 */
static const float SB2F = 3.2579251099e+02f;  /* 0x43a2e571 */
static const float SB3F = 1.5367296143e+03f;  /* 0x44c01759 */
static const float SB4F = 3.1998581543e+03f;  /* 0x4547fdbb */
static const float SB5F = 2.5530502930e+03f;  /* 0x451f90ce */
static const float SB6F = 4.7452853394e+02f;  /* 0x43ed43a7 */
static const float SB7F = -2.2440952301e+01f; /* 0xc1b38712 */

static float erfc1f(float x)
{
	float s, P, Q;

	s = pk_fabsf(x) - 1;
	P = PA0F + s * (PA1F + s * (PA2F + s * (PA3F + s * (PA4F + s * (PA5F + s * PA6F)))));
	Q = 1 + s * (QA1F + s * (QA2F + s * (QA3F + s * (QA4F + s * (QA5F + s * QA6F)))));
	return 1 - ERXF - P / Q;
}

static float erfc2f(uint32_t ix, float x)
{
	float s, R, S;
	float z;

	if (ix < 0x3fa00000) /* |x| < 1.25 */
		return erfc1f(x);

	x = pk_fabsf(x);
	s = 1 / (x * x);
	if (ix < 0x4036db6d) { /* |x| < 1/0.35 */
		R = RA0F + s * (RA1F + s * (RA2F + s * (RA3F + s * (RA4F + s * (
		     RA5F + s * (RA6F + s * RA7F))))));
		S = 1.0f + s * (SA1F + s * (SA2F + s * (SA3F + s * (SA4F + s * (
		     SA5F + s * (SA6F + s * (SA7F + s * SA8F)))))));
	} else { /* |x| >= 1/0.35 */
		R = RB0F + s * (RB1F + s * (RB2F + s * (RB3F + s * (RB4F + s * (
		     RB5F + s * RB6F)))));
		S = 1.0f + s * (SB1F + s * (SB2F + s * (SB3F + s * (SB4F + s * (
		     SB5F + s * (SB6F + s * SB7F))))));
	}
	z = pk_asf32(pk_asu32(x) & 0xffffe000);
	return presk_expf(-z * z - 0.5625f) * presk_expf((z - x) * (z + x) + R / S) / x;
}

PRESK_LIBM_FN float presk_erff(float x)
{
	float r, s, z, y;
	uint32_t ix;
	int sign;

	ix = pk_asu32(x);
	sign = (int)(ix >> 31);
	ix &= 0x7fffffff;
	if (ix >= 0x7f800000) {
		/* erf(nan)=nan, erf(+-inf)=+-1 */
		return 1 - 2 * sign + 1 / x;
	}
	if (ix < 0x3f580000) { /* |x| < 0.84375 */
		if (ix < 0x31800000) { /* |x| < 2**-28 */
			/* avoid underflow */
			return 0.125f * (8 * x + EFX8F * x);
		}
		z = x * x;
		r = PP0F + z * (PP1F + z * (PP2F + z * (PP3F + z * PP4F)));
		s = 1 + z * (QQ1F + z * (QQ2F + z * (QQ3F + z * (QQ4F + z * QQ5F))));
		y = r / s;
		return x + x * y;
	}
	if (ix < 0x40c00000) /* |x| < 6 */
		y = 1 - erfc2f(ix, x);
	else
		y = 1 - 0x1p-120f;
	return sign ? -y : y;
}

/* ------------------------------------------------------------------------ */
/* Lanes: exp, log, tanh, erf on PRESK_LANES_F64 doubles, and expf, logf,   */
/* tanhf, erff on PRESK_LANES_F32 floats, in GCC/Clang vector types.        */
/*                                                                          */
/* Each lane is its own element and computes exactly the operations of the  */
/* scalar function above, in the same order and the same types, so every   */
/* result has the scalar function's bits: the expressions are the scalar    */
/* ones with vectors for scalars.  Branches become selections: every lane   */
/* evaluates each path some lane of the block needs and keeps its own.      */
/* A lane on a rare path (NaN, infinities, overflow and underflow ranges,   */
/* subnormal or negative log arguments, exp's |x| >= 512) is recomputed by  */
/* the scalar function.  A path's result on a lane that does not take it   */
/* may be any value; only integer and floating operations without undefined */
/* behaviour are used on such lanes, and table indices stay in range.       */
/* ------------------------------------------------------------------------ */

#if defined(__GNUC__)

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

typedef double pk_v8d __attribute__((vector_size(64)));
typedef float pk_v8f __attribute__((vector_size(32)));
typedef uint64_t pk_v8u __attribute__((vector_size(64)));
typedef int64_t pk_v8i __attribute__((vector_size(64)));
typedef float pk_v16f __attribute__((vector_size(64)));
typedef uint32_t pk_v16u __attribute__((vector_size(64)));
typedef int32_t pk_v16i __attribute__((vector_size(64)));

/* A mask lane is all ones (true) or zero; pk_sel takes a where the mask is set.
   No helper takes or returns a vector by value: GCC would warn (-Wpsabi, at the
   end of the unit, where no pragma reaches) that 64-byte vectors are passed
   differently without AVX-512, so helpers are macros or take pointers. */
#define pk_sel8(m, a, b) ((pk_v8d)(((pk_v8i)(a) & (m)) | ((pk_v8i)(b) & ~(m))))
#define pk_sel16(m, a, b) ((pk_v16f)(((pk_v16i)(a) & (m)) | ((pk_v16i)(b) & ~(m))))

/* Whether some lane of a mask is set (the mask in 64 bytes). */
static inline int pk_any(const void *m)
{
	uint64_t w[8], any = 0;
	memcpy(w, m, sizeof w);
	for (int l = 0; l < 8; l++)
		any |= w[l];
	return any != 0;
}

/* The 64-bit words t[l] = tab[i[l]] of a table of 8-byte items (a table of pairs
   counts two a pair) for 8 lanes: with AVX-512 one gather instruction, else the
   loop; both are the same eight loads, which change no bit. Indices stay in range. */
#if defined(__AVX512F__)
#define pk_gather8(t, tab, i) \
	(*(t) = (pk_v8u)_mm512_i64gather_epi64((__m512i)(i), (const void *)(tab), 8))
#else
#define pk_gather8(t, tab, i)                                                 \
	do {                                                                  \
		pk_v8u pk_i_ = (i);                                           \
		for (int l = 0; l < 8; l++) {                                 \
			uint64_t pk_w_;                                       \
			memcpy(&pk_w_, (const char *)(tab) + 8 * pk_i_[l], 8); \
			(*(t))[l] = pk_w_;                                    \
		}                                                             \
	} while (0)
#endif

/* The same words from a table of exactly 32 (expf's, and logf's 16 pairs): with AVX-512
   the table is four registers, and two permutes of two registers each and a blend on
   bit 4 of the index replace the gather's eight loads (expf's lanes: 0.83 -> 0.68 ns an
   element on a Zen 5). Indices stay in [0, 32). */
#if defined(__AVX512F__)
#define pk_lookup32(t, tab, i)                                                             \
	do {                                                                                \
		const char *pk_tab_ = (const char *)(tab);                                  \
		__m512i pk_ix_ = (__m512i)(i);                                              \
		__m512i pk_lo_ = _mm512_permutex2var_epi64(_mm512_loadu_si512(pk_tab_), pk_ix_, \
							  _mm512_loadu_si512(pk_tab_ + 64));    \
		__m512i pk_hi_ = _mm512_permutex2var_epi64(_mm512_loadu_si512(pk_tab_ + 128),   \
							  pk_ix_,                               \
							  _mm512_loadu_si512(pk_tab_ + 192));   \
		__mmask8 pk_up_ = _mm512_test_epi64_mask(pk_ix_, _mm512_set1_epi64(16));    \
		*(t) = (pk_v8u)_mm512_mask_blend_epi64(pk_up_, pk_lo_, pk_hi_);             \
	} while (0)
#else
#define pk_lookup32(t, tab, i) pk_gather8(t, tab, i)
#endif

/* The low and high halves of 16 floats as doubles, and back (both exact or
   rounding once, as the scalar casts do). */
static inline void pk_widen16(const pk_v16f *x, pk_v8d *lo, pk_v8d *hi)
{
	pk_v8f h[2];
	memcpy(h, x, sizeof h);
	*lo = __builtin_convertvector(h[0], pk_v8d);
	*hi = __builtin_convertvector(h[1], pk_v8d);
}

static inline void pk_narrow16(pk_v16f *x, const pk_v8d *lo, const pk_v8d *hi)
{
	pk_v8f h[2] = {__builtin_convertvector(*lo, pk_v8f), __builtin_convertvector(*hi, pk_v8f)};
	memcpy(x, h, sizeof h);
}

/* ---- exp ---- */

/* presk_exp's reduction and polynomial: scale and tmp such that the main
   path's result is scale + scale * tmp (exp_hilo shares it). */
static inline void pk_exp_core8(const pk_v8d *px, pk_v8d *scale, pk_v8d *tmp)
{
	pk_v8d x = *px;
	pk_v8d kd, z, r, r2, tail;
	pk_v8u ki, idx, top, sbits;

	z = EXP_INVLN2N * x;
	kd = z + EXP_SHIFT;
	ki = (pk_v8u)kd;
	kd -= EXP_SHIFT;
	r = x + kd * EXP_NEGLN2HIN + kd * EXP_NEGLN2LON;
	idx = 2 * (ki % EXP_N);
	top = ki << (52 - EXP_TABLE_BITS);
	pk_v8u tail_bits;
	pk_gather8(&tail_bits, EXP_TAB, idx);
	pk_gather8(&sbits, EXP_TAB, idx + 1);
	tail = (pk_v8d)tail_bits;
	sbits += top;
	r2 = r * r;
	*tmp = tail + r + r2 * (EXP_C2 + r * EXP_C3) + r2 * r2 * (EXP_C4 + r * EXP_C5);
	*scale = (pk_v8d)sbits;
}

static inline __attribute__((always_inline)) void pk_exp8(pk_v8d *out, const pk_v8d *px)
{
	pk_v8d x = *px;
	pk_v8u abstop = ((pk_v8u)x >> 52) & 0x7ff;
	pk_v8i tiny = (pk_v8i)(abstop < 0x3c9); /* |x| < 2^-54: 1 + x */
	pk_v8i rare = (pk_v8i)(abstop >= 0x408); /* |x| >= 512, inf, nan */
	pk_v8d scale, tmp, y;

	pk_exp_core8(&x, &scale, &tmp);
	y = pk_sel8(tiny, 1.0 + x, scale + scale * tmp);
	if (pk_any(&rare))
		for (int l = 0; l < 8; l++)
			if (rare[l])
				y[l] = presk_exp(x[l]);
	*out = y;
}

/* ---- log ---- */

static inline __attribute__((always_inline)) void pk_log8(pk_v8d *out, const pk_v8d *px)
{
	pk_v8d x = *px;
	pk_v8d y, r, r2, r3, w, hi, lo, near, z, invc, logc, chi, clo, kd;
	pk_v8u ix = (pk_v8u)x, top = ix >> 48, tmp, iz, i;
	pk_v8i k;
	pk_v8i is_near = (pk_v8i)(ix - 0x3fee000000000000ULL <
				  0x3ff1090000000000ULL - 0x3fee000000000000ULL);
	pk_v8i rare = (pk_v8i)(top - 0x0010 >= 0x7ff0 - 0x0010) & ~is_near;

	/* Near 1: presk_log's first branch. */
	near = x;
	if (pk_any(&is_near)) {
		r = x - 1.0;
		r2 = r * r;
		r3 = r * r2;
		y = r3 * (LOG_B[1] + r * LOG_B[2] + r2 * LOG_B[3] +
			  r3 * (LOG_B[4] + r * LOG_B[5] + r2 * LOG_B[6] +
				r3 * (LOG_B[7] + r * LOG_B[8] + r2 * LOG_B[9] + r3 * LOG_B[10])));
		w = r * 0x1p27;
		pk_v8d rhi = r + w - w;
		pk_v8d rlo = r - rhi;
		w = rhi * rhi * LOG_B[0];
		hi = r + w;
		lo = r - hi + w;
		lo += LOG_B[0] * rlo * (rhi + r);
		y += lo;
		y += hi;
		near = pk_sel8((pk_v8i)(ix == 0x3ff0000000000000ULL), (pk_v8d){0} + 0.0, y);
	}

	/* The table path for normal positive x. */
	tmp = ix - LOG_OFF;
	i = (tmp >> (52 - LOG_TABLE_BITS)) % LOG_N;
	k = (pk_v8i)((tmp >> 52) ^ 0x800) - 0x800;
	iz = ix - (tmp & 0xfffULL << 52);
	{
		pk_v8u w;
		pk_gather8(&w, LOG_TAB, 2 * i);
		invc = (pk_v8d)w;
		pk_gather8(&w, LOG_TAB, 2 * i + 1);
		logc = (pk_v8d)w;
		pk_gather8(&w, LOG_TAB2, 2 * i);
		chi = (pk_v8d)w;
		pk_gather8(&w, LOG_TAB2, 2 * i + 1);
		clo = (pk_v8d)w;
	}
	z = (pk_v8d)iz;
	r = (z - chi - clo) * invc;
	kd = __builtin_convertvector(k, pk_v8d);
	w = kd * LOG_LN2HI + logc;
	hi = w + r;
	lo = w - hi + r + kd * LOG_LN2LO;
	r2 = r * r;
	y = lo + r2 * LOG_A[0] +
	    r * r2 * (LOG_A[1] + r * LOG_A[2] + r2 * (LOG_A[3] + r * LOG_A[4])) + hi;

	y = pk_sel8(is_near, near, y);
	if (pk_any(&rare))
		for (int l = 0; l < 8; l++)
			if (rare[l])
				y[l] = presk_log(x[l]);
	*out = y;
}

/* ---- tanh ---- */

static inline __attribute__((always_inline)) void pk_tanh8(pk_v8d *out, const pk_v8d *px)
{
	pk_v8d x0 = *px;
	pk_v8d x;
	pk_v8u u = (pk_v8u)x0;
	pk_v8i sign = (pk_v8i)(u >> 63 != 0);
	pk_v8u w;
	pk_v8d t, mid = x0, small = x0;

	u &= 0x7fffffffffffffffULL;
	x = (pk_v8d)u;
	w = u >> 32;
	pk_v8i is_large = (pk_v8i)(w > 0x40340000);
	pk_v8i is_mid = (pk_v8i)(w > 0x3fe193ea) & ~is_large;
	pk_v8i is_small = (pk_v8i)(w >= 0x00100000) & ~(pk_v8i)(w > 0x3fe193ea);
	pk_v8i rare = (pk_v8i)(u > PK_INF_BITS); /* nan */

	if (pk_any(&is_mid)) {
		/* exp_hilo(2x): the reduction and polynomial of exp, the sum kept exact. */
		pk_v8d scale, tmp, sp, ehi, elo, s, e, q1, q2, p, pe, s1, c, ah, al, bh, bl;
		const double split = 134217729.0; /* 2^27 + 1 */

		pk_v8d x2 = 2 * x;

		pk_exp_core8(&x2, &scale, &tmp);
		sp = scale * tmp;
		ehi = scale + sp;
		elo = (scale - ehi) + sp;
		s = ehi + 1;
		e = ((ehi - s) + 1) + elo;
		q1 = 2 / s;
		/* pk_two_prod(q1, s, &p, &pe) */
		p = q1 * s;
		c = split * q1;
		ah = c - (c - q1);
		al = q1 - ah;
		c = split * s;
		bh = c - (c - s);
		bl = s - bh;
		pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
		q2 = (((2 - p) - pe) - q1 * e) / s;
		s1 = 1 - q1;
		mid = s1 + (((1 - s1) - q1) - q2);
	}
	if (pk_any(&is_small)) {
		pk_v8d z = x * x, p;
		p = TANH_P[0] + z * (TANH_P[1] + z * (TANH_P[2] + z * (TANH_P[3] + z * (TANH_P[4] +
		    z * (TANH_P[5] + z * (TANH_P[6] + z * (TANH_P[7] + z * (TANH_P[8] +
		    z * (TANH_P[9] + z * TANH_P[10])))))))));
		small = x + (x * z) * p;
	}
	t = pk_sel8(is_large, 1 - 0 / x, pk_sel8(is_mid, mid, pk_sel8(is_small, small, x)));
	t = pk_sel8(sign, -t, t);
	if (pk_any(&rare))
		for (int l = 0; l < 8; l++)
			if (rare[l])
				t[l] = presk_tanh(x0[l]);
	*out = t;
}

/* ---- erf ---- */

static inline __attribute__((always_inline)) void pk_erf8(pk_v8d *out, const pk_v8d *px)
{
	pk_v8d x = *px;
	pk_v8u hx = (pk_v8u)x >> 32;
	pk_v8i sign = (pk_v8i)(hx >> 31 != 0);
	pk_v8u ix = hx & 0x7fffffff;
	pk_v8i rare = (pk_v8i)(ix >= 0x7ff00000);
	pk_v8i is_tiny = (pk_v8i)(ix < 0x3e300000);
	pk_v8i is_small = (pk_v8i)(ix < 0x3feb0000);
	pk_v8i is_e1 = (pk_v8i)(ix < 0x3ff40000) & ~is_small;
	pk_v8i is_ra = (pk_v8i)(ix < 0x4006db6d) & ~(pk_v8i)(ix < 0x3ff40000);
	pk_v8i is_rb = (pk_v8i)(ix < 0x40180000) & ~(pk_v8i)(ix < 0x4006db6d);
	pk_v8i is_e2 = is_ra | is_rb, mid_small = is_small & ~is_tiny;
	pk_v8d small = x, erfc = x, y;

	if (pk_any(&mid_small)) {
		pk_v8d z, r, s;
		z = x * x;
		r = PP0 + z * (PP1 + z * (PP2 + z * (PP3 + z * PP4)));
		s = 1.0 + z * (QQ1 + z * (QQ2 + z * (QQ3 + z * (QQ4 + z * QQ5))));
		y = r / s;
		small = x + x * y;
	}
	small = pk_sel8(is_tiny, 0.125 * (8 * x + EFX8 * x), small);
	if (pk_any(&is_e1)) {
		/* erfc1(x) */
		pk_v8d s, P, Q;
		s = (pk_v8d)((pk_v8u)x & 0x7fffffffffffffffULL) - 1;
		P = PA0 + s * (PA1 + s * (PA2 + s * (PA3 + s * (PA4 + s * (PA5 + s * PA6)))));
		Q = 1 + s * (QA1 + s * (QA2 + s * (QA3 + s * (QA4 + s * (QA5 + s * QA6)))));
		erfc = 1 - ERX - P / Q;
	}
	if (pk_any(&is_e2)) {
		/* erfc2(ix, x) for 1.25 <= |x| < 6; other lanes take |x| = 2 so that
		   their exp arguments stay ordinary. */
		pk_v8d ax, s, R, S, Ra, Sa, Rb, Sb, z, e2;
		ax = pk_sel8(is_e2, (pk_v8d)((pk_v8u)x & 0x7fffffffffffffffULL),
			     (pk_v8d){0} + 2.0);
		s = 1 / (ax * ax);
		R = S = ax;
		if (pk_any(&is_ra)) {
			Ra = RA0 + s * (RA1 + s * (RA2 + s * (RA3 + s * (RA4 + s * (
			     RA5 + s * (RA6 + s * RA7))))));
			Sa = 1.0 + s * (SA1 + s * (SA2 + s * (SA3 + s * (SA4 + s * (
			     SA5 + s * (SA6 + s * (SA7 + s * SA8)))))));
			R = Ra;
			S = Sa;
		}
		if (pk_any(&is_rb)) {
			Rb = RB0 + s * (RB1 + s * (RB2 + s * (RB3 + s * (RB4 + s * (
			     RB5 + s * RB6)))));
			Sb = 1.0 + s * (SB1 + s * (SB2 + s * (SB3 + s * (SB4 + s * (
			     SB5 + s * (SB6 + s * SB7))))));
			R = pk_sel8(is_rb, Rb, R);
			S = pk_sel8(is_rb, Sb, S);
		}
		z = (pk_v8d)((pk_v8u)ax & 0xffffffff00000000ULL);
		pk_v8d a1 = -z * z - 0.5625, a2 = (z - ax) * (z + ax) + R / S;

		pk_exp8(&a1, &a1);
		pk_exp8(&a2, &a2);
		e2 = a1 * a2 / ax;
		erfc = pk_sel8(is_e1, erfc, e2);
	}
	y = pk_sel8(is_e1 | is_e2, 1 - erfc, (pk_v8d){0} + (1 - 0x1p-1022));
	y = pk_sel8(sign, -y, y);
	y = pk_sel8(is_small, small, y);
	if (pk_any(&rare))
		for (int l = 0; l < 8; l++)
			if (rare[l])
				y[l] = presk_erf(x[l]);
	*out = y;
}

/* ---- expf ---- */

static inline __attribute__((always_inline)) void pk_expf_core8(pk_v8d *out, const pk_v8d *pxd)
{
	pk_v8d xd = *pxd;
	pk_v8d kd, z, r, r2, y, s;
	pk_v8u ki, t;

	z = EXPF_INVLN2N * xd;
	kd = z + EXPF_SHIFT;
	ki = (pk_v8u)kd;
	kd -= EXPF_SHIFT;
	r = z - kd;
	pk_lookup32(&t, EXP2F_TAB, ki % EXP2F_N);
	t += ki << (52 - EXP2F_TABLE_BITS);
	s = (pk_v8d)t;
	z = EXPF_C[0] * r + EXPF_C[1];
	r2 = r * r;
	y = EXPF_C[2] * r + 1;
	y = z * r2 + y;
	y = y * s;
	*out = y;
}

static inline __attribute__((always_inline)) void pk_expf16(pk_v16f *out, const pk_v16f *px)
{
	pk_v16f x = *px;
	pk_v16u abstop = ((pk_v16u)x >> 20) & 0x7ff;
	pk_v16i rare = (pk_v16i)(abstop >= 0x42b); /* |x| >= 88 or nan */
	pk_v8d lo, hi;
	pk_v16f y;

	pk_widen16(&x, &lo, &hi);
	pk_expf_core8(&lo, &lo);
	pk_expf_core8(&hi, &hi);
	pk_narrow16(&y, &lo, &hi);
	if (pk_any(&rare))
		for (int l = 0; l < 16; l++)
			if (rare[l])
				y[l] = presk_expf(x[l]);
	*out = y;
}

/* ---- logf ---- */

static inline __attribute__((always_inline)) void pk_logf16(pk_v16f *out, const pk_v16f *px)
{
	pk_v16f x = *px;
	pk_v16u ix = (pk_v16u)x, tmp, iz, i;
	pk_v16i k;
	pk_v16f zf, y;
	pk_v8d z[2], kd[2], invc[2], logc[2], r, r2, yd[2], y0;
	pk_v16i one = (pk_v16i)(ix == 0x3f800000);
	pk_v16i rare = (pk_v16i)(ix - 0x00800000 >= 0x7f800000 - 0x00800000) & ~one;

	tmp = ix - LOGF_OFF;
	i = (tmp >> (23 - LOGF_TABLE_BITS)) % LOGF_N;
	k = (pk_v16i)((tmp >> 23) ^ 0x100) - 0x100;
	iz = ix - (tmp & 0xff800000U);
	zf = (pk_v16f)iz;
	pk_widen16(&zf, &z[0], &z[1]);
	for (int h = 0; h < 2; h++) {
		pk_v8u ih, w;
		for (int l = 0; l < 8; l++)
			ih[l] = i[8 * h + l];
		pk_lookup32(&w, LOGF_TAB, 2 * ih);
		invc[h] = (pk_v8d)w;
		pk_lookup32(&w, LOGF_TAB, 2 * ih + 1);
		logc[h] = (pk_v8d)w;
		for (int l = 0; l < 8; l++)
			kd[h][l] = (double)k[8 * h + l];
	}
	for (int h = 0; h < 2; h++) {
		r = z[h] * invc[h] - 1;
		y0 = logc[h] + kd[h] * LOGF_LN2;
		r2 = r * r;
		yd[h] = LOGF_A[1] * r + LOGF_A[2];
		yd[h] = LOGF_A[0] * r2 + yd[h];
		yd[h] = yd[h] * r2 + (y0 + r);
	}
	pk_narrow16(&y, &yd[0], &yd[1]);
	y = pk_sel16(one, (pk_v16f){0} + 0.0f, y);
	if (pk_any(&rare))
		for (int l = 0; l < 16; l++)
			if (rare[l])
				y[l] = presk_logf(x[l]);
	*out = y;
}

/* ---- tanhf: presk_tanh in double, rounded ---- */

static inline __attribute__((always_inline)) void pk_tanhf16(pk_v16f *out, const pk_v16f *x)
{
	pk_v8d lo, hi;

	pk_widen16(x, &lo, &hi);
	pk_tanh8(&lo, &lo);
	pk_tanh8(&hi, &hi);
	pk_narrow16(out, &lo, &hi);
}

/* ---- erff ---- */

static inline __attribute__((always_inline)) void pk_erff16(pk_v16f *out, const pk_v16f *px)
{
	pk_v16f x = *px;
	pk_v16u ix = (pk_v16u)x;
	pk_v16i sign = (pk_v16i)(ix >> 31 != 0);
	pk_v16f small = x, erfc = x, y;

	ix &= 0x7fffffff;
	pk_v16i rare = (pk_v16i)(ix >= 0x7f800000);
	pk_v16i is_tiny = (pk_v16i)(ix < 0x31800000);
	pk_v16i is_small = (pk_v16i)(ix < 0x3f580000);
	pk_v16i is_e1 = (pk_v16i)(ix < 0x3fa00000) & ~is_small;
	pk_v16i is_ra = (pk_v16i)(ix < 0x4036db6d) & ~(pk_v16i)(ix < 0x3fa00000);
	pk_v16i is_rb = (pk_v16i)(ix < 0x40c00000) & ~(pk_v16i)(ix < 0x4036db6d);
	pk_v16i is_e2 = is_ra | is_rb, mid_small = is_small & ~is_tiny;

	if (pk_any(&mid_small)) {
		pk_v16f z, r, s;
		z = x * x;
		r = PP0F + z * (PP1F + z * (PP2F + z * (PP3F + z * PP4F)));
		s = 1 + z * (QQ1F + z * (QQ2F + z * (QQ3F + z * (QQ4F + z * QQ5F))));
		y = r / s;
		small = x + x * y;
	}
	small = pk_sel16(is_tiny, 0.125f * (8 * x + EFX8F * x), small);
	if (pk_any(&is_e1)) {
		/* erfc1f(x) */
		pk_v16f s, P, Q;
		s = (pk_v16f)ix - 1;
		P = PA0F + s * (PA1F + s * (PA2F + s * (PA3F + s * (PA4F + s * (PA5F + s * PA6F)))));
		Q = 1 + s * (QA1F + s * (QA2F + s * (QA3F + s * (QA4F + s * (QA5F + s * QA6F)))));
		erfc = 1 - ERXF - P / Q;
	}
	if (pk_any(&is_e2)) {
		/* erfc2f(ix, x) for 1.25 <= |x| < 6; other lanes take |x| = 2. */
		pk_v16f ax, s, R, S, z, e2;
		ax = pk_sel16(is_e2, (pk_v16f)ix, (pk_v16f){0} + 2.0f);
		s = 1 / (ax * ax);
		R = S = ax;
		if (pk_any(&is_ra)) {
			R = RA0F + s * (RA1F + s * (RA2F + s * (RA3F + s * (RA4F + s * (
			     RA5F + s * (RA6F + s * RA7F))))));
			S = 1.0f + s * (SA1F + s * (SA2F + s * (SA3F + s * (SA4F + s * (
			     SA5F + s * (SA6F + s * (SA7F + s * SA8F)))))));
		}
		if (pk_any(&is_rb)) {
			pk_v16f Rb, Sb;
			Rb = RB0F + s * (RB1F + s * (RB2F + s * (RB3F + s * (RB4F + s * (
			     RB5F + s * RB6F)))));
			Sb = 1.0f + s * (SB1F + s * (SB2F + s * (SB3F + s * (SB4F + s * (
			     SB5F + s * (SB6F + s * SB7F))))));
			R = pk_sel16(is_rb, Rb, R);
			S = pk_sel16(is_rb, Sb, S);
		}
		z = (pk_v16f)((pk_v16u)ax & 0xffffe000);
		pk_v16f a1 = -z * z - 0.5625f, a2 = (z - ax) * (z + ax) + R / S;

		pk_expf16(&a1, &a1);
		pk_expf16(&a2, &a2);
		e2 = a1 * a2 / ax;
		erfc = pk_sel16(is_e1, erfc, e2);
	}
	y = pk_sel16(is_e1 | is_e2, 1 - erfc, (pk_v16f){0} + (1 - 0x1p-120f));
	y = pk_sel16(sign, -y, y);
	y = pk_sel16(is_small, small, y);
	if (pk_any(&rare))
		for (int l = 0; l < 16; l++)
			if (rare[l])
				y[l] = presk_erff(x[l]);
	*out = y;
}

/* ---- the entry points: y[l] = f(x[l]) for every lane; y may be x ---- */

/* Definitions a caller in the same unit takes inline (presk_libm.h declares them without
   `inline`, so they are external ones too, unless the unit's copy is private): the native
   backend's units and an exported model.c include this file, so a kernel's block of lanes
   keeps its vectors in registers instead of spilling every live one around a call and
   passing 64 bytes through memory. */
#define PK_LANES_ENTRY PRESK_LIBM_FN inline __attribute__((always_inline))

#define PK_LANES8(entry, lanes)                      \
	PK_LANES_ENTRY void entry(double *y, const double *x) \
	{                                            \
		pk_v8d v;                            \
		memcpy(&v, x, sizeof v);             \
		lanes(&v, &v);                       \
		memcpy(y, &v, sizeof v);             \
	}
#define PK_LANES16(entry, lanes)                     \
	PK_LANES_ENTRY void entry(float *y, const float *x) \
	{                                            \
		pk_v16f v;                           \
		memcpy(&v, x, sizeof v);             \
		lanes(&v, &v);                       \
		memcpy(y, &v, sizeof v);             \
	}
PK_LANES8(presk_exp_lanes, pk_exp8)
PK_LANES8(presk_log_lanes, pk_log8)
PK_LANES8(presk_tanh_lanes, pk_tanh8)
PK_LANES8(presk_erf_lanes, pk_erf8)
PK_LANES16(presk_expf_lanes, pk_expf16)
PK_LANES16(presk_logf_lanes, pk_logf16)
PK_LANES16(presk_tanhf_lanes, pk_tanhf16)
PK_LANES16(presk_erff_lanes, pk_erff16)
#undef PK_LANES8
#undef PK_LANES16
#undef PK_LANES_ENTRY

#endif /* __GNUC__ */

#if defined(__clang__)
#if __clang_major__ >= 11
#pragma float_control(pop)
#endif
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

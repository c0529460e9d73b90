/*
 * presk_rng.c - Philox4x32-10 streams keyed by seed and path; see presk_rng.h and docs/rng.md.
 * Uses only <stdint.h>/<stddef.h>/<string.h>; no global state, so every function is thread-safe.
 */
#include "presk_rng.h"

#include <string.h>

#define PRESK_PHILOX_M0 UINT32_C(0xD2511F53)
#define PRESK_PHILOX_M1 UINT32_C(0xCD9E8D57)
#define PRESK_PHILOX_W0 UINT32_C(0x9E3779B9) /* golden ratio */
#define PRESK_PHILOX_W1 UINT32_C(0xBB67AE85) /* sqrt(3) - 1 */
#define PRESK_PHILOX_ROUNDS 10

#define PRESK_FNV64_OFFSET UINT64_C(0xCBF29CE484222325)
#define PRESK_FNV64_PRIME UINT64_C(0x100000001B3)

/* ASCII "prsk": counter word 2 of a derivation; stream blocks have 0 there, so never collide. */
#define PRESK_DERIVE_TAG UINT32_C(0x7072736B)

void presk_philox(const uint32_t ctr[4], presk_key key, uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key.k[0], k1 = key.k[1];
    for (int r = 0; r < PRESK_PHILOX_ROUNDS; r++) {
        if (r > 0) { /* the key is bumped between rounds, not before the first */
            k0 += PRESK_PHILOX_W0;
            k1 += PRESK_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)PRESK_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PRESK_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint64_t presk_fnv1a64(const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    uint64_t h = PRESK_FNV64_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= PRESK_FNV64_PRIME;
    }
    return h;
}

presk_key presk_derive_n(presk_key key, const char *path, size_t len) {
    uint64_t h = presk_fnv1a64(path, len);
    uint32_t ctr[4] = {(uint32_t)h, (uint32_t)(h >> 32), PRESK_DERIVE_TAG, 0};
    uint32_t out[4];
    presk_philox(ctr, key, out);
    presk_key child = {{out[0], out[1]}};
    return child;
}

presk_key presk_derive(presk_key key, const char *path) {
    return presk_derive_n(key, path, strlen(path));
}

presk_key presk_key_from_seed(uint64_t seed) {
    presk_key raw = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    return presk_derive(raw, "presk"); /* scrambles nearby seeds into unrelated keys */
}

presk_key presk_key_for(uint64_t seed, const char *path) {
    return presk_derive(presk_key_from_seed(seed), path);
}

/* Block b of key's stream: counter (b lo32, b hi32, 0, 0). */
static void presk_block(presk_key key, uint64_t b, uint32_t out[4]) {
    uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0, 0};
    presk_philox(ctr, key, out);
}

uint32_t presk_u32(presk_key key, uint64_t i) {
    uint32_t out[4];
    presk_block(key, i >> 2, out);
    return out[i & 3];
}

uint64_t presk_u64(presk_key key, uint64_t j) {
    uint32_t out[4];
    presk_block(key, j >> 1, out); /* words 2j and 2j+1 share block j / 2 */
    unsigned half = (unsigned)(j & 1) * 2;
    return (uint64_t)out[half] | ((uint64_t)out[half + 1] << 32);
}

double presk_uniform(presk_key key, uint64_t j) {
    /* a 53-bit integer converts to double exactly; the power-of-two scale is exact */
    return (double)(presk_u64(key, j) >> 11) * 0x1.0p-53;
}

#if defined(__SIZEOF_INT128__) && !defined(PRESK_RNG_NO_INT128)
__extension__ typedef unsigned __int128 presk_u128; /* __extension__: quiet under -pedantic */
#endif

/* The high 64 bits of the 128-bit product a * b (PRESK_RNG_NO_INT128 forces the portable one). */
static uint64_t presk_mulhi64(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__) && !defined(PRESK_RNG_NO_INT128)
    return (uint64_t)(((presk_u128)a * b) >> 64);
#else
    uint64_t a_lo = (uint32_t)a, a_hi = a >> 32;
    uint64_t b_lo = (uint32_t)b, b_hi = b >> 32;
    uint64_t lo_lo = a_lo * b_lo;
    uint64_t hi_lo = a_hi * b_lo;
    uint64_t lo_hi = a_lo * b_hi;
    uint64_t hi_hi = a_hi * b_hi;
    /* the middle column cannot overflow: each term is below 2^32 */
    uint64_t mid = (lo_lo >> 32) + (uint32_t)hi_lo + (uint32_t)lo_hi;
    return hi_hi + (hi_lo >> 32) + (lo_hi >> 32) + (mid >> 32);
#endif
}

uint64_t presk_randbelow(presk_key key, uint64_t j, uint64_t bound) {
    return presk_mulhi64(presk_u64(key, j), bound);
}

/*
 * presk_rng.h - the counter-based random generator of presk, in C11.
 *
 * Philox4x32-10 (Random123) keyed by a user seed and a path string. The integer and
 * uniform streams here are identical, word for word, to presk/interp/rng.py; the
 * specification is docs/rng.md. Every function is pure: a draw depends only on
 * (key, index), never on call order, so parallel or reordered code draws the same values.
 */
#ifndef PRESK_RNG_H
#define PRESK_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A Philox4x32 key: two 32-bit words (k[0] = k0, k[1] = k1 of the Python Key). */
typedef struct {
    uint32_t k[2];
} presk_key;

/* One Philox4x32-10 block: out = philox(ctr, key). */
void presk_philox(const uint32_t ctr[4], presk_key key, uint32_t out[4]);

/* 64-bit FNV-1a hash of len bytes. */
uint64_t presk_fnv1a64(const void *data, size_t len);

/* The child key of key named by the UTF-8 bytes path[0..len). */
presk_key presk_derive_n(presk_key key, const char *path, size_t len);

/* The child key of key named by the NUL-terminated UTF-8 string path. */
presk_key presk_derive(presk_key key, const char *path);

/* The root key of a user seed: derive({seed lo32, seed hi32}, "presk"). */
presk_key presk_key_from_seed(uint64_t seed);

/* The key of the value named path under seed: derive(key_from_seed(seed), path). */
presk_key presk_key_for(uint64_t seed, const char *path);

/* The i-th 32-bit word of key's stream: word i % 4 of block i / 4. */
uint32_t presk_u32(presk_key key, uint64_t i);

/* The j-th 64-bit draw: stream words 2j (low half) and 2j+1 (high half). */
uint64_t presk_u64(presk_key key, uint64_t j);

/* The j-th uniform double in [0, 1): (presk_u64(key, j) >> 11) * 2^-53, exact. */
double presk_uniform(presk_key key, uint64_t j);

/* A uniform integer in [0, bound) from the j-th draw: (u64 * bound) >> 64. bound 0 gives 0. */
uint64_t presk_randbelow(presk_key key, uint64_t j, uint64_t bound);

#ifdef __cplusplus
}
#endif

#endif /* PRESK_RNG_H */

/* presk_rt.h — the runtime of generated programs: bf16 storage, keys, frames.
 *
 * Every generated translation unit includes this text. It has no global
 * state: a program's buffers live in the caller's arena (one block of
 * memory whose size the compiler computed), and random draws come from
 * presk_rng's counter-based generator, keyed like the reference's.
 */
// Start of presk_rt.h.
#ifndef PRESK_RT_H
#define PRESK_RT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* bf16 is storage only: the upper half of an IEEE single. Widening is exact. */
static inline float presk_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Narrowing rounds to nearest, ties to even; a NaN stays a (quiet) NaN. */
static inline uint16_t presk_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u);
    }
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + rounding) >> 16);
}

/* The arena: one block the caller owns; its size is computed at print time.
 * `threads` is the number of workers a split kernel may use (1: no split). */
typedef struct presk_arena {
    char *base;
    size_t size;
    int threads;
} presk_arena;

/* Vector lanes (GCC and Clang vector extensions): each lane is its own output
 * column, so a vector kernel computes its scalar form's bits. */
typedef double presk_v2d __attribute__((vector_size(16)));
typedef double presk_v4d __attribute__((vector_size(32)));
typedef double presk_v8d __attribute__((vector_size(64)));
typedef float presk_v4f __attribute__((vector_size(16)));
typedef float presk_v8f __attribute__((vector_size(32)));
typedef float presk_v16f __attribute__((vector_size(64)));

#endif
// End of presk_rt.h.

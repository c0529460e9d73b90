/*
 * presk_data.h - the .psk.d container (a typed file of samples) in C11.
 *
 * The same reader and writer as presk/data/format.py; the byte layout is docs/data-format.md.
 * For the same content both write the same bytes. Little-endian, unaligned; every file ends
 * with an FNV-1a 64 checksum (presk_fnv1a64 of presk_rng.c) of every preceding byte, so
 * truncation and corruption are detected. No global state: every function is thread-safe
 * on distinct objects. Link with presk_rng.c.
 */
#ifndef PRESK_DATA_H
#define PRESK_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PRESK_DATA_VERSION 1u

/* Element types: the dtype code of a leaf, and the C type of its elements in data[i]. */
enum {
    PRESK_DT_F64 = 0,  /* double */
    PRESK_DT_F32 = 1,  /* float */
    PRESK_DT_BF16 = 2, /* uint16_t: the upper half of an f32 */
    PRESK_DT_I64 = 3   /* int64_t */
};

/* One tensor of a sample: its dtype, shape, and dotted path in the value (NUL-terminated
 * UTF-8; "w", "blocks.proj.w", "0", or "" for a lone tensor). dims is NULL when rank is 0. */
typedef struct {
    uint8_t dtype;
    uint32_t rank;
    uint64_t *dims;
    char *path;
} presk_leaf;

/* A whole file: the sample type as presk prints it, count samples of nleaves leaves.
 * data[i] holds leaf i of every sample, sample after sample, each row-major, in the host's
 * representation of the dtype (count x elements of leaf i); NULL when that is 0 elements. */
typedef struct {
    char *type;
    uint64_t count;
    uint32_t nleaves;
    presk_leaf *leaves;
    void **data; /* data[i]: count x elements of leaf i */
} presk_data;

/* Reads path into *out (which it owns afterwards; release with presk_data_free).
 * Returns 0 on success. On failure returns -1, leaves *out empty (all zero), and writes one
 * line naming the file and what is wrong into err (at most errlen bytes, NUL-terminated;
 * err may be NULL when errlen is 0). */
int presk_data_read(const char *path, presk_data *out, char *err, size_t errlen);

/* Writes *in to path atomically: the bytes go to a new file "PATH.tmp-XXXXXXXXXXXXXXXX"
 * beside it, which is then renamed over path, so a failed write leaves path untouched and
 * no temporary behind. Returns 0 on success, -1 with one line in err on failure (content
 * that cannot be stored, or an I/O error). C11 has no fsync: the data is flushed and closed,
 * not forced to the disk. The rename is atomic where rename(3) replaces atomically (POSIX). */
int presk_data_write(const char *path, const presk_data *in, char *err, size_t errlen);

/* Frees everything *d owns and zeroes it. Safe on a zeroed or already freed object. */
void presk_data_free(presk_data *d);

/* The bytes of one element of a dtype: 8, 4, 2 or 8; 0 for an unknown code. */
size_t presk_dtype_size(uint8_t dtype);

#ifdef __cplusplus
}
#endif

#endif /* PRESK_DATA_H */

/*
 * presk_data.c - the .psk.d reader and writer; see presk_data.h and docs/data-format.md.
 *
 * Mirrors presk/data/format.py check for check and in the same order, so that the two
 * accept the same files, and for the same content write the same bytes. Only <stdio.h>,
 * <stdlib.h>, <string.h> and <stdint.h>; no global state. The whole file is held in memory
 * (read once, checksummed once), which keeps every bounds check a comparison of sizes.
 */
#include "presk_data.h"

#include "presk_rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PD_MAX_RANK 31u
#define PD_MAX_SPAN UINT64_C(0x7FFFFFFFFFFFFFFF) /* 2^63 - 1 */
#define PD_MAX_U32 UINT64_C(0xFFFFFFFF)

/* Writes one line into err, when there is room for one. */
#define PD_ERR(...)                                                                            \
    do {                                                                                       \
        if (err != NULL && errlen > 0) {                                                       \
            snprintf(err, errlen, __VA_ARGS__);                                                \
        }                                                                                      \
    } while (0)

static const unsigned char PD_MAGIC[4] = {'P', 'S', 'K', 'D'};

size_t presk_dtype_size(uint8_t dtype) {
    switch (dtype) {
    case PRESK_DT_F64:
        return 8;
    case PRESK_DT_F32:
        return 4;
    case PRESK_DT_BF16:
        return 2;
    case PRESK_DT_I64:
        return 8;
    default:
        return 0;
    }
}

/* ---- little-endian words, whatever the host's byte order --------------------------------- */

static uint64_t pd_get(const unsigned char *p, size_t n) {
    uint64_t v = 0;
    for (size_t k = n; k > 0; k--) {
        v = (v << 8) | p[k - 1];
    }
    return v;
}

static void pd_put(unsigned char *p, uint64_t v, size_t n) {
    for (size_t k = 0; k < n; k++) {
        p[k] = (unsigned char)(v >> (8 * k));
    }
}

/* Element k of a host array of dtype as its bit pattern (the file's word before ordering). */
static uint64_t pd_bits(const void *base, uint8_t dtype, uint64_t k) {
    switch (dtype) {
    case PRESK_DT_F64: {
        uint64_t u;
        memcpy(&u, (const double *)base + k, 8);
        return u;
    }
    case PRESK_DT_F32: {
        uint32_t u;
        memcpy(&u, (const float *)base + k, 4);
        return u;
    }
    case PRESK_DT_BF16:
        return ((const uint16_t *)base)[k];
    default: {
        uint64_t u;
        memcpy(&u, (const int64_t *)base + k, 8);
        return u;
    }
    }
}

static void pd_set_bits(void *base, uint8_t dtype, uint64_t k, uint64_t bits) {
    switch (dtype) {
    case PRESK_DT_F64:
        memcpy((double *)base + k, &bits, 8);
        break;
    case PRESK_DT_F32: {
        uint32_t u = (uint32_t)bits;
        memcpy((float *)base + k, &u, 4);
        break;
    }
    case PRESK_DT_BF16:
        ((uint16_t *)base)[k] = (uint16_t)bits;
        break;
    default:
        memcpy((int64_t *)base + k, &bits, 8);
        break;
    }
}

/* ---- sizes -------------------------------------------------------------------------------- */

/* a * b into *out; 0 when it exceeds limit. */
static int pd_mul(uint64_t a, uint64_t b, uint64_t limit, uint64_t *out) {
    if (a != 0 && b > limit / a) {
        return 0;
    }
    *out = a * b;
    return *out <= limit;
}

/* The elements of one sample of a leaf; 0 on overflow of 2^63 (checked before by pd_span). */
static uint64_t pd_elements(const presk_leaf *leaf) {
    uint64_t n = 1;
    for (uint32_t a = 0; a < leaf->rank; a++) {
        if (!pd_mul(n, leaf->dims[a], PD_MAX_SPAN, &n)) {
            return 0;
        }
    }
    return n;
}

/* Whether count x prod(dims) x size, zeros taken as 1, is at most 2^63 - 1 (format.py span). */
static int pd_span_ok(uint64_t count, const presk_leaf *leaf) {
    uint64_t s = presk_dtype_size(leaf->dtype);
    if (!pd_mul(s, count ? count : 1, PD_MAX_SPAN, &s)) {
        return 0;
    }
    for (uint32_t a = 0; a < leaf->rank; a++) {
        if (!pd_mul(s, leaf->dims[a] ? leaf->dims[a] : 1, PD_MAX_SPAN, &s)) {
            return 0;
        }
    }
    return 1;
}

/* Strict UTF-8, as Python decodes it: no overlong forms, no surrogates, nothing past U+10FFFF.
 * A NUL is valid UTF-8; it is refused separately. */
static int pd_utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2, cp = c & 0x1Fu, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0Fu, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07u, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len) {
            return 0;
        }
        for (size_t k = 1; k < len; k++) {
            unsigned d = s[i + k];
            if ((d & 0xC0u) != 0x80u) {
                return 0;
            }
            cp = (cp << 6) | (d & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFFu || (cp >= 0xD800u && cp <= 0xDFFFu)) {
            return 0;
        }
        i += len;
    }
    return 1;
}

void presk_data_free(presk_data *d) {
    if (d == NULL) {
        return;
    }
    if (d->leaves != NULL) {
        for (uint32_t i = 0; i < d->nleaves; i++) {
            free(d->leaves[i].dims);
            free(d->leaves[i].path);
        }
    }
    if (d->data != NULL) {
        for (uint32_t i = 0; i < d->nleaves; i++) {
            free(d->data[i]);
        }
    }
    free(d->leaves);
    free(d->data);
    free(d->type);
    memset(d, 0, sizeof *d);
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct {
    const unsigned char *buf;
    size_t len;
    size_t pos;
    const char *path;
    char *err;
    size_t errlen;
} pd_cursor;

/* The next n header bytes, or NULL after reporting 'truncated header'. */
static const unsigned char *pd_take(pd_cursor *c, uint64_t n, const char *what) {
    char *err = c->err;
    size_t errlen = c->errlen;
    size_t left = c->len - c->pos;
    if (n > left) {
        PD_ERR("%s: truncated header: %s at byte %llu needs %llu bytes, %llu remain", c->path,
               what, (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)left);
        return NULL;
    }
    const unsigned char *p = c->buf + c->pos;
    c->pos += (size_t)n;
    return p;
}

static int pd_word(pd_cursor *c, size_t n, const char *what, uint64_t *out) {
    const unsigned char *p = pd_take(c, n, what);
    if (p == NULL) {
        return -1;
    }
    *out = pd_get(p, n);
    return 0;
}

/* A length-prefixed UTF-8 string of the header, as a new NUL-terminated copy. */
static char *pd_text(pd_cursor *c, const char *what) {
    char *err = c->err;
    size_t errlen = c->errlen;
    char lenwhat[96];
    uint64_t n;
    snprintf(lenwhat, sizeof lenwhat, "the length of %s", what);
    if (pd_word(c, 4, lenwhat, &n) != 0) {
        return NULL;
    }
    const unsigned char *p = pd_take(c, n, what);
    if (p == NULL) {
        return NULL;
    }
    if (!pd_utf8_ok(p, (size_t)n)) {
        PD_ERR("%s: %s is not valid UTF-8", c->path, what);
        return NULL;
    }
    if (memchr(p, 0, (size_t)n) != NULL) {
        PD_ERR("%s: %s contains a NUL byte", c->path, what);
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (s == NULL) {
        PD_ERR("%s: out of memory", c->path);
        return NULL;
    }
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    return s;
}

/* The whole file into a new buffer. */
static int pd_slurp(const char *path, unsigned char **buf, size_t *len, char *err,
                    size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        PD_ERR("%s: cannot read: cannot open the file", path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (;;) {
        if (b == NULL) {
            fclose(f);
            PD_ERR("%s: cannot read: out of memory", path);
            return -1;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) {
            if (ferror(f)) {
                free(b);
                fclose(f);
                PD_ERR("%s: cannot read: read error", path);
                return -1;
            }
            if (feof(f)) {
                break;
            }
            continue;
        }
        unsigned char *grown = cap <= ((size_t)-1) / 2 ? realloc(b, cap * 2) : NULL;
        if (grown == NULL) {
            free(b);
        }
        b = grown;
        cap *= 2;
    }
    fclose(f);
    *buf = b;
    *len = n;
    return 0;
}

static int pd_parse(pd_cursor *c, presk_data *out) {
    char *err = c->err;
    size_t errlen = c->errlen;
    const char *path = c->path;
    char what[96];
    uint64_t word;

    const unsigned char *magic = pd_take(c, 4, "the magic");
    if (magic == NULL) {
        return -1;
    }
    if (memcmp(magic, PD_MAGIC, 4) != 0) {
        PD_ERR("%s: not a .psk.d file (bad magic %02x%02x%02x%02x)", path, magic[0], magic[1],
               magic[2], magic[3]);
        return -1;
    }
    if (pd_word(c, 4, "the version", &word) != 0) {
        return -1;
    }
    if (word != PRESK_DATA_VERSION) {
        PD_ERR("%s: unsupported format version %llu (this presk reads %u)", path,
               (unsigned long long)word, PRESK_DATA_VERSION);
        return -1;
    }
    out->type = pd_text(c, "the type");
    if (out->type == NULL) {
        return -1;
    }
    if (pd_word(c, 8, "the sample count", &out->count) != 0) {
        return -1;
    }
    if (out->count > PD_MAX_SPAN) {
        PD_ERR("%s: the sample count %llu is 2^63 or more", path, (unsigned long long)out->count);
        return -1;
    }
    if (pd_word(c, 4, "the leaf count", &word) != 0) {
        return -1;
    }
    uint32_t nleaves = (uint32_t)word;
    /* A leaf takes at least 9 header bytes, so a corrupt count of 4 billion allocates only
     * what the file could hold before the header runs out. */
    size_t room = (c->len - c->pos) / 9 + 1;
    size_t cap = nleaves < room ? nleaves : room;
    out->leaves = calloc(cap ? cap : 1, sizeof *out->leaves);
    if (out->leaves == NULL) {
        PD_ERR("%s: out of memory", path);
        return -1;
    }
    for (uint32_t i = 0; i < nleaves; i++) {
        presk_leaf *leaf = &out->leaves[i];
        snprintf(what, sizeof what, "leaf %lu's dtype", (unsigned long)i);
        if (pd_word(c, 1, what, &word) != 0) {
            return -1;
        }
        out->nleaves = i + 1; /* from here on presk_data_free releases leaf i */
        if (word > PRESK_DT_I64) {
            PD_ERR("%s: leaf %lu has an unknown dtype code %llu", path, (unsigned long)i,
                   (unsigned long long)word);
            return -1;
        }
        leaf->dtype = (uint8_t)word;
        snprintf(what, sizeof what, "leaf %lu's rank", (unsigned long)i);
        if (pd_word(c, 4, what, &word) != 0) {
            return -1;
        }
        if (word > PD_MAX_RANK) {
            PD_ERR("%s: leaf %lu has rank %llu, more than %u", path, (unsigned long)i,
                   (unsigned long long)word, PD_MAX_RANK);
            return -1;
        }
        leaf->rank = (uint32_t)word;
        if (leaf->rank > 0) {
            leaf->dims = malloc(leaf->rank * sizeof *leaf->dims);
            if (leaf->dims == NULL) {
                PD_ERR("%s: out of memory", path);
                return -1;
            }
        }
        snprintf(what, sizeof what, "leaf %lu's dims", (unsigned long)i);
        for (uint32_t a = 0; a < leaf->rank; a++) {
            if (pd_word(c, 8, what, &leaf->dims[a]) != 0) {
                return -1;
            }
        }
        if (!pd_span_ok(out->count, leaf)) {
            PD_ERR("%s: leaf %lu spans more than 2^63 bytes", path, (unsigned long)i);
            return -1;
        }
        snprintf(what, sizeof what, "leaf %lu's path", (unsigned long)i);
        leaf->path = pd_text(c, what);
        if (leaf->path == NULL) {
            return -1;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(out->leaves[j].path, leaf->path) == 0) {
                PD_ERR("%s: two leaves have the path `%s`", path, leaf->path);
                return -1;
            }
        }
    }

    /* Every span is below 2^63, so each leaf's bytes per sample are too; only the sum over
     * leaves and the product with the count can overflow, and then the file is too short. */
    uint64_t sample_bytes = 0, data_bytes = 0;
    int sum_fits = 1;
    for (uint32_t i = 0; i < nleaves && sum_fits; i++) {
        uint64_t b = pd_elements(&out->leaves[i]) * presk_dtype_size(out->leaves[i].dtype);
        sum_fits = b <= UINT64_MAX - sample_bytes;
        sample_bytes += sum_fits ? b : 0;
    }
    int fits = out->count == 0 ||
               (sum_fits && pd_mul(sample_bytes, out->count, UINT64_MAX - 8, &data_bytes));
    uint64_t have = c->len - c->pos;
    if (!fits) {
        PD_ERR("%s: truncated data: the samples need more than 2^64 bytes, %llu remain", path,
               (unsigned long long)have);
        return -1;
    }
    if (have < data_bytes + 8) {
        PD_ERR("%s: truncated data: the samples and the checksum need %llu bytes after the "
               "header, %llu remain",
               path, (unsigned long long)(data_bytes + 8), (unsigned long long)have);
        return -1;
    }
    if (have > data_bytes + 8) {
        PD_ERR("%s: %llu trailing bytes after the checksum", path,
               (unsigned long long)(have - data_bytes - 8));
        return -1;
    }
    uint64_t stored = pd_get(c->buf + c->len - 8, 8);
    uint64_t computed = presk_fnv1a64(c->buf, c->len - 8);
    if (stored != computed) {
        PD_ERR("%s: checksum mismatch (stored %016llx, computed %016llx): the file is corrupt",
               path, (unsigned long long)stored, (unsigned long long)computed);
        return -1;
    }

    /* The data is in memory, so every size below fits size_t. */
    out->data = calloc(nleaves ? nleaves : 1, sizeof *out->data);
    if (out->data == NULL) {
        PD_ERR("%s: out of memory", path);
        return -1;
    }
    for (uint32_t i = 0; i < nleaves; i++) {
        size_t bytes = (size_t)(out->count * pd_elements(&out->leaves[i])) *
                       presk_dtype_size(out->leaves[i].dtype);
        if (bytes > 0 && (out->data[i] = malloc(bytes)) == NULL) {
            PD_ERR("%s: out of memory", path);
            return -1;
        }
    }
    /* The file interleaves the leaves sample by sample; data[i] holds leaf i contiguously. */
    const unsigned char *p = c->buf + c->pos;
    for (uint64_t s = 0; s < out->count && sample_bytes > 0; s++) {
        for (uint32_t i = 0; i < nleaves; i++) {
            const presk_leaf *leaf = &out->leaves[i];
            uint64_t n = pd_elements(leaf);
            size_t size = presk_dtype_size(leaf->dtype);
            for (uint64_t k = 0; k < n; k++, p += size) {
                pd_set_bits(out->data[i], leaf->dtype, s * n + k, pd_get(p, size));
            }
        }
    }
    return 0;
}

int presk_data_read(const char *path, presk_data *out, char *err, size_t errlen) {
    if (out == NULL || path == NULL) {
        PD_ERR("presk_data_read: no path or no output");
        return -1;
    }
    memset(out, 0, sizeof *out);
    unsigned char *buf = NULL;
    size_t len = 0;
    if (pd_slurp(path, &buf, &len, err, errlen) != 0) {
        return -1;
    }
    pd_cursor c = {buf, len, 0, path, err, errlen};
    int rc = pd_parse(&c, out);
    free(buf);
    if (rc != 0) {
        presk_data_free(out);
    }
    return rc;
}

/* ---- writing ------------------------------------------------------------------------------ */

/* Checks *in as format.py's DataFile.validate does; fills the bytes per sample. */
static int pd_validate(const char *path, const presk_data *in, uint64_t *sample_bytes,
                       char *err, size_t errlen) {
    if (in->type == NULL || (in->nleaves > 0 && in->leaves == NULL)) {
        PD_ERR("%s: cannot write: missing type or leaves", path);
        return -1;
    }
    if (!pd_utf8_ok((const unsigned char *)in->type, strlen(in->type)) ||
        strlen(in->type) > PD_MAX_U32) {
        PD_ERR("%s: cannot write: the type is not UTF-8 of at most 2^32 - 1 bytes", path);
        return -1;
    }
    if (in->count > PD_MAX_SPAN) {
        PD_ERR("%s: cannot write: the sample count is 2^63 or more", path);
        return -1;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < in->nleaves; i++) {
        const presk_leaf *leaf = &in->leaves[i];
        const char *lp = leaf->path != NULL ? leaf->path : "";
        if (presk_dtype_size(leaf->dtype) == 0 || leaf->rank > PD_MAX_RANK ||
            (leaf->rank > 0 && leaf->dims == NULL) || leaf->path == NULL) {
            PD_ERR("%s: cannot write: leaf %lu (`%s`) has a bad dtype, rank, dims or path", path,
                   (unsigned long)i, lp);
            return -1;
        }
        if (!pd_utf8_ok((const unsigned char *)lp, strlen(lp)) || strlen(lp) > PD_MAX_U32) {
            PD_ERR("%s: cannot write: leaf %lu's path is not valid UTF-8", path, (unsigned long)i);
            return -1;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (in->leaves[j].path != NULL && strcmp(in->leaves[j].path, lp) == 0) {
                PD_ERR("%s: cannot write: two leaves have the path `%s`", path, lp);
                return -1;
            }
        }
        if (!pd_span_ok(in->count, leaf)) {
            PD_ERR("%s: cannot write: leaf %lu spans more than 2^63 bytes", path,
                   (unsigned long)i);
            return -1;
        }
        uint64_t b = pd_elements(leaf) * presk_dtype_size(leaf->dtype);
        if (b > UINT64_MAX - total) {
            PD_ERR("%s: cannot write: a sample has more than 2^64 bytes", path);
            return -1;
        }
        total += b;
        if (b > 0 && in->count > 0 && (in->data == NULL || in->data[i] == NULL)) {
            PD_ERR("%s: cannot write: leaf %lu has no data", path, (unsigned long)i);
            return -1;
        }
    }
    *sample_bytes = total;
    return 0;
}

/* The whole file's bytes in a new buffer. */
static unsigned char *pd_encode(const char *path, const presk_data *in, size_t *len, char *err,
                                size_t errlen) {
    uint64_t sample_bytes;
    if (pd_validate(path, in, &sample_bytes, err, errlen) != 0) {
        return NULL;
    }
    /* Header size: magic, version, type, count, leaf count, then each leaf. */
    uint64_t n = 4 + 4 + 4 + strlen(in->type) + 8 + 4, data = 0;
    for (uint32_t i = 0; i < in->nleaves; i++) {
        n += 1 + 4 + 8 * (uint64_t)in->leaves[i].rank + 4 + strlen(in->leaves[i].path);
    }
    if (!pd_mul(sample_bytes, in->count, UINT64_MAX - n - 8, &data) ||
        n + data + 8 > (uint64_t)((size_t)-1)) {
        PD_ERR("%s: cannot write: the file would not fit in memory", path);
        return NULL;
    }
    size_t total = (size_t)(n + data + 8);
    unsigned char *buf = malloc(total), *p = buf;
    if (buf == NULL) {
        PD_ERR("%s: cannot write: out of memory", path);
        return NULL;
    }
    memcpy(p, PD_MAGIC, 4), p += 4;
    pd_put(p, PRESK_DATA_VERSION, 4), p += 4;
    size_t tl = strlen(in->type);
    pd_put(p, tl, 4), p += 4;
    memcpy(p, in->type, tl), p += tl;
    pd_put(p, in->count, 8), p += 8;
    pd_put(p, in->nleaves, 4), p += 4;
    for (uint32_t i = 0; i < in->nleaves; i++) {
        const presk_leaf *leaf = &in->leaves[i];
        *p++ = leaf->dtype;
        pd_put(p, leaf->rank, 4), p += 4;
        for (uint32_t a = 0; a < leaf->rank; a++) {
            pd_put(p, leaf->dims[a], 8), p += 8;
        }
        size_t pl = strlen(leaf->path);
        pd_put(p, pl, 4), p += 4;
        memcpy(p, leaf->path, pl), p += pl;
    }
    for (uint64_t s = 0; s < in->count && sample_bytes > 0; s++) {
        for (uint32_t i = 0; i < in->nleaves; i++) {
            const presk_leaf *leaf = &in->leaves[i];
            uint64_t e = pd_elements(leaf);
            size_t size = presk_dtype_size(leaf->dtype);
            for (uint64_t k = 0; k < e; k++, p += size) {
                pd_put(p, pd_bits(in->data[i], leaf->dtype, s * e + k), size);
            }
        }
    }
    pd_put(p, presk_fnv1a64(buf, total - 8), 8);
    *len = total;
    return buf;
}

int presk_data_write(const char *path, const presk_data *in, char *err, size_t errlen) {
    if (path == NULL || in == NULL) {
        PD_ERR("presk_data_write: no path or no input");
        return -1;
    }
    size_t len = 0;
    unsigned char *buf = pd_encode(path, in, &len, err, errlen);
    if (buf == NULL) {
        return -1;
    }
    /* "PATH.tmp-" and 16 hex digits, created exclusively ("wbx", C11) so that a name taken by
     * someone else is never overwritten; the digits mix the content's checksum, the address
     * of this frame and the attempt, then the next attempt tries another name. */
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 9 + 16 + 1);
    FILE *f = NULL;
    if (tmp == NULL) {
        free(buf);
        PD_ERR("%s: cannot write: out of memory", path);
        return -1;
    }
    uint64_t seed = pd_get(buf + len - 8, 8) ^ (uint64_t)(uintptr_t)&seed;
    for (unsigned attempt = 0; attempt < 64 && f == NULL; attempt++) {
        uint64_t mix[2] = {seed, attempt};
        snprintf(tmp, pl + 9 + 16 + 1, "%s.tmp-%016llx", path,
                 (unsigned long long)presk_fnv1a64(mix, sizeof mix));
        f = fopen(tmp, "wbx");
    }
    if (f == NULL) {
        free(buf);
        free(tmp);
        PD_ERR("%s: cannot write: cannot create a temporary file beside it", path);
        return -1;
    }
    int ok = fwrite(buf, 1, len, f) == len;
    ok = fflush(f) == 0 && ok;
    ok = fclose(f) == 0 && ok;
    free(buf);
    if (!ok) {
        remove(tmp);
        free(tmp);
        PD_ERR("%s: cannot write: write error", path);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        free(tmp);
        PD_ERR("%s: cannot write: cannot rename the temporary file over it", path);
        return -1;
    }
    free(tmp);
    return 0;
}

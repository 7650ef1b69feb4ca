/*
 * lz4.c: the LZ4 frame decoder (the frame format of lz4_Frame_format.md, the block format of
 * lz4.c LZ4_decompress_generic). No state: it runs without the GIL.
 *
 * Kafka's lz4 records area is one LZ4 frame (lz4_Frame_format.md; KafkaLZ4BlockOutputStream):
 *    0 magic      uint32 LE 0x184D2204
 *    4 FLG        version (bits 7-6) = 01 | block independence (5) | block checksum (4)
 *                 | content size (3) | content checksum (2) | reserved (1) = 0 | dict id (0)
 *    5 BD         reserved (7) = 0 | block max size id (6-4): 4..7 = 64 KiB..4 MiB | reserved (3-0) = 0
 *    6 [content size uint64 LE]  [dict id uint32 LE]
 *      HC         (xxh32(FLG .. last descriptor byte) >> 8) & 0xFF
 *    then blocks: size uint32 LE (bit 31: stored as is; 0: the end mark), its bytes,
 *    [xxh32 of its bytes, LE]; after the end mark [xxh32 of the content, LE].
 *
 * The kernel decodes a frame into a scratch buffer the builder reuses from batch to batch (hot in
 * cache, no Python object, no copy), and only a frame it is sure of: every rule below is the
 * reference decoder's (lz4.c LZ4_decompress_generic in safe mode, lz4frame.c LZ4F_decodeHeader),
 * or stricter. Anything else - a dictionary id, trailing bytes, a block near its size limit - it
 * declines, and the Python codec decides, accepting or raising its CompressionError as before. So
 * what the kernel accepts is decoded exactly as python-lz4 (and lz4-java) decode it.
 */
#include "kernel.h"

#define LZ4_FRAME_MAGIC 0x184D2204u
#define LZ4_FLG_VERSION_MASK 0xC0
#define LZ4_FLG_VERSION_01 0x40
#define LZ4_FLG_INDEPENDENT 0x20
#define LZ4_FLG_BLOCK_CHECKSUM 0x10
#define LZ4_FLG_CONTENT_SIZE 0x08
#define LZ4_FLG_CONTENT_CHECKSUM 0x04
#define LZ4_FLG_RESERVED 0x02
#define LZ4_FLG_DICT_ID 0x01
#define LZ4_BLOCK_STORED 0x80000000u
#define LZ4_MAX_OFFSET 65535
#define LZ4_MIN_MATCH 4
#define LZ4_RUN_MASK 15
#define LZ4_LAST_LITERALS 5 /* the last 5 bytes of a block are literals */
#define LZ4_MFLIMIT 12      /* the last match starts 12 bytes before the end at the latest */
#define LZ4_SLACK 32        /* scratch bytes past a block's room: wild copies may overrun into them */
#define LZ4_MAX_CONTENT ((Py_ssize_t)1 << 30) /* MAX_DECOMPRESSED_BYTES of compression.py */


/* xxHash32 (xxhash.h XXH32), for the frame's header, block and content checksums. */
#define XXH_P1 2654435761u
#define XXH_P2 2246822519u
#define XXH_P3 3266489917u
#define XXH_P4 668265263u
#define XXH_P5 374761393u
static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
static inline uint32_t xxh_round(uint32_t acc, uint32_t lane) { return rotl32(acc + lane * XXH_P2, 13) * XXH_P1; }

static uint32_t xxh32(const uint8_t *p, size_t n, uint32_t seed) {
    const uint8_t *end = p + n;
    uint32_t h;
    if (n >= 16) {
        uint32_t v1 = seed + XXH_P1 + XXH_P2, v2 = seed + XXH_P2, v3 = seed, v4 = seed - XXH_P1;
        const uint8_t *limit = end - 16;
        do {
            v1 = xxh_round(v1, le32(p));
            v2 = xxh_round(v2, le32(p + 4));
            v3 = xxh_round(v3, le32(p + 8));
            v4 = xxh_round(v4, le32(p + 12));
            p += 16;
        } while (p <= limit);
        h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18);
    } else {
        h = seed + XXH_P5;
    }
    h += (uint32_t)n;
    while (p + 4 <= end) { h = rotl32(h + le32(p) * XXH_P3, 17) * XXH_P4; p += 4; }
    while (p < end) { h = rotl32(h + (*p++) * XXH_P5, 11) * XXH_P1; }
    h ^= h >> 15;
    h *= XXH_P2;
    h ^= h >> 13;
    h *= XXH_P3;
    h ^= h >> 16;
    return h;
}

/* A sequence length's extension bytes (255 each until one is smaller), as read_variable_length
 * reads them: past `limit` after any byte, the block is refused. The caller knows *ip < limit. */
static inline int lz4_length(const uint8_t **ip, const uint8_t *limit, size_t *len) {
    unsigned b;
    do {
        b = *(*ip)++;
        *len += b;
        if (*ip > limit) return -1;
    } while (b == 255);
    return 0;
}

/* Decodes one LZ4 block [ip, iend) to op, whose room ends at oend (the block's maximum size; the
 * buffer has LZ4_SLACK writable bytes past it). Matches reach back to `low` at most. Returns the
 * end of the output, or NULL where the block breaks a rule (the caller declines the frame). */
static uint8_t *lz4_block(const uint8_t *ip, const uint8_t *iend, uint8_t *op, uint8_t *oend, const uint8_t *low) {
    if (ip >= iend) return NULL;
    for (;;) {
        /* The common sequence, far from both ends (no end rule can apply): literals and match
         * shorter than 15, an offset of 8 or more inside the output. Copies of a fixed size. */
        while (iend - ip >= 32 && oend - op >= 64) {
            unsigned t = ip[0];
            size_t l = t >> 4, len = t & 15;
            if (l == LZ4_RUN_MASK || len == LZ4_RUN_MASK) break;
            size_t o = (size_t)ip[1 + l] | ((size_t)ip[2 + l] << 8);
            if (o < 8 || o > (size_t)(op + l - low)) break;
            memcpy(op, ip + 1, 16);
            op += l;
            ip += 3 + l;
            const uint8_t *m = op - o;
            memcpy(op, m, 8);
            memcpy(op + 8, m + 8, 8);
            memcpy(op + 16, m + 16, 2);
            op += len + LZ4_MIN_MATCH;
        }
        /* any other sequence, with every rule checked */
        unsigned token = *ip++;
        size_t lit = token >> 4;
        if (lit == LZ4_RUN_MASK) {
            if (iend - ip <= LZ4_RUN_MASK || lz4_length(&ip, iend - LZ4_RUN_MASK, &lit) < 0) return NULL;
        }
        if (lit > (size_t)(iend - ip)) return NULL;
        if (lit > (size_t)(oend - op) || (size_t)(oend - op) - lit < LZ4_MFLIMIT ||
            (size_t)(iend - ip) - lit < 2 + 1 + LZ4_LAST_LITERALS) {
            /* near an end: this must be the last sequence, its literals ending the input exactly */
            if (lit != (size_t)(iend - ip) || lit > (size_t)(oend - op)) return NULL;
            memcpy(op, ip, lit);
            return op + lit;
        }
        if ((size_t)(iend - ip) >= lit + 16) { /* whole 16-byte copies; the slack takes the overrun */
            for (size_t i = 0; i < lit; i += 16) memcpy(op + i, ip + i, 16);
        } else {
            memcpy(op, ip, lit);
        }
        ip += lit;
        op += lit;
        size_t off = (size_t)ip[0] | ((size_t)ip[1] << 8);
        ip += 2;
        if (off == 0 || off > (size_t)(op - low)) return NULL;
        size_t ml = token & 15;
        if (ml == LZ4_RUN_MASK && lz4_length(&ip, iend - LZ4_LAST_LITERALS, &ml) < 0) return NULL;
        ml += LZ4_MIN_MATCH;
        if (ml > (size_t)(oend - op) || (size_t)(oend - op) - ml < LZ4_LAST_LITERALS) return NULL;
        const uint8_t *m = op - off;
        uint8_t *cend = op + ml;
        if (off >= 16) {
            do { memcpy(op, m, 16); op += 16; m += 16; } while (op < cend);
        } else if (off >= 8) {
            do { memcpy(op, m, 8); op += 8; m += 8; } while (op < cend);
        } else {
            /* a period shorter than 8: lay out 8 bytes one at a time, then copy 8 at a time from a
             * whole number of periods back (at least 8 bytes back, so no copy overlaps itself) */
            size_t head = ml < 8 ? ml : 8;
            for (size_t i = 0; i < head; i++) op[i] = m[i];
            size_t back = off * ((8 + off - 1) / off);
            for (uint8_t *q = op + head; q < cend; q += 8) memcpy(q, q - back, 8);
        }
        op = cend;
        if (ip >= iend) return NULL; /* a block ends with literals */
    }
}

/* kernel.h */
int lz4_frame(Buf *out, const uint8_t *p, Py_ssize_t n) {
    const uint8_t *end = p + n;
    out->len = 0;
    if (n < 7 || le32(p) != LZ4_FRAME_MAGIC) return 1;
    uint8_t flg = p[4], bd = p[5];
    if ((flg & LZ4_FLG_VERSION_MASK) != LZ4_FLG_VERSION_01 || (flg & (LZ4_FLG_RESERVED | LZ4_FLG_DICT_ID))) return 1;
    int size_id = (bd >> 4) & 7;
    if ((bd & 0x8F) || size_id < 4) return 1;
    Py_ssize_t block_max = (Py_ssize_t)1 << (8 + 2 * size_id);
    Py_ssize_t desc = 2 + ((flg & LZ4_FLG_CONTENT_SIZE) ? 8 : 0);
    if (n < 4 + desc + 1) return 1;
    if (((xxh32(p + 4, (size_t)desc, 0) >> 8) & 0xFF) != p[4 + desc]) return 1;
    uint64_t content_size = (flg & LZ4_FLG_CONTENT_SIZE) ? ((uint64_t)le32(p + 10) << 32 | le32(p + 6)) : 0;
    const uint8_t *ip = p + 4 + desc + 1;
    int independent = (flg & LZ4_FLG_INDEPENDENT) != 0, block_sums = (flg & LZ4_FLG_BLOCK_CHECKSUM) != 0;
    for (;;) {
        if (end - ip < 4) return 1;
        uint32_t word = le32(ip);
        ip += 4;
        if (word == 0) break;
        Py_ssize_t size = (Py_ssize_t)(word & ~LZ4_BLOCK_STORED);
        if (size > block_max || size > end - ip || (block_sums && end - ip - size < 4)) return 1;
        if (block_sums && xxh32(ip, (size_t)size, 0) != le32(ip + size)) return 1;
        if (out->len + block_max > LZ4_MAX_CONTENT) return 1;
        if (buf_reserve(out, block_max + LZ4_SLACK) < 0) return -1;
        uint8_t *op = out->data + out->len;
        if (word & LZ4_BLOCK_STORED) {
            memcpy(op, ip, (size_t)size);
            op += size;
        } else {
            op = lz4_block(ip, ip + size, op, op + block_max, independent ? op : out->data);
            if (!op) return 1;
        }
        out->len = op - out->data;
        ip += size + (block_sums ? 4 : 0);
    }
    if (flg & LZ4_FLG_CONTENT_CHECKSUM) {
        if (end - ip < 4 || xxh32(out->data, (size_t)out->len, 0) != le32(ip)) return 1;
        ip += 4;
    }
    if (ip != end) return 1;
    if ((flg & LZ4_FLG_CONTENT_SIZE) && content_size != (uint64_t)out->len) return 1;
    return 0;
}

/* lz4_frame_decompress(data) -> bytes | None: the kernel's decoding of one LZ4 frame, or None where
 * it declines (then the Python codec decides). For the tests that compare it with python-lz4. */
PyObject *kernel_lz4_frame_decompress(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Buf out = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = lz4_frame(&out, (const uint8_t *)view.buf, view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (rc == 0) result = PyBytes_FromStringAndSize((const char *)out.data, out.len);
    else if (rc == 1) result = Py_NewRef(Py_None);
    else kerr_raise("lz4_frame_decompress");
    buf_free(&out);
    return result;
}

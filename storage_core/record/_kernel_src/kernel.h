/*
 * kernel.h: what the units of storage_core.record._kernel share - the v2 batch layout and its
 * constants, the growable buffer, the kernel's error state and the functions one unit calls in
 * another. Each unit's opening comment names what it owns and the Kafka source it follows:
 *
 *   module.c      the module: its functions table, its types, its constants
 *   buf.c         growable buffers, their mapping pool, OwnedBuffer, the error state
 *   crc32c.c      CRC-32C (Crc32C.java)
 *   lz4.c         the LZ4 frame codec (KafkaLZ4BlockOutputStream / lz4-java's frame decoder)
 *   decode.c      the v2 batch walk and the record decode into Arrow buffers (DefaultRecordBatch,
 *                 DefaultRecord.readFrom)
 *   txn_filter.c  the read_committed filter (the consumer's CompletedFetch)
 *   encode.c      the v2 encoder (MemoryRecordsBuilder, DefaultRecord.writeTo) and murmur2
 *   md5.c         MD5, the key hash of the cleaner's offset map
 *   cleaner.c     the cleaner's offset map and recopy (SkimpyOffsetMap, LogCleaner, filterTo)
 *
 * The GIL. The loops over bytes (the batch walk with its CRC and lz4, the encoder's batch writer,
 * the cleaner's map and recopy) run with the GIL released. Code that may run so never touches a
 * Python object and never raises: it records what went wrong in the calling thread's error state
 * (kerr_* below, thread-local) and returns -1; the Python-facing function that called it raises
 * that error once it holds the GIL again (kerr_raise). The state such a loop writes is the
 * object it was called on (a RecordsBuilder, a TxnFilter, an OffsetMap: each marked busy for the
 * call, so that a second thread gets an error instead of a race; see kobj_enter), the buffers it
 * allocates and the mapping pool of buf.c (the one state shared between threads, under a mutex).
 * Buffers of Python objects are held (PyObject_GetBuffer) for the whole call, so their memory
 * cannot move or go while the GIL is released.
 */
#ifndef KLOG_KERNEL_H
#define KLOG_KERNEL_H

#define _GNU_SOURCE /* mremap */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A hot helper inlined whatever the compiler's own estimate (read_record in decode_area). */
#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* ---------------------------------------------------------------- limits */

#define INT32_LIMIT 2147483647
/* The largest |timestamp| in milliseconds whose microseconds fit an int64 (Arrow timestamp[us]). */
#define MAX_MS (INT64_MAX / 1000)

/* ---------------------------------------------------------------- the v2 batch */

/* The v2 batch header (DefaultRecordBatch.java), big-endian:
 *   0 baseOffset int64 | 8 length int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
 *  17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64
 *  35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
 *  57 recordsCount int32 | 61 records */
#define V2_HEADER_BYTES 61
#define V2_LOG_OVERHEAD 12
#define V2_CRC_FROM 21
#define ATTR_CODEC_MASK 0x07
#define ATTR_LOG_APPEND_TIME 0x08
#define ATTR_TRANSACTIONAL 0x10
#define ATTR_CONTROL 0x20
#define ATTR_DELETE_HORIZON 0x40
#define CODEC_LZ4 3
/* A batch's size must fit batchLength (int32, counting from byte 12). */
#define MAX_RECORDS_AREA (INT32_LIMIT - V2_HEADER_BYTES)

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }
/* A little-endian uint32 (any host; compilers make it one load where they can). */
static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Where the batch at data[pos] stands (every walk over batches asks here): V2_WHOLE, a v2 batch
 * whose `total` bytes (LOG_OVERHEAD included) are all in data; V2_SHORT, fewer bytes left than it
 * needs (read more, or a partial tail); V2_OTHER, not a v2 batch or a size below a v2 header's. */
enum { V2_WHOLE = 0, V2_SHORT = 1, V2_OTHER = 2 };
static inline int v2_batch_at(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t *total) {
    Py_ssize_t rem = len - pos;
    if (rem < V2_HEADER_BYTES) return rem < 17 || data[pos + 16] == 2 ? V2_SHORT : V2_OTHER;
    const uint8_t *b = data + pos;
    int32_t size = (int32_t)be32(b + 8);
    if (b[16] != 2 || size < V2_HEADER_BYTES - V2_LOG_OVERHEAD) return V2_OTHER;
    *total = (Py_ssize_t)size + V2_LOG_OVERHEAD;
    return *total > rem ? V2_SHORT : V2_WHOLE;
}

/* Why add_v2_run stopped: the Python side acts on the batch at the stop position. */
enum {
    RUN_END = 0,        /* every byte consumed */
    RUN_SHORT = 1,      /* fewer bytes left than the next batch needs (read more, or a partial tail) */
    RUN_SLOW_PATH = 2,  /* the next batch needs the object path: not v2, a bad header, a CRC mismatch,
                         * an unknown codec or none given, or records the kernel refused */
    RUN_FULL = 3,       /* the builder holds max_bytes: finish() it, then go on from here */
};

/* Why map_run and clean_run stopped: the Python side acts on the batch at the stop position. */
enum {
    CLEAN_END = 0,    /* every byte consumed */
    CLEAN_SHORT = 1,  /* fewer bytes left than the next batch needs (read more, or a partial tail) */
    CLEAN_BATCH = 2,  /* the next batch goes through Python: not v2, a bad header, a codec, a control or
                       * transactional batch, one of the `stops`, records the kernel refused */
    CLEAN_FULL = 3,   /* map_run: the map filled in the batch at the stop position */
    CLEAN_LIMIT = 4,  /* map_run: the batch at the stop position starts at or past `end` */
};

/* TxnFilter step verdicts. */
enum { TXN_SKIP = 0, TXN_ADMIT = 1, TXN_MISSING_ENTRY = 2 };

/* Calls on fewer bytes than this keep the GIL: letting it go and taking it back costs more. */
#define GIL_FREE_MIN_BYTES (64 * 1024)

/* ---------------------------------------------------------------- errors (buf.c) */

extern PyObject *InvalidRecordError; /* storage_core.errors.InvalidRecordError */
extern PyObject *KlogError;          /* storage_core.errors.KlogError */

typedef enum {
    KERR_NONE = 0,
    KERR_PYTHON,   /* a Python exception is set (only where the GIL is held) */
    KERR_INVALID,  /* InvalidRecordError */
    KERR_NOMEM,    /* MemoryError */
    KERR_OVERFLOW, /* OverflowError */
    KERR_VALUE,    /* ValueError */
    KERR_KLOG,     /* KlogError */
} KerrKind;

/* Record an error in the calling thread's error state; each returns -1. Safe without the GIL. */
int kerr_invalid(const char *fmt, ...);
int kerr_klog(const char *fmt, ...);
int kerr_nomem(void);
int kerr_overflow(const char *msg);
int kerr_value(const char *msg);
/* The kind of the thread's recorded error (KERR_NONE if none), and forgetting it. */
KerrKind kerr_kind(void);
void kerr_clear(void);
/* Raise the recorded error as its Python exception (GIL held) and forget it; returns NULL. An
 * exception already set wins; neither gives a SystemError naming the call. */
PyObject *kerr_raise(const char *where);

/* An object whose state a call works on with the GIL released is marked busy for the call; a
 * second call in the meantime (another thread) gets RuntimeError. GIL held. 0, or -1 raised. */
int kobj_enter(int *busy, const char *what);
/* GIL held: 0 if the object is not busy, else -1 with RuntimeError (for calls that only read it). */
int kobj_idle(int busy, const char *what);
static inline void kobj_leave(int *busy) { *busy = 0; }

/* ---------------------------------------------------------------- growable buffer (buf.c) */

typedef struct {
    uint8_t *data;
    Py_ssize_t len;
    Py_ssize_t cap;
    int mapped; /* data is an mmap of cap bytes, not a malloc */
} Buf;

/* Make room for `need` bytes; 0, or -1 with KERR_NOMEM. Without the GIL too. */
int buf_grow(Buf *b, Py_ssize_t need);
void buf_free(Buf *b);
void mem_free(uint8_t *data, Py_ssize_t cap, int mapped);
/* Move a Buf into a new OwnedBuffer (GIL held); the Buf is left empty. NULL with an exception. */
PyObject *take_buffer(Buf *b);

static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    return buf_grow(b, b->len + extra);
}

static inline int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    if (n) memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static inline int buf_i64(Buf *b, int64_t v) { return buf_put(b, &v, 8); }
static inline int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, 4); }

static inline int bit_set(Buf *b, Py_ssize_t i, int valid) {
    Py_ssize_t need = (i >> 3) + 1;
    if (need > b->len) {
        if (buf_reserve(b, need - b->len) < 0) return -1;
        memset(b->data + b->len, 0, (size_t)(need - b->len)); /* only bitmap bytes are zeroed */
        b->len = need;
    }
    if (valid) b->data[i >> 3] |= (uint8_t)(1u << (i & 7));
    return 0;
}

/* ---------------------------------------------------------------- varints and their writers */

static inline int uleb_size(uint64_t v) { int k = 1; while (v > 0x7f) { v >>= 7; k++; } return k; }
static inline uint64_t zz32(int32_t v) { return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31)); }
static inline uint64_t zz64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline uint8_t *w_uleb(uint8_t *w, uint64_t v) {
    while (v > 0x7f) { *w++ = (uint8_t)((v & 0x7f) | 0x80); v >>= 7; }
    *w++ = (uint8_t)v;
    return w;
}

/* ---------------------------------------------------------------- functions of one unit used by another */

/* crc32c.c */
void crc32c_init(void);
uint32_t crc32c(const uint8_t *p, size_t n);
PyObject *kernel_crc32c(PyObject *self, PyObject *args);

/* lz4.c: decode the LZ4 frame [p, p + n) into out (reset first). 0: decoded; 1: declined (nothing
 * recorded); -1: KERR_NOMEM. Without the GIL too. */
int lz4_frame(Buf *out, const uint8_t *p, Py_ssize_t n);
PyObject *kernel_lz4_frame_decompress(PyObject *self, PyObject *arg);

/* txn_filter.c */
typedef struct TxnFilter TxnFilter;
extern PyTypeObject TxnFilterType;
int txn_enter(TxnFilter *f);
void txn_leave(TxnFilter *f);
int txn_advance(TxnFilter *f, int64_t last_offset);
int txn_step(TxnFilter *f, int control, int transactional, int64_t pid, int64_t last_offset, int abort_marker);

/* decode.c */
extern PyTypeObject RecordsBuilderType;

/* encode.c */
void write_v2_header(uint8_t *h, Py_ssize_t total, int64_t base_offset, int32_t leader_epoch, uint16_t attributes,
                     int32_t last_offset_delta, int64_t base_ts, int64_t max_ts, int64_t producer_id,
                     int16_t producer_epoch, int32_t base_sequence, int32_t count);
PyObject *kernel_encode_v2(PyObject *self, PyObject *args);
PyObject *kernel_encode_v2_batches(PyObject *self, PyObject *args);
PyObject *kernel_encode_v2_rows(PyObject *self, PyObject *args);
PyObject *kernel_murmur2(PyObject *self, PyObject *args);

/* md5.c */
#define MD5_ONE_BLOCK 56 /* a message of fewer bytes fits one padded block */
void md5(const uint8_t *p, size_t n, uint8_t out[16]);
void md5_two_short(const uint8_t *p1, size_t n1, uint8_t out1[16], const uint8_t *p2, size_t n2, uint8_t out2[16]);
PyObject *kernel_md5(PyObject *self, PyObject *args);

/* buf.c */
extern PyTypeObject OwnedBufferType;

/* cleaner.c */
extern PyTypeObject OffsetMapType;
PyObject *kernel_retained_records(PyObject *self, PyObject *args);

#endif /* KLOG_KERNEL_H */

/*
 * storage_core.record._kernel: the record hot loop of klog, in C.
 *
 * It walks v2 batches (CRC-32C, the read_committed filter, lz4 frames decoded in place; other
 * codecs through the Python callables it is given) and the records of each decompressed records
 * area, appending them to growing Arrow-layout buffers in one pass:
 *
 *   offsets      int64[n]            absolute record offsets
 *   timestamps   int64[n]            milliseconds (LogAppendTime already applied)
 *   key_offsets  int32[n+1]          Arrow binary offsets; key_data; key_valid (LSB bitmap)
 *   value_*      the same for values
 *   hdr_offsets  int32[n+1]          Arrow list offsets into the header entries; hdr_valid
 *                                    (a record without headers is null, as in Spark's Kafka source)
 *   hk_*         utf-8 header keys   (string, never null)
 *   hv_*         header values       (binary, nullable)
 *
 * The record grammar and the checks are DefaultRecord.readFrom's; storage_core/record/records.py
 * holds the same loop in Python, the reference that the tests compare this against.
 * Every read is bounded by the end of the record; any violation raises
 * storage_core.errors.InvalidRecordError. Buffers are handed to pyarrow without copies
 * (OwnedBuffer implements the buffer protocol over the kernel's memory).
 */
#define _GNU_SOURCE /* mremap */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

/* A hot helper inlined whatever the compiler's own estimate (read_record in decode_area). */
#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

static PyObject *InvalidRecordError = NULL;
static PyObject *KlogError = NULL;

/* ---------------------------------------------------------------- growable buffer */

/* Buffers of MAP_MIN_BYTES and more live in their own anonymous mappings: they grow with
 * mremap (no copy) and cost no memory until written. A finished buffer is handed to Arrow
 * without a copy; when Arrow lets go of it, the mapping goes back to a small pool (at most
 * POOL_SLOTS mappings, POOL_MAX_BYTES in all) that the next buffers start from, so a reader
 * that decodes batch after batch writes into pages already faulted in instead of paying a
 * page fault per 4 KiB of every column it fills. Everything here runs under the GIL. */
#define MAP_MIN_BYTES ((Py_ssize_t)1 << 20)
#define POOL_SLOTS 16
#define POOL_MAX_BYTES ((Py_ssize_t)128 << 20)

typedef struct {
    uint8_t *data;
    Py_ssize_t len;
    Py_ssize_t cap;
    int mapped; /* data is an mmap of cap bytes, not a malloc */
} Buf;

static struct { uint8_t *data; Py_ssize_t cap; } pool[POOL_SLOTS];
static int pool_n = 0;
static Py_ssize_t pool_bytes = 0;

static void mem_free(uint8_t *data, Py_ssize_t cap, int mapped) {
    if (!data) return;
    if (!mapped) { free(data); return; }
    if (pool_n < POOL_SLOTS && pool_bytes + cap <= POOL_MAX_BYTES) {
        pool[pool_n].data = data;
        pool[pool_n].cap = cap;
        pool_n++;
        pool_bytes += cap;
        return;
    }
    munmap(data, (size_t)cap);
}

/* A pooled mapping for at least `need` bytes: the largest (the first buffer to need a mapping
 * is usually the one that grows most: a values column), grown with mremap if short. */
static uint8_t *pool_take(Py_ssize_t need, Py_ssize_t *cap) {
    if (!pool_n) return NULL;
    int i = 0;
    for (int j = 1; j < pool_n; j++)
        if (pool[j].cap > pool[i].cap) i = j;
    uint8_t *data = pool[i].data;
    Py_ssize_t have = pool[i].cap;
    pool_bytes -= have;
    pool[i] = pool[--pool_n];
    if (have < need) {
        void *p = mremap(data, (size_t)have, (size_t)need, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) { munmap(data, (size_t)have); return NULL; }
        data = (uint8_t *)p;
        have = need;
    }
    *cap = have;
    return data;
}

static void buf_free(Buf *b) {
    mem_free(b->data, b->cap, b->mapped);
    b->data = NULL;
    b->len = b->cap = 0;
    b->mapped = 0;
}

static int buf_grow(Buf *b, Py_ssize_t need) {
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 2) { PyErr_NoMemory(); return -1; }
        cap *= 2;
    }
    if (cap < MAP_MIN_BYTES) {
        uint8_t *p = (uint8_t *)realloc(b->data, (size_t)cap);
        if (!p) { PyErr_NoMemory(); return -1; }
        b->data = p;
        b->cap = cap;
        return 0;
    }
    if (b->mapped) {
        void *p = mremap(b->data, (size_t)b->cap, (size_t)cap, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) { PyErr_NoMemory(); return -1; }
        b->data = (uint8_t *)p;
        b->cap = cap;
        return 0;
    }
    Py_ssize_t got = cap;
    uint8_t *p = pool_take(cap, &got);
    if (!p) {
        void *m = mmap(NULL, (size_t)cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) { PyErr_NoMemory(); return -1; }
        p = (uint8_t *)m;
        got = cap;
    }
    if (b->len) memcpy(p, b->data, (size_t)b->len);
    free(b->data);
    b->data = p;
    b->cap = got;
    b->mapped = 1;
    return 0;
}

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

/* ---------------------------------------------------------------- OwnedBuffer */

typedef struct {
    PyObject_HEAD
    uint8_t *data;
    Py_ssize_t len;
    Py_ssize_t cap;
    int mapped;
    Py_ssize_t exports;
} OwnedBuffer;

static void OwnedBuffer_dealloc(OwnedBuffer *self) {
    mem_free(self->data, self->cap, self->mapped);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int OwnedBuffer_getbuffer(OwnedBuffer *self, Py_buffer *view, int flags) {
    int rc = PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : (uint8_t *)"", self->len, 1, flags);
    if (rc == 0) self->exports++;
    return rc;
}

static void OwnedBuffer_releasebuffer(OwnedBuffer *self, Py_buffer *view) {
    (void)view;
    self->exports--;
}

static Py_ssize_t OwnedBuffer_length(OwnedBuffer *self) { return self->len; }

static PyBufferProcs OwnedBuffer_as_buffer = {
    (getbufferproc)OwnedBuffer_getbuffer,
    (releasebufferproc)OwnedBuffer_releasebuffer,
};

static PySequenceMethods OwnedBuffer_as_sequence = {
    .sq_length = (lenfunc)OwnedBuffer_length,
};

static PyTypeObject OwnedBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "storage_core.record._kernel.OwnedBuffer",
    .tp_basicsize = sizeof(OwnedBuffer),
    .tp_dealloc = (destructor)OwnedBuffer_dealloc,
    .tp_as_buffer = &OwnedBuffer_as_buffer,
    .tp_as_sequence = &OwnedBuffer_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only bytes owned by the kernel, exported through the buffer protocol.",
};

/* Move a Buf into a new OwnedBuffer; the Buf is left empty. */
static PyObject *take_buffer(Buf *b) {
    OwnedBuffer *o = PyObject_New(OwnedBuffer, &OwnedBufferType);
    if (!o) return NULL;
    o->data = b->data;
    o->len = b->len;
    o->cap = b->cap;
    o->mapped = b->mapped;
    o->exports = 0;
    b->data = NULL;
    b->len = b->cap = 0;
    b->mapped = 0;
    return (PyObject *)o;
}

/* ---------------------------------------------------------------- varints */

/* Unsigned LEB128 of at most max_bytes bytes, bounded by end. 0 ok, -1 premature end, -2 too long. */
static inline int read_uleb(const uint8_t **pp, const uint8_t *end, int max_bytes, uint64_t *out) {
    const uint8_t *p = *pp;
    /* fast paths: one and two bytes (lengths, deltas and sizes of small records) */
    if (p < end && !(p[0] & 0x80)) { *out = p[0]; *pp = p + 1; return 0; }
    if (end - p >= 2 && !(p[1] & 0x80)) { *out = (uint64_t)(p[0] & 0x7f) | ((uint64_t)p[1] << 7); *pp = p + 2; return 0; }
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *pp = p; *out = v; return 0; }
        shift += 7;
    }
    return -2;
}

static inline int read_varint(const uint8_t **pp, const uint8_t *end, int32_t *out) {
    uint64_t raw;
    int rc = read_uleb(pp, end, 5, &raw);
    if (rc) return rc;
    uint32_t u = (uint32_t)raw;
    *out = (int32_t)((u >> 1) ^ (~(u & 1) + 1));
    return 0;
}

static inline int read_varlong(const uint8_t **pp, const uint8_t *end, int64_t *out) {
    uint64_t raw;
    int rc = read_uleb(pp, end, 10, &raw);
    if (rc) return rc;
    *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
    return 0;
}

/* ---------------------------------------------------------------- RecordsBuilder */

typedef struct {
    PyObject_HEAD
    int with_headers;
    Py_ssize_t n;   /* records */
    Py_ssize_t nh;  /* header entries */
    Buf offsets, timestamps;
    Buf key_offsets, key_data, key_valid;
    Buf value_offsets, value_data, value_valid;
    Buf hdr_offsets, hdr_valid;
    Buf hk_offsets, hk_data;
    Buf hv_offsets, hv_data, hv_valid;
    Buf scratch; /* a decompressed records area (lz4_frame), reused batch after batch */
} RecordsBuilder;

static Buf *all_bufs(RecordsBuilder *s, int i) {
    Buf *bufs[] = {&s->offsets, &s->timestamps, &s->key_offsets, &s->key_data, &s->key_valid,
                   &s->value_offsets, &s->value_data, &s->value_valid, &s->hdr_offsets, &s->hdr_valid,
                   &s->hk_offsets, &s->hk_data, &s->hv_offsets, &s->hv_data, &s->hv_valid};
    return i < 15 ? bufs[i] : NULL;
}

static int builder_reset(RecordsBuilder *s) {
    for (int i = 0; i < 15; i++) {
        buf_free(all_bufs(s, i));
    }
    s->n = s->nh = 0;
    /* every offsets buffer starts with a 0 */
    if (buf_i32(&s->key_offsets, 0) < 0 || buf_i32(&s->value_offsets, 0) < 0 ||
        buf_i32(&s->hdr_offsets, 0) < 0 || buf_i32(&s->hk_offsets, 0) < 0 || buf_i32(&s->hv_offsets, 0) < 0)
        return -1;
    return 0;
}

static void RecordsBuilder_dealloc(RecordsBuilder *s) {
    for (int i = 0; i < 15; i++) buf_free(all_bufs(s, i));
    buf_free(&s->scratch);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int RecordsBuilder_init(RecordsBuilder *s, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"with_headers", NULL};
    int with_headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p", kwlist, &with_headers)) return -1;
    for (int i = 0; i < 15; i++) buf_free(all_bufs(s, i));
    s->with_headers = with_headers;
    return builder_reset(s);
}

#define INT32_LIMIT 2147483647
/* The largest |timestamp| in milliseconds whose microseconds fit an int64 (Arrow timestamp[us]). */
#define MAX_MS (INT64_MAX / 1000)

static int data_fits(Buf *data, Py_ssize_t extra) {
    if (data->len + extra > INT32_LIMIT) {
        PyErr_SetString(PyExc_OverflowError, "column data exceeds 2 GiB; finish() the builder earlier");
        return 0;
    }
    return 1;
}

/* Append one binary value (or null) to (offsets, data, valid) at row index `row`. */
static inline int put_binary(Buf *offs, Buf *data, Buf *valid, Py_ssize_t row, const uint8_t *p, Py_ssize_t n) {
    if (p) {
        if (!data_fits(data, n) || buf_put(data, p, n) < 0) return -1;
    }
    if (bit_set(valid, row, p != NULL) < 0) return -1;
    return buf_i32(offs, (int32_t)data->len);
}

static PyObject *invalid(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PyErr_SetString(InvalidRecordError, msg);
    return NULL;
}

static const char *varint_problem(int rc) {
    return rc == -1 ? "Found invalid record structure: premature EOF while reading a varint"
                    : "Varint is too long, the most significant bit in the 5th byte is set";
}

/* Everything an add_v2 call may touch, to undo a batch that turned out to be invalid halfway:
 * a batch is appended whole or not at all. */
typedef struct { Py_ssize_t lens[15]; Py_ssize_t n, nh; } Mark;

static void builder_mark(RecordsBuilder *s, Mark *m) {
    for (int i = 0; i < 15; i++) m->lens[i] = all_bufs(s, i)->len;
    m->n = s->n;
    m->nh = s->nh;
}

/* Clear bits [from, ...) of a bitmap and shrink it to cover `from` bits. */
static void bitmap_truncate(Buf *b, Py_ssize_t from) {
    Py_ssize_t keep = (from + 7) >> 3;
    if (from & 7) b->data[from >> 3] &= (uint8_t)((1u << (from & 7)) - 1);
    if (b->len > keep) memset(b->data + keep, 0, (size_t)(b->len - keep));
    if (b->len > keep) b->len = keep;
}

static void builder_rollback(RecordsBuilder *s, const Mark *m) {
    for (int i = 0; i < 15; i++) {
        Buf *b = all_bufs(s, i);
        if (b == &s->key_valid || b == &s->value_valid || b == &s->hdr_valid) bitmap_truncate(b, m->n);
        else if (b == &s->hv_valid) bitmap_truncate(b, m->nh);
        else b->len = m->lens[i];
    }
    s->n = m->n;
    s->nh = m->nh;
}

/* Approximately the bytes a finish() would hand over (the nbytes property). */
static Py_ssize_t builder_nbytes(const RecordsBuilder *s) {
    return s->key_data.len + s->value_data.len + s->hk_data.len + s->hv_data.len + 16 * s->n;
}

/* Appends without capacity checks, after a reservation that covers them. */
static inline void put_i64_unchecked(Buf *b, int64_t v) { memcpy(b->data + b->len, &v, 8); b->len += 8; }
static inline void put_i32_unchecked(Buf *b, int32_t v) { memcpy(b->data + b->len, &v, 4); b->len += 4; }
static inline void bit_set_unchecked(Buf *b, Py_ssize_t i, int valid) {
    Py_ssize_t byte = i >> 3;
    while (b->len <= byte) b->data[b->len++] = 0;
    if (valid) b->data[byte] |= (uint8_t)(1u << (i & 7));
}

/* Copies n bytes of a records area ending at `end` to dst, which has COPY_SLACK writable bytes
 * past dst + n: a field of up to 32 bytes (a key, a small value) as two 16-byte moves where the
 * area has the bytes to read, instead of a call to memcpy per field. */
#define COPY_SLACK 32
static inline void copy_short(uint8_t *dst, const uint8_t *src, Py_ssize_t n, const uint8_t *end) {
    if (n <= 32 && end - src >= 32) {
        memcpy(dst, src, 16);
        memcpy(dst + 16, src + 16, 16);
    } else {
        memcpy(dst, src, (size_t)n);
    }
}

/* One record of a decompressed records area, as DefaultRecord.readFrom reads it. */
typedef struct {
    int64_t offset;
    int64_t ts;            /* LogAppendTime applied */
    const uint8_t *key;    /* NULL: null key */
    const uint8_t *value;  /* NULL: tombstone */
    const uint8_t *headers;
    const uint8_t *end;    /* the end of the record */
    int32_t off_delta, klen, vlen, nheaders;
} Rec;

/* Reads and checks the record at *pp, which must end by `end` (DefaultRecord.readFrom): every read
 * bounded by the record's end, the offset and timestamp made absolute. Advances *pp past it.
 * 0, or -1 with InvalidRecordError set. Every walk over records (decode_area, parse_area) reads
 * them here. */
static ALWAYS_INLINE int read_record(const uint8_t **pp, const uint8_t *end, int64_t base_offset, int64_t base_ts,
                              int use_lat, int64_t lat, Rec *r) {
    const uint8_t *p = *pp;
    int32_t body;
    int rc = read_varint(&p, end, &body);
    if (rc) { invalid("%s", varint_problem(rc)); return -1; }
    if (body < 0 || body > end - p) {
        invalid("Invalid record size: expected %d bytes in record payload, but instead the buffer has only %zd remaining bytes.",
                body, (Py_ssize_t)(end - p));
        return -1;
    }
    const uint8_t *rec_end = p + body, *q = p;
    int64_t ts_delta;
    if (q >= rec_end) { invalid("Found invalid record structure: premature EOF while reading attributes"); return -1; }
    q++; /* attributes */
    if ((rc = read_varlong(&q, rec_end, &ts_delta))) { invalid("%s", varint_problem(rc)); return -1; }
    if ((rc = read_varint(&q, rec_end, &r->off_delta))) { invalid("%s", varint_problem(rc)); return -1; }
    if ((rc = read_varint(&q, rec_end, &r->klen))) { invalid("%s", varint_problem(rc)); return -1; }
    r->key = NULL;
    if (r->klen >= 0) {
        if (r->klen > rec_end - q) { invalid("Found invalid record structure: key length %d past the end of the record", r->klen); return -1; }
        r->key = q;
        q += r->klen;
    }
    if ((rc = read_varint(&q, rec_end, &r->vlen))) { invalid("%s", varint_problem(rc)); return -1; }
    r->value = NULL;
    if (r->vlen >= 0) {
        if (r->vlen > rec_end - q) { invalid("Found invalid record structure: value length %d past the end of the record", r->vlen); return -1; }
        r->value = q;
        q += r->vlen;
    }
    if ((rc = read_varint(&q, rec_end, &r->nheaders))) { invalid("%s", varint_problem(rc)); return -1; }
    if (r->nheaders < 0) { invalid("Found invalid number of record headers %d", r->nheaders); return -1; }
    if (r->nheaders > rec_end - q) {
        invalid("Found invalid number of record headers. %d is larger than the remaining size of the buffer", r->nheaders);
        return -1;
    }
    r->headers = q;
    for (int32_t h = 0; h < r->nheaders; h++) {
        int32_t hk, hv;
        if ((rc = read_varint(&q, rec_end, &hk))) { invalid("%s", varint_problem(rc)); return -1; }
        if (hk < 0) { invalid("Invalid negative header key size %d", hk); return -1; }
        if (hk > rec_end - q) { invalid("Found invalid record structure: header key length %d past the end of the record", hk); return -1; }
        q += hk;
        if ((rc = read_varint(&q, rec_end, &hv))) { invalid("%s", varint_problem(rc)); return -1; }
        if (hv >= 0) {
            if (hv > rec_end - q) { invalid("Found invalid record structure: header value length %d past the end of the record", hv); return -1; }
            q += hv;
        }
    }
    if (q != rec_end) {
        invalid("Invalid record size: expected to read %d bytes in record payload, but instead read %zd",
                body, (Py_ssize_t)(q - p));
        return -1;
    }
    r->end = rec_end;
    r->offset = (int64_t)((uint64_t)base_offset + (uint64_t)(int64_t)r->off_delta);
    r->ts = use_lat ? lat : (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
    *pp = rec_end;
    return 0;
}

/* The checks of a records area's record count against its size (DefaultRecordBatch): 0, or -1
 * with InvalidRecordError set. */
static int check_count(Py_ssize_t count, Py_ssize_t len) {
    if (count < 0) { invalid("Found invalid record count %zd in magic v2 batch", count); return -1; }
    if (count > len) {
        invalid("Found invalid record count %zd in magic v2 batch: only %zd bytes of records", count, len);
        return -1;
    }
    return 0;
}

/* Parse and check the `count` records of [p, p + len) into recs (room for count). 0, or -1 with
 * InvalidRecordError set. */
static int parse_area(const uint8_t *p, Py_ssize_t len, Py_ssize_t count, int64_t base_offset, int64_t base_ts,
                      int use_lat, int64_t lat, Rec *recs) {
    const uint8_t *end = p + len;
    if (check_count(count, len) < 0) return -1;
    for (Py_ssize_t i = 0; i < count; i++)
        if (read_record(&p, end, base_offset, base_ts, use_lat, lat, &recs[i]) < 0) return -1;
    if (p != end) { invalid("Incorrect declared batch size, records still remaining in file"); return -1; }
    return 0;
}

/* Decode `count` records of one v2 records area [p, p + len) into the builder. Records outside
 * [min_offset, end_offset) are validated but not appended. The caller rolls back on error.
 * Returns 0, or -1 with InvalidRecordError (or MemoryError/OverflowError) set. */
static int decode_area(RecordsBuilder *s, const uint8_t *p, Py_ssize_t len, Py_ssize_t count,
                       int64_t base_offset, int64_t base_ts, int use_lat, int64_t lat,
                       int64_t min_offset, int64_t end_offset, Py_ssize_t *appended_out) {
    const uint8_t *end = p + len;
    Py_ssize_t appended = 0;
    if (check_count(count, len) < 0) return -1;
    /* every record takes at least 7 bytes, so count <= len; key and value bytes fit in len */
    if (buf_reserve(&s->offsets, 8 * count) < 0 || buf_reserve(&s->timestamps, 8 * count) < 0 ||
        buf_reserve(&s->key_offsets, 4 * count) < 0 || buf_reserve(&s->value_offsets, 4 * count) < 0 ||
        buf_reserve(&s->key_valid, count / 8 + 2) < 0 || buf_reserve(&s->value_valid, count / 8 + 2) < 0 ||
        buf_reserve(&s->value_data, len + COPY_SLACK) < 0 || buf_reserve(&s->key_data, len + COPY_SLACK) < 0)
        return -1;
    if (!data_fits(&s->value_data, len) || !data_fits(&s->key_data, len)) return -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        Rec r;
        if (read_record(&p, end, base_offset, base_ts, use_lat, lat, &r) < 0) return -1;
        const uint8_t *key = r.key, *value = r.value, *headers_start = r.headers, *rec_end = r.end;
        int32_t klen = r.klen, vlen = r.vlen, nheaders = r.nheaders;
        int64_t offset = r.offset;
        if (offset < min_offset || offset >= end_offset) continue;
        int64_t ts = r.ts;
        if (ts > MAX_MS || ts < -MAX_MS) {
            invalid("Record at offset %lld has timestamp %lld ms, outside what a microsecond timestamp can hold "
                    "(Spark's Kafka source fails here too)", (long long)offset, (long long)ts);
            return -1;
        }
        Py_ssize_t row = s->n;
        put_i64_unchecked(&s->offsets, offset);
        put_i64_unchecked(&s->timestamps, ts);
        /* reserved above: this batch's keys and values together are at most len bytes */
        if (key) { copy_short(s->key_data.data + s->key_data.len, key, klen, end); s->key_data.len += klen; }
        bit_set_unchecked(&s->key_valid, row, key != NULL);
        put_i32_unchecked(&s->key_offsets, (int32_t)s->key_data.len);
        if (value) { copy_short(s->value_data.data + s->value_data.len, value, vlen, end); s->value_data.len += vlen; }
        bit_set_unchecked(&s->value_valid, row, value != NULL);
        put_i32_unchecked(&s->value_offsets, (int32_t)s->value_data.len);
        if (s->with_headers) {
            const uint8_t *hp = headers_start;
            for (int32_t h = 0; h < nheaders; h++) { /* already validated */
                int32_t hk = 0, hv = -1;
                read_varint(&hp, rec_end, &hk);
                if (!data_fits(&s->hk_data, hk) || buf_put(&s->hk_data, hp, hk) < 0) return -1;
                hp += hk;
                if (buf_i32(&s->hk_offsets, (int32_t)s->hk_data.len) < 0) return -1;
                read_varint(&hp, rec_end, &hv);
                if (put_binary(&s->hv_offsets, &s->hv_data, &s->hv_valid, s->nh, hv >= 0 ? hp : NULL, hv) < 0) return -1;
                if (hv > 0) hp += hv;
                s->nh++;
            }
            if (bit_set(&s->hdr_valid, row, nheaders > 0) < 0) return -1;
            if (buf_i32(&s->hdr_offsets, (int32_t)s->nh) < 0) return -1;
        }
        s->n++;
        appended++;
    }
    if (p != end) { invalid("Incorrect declared batch size, records still remaining in file"); return -1; }
    *appended_out = appended;
    return 0;
}

/* add_v2(data, count, base_offset, base_timestamp, log_append_time, min_offset, end_offset) -> appended
 *
 * Decodes `count` records of a v2 records area. log_append_time is None for CreateTime batches.
 * Records outside [min_offset, end_offset) are validated but not appended. */
static PyObject *RecordsBuilder_add_v2(RecordsBuilder *s, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts, min_offset, end_offset;
    PyObject *lat_obj;
    if (!PyArg_ParseTuple(args, "y*nLLOLL", &view, &count, &base_offset, &base_ts, &lat_obj, &min_offset, &end_offset))
        return NULL;
    int use_lat = lat_obj != Py_None;
    long long lat = 0;
    if (use_lat) {
        lat = PyLong_AsLongLong(lat_obj);
        if (lat == -1 && PyErr_Occurred()) { PyBuffer_Release(&view); return NULL; }
    }
    Mark mark;
    builder_mark(s, &mark);
    Py_ssize_t appended = 0;
    PyObject *result = NULL;
    if (decode_area(s, (const uint8_t *)view.buf, view.len, count, base_offset, base_ts, use_lat, lat,
                    min_offset, end_offset, &appended) == 0)
        result = PyLong_FromSsize_t(appended);
    if (!result) builder_rollback(s, &mark);
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------- CRC-32C (Castagnoli) */

/* The checksum of v2 batches (Crc32C.java): reflected polynomial 0x82F63B78. With SSE 4.2 the
 * CPU's crc32 instruction, three independent streams at a time; else slicing by 8. */
#define CRC32C_POLY 0x82F63B78u
static uint32_t crc_table[8][256];
static int have_sse42 = 0;

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) { crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff] ^
              crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* Three streams at a time hide the crc32 instruction's latency (Mark Adler's crc32c.c): the
 * registers of streams 2 and 3 start at zero and are folded into stream 1's by "appending"
 * their length of zero bytes (a GF(2) linear map, tabulated for the two stream lengths). */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc_long[4][256], crc_short[4][256];

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1) sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = gf2_times(mat, mat[n]);
}

/* The operator that appends `len` zero bytes (a power of two) to a CRC register. */
static void crc_zeros_op(uint32_t *even, size_t len) {
    uint32_t odd[32];
    odd[0] = CRC32C_POLY; /* one zero bit */
    for (int n = 1; n < 32; n++) odd[n] = 1u << (n - 1);
    gf2_square(even, odd); /* two zero bits */
    gf2_square(odd, even); /* four zero bits */
    do {                   /* each square doubles: first 8 bits = 1 byte, then 2, 4, ... bytes */
        gf2_square(even, odd);
        len >>= 1;
        if (len == 0) return;
        gf2_square(odd, even);
        len >>= 1;
    } while (len);
    memcpy(even, odd, sizeof odd);
}

static void crc_zeros(uint32_t zeros[][256], size_t len) {
    uint32_t op[32];
    crc_zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = gf2_times(op, n);
        zeros[1][n] = gf2_times(op, n << 8);
        zeros[2][n] = gf2_times(op, n << 16);
        zeros[3][n] = gf2_times(op, n << 24);
    }
}

static inline uint32_t crc_shift(uint32_t zeros[][256], uint32_t crc) {
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

static inline uint64_t load64(const uint8_t *p) { uint64_t w; memcpy(&w, p, 8); return w; }

/* Three streams of `len` bytes each, as long as 3 * len bytes remain; returns stream 1's register
 * with streams 2 and 3 folded in (len is a multiple of 8; zeros appends len zero bytes). */
__attribute__((target("sse4.2"))) static inline uint64_t crc_three_streams(uint64_t c0, const uint8_t **pp, size_t *np,
                                                                        size_t len, uint32_t zeros[][256]) {
    const uint8_t *p = *pp;
    size_t n = *np;
    while (n >= 3 * len) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + len;
        do {
            c0 = __builtin_ia32_crc32di(c0, load64(p));
            c1 = __builtin_ia32_crc32di(c1, load64(p + len));
            c2 = __builtin_ia32_crc32di(c2, load64(p + 2 * len));
            p += 8;
        } while (p < end);
        c0 = crc_shift(zeros, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = crc_shift(zeros, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * len;
        n -= 3 * len;
    }
    *pp = p;
    *np = n;
    return c0;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c0 = (uint32_t)~crc;
    while (n && ((uintptr_t)p & 7)) { c0 = __builtin_ia32_crc32qi((uint32_t)c0, *p++); n--; }
    c0 = crc_three_streams(c0, &p, &n, CRC_LONG, crc_long);
    c0 = crc_three_streams(c0, &p, &n, CRC_SHORT, crc_short);
    while (n >= 8) { c0 = __builtin_ia32_crc32di(c0, load64(p)); p += 8; n -= 8; }
    while (n--) c0 = __builtin_ia32_crc32qi((uint32_t)c0, *p++);
    return ~(uint32_t)c0;
}
#endif

static void crc32c_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++) crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^ crc_table[0][crc_table[k - 1][n] & 0xff];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
    crc_zeros(crc_long, CRC_LONG);
    crc_zeros(crc_short, CRC_SHORT);
#endif
}

static uint32_t crc32c(const uint8_t *p, size_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (have_sse42) return crc32c_hw(0, p, n);
#endif
    return crc32c_sw(0, p, n);
}

static PyObject *kernel_crc32c(PyObject *self, PyObject *args) {
    Py_buffer view;
    int software = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &software)) return NULL;
    uint32_t c = software ? crc32c_sw(0, view.buf, (size_t)view.len) : crc32c(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

/* ---------------------------------------------------------------- add_v2_run */

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
#define ATTR_CONTROL 0x20
#define CODEC_LZ4 3

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

/* Why add_v2_run stopped: the Python side acts on the batch at the stop position. */
enum {
    RUN_END = 0,        /* every byte consumed */
    RUN_SHORT = 1,      /* fewer bytes left than the next batch needs (read more, or a partial tail) */
    RUN_SLOW_PATH = 2,  /* the next batch needs the object path: not v2, a bad header, a CRC mismatch,
                         * an unknown codec or none given, or records the kernel refused */
    RUN_FULL = 3,       /* the builder holds max_bytes: finish() it, then go on from here */
};

/* ---------------------------------------------------------------- TxnFilter (read_committed) */

/* READ_COMMITTED over a run of batches (Kafka's consumer CompletedFetch), as a state that lives
 * across add_v2_run calls and the object path's batches in between. The rule is the one of
 * storage_core/record/txn_filter.py PyTxnFilter (the reference the tests compare this with), for every
 * batch in file order, before any offset-range skip:
 *
 *   1. the aborted transactions whose first offset the batch reaches (first <= batch last offset)
 *      put their producers in the aborting set, unless their ABORT marker lies behind the batch
 *      (last < batch last offset: a transaction that ended before the slice);
 *   2. a control batch never gives rows. If it is transactional with producer id >= 0: an ABORT
 *      marker (its first record's key has type 0) takes its producer out of the aborting set - but
 *      if the marker's offset is no aborted transaction's last offset and the producer returned
 *      transactional data since its last marker, the transaction index is incomplete
 *      (TXN_MISSING_ENTRY: CorruptIndexError on the Python side); any such control batch clears
 *      the producer's "returned" flag;
 *   3. a transactional data batch of a producer in the aborting set is left out; any other batch
 *      is decoded, and a transactional one marks its producer as "returned".
 *
 * Producers live in one open-addressed table (linear probing, never shrinks) with two flags;
 * the aborted list is a sorted array walked once, its last offsets a sorted array searched. */
#define ATTR_TRANSACTIONAL 0x10
#define PID_USED 1
#define PID_ABORTING 2
#define PID_RETURNED 4

enum { TXN_SKIP = 0, TXN_ADMIT = 1, TXN_MISSING_ENTRY = 2 };

typedef struct { int64_t first, last, pid; } AbortedEntry;
typedef struct { int64_t pid; uint8_t flags; } PidSlot;

typedef struct {
    PyObject_HEAD
    AbortedEntry *aborted;  /* by (first offset, last offset) */
    int64_t *markers;       /* the last offsets, ascending */
    Py_ssize_t n;           /* aborted transactions */
    Py_ssize_t next;        /* aborted[next:] are pending: no batch has reached their first offset yet */
    PidSlot *slots;
    Py_ssize_t cap, used;   /* cap is 0 or a power of two */
} TxnFilter;

static PyTypeObject TxnFilterType;

static inline size_t pid_hash(int64_t pid) {
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29));
}

static PidSlot *txn_find(const TxnFilter *f, int64_t pid) {
    if (!f->cap) return NULL;
    size_t mask = (size_t)f->cap - 1;
    for (size_t i = pid_hash(pid) & mask;; i = (i + 1) & mask) {
        PidSlot *s = &f->slots[i];
        if (!(s->flags & PID_USED)) return NULL;
        if (s->pid == pid) return s;
    }
}

/* The slot of pid, added if new; NULL with MemoryError set. */
static PidSlot *txn_slot(TxnFilter *f, int64_t pid) {
    PidSlot *s = txn_find(f, pid);
    if (s) return s;
    if (2 * (f->used + 1) > f->cap) { /* keep the load at most 1/2 */
        Py_ssize_t cap = f->cap ? 2 * f->cap : 16;
        PidSlot *slots = (PidSlot *)calloc((size_t)cap, sizeof(PidSlot));
        if (!slots) { PyErr_NoMemory(); return NULL; }
        size_t mask = (size_t)cap - 1;
        for (Py_ssize_t j = 0; j < f->cap; j++) {
            if (!(f->slots[j].flags & PID_USED)) continue;
            size_t i = pid_hash(f->slots[j].pid) & mask;
            while (slots[i].flags & PID_USED) i = (i + 1) & mask;
            slots[i] = f->slots[j];
        }
        free(f->slots);
        f->slots = slots;
        f->cap = cap;
    }
    size_t mask = (size_t)f->cap - 1;
    size_t i = pid_hash(pid) & mask;
    while (f->slots[i].flags & PID_USED) i = (i + 1) & mask;
    f->slots[i].pid = pid;
    f->slots[i].flags = PID_USED;
    f->used++;
    return &f->slots[i];
}

/* Step 1 for a batch whose last offset is last_offset. 0, or -1 with MemoryError set. */
static inline int txn_advance(TxnFilter *f, int64_t last_offset) {
    while (f->next < f->n && f->aborted[f->next].first <= last_offset) {
        if (f->aborted[f->next].last >= last_offset) {
            PidSlot *s = txn_slot(f, f->aborted[f->next].pid);
            if (!s) return -1;
            s->flags |= PID_ABORTING;
        }
        f->next++;
    }
    return 0;
}

static int txn_is_marker(const TxnFilter *f, int64_t offset) {
    Py_ssize_t lo = 0, hi = f->n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (f->markers[mid] < offset) lo = mid + 1;
        else hi = mid;
    }
    return lo < f->n && f->markers[lo] == offset;
}

/* Steps 2 and 3 (after txn_advance for the same batch). abort_marker: the batch is a transactional
 * control batch of producer id >= 0 whose first record is an ABORT (ignored otherwise). Returns a
 * TXN_* verdict; state is left unchanged on TXN_MISSING_ENTRY. -1 with MemoryError set. */
static int txn_step(TxnFilter *f, int control, int transactional, int64_t pid, int64_t last_offset, int abort_marker) {
    if (control) {
        if (transactional && pid >= 0) {
            PidSlot *s = txn_find(f, pid);
            if (abort_marker) {
                if (s && (s->flags & PID_RETURNED) && !txn_is_marker(f, last_offset)) return TXN_MISSING_ENTRY;
                if (s) s->flags &= (uint8_t)~PID_ABORTING;
            }
            if (s) s->flags &= (uint8_t)~PID_RETURNED;
        }
        return TXN_SKIP;
    }
    if (!transactional) return TXN_ADMIT;
    PidSlot *s = txn_find(f, pid);
    if (s && (s->flags & PID_ABORTING)) return TXN_SKIP;
    if (!s && !(s = txn_slot(f, pid))) return -1;
    s->flags |= PID_RETURNED;
    return TXN_ADMIT;
}

static int aborted_cmp(const void *a, const void *b) {
    const AbortedEntry *x = (const AbortedEntry *)a, *y = (const AbortedEntry *)b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->last != y->last) return x->last < y->last ? -1 : 1;
    return 0;
}

static int i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void TxnFilter_clear(TxnFilter *f) {
    free(f->aborted);
    free(f->markers);
    free(f->slots);
    f->aborted = NULL;
    f->markers = NULL;
    f->slots = NULL;
    f->n = f->next = f->cap = f->used = 0;
}

static void TxnFilter_dealloc(TxnFilter *f) {
    TxnFilter_clear(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

/* TxnFilter(aborted): aborted is an iterable of (producer_id, first_offset, last_offset). */
static int TxnFilter_init(TxnFilter *f, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"aborted", NULL};
    PyObject *aborted;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", kwlist, &aborted)) return -1;
    PyObject *seq = PySequence_Fast(aborted, "TxnFilter: aborted must be a sequence of (producer_id, first, last)");
    if (!seq) return -1;
    TxnFilter_clear(f);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    f->aborted = (AbortedEntry *)malloc(sizeof(AbortedEntry) * (size_t)(n ? n : 1));
    f->markers = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!f->aborted || !f->markers) { Py_DECREF(seq); TxnFilter_clear(f); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long pid, first, last;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "LLL;TxnFilter: (producer_id, first, last)",
                              &pid, &first, &last)) {
            Py_DECREF(seq);
            TxnFilter_clear(f);
            return -1;
        }
        f->aborted[i] = (AbortedEntry){first, last, pid};
        f->markers[i] = last;
    }
    Py_DECREF(seq);
    f->n = n;
    qsort(f->aborted, (size_t)n, sizeof(AbortedEntry), aborted_cmp);
    qsort(f->markers, (size_t)n, sizeof(int64_t), i64_cmp);
    return 0;
}

static PyObject *TxnFilter_advance(TxnFilter *f, PyObject *arg) {
    long long last = PyLong_AsLongLong(arg);
    if (last == -1 && PyErr_Occurred()) return NULL;
    if (txn_advance(f, last) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *TxnFilter_step(TxnFilter *f, PyObject *args) {
    int control, transactional, abort_marker;
    long long pid, last;
    if (!PyArg_ParseTuple(args, "ppLLp", &control, &transactional, &pid, &last, &abort_marker)) return NULL;
    if (txn_advance(f, last) < 0) return NULL;
    int verdict = txn_step(f, control, transactional, pid, last, abort_marker);
    if (verdict < 0) return NULL;
    return PyLong_FromLong(verdict);
}

/* snapshot() -> (pending index, frozenset of aborting producers, frozenset of producers with data
 * returned since their last marker): for the tests, to compare with the reference's state. */
static PyObject *TxnFilter_snapshot(TxnFilter *f, PyObject *unused) {
    (void)unused;
    PyObject *aborting = PySet_New(NULL), *returned = PySet_New(NULL), *result = NULL;
    if (!aborting || !returned) goto done;
    for (Py_ssize_t i = 0; i < f->cap; i++) {
        PidSlot *s = &f->slots[i];
        if (!(s->flags & (PID_ABORTING | PID_RETURNED))) continue;
        PyObject *pid = PyLong_FromLongLong(s->pid);
        if (!pid) goto done;
        int rc = 0;
        if (s->flags & PID_ABORTING) rc |= PySet_Add(aborting, pid);
        if (s->flags & PID_RETURNED) rc |= PySet_Add(returned, pid);
        Py_DECREF(pid);
        if (rc < 0) goto done;
    }
    {
        PyObject *a = PyFrozenSet_New(aborting), *r = a ? PyFrozenSet_New(returned) : NULL;
        if (a && r) result = Py_BuildValue("nNN", f->next, a, r);
        else { Py_XDECREF(a); Py_XDECREF(r); }
    }
done:
    Py_XDECREF(aborting);
    Py_XDECREF(returned);
    return result;
}

static PyMethodDef TxnFilter_methods[] = {
    {"advance", (PyCFunction)TxnFilter_advance, METH_O,
     "advance(last_offset): put in the aborting set the producers of the aborted transactions a batch ending at "
     "last_offset reaches"},
    {"step", (PyCFunction)TxnFilter_step, METH_VARARGS,
     "step(is_control, is_transactional, producer_id, last_offset, abort_marker) -> 0 leave out, 1 decode, "
     "2 ABORT marker without an index entry (state unchanged); advances first"},
    {"snapshot", (PyCFunction)TxnFilter_snapshot, METH_NOARGS,
     "snapshot() -> (pending index, aborting producers, producers with returned data)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TxnFilterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "storage_core.record._kernel.TxnFilter",
    .tp_basicsize = sizeof(TxnFilter),
    .tp_dealloc = (destructor)TxnFilter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "read_committed state over a run of batches: aborted transactions, aborting producers, returned data.",
    .tp_methods = TxnFilter_methods,
    .tp_init = (initproc)TxnFilter_init,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------------- lz4 frames */

/* Kafka's lz4 records area is one LZ4 frame (lz4_Frame_format.md; KafkaLZ4BlockOutputStream):
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
 * what the kernel accepts is decoded exactly as python-lz4 (and lz4-java) decode it. */
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

/* A little-endian uint32 (any host; compilers make it one load where they can). */
static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

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

/* Decodes the LZ4 frame [p, p + n) into out (reset first). 0: decoded; 1: declined (no exception);
 * -1: MemoryError. */
static int lz4_frame(Buf *out, const uint8_t *p, Py_ssize_t n) {
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
static PyObject *kernel_lz4_frame_decompress(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Buf out = {0};
    int rc = lz4_frame(&out, (const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (rc == 0) result = PyBytes_FromStringAndSize((const char *)out.data, out.len);
    else if (rc == 1) result = Py_NewRef(Py_None);
    buf_free(&out);
    return result;
}

/* Where the batch at data[pos] stands (every walk over batches asks here): V2_WHOLE, a v2 batch
 * whose `total` bytes (LOG_OVERHEAD included) are all in data; V2_SHORT, fewer bytes left than it
 * needs (read more, or a partial tail); V2_OTHER, not a v2 batch or a size below a v2 header's. */
enum { V2_WHOLE = 0, V2_SHORT = 1, V2_OTHER = 2 };
static int v2_batch_at(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t *total) {
    Py_ssize_t rem = len - pos;
    if (rem < V2_HEADER_BYTES) return rem < 17 || data[pos + 16] == 2 ? V2_SHORT : V2_OTHER;
    const uint8_t *b = data + pos;
    int32_t size = (int32_t)be32(b + 8);
    if (b[16] != 2 || size < V2_HEADER_BYTES - V2_LOG_OVERHEAD) return V2_OTHER;
    *total = (Py_ssize_t)size + V2_LOG_OVERHEAD;
    return *total > rem ? V2_SHORT : V2_WHOLE;
}

/* The control record of a transactional control batch at b (total bytes, uncompressed): validates
 * every record as DefaultRecordBatch.records() does (decode_area over an empty offset range) and
 * reads the first record's key as ControlRecordType.parse does. 0 with *abort set; 1 if the object
 * path must decide (a codec, a record or key that Python would refuse; no exception set); -1 with
 * an exception that is not InvalidRecordError. */
static int control_is_abort(RecordsBuilder *s, const uint8_t *b, Py_ssize_t total, int *abort) {
    int16_t attributes = (int16_t)be16(b + 21);
    if (attributes & ATTR_CODEC_MASK) return 1;
    const uint8_t *area = b + V2_HEADER_BYTES;
    Py_ssize_t area_len = total - V2_HEADER_BYTES;
    int32_t count = (int32_t)be32(b + 57);
    Mark mark;
    builder_mark(s, &mark);
    Py_ssize_t appended = 0;
    if (decode_area(s, area, area_len, count, (int64_t)be64(b), (int64_t)be64(b + 27), 0, 0, INT64_MAX, INT64_MIN,
                    &appended) < 0) {
        builder_rollback(s, &mark);
        if (PyErr_ExceptionMatches(InvalidRecordError)) { PyErr_Clear(); return 1; }
        return -1;
    }
    *abort = 0;
    if (count == 0) return 0;
    /* the first record, already validated: length, attributes, timestamp delta, offset delta, key */
    const uint8_t *p = area, *end = area + area_len;
    int32_t body = 0, off_delta = 0, klen = -1;
    int64_t ts_delta = 0;
    read_varint(&p, end, &body);
    const uint8_t *rec_end = p + body;
    p++;
    read_varlong(&p, rec_end, &ts_delta);
    read_varint(&p, rec_end, &off_delta);
    read_varint(&p, rec_end, &klen);
    if (klen < 4) return 1;                /* a null or short key: ControlRecordType.parse raises */
    if ((int16_t)be16(p) < 0) return 1;    /* a negative key version: so does it */
    *abort = (int16_t)be16(p + 2) == 0;    /* ControlRecordType.ABORT */
    return 0;
}

/* One row per batch that added records, in the order added (BATCH_INFO_DTYPE in columnar.py). */
typedef struct {
    int64_t base_offset;
    int64_t last_offset;
    int64_t producer_id;
    int32_t count;          /* records appended from this batch */
    int32_t leader_epoch;
    int32_t base_sequence;
    int16_t producer_epoch;
    int16_t attributes;
    int8_t magic;
    int8_t timestamp_type;  /* TimestampType id: 0 CreateTime, 1 LogAppendTime */
    int8_t pad[6];
} BatchInfo;
_Static_assert(sizeof(BatchInfo) == 48, "BatchInfo must match BATCH_INFO_DTYPE in columnar.py");

/* add_v2_run(data, min_offset, end_offset, verify, decompressors, max_bytes=-1, txn=None) -> (consumed, stop, info)
 *
 * Walks whole v2 batches from data[0]: checks each CRC (if verify), passes each batch through the
 * read_committed filter txn (a TxnFilter, whose state it updates; see above) if there is one, skips
 * control batches, batches the filter leaves out and batches wholly outside [min_offset, end_offset),
 * decodes lz4 frames itself (lz4_frame; a frame it declines goes to Python like the other codecs),
 * decompresses through the Python callables
 * decompressors[codec_id](memoryview) -> bytes (a tuple; None or a None entry: stop at such a
 * compressed batch) and decodes the
 * records as add_v2 does. Stops at the first batch it cannot take whole (see RUN_*) without
 * touching it; a KlogError from decompress or a record the kernel refuses also stops there, so
 * the object path can raise it with the file and position. Returns the bytes consumed, why it
 * stopped, and a buffer of BatchInfo rows. With max_bytes >= 0 it also stops (RUN_FULL) before a
 * batch once the builder holds that many bytes (its nbytes), so that callers can bound the size
 * of what they finish(). With txn, a batch the filter must see but cannot be sure of - a compressed
 * or malformed transactional control batch, an ABORT marker without its index entry - also stops
 * the run (RUN_SLOW_PATH) before its state changes: the object path passes it to the same filter
 * (TxnFilter.step), which decides it or raises its error. */
static PyObject *RecordsBuilder_add_v2_run(RecordsBuilder *s, PyObject *args) {
    PyObject *data_obj, *decompressors, *txn_obj = Py_None;
    long long min_offset, end_offset;
    int verify;
    Py_ssize_t max_bytes = -1;
    if (!PyArg_ParseTuple(args, "OLLpO|nO", &data_obj, &min_offset, &end_offset, &verify, &decompressors, &max_bytes,
                          &txn_obj))
        return NULL;
    if (decompressors != Py_None && !PyTuple_Check(decompressors)) {
        PyErr_SetString(PyExc_TypeError, "add_v2_run: decompressors must be a tuple or None");
        return NULL;
    }
    if (txn_obj != Py_None && !PyObject_TypeCheck(txn_obj, &TxnFilterType)) {
        PyErr_SetString(PyExc_TypeError, "add_v2_run: txn must be a storage_core.record._kernel.TxnFilter or None");
        return NULL;
    }
    TxnFilter *txn = txn_obj != Py_None ? (TxnFilter *)txn_obj : NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *base = (const uint8_t *)view.buf;
    Py_ssize_t pos = 0, len = view.len;
    int stop = RUN_END;
    Buf info = {0};
    PyObject *whole = NULL; /* a memoryview of data, sliced for the decompressor */
    PyObject *result = NULL;
    for (;;) {
        Py_ssize_t rem = len - pos;
        if (rem == 0) { stop = RUN_END; break; }
        if (max_bytes >= 0 && builder_nbytes(s) >= max_bytes) { stop = RUN_FULL; break; }
        Py_ssize_t total = 0;
        int at = v2_batch_at(base, len, pos, &total);
        if (at != V2_WHOLE) { stop = at == V2_SHORT ? RUN_SHORT : RUN_SLOW_PATH; break; }
        const uint8_t *b = base + pos;
        if (verify && crc32c(b + V2_CRC_FROM, (size_t)(total - V2_CRC_FROM)) != be32(b + 17)) { stop = RUN_SLOW_PATH; break; }
        int16_t attributes = (int16_t)be16(b + 21);
        int64_t base_offset = (int64_t)be64(b);
        int64_t last_offset = (int64_t)((uint64_t)base_offset + (uint64_t)(int64_t)(int32_t)be32(b + 23));
        if (txn) { /* every batch, before the range skip: the reference sees every batch of the slice */
            int control = (attributes & ATTR_CONTROL) != 0, transactional = (attributes & ATTR_TRANSACTIONAL) != 0;
            int64_t pid = (int64_t)be64(b + 43);
            int abort_marker = 0;
            if (txn_advance(txn, last_offset) < 0) goto error;
            if (control && transactional && pid >= 0) {
                int rc = control_is_abort(s, b, total, &abort_marker);
                if (rc < 0) goto error;
                if (rc > 0) { stop = RUN_SLOW_PATH; break; }
            }
            int verdict = txn_step(txn, control, transactional, pid, last_offset, abort_marker);
            if (verdict < 0) goto error;
            if (verdict == TXN_MISSING_ENTRY) { stop = RUN_SLOW_PATH; break; }
            if (verdict == TXN_SKIP) { pos += total; continue; }
        }
        if ((attributes & ATTR_CONTROL) || last_offset < min_offset || base_offset >= end_offset) { pos += total; continue; }
        int codec = attributes & ATTR_CODEC_MASK;
        const uint8_t *area = b + V2_HEADER_BYTES;
        Py_ssize_t area_len = total - V2_HEADER_BYTES;
        PyObject *inflated = NULL;
        Py_buffer iview = {0};
        if (codec == CODEC_LZ4) {
            int rc = lz4_frame(&s->scratch, area, area_len);
            if (rc < 0) goto error;
            if (rc == 0) {
                area = s->scratch.data;
                area_len = s->scratch.len;
            }
        }
        if (codec != 0 && area == b + V2_HEADER_BYTES) { /* not decoded above: the Python codec */
            PyObject *decompress = decompressors != Py_None && codec < PyTuple_GET_SIZE(decompressors)
                                       ? PyTuple_GET_ITEM(decompressors, codec) : Py_None;
            if (decompress == Py_None) { stop = RUN_SLOW_PATH; break; }
            if (!whole && !(whole = PyMemoryView_FromObject(data_obj))) goto error;
            PyObject *raw = PySequence_GetSlice(whole, pos + V2_HEADER_BYTES, pos + total);
            if (!raw) goto error;
            inflated = PyObject_CallOneArg(decompress, raw);
            Py_DECREF(raw);
            if (!inflated) {
                if (PyErr_ExceptionMatches(KlogError)) { PyErr_Clear(); stop = RUN_SLOW_PATH; break; }
                goto error;
            }
            if (PyObject_GetBuffer(inflated, &iview, PyBUF_SIMPLE) < 0) { Py_DECREF(inflated); goto error; }
            area = (const uint8_t *)iview.buf;
            area_len = iview.len;
        }
        int64_t max_ts = (int64_t)be64(b + 35);
        Mark mark;
        builder_mark(s, &mark);
        Py_ssize_t appended = 0;
        int rc = decode_area(s, area, area_len, (int32_t)be32(b + 57), base_offset, (int64_t)be64(b + 27),
                             (attributes & ATTR_LOG_APPEND_TIME) != 0, max_ts, min_offset, end_offset, &appended);
        if (inflated) { PyBuffer_Release(&iview); Py_DECREF(inflated); }
        if (rc < 0) {
            builder_rollback(s, &mark);
            if (PyErr_ExceptionMatches(InvalidRecordError)) { PyErr_Clear(); stop = RUN_SLOW_PATH; break; }
            goto error;
        }
        if (appended) {
            BatchInfo row;
            memset(&row, 0, sizeof row);
            row.base_offset = base_offset;
            row.last_offset = last_offset;
            row.producer_id = (int64_t)be64(b + 43);
            row.count = (int32_t)appended;
            row.leader_epoch = (int32_t)be32(b + 12);
            row.base_sequence = (int32_t)be32(b + 53);
            row.producer_epoch = (int16_t)be16(b + 51);
            row.attributes = attributes;
            row.magic = 2;
            row.timestamp_type = (attributes & ATTR_LOG_APPEND_TIME) ? 1 : 0;
            if (buf_put(&info, &row, sizeof row) < 0) goto error;
        }
        pos += total;
    }
    {
        PyObject *info_obj = take_buffer(&info);
        if (info_obj) result = Py_BuildValue("niN", pos, stop, info_obj);
    }
error:
    buf_free(&info);
    Py_XDECREF(whole);
    PyBuffer_Release(&view);
    return result;
}

/* add_record(offset, timestamp, key, value, headers) — one record from Python (legacy batches). */
static PyObject *RecordsBuilder_add_record(RecordsBuilder *s, PyObject *args) {
    long long offset, ts;
    PyObject *key, *value, *headers;
    if (!PyArg_ParseTuple(args, "LLOOO", &offset, &ts, &key, &value, &headers)) return NULL;
    if (ts > MAX_MS || ts < -MAX_MS)
        return invalid("Record at offset %lld has timestamp %lld ms, outside what a microsecond timestamp can hold "
                       "(Spark's Kafka source fails here too)", offset, ts);
    Py_ssize_t row = s->n;
    Py_buffer kb = {0}, vb = {0};
    int have_k = 0, have_v = 0;
    PyObject *result = NULL;
    if (key != Py_None) { if (PyObject_GetBuffer(key, &kb, PyBUF_SIMPLE) < 0) goto done; have_k = 1; }
    if (value != Py_None) { if (PyObject_GetBuffer(value, &vb, PyBUF_SIMPLE) < 0) goto done; have_v = 1; }
    if (buf_i64(&s->offsets, offset) < 0 || buf_i64(&s->timestamps, ts) < 0) goto done;
    if (put_binary(&s->key_offsets, &s->key_data, &s->key_valid, row, have_k ? (const uint8_t *)kb.buf : NULL, have_k ? kb.len : 0) < 0) goto done;
    if (put_binary(&s->value_offsets, &s->value_data, &s->value_valid, row, have_v ? (const uint8_t *)vb.buf : NULL, have_v ? vb.len : 0) < 0) goto done;
    if (s->with_headers) {
        Py_ssize_t nh = 0;
        if (headers != Py_None) {
            PyObject *seq = PySequence_Fast(headers, "headers must be a sequence of (key, value) pairs");
            if (!seq) goto done;
            nh = PySequence_Fast_GET_SIZE(seq);
            for (Py_ssize_t h = 0; h < nh; h++) {
                PyObject *pair = PySequence_Fast_GET_ITEM(seq, h);
                PyObject *hk = NULL, *hv = NULL;
                if (!PyArg_ParseTuple(pair, "UO", &hk, &hv)) { Py_DECREF(seq); goto done; }
                Py_ssize_t klen;
                const char *kutf = PyUnicode_AsUTF8AndSize(hk, &klen);
                if (!kutf || buf_put(&s->hk_data, kutf, klen) < 0 || buf_i32(&s->hk_offsets, (int32_t)s->hk_data.len) < 0) { Py_DECREF(seq); goto done; }
                if (hv == Py_None) {
                    if (put_binary(&s->hv_offsets, &s->hv_data, &s->hv_valid, s->nh, NULL, 0) < 0) { Py_DECREF(seq); goto done; }
                } else {
                    Py_buffer hb;
                    if (PyObject_GetBuffer(hv, &hb, PyBUF_SIMPLE) < 0) { Py_DECREF(seq); goto done; }
                    int rc = put_binary(&s->hv_offsets, &s->hv_data, &s->hv_valid, s->nh, (const uint8_t *)hb.buf, hb.len);
                    PyBuffer_Release(&hb);
                    if (rc < 0) { Py_DECREF(seq); goto done; }
                }
                s->nh++;
            }
            Py_DECREF(seq);
        }
        if (bit_set(&s->hdr_valid, row, nh > 0) < 0 || buf_i32(&s->hdr_offsets, (int32_t)s->nh) < 0) goto done;
    }
    s->n++;
    result = Py_None;
    Py_INCREF(result);
done:
    if (have_k) PyBuffer_Release(&kb);
    if (have_v) PyBuffer_Release(&vb);
    return result;
}

/* finish() -> dict of buffers (and counts); the builder starts again empty. */
static PyObject *RecordsBuilder_finish(RecordsBuilder *s, PyObject *unused) {
    (void)unused;
    static const char *names[] = {"offsets", "timestamps", "key_offsets", "key_data", "key_valid",
                                  "value_offsets", "value_data", "value_valid", "hdr_offsets", "hdr_valid",
                                  "hk_offsets", "hk_data", "hv_offsets", "hv_data", "hv_valid"};
    /* bitmaps must cover every row even when the last rows were all null */
    if (bit_set(&s->key_valid, s->n ? s->n - 1 : 0, 0) < 0 || bit_set(&s->value_valid, s->n ? s->n - 1 : 0, 0) < 0 ||
        bit_set(&s->hdr_valid, s->n ? s->n - 1 : 0, 0) < 0 || bit_set(&s->hv_valid, s->nh ? s->nh - 1 : 0, 0) < 0)
        return NULL;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    PyObject *n = PyLong_FromSsize_t(s->n), *nh = PyLong_FromSsize_t(s->nh);
    if (!n || !nh || PyDict_SetItemString(d, "n", n) < 0 || PyDict_SetItemString(d, "nh", nh) < 0) {
        Py_XDECREF(n); Py_XDECREF(nh); Py_DECREF(d); return NULL;
    }
    Py_DECREF(n); Py_DECREF(nh);
    for (int i = 0; i < 15; i++) {
        PyObject *b = take_buffer(all_bufs(s, i));
        if (!b || PyDict_SetItemString(d, names[i], b) < 0) { Py_XDECREF(b); Py_DECREF(d); return NULL; }
        Py_DECREF(b);
    }
    if (builder_reset(s) < 0) { Py_DECREF(d); return NULL; }
    return d;
}

static PyObject *RecordsBuilder_len_get(RecordsBuilder *s, void *c) { (void)c; return PyLong_FromSsize_t(s->n); }
static PyObject *RecordsBuilder_nbytes_get(RecordsBuilder *s, void *c) {
    (void)c;
    return PyLong_FromSsize_t(builder_nbytes(s));
}

static PyMethodDef RecordsBuilder_methods[] = {
    {"add_v2", (PyCFunction)RecordsBuilder_add_v2, METH_VARARGS,
     "add_v2(data, count, base_offset, base_timestamp, log_append_time, min_offset, end_offset) -> appended"},
    {"add_v2_run", (PyCFunction)RecordsBuilder_add_v2_run, METH_VARARGS,
     "add_v2_run(data, min_offset, end_offset, verify, decompressors, max_bytes=-1, txn=None)"
     " -> (consumed, stop, batch_info)"},
    {"add_record", (PyCFunction)RecordsBuilder_add_record, METH_VARARGS,
     "add_record(offset, timestamp, key, value, headers)"},
    {"finish", (PyCFunction)RecordsBuilder_finish, METH_NOARGS, "finish() -> dict of buffers"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef RecordsBuilder_getset[] = {
    {"num_rows", (getter)RecordsBuilder_len_get, NULL, "records appended since the last finish()", NULL},
    {"nbytes", (getter)RecordsBuilder_nbytes_get, NULL, "approximate bytes buffered", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecordsBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "storage_core.record._kernel.RecordsBuilder",
    .tp_basicsize = sizeof(RecordsBuilder),
    .tp_dealloc = (destructor)RecordsBuilder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Appends decoded records to Arrow-layout buffers.",
    .tp_methods = RecordsBuilder_methods,
    .tp_getset = RecordsBuilder_getset,
    .tp_init = (initproc)RecordsBuilder_init,
    .tp_new = PyType_GenericNew,
};


/* ---------------------------------------------------------------- encoding */

/* An Arrow binary/string column as (validity or None, offsets, data, array offset). */
typedef struct {
    Py_buffer validity, offsets, data;
    int has_validity;
    Py_ssize_t offset;
    Py_ssize_t length; /* entries available (from the offsets buffer) */
} BinCol;

static void bincol_release(BinCol *c) {
    if (c->has_validity) PyBuffer_Release(&c->validity);
    if (c->offsets.obj) PyBuffer_Release(&c->offsets);
    if (c->data.obj) PyBuffer_Release(&c->data);
    memset(c, 0, sizeof *c);
}

static int bincol_get(PyObject *t, BinCol *c, const char *what) {
    memset(c, 0, sizeof *c);
    PyObject *vobj, *oobj, *dobj;
    if (!PyArg_ParseTuple(t, "OOOn", &vobj, &oobj, &dobj, &c->offset)) return -1;
    if (vobj != Py_None) {
        if (PyObject_GetBuffer(vobj, &c->validity, PyBUF_SIMPLE) < 0) return -1;
        c->has_validity = 1;
    }
    if (PyObject_GetBuffer(oobj, &c->offsets, PyBUF_SIMPLE) < 0) { bincol_release(c); return -1; }
    if (dobj == Py_None) {
        static const char empty = 0;
        if (PyBuffer_FillInfo(&c->data, NULL, (void *)&empty, 0, 1, PyBUF_SIMPLE) < 0) { bincol_release(c); return -1; }
        c->data.obj = Py_None; Py_INCREF(Py_None);
    } else if (PyObject_GetBuffer(dobj, &c->data, PyBUF_SIMPLE) < 0) { bincol_release(c); return -1; }
    c->length = c->offsets.len / 4 - 1 - c->offset;
    if (c->offset < 0 || c->length < 0) { PyErr_Format(PyExc_ValueError, "bad %s column buffers", what); bincol_release(c); return -1; }
    return 0;
}

/* Row i of a column: sets *p (NULL for null) and *n; -1 (with an exception) if the buffers lie. */
static inline int bincol_row(const BinCol *c, Py_ssize_t i, const uint8_t **p, int32_t *n) {
    Py_ssize_t j = c->offset + i;
    if (c->has_validity) {
        if ((j >> 3) >= c->validity.len) { PyErr_SetString(PyExc_ValueError, "validity bitmap too short"); return -1; }
        if (!(((const uint8_t *)c->validity.buf)[j >> 3] & (1u << (j & 7)))) { *p = NULL; *n = -1; return 0; }
    }
    const int32_t *offs = (const int32_t *)c->offsets.buf;
    int32_t a = offs[j], b = offs[j + 1];
    if (a < 0 || b < a || b > c->data.len) { PyErr_SetString(PyExc_ValueError, "binary offsets out of range"); return -1; }
    *p = (const uint8_t *)c->data.buf + a;
    *n = b - a;
    return 0;
}

static inline int put_uleb(Buf *b, uint64_t v) {
    uint8_t tmp[10];
    int k = 0;
    while (v > 0x7f) { tmp[k++] = (uint8_t)((v & 0x7f) | 0x80); v >>= 7; }
    tmp[k++] = (uint8_t)v;
    return buf_put(b, tmp, k);
}
static inline int uleb_size(uint64_t v) { int k = 1; while (v > 0x7f) { v >>= 7; k++; } return k; }
static inline uint64_t zz32(int32_t v) { return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31)); }
static inline uint64_t zz64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* encode_v2(keys, values, timestamps, header_counts, header_keys, header_values, start, stop, max_bytes)
 *   -> (records_area: bytes, end_row, first_timestamp, max_timestamp)
 *
 * Encodes rows [start, end_row) as v2 records with offset deltas 0.. and timestamp deltas
 * relative to row `start`'s timestamp, stopping before the row that would take the records
 * area past max_bytes (at least one row). keys and the header arguments may be None;
 * timestamps is an int64 buffer indexed by row; header_counts an int32 buffer (0 = none). */
static PyObject *kernel_encode_v2(PyObject *self, PyObject *args) {
    PyObject *kobj, *vobj, *tsobj, *hcobj, *hkobj, *hvobj;
    Py_ssize_t start, stop, max_bytes;
    if (!PyArg_ParseTuple(args, "OOOOOOnnn", &kobj, &vobj, &tsobj, &hcobj, &hkobj, &hvobj, &start, &stop, &max_bytes))
        return NULL;
    BinCol keys = {0}, values = {0}, hkeys = {0}, hvals = {0};
    Py_buffer ts = {0}, hc = {0};
    int have_keys = kobj != Py_None, have_headers = hcobj != Py_None;
    Buf out = {0};
    PyObject *result = NULL;
    if (have_keys && bincol_get(kobj, &keys, "key") < 0) goto done;
    if (bincol_get(vobj, &values, "value") < 0) goto done;
    if (PyObject_GetBuffer(tsobj, &ts, PyBUF_SIMPLE) < 0) goto done;
    if (have_headers) {
        if (PyObject_GetBuffer(hcobj, &hc, PyBUF_SIMPLE) < 0) goto done;
        if (bincol_get(hkobj, &hkeys, "header key") < 0 || bincol_get(hvobj, &hvals, "header value") < 0) goto done;
    }
    if (start < 0 || stop < start || stop > values.length || ts.len / 8 < stop ||
        (have_keys && keys.length < stop) || (have_headers && hc.len / 4 < stop)) {
        PyErr_SetString(PyExc_ValueError, "encode_v2: row range outside the columns");
        goto done;
    }
    const int64_t *tsv = (const int64_t *)ts.buf;
    const int32_t *hcv = have_headers ? (const int32_t *)hc.buf : NULL;
    int64_t base_ts = start < stop ? tsv[start] : -1, max_ts = base_ts;
    Py_ssize_t h = 0; /* next header entry */
    if (have_headers) for (Py_ssize_t i = 0; i < start; i++) h += hcv[i];
    Py_ssize_t row = start;
    for (; row < stop; row++) {
        const uint8_t *kp = NULL, *vp = NULL;
        int32_t kn = -1, vn = -1;
        if (have_keys && bincol_row(&keys, row, &kp, &kn) < 0) goto done;
        if (bincol_row(&values, row, &vp, &vn) < 0) goto done;
        int64_t t = tsv[row];
        int32_t nh = have_headers ? hcv[row] : 0;
        if (nh < 0 || (have_headers && (h + nh > hkeys.length || h + nh > hvals.length))) {
            PyErr_SetString(PyExc_ValueError, "header counts outside the header columns");
            goto done;
        }
        int32_t delta = (int32_t)(row - start);
        uint64_t tsd = zz64((int64_t)((uint64_t)t - (uint64_t)base_ts));
        Py_ssize_t body = 1 + uleb_size(tsd) + uleb_size(zz32(delta)) + uleb_size(zz32(kn)) + (kn > 0 ? kn : 0) +
                          uleb_size(zz32(vn)) + (vn > 0 ? vn : 0) + uleb_size(zz32(nh));
        for (int32_t k = 0; k < nh; k++) {
            const uint8_t *hp = NULL, *hv = NULL;
            int32_t hn = 0, hvn = -1;
            if (bincol_row(&hkeys, h + k, &hp, &hn) < 0 || bincol_row(&hvals, h + k, &hv, &hvn) < 0) goto done;
            if (!hp) { PyErr_SetString(PyExc_ValueError, "Invalid null header key found in headers"); goto done; }
            body += uleb_size(zz32(hn)) + hn + uleb_size(zz32(hvn)) + (hvn > 0 ? hvn : 0);
        }
        if (body > INT32_LIMIT) { PyErr_SetString(PyExc_OverflowError, "record larger than 2 GiB"); goto done; }
        Py_ssize_t total = uleb_size(zz32((int32_t)body)) + body;
        if (row > start && out.len + total > max_bytes) break;
        if (buf_reserve(&out, total) < 0) goto done;
        put_uleb(&out, zz32((int32_t)body));
        uint8_t zero = 0;
        buf_put(&out, &zero, 1);
        put_uleb(&out, tsd);
        put_uleb(&out, zz32(delta));
        put_uleb(&out, zz32(kn));
        if (kn > 0) buf_put(&out, kp, kn);
        put_uleb(&out, zz32(vn));
        if (vn > 0) buf_put(&out, vp, vn);
        put_uleb(&out, zz32(nh));
        for (int32_t k = 0; k < nh; k++) {
            const uint8_t *hp = NULL, *hv = NULL;
            int32_t hn = 0, hvn = -1;
            bincol_row(&hkeys, h + k, &hp, &hn);
            bincol_row(&hvals, h + k, &hv, &hvn);
            put_uleb(&out, zz32(hn));
            buf_put(&out, hp, hn);
            put_uleb(&out, zz32(hvn));
            if (hvn > 0) buf_put(&out, hv, hvn);
        }
        h += nh;
        if (t > max_ts) max_ts = t;
    }
    {
        PyObject *bytes = PyBytes_FromStringAndSize((const char *)out.data, out.len);
        if (bytes) result = Py_BuildValue("NnLL", bytes, row, (long long)base_ts, (long long)max_ts);
    }
done:
    buf_free(&out);
    if (have_keys) bincol_release(&keys);
    bincol_release(&values);
    if (ts.obj) PyBuffer_Release(&ts);
    if (hc.obj) PyBuffer_Release(&hc);
    if (have_headers) { bincol_release(&hkeys); bincol_release(&hvals); }
    return result;
}


/* ---------------------------------------------------------------- whole batches */

static inline uint8_t *w_uleb(uint8_t *w, uint64_t v) {
    while (v > 0x7f) { *w++ = (uint8_t)((v & 0x7f) | 0x80); v >>= 7; }
    *w++ = (uint8_t)v;
    return w;
}
static inline uint8_t *w_be64(uint8_t *w, uint64_t v) { for (int i = 7; i >= 0; i--) *w++ = (uint8_t)(v >> (8 * i)); return w; }
static inline uint8_t *w_be32(uint8_t *w, uint32_t v) { for (int i = 3; i >= 0; i--) *w++ = (uint8_t)(v >> (8 * i)); return w; }
static inline uint8_t *w_be16(uint8_t *w, uint16_t v) { *w++ = (uint8_t)(v >> 8); *w++ = (uint8_t)v; return w; }

/* The 61-byte v2 batch header (see add_v2_run's layout) at h, for a batch of `total` bytes whose
 * records follow it: every field, then the CRC-32C over attributes .. the end of the records.
 * The Python twin is records.write_batch_header. */
static void write_v2_header(uint8_t *h, Py_ssize_t total, int64_t base_offset, int32_t leader_epoch,
                            uint16_t attributes, int32_t last_offset_delta, int64_t base_ts, int64_t max_ts,
                            int64_t producer_id, int16_t producer_epoch, int32_t base_sequence, int32_t count) {
    w_be64(h, (uint64_t)base_offset);
    w_be32(h + 8, (uint32_t)(total - 12));
    w_be32(h + 12, (uint32_t)leader_epoch);
    h[16] = 2; /* magic */
    w_be16(h + 21, attributes);
    w_be32(h + 23, (uint32_t)last_offset_delta);
    w_be64(h + 27, (uint64_t)base_ts);
    w_be64(h + 35, (uint64_t)max_ts);
    w_be64(h + 43, (uint64_t)producer_id);
    w_be16(h + 51, (uint16_t)producer_epoch);
    w_be32(h + 53, (uint32_t)base_sequence);
    w_be32(h + 57, (uint32_t)count);
    w_be32(h + 17, crc32c(h + 21, (size_t)(total - 21)));
}

#define BATCH_OVERHEAD 61
/* A batch's size must fit batchLength (int32, counting from byte 12). */
#define MAX_RECORDS_AREA (INT32_LIMIT - BATCH_OVERHEAD)

typedef struct {
    BinCol keys, values, hkeys, hvals;
    Py_buffer ts, hc;
    int have_keys, have_headers;
    const int64_t *tsv;
    const int32_t *hcv;
} EncCols;

static void enccols_release(EncCols *c) {
    if (c->have_keys) bincol_release(&c->keys);
    bincol_release(&c->values);
    if (c->ts.obj) PyBuffer_Release(&c->ts);
    if (c->hc.obj) PyBuffer_Release(&c->hc);
    if (c->have_headers) { bincol_release(&c->hkeys); bincol_release(&c->hvals); }
}

static int enccols_get(EncCols *c, PyObject *kobj, PyObject *vobj, PyObject *tsobj, PyObject *hcobj, PyObject *hkobj,
                       PyObject *hvobj, Py_ssize_t start, Py_ssize_t stop) {
    memset(c, 0, sizeof *c);
    if (kobj != Py_None) {
        if (bincol_get(kobj, &c->keys, "key") < 0) return -1;
        c->have_keys = 1;
    }
    if (bincol_get(vobj, &c->values, "value") < 0) return -1;
    if (PyObject_GetBuffer(tsobj, &c->ts, PyBUF_SIMPLE) < 0) return -1;
    if (hcobj != Py_None) {
        if (PyObject_GetBuffer(hcobj, &c->hc, PyBUF_SIMPLE) < 0) return -1;
        if (bincol_get(hkobj, &c->hkeys, "header key") < 0) return -1;
        if (bincol_get(hvobj, &c->hvals, "header value") < 0) { bincol_release(&c->hkeys); return -1; }
        c->have_headers = 1;
    }
    if (start < 0 || stop < start || stop > c->values.length || c->ts.len / 8 < stop ||
        (c->have_keys && c->keys.length < stop) || (c->have_headers && c->hc.len / 4 < stop)) {
        PyErr_SetString(PyExc_ValueError, "encode: row range outside the columns");
        return -1;
    }
    c->tsv = (const int64_t *)c->ts.buf;
    c->hcv = c->have_headers ? (const int32_t *)c->hc.buf : NULL;
    return 0;
}

/* The body size of row `row` (its length varint not included) in a batch whose first row is `first`
 * with base timestamp base_ts; h is the row's first header entry. -1 with an exception. */
static inline Py_ssize_t row_size(const EncCols *c, Py_ssize_t row, Py_ssize_t first, int64_t base_ts, Py_ssize_t h) {
    const uint8_t *kp = NULL, *vp;
    int32_t kn = -1, vn;
    if (c->have_keys && bincol_row(&c->keys, row, &kp, &kn) < 0) return -1;
    if (bincol_row(&c->values, row, &vp, &vn) < 0) return -1;
    int32_t nh = c->have_headers ? c->hcv[row] : 0;
    if (nh < 0 || (c->have_headers && (h + nh > c->hkeys.length || h + nh > c->hvals.length))) {
        PyErr_SetString(PyExc_ValueError, "header counts outside the header columns");
        return -1;
    }
    uint64_t tsd = zz64((int64_t)((uint64_t)c->tsv[row] - (uint64_t)base_ts));
    Py_ssize_t body = 1 + uleb_size(tsd) + uleb_size(zz32((int32_t)(row - first))) + uleb_size(zz32(kn)) +
                      (kn > 0 ? kn : 0) + uleb_size(zz32(vn)) + (vn > 0 ? vn : 0) + uleb_size(zz32(nh));
    for (int32_t k = 0; k < nh; k++) {
        const uint8_t *hp = NULL, *hv = NULL;
        int32_t hn = 0, hvn = -1;
        if (bincol_row(&c->hkeys, h + k, &hp, &hn) < 0 || bincol_row(&c->hvals, h + k, &hv, &hvn) < 0) return -1;
        if (!hp) { PyErr_SetString(PyExc_ValueError, "Invalid null header key found in headers"); return -1; }
        body += uleb_size(zz32(hn)) + hn + uleb_size(zz32(hvn)) + (hvn > 0 ? hvn : 0);
    }
    if (body > INT32_LIMIT - 5) { PyErr_SetString(PyExc_OverflowError, "record larger than 2 GiB"); return -1; }
    return body;
}

/* Write row `row` (already sized and checked by row_size) at w; returns the end. */
static inline uint8_t *row_write(const EncCols *c, uint8_t *w, Py_ssize_t row, Py_ssize_t first, int64_t base_ts,
                                 Py_ssize_t h, int32_t body) {
    const uint8_t *kp = NULL, *vp = NULL;
    int32_t kn = -1, vn = -1;
    if (c->have_keys) bincol_row(&c->keys, row, &kp, &kn);
    bincol_row(&c->values, row, &vp, &vn);
    int32_t nh = c->have_headers ? c->hcv[row] : 0;
    uint64_t tsd = zz64((int64_t)((uint64_t)c->tsv[row] - (uint64_t)base_ts));
    w = w_uleb(w, zz32(body));
    *w++ = 0; /* attributes */
    w = w_uleb(w, tsd);
    w = w_uleb(w, zz32((int32_t)(row - first)));
    w = w_uleb(w, zz32(kn));
    if (kn > 0) { memcpy(w, kp, (size_t)kn); w += kn; }
    w = w_uleb(w, zz32(vn));
    if (vn > 0) { memcpy(w, vp, (size_t)vn); w += vn; }
    w = w_uleb(w, zz32(nh));
    for (int32_t k = 0; k < nh; k++) {
        const uint8_t *hp = NULL, *hv = NULL;
        int32_t hn = 0, hvn = -1;
        bincol_row(&c->hkeys, h + k, &hp, &hn);
        bincol_row(&c->hvals, h + k, &hv, &hvn);
        w = w_uleb(w, zz32(hn));
        if (hn > 0) { memcpy(w, hp, (size_t)hn); w += hn; }
        w = w_uleb(w, zz32(hvn));
        if (hvn > 0) { memcpy(w, hv, (size_t)hvn); w += hvn; }
    }
    return w;
}

/* encode_v2_batches(keys, values, timestamps, header_counts, header_keys, header_values, start, stop, max_bytes,
 *                   header) -> (list of bytes, meta)
 *
 * Encodes rows [start, stop) as consecutive v2 batches in one call. A batch is cut before the row
 * that would take its records area past max_bytes (at least one row per batch; max_bytes is
 * capped so a batch fits batchLength). Offset deltas start at 0 and timestamp deltas are relative
 * to the first row of each batch, as encode_v2 does.
 *
 * header None: each bytes object is a records area (for a codec to compress).
 * header (base_offset, partition_leader_epoch, attributes): each is a whole batch, the 61-byte
 * header filled (base offset = base_offset + row - start, producer fields -1) and its CRC-32C.
 *
 * meta: int64 buffer of 3 entries per batch: end row (exclusive), first timestamp, max timestamp. */
static PyObject *kernel_encode_v2_batches(PyObject *self, PyObject *args) {
    PyObject *kobj, *vobj, *tsobj, *hcobj, *hkobj, *hvobj, *hdr;
    Py_ssize_t start, stop, max_bytes;
    if (!PyArg_ParseTuple(args, "OOOOOOnnnO", &kobj, &vobj, &tsobj, &hcobj, &hkobj, &hvobj, &start, &stop, &max_bytes,
                          &hdr))
        return NULL;
    long long base_offset = 0;
    int leader_epoch = 0, attributes = 0;
    int with_header = hdr != Py_None;
    if (with_header && !PyArg_ParseTuple(hdr, "Lii", &base_offset, &leader_epoch, &attributes)) return NULL;
    if (with_header && (attributes < -32768 || attributes > 32767)) {
        PyErr_SetString(PyExc_ValueError, "attributes outside int16");
        return NULL;
    }
    if (max_bytes < 1) max_bytes = 1;
    if (max_bytes > MAX_RECORDS_AREA) max_bytes = MAX_RECORDS_AREA;
    EncCols c;
    PyObject *list = NULL, *result = NULL;
    Buf meta = {0};
    if (enccols_get(&c, kobj, vobj, tsobj, hcobj, hkobj, hvobj, start, stop) < 0) goto done;
    if (with_header && stop > start && base_offset > 0 && (long long)(stop - start - 1) > INT64_MAX - base_offset) {
        PyErr_SetString(PyExc_OverflowError, "encode: offsets past 2**63 - 1");
        goto done;
    }
    list = PyList_New(0);
    if (!list) goto done;
    Py_ssize_t h = 0; /* the first header entry of row `row` */
    if (c.have_headers) for (Py_ssize_t i = 0; i < start; i++) h += c.hcv[i];
    Py_ssize_t row = start;
    while (row < stop) {
        Py_ssize_t first = row, h0 = h, area = 0;
        int64_t base_ts = c.tsv[row], max_ts = base_ts;
        /* pass 1: how many rows fit, and their size */
        for (; row < stop; row++) {
            Py_ssize_t body = row_size(&c, row, first, base_ts, h);
            if (body < 0) goto done;
            Py_ssize_t total = uleb_size(zz32((int32_t)body)) + body;
            if (row > first && area + total > max_bytes) break;
            if (area + total > MAX_RECORDS_AREA) {
                PyErr_SetString(PyExc_OverflowError, "record batch larger than 2 GiB");
                goto done;
            }
            area += total;
            if (c.have_headers) h += c.hcv[row];
            if (c.tsv[row] > max_ts) max_ts = c.tsv[row];
        }
        Py_ssize_t hsize = with_header ? BATCH_OVERHEAD : 0;
        PyObject *bytes = PyBytes_FromStringAndSize(NULL, hsize + area);
        if (!bytes) goto done;
        uint8_t *base = (uint8_t *)PyBytes_AS_STRING(bytes);
        /* pass 2: write them */
        uint8_t *w = base + hsize;
        Py_ssize_t hh = h0;
        for (Py_ssize_t r = first; r < row; r++) {
            Py_ssize_t body = row_size(&c, r, first, base_ts, hh); /* cannot fail: pass 1 checked it */
            w = row_write(&c, w, r, first, base_ts, hh, (int32_t)body);
            if (c.have_headers) hh += c.hcv[r];
        }
        if (w != base + hsize + area) {
            Py_DECREF(bytes);
            PyErr_SetString(PyExc_SystemError, "encode_v2_batches: size mismatch");
            goto done;
        }
        if (with_header) {
            int32_t count = (int32_t)(row - first);
            /* no producer: id -1, epoch -1, base sequence -1 */
            write_v2_header(base, hsize + area, (int64_t)(base_offset + (long long)(first - start)),
                            (int32_t)leader_epoch, (uint16_t)attributes, count - 1, base_ts, max_ts, -1, -1, -1, count);
        }
        int rc = PyList_Append(list, bytes);
        Py_DECREF(bytes);
        if (rc < 0) goto done;
        int64_t m[3] = {(int64_t)row, base_ts, max_ts};
        if (buf_put(&meta, m, sizeof m) < 0) goto done;
    }
    {
        PyObject *mb = take_buffer(&meta);
        if (mb) result = Py_BuildValue("ON", list, mb);
    }
done:
    Py_XDECREF(list);
    free(meta.data);
    enccols_release(&c);
    return result;
}

/* murmur2(keys) -> int32 buffer: Kafka's Utils.murmur2 of every key (0 for a null key). */
static int32_t murmur2(const uint8_t *data, int32_t length) {
    const uint32_t m = 0x5bd1e995;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    int32_t length4 = length / 4;
    for (int32_t i = 0; i < length4; i++) {
        int32_t i4 = i * 4;
        uint32_t k = (uint32_t)data[i4] | ((uint32_t)data[i4 + 1] << 8) | ((uint32_t)data[i4 + 2] << 16) | ((uint32_t)data[i4 + 3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length % 4) {
    case 3: h ^= (uint32_t)data[(length & ~3) + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)data[(length & ~3) + 1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)data[length & ~3]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *kernel_murmur2(PyObject *self, PyObject *args) {
    PyObject *kobj;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On", &kobj, &n)) return NULL;
    BinCol keys;
    if (bincol_get(kobj, &keys, "key") < 0) return NULL;
    if (n < 0 || n > keys.length) { bincol_release(&keys); PyErr_SetString(PyExc_ValueError, "murmur2: n outside the column"); return NULL; }
    Buf out = {0};
    if (buf_reserve(&out, 4 * n + 1) < 0) { bincol_release(&keys); return NULL; }
    int32_t *o = (int32_t *)out.data;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *p;
        int32_t len;
        if (bincol_row(&keys, i, &p, &len) < 0) { bincol_release(&keys); buf_free(&out); return NULL; }
        o[i] = p ? murmur2(p, len) : 0;
    }
    out.len = 4 * n;
    bincol_release(&keys);
    return take_buffer(&out);
}

/* ---------------------------------------------------------------- MD5 (RFC 1321) */

/* The key hash of Kafka's SkimpyOffsetMap. Written here rather than linked from OpenSSL so that
 * the kernel builds wherever a C compiler does; tests compare it with hashlib.md5. */
#define MD5_F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define MD5_G(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define MD5_H(x, y, z) ((x) ^ (y) ^ (z))
#define MD5_I(x, y, z) ((y) ^ ((x) | ~(z)))
#define MD5_STEP(f, a, b, c, d, x, t, s)                     \
    do {                                                     \
        (a) += f((b), (c), (d)) + (x) + (uint32_t)(t);       \
        (a) = ((a) << (s)) | ((a) >> (32 - (s)));           \
        (a) += (b);                                          \
    } while (0)

/* The 64 steps of a block: S(function, a, b, c, d, word, constant, shift). */
#define MD5_ROUNDS(S) \
    S(MD5_F, a, b, c, d, 0, 0xd76aa478, 7) S(MD5_F, d, a, b, c, 1, 0xe8c7b756, 12) \
    S(MD5_F, c, d, a, b, 2, 0x242070db, 17) S(MD5_F, b, c, d, a, 3, 0xc1bdceee, 22) \
    S(MD5_F, a, b, c, d, 4, 0xf57c0faf, 7) S(MD5_F, d, a, b, c, 5, 0x4787c62a, 12) \
    S(MD5_F, c, d, a, b, 6, 0xa8304613, 17) S(MD5_F, b, c, d, a, 7, 0xfd469501, 22) \
    S(MD5_F, a, b, c, d, 8, 0x698098d8, 7) S(MD5_F, d, a, b, c, 9, 0x8b44f7af, 12) \
    S(MD5_F, c, d, a, b, 10, 0xffff5bb1, 17) S(MD5_F, b, c, d, a, 11, 0x895cd7be, 22) \
    S(MD5_F, a, b, c, d, 12, 0x6b901122, 7) S(MD5_F, d, a, b, c, 13, 0xfd987193, 12) \
    S(MD5_F, c, d, a, b, 14, 0xa679438e, 17) S(MD5_F, b, c, d, a, 15, 0x49b40821, 22) \
    S(MD5_G, a, b, c, d, 1, 0xf61e2562, 5) S(MD5_G, d, a, b, c, 6, 0xc040b340, 9) \
    S(MD5_G, c, d, a, b, 11, 0x265e5a51, 14) S(MD5_G, b, c, d, a, 0, 0xe9b6c7aa, 20) \
    S(MD5_G, a, b, c, d, 5, 0xd62f105d, 5) S(MD5_G, d, a, b, c, 10, 0x02441453, 9) \
    S(MD5_G, c, d, a, b, 15, 0xd8a1e681, 14) S(MD5_G, b, c, d, a, 4, 0xe7d3fbc8, 20) \
    S(MD5_G, a, b, c, d, 9, 0x21e1cde6, 5) S(MD5_G, d, a, b, c, 14, 0xc33707d6, 9) \
    S(MD5_G, c, d, a, b, 3, 0xf4d50d87, 14) S(MD5_G, b, c, d, a, 8, 0x455a14ed, 20) \
    S(MD5_G, a, b, c, d, 13, 0xa9e3e905, 5) S(MD5_G, d, a, b, c, 2, 0xfcefa3f8, 9) \
    S(MD5_G, c, d, a, b, 7, 0x676f02d9, 14) S(MD5_G, b, c, d, a, 12, 0x8d2a4c8a, 20) \
    S(MD5_H, a, b, c, d, 5, 0xfffa3942, 4) S(MD5_H, d, a, b, c, 8, 0x8771f681, 11) \
    S(MD5_H, c, d, a, b, 11, 0x6d9d6122, 16) S(MD5_H, b, c, d, a, 14, 0xfde5380c, 23) \
    S(MD5_H, a, b, c, d, 1, 0xa4beea44, 4) S(MD5_H, d, a, b, c, 4, 0x4bdecfa9, 11) \
    S(MD5_H, c, d, a, b, 7, 0xf6bb4b60, 16) S(MD5_H, b, c, d, a, 10, 0xbebfbc70, 23) \
    S(MD5_H, a, b, c, d, 13, 0x289b7ec6, 4) S(MD5_H, d, a, b, c, 0, 0xeaa127fa, 11) \
    S(MD5_H, c, d, a, b, 3, 0xd4ef3085, 16) S(MD5_H, b, c, d, a, 6, 0x04881d05, 23) \
    S(MD5_H, a, b, c, d, 9, 0xd9d4d039, 4) S(MD5_H, d, a, b, c, 12, 0xe6db99e5, 11) \
    S(MD5_H, c, d, a, b, 15, 0x1fa27cf8, 16) S(MD5_H, b, c, d, a, 2, 0xc4ac5665, 23) \
    S(MD5_I, a, b, c, d, 0, 0xf4292244, 6) S(MD5_I, d, a, b, c, 7, 0x432aff97, 10) \
    S(MD5_I, c, d, a, b, 14, 0xab9423a7, 15) S(MD5_I, b, c, d, a, 5, 0xfc93a039, 21) \
    S(MD5_I, a, b, c, d, 12, 0x655b59c3, 6) S(MD5_I, d, a, b, c, 3, 0x8f0ccc92, 10) \
    S(MD5_I, c, d, a, b, 10, 0xffeff47d, 15) S(MD5_I, b, c, d, a, 1, 0x85845dd1, 21) \
    S(MD5_I, a, b, c, d, 8, 0x6fa87e4f, 6) S(MD5_I, d, a, b, c, 15, 0xfe2ce6e0, 10) \
    S(MD5_I, c, d, a, b, 6, 0xa3014314, 15) S(MD5_I, b, c, d, a, 13, 0x4e0811a1, 21) \
    S(MD5_I, a, b, c, d, 4, 0xf7537e82, 6) S(MD5_I, d, a, b, c, 11, 0xbd3af235, 10) \
    S(MD5_I, c, d, a, b, 2, 0x2ad7d2bb, 15) S(MD5_I, b, c, d, a, 9, 0xeb86d391, 21)

#define MD5_S1(f, a, b, c, d, k, t, s) MD5_STEP(f, a, b, c, d, x[k], t, s);
#define MD5_S2(f, a, b, c, d, k, t, s) MD5_STEP(f, a##1, b##1, c##1, d##1, x1[k], t, s); \
                                       MD5_STEP(f, a##2, b##2, c##2, d##2, x2[k], t, s);

static void md5_block(uint32_t st[4], const uint8_t *blk) {
    uint32_t x[16];
    for (int i = 0; i < 16; i++) x[i] = le32(blk + 4 * i);
    uint32_t a = st[0], b = st[1], c = st[2], d = st[3];
    MD5_ROUNDS(MD5_S1)
    st[0] += a;
    st[1] += b;
    st[2] += c;
    st[3] += d;
}

/* Two independent blocks, their steps interleaved: MD5 is one long dependency chain, and two
 * chains at once keep the CPU's ALUs busy (about 1.7x the digests per second). */
static void md5_block2(uint32_t s1[4], const uint8_t *p1, uint32_t s2[4], const uint8_t *p2) {
    uint32_t x1[16], x2[16];
    for (int i = 0; i < 16; i++) {
        x1[i] = le32(p1 + 4 * i);
        x2[i] = le32(p2 + 4 * i);
    }
    uint32_t a1 = s1[0], b1 = s1[1], c1 = s1[2], d1 = s1[3];
    uint32_t a2 = s2[0], b2 = s2[1], c2 = s2[2], d2 = s2[3];
    MD5_ROUNDS(MD5_S2)
    s1[0] += a1; s1[1] += b1; s1[2] += c1; s1[3] += d1;
    s2[0] += a2; s2[1] += b2; s2[2] += c2; s2[3] += d2;
}

static void md5_out(const uint32_t st[4], uint8_t out[16]) {
    for (int i = 0; i < 4; i++) {
        out[4 * i] = (uint8_t)st[i];
        out[4 * i + 1] = (uint8_t)(st[i] >> 8);
        out[4 * i + 2] = (uint8_t)(st[i] >> 16);
        out[4 * i + 3] = (uint8_t)(st[i] >> 24);
    }
}

#define MD5_INIT {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u}
/* A message of fewer than 56 bytes fits one padded block. */
#define MD5_ONE_BLOCK 56

static void md5_pad_one(const uint8_t *p, size_t n, uint8_t tail[64]) {
    memset(tail, 0, 64);
    if (n) memcpy(tail, p, n);
    tail[n] = 0x80;
    uint64_t bits = (uint64_t)n << 3;
    for (int i = 0; i < 8; i++) tail[56 + i] = (uint8_t)(bits >> (8 * i));
}

static void md5(const uint8_t *p, size_t n, uint8_t out[16]) {
    uint32_t st[4] = MD5_INIT;
    uint64_t bits = (uint64_t)n << 3;
    while (n >= 64) { md5_block(st, p); p += 64; n -= 64; }
    uint8_t tail[128];
    memset(tail, 0, sizeof tail);
    if (n) memcpy(tail, p, n);
    tail[n] = 0x80;
    size_t blocks = n < MD5_ONE_BLOCK ? 1 : 2;
    for (int i = 0; i < 8; i++) tail[blocks * 64 - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(st, tail);
    if (blocks == 2) md5_block(st, tail + 64);
    md5_out(st, out);
}

/* Two short messages (each under MD5_ONE_BLOCK bytes) at once. */
static void md5_two_short(const uint8_t *p1, size_t n1, uint8_t out1[16], const uint8_t *p2, size_t n2,
                          uint8_t out2[16]) {
    uint32_t s1[4] = MD5_INIT, s2[4] = MD5_INIT;
    uint8_t t1[64], t2[64];
    md5_pad_one(p1, n1, t1);
    md5_pad_one(p2, n2, t2);
    md5_block2(s1, t1, s2, t2);
    md5_out(s1, out1);
    md5_out(s2, out2);
}

static PyObject *kernel_md5(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    uint8_t out[16];
    md5((const uint8_t *)view.buf, (size_t)view.len, out);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)out, 16);
}

/* ---------------------------------------------------------------- records of a v2 area */

/* Strict UTF-8 (what Python decodes without replacement): header keys are strings in Kafka. */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        int more;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) more = 1;
        else if (c == 0xE0) { more = 2; lo = 0xA0; }
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) more = 2;
        else if (c == 0xED) { more = 2; hi = 0x9F; }
        else if (c == 0xF0) { more = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) more = 3;
        else if (c == 0xF4) { more = 3; hi = 0x8F; }
        else return 0;
        if (n - i - 1 < more) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k <= more; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += 1 + more;
    }
    return 1;
}

/* Append the kept records of recs[0..n) to out as MemoryRecordsBuilder writes them into a rebuilt
 * batch (buildRetainedRecordsInto; the Python twin is records.build_batch): attributes 0, the same
 * offset delta (the base offset stays), the timestamp delta from the new base timestamp - the
 * delete horizon, or else the first kept record's timestamp -, minimal varints, header keys as
 * UTF-8. Sets the base and max timestamps (LogAppendTime: lat) and the count. Returns 0; 1 when
 * the Python builder must decide (offsets that do not increase or leave [0, INT32_MAX] from the
 * base, a header key that is not UTF-8: it replaces or refuses); -1 with MemoryError. */
static int write_kept(Buf *out, const Rec *recs, Py_ssize_t n, const uint8_t *keep, int has_horizon, int64_t horizon,
                      int use_lat, int64_t lat, int64_t *base_ts_out, int64_t *max_ts_out, int32_t *count_out) {
    int64_t base_ts = 0, max_ts = INT64_MIN;
    int first = 1;
    int64_t prev = 0;
    int32_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!keep[i]) continue;
        const Rec *r = &recs[i];
        if (first) base_ts = has_horizon ? horizon : r->ts;
        if (r->off_delta < 0 || (!first && r->offset <= prev)) return 1;
        prev = r->offset;
        first = 0;
        if (r->ts > max_ts) max_ts = r->ts;
        uint64_t zts = zz64((int64_t)((uint64_t)r->ts - (uint64_t)base_ts));
        /* the headers, re-encoded */
        Py_ssize_t hbytes = uleb_size(zz32(r->nheaders));
        const uint8_t *q = r->headers;
        for (int32_t h = 0; h < r->nheaders; h++) { /* validated by parse_area */
            int32_t hk = 0, hv = -1;
            read_varint(&q, r->end, &hk);
            if (!utf8_valid(q, hk)) return 1;
            hbytes += uleb_size(zz32(hk)) + hk;
            q += hk;
            read_varint(&q, r->end, &hv);
            if (hv >= 0) { hbytes += uleb_size(zz32(hv)) + hv; q += hv; }
            else hbytes += 1;
        }
        Py_ssize_t body = 1 + uleb_size(zts) + uleb_size(zz32(r->off_delta))
                          + (r->key ? uleb_size(zz32(r->klen)) + r->klen : 1)
                          + (r->value ? uleb_size(zz32(r->vlen)) + r->vlen : 1) + hbytes;
        if (body > INT32_LIMIT) return 1;
        if (buf_reserve(out, body + 5) < 0) return -1;
        uint8_t *w = out->data + out->len;
        w = w_uleb(w, zz32((int32_t)body));
        *w++ = 0;
        w = w_uleb(w, zts);
        w = w_uleb(w, zz32(r->off_delta));
        if (r->key) { w = w_uleb(w, zz32(r->klen)); memcpy(w, r->key, (size_t)r->klen); w += r->klen; }
        else *w++ = 1;
        if (r->value) { w = w_uleb(w, zz32(r->vlen)); memcpy(w, r->value, (size_t)r->vlen); w += r->vlen; }
        else *w++ = 1;
        w = w_uleb(w, zz32(r->nheaders));
        q = r->headers;
        for (int32_t h = 0; h < r->nheaders; h++) {
            int32_t hk = 0, hv = -1;
            read_varint(&q, r->end, &hk);
            w = w_uleb(w, zz32(hk));
            memcpy(w, q, (size_t)hk);
            w += hk;
            q += hk;
            read_varint(&q, r->end, &hv);
            if (hv >= 0) { w = w_uleb(w, zz32(hv)); memcpy(w, q, (size_t)hv); w += hv; q += hv; }
            else *w++ = 1;
        }
        out->len = w - out->data;
        count++;
    }
    *base_ts_out = base_ts;
    *max_ts_out = use_lat ? lat : max_ts;
    *count_out = count;
    return 0;
}

/* ---------------------------------------------------------------- OffsetMap (SkimpyOffsetMap) */

/* Kafka's SkimpyOffsetMap: key MD5 digest -> latest offset in one flat array of
 * memory_bytes / 24 slots of 24 bytes (digest, offset), open addressing. The probe sequence is
 * positionOf(hash, attempt): the big-endian int at byte min(attempt, 12) of the digest, plus
 * max(0, attempt - 12), Utils.abs, modulo the slots; a slot is empty when its 24 bytes are zero.
 * Equal digests are the same key. The map counts as full at int(slots * 0.9) entries
 * (log.cleaner.io.buffer.load.factor), which the cleaner checks before each put.
 * The Python twin is storage_core/cleaner/offset_map.py SkimpyOffsetMap (a dict of digests). */
#define OM_ENTRY 24
#define OM_HASH 16
#define OM_LOAD_FACTOR 0.9

typedef struct {
    PyObject_HEAD
    uint8_t *bytes;
    Py_ssize_t memory_bytes;
    int32_t slots;
    int32_t max_entries;
    int32_t entries;
    int dirty;               /* something was put since the memory was last zeroed */
    int64_t latest_offset;
    Buf scratch;             /* Rec and digest arrays of the batch at hand */
} OffsetMap;

static PyTypeObject OffsetMapType;

static inline size_t om_position(const OffsetMap *m, const uint8_t *hash, int32_t attempt) {
    int32_t at = attempt < OM_HASH - 4 ? attempt : OM_HASH - 4;
    int32_t extra = attempt > OM_HASH - 4 ? attempt - (OM_HASH - 4) : 0;
    int32_t probe = (int32_t)(be32(hash + at) + (uint32_t)extra);
    int32_t pos = probe == INT32_MIN ? 0 : (probe < 0 ? -probe : probe); /* Utils.abs */
    return (size_t)(pos % m->slots) * OM_ENTRY;
}

static inline int om_empty(const uint8_t *e) {
    uint64_t a, b, c;
    memcpy(&a, e, 8);
    memcpy(&b, e + 8, 8);
    memcpy(&c, e + 16, 8);
    return (a | b | c) == 0;
}

/* get: the offset stored for this digest, or -1. */
static inline int64_t om_get(const OffsetMap *m, const uint8_t *hash) {
    int64_t max_attempts = (int64_t)m->slots + OM_HASH - 4;
    for (int32_t attempt = 0; attempt < max_attempts; attempt++) {
        const uint8_t *e = m->bytes + om_position(m, hash, attempt);
        if (om_empty(e)) return -1;
        if (memcmp(e, hash, OM_HASH) == 0) {
            int64_t off;
            memcpy(&off, e + OM_HASH, 8);
            return off;
        }
    }
    return -1;
}

/* put: overwrite the digest's offset, or take the first empty slot. -1 (KlogError) if every slot
 * is taken, as Kafka's IllegalArgumentException. */
static inline int om_put(OffsetMap *m, const uint8_t *hash, int64_t offset) {
    int32_t attempt = 0;
    uint8_t *e = m->bytes + om_position(m, hash, attempt);
    while (!om_empty(e)) {
        if (memcmp(e, hash, OM_HASH) == 0) { memcpy(e + OM_HASH, &offset, 8); return 0; }
        e = m->bytes + om_position(m, hash, ++attempt);
    }
    if (m->entries >= m->slots) {
        PyErr_Format(KlogError, "Attempted to add a new entry to a full offset map, entries: %d, slots: %d",
                     m->entries, m->slots);
        return -1;
    }
    memcpy(e, hash, OM_HASH);
    memcpy(e + OM_HASH, &offset, 8);
    m->entries++;
    m->dirty = 1;
    return 0;
}

static inline void om_prefetch(const OffsetMap *m, const uint8_t *hash) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(m->bytes + om_position(m, hash, 0));
#else
    (void)m; (void)hash;
#endif
}

/* Scratch room for n records and their digests. */
static int om_scratch(OffsetMap *m, Py_ssize_t n, Rec **recs, uint8_t **hashes, uint8_t **keep) {
    Py_ssize_t need = n * (Py_ssize_t)(sizeof(Rec) + OM_HASH + 1) + 1;
    if (m->scratch.cap < need && buf_grow(&m->scratch, need) < 0) return -1;
    *recs = (Rec *)m->scratch.data;
    *hashes = m->scratch.data + n * (Py_ssize_t)sizeof(Rec);
    *keep = *hashes + n * OM_HASH;
    return 0;
}

static void OffsetMap_dealloc(OffsetMap *m) {
    free(m->bytes);
    buf_free(&m->scratch);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static int OffsetMap_init(OffsetMap *m, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"memory_bytes", NULL};
    Py_ssize_t memory;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n", kwlist, &memory)) return -1;
    Py_ssize_t slots = memory / OM_ENTRY;
    if (slots > INT32_LIMIT) {
        PyErr_Format(KlogError, "offset map memory of %zd bytes is more than %lld slots", memory, (long long)INT32_LIMIT);
        return -1;
    }
    int32_t max_entries = (int32_t)((double)slots * OM_LOAD_FACTOR);
    if (max_entries < 1) {
        PyErr_Format(KlogError, "offset map memory of %zd bytes holds no key", memory);
        return -1;
    }
    free(m->bytes);
    m->bytes = (uint8_t *)calloc((size_t)slots, OM_ENTRY);
    if (!m->bytes) { PyErr_NoMemory(); return -1; }
    m->memory_bytes = memory;
    m->slots = (int32_t)slots;
    m->max_entries = max_entries;
    m->entries = 0;
    m->dirty = 0;
    m->latest_offset = -1;
    return 0;
}

static int om_ready(OffsetMap *m) {
    if (!m->bytes) { PyErr_SetString(PyExc_ValueError, "OffsetMap not initialised"); return -1; }
    return 0;
}

static PyObject *OffsetMap_clear(OffsetMap *m, PyObject *unused) {
    if (om_ready(m) < 0) return NULL;
    if (m->dirty) memset(m->bytes, 0, (size_t)m->slots * OM_ENTRY);
    m->dirty = 0;
    m->entries = 0;
    m->latest_offset = -1;
    Py_RETURN_NONE;
}

static PyObject *OffsetMap_update_latest_offset(OffsetMap *m, PyObject *arg) {
    long long off = PyLong_AsLongLong(arg);
    if (off == -1 && PyErr_Occurred()) return NULL;
    m->latest_offset = off;
    Py_RETURN_NONE;
}

static PyObject *OffsetMap_put(OffsetMap *m, PyObject *args) {
    Py_buffer key;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*L", &key, &offset)) return NULL;
    if (om_ready(m) < 0) { PyBuffer_Release(&key); return NULL; }
    uint8_t hash[OM_HASH];
    md5((const uint8_t *)key.buf, (size_t)key.len, hash);
    PyBuffer_Release(&key);
    if (om_put(m, hash, offset) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *OffsetMap_get(OffsetMap *m, PyObject *arg) {
    Py_buffer key;
    if (PyObject_GetBuffer(arg, &key, PyBUF_SIMPLE) < 0) return NULL;
    if (om_ready(m) < 0) { PyBuffer_Release(&key); return NULL; }
    uint8_t hash[OM_HASH];
    md5((const uint8_t *)key.buf, (size_t)key.len, hash);
    PyBuffer_Release(&key);
    return PyLong_FromLongLong(om_get(m, hash));
}

/* The digest of the key of every keyed record of recs[0..n) with an offset in [lo, hi], into
 * hashes + 16 * i (short keys two at a time), each one's first slot fetched ahead. */
static void om_digest_keys(const OffsetMap *m, const Rec *recs, Py_ssize_t n, uint8_t *hashes, int64_t lo,
                           int64_t hi) {
    Py_ssize_t pend = -1; /* a short key waiting for a partner */
    for (Py_ssize_t i = 0; i < n; i++) {
        const Rec *r = &recs[i];
        if (!r->key || r->offset < lo || r->offset > hi) continue;
        if (r->klen >= MD5_ONE_BLOCK) {
            md5(r->key, (size_t)r->klen, hashes + i * OM_HASH);
            om_prefetch(m, hashes + i * OM_HASH);
        } else if (pend < 0) {
            pend = i;
        } else {
            md5_two_short(recs[pend].key, (size_t)recs[pend].klen, hashes + pend * OM_HASH, r->key, (size_t)r->klen,
                          hashes + i * OM_HASH);
            om_prefetch(m, hashes + pend * OM_HASH);
            om_prefetch(m, hashes + i * OM_HASH);
            pend = -1;
        }
    }
    if (pend >= 0) {
        md5(recs[pend].key, (size_t)recs[pend].klen, hashes + pend * OM_HASH);
        om_prefetch(m, hashes + pend * OM_HASH);
    }
}

/* Put the keyed records of recs[0..n) at or past `start`, in order, while the map has room
 * (Cleaner.buildOffsetMapForSegment): *records counts the records passed (keyed or not) before
 * the one that found the map full. Returns 1 if the map filled, 0 if every record was passed,
 * -1 on error. The digests are computed first so that the slots can be fetched ahead. */
static int om_map_records(OffsetMap *m, const Rec *recs, Py_ssize_t n, uint8_t *hashes, int64_t start,
                          Py_ssize_t *records) {
    om_digest_keys(m, recs, n, hashes, start, INT64_MAX);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (recs[i].key && recs[i].offset >= start) {
            if (m->entries >= m->max_entries) return 1;
            if (om_put(m, hashes + i * OM_HASH, recs[i].offset) < 0) return -1;
        }
        (*records)++;
    }
    return 0;
}

/* shouldRetainRecord (the cleaner's RecordFilter; the Python twin is
 * storage_core/cleaner/cleaner.py should_retain_record): a record past the map's latest offset is
 * kept; one without a key is dropped; a keyed record is kept if no later offset of its key was
 * mapped, and a tombstone only while its batch's delete horizon allows. `found` is the key's
 * offset in the map (-1 if absent). */
static inline int should_retain(const Rec *r, int64_t found, int64_t latest, int deletes_retained) {
    if (r->offset > latest) return 1;
    if (!r->key) return 0;
    return r->offset >= found && (deletes_retained || r->value != NULL);
}

typedef struct {
    Py_ssize_t retained, tombstones_read, tombstones_kept, keyless_dropped;
} Kept;

/* The retention of every record of a batch into keep[0..n), with its counts. */
static void om_select(const OffsetMap *m, const Rec *recs, Py_ssize_t n, uint8_t *hashes, int deletes_retained,
                      uint8_t *keep, Kept *k) {
    int64_t latest = m->latest_offset;
    memset(k, 0, sizeof *k);
    om_digest_keys(m, recs, n, hashes, INT64_MIN, latest);
    for (Py_ssize_t i = 0; i < n; i++) {
        const Rec *r = &recs[i];
        int64_t found = r->key && r->offset <= latest ? om_get(m, hashes + i * OM_HASH) : -1;
        keep[i] = (uint8_t)should_retain(r, found, latest, deletes_retained);
        if (!r->key && r->offset <= latest) k->keyless_dropped++;
        if (!r->value) {
            k->tombstones_read++;
            if (keep[i]) k->tombstones_kept++;
        }
        k->retained += keep[i];
    }
}

/* map_records(area, count, base_offset, start) -> (records, full)
 *
 * Maps one decompressed records area (a batch the Python side walks itself: compressed, or
 * transactional and not aborted). Every record is checked before any is put. */
static PyObject *OffsetMap_map_records(OffsetMap *m, PyObject *args) {
    Py_buffer area;
    Py_ssize_t count;
    long long base_offset, start;
    if (!PyArg_ParseTuple(args, "y*nLL", &area, &count, &base_offset, &start)) return NULL;
    PyObject *result = NULL;
    Rec *recs;
    uint8_t *hashes, *keep;
    Py_ssize_t records = 0;
    if (om_ready(m) < 0) goto done;
    if (count < 0 || count > area.len) { /* parse_area's errors, before sizing the scratch */
        parse_area((const uint8_t *)area.buf, area.len, count, base_offset, 0, 0, 0, NULL);
        goto done;
    }
    if (om_scratch(m, count, &recs, &hashes, &keep) < 0) goto done;
    if (parse_area((const uint8_t *)area.buf, area.len, count, base_offset, 0, 0, 0, recs) < 0) goto done;
    int full = om_map_records(m, recs, count, hashes, start, &records);
    if (full < 0) goto done;
    result = Py_BuildValue("nO", records, full ? Py_True : Py_False);
done:
    PyBuffer_Release(&area);
    return result;
}

/* select(area, count, base_offset, deletes_retained)
 *   -> (keep: bytes of 0/1 per record, retained, tombstones_read, tombstones_kept, keyless_dropped)
 *
 * shouldRetainRecord over one decompressed records area, against the map's latest offset. */
static PyObject *OffsetMap_select(OffsetMap *m, PyObject *args) {
    Py_buffer area;
    Py_ssize_t count;
    long long base_offset;
    int deletes_retained;
    if (!PyArg_ParseTuple(args, "y*nLp", &area, &count, &base_offset, &deletes_retained)) return NULL;
    PyObject *result = NULL;
    Rec *recs;
    uint8_t *hashes, *keep;
    if (om_ready(m) < 0) goto done;
    if (count < 0 || count > area.len) {
        parse_area((const uint8_t *)area.buf, area.len, count, base_offset, 0, 0, 0, NULL);
        goto done;
    }
    if (om_scratch(m, count, &recs, &hashes, &keep) < 0) goto done;
    if (parse_area((const uint8_t *)area.buf, area.len, count, base_offset, 0, 0, 0, recs) < 0) goto done;
    Kept k;
    om_select(m, recs, count, hashes, deletes_retained, keep, &k);
    result = Py_BuildValue("y#nnnn", (const char *)keep, count, k.retained, k.tombstones_read, k.tombstones_kept,
                           k.keyless_dropped);
done:
    PyBuffer_Release(&area);
    return result;
}

/* retained_records(area, count, base_offset, base_timestamp, log_append_time, keep, delete_horizon)
 *   -> (records area, count, base_timestamp, max_timestamp) or None
 *
 * The kept records (keep: a byte per record, nonzero = kept) re-encoded for a rebuilt batch, as
 * write_kept; None when the Python builder must decide. log_append_time and delete_horizon may be
 * None. */
static PyObject *kernel_retained_records(PyObject *self, PyObject *args) {
    Py_buffer area, keep;
    Py_ssize_t count;
    long long base_offset, base_ts;
    PyObject *lat_obj, *horizon_obj;
    if (!PyArg_ParseTuple(args, "y*nLLOy*O", &area, &count, &base_offset, &base_ts, &lat_obj, &keep, &horizon_obj))
        return NULL;
    PyObject *result = NULL;
    Rec *recs = NULL;
    Buf out = {0};
    long long lat = 0, horizon = 0;
    int use_lat = lat_obj != Py_None, has_horizon = horizon_obj != Py_None;
    if (use_lat && (lat = PyLong_AsLongLong(lat_obj)) == -1 && PyErr_Occurred()) goto done;
    if (has_horizon && (horizon = PyLong_AsLongLong(horizon_obj)) == -1 && PyErr_Occurred()) goto done;
    if (count < 0 || count > area.len || keep.len != count) {
        if (keep.len != count && count >= 0 && count <= area.len)
            PyErr_SetString(PyExc_ValueError, "retained_records: keep must have a byte per record");
        else
            parse_area((const uint8_t *)area.buf, area.len, count, base_offset, base_ts, 0, 0, NULL);
        goto done;
    }
    recs = (Rec *)malloc((size_t)(count ? count : 1) * sizeof(Rec));
    if (!recs) { PyErr_NoMemory(); goto done; }
    if (parse_area((const uint8_t *)area.buf, area.len, count, base_offset, base_ts, use_lat, lat, recs) < 0) goto done;
    int64_t new_base = 0, max_ts = 0;
    int32_t n = 0;
    int rc = write_kept(&out, recs, count, (const uint8_t *)keep.buf, has_horizon, horizon, use_lat, lat, &new_base,
                        &max_ts, &n);
    if (rc < 0) goto done;
    if (rc > 0) { result = Py_None; Py_INCREF(result); goto done; }
    result = Py_BuildValue("y#iLL", out.data ? (const char *)out.data : "", out.len, n, (long long)new_base,
                           (long long)max_ts);
done:
    free(recs);
    buf_free(&out);
    PyBuffer_Release(&area);
    PyBuffer_Release(&keep);
    return result;
}

/* Why map_run and clean_run stopped: the Python side acts on the batch at the stop position. */
enum {
    CLEAN_END = 0,    /* every byte consumed */
    CLEAN_SHORT = 1,  /* fewer bytes left than the next batch needs (read more, or a partial tail) */
    CLEAN_BATCH = 2,  /* the next batch goes through Python: not v2, a bad header, a codec, a control or
                       * transactional batch, one of the `stops`, records the kernel refused */
    CLEAN_FULL = 3,   /* map_run: the map filled in the batch at the stop position */
    CLEAN_LIMIT = 4,  /* map_run: the batch at the stop position starts at or past `end` */
};

/* The v2 batch at data[pos]: its size (LOG_OVERHEAD included) and CLEAN_END, or why the run stops. */
static int run_batch_at(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t *total) {
    int at = v2_batch_at(data, len, pos, total);
    if (at != V2_WHOLE) return at == V2_SHORT ? CLEAN_SHORT : CLEAN_BATCH;
    int16_t attributes = (int16_t)be16(data + pos + 21);
    if (attributes & (ATTR_CODEC_MASK | ATTR_CONTROL | ATTR_TRANSACTIONAL)) return CLEAN_BATCH;
    return CLEAN_END;
}

/* map_run(data, pos, start, end) -> (pos, why, records, bytes)
 *
 * buildOffsetMap over the uncompressed, non-transactional data batches from data[pos]: puts the
 * keyed records at or past `start` and, after each batch whose last offset reaches `start`,
 * sets the latest offset to it. Stops (see CLEAN_*) at the first batch for Python, at a batch
 * starting at or past `end`, or in the batch that fills the map - which counts in `bytes` (the
 * bytes of the batches walked) but whose last offset does not become the latest: the pass ends
 * before it. `records` counts the records walked. */
static PyObject *OffsetMap_map_run(OffsetMap *m, PyObject *args) {
    PyObject *data_obj;
    Py_ssize_t pos;
    long long start, end;
    if (!PyArg_ParseTuple(args, "OnLL", &data_obj, &pos, &start, &end)) return NULL;
    if (om_ready(m) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *data = (const uint8_t *)view.buf;
    Py_ssize_t len = view.len, records = 0, bytes = 0;
    PyObject *result = NULL;
    int why = CLEAN_END;
    if (pos < 0 || pos > len) { PyErr_SetString(PyExc_ValueError, "map_run: pos outside the data"); goto done; }
    while (pos < len) {
        Py_ssize_t total = 0;
        why = run_batch_at(data, len, pos, &total);
        if (why != CLEAN_END) break;
        const uint8_t *b = data + pos;
        int64_t base_offset = (int64_t)be64(b);
        if (base_offset >= end) { why = CLEAN_LIMIT; break; }
        int64_t last_offset = (int64_t)((uint64_t)base_offset + (uint64_t)(int64_t)(int32_t)be32(b + 23));
        Py_ssize_t count = (int32_t)be32(b + 57), area_len = total - V2_HEADER_BYTES;
        if (count < 0 || count > area_len) { why = CLEAN_BATCH; break; }
        Rec *recs;
        uint8_t *hashes, *keep;
        if (om_scratch(m, count, &recs, &hashes, &keep) < 0) goto done;
        if (parse_area(b + V2_HEADER_BYTES, area_len, count, base_offset, 0, 0, 0, recs) < 0) {
            if (!PyErr_ExceptionMatches(InvalidRecordError)) goto done;
            PyErr_Clear();
            why = CLEAN_BATCH;
            break;
        }
        int full = om_map_records(m, recs, count, hashes, start, &records);
        if (full < 0) goto done;
        bytes += total;
        if (full) { why = CLEAN_FULL; break; }
        if (last_offset >= start) m->latest_offset = last_offset;
        pos += total;
    }
    result = Py_BuildValue("ninn", pos, why, records, bytes);
done:
    PyBuffer_Release(&view);
    return result;
}

static int i64_in(const int64_t *sorted, Py_ssize_t n, int64_t v) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && sorted[lo] == v;
}

/* The 61-byte header of a rebuilt batch (MemoryRecordsBuilder; the Python twin is
 * records.write_batch_header through build_batch) at h, for a batch of `total` bytes built from
 * the batch at orig: the same base offset, leader epoch, last offset delta and producer fields;
 * attributes rebuilt from the codec, timestamp type, transactional and control flags; the CRC. */
static void write_rebuilt_header(uint8_t *h, const uint8_t *orig, Py_ssize_t total, int has_horizon, int64_t base_ts,
                                 int64_t max_ts, int32_t count) {
    int16_t attrs = (int16_t)be16(orig + 21);
    uint16_t a = (uint16_t)(attrs & (ATTR_CODEC_MASK | ATTR_LOG_APPEND_TIME | ATTR_TRANSACTIONAL | ATTR_CONTROL));
    if (has_horizon) a |= 0x40;
    write_v2_header(h, total, (int64_t)be64(orig), (int32_t)be32(orig + 12), a, (int32_t)be32(orig + 23), base_ts,
                    max_ts, (int64_t)be64(orig + 43), (int16_t)be16(orig + 51), (int32_t)be32(orig + 53), count);
}

/* clean_run(data, pos, now, delete_retention_ms, stops)
 *   -> (pos, why, out, meta, (batches, bytes, records, retained, keyless_dropped, tombstones_read,
 *       tombstones_kept, copied, rebuilt, removed))
 *
 * The recopy (MemoryRecords.filterTo with the cleaner's filter) of the uncompressed,
 * non-transactional data batches from data[pos], against the map and its latest offset: per
 * batch, shouldRetainRecord over its records; a batch that keeps them all is copied byte for byte
 * unless it keeps a tombstone and has no delete horizon yet; one that keeps some is rebuilt
 * (write_kept, write_rebuilt_header; the horizon now + delete_retention_ms if it keeps a tombstone
 * and had none); one that keeps none is removed. A batch whose last offset is in `stops` (a
 * sorted int64 buffer: the producers' last data offsets and the last offset before the first
 * uncleanable offset, whose empty batches are kept as headers) goes to Python, as do control and
 * transactional batches (CleanedTransactionMetadata), compressed batches and anything odd.
 * `out` holds the batches to write, `meta` an int64 (last offset, max timestamp, size) per batch. */
static PyObject *OffsetMap_clean_run(OffsetMap *m, PyObject *args) {
    PyObject *data_obj, *stops_obj;
    Py_ssize_t pos;
    long long now, retention;
    if (!PyArg_ParseTuple(args, "OnLLO", &data_obj, &pos, &now, &retention, &stops_obj)) return NULL;
    if (om_ready(m) < 0) return NULL;
    Py_buffer view, stops;
    if (PyObject_GetBuffer(data_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(stops_obj, &stops, PyBUF_SIMPLE) < 0) { PyBuffer_Release(&view); return NULL; }
    const uint8_t *data = (const uint8_t *)view.buf;
    const int64_t *stop_offsets = (const int64_t *)stops.buf;
    Py_ssize_t nstops = stops.len / 8, len = view.len;
    Py_ssize_t st[10] = {0};
    Buf out = {0}, meta = {0};
    PyObject *result = NULL;
    int why = CLEAN_END;
    if (pos < 0 || pos > len) { PyErr_SetString(PyExc_ValueError, "clean_run: pos outside the data"); goto done; }
    while (pos < len) {
        Py_ssize_t total = 0;
        why = run_batch_at(data, len, pos, &total);
        if (why != CLEAN_END) break;
        const uint8_t *b = data + pos;
        int64_t base_offset = (int64_t)be64(b);
        int64_t last_offset = (int64_t)((uint64_t)base_offset + (uint64_t)(int64_t)(int32_t)be32(b + 23));
        Py_ssize_t count = (int32_t)be32(b + 57), area_len = total - V2_HEADER_BYTES;
        if (count < 0 || count > area_len || i64_in(stop_offsets, nstops, last_offset)) { why = CLEAN_BATCH; break; }
        int16_t attributes = (int16_t)be16(b + 21);
        int64_t base_ts = (int64_t)be64(b + 27), max_ts = (int64_t)be64(b + 35);
        int use_lat = (attributes & ATTR_LOG_APPEND_TIME) != 0, has_horizon = (attributes & 0x40) != 0;
        Rec *recs;
        uint8_t *hashes, *keep;
        if (om_scratch(m, count, &recs, &hashes, &keep) < 0) goto done;
        if (parse_area(b + V2_HEADER_BYTES, area_len, count, base_offset, base_ts, use_lat, max_ts, recs) < 0) {
            if (!PyErr_ExceptionMatches(InvalidRecordError)) goto done;
            PyErr_Clear();
            why = CLEAN_BATCH;
            break;
        }
        Kept k;
        om_select(m, recs, count, hashes, !has_horizon || now < base_ts, keep, &k);
        int need_horizon = k.tombstones_kept > 0 && !has_horizon;
        Py_ssize_t out_start = out.len;
        int64_t out_max_ts = max_ts;
        if (k.retained == count && k.retained > 0 && !need_horizon) {
            if (buf_put(&out, b, total) < 0) goto done;
            st[7]++;
        } else if (k.retained > 0) {
            int64_t horizon = need_horizon ? (int64_t)((uint64_t)now + (uint64_t)retention) : base_ts;
            int64_t new_base = 0;
            int32_t n = 0;
            if (buf_reserve(&out, V2_HEADER_BYTES) < 0) goto done;
            out.len += V2_HEADER_BYTES;
            int rc = write_kept(&out, recs, count, keep, need_horizon || has_horizon, horizon, use_lat, max_ts,
                                &new_base, &out_max_ts, &n);
            if (rc < 0) goto done;
            if (rc > 0 || out.len - out_start > INT32_LIMIT) { out.len = out_start; why = CLEAN_BATCH; break; }
            write_rebuilt_header(out.data + out_start, b, out.len - out_start, need_horizon || has_horizon, new_base,
                                 out_max_ts, n);
            st[8]++;
        } else {
            st[9]++;
        }
        if (out.len > out_start) {
            int64_t row[3] = {last_offset, out_max_ts, (int64_t)(out.len - out_start)};
            if (buf_put(&meta, row, sizeof row) < 0) goto done;
        }
        st[0]++;
        st[1] += total;
        st[2] += count;
        st[3] += k.retained;
        st[4] += k.keyless_dropped;
        st[5] += k.tombstones_read;
        st[6] += k.tombstones_kept;
        pos += total;
    }
    {
        PyObject *o = take_buffer(&out), *mt = o ? take_buffer(&meta) : NULL;
        if (o && mt)
            result = Py_BuildValue("niNN(nnnnnnnnnn)", pos, why, o, mt, st[0], st[1], st[2], st[3], st[4], st[5], st[6],
                                   st[7], st[8], st[9]);
        else { Py_XDECREF(o); Py_XDECREF(mt); }
    }
done:
    buf_free(&out);
    buf_free(&meta);
    PyBuffer_Release(&view);
    PyBuffer_Release(&stops);
    return result;
}

static PyObject *OffsetMap_get_memory_bytes(OffsetMap *m, void *c) { (void)c; return PyLong_FromSsize_t(m->memory_bytes); }
static PyObject *OffsetMap_get_slots(OffsetMap *m, void *c) { (void)c; return PyLong_FromLong(m->slots); }
static PyObject *OffsetMap_get_max_entries(OffsetMap *m, void *c) { (void)c; return PyLong_FromLong(m->max_entries); }
static PyObject *OffsetMap_get_size(OffsetMap *m, void *c) { (void)c; return PyLong_FromLong(m->entries); }
static PyObject *OffsetMap_get_latest_offset(OffsetMap *m, void *c) { (void)c; return PyLong_FromLongLong(m->latest_offset); }
static PyObject *OffsetMap_get_is_full(OffsetMap *m, void *c) { (void)c; return PyBool_FromLong(m->entries >= m->max_entries); }
static PyObject *OffsetMap_get_utilization(OffsetMap *m, void *c) {
    (void)c;
    return PyFloat_FromDouble(m->slots ? (double)m->entries / (double)m->slots : 0.0);
}

static PyMethodDef OffsetMap_methods[] = {
    {"clear", (PyCFunction)OffsetMap_clear, METH_NOARGS, "clear(): no entries, latest offset -1"},
    {"update_latest_offset", (PyCFunction)OffsetMap_update_latest_offset, METH_O, "update_latest_offset(offset)"},
    {"put", (PyCFunction)OffsetMap_put, METH_VARARGS, "put(key, offset)"},
    {"get", (PyCFunction)OffsetMap_get, METH_O, "get(key) -> the key's offset, or -1"},
    {"map_records", (PyCFunction)OffsetMap_map_records, METH_VARARGS,
     "map_records(area, count, base_offset, start) -> (records, full)"},
    {"select", (PyCFunction)OffsetMap_select, METH_VARARGS,
     "select(area, count, base_offset, deletes_retained) -> (keep, retained, tombstones_read,"
     " tombstones_kept, keyless_dropped)"},
    {"map_run", (PyCFunction)OffsetMap_map_run, METH_VARARGS, "map_run(data, pos, start, end) -> (pos, why, records, bytes)"},
    {"clean_run", (PyCFunction)OffsetMap_clean_run, METH_VARARGS,
     "clean_run(data, pos, now, delete_retention_ms, stops) -> (pos, why, out, meta, stats)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef OffsetMap_getset[] = {
    {"memory_bytes", (getter)OffsetMap_get_memory_bytes, NULL, NULL, NULL},
    {"slots", (getter)OffsetMap_get_slots, NULL, NULL, NULL},
    {"max_entries", (getter)OffsetMap_get_max_entries, NULL, NULL, NULL},
    {"size", (getter)OffsetMap_get_size, NULL, NULL, NULL},
    {"latest_offset", (getter)OffsetMap_get_latest_offset, NULL, NULL, NULL},
    {"is_full", (getter)OffsetMap_get_is_full, NULL, NULL, NULL},
    {"utilization", (getter)OffsetMap_get_utilization, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject OffsetMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "storage_core.record._kernel.OffsetMap",
    .tp_basicsize = sizeof(OffsetMap),
    .tp_dealloc = (destructor)OffsetMap_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Kafka's SkimpyOffsetMap: MD5 digest of a key -> its latest offset, in memory_bytes / 24 slots.",
    .tp_methods = OffsetMap_methods,
    .tp_getset = OffsetMap_getset,
    .tp_init = (initproc)OffsetMap_init,
    .tp_new = PyType_GenericNew,
};


static PyMethodDef kernel_functions[] = {
    {"encode_v2", kernel_encode_v2, METH_VARARGS,
     "encode_v2(keys, values, timestamps, header_counts, header_keys, header_values, start, stop, max_bytes)"
     " -> (records, end_row, first_ts, max_ts)"},
    {"encode_v2_batches", kernel_encode_v2_batches, METH_VARARGS,
     "encode_v2_batches(keys, values, timestamps, header_counts, header_keys, header_values, start, stop, max_bytes,"
     " header) -> (list of records areas, or of whole batches when header is (base_offset, leader_epoch,"
     " attributes); int64 meta buffer of (end_row, first_ts, max_ts) per batch)"},
    {"crc32c", kernel_crc32c, METH_VARARGS, "crc32c(data, software=False) -> CRC-32C of a buffer"},
    {"lz4_frame_decompress", kernel_lz4_frame_decompress, METH_O,
     "lz4_frame_decompress(data) -> bytes | None: one LZ4 frame decoded, or None where the kernel declines it"},
    {"murmur2", kernel_murmur2, METH_VARARGS, "murmur2(keys, n) -> int32 buffer of Kafka's murmur2 hashes"},
    {"md5", kernel_md5, METH_VARARGS, "md5(data) -> the 16-byte MD5 digest (RFC 1321)"},
    {"retained_records", kernel_retained_records, METH_VARARGS,
     "retained_records(area, count, base_offset, base_timestamp, log_append_time, keep, delete_horizon)"
     " -> (records area, count, base_timestamp, max_timestamp) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "storage_core.record._kernel", "klog's native record kernel.", -1, kernel_functions,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    if (PyType_Ready(&OwnedBufferType) < 0 || PyType_Ready(&RecordsBuilderType) < 0 ||
        PyType_Ready(&TxnFilterType) < 0 || PyType_Ready(&OffsetMapType) < 0)
        return NULL;
    PyObject *errors = PyImport_ImportModule("storage_core.errors");
    if (!errors) return NULL;
    InvalidRecordError = PyObject_GetAttrString(errors, "InvalidRecordError");
    KlogError = PyObject_GetAttrString(errors, "KlogError");
    Py_DECREF(errors);
    if (!InvalidRecordError || !KlogError) return NULL;
    crc32c_init();
    PyObject *m = PyModule_Create(&kernel_module);
    if (!m) return NULL;
    Py_INCREF(&RecordsBuilderType);
    if (PyModule_AddObject(m, "RecordsBuilder", (PyObject *)&RecordsBuilderType) < 0) {
        Py_DECREF(&RecordsBuilderType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&TxnFilterType);
    if (PyModule_AddObject(m, "TxnFilter", (PyObject *)&TxnFilterType) < 0) {
        Py_DECREF(&TxnFilterType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&OffsetMapType);
    if (PyModule_AddObject(m, "OffsetMap", (PyObject *)&OffsetMapType) < 0) {
        Py_DECREF(&OffsetMapType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "CLEAN_END", CLEAN_END) < 0 || PyModule_AddIntConstant(m, "CLEAN_SHORT", CLEAN_SHORT) < 0 ||
        PyModule_AddIntConstant(m, "CLEAN_BATCH", CLEAN_BATCH) < 0 || PyModule_AddIntConstant(m, "CLEAN_FULL", CLEAN_FULL) < 0 ||
        PyModule_AddIntConstant(m, "CLEAN_LIMIT", CLEAN_LIMIT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "TXN_SKIP", TXN_SKIP) < 0 || PyModule_AddIntConstant(m, "TXN_ADMIT", TXN_ADMIT) < 0 ||
        PyModule_AddIntConstant(m, "TXN_MISSING_ENTRY", TXN_MISSING_ENTRY) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

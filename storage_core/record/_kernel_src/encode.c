/*
 * encode.c: the v2 encoder - Arrow columns to records areas or whole batches, as
 * MemoryRecordsBuilder and DefaultRecord.writeTo write them (the Python twin is
 * storage_core/record/columnar.py _py_encode_v2_batches) - and murmur2, the key hash of Kafka's
 * default partitioner (Utils.murmur2). The loops over rows run without the GIL: the columns are
 * buffers held for the call, the output is memory no other thread can see yet.
 */
#include "kernel.h"

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

/* Row i of a column: sets *p (NULL for null) and *n; -1 (KERR_VALUE) if the buffers lie. */
static inline int bincol_row(const BinCol *c, Py_ssize_t i, const uint8_t **p, int32_t *n) {
    Py_ssize_t j = c->offset + i;
    if (c->has_validity) {
        if ((j >> 3) >= c->validity.len) return kerr_value("validity bitmap too short");
        if (!(((const uint8_t *)c->validity.buf)[j >> 3] & (1u << (j & 7)))) { *p = NULL; *n = -1; return 0; }
    }
    const int32_t *offs = (const int32_t *)c->offsets.buf;
    int32_t a = offs[j], b = offs[j + 1];
    if (a < 0 || b < a || b > c->data.len) return kerr_value("binary offsets out of range");
    *p = (const uint8_t *)c->data.buf + a;
    *n = b - a;
    return 0;
}

static inline uint8_t *w_be64(uint8_t *w, uint64_t v) { for (int i = 7; i >= 0; i--) *w++ = (uint8_t)(v >> (8 * i)); return w; }
static inline uint8_t *w_be32(uint8_t *w, uint32_t v) { for (int i = 3; i >= 0; i--) *w++ = (uint8_t)(v >> (8 * i)); return w; }
static inline uint8_t *w_be16(uint8_t *w, uint16_t v) { *w++ = (uint8_t)(v >> 8); *w++ = (uint8_t)v; return w; }

/* The 61-byte v2 batch header (see add_v2_run's layout) at h, for a batch of `total` bytes whose
 * records follow it: every field, then the CRC-32C over attributes .. the end of the records.
 * The Python twin is records.write_batch_header. */
void write_v2_header(uint8_t *h, Py_ssize_t total, int64_t base_offset, int32_t leader_epoch,
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
 * with base timestamp base_ts; h is the row's first header entry. -1 with an error recorded. */
static inline Py_ssize_t row_size(const EncCols *c, Py_ssize_t row, Py_ssize_t first, int64_t base_ts, Py_ssize_t h) {
    const uint8_t *kp = NULL, *vp = NULL;
    int32_t kn = -1, vn = -1;
    if (c->have_keys && bincol_row(&c->keys, row, &kp, &kn) < 0) return -1;
    if (bincol_row(&c->values, row, &vp, &vn) < 0) return -1;
    int32_t nh = c->have_headers ? c->hcv[row] : 0;
    if (nh < 0 || (c->have_headers && (h + nh > c->hkeys.length || h + nh > c->hvals.length)))
        return kerr_value("header counts outside the header columns");
    uint64_t tsd = zz64((int64_t)((uint64_t)c->tsv[row] - (uint64_t)base_ts));
    Py_ssize_t body = 1 + uleb_size(tsd) + uleb_size(zz32((int32_t)(row - first))) + uleb_size(zz32(kn)) +
                      (kn > 0 ? kn : 0) + uleb_size(zz32(vn)) + (vn > 0 ? vn : 0) + uleb_size(zz32(nh));
    for (int32_t k = 0; k < nh; k++) {
        const uint8_t *hp = NULL, *hv = NULL;
        int32_t hn = 0, hvn = -1;
        if (bincol_row(&c->hkeys, h + k, &hp, &hn) < 0 || bincol_row(&c->hvals, h + k, &hv, &hvn) < 0) return -1;
        if (!hp) return kerr_value("Invalid null header key found in headers");
        body += uleb_size(zz32(hn)) + hn + uleb_size(zz32(hvn)) + (hvn > 0 ? hvn : 0);
    }
    if (body > INT32_LIMIT - 5) return kerr_overflow("record larger than 2 GiB");
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

/* One batch of encode_v2_batches, as pass 1 cuts it. */
typedef struct {
    Py_ssize_t first, end;  /* rows [first, end) */
    Py_ssize_t h0;          /* the first header entry of row `first` */
    Py_ssize_t area;        /* records area bytes */
    int64_t base_ts, max_ts;
} EncBatch;

/* Pass 1 (no GIL): cut rows [start, stop) into batches of at most max_bytes of records (at least
 * one row each) into cuts (EncBatch rows). 0, or -1 with an error recorded. */
static int cut_batches(const EncCols *c, Py_ssize_t start, Py_ssize_t stop, Py_ssize_t max_bytes, Buf *cuts) {
    Py_ssize_t h = 0; /* the first header entry of row `row` */
    if (c->have_headers) for (Py_ssize_t i = 0; i < start; i++) h += c->hcv[i];
    Py_ssize_t row = start;
    while (row < stop) {
        EncBatch e = {row, row, h, 0, c->tsv[row], c->tsv[row]};
        for (; row < stop; row++) {
            Py_ssize_t body = row_size(c, row, e.first, e.base_ts, h);
            if (body < 0) return -1;
            Py_ssize_t total = uleb_size(zz32((int32_t)body)) + body;
            if (row > e.first && e.area + total > max_bytes) break;
            if (e.area + total > MAX_RECORDS_AREA) return kerr_overflow("record batch larger than 2 GiB");
            e.area += total;
            if (c->have_headers) h += c->hcv[row];
            if (c->tsv[row] > e.max_ts) e.max_ts = c->tsv[row];
        }
        e.end = row;
        if (buf_put(cuts, &e, sizeof e) < 0) return -1;
    }
    return 0;
}

/* Pass 2 (no GIL): write batch e at base (hsize header bytes first, filled if with_header).
 * 0, or -1 with an error recorded. */
static int write_batch(const EncCols *c, const EncBatch *e, uint8_t *base, Py_ssize_t hsize, Py_ssize_t start,
                       long long base_offset, int leader_epoch, int attributes) {
    uint8_t *w = base + hsize;
    Py_ssize_t h = e->h0;
    for (Py_ssize_t r = e->first; r < e->end; r++) {
        Py_ssize_t body = row_size(c, r, e->first, e->base_ts, h); /* cannot fail: pass 1 checked it */
        w = row_write(c, w, r, e->first, e->base_ts, h, (int32_t)body);
        if (c->have_headers) h += c->hcv[r];
    }
    if (w != base + hsize + e->area) return kerr_value("encode_v2_batches: size mismatch (a kernel bug)");
    if (hsize) {
        int32_t count = (int32_t)(e->end - e->first);
        /* no producer: id -1, epoch -1, base sequence -1 */
        write_v2_header(base, hsize + e->area, (int64_t)(base_offset + (long long)(e->first - start)),
                        (int32_t)leader_epoch, (uint16_t)attributes, count - 1, e->base_ts, e->max_ts, -1, -1, -1, count);
    }
    return 0;
}

/* encode_v2_batches(keys, values, timestamps, header_counts, header_keys, header_values, start, stop, max_bytes,
 *                   header) -> (list of bytes, meta)
 *
 * Encodes rows [start, stop) as consecutive v2 batches in one call. A batch is cut before the row
 * that would take its records area past max_bytes (at least one row per batch; max_bytes is
 * capped so a batch fits batchLength). Offset deltas start at 0 and timestamp deltas are relative
 * to the first row of each batch.
 *
 * header None: each bytes object is a records area (for a codec to compress).
 * header (base_offset, partition_leader_epoch, attributes): each is a whole batch, the 61-byte
 * header filled (base offset = base_offset + row - start, producer fields -1) and its CRC-32C.
 *
 * meta: int64 buffer of 3 entries per batch: end row (exclusive), first timestamp, max timestamp.
 *
 * Three steps: the batches are cut without the GIL, their bytes objects made with it, and
 * written without it (into memory only this call holds). */
PyObject *kernel_encode_v2_batches(PyObject *self, PyObject *args) {
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
    Buf cuts = {0}, meta = {0};
    uint8_t **dest = NULL;
    if (enccols_get(&c, kobj, vobj, tsobj, hcobj, hkobj, hvobj, start, stop) < 0) goto done;
    if (with_header && stop > start && base_offset > 0 && (long long)(stop - start - 1) > INT64_MAX - base_offset) {
        PyErr_SetString(PyExc_OverflowError, "encode: offsets past 2**63 - 1");
        goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cut_batches(&c, start, stop, max_bytes, &cuts);
    Py_END_ALLOW_THREADS
    if (rc < 0) { kerr_raise("encode_v2_batches"); goto done; }
    const EncBatch *batches = (const EncBatch *)cuts.data;
    Py_ssize_t n = cuts.len / (Py_ssize_t)sizeof(EncBatch), hsize = with_header ? V2_HEADER_BYTES : 0;
    if (!(list = PyList_New(n))) goto done;
    if (!(dest = (uint8_t **)malloc(sizeof(uint8_t *) * (size_t)(n ? n : 1)))) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *bytes = PyBytes_FromStringAndSize(NULL, hsize + batches[i].area);
        if (!bytes) goto done;
        PyList_SET_ITEM(list, i, bytes);
        dest[i] = (uint8_t *)PyBytes_AS_STRING(bytes);
        int64_t m[3] = {(int64_t)batches[i].end, batches[i].base_ts, batches[i].max_ts};
        if (buf_put(&meta, m, sizeof m) < 0) { kerr_raise("encode_v2_batches"); goto done; }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && rc == 0; i++)
        rc = write_batch(&c, &batches[i], dest[i], hsize, start, base_offset, leader_epoch, attributes);
    Py_END_ALLOW_THREADS
    if (rc < 0) { kerr_raise("encode_v2_batches"); goto done; }
    {
        PyObject *mb = take_buffer(&meta);
        if (mb) result = Py_BuildValue("ON", list, mb);
    }
done:
    Py_XDECREF(list);
    free(dest);
    buf_free(&cuts);
    buf_free(&meta);
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

PyObject *kernel_murmur2(PyObject *self, PyObject *args) {
    PyObject *kobj;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On", &kobj, &n)) return NULL;
    BinCol keys;
    if (bincol_get(kobj, &keys, "key") < 0) return NULL;
    if (n < 0 || n > keys.length) { bincol_release(&keys); PyErr_SetString(PyExc_ValueError, "murmur2: n outside the column"); return NULL; }
    Buf out = {0};
    int rc = buf_reserve(&out, 4 * n + 1);
    if (rc == 0) {
        int32_t *o = (int32_t *)out.data;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            const uint8_t *p = NULL;
            int32_t len = 0;
            if ((rc = bincol_row(&keys, i, &p, &len)) < 0) break;
            o[i] = p ? murmur2(p, len) : 0;
        }
        Py_END_ALLOW_THREADS
    }
    bincol_release(&keys);
    if (rc < 0) { buf_free(&out); return kerr_raise("murmur2"); }
    out.len = 4 * n;
    return take_buffer(&out);
}


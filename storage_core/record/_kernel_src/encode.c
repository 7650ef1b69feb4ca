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


/* One source of rows: prepared Arrow columns (storage_core.record.columnar.EncodeColumns). */
typedef struct {
    BinCol keys, values, hkeys, hvals;
    Py_buffer ts, hc;
    int have_keys, have_headers;
    const int64_t *tsv;
    const int32_t *hcv;
    Py_ssize_t rows;   /* rows the columns hold */
    int64_t *hstart;   /* with headers: the first header entry of each row (rows + 1 entries) */
} EncCols;

static void enccols_release(EncCols *c) {
    if (c->have_keys) bincol_release(&c->keys);
    bincol_release(&c->values);
    if (c->ts.obj) PyBuffer_Release(&c->ts);
    if (c->hc.obj) PyBuffer_Release(&c->hc);
    if (c->have_headers) { bincol_release(&c->hkeys); bincol_release(&c->hvals); }
    free(c->hstart);
    memset(c, 0, sizeof *c);
}

/* The columns of one source; its rows are those of the timestamps, which every other column must
 * cover. The header prefix sums are made here (GIL held, but no Python object is touched). */
static int enccols_get(EncCols *c, PyObject *kobj, PyObject *vobj, PyObject *tsobj, PyObject *hcobj, PyObject *hkobj,
                       PyObject *hvobj) {
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
    c->rows = c->ts.len / 8; /* exactly the source's rows (a column's buffers may hold more: a slice) */
    if (c->values.length < c->rows || (c->have_keys && c->keys.length < c->rows) ||
        (c->have_headers && c->hc.len / 4 < c->rows)) {
        PyErr_SetString(PyExc_ValueError, "encode: a column is shorter than the timestamps");
        return -1;
    }
    c->tsv = (const int64_t *)c->ts.buf;
    c->hcv = c->have_headers ? (const int32_t *)c->hc.buf : NULL;
    if (c->have_headers) {
        if (!(c->hstart = (int64_t *)malloc(sizeof(int64_t) * (size_t)(c->rows + 1)))) { PyErr_NoMemory(); return -1; }
        int64_t h = 0;
        for (Py_ssize_t i = 0; i < c->rows; i++) {
            c->hstart[i] = h;
            if (c->hcv[i] < 0) { PyErr_SetString(PyExc_ValueError, "encode: a negative header count"); return -1; }
            h += c->hcv[i];
        }
        c->hstart[c->rows] = h;
    }
    return 0;
}

/* The rows to encode: rows [start, stop) of src[0], or (which != NULL) row local[r] of source
 * which[r] for r in [start, stop) - a partition's rows picked from many Spark batches in place. */
typedef struct {
    EncCols *src;
    Py_ssize_t nsrc;
    const int32_t *which;
    const int64_t *local;
    Py_ssize_t start, stop;
    const int64_t *offs; /* each row's offset (rows increasing), or NULL: consecutive from the first row */
} EncRows;

/* The offset delta of row r in a batch whose first row is `first`. */
static inline int64_t row_delta(const EncRows *R, Py_ssize_t r, Py_ssize_t first) {
    return R->offs ? R->offs[r] - R->offs[first] : (int64_t)(r - first);
}

/* Row r of rows: its source (NULL if which/local point outside the sources) and its row there. */
static inline const EncCols *row_at(const EncRows *R, Py_ssize_t r, Py_ssize_t *i) {
    if (!R->which) { *i = r; return &R->src[0]; }
    int32_t s = R->which[r];
    int64_t j = R->local[r];
    if (s < 0 || s >= R->nsrc || j < 0 || j >= R->src[s].rows) return NULL;
    *i = (Py_ssize_t)j;
    return &R->src[s];
}

/* The body size of row i of c (its length varint not included) at offset delta `delta` in a batch
 * with base timestamp base_ts. -1 with an error recorded. */
static inline Py_ssize_t row_size(const EncCols *c, Py_ssize_t i, int32_t delta, int64_t base_ts) {
    const uint8_t *kp = NULL, *vp = NULL;
    int32_t kn = -1, vn = -1;
    if (c->have_keys && bincol_row(&c->keys, i, &kp, &kn) < 0) return -1;
    if (bincol_row(&c->values, i, &vp, &vn) < 0) return -1;
    int32_t nh = c->have_headers ? c->hcv[i] : 0;
    Py_ssize_t h = c->have_headers ? (Py_ssize_t)c->hstart[i] : 0;
    if (nh < 0 || (c->have_headers && (h + nh > c->hkeys.length || h + nh > c->hvals.length)))
        return kerr_value("header counts outside the header columns");
    uint64_t tsd = zz64((int64_t)((uint64_t)c->tsv[i] - (uint64_t)base_ts));
    Py_ssize_t body = 1 + uleb_size(tsd) + uleb_size(zz32(delta)) + uleb_size(zz32(kn)) +
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

/* Write row i of c (already sized and checked by row_size) at w; returns the end. */
static inline uint8_t *row_write(const EncCols *c, uint8_t *w, Py_ssize_t i, int32_t delta, int64_t base_ts,
                                 int32_t body) {
    const uint8_t *kp = NULL, *vp = NULL;
    int32_t kn = -1, vn = -1;
    if (c->have_keys) bincol_row(&c->keys, i, &kp, &kn);
    bincol_row(&c->values, i, &vp, &vn);
    int32_t nh = c->have_headers ? c->hcv[i] : 0;
    Py_ssize_t h = c->have_headers ? (Py_ssize_t)c->hstart[i] : 0;
    uint64_t tsd = zz64((int64_t)((uint64_t)c->tsv[i] - (uint64_t)base_ts));
    w = w_uleb(w, zz32(body));
    *w++ = 0; /* attributes */
    w = w_uleb(w, tsd);
    w = w_uleb(w, zz32(delta));
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

/* One batch, as pass 1 cuts it. */
typedef struct {
    Py_ssize_t first, end;  /* rows [first, end) */
    Py_ssize_t area;        /* records area bytes */
    int64_t base_ts, max_ts;
} EncBatch;

/* Pass 1 (no GIL): cut the rows into batches of at most max_bytes of records (at least one row
 * each) into cuts (EncBatch rows). 0, or -1 with an error recorded. */
static int cut_batches(const EncRows *R, Py_ssize_t max_bytes, Buf *cuts) {
    Py_ssize_t row = R->start, i;
    while (row < R->stop) {
        const EncCols *c = row_at(R, row, &i);
        if (!c) return kerr_value("a picked row lies outside its source");
        EncBatch e = {row, row, 0, c->tsv[i], c->tsv[i]};
        for (; row < R->stop; row++) {
            if (!(c = row_at(R, row, &i))) return kerr_value("a picked row lies outside its source");
            int64_t delta = row_delta(R, row, e.first);
            if (row > e.first && delta > INT32_LIMIT) break; /* an offset delta is an int32 */
            Py_ssize_t body = row_size(c, i, (int32_t)delta, e.base_ts);
            if (body < 0) return -1;
            Py_ssize_t total = uleb_size(zz32((int32_t)body)) + body;
            if (row > e.first && e.area + total > max_bytes) break;
            if (e.area + total > MAX_RECORDS_AREA) return kerr_overflow("record batch larger than 2 GiB");
            e.area += total;
            if (c->tsv[i] > e.max_ts) e.max_ts = c->tsv[i];
        }
        e.end = row;
        if (buf_put(cuts, &e, sizeof e) < 0) return -1;
    }
    return 0;
}

/* Pass 2 (no GIL): write batch e at base (hsize header bytes first, filled if hsize).
 * 0, or -1 with an error recorded. */
static int write_batch(const EncRows *R, const EncBatch *e, uint8_t *base, Py_ssize_t hsize,
                       long long base_offset, int leader_epoch, int attributes) {
    uint8_t *w = base + hsize;
    Py_ssize_t i;
    for (Py_ssize_t r = e->first; r < e->end; r++) {
        const EncCols *c = row_at(R, r, &i); /* cannot fail: pass 1 checked it */
        int32_t delta = (int32_t)row_delta(R, r, e->first);
        Py_ssize_t body = row_size(c, i, delta, e->base_ts);
        w = row_write(c, w, i, delta, e->base_ts, (int32_t)body);
    }
    if (w != base + hsize + e->area) return kerr_value("encode: size mismatch (a kernel bug)");
    if (hsize) {
        int32_t count = (int32_t)(e->end - e->first);
        /* no producer: id -1, epoch -1, base sequence -1 */
        write_v2_header(base, hsize + e->area, (int64_t)(base_offset + row_delta(R, e->first, R->start)),
                        (int32_t)leader_epoch, (uint16_t)attributes, (int32_t)row_delta(R, e->end - 1, e->first),
                        e->base_ts, e->max_ts, -1, -1, -1, count);
    }
    return 0;
}

/* The `header` argument: None (records areas), or (base_offset, leader_epoch, attributes). */
static int parse_header(PyObject *hdr, Py_ssize_t rows, long long *base_offset, int *leader_epoch, int *attributes) {
    *base_offset = 0; *leader_epoch = 0; *attributes = 0;
    if (hdr == Py_None) return 0;
    if (!PyArg_ParseTuple(hdr, "Lii", base_offset, leader_epoch, attributes)) return -1;
    if (*attributes < -32768 || *attributes > 32767) {
        PyErr_SetString(PyExc_ValueError, "attributes outside int16");
        return -1;
    }
    if (rows > 0 && *base_offset > 0 && (long long)(rows - 1) > INT64_MAX - *base_offset) {
        PyErr_SetString(PyExc_OverflowError, "encode: offsets past 2**63 - 1");
        return -1;
    }
    return 0;
}

static Py_ssize_t clamp_max_bytes(Py_ssize_t max_bytes) {
    return max_bytes < 1 ? 1 : max_bytes > MAX_RECORDS_AREA ? MAX_RECORDS_AREA : max_bytes;
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
    long long base_offset;
    int leader_epoch, attributes;
    if (parse_header(hdr, stop - start, &base_offset, &leader_epoch, &attributes) < 0) return NULL;
    max_bytes = clamp_max_bytes(max_bytes);
    EncCols c;
    EncRows R = {&c, 1, NULL, NULL, start, stop};
    PyObject *list = NULL, *result = NULL;
    Buf cuts = {0}, meta = {0};
    uint8_t **dest = NULL;
    if (enccols_get(&c, kobj, vobj, tsobj, hcobj, hkobj, hvobj) < 0) goto done;
    if (start < 0 || stop < start || stop > c.rows) {
        PyErr_SetString(PyExc_ValueError, "encode: row range outside the columns");
        goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cut_batches(&R, max_bytes, &cuts);
    Py_END_ALLOW_THREADS
    if (rc < 0) { kerr_raise("encode_v2_batches"); goto done; }
    const EncBatch *batches = (const EncBatch *)cuts.data;
    Py_ssize_t n = cuts.len / (Py_ssize_t)sizeof(EncBatch), hsize = hdr != Py_None ? V2_HEADER_BYTES : 0;
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
        rc = write_batch(&R, &batches[i], dest[i], hsize, base_offset, leader_epoch, attributes);
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

/* encode_v2_rows(sources, which, local, max_bytes, header, out[, offsets]) -> (buffer, meta)
 *
 * encode_v2_batches over picked rows, in place: sources is a sequence of (keys, values, timestamps,
 * header_counts, header_keys, header_values) as encode_v2_batches takes them; row r of the
 * output is row local[r] (int64 buffer) of sources[which[r]] (int32 buffer). No row is copied
 * before it is encoded.
 *
 * The batches are written one after another into one bytearray: `out` if it is a bytearray large
 * enough (it is reused, so a writer does not fault in fresh memory for every call), else a new one
 * with room to spare. Returns that bytearray and meta: int64, 4 entries per batch - end row
 * (exclusive), first timestamp, max timestamp, end position in the buffer.
 *
 * offsets (int64 buffer, one per row, strictly increasing) or None: each row's offset, so that a
 * batch's records carry the offset deltas of a log with gaps (as compaction leaves it: Kafka's
 * DefaultRecordBatch allows them, lastOffsetDelta being the last record's); the base offset of a
 * batch is base_offset + offsets[first row] - offsets[0], and a batch is also cut before a delta
 * past int32. None: consecutive offsets. */
PyObject *kernel_encode_v2_rows(PyObject *self, PyObject *args) {
    PyObject *sources, *wobj, *lobj, *hdr, *out, *oobj = Py_None;
    Py_ssize_t max_bytes;
    if (!PyArg_ParseTuple(args, "OOOnOO|O", &sources, &wobj, &lobj, &max_bytes, &hdr, &out, &oobj)) return NULL;
    PyObject *seq = PySequence_Fast(sources, "encode_v2_rows: sources must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t nsrc = PySequence_Fast_GET_SIZE(seq);
    EncCols *src = (EncCols *)calloc((size_t)(nsrc ? nsrc : 1), sizeof(EncCols));
    Py_buffer wb = {0}, lb = {0}, ob = {0}, offb = {0};
    Buf cuts = {0}, meta = {0};
    PyObject *buf = NULL, *result = NULL;
    Py_ssize_t got = 0;
    if (!src) { PyErr_NoMemory(); goto done; }
    for (; got < nsrc; got++) {
        PyObject *kobj, *vobj, *tsobj, *hcobj, *hkobj, *hvobj;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, got), "OOOOOO", &kobj, &vobj, &tsobj, &hcobj, &hkobj,
                              &hvobj) ||
            enccols_get(&src[got], kobj, vobj, tsobj, hcobj, hkobj, hvobj) < 0) {
            enccols_release(&src[got]);
            goto done;
        }
    }
    if (PyObject_GetBuffer(wobj, &wb, PyBUF_SIMPLE) < 0 || PyObject_GetBuffer(lobj, &lb, PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t rows = wb.len / 4;
    if (lb.len / 8 != rows || wb.len % 4 || lb.len % 8) {
        PyErr_SetString(PyExc_ValueError, "encode_v2_rows: which (int32) and local (int64) differ in length");
        goto done;
    }
    const int64_t *offs = NULL;
    if (oobj != Py_None) {
        if (PyObject_GetBuffer(oobj, &offb, PyBUF_SIMPLE) < 0) goto done;
        if (offb.len % 8 || offb.len / 8 != rows) {
            PyErr_SetString(PyExc_ValueError, "encode_v2_rows: offsets (int64) and which differ in length");
            goto done;
        }
        offs = (const int64_t *)offb.buf;
        for (Py_ssize_t r = 1; r < rows; r++)
            if (offs[r] <= offs[r - 1]) {
                PyErr_Format(PyExc_ValueError, "encode_v2_rows: offset %lld of row %zd is not above the previous "
                             "row's %lld; expected strictly increasing offsets", (long long)offs[r], r,
                             (long long)offs[r - 1]);
                goto done;
            }
    }
    long long base_offset;
    int leader_epoch, attributes;
    /* the rows' span of offsets, for parse_header's check that they stay within int64 */
    Py_ssize_t span = offs && rows ? (Py_ssize_t)(offs[rows - 1] - offs[0] + 1) : rows;
    if (parse_header(hdr, span, &base_offset, &leader_epoch, &attributes) < 0) goto done;
    EncRows R = {src, nsrc, (const int32_t *)wb.buf, (const int64_t *)lb.buf, 0, rows, offs};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cut_batches(&R, clamp_max_bytes(max_bytes), &cuts);
    Py_END_ALLOW_THREADS
    if (rc < 0) { kerr_raise("encode_v2_rows"); goto done; }
    const EncBatch *batches = (const EncBatch *)cuts.data;
    Py_ssize_t n = cuts.len / (Py_ssize_t)sizeof(EncBatch), hsize = hdr != Py_None ? V2_HEADER_BYTES : 0, total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        total += hsize + batches[i].area;
        int64_t m[4] = {(int64_t)batches[i].end, batches[i].base_ts, batches[i].max_ts, (int64_t)total};
        if (buf_put(&meta, m, sizeof m) < 0) { kerr_raise("encode_v2_rows"); goto done; }
    }
    if (PyByteArray_Check(out) && PyByteArray_GET_SIZE(out) >= total) {
        buf = out;
        Py_INCREF(buf);
    } else if (!(buf = PyByteArray_FromStringAndSize(NULL, total + total / 4))) {
        goto done;
    }
    /* exported while the GIL is let go, so no other thread can resize it under the writes */
    if (PyObject_GetBuffer(buf, &ob, PyBUF_WRITABLE) < 0) goto done;
    uint8_t *base = (uint8_t *)ob.buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        rc = write_batch(&R, &batches[i], base + at, hsize, base_offset, leader_epoch, attributes);
        at += hsize + batches[i].area;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ob);
    if (rc < 0) { kerr_raise("encode_v2_rows"); goto done; }
    {
        PyObject *mb = take_buffer(&meta);
        if (mb) result = Py_BuildValue("ON", buf, mb);
    }
done:
    Py_XDECREF(buf);
    if (wb.obj) PyBuffer_Release(&wb);
    if (lb.obj) PyBuffer_Release(&lb);
    if (offb.obj) PyBuffer_Release(&offb);
    for (Py_ssize_t i = 0; i < got; i++) enccols_release(&src[i]);
    free(src);
    Py_DECREF(seq);
    buf_free(&cuts);
    buf_free(&meta);
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


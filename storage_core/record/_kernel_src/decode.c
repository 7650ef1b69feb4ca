/*
 * decode.c: the v2 batch walk and the decode of records into Arrow buffers (DefaultRecordBatch,
 * DefaultRecord.readFrom; the Python twins are storage_core/record/columnar.py PyRecordsBuilder
 * and records.py).
 *
 * It walks v2 batches (CRC-32C, the read_committed filter, lz4 frames decoded in place; other
 * codecs through the Python callables it is given) and the records of each decompressed records
 * area, appending them to growing Arrow-layout buffers in one pass:
 *
 *   offsets      int64[n]            absolute record offsets
 *   timestamps   int64[n]            microseconds, as Arrow's timestamp[us] holds them (LogAppendTime
 *                                    already applied; a record's milliseconds times 1000, checked to fit)
 *   key_offsets  int32[n+1]          Arrow binary offsets; key_data; key_valid (LSB bitmap)
 *   value_*      the same for values
 *   hdr_offsets  int32[n+1]          Arrow list offsets into the header entries; hdr_valid
 *                                    (a record without headers is null, as in Spark's Kafka source)
 *   hk_*         utf-8 header keys   (string, never null)
 *   hv_*         header values       (binary, nullable)
 *
 * Any violation raises storage_core.errors.InvalidRecordError. Buffers are handed to pyarrow
 * without copies (OwnedBuffer). The walk (add_v2_run) and add_v2 on a large area run without the
 * GIL; the builder is marked busy meanwhile, so each thread needs its own builder.
 */
#include "record.h"

typedef struct {
    PyObject_HEAD
    int busy;       /* a call works on it without the GIL (kobj_enter) */
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
    if (kobj_enter(&s->busy, "RecordsBuilder") < 0) return -1;
    for (int i = 0; i < 15; i++) buf_free(all_bufs(s, i));
    s->with_headers = with_headers;
    int rc = builder_reset(s);
    kobj_leave(&s->busy);
    if (rc < 0) kerr_raise("RecordsBuilder()");
    return rc;
}

static int data_fits(Buf *data, Py_ssize_t extra) {
    if (data->len + extra > INT32_LIMIT) {
        kerr_overflow("column data exceeds 2 GiB; finish() the builder earlier");
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

/* Zero the bytes of bitmap b that rows up to `rows` need (reserved by the caller) without growing
 * its len: bit_set covers a row as it sets it; the decode loop sets bits in bytes covered here. */
static inline void bitmap_cover(Buf *b, Py_ssize_t rows) {
    Py_ssize_t need = (rows + 7) >> 3;
    if (need > b->len) memset(b->data + b->len, 0, (size_t)(need - b->len));
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

/* Decode `count` records of one v2 records area [p, p + len) into the builder. Records outside
 * [min_offset, end_offset) are validated but not appended. The caller rolls back on error.
 * Returns 0, or -1 with KERR_INVALID (or KERR_NOMEM, KERR_OVERFLOW). Without the GIL too. */
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
    /* The loop's write positions live in locals and go back into the Bufs once, at the end: kept in
     * the Bufs, every byte stored into a column (a uint8_t store may alias anything) made the
     * compiler reload every position for the next record. The header columns (with_headers) keep
     * their Bufs: the loop holds no position of theirs. On an error the caller rolls the Bufs back
     * to their marks, so nothing is written back then. */
    Py_ssize_t row = s->n;
    uint8_t *offsets_w = s->offsets.data + s->offsets.len, *timestamps_w = s->timestamps.data + s->timestamps.len;
    uint8_t *key_offsets_w = s->key_offsets.data + s->key_offsets.len;
    uint8_t *value_offsets_w = s->value_offsets.data + s->value_offsets.len;
    uint8_t *key_data = s->key_data.data, *value_data = s->value_data.data;
    Py_ssize_t key_len = s->key_data.len, value_len = s->value_data.len;
    uint8_t *key_valid = s->key_valid.data, *value_valid = s->value_valid.data;
    /* the bitmaps' bytes for every record this area may append, zeroed: the loop only sets bits */
    bitmap_cover(&s->key_valid, row + count);
    bitmap_cover(&s->value_valid, row + count);
    for (Py_ssize_t i = 0; i < count; i++) {
        Rec r;
        if (read_record(&p, end, base_offset, base_ts, use_lat, lat, &r) < 0) return -1;
        int64_t offset = r.offset;
        if (offset < min_offset || offset >= end_offset) continue;
        int64_t ts = r.ts;
        if (ts > MAX_MS || ts < -MAX_MS) {
            kerr_invalid("Record at offset %lld has timestamp %lld ms, outside what a microsecond timestamp can hold "
                    "(Spark's Kafka source fails here too)", (long long)offset, (long long)ts);
            return -1;
        }
        memcpy(offsets_w, &offset, 8);
        offsets_w += 8;
        int64_t ts_us = ts * 1000; /* the column's unit; fits, checked above */
        memcpy(timestamps_w, &ts_us, 8);
        timestamps_w += 8;
        /* reserved above: this batch's keys and values together are at most len bytes */
        if (r.key) {
            copy_short(key_data + key_len, r.key, r.klen, end);
            key_len += r.klen;
            key_valid[row >> 3] |= (uint8_t)(1u << (row & 7));
        }
        int32_t key_end = (int32_t)key_len;
        memcpy(key_offsets_w, &key_end, 4);
        key_offsets_w += 4;
        if (r.value) {
            copy_short(value_data + value_len, r.value, r.vlen, end);
            value_len += r.vlen;
            value_valid[row >> 3] |= (uint8_t)(1u << (row & 7));
        }
        int32_t value_end = (int32_t)value_len;
        memcpy(value_offsets_w, &value_end, 4);
        value_offsets_w += 4;
        if (s->with_headers) {
            const uint8_t *hp = r.headers, *rec_end = r.end;
            for (int32_t h = 0; h < r.nheaders; h++) { /* already validated */
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
            if (bit_set(&s->hdr_valid, row, r.nheaders > 0) < 0) return -1;
            if (buf_i32(&s->hdr_offsets, (int32_t)s->nh) < 0) return -1;
        }
        row++;
        appended++;
    }
    if (p != end) { kerr_invalid("Incorrect declared batch size, records still remaining in file"); return -1; }
    s->offsets.len = offsets_w - s->offsets.data;
    s->timestamps.len = timestamps_w - s->timestamps.data;
    s->key_offsets.len = key_offsets_w - s->key_offsets.data;
    s->value_offsets.len = value_offsets_w - s->value_offsets.data;
    s->key_data.len = key_len;
    s->value_data.len = value_len;
    s->key_valid.len = s->value_valid.len = (row + 7) >> 3;
    s->n = row;
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
    if (kobj_enter(&s->busy, "RecordsBuilder") < 0) { PyBuffer_Release(&view); return NULL; }
    Mark mark;
    builder_mark(s, &mark);
    Py_ssize_t appended = 0;
    int rc;
    if (view.len >= GIL_FREE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        rc = decode_area(s, (const uint8_t *)view.buf, view.len, count, base_offset, base_ts, use_lat, lat,
                         min_offset, end_offset, &appended);
        Py_END_ALLOW_THREADS
    } else {
        rc = decode_area(s, (const uint8_t *)view.buf, view.len, count, base_offset, base_ts, use_lat, lat,
                         min_offset, end_offset, &appended);
    }
    if (rc < 0) builder_rollback(s, &mark);
    kobj_leave(&s->busy);
    PyBuffer_Release(&view);
    return rc < 0 ? kerr_raise("RecordsBuilder.add_v2") : PyLong_FromSsize_t(appended);
}


/* The control record of a transactional control batch at b (total bytes, uncompressed): validates
 * every record as DefaultRecordBatch.records() does (decode_area over an empty offset range) and
 * reads the first record's key as ControlRecordType.parse does. 0 with *abort set; 1 if the object
 * path must decide (a codec, a record or key that Python would refuse; nothing recorded); -1 with
 * an error recorded that is not KERR_INVALID. Without the GIL. */
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
        if (kerr_kind() == KERR_INVALID) { kerr_clear(); return 1; }
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
    if (kobj_enter(&s->busy, "RecordsBuilder") < 0) { PyBuffer_Release(&view); return NULL; }
    if (txn && txn_enter(txn) < 0) { kobj_leave(&s->busy); PyBuffer_Release(&view); return NULL; }
    const uint8_t *base = (const uint8_t *)view.buf;
    Py_ssize_t pos = 0, len = view.len;
    int stop = RUN_END, failed = 0;
    Buf info = {0};
    PyObject *whole = NULL; /* a memoryview of data, sliced for the decompressor */
    PyObject *result = NULL;
    /* The walk runs without the GIL; it takes it back only to call a Python codec. */
    PyThreadState *nogil = PyEval_SaveThread();
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
            if (txn_advance(txn, last_offset) < 0) { failed = 1; break; }
            if (control && transactional && pid >= 0) {
                int rc = control_is_abort(s, b, total, &abort_marker);
                if (rc < 0) { failed = 1; break; }
                if (rc > 0) { stop = RUN_SLOW_PATH; break; }
            }
            int verdict = txn_step(txn, control, transactional, pid, last_offset, abort_marker);
            if (verdict < 0) { failed = 1; break; }
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
            if (rc < 0) { failed = 1; break; }
            if (rc == 0) {
                area = s->scratch.data;
                area_len = s->scratch.len;
            }
        }
        if (codec != 0 && area == b + V2_HEADER_BYTES) { /* not decoded above: the Python codec, with the GIL */
            PyEval_RestoreThread(nogil);
            int give_up = 0; /* 1: stop here for the object path; -1: an exception */
            PyObject *decompress = decompressors != Py_None && codec < PyTuple_GET_SIZE(decompressors)
                                       ? PyTuple_GET_ITEM(decompressors, codec) : Py_None;
            if (decompress == Py_None) give_up = 1;
            else if (!whole && !(whole = PyMemoryView_FromObject(data_obj))) give_up = -1;
            if (!give_up) {
                PyObject *raw = PySequence_GetSlice(whole, pos + V2_HEADER_BYTES, pos + total);
                inflated = raw ? PyObject_CallOneArg(decompress, raw) : NULL;
                Py_XDECREF(raw);
                if (!inflated) give_up = raw && PyErr_ExceptionMatches(KlogError) ? (PyErr_Clear(), 1) : -1;
                else if (PyObject_GetBuffer(inflated, &iview, PyBUF_SIMPLE) < 0) { Py_CLEAR(inflated); give_up = -1; }
            }
            nogil = PyEval_SaveThread();
            if (give_up > 0) { stop = RUN_SLOW_PATH; break; }
            if (give_up < 0) { failed = 1; break; }
            area = (const uint8_t *)iview.buf;
            area_len = iview.len;
        }
        int64_t max_ts = (int64_t)be64(b + 35);
        Mark mark;
        builder_mark(s, &mark);
        Py_ssize_t appended = 0;
        int rc = decode_area(s, area, area_len, (int32_t)be32(b + 57), base_offset, (int64_t)be64(b + 27),
                             (attributes & ATTR_LOG_APPEND_TIME) != 0, max_ts, min_offset, end_offset, &appended);
        if (inflated) {
            PyEval_RestoreThread(nogil);
            PyBuffer_Release(&iview);
            Py_DECREF(inflated);
            nogil = PyEval_SaveThread();
        }
        if (rc < 0) {
            builder_rollback(s, &mark);
            if (kerr_kind() == KERR_INVALID) { kerr_clear(); stop = RUN_SLOW_PATH; break; }
            failed = 1;
            break;
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
            if (buf_put(&info, &row, sizeof row) < 0) { failed = 1; break; }
        }
        pos += total;
    }
    PyEval_RestoreThread(nogil);
    if (txn) txn_leave(txn);
    kobj_leave(&s->busy);
    if (failed) {
        kerr_raise("RecordsBuilder.add_v2_run");
    } else {
        PyObject *info_obj = take_buffer(&info);
        if (info_obj) result = Py_BuildValue("niN", pos, stop, info_obj);
    }
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
    if (kobj_idle(s->busy, "RecordsBuilder") < 0) return NULL;
    if (ts > MAX_MS || ts < -MAX_MS) {
        kerr_invalid("Record at offset %lld has timestamp %lld ms, outside what a microsecond timestamp can hold "
                     "(Spark's Kafka source fails here too)", offset, ts);
        return kerr_raise("RecordsBuilder.add_record");
    }
    Py_ssize_t row = s->n;
    Py_buffer kb = {0}, vb = {0};
    int have_k = 0, have_v = 0;
    PyObject *result = NULL;
    if (key != Py_None) { if (PyObject_GetBuffer(key, &kb, PyBUF_SIMPLE) < 0) goto done; have_k = 1; }
    if (value != Py_None) { if (PyObject_GetBuffer(value, &vb, PyBUF_SIMPLE) < 0) goto done; have_v = 1; }
    if (buf_i64(&s->offsets, offset) < 0 || buf_i64(&s->timestamps, (int64_t)ts * 1000) < 0) goto done;
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
    return result ? result : kerr_raise("RecordsBuilder.add_record");
}

/* finish() -> dict of buffers (and counts); the builder starts again empty. */
static PyObject *RecordsBuilder_finish(RecordsBuilder *s, PyObject *unused) {
    (void)unused;
    static const char *names[] = {"offsets", "timestamps", "key_offsets", "key_data", "key_valid",
                                  "value_offsets", "value_data", "value_valid", "hdr_offsets", "hdr_valid",
                                  "hk_offsets", "hk_data", "hv_offsets", "hv_data", "hv_valid"};
    if (kobj_idle(s->busy, "RecordsBuilder") < 0) return NULL;
    /* bitmaps must cover every row even when the last rows were all null */
    if (bit_set(&s->key_valid, s->n ? s->n - 1 : 0, 0) < 0 || bit_set(&s->value_valid, s->n ? s->n - 1 : 0, 0) < 0 ||
        bit_set(&s->hdr_valid, s->n ? s->n - 1 : 0, 0) < 0 || bit_set(&s->hv_valid, s->nh ? s->nh - 1 : 0, 0) < 0)
        return kerr_raise("RecordsBuilder.finish");
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
    if (builder_reset(s) < 0) { Py_DECREF(d); return kerr_raise("RecordsBuilder.finish"); }
    return d;
}

static PyObject *RecordsBuilder_len_get(RecordsBuilder *s, void *c) {
    (void)c;
    if (kobj_idle(s->busy, "RecordsBuilder") < 0) return NULL;
    return PyLong_FromSsize_t(s->n);
}
static PyObject *RecordsBuilder_nbytes_get(RecordsBuilder *s, void *c) {
    (void)c;
    if (kobj_idle(s->busy, "RecordsBuilder") < 0) return NULL;
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

PyTypeObject RecordsBuilderType = {
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



/*
 * cleaner.c: the log cleaner's offset map and recopy - Kafka's SkimpyOffsetMap, the cleaner's
 * buildOffsetMap and its filter over MemoryRecords.filterTo (LogCleaner.scala, Cleaner.java),
 * and the rebuild of a batch's kept records (MemoryRecordsBuilder). The Python twins are in
 * storage_core/cleaner (SkimpyOffsetMap, should_retain_record, map_records). map_run and
 * clean_run walk their batches without the GIL, the map marked busy meanwhile.
 */
#include "record.h"

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
 * base, a header key that is not UTF-8: it replaces or refuses); -1 with KERR_NOMEM. */
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
    int busy;                /* a call works on it without the GIL (kobj_enter) */
    uint8_t *bytes;
    Py_ssize_t memory_bytes;
    int32_t slots;
    int32_t max_entries;
    int32_t entries;
    int dirty;               /* something was put since the memory was last zeroed */
    int64_t latest_offset;
    Buf scratch;             /* Rec and digest arrays of the batch at hand */
} OffsetMap;

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
        return kerr_klog("Attempted to add a new entry to a full offset map, entries: %d, slots: %d", m->entries,
                         m->slots);
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
    if (kobj_idle(m->busy, "OffsetMap") < 0) return -1;
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

/* GIL held: 0 if the map can be used now, else -1 with an exception. */
static int om_ready(OffsetMap *m) {
    if (!m->bytes) { PyErr_SetString(PyExc_ValueError, "OffsetMap not initialised"); return -1; }
    if (kobj_idle(m->busy, "OffsetMap") < 0) return -1;
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
    if (om_ready(m) < 0) return NULL;
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
    if (om_put(m, hash, offset) < 0) return kerr_raise("OffsetMap.put");
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
    return result ? result : kerr_raise("OffsetMap.map_records");
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
    return result ? result : kerr_raise("OffsetMap.select");
}

/* retained_records(area, count, base_offset, base_timestamp, log_append_time, keep, delete_horizon)
 *   -> (records area, count, base_timestamp, max_timestamp) or None
 *
 * The kept records (keep: a byte per record, nonzero = kept) re-encoded for a rebuilt batch, as
 * write_kept; None when the Python builder must decide. log_append_time and delete_horizon may be
 * None. */
PyObject *kernel_retained_records(PyObject *self, PyObject *args) {
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
    return result ? result : kerr_raise("retained_records");
}

/* The v2 batch at data[pos]: its size (LOG_OVERHEAD included) and CLEAN_END, or why the run stops. */
static int run_batch_at(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t *total) {
    int at = v2_batch_at(data, len, pos, total);
    if (at != V2_WHOLE) return at == V2_SHORT ? CLEAN_SHORT : CLEAN_BATCH;
    int16_t attributes = (int16_t)be16(data + pos + 21);
    if (attributes & (ATTR_CODEC_MASK | ATTR_CONTROL | ATTR_TRANSACTIONAL)) return CLEAN_BATCH;
    return CLEAN_END;
}

/* The walk of map_run from *pos (no GIL): see map_run. 0, or -1 with an error recorded. */
static int map_walk(OffsetMap *m, const uint8_t *data, Py_ssize_t len, Py_ssize_t *pos_io, int64_t start,
                    int64_t end, Py_ssize_t *records, Py_ssize_t *bytes, int *why_out) {
    Py_ssize_t pos = *pos_io;
    int why = CLEAN_END;
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
        if (om_scratch(m, count, &recs, &hashes, &keep) < 0) return -1;
        if (parse_area(b + V2_HEADER_BYTES, area_len, count, base_offset, 0, 0, 0, recs) < 0) {
            if (kerr_kind() != KERR_INVALID) return -1;
            kerr_clear();
            why = CLEAN_BATCH;
            break;
        }
        int full = om_map_records(m, recs, count, hashes, start, records);
        if (full < 0) return -1;
        *bytes += total;
        if (full) { why = CLEAN_FULL; break; }
        if (last_offset >= start) m->latest_offset = last_offset;
        pos += total;
    }
    *pos_io = pos;
    *why_out = why;
    return 0;
}

/* map_run(data, pos, start, end) -> (pos, why, records, bytes)
 *
 * buildOffsetMap over the uncompressed, non-transactional data batches from data[pos]: puts the
 * keyed records at or past `start` and, after each batch whose last offset reaches `start`,
 * sets the latest offset to it. Stops (see CLEAN_*) at the first batch for Python, at a batch
 * starting at or past `end`, or in the batch that fills the map - which counts in `bytes` (the
 * bytes of the batches walked) but whose last offset does not become the latest: the pass ends
 * before it. `records` counts the records walked. Runs without the GIL. */
static PyObject *OffsetMap_map_run(OffsetMap *m, PyObject *args) {
    PyObject *data_obj;
    Py_ssize_t pos;
    long long start, end;
    if (!PyArg_ParseTuple(args, "OnLL", &data_obj, &pos, &start, &end)) return NULL;
    if (om_ready(m) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t records = 0, bytes = 0;
    PyObject *result = NULL;
    int why = CLEAN_END, rc;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_ValueError, "map_run: pos outside the data");
    } else {
        m->busy = 1; /* om_ready checked it was not */
        Py_BEGIN_ALLOW_THREADS
        rc = map_walk(m, (const uint8_t *)view.buf, view.len, &pos, start, end, &records, &bytes, &why);
        Py_END_ALLOW_THREADS
        kobj_leave(&m->busy);
        result = rc < 0 ? kerr_raise("OffsetMap.map_run") : Py_BuildValue("ninn", pos, why, records, bytes);
    }
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
    if (has_horizon) a |= ATTR_DELETE_HORIZON;
    write_v2_header(h, total, (int64_t)be64(orig), (int32_t)be32(orig + 12), a, (int32_t)be32(orig + 23), base_ts,
                    max_ts, (int64_t)be64(orig + 43), (int16_t)be16(orig + 51), (int32_t)be32(orig + 53), count);
}

/* The walk of clean_run from *pos (no GIL): see clean_run. 0, or -1 with an error recorded. */
static int clean_walk(OffsetMap *m, const uint8_t *data, Py_ssize_t len, Py_ssize_t *pos_io, int64_t now,
                      int64_t retention, const int64_t *stop_offsets, Py_ssize_t nstops, Buf *out, Buf *meta,
                      Py_ssize_t st[10], int *why_out) {
    Py_ssize_t pos = *pos_io;
    int why = CLEAN_END;
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
        int use_lat = (attributes & ATTR_LOG_APPEND_TIME) != 0, has_horizon = (attributes & ATTR_DELETE_HORIZON) != 0;
        Rec *recs;
        uint8_t *hashes, *keep;
        if (om_scratch(m, count, &recs, &hashes, &keep) < 0) return -1;
        if (parse_area(b + V2_HEADER_BYTES, area_len, count, base_offset, base_ts, use_lat, max_ts, recs) < 0) {
            if (kerr_kind() != KERR_INVALID) return -1;
            kerr_clear();
            why = CLEAN_BATCH;
            break;
        }
        Kept k;
        om_select(m, recs, count, hashes, !has_horizon || now < base_ts, keep, &k);
        int need_horizon = k.tombstones_kept > 0 && !has_horizon;
        Py_ssize_t out_start = out->len;
        int64_t out_max_ts = max_ts;
        if (k.retained == count && k.retained > 0 && !need_horizon) {
            if (buf_put(out, b, total) < 0) return -1;
            st[7]++;
        } else if (k.retained > 0) {
            int64_t horizon = need_horizon ? (int64_t)((uint64_t)now + (uint64_t)retention) : base_ts;
            int64_t new_base = 0;
            int32_t n = 0;
            if (buf_reserve(out, V2_HEADER_BYTES) < 0) return -1;
            out->len += V2_HEADER_BYTES;
            int rc = write_kept(out, recs, count, keep, need_horizon || has_horizon, horizon, use_lat, max_ts,
                                &new_base, &out_max_ts, &n);
            if (rc < 0) return -1;
            if (rc > 0 || out->len - out_start > INT32_LIMIT) { out->len = out_start; why = CLEAN_BATCH; break; }
            write_rebuilt_header(out->data + out_start, b, out->len - out_start, need_horizon || has_horizon, new_base,
                                 out_max_ts, n);
            st[8]++;
        } else {
            st[9]++;
        }
        if (out->len > out_start) {
            int64_t row[3] = {last_offset, out_max_ts, (int64_t)(out->len - out_start)};
            if (buf_put(meta, row, sizeof row) < 0) return -1;
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
    *pos_io = pos;
    *why_out = why;
    return 0;
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
 * `out` holds the batches to write, `meta` an int64 (last offset, max timestamp, size) per batch.
 * Runs without the GIL. */
static PyObject *OffsetMap_clean_run(OffsetMap *m, PyObject *args) {
    PyObject *data_obj, *stops_obj;
    Py_ssize_t pos;
    long long now, retention;
    if (!PyArg_ParseTuple(args, "OnLLO", &data_obj, &pos, &now, &retention, &stops_obj)) return NULL;
    if (om_ready(m) < 0) return NULL;
    Py_buffer view, stops;
    if (PyObject_GetBuffer(data_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(stops_obj, &stops, PyBUF_SIMPLE) < 0) { PyBuffer_Release(&view); return NULL; }
    Py_ssize_t st[10] = {0};
    Buf out = {0}, meta = {0};
    PyObject *result = NULL;
    int why = CLEAN_END, rc;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_ValueError, "clean_run: pos outside the data");
    } else {
        m->busy = 1; /* om_ready checked it was not */
        Py_BEGIN_ALLOW_THREADS
        rc = clean_walk(m, (const uint8_t *)view.buf, view.len, &pos, now, retention, (const int64_t *)stops.buf,
                        stops.len / 8, &out, &meta, st, &why);
        Py_END_ALLOW_THREADS
        kobj_leave(&m->busy);
        if (rc < 0) {
            kerr_raise("OffsetMap.clean_run");
        } else {
            PyObject *o = take_buffer(&out), *mt = o ? take_buffer(&meta) : NULL;
            if (o && mt)
                result = Py_BuildValue("niNN(nnnnnnnnnn)", pos, why, o, mt, st[0], st[1], st[2], st[3], st[4], st[5],
                                       st[6], st[7], st[8], st[9]);
            else { Py_XDECREF(o); Py_XDECREF(mt); }
        }
    }
    buf_free(&out);
    buf_free(&meta);
    PyBuffer_Release(&view);
    PyBuffer_Release(&stops);
    return result;
}

/* A read-only attribute of the map, refused while a call works on it without the GIL. */
#define OM_GETTER(name, value)                                                 \
    static PyObject *OffsetMap_get_##name(OffsetMap *m, void *c) {             \
        (void)c;                                                               \
        if (kobj_idle(m->busy, "OffsetMap") < 0) return NULL;                  \
        return value;                                                          \
    }
OM_GETTER(memory_bytes, PyLong_FromSsize_t(m->memory_bytes))
OM_GETTER(slots, PyLong_FromLong(m->slots))
OM_GETTER(max_entries, PyLong_FromLong(m->max_entries))
OM_GETTER(size, PyLong_FromLong(m->entries))
OM_GETTER(latest_offset, PyLong_FromLongLong(m->latest_offset))
OM_GETTER(is_full, PyBool_FromLong(m->entries >= m->max_entries))
OM_GETTER(utilization, PyFloat_FromDouble(m->slots ? (double)m->entries / (double)m->slots : 0.0))

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

PyTypeObject OffsetMapType = {
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



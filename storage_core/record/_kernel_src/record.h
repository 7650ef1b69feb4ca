/*
 * record.h: the grammar of a v2 records area (DefaultRecord.readFrom), inlined into every walk
 * over records: the decode into Arrow buffers (decode.c) and the cleaner's map and recopy
 * (cleaner.c). storage_core/record/records.py holds the same loop in Python, the reference the
 * tests compare this with. Every read is bounded by the end of the record; a violation is
 * recorded as KERR_INVALID (InvalidRecordError, with Kafka's message). No Python object is
 * touched: these run without the GIL.
 */
#ifndef KLOG_RECORD_H
#define KLOG_RECORD_H

#include "kernel.h"

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

static inline const char *varint_problem(int rc) {
    return rc == -1 ? "Found invalid record structure: premature EOF while reading a varint"
                    : "Varint is too long, the most significant bit in the 5th byte is set";
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
 * 0, or -1 with KERR_INVALID. Every walk over records (decode_area, parse_area) reads
 * them here. */
static ALWAYS_INLINE int read_record(const uint8_t **pp, const uint8_t *end, int64_t base_offset, int64_t base_ts,
                              int use_lat, int64_t lat, Rec *r) {
    const uint8_t *p = *pp;
    int32_t body;
    int rc = read_varint(&p, end, &body);
    if (rc) { kerr_invalid("%s", varint_problem(rc)); return -1; }
    if (body < 0 || body > end - p) {
        kerr_invalid("Invalid record size: expected %d bytes in record payload, but instead the buffer has only %zd remaining bytes.",
                body, (Py_ssize_t)(end - p));
        return -1;
    }
    const uint8_t *rec_end = p + body, *q = p;
    int64_t ts_delta;
    if (q >= rec_end) { kerr_invalid("Found invalid record structure: premature EOF while reading attributes"); return -1; }
    q++; /* attributes */
    if ((rc = read_varlong(&q, rec_end, &ts_delta))) { kerr_invalid("%s", varint_problem(rc)); return -1; }
    if ((rc = read_varint(&q, rec_end, &r->off_delta))) { kerr_invalid("%s", varint_problem(rc)); return -1; }
    if ((rc = read_varint(&q, rec_end, &r->klen))) { kerr_invalid("%s", varint_problem(rc)); return -1; }
    r->key = NULL;
    if (r->klen >= 0) {
        if (r->klen > rec_end - q) { kerr_invalid("Found invalid record structure: key length %d past the end of the record", r->klen); return -1; }
        r->key = q;
        q += r->klen;
    }
    if ((rc = read_varint(&q, rec_end, &r->vlen))) { kerr_invalid("%s", varint_problem(rc)); return -1; }
    r->value = NULL;
    if (r->vlen >= 0) {
        if (r->vlen > rec_end - q) { kerr_invalid("Found invalid record structure: value length %d past the end of the record", r->vlen); return -1; }
        r->value = q;
        q += r->vlen;
    }
    if ((rc = read_varint(&q, rec_end, &r->nheaders))) { kerr_invalid("%s", varint_problem(rc)); return -1; }
    if (r->nheaders < 0) { kerr_invalid("Found invalid number of record headers %d", r->nheaders); return -1; }
    if (r->nheaders > rec_end - q) {
        kerr_invalid("Found invalid number of record headers. %d is larger than the remaining size of the buffer", r->nheaders);
        return -1;
    }
    r->headers = q;
    for (int32_t h = 0; h < r->nheaders; h++) {
        int32_t hk, hv;
        if ((rc = read_varint(&q, rec_end, &hk))) { kerr_invalid("%s", varint_problem(rc)); return -1; }
        if (hk < 0) { kerr_invalid("Invalid negative header key size %d", hk); return -1; }
        if (hk > rec_end - q) { kerr_invalid("Found invalid record structure: header key length %d past the end of the record", hk); return -1; }
        q += hk;
        if ((rc = read_varint(&q, rec_end, &hv))) { kerr_invalid("%s", varint_problem(rc)); return -1; }
        if (hv >= 0) {
            if (hv > rec_end - q) { kerr_invalid("Found invalid record structure: header value length %d past the end of the record", hv); return -1; }
            q += hv;
        }
    }
    if (q != rec_end) {
        kerr_invalid("Invalid record size: expected to read %d bytes in record payload, but instead read %zd",
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
 * with KERR_INVALID. */
static inline int check_count(Py_ssize_t count, Py_ssize_t len) {
    if (count < 0) { kerr_invalid("Found invalid record count %zd in magic v2 batch", count); return -1; }
    if (count > len) {
        kerr_invalid("Found invalid record count %zd in magic v2 batch: only %zd bytes of records", count, len);
        return -1;
    }
    return 0;
}

/* Parse and check the `count` records of [p, p + len) into recs (room for count). 0, or -1 with
 * KERR_INVALID. */
static inline int parse_area(const uint8_t *p, Py_ssize_t len, Py_ssize_t count, int64_t base_offset, int64_t base_ts,
                      int use_lat, int64_t lat, Rec *recs) {
    const uint8_t *end = p + len;
    if (check_count(count, len) < 0) return -1;
    for (Py_ssize_t i = 0; i < count; i++)
        if (read_record(&p, end, base_offset, base_ts, use_lat, lat, &recs[i]) < 0) return -1;
    if (p != end) { kerr_invalid("Incorrect declared batch size, records still remaining in file"); return -1; }
    return 0;
}

#endif /* KLOG_RECORD_H */

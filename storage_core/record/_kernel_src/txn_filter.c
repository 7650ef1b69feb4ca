/*
 * txn_filter.c: READ_COMMITTED over a run of batches (Kafka's consumer CompletedFetch), as a state that lives
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
 * the aborted list is a sorted array walked once, its last offsets a sorted array searched.
 * add_v2_run (decode.c) steps a filter without the GIL, the filter marked busy meanwhile.
 */
#include "kernel.h"

#define PID_USED 1
#define PID_ABORTING 2
#define PID_RETURNED 4

typedef struct { int64_t first, last, pid; } AbortedEntry;
typedef struct { int64_t pid; uint8_t flags; } PidSlot;

struct TxnFilter {
    PyObject_HEAD
    int busy;               /* a call works on it without the GIL (kobj_enter) */
    AbortedEntry *aborted;  /* by (first offset, last offset) */
    int64_t *markers;       /* the last offsets, ascending */
    Py_ssize_t n;           /* aborted transactions */
    Py_ssize_t next;        /* aborted[next:] are pending: no batch has reached their first offset yet */
    PidSlot *slots;
    Py_ssize_t cap, used;   /* cap is 0 or a power of two */
};

int txn_enter(TxnFilter *f) { return kobj_enter(&f->busy, "TxnFilter"); }
void txn_leave(TxnFilter *f) { kobj_leave(&f->busy); }

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

/* The slot of pid, added if new; NULL with KERR_NOMEM. */
static PidSlot *txn_slot(TxnFilter *f, int64_t pid) {
    PidSlot *s = txn_find(f, pid);
    if (s) return s;
    if (2 * (f->used + 1) > f->cap) { /* keep the load at most 1/2 */
        Py_ssize_t cap = f->cap ? 2 * f->cap : 16;
        PidSlot *slots = (PidSlot *)calloc((size_t)cap, sizeof(PidSlot));
        if (!slots) { kerr_nomem(); return NULL; }
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

/* Step 1 for a batch whose last offset is last_offset. 0, or -1 with KERR_NOMEM. */
int txn_advance(TxnFilter *f, int64_t last_offset) {
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
 * TXN_* verdict; state is left unchanged on TXN_MISSING_ENTRY. -1 with KERR_NOMEM. */
int txn_step(TxnFilter *f, int control, int transactional, int64_t pid, int64_t last_offset, int abort_marker) {
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
    if (kobj_idle(f->busy, "TxnFilter") < 0) return -1;
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
    if (txn_enter(f) < 0) return NULL;
    int rc = txn_advance(f, last);
    txn_leave(f);
    if (rc < 0) return kerr_raise("TxnFilter.advance");
    Py_RETURN_NONE;
}

static PyObject *TxnFilter_step(TxnFilter *f, PyObject *args) {
    int control, transactional, abort_marker;
    long long pid, last;
    if (!PyArg_ParseTuple(args, "ppLLp", &control, &transactional, &pid, &last, &abort_marker)) return NULL;
    if (txn_enter(f) < 0) return NULL;
    int verdict = txn_advance(f, last) < 0 ? -1 : txn_step(f, control, transactional, pid, last, abort_marker);
    txn_leave(f);
    if (verdict < 0) return kerr_raise("TxnFilter.step");
    return PyLong_FromLong(verdict);
}

/* snapshot() -> (pending index, frozenset of aborting producers, frozenset of producers with data
 * returned since their last marker): for the tests, to compare with the reference's state. */
static PyObject *TxnFilter_snapshot(TxnFilter *f, PyObject *unused) {
    (void)unused;
    if (kobj_idle(f->busy, "TxnFilter") < 0) return NULL;
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

PyTypeObject TxnFilterType = {
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


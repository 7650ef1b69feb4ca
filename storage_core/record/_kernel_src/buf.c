/*
 * buf.c: the kernel's memory and its errors.
 *
 * Growable buffers (Buf) that become Arrow buffers without a copy (OwnedBuffer, the buffer
 * protocol over the kernel's memory), the pool of mappings they start from, and the per-thread
 * error state of the code that runs without the GIL (kernel.h says how the two meet).
 */
#include "kernel.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>

PyObject *InvalidRecordError = NULL;
PyObject *KlogError = NULL;

/* ---------------------------------------------------------------- the error state */

#define KERR_MSG_BYTES 512

static _Thread_local struct {
    KerrKind kind;
    char msg[KERR_MSG_BYTES];
} kerr;

static int kerr_vformat(KerrKind kind, const char *fmt, va_list ap) {
    vsnprintf(kerr.msg, sizeof kerr.msg, fmt, ap);
    kerr.kind = kind;
    return -1;
}

int kerr_invalid(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kerr_vformat(KERR_INVALID, fmt, ap);
    va_end(ap);
    return -1;
}

int kerr_klog(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kerr_vformat(KERR_KLOG, fmt, ap);
    va_end(ap);
    return -1;
}

static int kerr_set(KerrKind kind, const char *msg) {
    snprintf(kerr.msg, sizeof kerr.msg, "%s", msg);
    kerr.kind = kind;
    return -1;
}

int kerr_nomem(void) { return kerr_set(KERR_NOMEM, ""); }
int kerr_overflow(const char *msg) { return kerr_set(KERR_OVERFLOW, msg); }
int kerr_value(const char *msg) { return kerr_set(KERR_VALUE, msg); }
KerrKind kerr_kind(void) { return kerr.kind; }
void kerr_clear(void) { kerr.kind = KERR_NONE; }

PyObject *kerr_raise(const char *where) {
    KerrKind kind = kerr.kind;
    kerr.kind = KERR_NONE;
    if (PyErr_Occurred()) return NULL;
    switch (kind) {
    case KERR_INVALID: PyErr_SetString(InvalidRecordError, kerr.msg); break;
    case KERR_NOMEM: PyErr_NoMemory(); break;
    case KERR_OVERFLOW: PyErr_SetString(PyExc_OverflowError, kerr.msg); break;
    case KERR_VALUE: PyErr_SetString(PyExc_ValueError, kerr.msg); break;
    case KERR_KLOG: PyErr_SetString(KlogError, kerr.msg); break;
    default: PyErr_Format(PyExc_SystemError, "%s failed without saying why", where); break;
    }
    return NULL;
}

int kobj_idle(int busy, const char *what) {
    if (!busy) return 0;
    PyErr_Format(PyExc_RuntimeError, "this %s is in use by another thread; use one per thread", what);
    return -1;
}

int kobj_enter(int *busy, const char *what) {
    if (kobj_idle(*busy, what) < 0) return -1;
    *busy = 1;
    return 0;
}

/* ---------------------------------------------------------------- growable buffer */

/* Buffers of MAP_MIN_BYTES and more live in their own anonymous mappings: they grow with
 * mremap (no copy) and cost no memory until written. A finished buffer is handed to Arrow
 * without a copy; when Arrow lets go of it, the mapping goes back to a small pool (at most
 * POOL_SLOTS mappings, POOL_MAX_BYTES in all) that the next buffers start from, so a reader
 * that decodes batch after batch writes into pages already faulted in instead of paying a
 * page fault per 4 KiB of every column it fills. The pool is the one state the threads share:
 * every use of it holds pool_lock (never while waiting for the GIL). */
#define MAP_MIN_BYTES ((Py_ssize_t)1 << 20)
#define POOL_SLOTS 16
#define POOL_MAX_BYTES ((Py_ssize_t)128 << 20)

static struct { uint8_t *data; Py_ssize_t cap; } pool[POOL_SLOTS];
static int pool_n = 0;
static Py_ssize_t pool_bytes = 0;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

void mem_free(uint8_t *data, Py_ssize_t cap, int mapped) {
    if (!data) return;
    if (!mapped) { free(data); return; }
    pthread_mutex_lock(&pool_lock);
    if (pool_n < POOL_SLOTS && pool_bytes + cap <= POOL_MAX_BYTES) {
        pool[pool_n].data = data;
        pool[pool_n].cap = cap;
        pool_n++;
        pool_bytes += cap;
        pthread_mutex_unlock(&pool_lock);
        return;
    }
    pthread_mutex_unlock(&pool_lock);
    munmap(data, (size_t)cap);
}

/* A pooled mapping for at least `need` bytes: the largest (the first buffer to need a mapping
 * is usually the one that grows most: a values column), grown with mremap if short. */
static uint8_t *pool_take(Py_ssize_t need, Py_ssize_t *cap) {
    pthread_mutex_lock(&pool_lock);
    if (!pool_n) { pthread_mutex_unlock(&pool_lock); return NULL; }
    int i = 0;
    for (int j = 1; j < pool_n; j++)
        if (pool[j].cap > pool[i].cap) i = j;
    uint8_t *data = pool[i].data;
    Py_ssize_t have = pool[i].cap;
    pool_bytes -= have;
    pool[i] = pool[--pool_n];
    pthread_mutex_unlock(&pool_lock);
    if (have < need) {
        void *p = mremap(data, (size_t)have, (size_t)need, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) { munmap(data, (size_t)have); return NULL; }
        data = (uint8_t *)p;
        have = need;
    }
    *cap = have;
    return data;
}

void buf_free(Buf *b) {
    mem_free(b->data, b->cap, b->mapped);
    b->data = NULL;
    b->len = b->cap = 0;
    b->mapped = 0;
}

int buf_grow(Buf *b, Py_ssize_t need) {
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 2) return kerr_nomem();
        cap *= 2;
    }
    if (cap < MAP_MIN_BYTES) {
        uint8_t *p = (uint8_t *)realloc(b->data, (size_t)cap);
        if (!p) return kerr_nomem();
        b->data = p;
        b->cap = cap;
        return 0;
    }
    if (b->mapped) {
        void *p = mremap(b->data, (size_t)b->cap, (size_t)cap, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) return kerr_nomem();
        b->data = (uint8_t *)p;
        b->cap = cap;
        return 0;
    }
    Py_ssize_t got = cap;
    uint8_t *p = pool_take(cap, &got);
    if (!p) {
        void *m = mmap(NULL, (size_t)cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return kerr_nomem();
#ifdef MADV_HUGEPAGE
        /* huge pages where the system offers them on request (transparent_hugepage=madvise):
         * a column of 100 MB costs 50 faults instead of 25,000 (read_arrow of 2M records: 0.23
         * -> 0.19 s). Advice only: a refusal changes nothing. mremap keeps it. */
        madvise(m, (size_t)cap, MADV_HUGEPAGE);
#endif
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

PyTypeObject OwnedBufferType = {
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
PyObject *take_buffer(Buf *b) {
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


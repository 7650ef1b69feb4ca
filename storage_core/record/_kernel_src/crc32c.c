/*
 * crc32c.c: CRC-32C (Castagnoli), the checksum of v2 batches (Crc32C.java, over attributes .. the
 * end of the batch). Tables are filled once at module init and only read after: no state is
 * written while threads run.
 */
#include "kernel.h"


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

void crc32c_init(void) {
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

uint32_t crc32c(const uint8_t *p, size_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (have_sse42) return crc32c_hw(0, p, n);
#endif
    return crc32c_sw(0, p, n);
}

PyObject *kernel_crc32c(PyObject *self, PyObject *args) {
    Py_buffer view;
    int software = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &software)) return NULL;
    uint32_t c;
    /* the GIL is let go only where the checksum takes longer than letting it go does */
    if (view.len >= GIL_FREE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        c = software ? crc32c_sw(0, view.buf, (size_t)view.len) : crc32c(view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        c = software ? crc32c_sw(0, view.buf, (size_t)view.len) : crc32c(view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}


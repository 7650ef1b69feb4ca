/*
 * md5.c: MD5 (RFC 1321), the key hash of Kafka's SkimpyOffsetMap (the cleaner's offset map).
 * Written here rather than linked from OpenSSL so that the kernel builds wherever a C compiler
 * does; tests compare it with hashlib.md5. No state.
 */
#include "kernel.h"

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

static void md5_pad_one(const uint8_t *p, size_t n, uint8_t tail[64]) {
    memset(tail, 0, 64);
    if (n) memcpy(tail, p, n);
    tail[n] = 0x80;
    uint64_t bits = (uint64_t)n << 3;
    for (int i = 0; i < 8; i++) tail[56 + i] = (uint8_t)(bits >> (8 * i));
}

void md5(const uint8_t *p, size_t n, uint8_t out[16]) {
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
void md5_two_short(const uint8_t *p1, size_t n1, uint8_t out1[16], const uint8_t *p2, size_t n2,
                          uint8_t out2[16]) {
    uint32_t s1[4] = MD5_INIT, s2[4] = MD5_INIT;
    uint8_t t1[64], t2[64];
    md5_pad_one(p1, n1, t1);
    md5_pad_one(p2, n2, t2);
    md5_block2(s1, t1, s2, t2);
    md5_out(s1, out1);
    md5_out(s2, out2);
}

PyObject *kernel_md5(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    uint8_t out[16];
    md5((const uint8_t *)view.buf, (size_t)view.len, out);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)out, 16);
}


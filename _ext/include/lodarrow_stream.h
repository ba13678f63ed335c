/* Streaming (non-temporal) writes of a large output, for the write-heavy backward kernels
 * (sequence_pool's sum family, sequence_pad's and sequence_concat's).
 *
 * A plain store to a line that is not in cache first reads the line from memory (a read
 * for ownership), so writing an output larger than the cache moves its bytes twice.  A
 * streaming store writes a whole 64-byte line without reading it: one transfer instead of
 * two.  It pays only when the output does not fit in the cache anyway (the next reader then
 * misses either way), so the kernels stream only outputs of LA_STREAM_MIN_BYTES or more
 * and store plainly below, where the output may still be cached when it is read.
 *
 * la_stream_t writes one range of the output front to back: appended bytes land at
 * consecutive addresses.  Short pieces gather in a small buffer (in L1) and leave as whole
 * lines; long ones stream straight from their source.  The range's first and last partial
 * lines are written with plain stores, so ranges of different threads never stream into a
 * shared line.  Streaming stores are SSE2's (every x86-64, GCC or Clang); elsewhere
 * LA_STREAM_NT is 0 and the kernels keep their plain loops (la_stream_worth is false).
 * la_stream_end writes the rest and fences: the bytes are visible to every thread (and to
 * Python) once it returns.
 */
#ifndef LODARROW_STREAM_H
#define LODARROW_STREAM_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef LA_STREAM_NT  /* -DLA_STREAM_NT=0 builds the plain stores everywhere */
#if defined(__SSE2__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LA_STREAM_NT 1
#else
#define LA_STREAM_NT 0
#endif
#endif
#if LA_STREAM_NT
#include <emmintrin.h>
#endif

/* Outputs of at least this many bytes are streamed: about the last-level cache a thread
 * has on most machines (smaller ones may still be cached when read next). */
#define LA_STREAM_MIN_BYTES ((size_t)16 << 20)
/* The staging buffer: whole lines leave once it holds this many bytes. */
#define LA_STAGE 1024
/* Pieces up to this long are staged (copied in 32-byte steps); longer ones stream directly. */
#define LA_STAGE_PIECE 256

static inline int la_stream_worth(size_t out_bytes) {
    return LA_STREAM_NT && out_bytes >= LA_STREAM_MIN_BYTES;
}

typedef struct {
    char* dst;        /* where buf[0] goes */
    size_t fill;      /* bytes held in buf */
    /* + room for a piece and its overrun, and for a 64-byte read past the last byte */
    unsigned char buf[LA_STAGE + LA_STAGE_PIECE + 128];
} la_stream_t;

static inline void la_stream_begin(la_stream_t* s, void* dst) {
    s->dst = (char*)dst;
    s->fill = 0;
}

/* One whole 64-byte line from src (any alignment) to the 64-byte aligned dst. */
static inline void la_stream_line(char* dst, const void* src) {
#if LA_STREAM_NT
    const __m128i* p = (const __m128i*)src;
    __m128i a = _mm_loadu_si128(p), b = _mm_loadu_si128(p + 1);
    __m128i c = _mm_loadu_si128(p + 2), d = _mm_loadu_si128(p + 3);
    _mm_stream_si128((__m128i*)dst, a);
    _mm_stream_si128((__m128i*)dst + 1, b);
    _mm_stream_si128((__m128i*)dst + 2, c);
    _mm_stream_si128((__m128i*)dst + 3, d);
#else
    memcpy(dst, src, 64);
#endif
}

/* Write buf out: the bytes before dst's first line boundary plainly, whole lines streamed;
 * the last partial line plainly when `last`, else kept (moved to the front of buf). */
static inline void la_stream_flush(la_stream_t* s, int last) {
    char* d = s->dst;
    const unsigned char* p = s->buf;
    size_t n = s->fill;
    size_t head = (size_t)(-(uintptr_t)d) & 63;
    if (head > n)
        head = n;
    if (head) {
        memcpy(d, p, head);
        d += head; p += head; n -= head;
    }
    while (n >= 64) {
        la_stream_line(d, p);
        d += 64; p += 64; n -= 64;
    }
    if (last) {
        memcpy(d, p, n);
        d += n; n = 0;
    } else if (n && p != s->buf) {
        /* under a line left: move a whole line's worth (a fixed size, no call) */
        memmove(s->buf, p, 64);
    }
    s->dst = d;
    s->fill = n;
}

/* Append n bytes from src; reads stay before src_limit (a short piece is copied in 32-byte
 * steps, which may read up to 31 bytes past it: only where that is inside the source). */
static inline void la_stream_put(la_stream_t* s, const void* src, size_t n,
                                 const void* src_limit) {
    const char* p = (const char*)src;
    size_t k, padded;
    if (n <= LA_STAGE_PIECE) {
        if (s->fill + n > LA_STAGE)
            la_stream_flush(s, 0);
        padded = (n + 31) & ~(size_t)31;
        if ((const char*)src_limit - p >= (ptrdiff_t)padded) {
            for (k = 0; k < padded; k += 32)
                memcpy(s->buf + s->fill + k, p + k, 32);
        } else {
            memcpy(s->buf + s->fill, p, n);
        }
        s->fill += n;
        return;
    }
    /* A long piece: complete the line it starts in, write out the buffer, stream its whole
     * lines from the source and keep the rest. */
    k = (size_t)(-(uintptr_t)(s->dst + s->fill)) & 63;
    memcpy(s->buf + s->fill, p, k);
    s->fill += k; p += k; n -= k;
    la_stream_flush(s, 0);   /* everything up to a line boundary: buf is empty after */
    while (n >= 64) {
        la_stream_line(s->dst, p);
        s->dst += 64; p += 64; n -= 64;
    }
    memcpy(s->buf, p, n);
    s->fill = n;
}

/* Append `count` copies of the `w`-byte row (w at most 64 and a power of two: a divisor
 * of the line; other rows go through la_stream_put one at a time). */
static inline void la_stream_repeat(la_stream_t* s, const void* row, size_t w, size_t count) {
    /* the rows as one periodic byte sequence: any 64 bytes of it start at pat + (pos % w) */
    unsigned char pat[128];
    size_t i, k, pos, total = count * w, lines;
    const unsigned char* win;
    if (!total)
        return;
    if (w > 64 || (w & (w - 1))) {
        for (i = 0; i < count; i++)
            la_stream_put(s, row, w, (const char*)row + w);
        return;
    }
    memcpy(pat, row, w);
    for (k = w; k < 128; k <<= 1)
        memcpy(pat + k, pat, k);
    /* complete the current line from the pattern, then write out the buffer */
    k = (size_t)(-(uintptr_t)(s->dst + s->fill)) & 63;
    if (k > total)
        k = total;
    if (s->fill + k > LA_STAGE)
        la_stream_flush(s, 0);
    memcpy(s->buf + s->fill, pat, k);
    s->fill += k;
    pos = k;
    if (pos == total)
        return;
    la_stream_flush(s, 0);
    win = pat + pos % w;
    lines = (total - pos) / 64;
#if LA_STREAM_NT
    if (lines) {
        const __m128i* q = (const __m128i*)win;
        __m128i a = _mm_loadu_si128(q), b = _mm_loadu_si128(q + 1);
        __m128i c = _mm_loadu_si128(q + 2), d = _mm_loadu_si128(q + 3);
        for (i = 0; i < lines; i++) {
            __m128i* o = (__m128i*)(s->dst + i * 64);
            _mm_stream_si128(o, a);
            _mm_stream_si128(o + 1, b);
            _mm_stream_si128(o + 2, c);
            _mm_stream_si128(o + 3, d);
        }
    }
#else
    for (i = 0; i < lines; i++)
        memcpy(s->dst + i * 64, win, 64);
#endif
    s->dst += lines * 64;
    pos += lines * 64;
    /* the rest (under a line) starts in the same phase: 64 * lines is whole rows */
    memcpy(s->buf, win, total - pos);
    s->fill = total - pos;
}

/* Write what is left and make the streamed lines visible. */
static inline void la_stream_end(la_stream_t* s) {
    la_stream_flush(s, 1);
#if LA_STREAM_NT
    _mm_sfence();
#endif
}

#endif

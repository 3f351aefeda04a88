/* Fusion and folding of one layer in one pass over its memory (see sdk/native_fusion.py, which loads
 * this file's shared library with ctypes and checks it against the numpy kernel before using it).
 *
 * A layer in a weight buffer is `blocks` x `rows` x `block` floats: output channel b*block + c is lane c
 * of block b (block 1: the plain [O, n] layout; 8 or 16: onnxruntime's blocked NCHWc layout). For every
 * element, in chunks that stay in L1:
 *
 *     out = ((sum_q alpha_q D_q) * delta_scale[ch] + low_rank + base) * fold[ch]
 *
 * where D_q are the stored deltas (float32, float16 or int8) in the buffer's order, `base` is W_0 in the
 * buffer's order (float32 or float16), each term is optional, and the low-rank term is either
 * - `product`: the product already computed (by BLAS, in the plain layout: float32 in the buffer's order), or
 * - `left` [blocks * block, rank] times `right` [rows, rank] transposed, computed here (blocked layouts):
 *   lane c of row j is sum_k left[b*block + c][k] * right[j][k], `rank` vector multiply-adds per `block`
 *   elements with the block's lanes held in registers. Full-width ResNet-18, a 512x4608 conv stored
 *   subspace:16+fp16, blocked by 8, two threads: 10.3 ms with BLAS's product in scratch read back here,
 *   4.2 ms computed here (medians of 15, sdk/native_fusion.py has the whole-network figures). On this
 *   machine (2 cores, 128-bit FMA units) the multiply-adds are the bound: on one thread the low-rank term
 *   alone adds ~2.7 ms at rank 16 and ~5.4 ms at rank 32 to the ~1.4 ms of writing the layer.
 *
 * Portable C99 plus GCC/Clang vector extensions (a vector of `block` floats; float16 widened with integer
 * operations, so that it vectorises without F16C or _Float16), compiled twice on x86: once for the
 * baseline ISA and once for AVX2+FMA, chosen at run time by what the CPU supports (`taper_kernel_variant`).
 */
#include <stdint.h>
#include <string.h>

enum { TAPER_F32 = 0, TAPER_F16 = 1, TAPER_I8 = 2 };
#define CHUNK 1024
#define RANK_PIECE 64   /* left-factor columns held as lane vectors at once (64 x 16 floats: 4 kB) */
#define INLINE static inline __attribute__((always_inline))

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TAPER_X86_AVX2 1
#endif

typedef float lanes8 __attribute__((vector_size(32)));
typedef float lanes16 __attribute__((vector_size(64)));
typedef uint32_t bits8 __attribute__((vector_size(32)));
typedef uint16_t halves8 __attribute__((vector_size(16)));

typedef struct {
    int64_t first, stop;        /* the blocks this call writes */
    int64_t rows, block;
    int64_t q;
    const float *alpha;         /* [q] */
    const void *deltas;         /* basis k at deltas + k * delta_stride elements, or NULL */
    int64_t delta_type, delta_stride;
    const float *product;       /* the low-rank product in the buffer's order, or NULL */
    const float *left;          /* [blocks * block, rank], or NULL */
    const float *right;         /* [rows, rank] */
    int64_t rank;
    const void *base;           /* buffer order, or NULL */
    int64_t base_type;
    const float *delta_scale;   /* [blocks * block], or NULL */
    const float *fold;          /* [blocks * block], or NULL */
    float *out;                 /* the layer's first element */
} taper_layer;

/* All bits set where `test` holds: a vector comparison gives -1 per lane and a scalar one 1, so both are
 * reduced to their lowest bit first. */
#define ALL_ONES_IF(BITS, test) (~((BITS)((test) & 1) - 1u))

/* float16 -> float32, exact for every value (zero, subnormals, inf and NaN with its payload), in integer
 * operations that vectorise in any ISA (F. Giesen's half_to_float_fast: move exponent and mantissa into
 * place, rebias the exponent, fix inf/NaN and renormalise subnormals by one subtraction). */
#define HALF_TO_FLOAT(BITS, FLOATS, h)                                                                    \
    do {                                                                                                  \
        BITS o_ = (h & 0x7fff) << 13;                                                                     \
        BITS e_ = o_ & 0x0f800000u;                                                                       \
        BITS subnormal_ = ALL_ONES_IF(BITS, e_ == 0);                                                     \
        o_ += 0x38000000u + (ALL_ONES_IF(BITS, e_ == 0x0f800000u) & 0x38000000u)                          \
              + (subnormal_ & 0x00800000u);                                                               \
        FLOATS f_, magic_;                                                                                \
        BITS m_ = subnormal_ & 0x38800000u; /* 2^-14 where subnormal, else +0 */                          \
        memcpy(&f_, &o_, sizeof f_);                                                                      \
        memcpy(&magic_, &m_, sizeof magic_);                                                              \
        f_ -= magic_;               /* arithmetic only where subnormal: a NaN keeps its bits */          \
        BITS renormalised_;                                                                               \
        memcpy(&renormalised_, &f_, sizeof renormalised_);                                                \
        o_ = (renormalised_ & subnormal_) | (o_ & ~subnormal_);                                           \
        o_ |= (h & 0x8000) << 16;                                                                         \
        memcpy(&out_, &o_, sizeof out_);                                                                  \
    } while (0)

INLINE float half_to_float(uint16_t half) {
    uint32_t h = half;
    float out_;
    HALF_TO_FLOAT(uint32_t, float, h);
    return out_;
}

INLINE void halves_to_floats(const uint16_t *d, lanes8 *floats) {
    halves8 packed;
    memcpy(&packed, d, sizeof packed);
    bits8 h = __builtin_convertvector(packed, bits8);
    lanes8 out_;
    HALF_TO_FLOAT(bits8, lanes8, h);
    *floats = out_;
}

INLINE void add_f32(float *restrict acc, const float *restrict d, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] += a * d[i];
}

INLINE void add_i8(float *restrict acc, const int8_t *restrict d, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] += a * (float)d[i];
}

INLINE void add_f16(float *restrict acc, const uint16_t *restrict d, float a, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        lanes8 s, w;
        memcpy(&s, acc + i, sizeof s);
        halves_to_floats(d + i, &w);
        s += a * w;
        memcpy(acc + i, &s, sizeof s);
    }
    for (; i < n; i++) acc[i] += a * half_to_float(d[i]);
}

INLINE void add_typed(float *acc, const void *p, int64_t type, int64_t offset, float a, int64_t n) {
    if (type == TAPER_F32) add_f32(acc, (const float *)p + offset, a, n);
    else if (type == TAPER_F16) add_f16(acc, (const uint16_t *)p + offset, a, n);
    else add_i8(acc, (const int8_t *)p + offset, a, n);
}

INLINE void multiply(float *restrict acc, const float *restrict lanes, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] *= lanes[i];
}

/* lanes[e] = values[b * block + e % block] for a chunk that starts on a lane-0 element. */
INLINE void lane_pattern(float *lanes, const float *values, int64_t b, int64_t block, int64_t n) {
    for (int64_t e = 0; e < n; e++) lanes[e] = values[b * block + e % block];
}

/* acc[j * W + c] += sum_k left[c * rank + k] * right[j * rank + k] for `rows` rows: the left factor's
 * columns as lane vectors, eight rows at a time in eight named accumulators (independent multiply-add
 * chains held in registers: an array of accumulators was kept on the stack by GCC 12 and ran 1.5x slower;
 * four chains and eight timed alike here, eight leave room for wider FMA units). */
#define ACC8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define DEFINE_LOW_RANK(NAME, VEC, W)                                                                      \
    INLINE void NAME(float *acc, const float *left, const float *right, int64_t rows, int64_t rank) {     \
        typedef VEC vec_t;                                                                                \
        enum { width = W };                                                                               \
        VEC cols[RANK_PIECE];                                                                             \
        for (int64_t k0 = 0; k0 < rank; k0 += RANK_PIECE) {                                              \
            const int64_t kn = rank - k0 < RANK_PIECE ? rank - k0 : RANK_PIECE;                           \
            for (int64_t k = 0; k < kn; k++)                                                              \
                for (int c = 0; c < W; c++) cols[k][c] = left[c * rank + k0 + k];                         \
            int64_t j = 0;                                                                                \
            for (; j + 8 <= rows; j += 8) {                                                               \
                const float *r = right + j * rank + k0;                                                   \
                float *at = acc + j * W;                                                                  \
                ACC8(LOW_RANK_LOAD)                                                                       \
                for (int64_t k = 0; k < kn; k++) {                                                        \
                    const VEC c = cols[k];                                                                \
                    ACC8(LOW_RANK_STEP)                                                                   \
                }                                                                                         \
                ACC8(LOW_RANK_STORE)                                                                      \
            }                                                                                             \
            for (; j < rows; j++) {                                                                       \
                VEC a;                                                                                    \
                memcpy(&a, acc + j * W, sizeof a);                                                        \
                const float *r = right + j * rank + k0;                                                   \
                for (int64_t k = 0; k < kn; k++) a += r[k] * cols[k];                                     \
                memcpy(acc + j * W, &a, sizeof a);                                                        \
            }                                                                                             \
        }                                                                                                 \
    }
#define LOW_RANK_LOAD(i) vec_t a##i; memcpy(&a##i, at + (i) * width, sizeof a##i);
#define LOW_RANK_STEP(i) a##i += r[(i) * rank + k] * c;
#define LOW_RANK_STORE(i) memcpy(at + (i) * width, &a##i, sizeof a##i);
DEFINE_LOW_RANK(low_rank_8, lanes8, 8)
DEFINE_LOW_RANK(low_rank_16, lanes16, 16)

/* Any other block width (not a layout onnxruntime uses today): the same sum, one lane at a time. */
INLINE void low_rank_any(float *acc, const float *left, const float *right, int64_t rows, int64_t rank,
                         int64_t block) {
    for (int64_t j = 0; j < rows; j++)
        for (int64_t c = 0; c < block; c++) {
            float s = 0.0f;
            for (int64_t k = 0; k < rank; k++) s += left[c * rank + k] * right[j * rank + k];
            acc[j * block + c] += s;
        }
}

INLINE void low_rank(float *acc, const float *left, const float *right, int64_t rows, int64_t rank,
                     int64_t block) {
    if (block == 8) low_rank_8(acc, left, right, rows, rank);
    else if (block == 16) low_rank_16(acc, left, right, rows, rank);
    else low_rank_any(acc, left, right, rows, rank, block);
}

INLINE int64_t fuse_layer(const taper_layer *L) {
    if (L->block < 1 || L->rows < 1 || CHUNK % L->block != 0) return -1;
    const int64_t slab = L->rows * L->block;
    const int64_t chunk = (CHUNK / L->block) * L->block;
    float acc[CHUNK], scale[CHUNK], fold[CHUNK];
    for (int64_t b = L->first; b < L->stop; b++) {
        int64_t width = slab < chunk ? slab : chunk;
        if (L->delta_scale) lane_pattern(scale, L->delta_scale, b, L->block, width);
        if (L->fold) lane_pattern(fold, L->fold, b, L->block, width);
        for (int64_t e0 = 0; e0 < slab; e0 += chunk) {
            const int64_t n = slab - e0 < chunk ? slab - e0 : chunk;
            const int64_t at = b * slab + e0;
            memset(acc, 0, (size_t)n * sizeof(float));
            if (L->deltas) {
                for (int64_t k = 0; k < L->q; k++)
                    add_typed(acc, L->deltas, L->delta_type, k * L->delta_stride + at, L->alpha[k], n);
                if (L->delta_scale) multiply(acc, scale, n);
            }
            if (L->product) add_f32(acc, L->product + at, 1.0f, n);
            if (L->left)
                low_rank(acc, L->left + b * L->block * L->rank, L->right + (e0 / L->block) * L->rank,
                         n / L->block, L->rank, L->block);
            if (L->base) add_typed(acc, L->base, L->base_type, at, 1.0f, n);
            if (L->fold) multiply(acc, fold, n);
            memcpy(L->out + at, acc, (size_t)n * sizeof(float));
        }
    }
    return 0;
}

static int64_t fuse_baseline(const taper_layer *L) { return fuse_layer(L); }

#ifdef TAPER_X86_AVX2
__attribute__((target("avx2,fma"))) static int64_t fuse_avx2(const taper_layer *L) { return fuse_layer(L); }

static int has_avx2(void) {
    static int known = -1;  /* a benign race: every thread computes the same value */
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return known;
}
#endif

/* 1: the AVX2+FMA build is used on this CPU; 0: the baseline build. */
int64_t taper_kernel_variant(void) {
#ifdef TAPER_X86_AVX2
    return has_avx2();
#else
    return 0;
#endif
}

/* 0, or -1 for a layout the kernel does not handle (a block that does not divide its chunk). */
int64_t taper_fuse_layer(const taper_layer *L) {
#ifdef TAPER_X86_AVX2
    if (has_avx2()) return fuse_avx2(L);
#endif
    return fuse_baseline(L);
}

/* The baseline build, whatever the CPU (for tests: both builds must agree with numpy). */
int64_t taper_fuse_layer_baseline(const taper_layer *L) { return fuse_baseline(L); }

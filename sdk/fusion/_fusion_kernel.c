/* Fusion and folding of a whole network in one call (see sdk/fusion/native.py, which loads this file's
 * shared library with ctypes and checks it against the numpy kernel before using it).
 *
 * A layer's weight in a buffer is `blocks` x `rows` x `block` floats: output channel b*block + c is lane c
 * of block b (block 1: the plain [O, n] layout, rows = n; 8 or 16: onnxruntime's blocked NCHWc layout).
 * For every output-channel block, in one pass over its memory with the values in registers:
 *
 *     out = ((sum_q alpha_q D_q) * delta_scale[ch] + low_rank + base) * fold[ch]
 *
 * where D_q are the stored deltas (float32, float16 or int8) in the buffer's order, `base` is W_0 in the
 * buffer's order (float32 or float16), each term is optional, and the low-rank term is left x right with
 * the left factor mixed here from the bases' U [q, O, r] (float32 or float16): `subspace` sums
 * alpha_q U_q (k = r columns, one shared right factor), `lowrank` puts alpha_q U_q side by side (k = q r).
 * The right factor is V [k, n] in the plain layout and V transposed in the block's element order [rows, k]
 * in the blocked one. Before the weights, the block's per-channel tensors are mixed with alpha and its
 * batch norm turned into (fold, shift): shift is written as the folded bias, fold scales the weights (a
 * classifier's one channel tensor is its bias, and its weights are not folded).
 *
 * One call does every layer, a share of each layer's blocks per thread (`part` of `parts`: the threads
 * never write the same memory and need no synchronisation), so personalize() makes one call per thread
 * whatever the network. The blocked layouts hold 8 rows (8 x block floats) in 8 named accumulators, the
 * plain one 64 consecutive elements of a channel; the block's lanes of fold, delta scale and left factor are
 * vectors computed once per block. Why this shape: the kernel it replaced (one call per layer, chunked
 * passes over an L1 buffer, lane patterns rebuilt with a modulo per element) ran ~3 cycles per element on
 * this machine; docs/results/runtime.md has the measured fuse+fold against its roofline.
 *
 * Portable C99 plus GCC/Clang vector extensions. The file holds what every build shares, then (after
 * #else) one build of the kernel, which the first part includes twice: for the baseline ISA (float16
 * widened with integer operations, exact for every value) and, on x86, for AVX2+FMA+F16C (float16 widened
 * by the CPU) and for AVX-512 (16 floats a register, 32 registers), chosen at run time by what the CPU
 * supports (`taper_kernel_variant`; `taper_fuse_network_build` runs a given one, for tests and timing). On aarch64 the baseline
 * build widens float16 and int8 with NEON instructions and keeps its vectors in registers (TAPER_NEON);
 * scripts/cross_kernel.py cross-builds it and checks it under qemu against the Python reference.
 */
#ifndef TAPER_VARIANT   /* the first pass: what every build shares; the builds (`V`) follow */
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { TAPER_F32 = 0, TAPER_F16 = 1, TAPER_I8 = 2 };
#define INLINE static inline __attribute__((always_inline))

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TAPER_X86_AVX2 1
#include <immintrin.h>
#endif
#if defined(__GNUC__) && defined(__aarch64__)
#define TAPER_NEON 1   /* every aarch64 CPU has NEON (Advanced SIMD), with fp16 <-> fp32 conversions */
#include <arm_neon.h>
#endif

/* V(name): the name in the build being compiled (name_baseline, name_avx2). */
#define V_JOIN(name, variant) name##_##variant
#define V_NAME(name, variant) V_JOIN(name, variant)
#define V(name) V_NAME(name, TAPER_VARIANT)

typedef float lanes4 __attribute__((vector_size(16)));
typedef float lanes8 __attribute__((vector_size(32)));
typedef float lanes16 __attribute__((vector_size(64)));
typedef uint32_t bits8 __attribute__((vector_size(32)));
typedef uint16_t halves8 __attribute__((vector_size(16)));
typedef int8_t bytes8 __attribute__((vector_size(8)));
typedef int32_t ints8 __attribute__((vector_size(32)));

typedef struct {
    int64_t out;                /* the weight's first float in the buffer */
    int64_t bias;               /* the first float of its folded bias (the classifier: its bias) */
    int64_t blocks, rows, block;
    int64_t alpha_row;          /* the row of alpha [4, q] that mixes this layer */
    const float *channels;      /* [channel_rows, channel_count, blocks * block], or NULL (no bias, no fold) */
    int64_t channel_rows;       /* q, or 1 where every basis has the same (a shared layer) */
    int64_t channel_count;      /* 4: batch norm (weight, bias, mean, variance); 1: a bias */
    const void *deltas;         /* basis k at deltas + k * blocks * rows * block elements, or NULL */
    int64_t delta_type;
    const float *delta_scale;   /* int8 deltas: [blocks * block], or NULL */
    const void *base;           /* W_0 in the buffer's order, or NULL */
    int64_t base_type;
    const void *u;              /* [q, blocks * block, rank], or NULL: no low-rank term */
    int64_t u_type;
    const float *right;         /* block 1: [k, rows]; else [rows, k] */
    int64_t rank;
    int64_t subspace;           /* 1: k = rank, U summed; 0: k = q * rank, U side by side */
    int8_t *quantized;          /* plain layout only: the weights as int8 [O, rows] instead of floats, or NULL */
    float *quantized_scale;     /* ... and their scales [O] (`quantize_rows`, each channel as soon as it is fused) */
    int64_t qmin, qmax;
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

/* Loads of one value or one vector from a typed array, widened to float. */
INLINE float load1(const void *p, int64_t type, int64_t at) {
    if (type == TAPER_F32) return ((const float *)p)[at];
    if (type == TAPER_I8) return (float)((const int8_t *)p)[at];
    uint32_t h = ((const uint16_t *)p)[at];
    float out_;
    HALF_TO_FLOAT(uint32_t, float, h);
    return out_;
}

INLINE lanes8 f32x8(const float *p) { lanes8 v; memcpy(&v, p, sizeof v); return v; }
INLINE lanes16 f32x16(const float *p) { lanes16 v; memcpy(&v, p, sizeof v); return v; }
#ifdef TAPER_NEON
/* GCC (12) moves a 32- or 64-byte vector through the stack on aarch64, whose registers hold 16 bytes, when
 * it is stored or assembled with memcpy: stored and joined in 16-byte halves it stays in registers (and the
 * plain layout, the one aarch64 fuses in, uses 16-byte vectors throughout: see `group_plain`). Instructions
 * per fused weight under qemu: docs/results/experiments.md, "The fusion kernel on aarch64", and cpus.json. */
INLINE lanes8 join4(lanes4 lo, lanes4 hi) { return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7); }
INLINE lanes16 join(lanes8 lo, lanes8 hi) {
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
INLINE void store8(float *p, lanes8 v) {
    const lanes4 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3), hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
    memcpy(p, &lo, sizeof lo);
    memcpy(p + 4, &hi, sizeof hi);
}
INLINE void store16(float *p, lanes16 v) {
    store8(p, __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7));
    store8(p + 8, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
}
#else
INLINE lanes16 join(lanes8 lo, lanes8 hi) {
    lanes16 v;
    memcpy(&v, &lo, sizeof lo);
    memcpy((char *)&v + sizeof lo, &hi, sizeof hi);
    return v;
}
INLINE void store8(float *p, lanes8 v) { memcpy(p, &v, sizeof v); }
INLINE void store16(float *p, lanes16 v) { memcpy(p, &v, sizeof v); }
#endif

/* One element, for what is left over: the same terms in scalars. `lane` is its output channel's lane in
 * the block's vectors; `row` its row (blocked) or column (plain). */
INLINE float element(const taper_layer *L, const float *alpha, int64_t q, int64_t at, int64_t row,
                     float fold, float dscale, const float *left, int64_t left_step) {
    float a = 0.0f;
    if (L->deltas) {
        const int64_t stride = L->blocks * L->rows * L->block;
        for (int64_t k = 0; k < q; k++) a += alpha[k] * load1(L->deltas, L->delta_type, k * stride + at);
        if (L->delta_scale) a *= dscale;
    }
    if (L->u) {
        const int64_t kk = L->subspace ? L->rank : q * L->rank;
        for (int64_t k = 0; k < kk; k++)
            a += left[k * left_step] * (L->block == 1 ? L->right[k * L->rows + row] : L->right[row * kk + k]);
    }
    if (L->base) a += load1(L->base, L->base_type, at);
    return a * fold;
}

/* Mixes the per-channel tensors of channels [first, first + n) with alpha, writes their bias, and gives
 * each one's fold (1 where the layer is not folded). */
INLINE void channels(const taper_layer *L, const float *alpha, int64_t first, int64_t n, float eps,
                     float *buffer, float *fold) {
    const int64_t count = L->channel_count, channels_all = L->blocks * L->block;
    for (int64_t c = 0; c < n; c++) {
        const int64_t ch = first + c;
        float mixed[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (!L->channels) {
            fold[c] = 1.0f;
            continue;
        }
        for (int64_t t = 0; t < count; t++) {
            if (L->channel_rows == 1) mixed[t] = L->channels[t * channels_all + ch];
            else
                for (int64_t b = 0; b < L->channel_rows; b++)
                    mixed[t] += alpha[b] * L->channels[(b * count + t) * channels_all + ch];
        }
        if (count == 4) {   /* y = x * scale + shift, scale = weight / sqrt(var + eps) */
            const float scale = mixed[0] / sqrtf(mixed[3] + eps);
            buffer[L->bias + ch] = mixed[1] - mixed[2] * scale;
            fold[c] = scale;
        } else {
            buffer[L->bias + ch] = mixed[0];
            fold[c] = 1.0f;
        }
    }
}

#define ACC8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* The terms of 8 consecutive vectors of `W` floats at element `at` (accumulators a0..a7), in a function
 * per vector type and layout: LOAD_* (defined around each use) load a vector, LOW_RANK adds the low-rank
 * term (LR_* below); they are stored at `out + STORE_AT` (the layer's buffer and `at` where blocked, the
 * channel's row and `row` where plain). */
#define DEFINE_GROUP(NAME, VEC, W, LOW_RANK, STORE_AT)                                      \
    INLINE void NAME(const taper_layer *L, const float *alpha, int64_t q, int64_t at, int64_t row,        \
                     VEC fold, VEC dscale, const float *cols, const float *coef, float *out) {              \
        typedef VEC vec_t;                                                                                \
        enum { width = W };                                                                               \
        const int64_t store_at = STORE_AT;                                                                \
        const vec_t zero = {0};                                                                           \
        (void)cols, (void)coef;     /* each layout's low-rank term reads one of them */                   \
        ACC8(GROUP_ZERO)                                                                                  \
        if (L->deltas) {                                                                                  \
            const int64_t stride = L->blocks * L->rows * L->block;                                        \
            for (int64_t k = 0; k < q; k++) {                                                             \
                const float w = alpha[k];                                                                 \
                const int64_t d = k * stride + at;                                                        \
                if (L->delta_type == TAPER_F32) { const float *p = (const float *)L->deltas + d; ACC8(GROUP_F32) } \
                else if (L->delta_type == TAPER_F16) { const uint16_t *p = (const uint16_t *)L->deltas + d; ACC8(GROUP_F16) } \
                else { const int8_t *p = (const int8_t *)L->deltas + d; ACC8(GROUP_I8) }                 \
            }                                                                                             \
            if (L->delta_scale) { ACC8(GROUP_SCALE) }                                                     \
        }                                                                                                 \
        if (L->u) { LOW_RANK }                                                                            \
        if (L->base) {                                                                                    \
            const float w = 1.0f;                                                                         \
            if (L->base_type == TAPER_F32) { const float *p = (const float *)L->base + at; ACC8(GROUP_F32) } \
            else { const uint16_t *p = (const uint16_t *)L->base + at; ACC8(GROUP_F16) }                 \
        }                                                                                                 \
        ACC8(GROUP_STORE)                                                                                 \
    }
#define GROUP_ZERO(i) vec_t a##i = zero;
#define GROUP_F32(i) a##i += w * LOAD_F32(p + (i) * width);
#define GROUP_F16(i) a##i += w * LOAD_F16(p + (i) * width);
#define GROUP_I8(i) a##i += w * LOAD_I8(p + (i) * width);
#define GROUP_SCALE(i) a##i *= dscale;
#define GROUP_STORE(i) a##i *= fold; STORE(out + store_at + (i) * width, a##i);
/* Blocked: row `row + i`'s lanes += right[row + i][k] * (the block's left-factor column k). */
#define LR_BLOCKED                                                                                        \
    {                                                                                                     \
        const int64_t kk = L->subspace ? L->rank : q * L->rank;                                           \
        const float *r = L->right + row * kk;                                                             \
        for (int64_t k = 0; k < kk; k++) {                                                                \
            vec_t c;                                                                                      \
            memcpy(&c, cols + k * width, sizeof c);  /* scratch need not be aligned for a vector */         \
            ACC8(LR_BLOCKED_STEP)                                                                         \
        }                                                                                                 \
    }
#define LR_BLOCKED_STEP(i) a##i += r[(i) * kk + k] * c;
/* Plain: elements `row + i * W ...` of the channel += coef[k] * V[k][those elements]. */
#define LR_PLAIN                                                                                          \
    {                                                                                                     \
        const int64_t kk = L->subspace ? L->rank : q * L->rank;                                           \
        for (int64_t k = 0; k < kk; k++) {                                                                \
            const float c = coef[k];                                                                      \
            const float *v = L->right + k * L->rows + row;                                                \
            ACC8(LR_PLAIN_STEP)                                                                           \
        }                                                                                                 \
    }
#define LR_PLAIN_STEP(i) a##i += c * LOAD_F32(v + (i) * width);

/* Blocked layouts: one block of W lanes. `scratch` holds k vectors of W floats. */
#define DEFINE_BLOCKED(NAME, VEC, W, GROUP)                                                               \
    INLINE void NAME(const taper_layer *L, const float *alpha, int64_t q, float eps, float *buffer,      \
                     int64_t b, float *scratch) {                                                         \
        float fold_lanes[W], scale_lanes[W];                                                              \
        channels(L, alpha, b * W, W, eps, buffer, fold_lanes);                                            \
        for (int c = 0; c < W; c++) scale_lanes[c] = L->delta_scale ? L->delta_scale[b * W + c] : 1.0f;  \
        VEC fold, dscale;                                                                                 \
        memcpy(&fold, fold_lanes, sizeof fold);                                                           \
        memcpy(&dscale, scale_lanes, sizeof dscale);                                                      \
        if (L->u)                                                                                         \
            for (int c = 0; c < W; c++) V(left_factor)(L, alpha, q, b * W + c, scratch + c, W);              \
        float *out = buffer + L->out;                                                                     \
        const int64_t rows = L->rows, first = b * rows * W;                                               \
        int64_t j = 0;                                                                                    \
        for (; j + 8 <= rows; j += 8) GROUP(L, alpha, q, first + j * W, j, fold, dscale, scratch, NULL, out); \
        for (; j < rows; j++)                                                                             \
            for (int c = 0; c < W; c++)                                                                   \
                out[first + j * W + c] = element(L, alpha, q, first + j * W + c, j, fold_lanes[c],       \
                                                 scale_lanes[c], scratch + c, W);                         \
    }

/* The builds: this file's second part (after #else below) compiled once for the baseline ISA and once for
 * AVX2+FMA+F16C. */
#define TAPER_VARIANT baseline
#include "_fusion_kernel.c"   /* this file again, its second part */
#undef TAPER_VARIANT

#ifdef TAPER_X86_AVX2
/* The functions between TARGET_PUSH(features) and TARGET_POP are compiled for those x86 features. */
#define TAPER_PRAGMA(text) _Pragma(#text)
#ifdef __clang__
#define TARGET_PUSH(features) TAPER_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define TARGET_POP TAPER_PRAGMA(clang attribute pop)
#else
#define TARGET_PUSH(features) TAPER_PRAGMA(GCC push_options) TAPER_PRAGMA(GCC target(features))
#define TARGET_POP TAPER_PRAGMA(GCC pop_options)
#endif

TARGET_PUSH("avx2,fma,f16c")
#define TAPER_VARIANT avx2
#define TAPER_F16C 1
#include "_fusion_kernel.c"   /* this file again, its second part */
#undef TAPER_F16C
#undef TAPER_VARIANT
TARGET_POP

/* The AVX-512 build: 16-float vectors in one register and 32 registers. Where a CPU has AVX-512,
 * onnxruntime lays convolutions out in blocks of 16 channels, whose group of 8 rows holds 8 x 16 floats in
 * accumulators: 16 registers, all AVX2 has, so the AVX2 build spills them (docs/results/experiments.md, "The
 * compact fusion at 4x its roofline"). */
TARGET_PUSH("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#define TAPER_VARIANT avx512
#define TAPER_F16C 1
#define TAPER_AVX512 1
#include "_fusion_kernel.c"   /* this file again, its second part */
#undef TAPER_AVX512
#undef TAPER_F16C
#undef TAPER_VARIANT
TARGET_POP

/* What this CPU runs: 2 the AVX-512 build, 1 the AVX2+FMA+F16C build, 0 the baseline one. */
static int best_build(void) {
    static int known = -1;  /* a benign race: every thread computes the same value */
    if (known < 0) {
        __builtin_cpu_init();
        const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                         && __builtin_cpu_supports("f16c");
        const int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
                           && __builtin_cpu_supports("avx512vl");
        known = avx512 ? 2 : avx2;
    }
    return known;
}
#else
static int best_build(void) { return 0; }
#endif

/* The build this CPU runs: 2 AVX-512, 1 AVX2+FMA+F16C, 0 the baseline (every other CPU: aarch64 too). */
int64_t taper_kernel_variant(void) { return best_build(); }

/* Fuses part `part` of `parts` of every layer (alpha [4, q]; `scratch`: k * 16 floats for the largest
 * low-rank k, plus a channel's `rows` in a layer with int8 outputs) with build `build` (as
 * taper_kernel_variant numbers them; -1: the best this CPU has). 0; -1 for a layout the kernel does not
 * handle (a block other than 1, 8 or 16, or int8 weights asked of a blocked layout); -2 for a build this
 * CPU cannot run. */
int64_t taper_fuse_network_build(int64_t build, const taper_layer *layers, int64_t count, const float *alpha,
                                 int64_t q, float eps, float *buffer, int64_t part, int64_t parts, float *scratch) {
    if (build < 0) build = best_build();
    if (build > best_build()) return -2;
#ifdef TAPER_X86_AVX2
    if (build == 2) return fuse_network_avx512(layers, count, alpha, q, eps, buffer, part, parts, scratch);
    if (build == 1) return fuse_network_avx2(layers, count, alpha, q, eps, buffer, part, parts, scratch);
#endif
    return fuse_network_baseline(layers, count, alpha, q, eps, buffer, part, parts, scratch);
}

/* taper_fuse_network_build with the best build this CPU has. */
int64_t taper_fuse_network(const taper_layer *layers, int64_t count, const float *alpha, int64_t q, float eps,
                           float *buffer, int64_t part, int64_t parts, float *scratch) {
    return taper_fuse_network_build(-1, layers, count, alpha, q, eps, buffer, part, parts, scratch);
}

/* Per-output-channel int8 weights, bit for bit as sdk/engines/int8.py's `quantize_weight` computes them with numpy
 * (rows `first` to `end` of w [rows, cols]) with build `build` (as above; -1: the best this CPU has).
 * 0, or -2 for a build this CPU cannot run. */
int64_t taper_quantize_rows_build(int64_t build, const float *w, int64_t cols, int64_t first, int64_t end,
                                  int64_t qmin, int64_t qmax, int8_t *q, float *scale) {
    if (build < 0) build = best_build();
    if (build > best_build()) return -2;
#ifdef TAPER_X86_AVX2
    if (build == 2) { quantize_rows_avx512(w, cols, first, end, qmin, qmax, q, scale); return 0; }
    if (build == 1) { quantize_rows_avx2(w, cols, first, end, qmin, qmax, q, scale); return 0; }
#endif
    quantize_rows_baseline(w, cols, first, end, qmin, qmax, q, scale);
    return 0;
}

/* The quantizer with the best build this CPU has. */
void taper_quantize_rows(const float *w, int64_t cols, int64_t first, int64_t end, int64_t qmin, int64_t qmax,
                         int8_t *q, float *scale) {
    taper_quantize_rows_build(-1, w, cols, first, end, qmin, qmax, q, scale);
}

#else   /* the second part: one build of the kernel (TAPER_VARIANT names it; TAPER_F16C where F16C is on) */

/* float16 -> float32 for 8 values: F16C's conversion where this build has it (one instruction; a
 * signalling NaN comes out quiet), else the integer operations above (22 instructions per 8 values). */
INLINE lanes8 V(f16x8)(const uint16_t *p) {
#ifdef TAPER_F16C
    __m128i packed;
    memcpy(&packed, p, sizeof packed);
    __m256 wide = _mm256_cvtph_ps(packed);
    lanes8 out_;
    memcpy(&out_, &wide, sizeof out_);
#elif defined(TAPER_NEON)   /* fcvtl, fcvtl2: exact, a signalling NaN comes out quiet (as F16C) */
    const float16x8_t packed = vreinterpretq_f16_u16(vld1q_u16(p));
    const lanes8 out_ = join4((lanes4)vcvt_f32_f16(vget_low_f16(packed)), (lanes4)vcvt_high_f32_f16(packed));
#else
    halves8 packed;
    memcpy(&packed, p, sizeof packed);
    bits8 h = __builtin_convertvector(packed, bits8);
    lanes8 out_;
    HALF_TO_FLOAT(bits8, lanes8, h);
#endif
    return out_;
}
#ifdef TAPER_AVX512
INLINE lanes16 V(f16x16)(const uint16_t *p) {
    __m256i packed;
    memcpy(&packed, p, sizeof packed);
    __m512 wide = _mm512_cvtph_ps(packed);
    lanes16 out_;
    memcpy(&out_, &wide, sizeof out_);
    return out_;
}
#else
INLINE lanes16 V(f16x16)(const uint16_t *p) { return join(V(f16x8)(p), V(f16x8)(p + 8)); }
#endif

/* int8 -> float32 for 8 values: sign-extended to int32, then converted (GCC 12 turned a direct
 * int8 -> float conversion into 8 scalar ones, 4x slower on a Q=10 int8 layer). */
INLINE lanes8 V(i8x8)(const int8_t *p) {
#ifdef TAPER_F16C   /* the AVX2 build */
    __m128i packed = _mm_loadl_epi64((const __m128i *)p);
    __m256 wide = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(packed));
    lanes8 out_;
    memcpy(&out_, &wide, sizeof out_);
    return out_;
#elif defined(TAPER_NEON)   /* sign-extended twice (sxtl), converted in two halves */
    const int16x8_t wide = vmovl_s8(vld1_s8(p));
    return join4((lanes4)vcvtq_f32_s32(vmovl_s16(vget_low_s16(wide))), (lanes4)vcvtq_f32_s32(vmovl_high_s16(wide)));
#else
    bytes8 b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(__builtin_convertvector(b, ints8), lanes8);
#endif
}
#ifdef TAPER_AVX512
INLINE lanes16 V(i8x16)(const int8_t *p) {
    __m512 wide = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
    lanes16 out_;
    memcpy(&out_, &wide, sizeof out_);
    return out_;
}
#else
INLINE lanes16 V(i8x16)(const int8_t *p) { return join(V(i8x8)(p), V(i8x8)(p + 8)); }
#endif

/* The mixed left factor of output channel `ch` into left[k * step] (k < kk), eight of U's columns at a
 * time (scalar widening here cost as much as the weights of a small layer). */
INLINE void V(left_factor)(const taper_layer *L, const float *alpha, int64_t q, int64_t ch, float *left,
                           int64_t step) {
    const int64_t r = L->rank, channels = L->blocks * L->block;
    for (int64_t k0 = 0; k0 < r; k0 += 8) {
        const int64_t n = r - k0 < 8 ? r - k0 : 8;
        lanes8 sum = {0};
        for (int64_t b = 0; b < q; b++) {
            const int64_t at = (b * channels + ch) * r + k0;
            lanes8 u;
            if (n == 8 && L->u_type == TAPER_F16) u = V(f16x8)((const uint16_t *)L->u + at);
            else if (n == 8) u = f32x8((const float *)L->u + at);
            else {
                float part[8] = {0};
                for (int64_t i = 0; i < n; i++) part[i] = load1(L->u, L->u_type, at + i);
                memcpy(&u, part, sizeof u);
            }
            if (L->subspace) sum += alpha[b] * u;
            else
                for (int64_t i = 0; i < n; i++) left[(b * r + k0 + i) * step] = alpha[b] * u[i];
        }
        if (L->subspace)
            for (int64_t i = 0; i < n; i++) left[(k0 + i) * step] = sum[i];
    }
}

#define LOAD_F32 f32x8
#define LOAD_F16 V(f16x8)
#define LOAD_I8 V(i8x8)
#define STORE store8
DEFINE_GROUP(V(group_blocked8), lanes8, 8, LR_BLOCKED, at)
#ifndef TAPER_NEON
#define PLAIN_VEC lanes8
#define PLAIN_WIDTH 8
DEFINE_GROUP(V(group_plain), lanes8, 8, LR_PLAIN, row)
#endif
#undef LOAD_F32
#undef LOAD_F16
#undef LOAD_I8
#undef STORE
#ifdef TAPER_NEON
/* The plain layout on aarch64 in NEON's own 4-float vectors: 8 accumulators of 16 bytes stay in registers,
 * where 32-byte ones spilled (docs/results/experiments.md, "The fusion kernel on aarch64"). */
INLINE lanes4 f32x4(const float *p) { lanes4 v; memcpy(&v, p, sizeof v); return v; }
INLINE lanes4 V(f16x4)(const uint16_t *p) { return (lanes4)vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
INLINE lanes4 V(i8x4)(const int8_t *p) {
    uint32_t packed;
    memcpy(&packed, p, sizeof packed);
    const int16x8_t wide = vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(packed)));
    return (lanes4)vcvtq_f32_s32(vmovl_s16(vget_low_s16(wide)));
}
INLINE void store4(float *p, lanes4 v) { memcpy(p, &v, sizeof v); }
#define LOAD_F32 f32x4
#define LOAD_F16 V(f16x4)
#define LOAD_I8 V(i8x4)
#define STORE store4
#define PLAIN_VEC lanes4
#define PLAIN_WIDTH 4
DEFINE_GROUP(V(group_plain), lanes4, 4, LR_PLAIN, row)
#undef LOAD_F32
#undef LOAD_F16
#undef LOAD_I8
#undef STORE
#endif
#define LOAD_F32 f32x16
#define LOAD_F16 V(f16x16)
#define LOAD_I8 V(i8x16)
#define STORE store16
DEFINE_GROUP(V(group_blocked16), lanes16, 16, LR_BLOCKED, at)
#undef LOAD_F32
#undef LOAD_F16
#undef LOAD_I8
#undef STORE

DEFINE_BLOCKED(V(block8), lanes8, 8, V(group_blocked8))
DEFINE_BLOCKED(V(block16), lanes16, 16, V(group_blocked16))

/* max(0, max |row[i]|), a NaN skipped (`a > high ? a : high` is false for it), in four accumulators of 8
 * lanes: one running maximum is a chain of dependent compares that no compiler may vectorise without
 * -ffast-math, and was ~2/3 of the quantizer's time. Any order gives the same value here: every operand is
 * a non-negative number or +-0, whose maximum does not depend on order. */
INLINE float V(row_abs_max)(const float *row, int64_t cols) {
    bits8 acc[4] = {{0}, {0}, {0}, {0}};   /* +0.0 */
    int64_t i = 0;
    for (; i + 32 <= cols; i += 32) {
        for (int k = 0; k < 4; k++) {
            bits8 b;
            memcpy(&b, row + i + 8 * k, sizeof b);
            b &= 0x7fffffffu;   /* |x|: a NaN stays a NaN */
            lanes8 a, h;
            memcpy(&a, &b, sizeof a);
            memcpy(&h, &acc[k], sizeof h);
            const bits8 greater = (bits8)(a > h);
            acc[k] = (b & greater) | (acc[k] & ~greater);
        }
    }
    float high = 0.0f;
    for (int k = 0; k < 4; k++) {
        lanes8 h;
        memcpy(&h, &acc[k], sizeof h);
        for (int lane = 0; lane < 8; lane++) high = h[lane] > high ? h[lane] : high;
    }
    for (; i < cols; i++) {
        const float a = row[i] < 0 ? -row[i] : row[i];
        high = a > high ? a : high;
    }
    return high;
}

/* scale = max|w| * 2 / (qmax - qmin) in float32 (1 for a zero row), q = min(max(rint(w * (1 / scale)),
 * qmin), qmax): each step one float operation rounded as numpy rounds it (a product then a rounding, so no
 * multiply-add can be fused; this file is built without -ffast-math). rint rounds half to even, as np.rint
 * (inline where the build has a rounding instruction: AVX2, ARM; a libm call in x86's baseline build). A
 * NaN becomes 0, where numpy's cast is undefined. */
static void V(quantize_rows)(const float *w, int64_t cols, int64_t first, int64_t end, int64_t qmin,
                             int64_t qmax, int8_t *q, float *scale) {
    const float low = (float)qmin, high_q = (float)qmax;
    for (int64_t r = first; r < end; r++) {
        const float *row = w + r * cols;
        const float high = V(row_abs_max)(row, cols);
        float s = high * 2.0f / (float)(qmax - qmin);
        if (s == 0.0f) s = 1.0f;
        scale[r] = s;
        const float inverse = 1.0f / s;
        int8_t *out = q + r * cols;
        for (int64_t i = 0; i < cols; i++) {
            float v = __builtin_rintf(row[i] * inverse);
            v = v < low ? low : (v > high_q ? high_q : v);
            out[i] = (int8_t)(v == v ? (int)v : 0);
        }
    }
}
/* The plain layout: one output channel, its `rows` elements consecutive. `scratch` holds k floats; for a
 * layer with int8 outputs, `rows` more before them: the channel is fused there (in L1) and quantized, and
 * its float weights are not written to the buffer. */
INLINE void V(plain)(const taper_layer *L, const float *alpha, int64_t q, float eps, float *buffer, int64_t o,
                  float *scratch) {
    float fold_one;
    channels(L, alpha, o, 1, eps, buffer, &fold_one);
    const float scale_one = L->delta_scale ? L->delta_scale[o] : 1.0f;
    const PLAIN_VEC fold = fold_one - (PLAIN_VEC){0}, dscale = scale_one - (PLAIN_VEC){0};
    const int64_t rows = L->rows, first = o * rows;
    float *out = L->quantized ? scratch : buffer + L->out + first, *left = L->quantized ? scratch + rows : scratch;
    if (L->u) V(left_factor)(L, alpha, q, o, left, 1);
    int64_t j = 0;
    for (; j + 8 * PLAIN_WIDTH <= rows; j += 8 * PLAIN_WIDTH)
        V(group_plain)(L, alpha, q, first + j, j, fold, dscale, NULL, left, out);
    for (; j < rows; j++)
        out[j] = element(L, alpha, q, first + j, j, fold_one, scale_one, left, 1);
    if (L->quantized) V(quantize_rows)(out, rows, 0, 1, L->qmin, L->qmax, L->quantized + first,
                                       L->quantized_scale + o);
}

#undef PLAIN_VEC
#undef PLAIN_WIDTH

static int64_t V(fuse_network)(const taper_layer *layers, int64_t count, const float *alpha, int64_t q,
                            float eps, float *buffer, int64_t part, int64_t parts, float *scratch) {
    for (int64_t i = 0; i < count; i++) {
        const taper_layer *L = layers + i;
        if ((L->block != 1 && L->block != 8 && L->block != 16) || (L->quantized && L->block != 1)) return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        const taper_layer *L = layers + i;
        const float *a = alpha + L->alpha_row * q;
        const int64_t first = L->blocks * part / parts, stop = L->blocks * (part + 1) / parts;
        for (int64_t b = first; b < stop; b++) {
            if (L->block == 8) V(block8)(L, a, q, eps, buffer, b, scratch);
            else if (L->block == 16) V(block16)(L, a, q, eps, buffer, b, scratch);
            else V(plain)(L, a, q, eps, buffer, b, scratch);
        }
    }
    return 0;
}

#endif

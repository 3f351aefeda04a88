/* Fusion and folding of one layer in one pass over its memory (see sdk/native_fusion.py, which loads
 * this file's shared library with ctypes and checks it against the numpy kernel before using it).
 *
 * A layer in a weight buffer is `blocks` x `rows` x `block` floats: output channel b*block + c is lane c
 * of block b (block 1: the plain [O, n] layout; 8 or 16: onnxruntime's blocked NCHWc layout). For every
 * element, in chunks that stay in L1:
 *
 *     out = ((sum_q alpha_q D_q) * delta_scale[ch] + product + base) * fold[ch]
 *
 * where D_q are the stored deltas (float32, float16 through a 65536-entry table, or int8) in the
 * buffer's order, `product` is a float32 matrix addressed by strides (the low-rank product, computed by
 * BLAS beforehand: one row per output channel, so lane c of a block reads its own row), `base` is W_0 in the buffer's order (float32 or float16), and each term is optional.
 * Pure C99, no intrinsics: the compiler vectorises the inner loops (-O3).
 */
#include <stdint.h>
#include <string.h>

enum { TAPER_F32 = 0, TAPER_F16 = 1, TAPER_I8 = 2 };
#define CHUNK 1024

typedef struct {
    int64_t first, stop;        /* the blocks this call writes */
    int64_t rows, block;
    int64_t q;
    const float *alpha;         /* [q] */
    const void *deltas;         /* basis k at deltas + k * delta_stride elements, or NULL */
    int64_t delta_type, delta_stride;
    const float *product;       /* element (b, r, c) at b * block_stride + r * row_stride + c * lane_stride */
    int64_t product_block_stride, product_row_stride, product_lane_stride;
    const void *base;           /* buffer order, or NULL */
    int64_t base_type;
    const float *delta_scale;   /* [blocks * block], or NULL */
    const float *fold;          /* [blocks * block], or NULL */
    const float *half_table;    /* float16 bits -> float32 */
    float *out;                 /* the layer's first element */
} taper_layer;

static void add_f32(float *restrict acc, const float *restrict d, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] += a * d[i];
}

static void add_i8(float *restrict acc, const int8_t *restrict d, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] += a * (float)d[i];
}

static void add_f16(float *restrict acc, const uint16_t *restrict d, float a, int64_t n,
                    const float *restrict table) {
    for (int64_t i = 0; i < n; i++) acc[i] += a * table[d[i]];
}

static void add_typed(float *acc, const void *p, int64_t type, int64_t offset, float a, int64_t n,
                      const float *table) {
    if (type == TAPER_F32) add_f32(acc, (const float *)p + offset, a, n);
    else if (type == TAPER_F16) add_f16(acc, (const uint16_t *)p + offset, a, n, table);
    else add_i8(acc, (const int8_t *)p + offset, a, n);
}

static void multiply(float *restrict acc, const float *restrict lanes, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] *= lanes[i];
}

/* lanes[e] = values[b * block + e % block] for a chunk that starts on a lane-0 element. */
static void lane_pattern(float *lanes, const float *values, int64_t b, int64_t block, int64_t n) {
    for (int64_t e = 0; e < n; e++) lanes[e] = values[b * block + e % block];
}

int64_t taper_fuse_layer(const taper_layer *L) {
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
                    add_typed(acc, L->deltas, L->delta_type, k * L->delta_stride + at, L->alpha[k], n,
                              L->half_table);
                if (L->delta_scale) multiply(acc, scale, n);
            }
            if (L->product) {
                const float *p = L->product + b * L->product_block_stride;
                for (int64_t e = 0; e < n; e += L->block) {
                    const float *row = p + ((e0 + e) / L->block) * L->product_row_stride;
                    for (int64_t c = 0; c < L->block; c++) acc[e + c] += row[c * L->product_lane_stride];
                }
            }
            if (L->base) add_typed(acc, L->base, L->base_type, at, 1.0f, n, L->half_table);
            if (L->fold) multiply(acc, fold, n);
            memcpy(L->out + at, acc, (size_t)n * sizeof(float));
        }
    }
    return 0;
}

/* Runs sdk/fusion/_fusion_kernel.c on a case file and writes what it computed: the fusion kernel on a CPU the
 * Python runtime is not running on (aarch64 under qemu-user: scripts/cross_kernel.py writes the cases from
 * the runtime's own plans, builds this file with the kernel for the target, runs it and compares).
 *
 *     kernel_driver CASE OUT [REPEATS]
 *
 * CASE (little-endian, every field an int64 unless said):
 *   "TPRKCASE", version 1, the job (0: fuse a network, 1: quantize rows), the array count, then each array:
 *   its byte count, whether it is an output (written to OUT in order), its bytes padded to 8;
 *   job 0: layer count, q, eps (float64), the buffer's array (fused into as it is: the runtime writes its
 *          shared layers first), scratch floats, parts, alpha's array, then per layer the 23 fields of
 *          taper_layer in order, each pointer given as an array index (-1: NULL);
 *   job 1: weight's array, cols, first row, end row, qmin, qmax, q's array, scale's array.
 * OUT: each output array in order, as raw bytes. Exit status 0, or 1 with a message. REPEATS (default 1) runs
 * the job that many times: an instruction count's difference between 2 and 1 is one job's, without the I/O.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sdk/fusion/_fusion_kernel.c"

static FILE *in;
static void **arrays;
static int64_t count;

static int64_t next(void) {
    int64_t v;
    if (fread(&v, sizeof v, 1, in) != 1) { fprintf(stderr, "kernel_driver: truncated case\n"); exit(1); }
    return v;
}

/* The next field, an array index: that array, or NULL for -1. */
static void *next_array(void) {
    const int64_t index = next();
    if (index < -1 || index >= count) { fprintf(stderr, "kernel_driver: no array %lld\n", (long long)index); exit(1); }
    return index < 0 ? NULL : arrays[index];
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) { fprintf(stderr, "usage: kernel_driver CASE OUT [REPEATS]\n"); return 1; }
    const long repeats = argc == 4 ? strtol(argv[3], NULL, 10) : 1;
    in = fopen(argv[1], "rb");
    if (!in) { perror(argv[1]); return 1; }
    char magic[8];
    if (fread(magic, 1, 8, in) != 8 || memcmp(magic, "TPRKCASE", 8) != 0 || next() != 1) {
        fprintf(stderr, "kernel_driver: not a version-1 case file\n");
        return 1;
    }
    const int64_t job = next();
    count = next();
    arrays = calloc((size_t)count, sizeof *arrays);
    int64_t *sizes = calloc((size_t)count, sizeof *sizes), *outputs = calloc((size_t)count, sizeof *outputs);
    for (int64_t i = 0; i < count; i++) {
        sizes[i] = next();
        outputs[i] = next();
        const int64_t padded = (sizes[i] + 7) / 8 * 8;
        arrays[i] = aligned_alloc(64, (size_t)((padded + 63) / 64 * 64 + 64));
        if (fread(arrays[i], 1, (size_t)padded, in) != (size_t)padded) { fprintf(stderr, "truncated array\n"); return 1; }
    }
    if (job == 0) {
        const int64_t layers_n = next(), q = next();
        double eps;
        if (fread(&eps, sizeof eps, 1, in) != 1) return 1;
        float *buffer = next_array();
        const int64_t scratch_floats = next(), parts = next();
        const float *alpha = next_array();
        taper_layer *layers = calloc((size_t)layers_n, sizeof *layers);
        for (int64_t i = 0; i < layers_n; i++) {
            taper_layer *L = layers + i;
            L->out = next(), L->bias = next(), L->blocks = next(), L->rows = next(), L->block = next();
            L->alpha_row = next();
            L->channels = next_array(), L->channel_rows = next(), L->channel_count = next();
            L->deltas = next_array(), L->delta_type = next(), L->delta_scale = next_array();
            L->base = next_array(), L->base_type = next(), L->u = next_array(), L->u_type = next();
            L->right = next_array(), L->rank = next(), L->subspace = next();
            L->quantized = next_array(), L->quantized_scale = next_array(), L->qmin = next(), L->qmax = next();
        }
        float *scratch = calloc((size_t)scratch_floats + 16, sizeof *scratch);
        for (long r = 0; r < repeats; r++)
            for (int64_t part = 0; part < parts; part++)
                if (taper_fuse_network(layers, layers_n, alpha, q, (float)eps, buffer, part, parts, scratch) != 0) {
                    fprintf(stderr, "kernel_driver: the kernel refused a layout\n");
                    return 1;
                }
    } else if (job == 1) {
        const float *w = next_array();
        const int64_t cols = next(), first = next(), end = next(), qmin = next(), qmax = next();
        int8_t *qv = next_array();
        float *scale = next_array();
        for (long r = 0; r < repeats; r++) taper_quantize_rows(w, cols, first, end, qmin, qmax, qv, scale);
    } else {
        fprintf(stderr, "kernel_driver: unknown job %lld\n", (long long)job);
        return 1;
    }
    FILE *out = fopen(argv[2], "wb");
    if (!out) { perror(argv[2]); return 1; }
    for (int64_t i = 0; i < count; i++)
        if (outputs[i]) fwrite(arrays[i], 1, (size_t)sizes[i], out);
    return fclose(out) == 0 ? 0 : 1;
}

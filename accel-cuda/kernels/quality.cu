// The sums of a stitched pair's quality measures (stitch/quality.rs and stitch/moments.rs
// in the core): over each region of reference pixels, the exact integer sums of the
// reference `a`, the moving frame at four bilinear taps `t_k`, and their products, from
// which Pearson's r is made (`quality_measures`, below, as the core makes it). Integer sums
// do not depend on the order they are added in, so the device's are the CPU's to the bit,
// whatever the blocks and the atomics.
//
// A block per band of QUALITY_ROWS rows of a region (the host's list of bands, so no block
// is idle). Each thread adds its pixels in u64; a warp combines its lanes by shuffles, and
// lane 0 adds the warp's sums to the region's with 64-bit atomics.
#include "common.cuh"

#define QUALITY_ROWS 32
// a, a^2, t_k (4), a t_k (4), t_k t_l for k <= l (10): the core's `Moments<4>` in order.
#define QUALITY_WORDS 20
// A pair: reference slot, moving slot, origin x, y, then (dx, dy) of each tap: reference
// pixel (x, y) meets moving pixel (x - ox + dx, y - oy + dy).
#define QUALITY_PAIR_INTS 12
// A region: its pair, x0, y0, x1, y1 (exclusive).
#define QUALITY_REGION_INTS 5

template <typename T>
__device__ void quality_sums(const u64* frames, int w, const int* pairs, const int* regions, const int* bands, u64* out) {
    // This block's region and the first row of its band.
    const int r = bands[2 * blockIdx.x], band0 = bands[2 * blockIdx.x + 1];
    const int* g = regions + r * QUALITY_REGION_INTS;
    const int* pair = pairs + g[0] * QUALITY_PAIR_INTS;
    const int x0 = g[1], y1 = g[4], ox = pair[2], oy = pair[3];
    const T* a = (const T*)frames[pair[0]];
    const T* m = (const T*)frames[pair[1]];
    const int width = g[3] - x0;
    const int pixels = (min(band0 + QUALITY_ROWS, y1) - band0) * width;
    u64 s[QUALITY_WORDS];
    for (int k = 0; k < QUALITY_WORDS; ++k) s[k] = 0;
    for (int i = threadIdx.x; i < pixels; i += blockDim.x) {
        const int y = band0 + i / width, x = x0 + i % width;
        const u64 v = a[(size_t)y * w + x];
        u64 t[4];
        for (int k = 0; k < 4; ++k) t[k] = m[(size_t)(y - oy + pair[5 + 2 * k]) * w + (x - ox + pair[4 + 2 * k])];
        s[0] += v;
        s[1] += v * v;
        int q = 10;
        for (int k = 0; k < 4; ++k) {
            s[2 + k] += t[k];
            s[6 + k] += v * t[k];
            for (int l = k; l < 4; ++l) s[q++] += t[k] * t[l];
        }
    }
    for (int k = 0; k < QUALITY_WORDS; ++k) {
        u64 v = s[k];
        for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
        if ((threadIdx.x & 31) == 0 && v != 0) atomicAdd(out + (size_t)r * QUALITY_WORDS + k, v);
    }
}

extern "C" __global__ void quality_sums_u8(const u64* frames, int w, const int* pairs, const int* regions, const int* bands, u64* out) {
    quality_sums<u8>(frames, w, pairs, regions, bands, out);
}
TESSERA_EXPORT(quality_sums_u8)

extern "C" __global__ void quality_sums_u16(const u64* frames, int w, const int* pairs, const int* regions, const int* bands, u64* out) {
    quality_sums<u16>(frames, w, pairs, regions, bands, out);
}
TESSERA_EXPORT(quality_sums_u16)

// A pair's quality measures from its regions' sums, as the core makes them
// (`QualityPlan::measures`, `Moments::pearson`) to the bit: the same f64 operations in the
// same order, none fused (the file is compiled with --fmad=false, and the products and sums
// are written as __dmul_rn and __dadd_rn besides). Per pair, the overlap's r, the mean r of
// the grid's regions (NaN where there is none: the core's None) and a flag: 1 where a
// region's products do not fit 64 bits (u16 frames of large overlaps), whose measures the
// host then makes from the sums. A thread per pair.
#define QUALITY_MEASURE_WORDS 3
#define QUALITY_I64_MAX 0x7fffffffffffffffull

// Whether `a * b` is exact in u64 and within i64.
__device__ bool quality_fits(u64 a, u64 b) {
    return __umul64hi(a, b) == 0 && a * b <= QUALITY_I64_MAX;
}

// n * (centred moment of x, y), exact in i64, rounded once, over n: the core's `centred`.
__device__ double quality_centred(u64 n, double count, u64 x, u64 y, u64 xy) {
    return (double)((i64)(n * xy) - (i64)(x * y)) / count;
}

// Pearson's r of a region of `n` pixels from its sums `s` (QUALITY_WORDS, the core's
// `Moments<4>` in order) with the taps' weights `w`; NaN where either side is flat. The
// caller has checked that every product fits i64.
__device__ double quality_pearson(const u64* s, u64 n, const double* w) {
    const double count = (double)n;
    const double saa = quality_centred(n, count, s[0], s[0], s[1]);
    double sab = 0.0, sbb = 0.0, scale = 0.0;
    int q = 10;
    for (int k = 0; k < 4; ++k) {
        sab = __dadd_rn(sab, __dmul_rn(w[k], quality_centred(n, count, s[0], s[2 + k], s[6 + k])));
        for (int l = k; l < 4; ++l) {
            const double c = __dmul_rn(__dmul_rn(__dmul_rn(k == l ? 1.0 : 2.0, w[k]), w[l]), quality_centred(n, count, s[2 + k], s[2 + l], s[q++]));
            sbb = __dadd_rn(sbb, c);
            scale = __dadd_rn(scale, fabs(c));
        }
    }
    if (!(n > 0 && saa > 0.0 && sbb > __dmul_rn(1e-12, scale))) return nan("");
    const double r = sab / sqrt(__dmul_rn(saa, sbb));
    return r < -1.0 ? -1.0 : (r > 1.0 ? 1.0 : r);
}

// `sums` as quality_sums leaves them; pair p's regions are firsts[p] .. firsts[p + 1] of
// `regions` (QUALITY_REGION_INTS each), its taps' weights weights[4p .. 4p + 4].
extern "C" __global__ void quality_measures(const u64* sums, const int* regions, const int* firsts, const double* weights, int pairs, double* out) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= pairs) return;
    double overlap = nan(""), sum = 0.0;
    int count = 0, wide = 0;
    for (int j = firsts[p]; j < firsts[p + 1]; ++j) {
        const u64* s = sums + (size_t)j * QUALITY_WORDS;
        const int* g = regions + (size_t)j * QUALITY_REGION_INTS;
        const u64 n = (u64)(g[3] - g[1]) * (u64)(g[4] - g[2]);
        u64 largest_sum = s[0], largest_product = s[1];
        for (int k = 2; k < 6; ++k) largest_sum = max(largest_sum, s[k]);
        for (int k = 6; k < QUALITY_WORDS; ++k) largest_product = max(largest_product, s[k]);
        if (!quality_fits(largest_sum, largest_sum) || !quality_fits(n, largest_product)) {
            wide = 1;
            break;
        }
        const double r = quality_pearson(s, n, weights + 4 * (size_t)p);
        if (j == firsts[p]) {
            overlap = r;
        } else if (!isnan(r)) {
            sum = __dadd_rn(sum, r);
            ++count;
        }
    }
    out[QUALITY_MEASURE_WORDS * p] = overlap;
    out[QUALITY_MEASURE_WORDS * p + 1] = count > 0 ? sum / (double)count : nan("");
    out[QUALITY_MEASURE_WORDS * p + 2] = wide;
}
TESSERA_EXPORT(quality_measures)

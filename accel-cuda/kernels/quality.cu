// The sums of a stitched pair's quality measures (stitch/quality.rs and stitch/moments.rs
// in the core): over each region of reference pixels, the exact integer sums of the
// reference `a`, the moving frame at four bilinear taps `t_k`, and their products, from
// which the core makes Pearson's r. Integer sums do not depend on the order they are added
// in, so the device's are the CPU's to the bit, whatever the blocks and the atomics.
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

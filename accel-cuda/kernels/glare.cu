// Specular-highlight detection and correction (glare/ in the core). The per-pixel stages
// run here; growing the spots (sequential: each spot claims its rim before the next in
// raster order) and labelling the regions to fill run on the host between launches.
//
//   glare_top_f32, glare_quantize_f32: the full scale of an f32 image (its largest finite
//                      value; an atomic maximum on the bits of non-negative floats) and the
//                      16-bit luminance the statistics run on.
//   glare_hist_*:      the luminance histogram (adaptive brightness), and glare_mad_hist_*
//                      the histogram of |Y - mu| (adaptive contrast); atomics.
//   glare_flags_*:     seeds by local contrast at one radius; glare_excess_* Y - mu at the
//                      largest; glare_seeds_* the brightness and saturation tests.
//   glare_dilate:      the fill mask, dilated by fill_grow.
//   glare_solve_*:     a block per region: the 1/d^2-weighted initial values (a thread per
//                      unknown pixel), then the Laplace sweeps by one thread in the core's
//                      raster order (Gauss-Seidel is order-dependent: this keeps the CPU's
//                      result exactly), and the region's own pixels written back.
// Compiled without fused multiply-adds: the f32 expressions round as the core's.
#include "common.cuh"

extern "C" __global__ void glare_top_f32(const float* src, int n, u32* top_bits) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = src[i];
    if (v - v == 0.0f && v > 0.0f) atomicMax(top_bits, __float_as_uint(v));
}
TESSERA_EXPORT(glare_top_f32)

extern "C" __global__ void glare_quantize_f32(const float* src, u16* luma, int n, float q) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = src[i];
    luma[i] = v - v == 0.0f ? (u16)roundf(fminf(fmaxf(v * q, 0.0f), 65535.0f)) : 0;
}
TESSERA_EXPORT(glare_quantize_f32)

template <typename T> __device__ void hist(const T* luma, int n, u32* bins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[luma[i]], 1u);
}
extern "C" __global__ void glare_hist_u8(const u8* luma, int n, u32* bins) { hist(luma, n, bins); }
TESSERA_EXPORT(glare_hist_u8)
extern "C" __global__ void glare_hist_u16(const u16* luma, int n, u32* bins) { hist(luma, n, bins); }
TESSERA_EXPORT(glare_hist_u16)

template <typename T> __device__ void mad_hist(const T* luma, const float* mean, int n, int q, u32* bins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 d = (u32)(fabsf((float)luma[i] - mean[i]) + 0.5f);
    atomicAdd(&bins[d < (u32)q ? d : (u32)q], 1u);
}
extern "C" __global__ void glare_mad_hist_u8(const u8* luma, const float* mean, int n, int q, u32* bins) { mad_hist(luma, mean, n, q, bins); }
TESSERA_EXPORT(glare_mad_hist_u8)
extern "C" __global__ void glare_mad_hist_u16(const u16* luma, const float* mean, int n, int q, u32* bins) { mad_hist(luma, mean, n, q, bins); }
TESSERA_EXPORT(glare_mad_hist_u16)

template <typename T> __device__ void flags(const T* luma, const float* mean, const float* var, int n, float seed_c, float k2, u8* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float d = (float)luma[i] - mean[i];
    if (d >= seed_c && d * d >= k2 * var[i]) out[i] |= 1;
}
extern "C" __global__ void glare_flags_u8(const u8* luma, const float* mean, const float* var, int n, float seed_c, float k2, u8* out) { flags(luma, mean, var, n, seed_c, k2, out); }
TESSERA_EXPORT(glare_flags_u8)
extern "C" __global__ void glare_flags_u16(const u16* luma, const float* mean, const float* var, int n, float seed_c, float k2, u8* out) { flags(luma, mean, var, n, seed_c, k2, out); }
TESSERA_EXPORT(glare_flags_u16)

template <typename T> __device__ void excess(const T* luma, const float* mean, int n, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)luma[i] - mean[i];
}
extern "C" __global__ void glare_excess_u8(const u8* luma, const float* mean, int n, float* out) { excess(luma, mean, n, out); }
TESSERA_EXPORT(glare_excess_u8)
extern "C" __global__ void glare_excess_u16(const u16* luma, const float* mean, int n, float* out) { excess(luma, mean, n, out); }
TESSERA_EXPORT(glare_excess_u16)

// Seeds (2) where the contrast flag is set, Y / scale >= bright and, for RGBA (`rgba` not
// null), the saturation (max - min) / max of R, G, B is at most max_sat.
template <typename T>
__device__ void seeds(const T* luma, const u8* rgba, const u8* fl, int n, float scale, float bright, float max_sat, u8* mask) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool seed = false;
    if (fl[i] & 1) {
        float sat = 0.0f;
        if (rgba) {
            u32 r = rgba[4 * (i64)i], g = rgba[4 * (i64)i + 1], b = rgba[4 * (i64)i + 2];
            u32 hi = max(max(r, g), b), lo = min(min(r, g), b);
            sat = hi == 0 ? 0.0f : (float)(hi - lo) / (float)hi;
        }
        seed = (float)luma[i] / scale >= bright && sat <= max_sat;
    }
    mask[i] = seed ? 2 : 0;
}
extern "C" __global__ void glare_seeds_u8(const u8* luma, const u8* rgba, const u8* fl, int n, float scale, float bright, float max_sat, u8* mask) {
    seeds(luma, rgba, fl, n, scale, bright, max_sat, mask);
}
TESSERA_EXPORT(glare_seeds_u8)
extern "C" __global__ void glare_seeds_u16(const u16* luma, const u8* rgba, const u8* fl, int n, float scale, float bright, float max_sat, u8* mask) {
    seeds(luma, rgba, fl, n, scale, bright, max_sat, mask);
}
TESSERA_EXPORT(glare_seeds_u16)

// Any set pixel within g (Chebyshev) sets the output; a 2-D grid, one thread per pixel.
extern "C" __global__ void glare_dilate(const u8* in, u8* out, int width, int height, int g) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= width || y >= height) return;
    u8 v = in[(i64)y * width + x];
    for (int yy = max(y - g, 0); yy <= min(y + g, height - 1) && v == 0; ++yy)
        for (int xx = max(x - g, 0); xx <= min(x + g, width - 1); ++xx)
            if (in[(i64)yy * width + xx] != 0) {
                v = 255;
                break;
            }
    out[(i64)y * width + x] = v;
}
TESSERA_EXPORT(glare_dilate)

// One pixel's channel c as f32, and the pixel with channel c set to v (the core's
// GlarePixel: integers rounded half away from zero and clamped; RGBA alpha untouched).
__device__ __forceinline__ float channel(const u8* p, i64 i, int c, int lanes) { return (float)p[i * lanes + c]; }
__device__ __forceinline__ float channel(const u16* p, i64 i, int c, int) { return (float)p[i]; }
__device__ __forceinline__ float channel(const float* p, i64 i, int c, int) { return p[i]; }
__device__ __forceinline__ void set_channel(u8* p, i64 i, int c, int lanes, float v) { p[i * lanes + c] = (u8)roundf(fminf(fmaxf(v, 0.0f), 255.0f)); }
__device__ __forceinline__ void set_channel(u16* p, i64 i, int c, int, float v) { p[i] = (u16)roundf(fminf(fmaxf(v, 0.0f), 65535.0f)); }
__device__ __forceinline__ void set_channel(float* p, i64 i, int c, int, float v) { p[i] = v; }

// Region s: `regions[6 s ..]` = x0, y0, gw, gh (the spot's box plus the margin, clipped),
// its index in `labels`, and the offset of its grid in `grid` (gw * gh * channels floats).
// `lanes` is 4 for RGBA (3 channels filled), else 1.
template <typename T>
__device__ void solve(const T* src, T* dst, const u8* mask, const int* labels, const i64* regions, float* grid, int width, int channels,
                      int lanes, int iterations, int weighted_limit) {
    const i64* rg = regions + 6 * blockIdx.x;
    int x0 = (int)rg[0], y0 = (int)rg[1], gw = (int)rg[2], gh = (int)rg[3], label = (int)rg[4];
    float* val = grid + rg[5];
    int c = channels;
    int cells = gw * gh;
    for (int g = threadIdx.x; g < cells; g += blockDim.x) {
        i64 i = (i64)(y0 + g / gw) * width + x0 + g % gw;
        for (int ch = 0; ch < c; ++ch) val[g * c + ch] = channel(src, i, ch, lanes);
    }
    __syncthreads();
    auto unknown = [&](int g) { return mask[(i64)(y0 + g / gw) * width + x0 + g % gw] != 0; };
    // Counts, and the plain mean of the known pixels (raster order, as the core).
    __shared__ int n_known, n_unknown;
    __shared__ float plain[3];
    if (threadIdx.x == 0) {
        n_known = 0;
        n_unknown = 0;
        for (int g = 0; g < cells; ++g) (unknown(g) ? n_unknown : n_known) += 1;
        for (int ch = 0; ch < 3; ++ch) plain[ch] = 0.0f;
        for (int g = 0; g < cells; ++g)
            if (!unknown(g))
                for (int ch = 0; ch < c; ++ch) plain[ch] += val[g * c + ch] / (float)n_known;
    }
    __syncthreads();
    if (n_known > 0) {
        bool weighted = (long long)n_unknown * (long long)n_known <= (long long)weighted_limit;
        // Initial values: each unknown pixel from the known ones (independent of each other).
        for (int u = threadIdx.x; u < cells; u += blockDim.x) {
            if (!unknown(u)) continue;
            if (!weighted) {
                for (int ch = 0; ch < c; ++ch) val[u * c + ch] = plain[ch];
                continue;
            }
            float ux = (float)(u % gw), uy = (float)(u / gw);
            float acc[3] = {0.0f, 0.0f, 0.0f}, sw = 0.0f;
            for (int k = 0; k < cells; ++k) {
                if (unknown(k)) continue;
                float dx = (float)(k % gw) - ux, dy = (float)(k / gw) - uy;
                float wgt = 1.0f / (dx * dx + dy * dy);
                sw += wgt;
                for (int ch = 0; ch < c; ++ch) acc[ch] += wgt * val[k * c + ch];
            }
            for (int ch = 0; ch < c; ++ch) val[u * c + ch] = acc[ch] / sw;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int it = 0; it < iterations; ++it)
                for (int u = 0; u < cells; ++u) {
                    if (!unknown(u)) continue;
                    int ux = u % gw, uy = u / gw;
                    float acc[3] = {0.0f, 0.0f, 0.0f}, n = 0.0f;
                    auto add = [&](int g) {
                        for (int ch = 0; ch < c; ++ch) acc[ch] += val[g * c + ch];
                        n += 1.0f;
                    };
                    if (ux > 0) add(u - 1);
                    if (ux + 1 < gw) add(u + 1);
                    if (uy > 0) add(u - gw);
                    if (uy + 1 < gh) add(u + gw);
                    for (int ch = 0; ch < c; ++ch) val[u * c + ch] = acc[ch] / n;
                }
        }
        __syncthreads();
    }
    // The region's own pixels (its label), into the output.
    for (int g = threadIdx.x; g < cells; g += blockDim.x) {
        i64 i = (i64)(y0 + g / gw) * width + x0 + g % gw;
        if (labels[i] != label) continue;
        for (int ch = 0; ch < c; ++ch) set_channel(dst, i, ch, lanes, val[g * c + ch]);
    }
}

extern "C" __global__ void glare_solve_u8(const u8* src, u8* dst, const u8* mask, const int* labels, const i64* regions, float* grid, int width, int channels, int lanes, int iterations, int limit) {
    solve(src, dst, mask, labels, regions, grid, width, channels, lanes, iterations, limit);
}
TESSERA_EXPORT(glare_solve_u8)
extern "C" __global__ void glare_solve_u16(const u16* src, u16* dst, const u8* mask, const int* labels, const i64* regions, float* grid, int width, int channels, int lanes, int iterations, int limit) {
    solve(src, dst, mask, labels, regions, grid, width, channels, lanes, iterations, limit);
}
TESSERA_EXPORT(glare_solve_u16)
extern "C" __global__ void glare_solve_f32(const float* src, float* dst, const u8* mask, const int* labels, const i64* regions, float* grid, int width, int channels, int lanes, int iterations, int limit) {
    solve(src, dst, mask, labels, regions, grid, width, channels, lanes, iterations, limit);
}
TESSERA_EXPORT(glare_solve_f32)

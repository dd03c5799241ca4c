// Local contrast enhancement (contrast.rs in the core): the luminance, its global spread,
// and the enhanced image from the local tent means and variances of every scale
// (variance.cu's moment_rows).
//
//   luma_rgba:      one thread per pixel: the rounded u8 luma (the statistics' input) and
//                   the unrounded f32 luma (the formula's), as the core computes them.
//   to_f32_*:       one thread per pixel: a gray image as f32.
//   global_moments: a block per 256 pixels: sums of (v - mean)^power over the finite
//                   values and their count, reduced in shared memory, one f64 atomic per
//                   block.
//   contrast_*:     one thread per pixel: delta = (1/S) sum_s (g_s - 1)(Y - mu_s) in the
//                   core's f32 order (no fused multiply-adds), then the type's output.
#include "common.cuh"

extern "C" __global__ void luma_rgba(const u8* rgba, u8* luma8, float* luma, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 r = rgba[4 * (i64)i], g = rgba[4 * (i64)i + 1], b = rgba[4 * (i64)i + 2];
    luma8[i] = (u8)((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
    luma[i] = __fadd_rn(__fadd_rn(__fmul_rn(0.299f, (float)r), __fmul_rn(0.587f, (float)g)), __fmul_rn(0.114f, (float)b));
}
TESSERA_EXPORT(luma_rgba)

extern "C" __global__ void to_f32_u8(const u8* src, float* dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = (float)src[i];
}
TESSERA_EXPORT(to_f32_u8)
extern "C" __global__ void to_f32_u16(const u16* src, float* dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = (float)src[i];
}
TESSERA_EXPORT(to_f32_u16)

// Blocks of 256.
extern "C" __global__ void global_moments(const float* y, int n, double mean, int power, double* sum, u64* count) {
    __shared__ double part[256];
    __shared__ u64 cnt[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double d = 0.0;
    u64 c = 0;
    if (i < n) {
        float v = y[i];
        if (v - v == 0.0f) {
            d = (double)v - mean;
            if (power == 2) d = d * d;
            c = 1;
        }
    }
    part[threadIdx.x] = d;
    cnt[threadIdx.x] = c;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            part[threadIdx.x] += part[threadIdx.x + s];
            cnt[threadIdx.x] += cnt[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(sum, part[0]);
        atomicAdd(count, cnt[0]);
    }
}
TESSERA_EXPORT(global_moments)

// Y' - Y at pixel i over `scales` scales (means and variances `n` apart).
__device__ float contrast_delta(const float* y, const float* means, const float* vars, int scales, i64 n, i64 i, float num, float floor,
                                float gmin, float gmax, float inv_s) {
    float d = 0.0f, yi = y[i];
    for (int s = 0; s < scales; ++s) {
        float g = num / __fadd_rn(sqrtf(vars[s * n + i]), floor);
        g = fminf(fmaxf(g, gmin), gmax);
        d = __fadd_rn(d, __fmul_rn(__fmul_rn(inv_s, __fadd_rn(g, -1.0f)), __fadd_rn(yi, -means[s * n + i])));
    }
    return d;
}

// Round half up of a value in 0..=65535; NaN gives 0 (the core's round_non_negative).
__device__ __forceinline__ u32 round_non_negative(float v) {
    if (!(v >= 0.0f)) return 0;
    u32 t = (u32)v;
    return t + (v - (float)t >= 0.5f ? 1 : 0);
}

#define CONTRAST_ARGS const float* y, const float* means, const float* vars, int scales, int n, float num, float floor, float gmin, float gmax, float inv_s
#define CONTRAST_DELTA contrast_delta(y, means, vars, scales, n, i, num, floor, gmin, gmax, inv_s)

extern "C" __global__ void contrast_u8(const u8* src, u8* dst, CONTRAST_ARGS) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dst[i] = (u8)round_non_negative(fminf(fmaxf(__fadd_rn(y[i], CONTRAST_DELTA), 0.0f), 255.0f));
}
TESSERA_EXPORT(contrast_u8)
extern "C" __global__ void contrast_u16(const u16* src, u16* dst, CONTRAST_ARGS) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dst[i] = (u16)round_non_negative(fminf(fmaxf(__fadd_rn(y[i], CONTRAST_DELTA), 0.0f), 65535.0f));
}
TESSERA_EXPORT(contrast_u16)
extern "C" __global__ void contrast_f32(const float* src, float* dst, CONTRAST_ARGS) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dst[i] = __fadd_rn(src[i], CONTRAST_DELTA);
}
TESSERA_EXPORT(contrast_f32)

// RGBA: R, G, B times target / luma (at most 255 / the largest channel), alpha kept; a
// black pixel becomes the gray of the target.
extern "C" __global__ void contrast_rgba(const u8* src, u8* dst, CONTRAST_ARGS) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float l = y[i];
    float target = fminf(fmaxf(__fadd_rn(l, CONTRAST_DELTA), 0.0f), 255.0f);
    const u8* px = src + 4 * (i64)i;
    u8* o = dst + 4 * (i64)i;
    auto to8 = [](float v) { return (u8)round_non_negative(fminf(fmaxf(v, 0.0f), 255.0f)); };
    o[3] = px[3];
    if (l <= 0.0f) {
        u8 g = to8(target);
        o[0] = o[1] = o[2] = g;
        return;
    }
    float top = (float)max(max(px[0], px[1]), px[2]);
    float k = fminf(target / l, 255.0f / top);
    for (int c = 0; c < 3; ++c) o[c] = to8(__fmul_rn((float)px[c], k));
}
TESSERA_EXPORT(contrast_rgba)

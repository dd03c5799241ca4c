// Compositing of a stitched sequence (stitch/composite.rs in the core) on a device canvas:
// the placed frames pasted in sequence order, a batch of them (consecutive frames whose
// placements lie close) by one launch over the box of canvas pixels they cover, a thread
// per canvas pixel taking the batch's frames that cover it in order; launches run in order,
// so every canvas pixel sees the frames in the core's order. Overwrite keeps the last
// frame's pixel; Average and Feather add `k * channel` to f32 sums and `k` to an f32
// weight, rounded as written (no contraction, module compiled without FMA), frame after
// frame as the core adds them, then `stitch_finish_*` divides and rounds as the core's
// `from_channels`: integer canvases are the CPU's bytes.
#include "common.cuh"

// Pixel access of each frame type: C colour channels as f32, and the core's conversion
// back (integers rounded half away from zero and saturated; RGBA alpha 255).
struct GrayU8 {
    typedef u8 P;
    static const int C = 1;
    __device__ static float channel(P p, int) { return (float)p; }
    __device__ static P from(const float* v) { return (P)fminf(fmaxf(roundf(v[0]), 0.0f), 255.0f); }
};
struct GrayU16 {
    typedef u16 P;
    static const int C = 1;
    __device__ static float channel(P p, int) { return (float)p; }
    __device__ static P from(const float* v) { return (P)fminf(fmaxf(roundf(v[0]), 0.0f), 65535.0f); }
};
struct GrayF32 {
    typedef float P;
    static const int C = 1;
    __device__ static float channel(P p, int) { return p; }
    __device__ static P from(const float* v) { return v[0]; }
};
// RGBA8 as one u32 (r in the low byte, as the core's Rgba8 lies in memory).
struct Rgba {
    typedef u32 P;
    static const int C = 3;
    __device__ static float channel(P p, int c) { return (float)((p >> (8 * c)) & 0xffu); }
    __device__ static P from(const float* v) {
        u32 r = 0;
        for (int c = 0; c < 3; ++c) r |= (u32)(u8)fminf(fmaxf(roundf(v[c]), 0.0f), 255.0f) << (8 * c);
        return r | 0xff000000u;
    }
};

// A batch of `count` frames pasted over the box of canvas pixels from (bx, by), bw wide and
// a block row a canvas row tall: frame k (w x h, packed, at frames + k * stride) with its
// top-left at canvas (places[2 k], places[2 k + 1]). Blend 0 Overwrite, 1 Average, 2
// Feather (weight: distance to the frame's nearest edge, min(u + 1, w - u, v + 1, h - v)).
template <typename K>
__device__ void paste(const int* places, const typename K::P* frames, int count, int w, int h, u64 stride, typename K::P* canvas, int cw, int bx, int by, int bw, int blend, float* acc, float* weight) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= bw) return;
    const int cx = bx + x, cy = by + blockIdx.y;
    const i64 idx = (i64)cy * cw + cx;
    if (blend == 0) {
        // The last frame over the pixel is the one that stays.
        for (int k = count - 1; k >= 0; --k) {
            const int u = cx - places[2 * k], v = cy - places[2 * k + 1];
            if (u >= 0 && u < w && v >= 0 && v < h) {
                canvas[idx] = at(frames + k * stride, u, v, w);
                return;
            }
        }
        return;
    }
    // The sums read at the first frame over the pixel and written after the last.
    bool covered = false;
    float k_sum = 0.0f, sums[3] = {0.0f, 0.0f, 0.0f};
    for (int k = 0; k < count; ++k) {
        const int u = cx - places[2 * k], v = cy - places[2 * k + 1];
        if (u < 0 || u >= w || v < 0 || v >= h) continue;
        if (!covered) {
            covered = true;
            k_sum = weight[idx];
            for (int c = 0; c < K::C; ++c) sums[c] = acc[idx * K::C + c];
        }
        const typename K::P px = at(frames + k * stride, u, v, w);
        const float f = blend == 2 ? (float)min(min(u + 1, w - u), min(v + 1, h - v)) : 1.0f;
        k_sum = __fadd_rn(k_sum, f);
        for (int c = 0; c < K::C; ++c) sums[c] = __fadd_rn(sums[c], __fmul_rn(f, K::channel(px, c)));
    }
    if (!covered) return;
    weight[idx] = k_sum;
    for (int c = 0; c < K::C; ++c) acc[idx * K::C + c] = sums[c];
}

// Pixels with weight: the weighted mean of their frames; the others keep the canvas's 0.
template <typename K>
__device__ void finish(typename K::P* canvas, const float* acc, const float* weight, u64 n) {
    i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)n) return;
    float k = weight[idx];
    if (k > 0.0f) {
        float v[3] = {0.0f, 0.0f, 0.0f};
        for (int c = 0; c < K::C; ++c) v[c] = acc[idx * K::C + c] / k;
        canvas[idx] = K::from(v);
    }
}

extern "C" __global__ void stitch_paste_u8(const int* places, const u8* frames, int count, int w, int h, u64 stride, u8* canvas, int cw, int bx, int by, int bw, int blend, float* acc, float* weight) {
    paste<GrayU8>(places, frames, count, w, h, stride, canvas, cw, bx, by, bw, blend, acc, weight);
}
TESSERA_EXPORT(stitch_paste_u8)
extern "C" __global__ void stitch_finish_u8(u8* canvas, const float* acc, const float* weight, u64 n) {
    finish<GrayU8>(canvas, acc, weight, n);
}
TESSERA_EXPORT(stitch_finish_u8)
extern "C" __global__ void stitch_paste_u16(const int* places, const u16* frames, int count, int w, int h, u64 stride, u16* canvas, int cw, int bx, int by, int bw, int blend, float* acc, float* weight) {
    paste<GrayU16>(places, frames, count, w, h, stride, canvas, cw, bx, by, bw, blend, acc, weight);
}
TESSERA_EXPORT(stitch_paste_u16)
extern "C" __global__ void stitch_finish_u16(u16* canvas, const float* acc, const float* weight, u64 n) {
    finish<GrayU16>(canvas, acc, weight, n);
}
TESSERA_EXPORT(stitch_finish_u16)
extern "C" __global__ void stitch_paste_f32(const int* places, const float* frames, int count, int w, int h, u64 stride, float* canvas, int cw, int bx, int by, int bw, int blend, float* acc, float* weight) {
    paste<GrayF32>(places, frames, count, w, h, stride, canvas, cw, bx, by, bw, blend, acc, weight);
}
TESSERA_EXPORT(stitch_paste_f32)
extern "C" __global__ void stitch_finish_f32(float* canvas, const float* acc, const float* weight, u64 n) {
    finish<GrayF32>(canvas, acc, weight, n);
}
TESSERA_EXPORT(stitch_finish_f32)
extern "C" __global__ void stitch_paste_rgba(const int* places, const u32* frames, int count, int w, int h, u64 stride, u32* canvas, int cw, int bx, int by, int bw, int blend, float* acc, float* weight) {
    paste<Rgba>(places, frames, count, w, h, stride, canvas, cw, bx, by, bw, blend, acc, weight);
}
TESSERA_EXPORT(stitch_paste_rgba)
extern "C" __global__ void stitch_finish_rgba(u32* canvas, const float* acc, const float* weight, u64 n) {
    finish<Rgba>(canvas, acc, weight, n);
}
TESSERA_EXPORT(stitch_finish_rgba)

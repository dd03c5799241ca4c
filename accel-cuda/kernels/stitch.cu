// Compositing of a stitched sequence (stitch/composite.rs in the core) on a device canvas:
// each placed frame is pasted in sequence order, a thread per frame pixel (the pixels of
// one frame land on distinct canvas pixels, and launches run in order, so every canvas
// pixel sees the frames in the core's order). Overwrite copies; Average and Feather add
// `k * channel` to f32 sums and `k` to an f32 weight, rounded as written (no contraction,
// module compiled without FMA), then `stitch_finish_*` divides and rounds as the core's
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

// Frame (w x h, packed) pasted with its top-left at canvas (x, y); blend 0 Overwrite, 1
// Average, 2 Feather (weight: distance to the frame's nearest edge, min(u + 1, w - u,
// v + 1, h - v)).
template <typename K>
__device__ void paste(const typename K::P* frame, int w, int h, typename K::P* canvas, int cw, int x, int y, int blend, float* acc, float* weight) {
    int u = blockIdx.x * blockDim.x + threadIdx.x, v = blockIdx.y;
    if (u >= w || v >= h) return;
    typename K::P px = at(frame, u, v, w);
    i64 idx = (i64)(y + v) * cw + x + u;
    if (blend == 0) {
        canvas[idx] = px;
        return;
    }
    float k = 1.0f;
    if (blend == 2) k = (float)min(min(u + 1, w - u), min(v + 1, h - v));
    weight[idx] = __fadd_rn(weight[idx], k);
    for (int c = 0; c < K::C; ++c) acc[idx * K::C + c] = __fadd_rn(acc[idx * K::C + c], __fmul_rn(k, K::channel(px, c)));
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

extern "C" __global__ void stitch_paste_u8(const u8* frame, int w, int h, u8* canvas, int cw, int x, int y, int blend, float* acc, float* weight) {
    paste<GrayU8>(frame, w, h, canvas, cw, x, y, blend, acc, weight);
}
TESSERA_EXPORT(stitch_paste_u8)
extern "C" __global__ void stitch_finish_u8(u8* canvas, const float* acc, const float* weight, u64 n) {
    finish<GrayU8>(canvas, acc, weight, n);
}
TESSERA_EXPORT(stitch_finish_u8)
extern "C" __global__ void stitch_paste_u16(const u16* frame, int w, int h, u16* canvas, int cw, int x, int y, int blend, float* acc, float* weight) {
    paste<GrayU16>(frame, w, h, canvas, cw, x, y, blend, acc, weight);
}
TESSERA_EXPORT(stitch_paste_u16)
extern "C" __global__ void stitch_finish_u16(u16* canvas, const float* acc, const float* weight, u64 n) {
    finish<GrayU16>(canvas, acc, weight, n);
}
TESSERA_EXPORT(stitch_finish_u16)
extern "C" __global__ void stitch_paste_f32(const float* frame, int w, int h, float* canvas, int cw, int x, int y, int blend, float* acc, float* weight) {
    paste<GrayF32>(frame, w, h, canvas, cw, x, y, blend, acc, weight);
}
TESSERA_EXPORT(stitch_paste_f32)
extern "C" __global__ void stitch_finish_f32(float* canvas, const float* acc, const float* weight, u64 n) {
    finish<GrayF32>(canvas, acc, weight, n);
}
TESSERA_EXPORT(stitch_finish_f32)
extern "C" __global__ void stitch_paste_rgba(const u32* frame, int w, int h, u32* canvas, int cw, int x, int y, int blend, float* acc, float* weight) {
    paste<Rgba>(frame, w, h, canvas, cw, x, y, blend, acc, weight);
}
TESSERA_EXPORT(stitch_paste_rgba)
extern "C" __global__ void stitch_finish_rgba(u32* canvas, const float* acc, const float* weight, u64 n) {
    finish<Rgba>(canvas, acc, weight, n);
}
TESSERA_EXPORT(stitch_finish_rgba)

// The subpixel refinement of a stitched pair's shift (stitch/refine.rs in the core,
// `ShiftRefinement::on_host`): Gauss-Newton on the sum of squared differences of up to a
// dozen template interiors, each with its own gain and offset, the Jacobian the reference
// template's gradient (inverse compositional), the moving frame resampled (bilinear) per
// iteration. Every sum is added in the core's order, in f64, with no fused multiply-adds
// (compiled with --fmad=false, the shim with -ffp-contract=off), so the refined shift is the
// CPU's to the bit.
//
// A warp per pair. Lane k owns interior k: its means, its five gradient sums, and each
// iteration its five resampled sums, pixel by pixel in row-major order as the core adds
// them. Lane 0 adds the interiors' sums in interior order and takes the step; the warp
// reads it back through shared memory.
//
// A lane's sums are chains of dependent adds, and each pixel's terms need loads first: one
// pixel at a time, every add waited for a load (a warp per pair leaves nothing else to
// run). So a lane takes its pixels in runs of REFINE_RUN: the run's loads and products
// first, all in flight together, then their adds in pixel order, the same roundings in the
// same order as one pixel at a time.
#include "common.cuh"

// Interiors a pair refines on at most (the core's REFINED_TEMPLATES).
#define REFINE_PATCHES 12
// Ints of a pair's record: reference slot, moving slot, interiors, then each interior's
// top-left pixel (x, y) in the reference.
#define REFINE_TASK_INTS (3 + 2 * REFINE_PATCHES)

// Pixels whose terms a lane computes before adding them.
#define REFINE_RUN 8

// Visits an n x n interior row by row in runs of up to REFINE_RUN pixels:
// `terms(i, j, t)` writes pixel (i, j)'s K terms for each pixel of the run, then
// `add(t)` takes them in pixel order.
template <int K, typename Terms, typename Add>
__device__ void in_order_runs(int n, Terms terms, Add add) {
    for (int j = 0; j < n; ++j)
        for (int i0 = 0; i0 < n; i0 += REFINE_RUN) {
            const int run = min(REFINE_RUN, n - i0);
            double t[REFINE_RUN][K];
            TESSERA_UNROLL
            for (int u = 0; u < REFINE_RUN; ++u)
                if (u < run) terms(i0 + u, j, t[u]);
            TESSERA_UNROLL
            for (int u = 0; u < REFINE_RUN; ++u)
                if (u < run) add(t[u]);
        }
}

// The step's outcome, as lane 0 tells the warp.
#define REFINE_GOING 0
#define REFINE_CONVERGED 1
#define REFINE_STANDS 2

template <typename T>
__device__ void refine_shift(const u64* frames, int w, int h, int n, int iterations, const int* tasks, const double* shifts, double* out) {
    __shared__ double gradient[REFINE_PATCHES][5];
    __shared__ double resampled[REFINE_PATCHES][5];
    __shared__ double step[2];
    __shared__ int outcome;
    const int lane = threadIdx.x;
    const int* task = tasks + (size_t)blockIdx.x * REFINE_TASK_INTS;
    const T* ref = (const T*)frames[task[0]];
    const T* mov = (const T*)frames[task[1]];
    const int count = task[2];
    const double shift_x = shifts[2 * blockIdx.x], shift_y = shifts[2 * blockIdx.x + 1];
    const double pixels = (double)n * (double)n;
    const bool mine = lane < count;
    const int cx = mine ? task[3 + 2 * lane] : 0, cy = mine ? task[4 + 2 * lane] : 0;

    // The interior's value and central differences at (x, y), before their means go.
    auto value = [&](int x, int y) { return (double)ref[(size_t)y * w + x]; };
    auto gx = [&](int x, int y) { return 0.5 * ((double)ref[(size_t)y * w + x + 1] - (double)ref[(size_t)y * w + x - 1]); };
    auto gy = [&](int x, int y) { return 0.5 * ((double)ref[(size_t)(y + 1) * w + x] - (double)ref[(size_t)(y - 1) * w + x]); };
    double mean_v = 0.0, mean_gx = 0.0, mean_gy = 0.0;
    if (mine) {
        double s[3] = {-0.0, -0.0, -0.0};
        in_order_runs<3>(
            n,
            [&](int i, int j, double* t) {
                t[0] = value(cx + i, cy + j);
                t[1] = gx(cx + i, cy + j);
                t[2] = gy(cx + i, cy + j);
            },
            [&](const double* t) {
                for (int k = 0; k < 3; ++k) s[k] += t[k];
            });
        mean_v = s[0] / pixels;
        mean_gx = s[1] / pixels;
        mean_gy = s[2] / pixels;
        double g[5] = {-0.0, -0.0, -0.0, -0.0, -0.0};
        in_order_runs<5>(
            n,
            [&](int i, int j, double* t) {
                const double v = value(cx + i, cy + j) - mean_v;
                const double dx = gx(cx + i, cy + j) - mean_gx, dy = gy(cx + i, cy + j) - mean_gy;
                t[0] = dx * dx;
                t[1] = dx * dy;
                t[2] = dy * dy;
                t[3] = dx * v;
                t[4] = dy * v;
            },
            [&](const double* t) {
                for (int k = 0; k < 5; ++k) g[k] += t[k];
            });
        for (int k = 0; k < 5; ++k) gradient[lane][k] = g[k];
    }
    __syncwarp();
    double hxx = 0.0, hxy = 0.0, hyy = 0.0;
    for (int k = 0; k < count; ++k) {
        hxx += gradient[k][0];
        hxy += gradient[k][1];
        hyy += gradient[k][2];
    }
    const double det = hxx * hyy - hxy * hxy;
    // Both axes must be constrained (no pure edge); relative to the gradient energy.
    bool stands = !(det > 1e-6 * (hxx + hyy) * (hxx + hyy));
    double sx = shift_x, sy = shift_y;
    for (int it = 0; it < iterations && !stands; ++it) {
        const double fx = floor(-sx), fy = floor(-sy);
        const double ax = -sx - fx, ay = -sy - fy;
        // Where each interior starts in the moving frame; none may leave it.
        const i64 x0 = (i64)cx + (i64)fx, y0 = (i64)cy + (i64)fy;
        const bool outside = mine && (x0 < 0 || y0 < 0 || x0 + n >= w || y0 + n >= h);
        if (__any_sync(0xffffffffu, outside)) {
            stands = true;
            break;
        }
        if (mine) {
            double r[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
            in_order_runs<5>(
                n,
                [&](int i, int j, double* q) {
                    const T* top = mov + (size_t)(y0 + j) * w + x0;
                    const T* bottom = top + w;
                    const double t0 = (double)top[i], t1 = (double)top[i + 1];
                    const double d0 = (double)bottom[i], d1 = (double)bottom[i + 1];
                    const double t = t0 + ax * (t1 - t0), d = d0 + ax * (d1 - d0);
                    const double v = t + ay * (d - t);
                    q[0] = v;
                    q[1] = v * v;
                    q[2] = (value(cx + i, cy + j) - mean_v) * v;
                    q[3] = (gx(cx + i, cy + j) - mean_gx) * v;
                    q[4] = (gy(cx + i, cy + j) - mean_gy) * v;
                },
                [&](const double* q) {
                    for (int k = 0; k < 5; ++k) r[k] += q[k];
                });
            for (int k = 0; k < 5; ++k) resampled[lane][k] = r[k];
        }
        __syncwarp();
        if (lane == 0) {
            double bx = 0.0, by = 0.0;
            int result = REFINE_GOING;
            for (int k = 0; k < count; ++k) {
                const double* q = resampled[k];
                const double var = q[1] - q[0] * q[0] / pixels;
                if (!(var > 0.0)) {
                    result = REFINE_STANDS;
                    break;
                }
                const double gain = q[2] / var;
                bx += gain * q[3] - gradient[k][3];
                by += gain * q[4] - gradient[k][4];
            }
            if (result == REFINE_GOING) {
                const double dx = (hyy * bx - hxy * by) / det;
                const double dy = (hxx * by - hxy * bx) / det;
                step[0] = sx + dx;
                step[1] = sy + dy;
                if (fabs(step[0] - shift_x) > 1.0 || fabs(step[1] - shift_y) > 1.0 || !isfinite(step[0]) || !isfinite(step[1]))
                    result = REFINE_STANDS;
                else if (dx * dx + dy * dy < 2.5e-5)
                    result = REFINE_CONVERGED;
            }
            outcome = result;
        }
        __syncwarp();
        const int result = outcome;
        if (result == REFINE_STANDS) {
            stands = true;
            break;
        }
        sx = step[0];
        sy = step[1];
        // Every lane has read the step before lane 0 writes the next.
        __syncwarp();
        if (result == REFINE_CONVERGED) break;
    }
    if (lane == 0) {
        out[2 * blockIdx.x] = stands ? shift_x : sx;
        out[2 * blockIdx.x + 1] = stands ? shift_y : sy;
    }
}

extern "C" __global__ void refine_shift_u8(const u64* frames, int w, int h, int n, int iterations, const int* tasks, const double* shifts, double* out) {
    refine_shift<u8>(frames, w, h, n, iterations, tasks, shifts, out);
}
TESSERA_EXPORT(refine_shift_u8)

extern "C" __global__ void refine_shift_u16(const u64* frames, int w, int h, int n, int iterations, const int* tasks, const double* shifts, double* out) {
    refine_shift<u16>(frames, w, h, n, iterations, tasks, shifts, out);
}
TESSERA_EXPORT(refine_shift_u16)

extern "C" __global__ void refine_shift_f32(const u64* frames, int w, int h, int n, int iterations, const int* tasks, const double* shifts, double* out) {
    refine_shift<float>(frames, w, h, n, iterations, tasks, shifts, out);
}
TESSERA_EXPORT(refine_shift_f32)

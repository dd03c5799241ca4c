// The subpixel refinement of a stitched pair's shift (stitch/refine.rs in the core,
// `ShiftRefinement::on_host`): Gauss-Newton on the sum of squared differences of up to a
// dozen template interiors, each with its own gain and offset, the Jacobian the reference
// template's gradient (inverse compositional), the moving frame resampled (bilinear) per
// iteration. Every sum is added in the core's order, in f64, with no fused multiply-adds
// (compiled with --fmad=false, the shim with -ffp-contract=off), so the refined shift is the
// CPU's to the bit.
//
// A block per pair, a warp per interior. Warp k owns interior k: its lanes take a row's
// pixels 32 at a time (loads of consecutive pixels, every pixel's terms at once) and put
// the terms in shared memory; then every lane adds them in pixel order, so each lane holds
// the interior's sums, added in the core's order: its means, its five gradient sums, and
// each iteration its five resampled sums. (With a lane per interior, every load of a warp
// touches a dozen cache lines and the sums wait for them pixel by pixel: 0.41 ms a launch
// on an H200.) Thread 0 adds the interiors' sums in interior order and takes the step; the
// block reads it back through shared memory.
#include "common.cuh"

// Interiors a pair refines on at most (the core's REFINED_TEMPLATES), and so the warps of
// a block.
#define REFINE_PATCHES 12
#define REFINE_THREADS (32 * REFINE_PATCHES)
// Ints of a pair's record: reference slot, moving slot, interiors, then each interior's
// top-left pixel (x, y) in the reference.
#define REFINE_TASK_INTS (3 + 2 * REFINE_PATCHES)
// Terms a pixel gives at most (the iterations' five sums).
#define REFINE_TERMS 5

// The step's outcome, as thread 0 tells the block.
#define REFINE_GOING 0
#define REFINE_CONVERGED 1
#define REFINE_STANDS 2

// Sums K terms over an n x n interior in row-major pixel order: `terms(i, j, t)` writes
// pixel (i, j)'s terms, a pixel per lane, into the warp's row of shared memory, then every
// lane adds the row's terms pixel by pixel into `sums`. Every lane of the warp calls it.
template <int K, typename Terms>
__device__ void interior_sums(int n, double (*row)[REFINE_TERMS], double* sums, Terms terms) {
    const int lane = threadIdx.x % 32;
    for (int j = 0; j < n; ++j)
        for (int i0 = 0; i0 < n; i0 += 32) {
            const int run = min(32, n - i0);
            if (lane < run) terms(i0 + lane, j, row[lane]);
            __syncwarp();
            // Four pixels' terms read at once, then added in order: the adds wait on the
            // one before, not on a shared-memory load each (about 30 cycles, where an add
            // takes 8).
            for (int u0 = 0; u0 < run; u0 += 4) {
                double t[4][K];
                TESSERA_UNROLL
                for (int u = 0; u < 4; ++u)
                    if (u0 + u < run)
                        for (int k = 0; k < K; ++k) t[u][k] = row[u0 + u][k];
                TESSERA_UNROLL
                for (int u = 0; u < 4; ++u)
                    if (u0 + u < run)
                        for (int k = 0; k < K; ++k) sums[k] += t[u][k];
            }
            // Every lane has read the row before it is written again.
            __syncwarp();
        }
}

template <typename T>
__device__ void refine_shift(const u64* frames, int w, int h, int n, int iterations, const int* tasks, const double* shifts, double* out) {
    __shared__ double rows[REFINE_PATCHES][32][REFINE_TERMS];
    __shared__ double gradient[REFINE_PATCHES][5];
    __shared__ double resampled[REFINE_PATCHES][5];
    __shared__ int outside[REFINE_PATCHES];
    __shared__ double step[2];
    __shared__ int outcome;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* task = tasks + (size_t)blockIdx.x * REFINE_TASK_INTS;
    const T* ref = (const T*)frames[task[0]];
    const T* mov = (const T*)frames[task[1]];
    const int count = task[2];
    const double shift_x = shifts[2 * blockIdx.x], shift_y = shifts[2 * blockIdx.x + 1];
    const double pixels = (double)n * (double)n;
    const bool mine = warp < count;
    const int cx = mine ? task[3 + 2 * warp] : 0, cy = mine ? task[4 + 2 * warp] : 0;
    double (*row)[REFINE_TERMS] = rows[warp];

    // The interior's value and central differences at (x, y), before their means go.
    auto value = [&](int x, int y) { return (double)ref[(size_t)y * w + x]; };
    auto gx = [&](int x, int y) { return 0.5 * ((double)ref[(size_t)y * w + x + 1] - (double)ref[(size_t)y * w + x - 1]); };
    auto gy = [&](int x, int y) { return 0.5 * ((double)ref[(size_t)(y + 1) * w + x] - (double)ref[(size_t)(y - 1) * w + x]); };
    double mean_v = 0.0, mean_gx = 0.0, mean_gy = 0.0;
    if (mine) {
        double s[3] = {-0.0, -0.0, -0.0};
        interior_sums<3>(n, row, s, [&](int i, int j, double* t) {
            t[0] = value(cx + i, cy + j);
            t[1] = gx(cx + i, cy + j);
            t[2] = gy(cx + i, cy + j);
        });
        mean_v = s[0] / pixels;
        mean_gx = s[1] / pixels;
        mean_gy = s[2] / pixels;
        double g[5] = {-0.0, -0.0, -0.0, -0.0, -0.0};
        interior_sums<5>(n, row, g, [&](int i, int j, double* t) {
            const double v = value(cx + i, cy + j) - mean_v;
            const double dx = gx(cx + i, cy + j) - mean_gx, dy = gy(cx + i, cy + j) - mean_gy;
            t[0] = dx * dx;
            t[1] = dx * dy;
            t[2] = dy * dy;
            t[3] = dx * v;
            t[4] = dy * v;
        });
        if (lane == 0)
            for (int k = 0; k < 5; ++k) gradient[warp][k] = g[k];
    }
    __syncthreads();
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
        if (lane == 0) outside[warp] = mine && (x0 < 0 || y0 < 0 || x0 + n >= w || y0 + n >= h);
        __syncthreads();
        bool any_outside = false;
        for (int k = 0; k < count; ++k) any_outside = any_outside || outside[k];
        // Every thread has read the flags before the next iteration writes them.
        __syncthreads();
        if (any_outside) {
            stands = true;
            break;
        }
        if (mine) {
            double r[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
            interior_sums<5>(n, row, r, [&](int i, int j, double* q) {
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
            });
            if (lane == 0)
                for (int k = 0; k < 5; ++k) resampled[warp][k] = r[k];
        }
        __syncthreads();
        if (threadIdx.x == 0) {
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
        __syncthreads();
        const int result = outcome;
        if (result == REFINE_STANDS) {
            stands = true;
            break;
        }
        sx = step[0];
        sy = step[1];
        // Every thread has read the step before thread 0 writes the next.
        __syncthreads();
        if (result == REFINE_CONVERGED) break;
    }
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = stands ? shift_x : sx;
        out[2 * blockIdx.x + 1] = stands ? shift_y : sy;
    }
}

extern "C" __global__ __launch_bounds__(REFINE_THREADS) void refine_shift_u8(const u64* frames, int w, int h, int n, int iterations, const int* tasks, const double* shifts, double* out) {
    refine_shift<u8>(frames, w, h, n, iterations, tasks, shifts, out);
}
TESSERA_EXPORT(refine_shift_u8)

extern "C" __global__ __launch_bounds__(REFINE_THREADS) void refine_shift_u16(const u64* frames, int w, int h, int n, int iterations, const int* tasks, const double* shifts, double* out) {
    refine_shift<u16>(frames, w, h, n, iterations, tasks, shifts, out);
}
TESSERA_EXPORT(refine_shift_u16)

extern "C" __global__ __launch_bounds__(REFINE_THREADS) void refine_shift_f32(const u64* frames, int w, int h, int n, int iterations, const int* tasks, const double* shifts, double* out) {
    refine_shift<float>(frames, w, h, n, iterations, tasks, shifts, out);
}
TESSERA_EXPORT(refine_shift_f32)

// What every tessera kernel file shares: fixed-width integer names, the export and
// dynamic-shared-memory macros that differ between NVRTC and the CPU shim, and small
// device helpers. Passed to NVRTC as an in-memory header; force-included by the shim
// build after cuda_shim.h.
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#ifndef TESSERA_SHIM
// On the GPU a kernel needs no registration: the driver finds it by its extern "C" name.
#define TESSERA_EXPORT(kernel)
// One dynamic shared array per launch, typed by each kernel.
#define TESSERA_DYNAMIC_SHARED(T, name) \
    extern __shared__ __align__(16) unsigned char tessera_dynamic_shared[]; \
    T* name = reinterpret_cast<T*>(tessera_dynamic_shared)
#endif

// Unrolls the loop that follows (loops over a kernel's per-thread register arrays, whose
// indices must be constants for the arrays to stay in registers). The shim's compiler
// decides for itself.
#ifndef TESSERA_SHIM
#define TESSERA_UNROLL _Pragma("unroll")
#else
#define TESSERA_UNROLL
#endif

#define TESSERA_INF_F (__int_as_float(0x7f800000))
#define TESSERA_INF_D (__longlong_as_double(0x7ff0000000000000LL))

// The pixel at column x, row y of an image with `stride` elements per row.
template <typename T> __device__ __forceinline__ T& at(T* img, int x, int y, int stride) {
    return img[(i64)y * stride + x];
}
template <typename T> __device__ __forceinline__ const T& at(const T* img, int x, int y, int stride) {
    return img[(i64)y * stride + x];
}

// Where index i of a line of n reads from under the core's `Border` mode (0 reflect-101,
// 1 replicate, 2 constant, 3 normalize), or -1 for a constant / normalize outside pixel.
__device__ __forceinline__ int source_index(int i, int n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == 0) {
        if (n == 1) return 0;
        int period = 2 * (n - 1);
        int m = i % period;
        if (m < 0) m += period;
        return m < n ? m : period - m;
    }
    if (mode == 1) return i < 0 ? 0 : n - 1;
    return -1;
}

// The running-sum line passes (box filter, recursive variance): a thread per line and
// segment of a line.
//
// The segment of a line of n outputs this thread runs: [*i0, *i1) for grid row blockIdx.y
// and segments of `seg`; false past the line's end (the whole block returns). One thread
// per whole line gives a 1920 x 1080 image 1080 threads, 3 % occupancy on an H200
// (measured); segments restart their sums from the kernel's support (exact for integers;
// f64 sums re-seeded).
__device__ __forceinline__ bool segment_of(int n, int seg, int* i0, int* i1) {
    *i0 = blockIdx.y * seg;
    if (*i0 >= n) return false;
    *i1 = n - *i0 < seg ? n : *i0 + seg;
    return true;
}

// Which of the `n` lines this thread walks (grid x): false for a whole warp past them (it
// returns); `first` the warp's first line, `owners` its real lines, `live` this one's.
// Lanes past the lines stay to run the warp's staging tile (below).
__device__ __forceinline__ bool line_lane(int n, int* line, int* first, int* owners, bool* live) {
    *line = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    *first = *line - (int)(threadIdx.x & 31);
    *owners = min(32, n - *first);
    *live = *line < n;
    return *owners > 0;
}

// A warp's 32 x 32 staging tile (padded against bank conflicts) for the running-sum passes,
// which give each lane one line and walk all lanes one step at a time: a lane's results
// are consecutive in its own line, so written directly a warp store would touch 32 lines.
// `emit` keeps this lane's value of step i of the segment i0 .. i1 - 1 (the warp's lanes in
// step); after every 32nd step and the segment's last, lane L hands step L of the group of
// each of the warp's `owners` lanes to `write(owner, step, value)`: 32 consecutive steps
// of one line per warp store. Every lane of the warp calls it (lanes past the data pass
// dummy values; `owners` counts the real ones).
template <typename V> struct WarpTile {
    V (*cells)[33];

    template <typename W> __device__ void emit(int i, int i0, int i1, V v, int owners, W write) {
        int lane = (int)(threadIdx.x & 31), step = (i - i0) & 31;
        cells[step][lane] = v;
        if (step == 31 || i + 1 == i1) {
            __syncwarp();
            if (lane <= step) {
                for (int o = 0; o < owners; ++o) write(o, i - step + lane, cells[lane][o]);
            }
            __syncwarp();
        }
    }
};

// Inclusive prefix sums, in place, of entries lo .. pitch - 1 of each of the NR rows of
// `buf` (rows `pitch` apart), by the whole block (at most 8 warps, every thread calling):
// each thread sums a run of ceil((pitch - lo) / threads) consecutive entries, a warp
// shuffle scan and the warps' totals (`totals`, NR x 8) give its run's offset, and it
// rewrites its run. The rows must be written behind a barrier before the call; one
// barrier inside; the caller puts one between the call and reading the sums.
template <typename R, int NR> __device__ void block_scan_rows(R* buf, int pitch, int lo, R* totals) {
    int threads = blockDim.x, t = threadIdx.x, warp = t / 32;
    int run = (pitch - lo + threads - 1) / threads;
    int r0 = lo + t * run, r1 = min(pitch, r0 + run);
    R before[NR];
    TESSERA_UNROLL
    for (int r = 0; r < NR; ++r) {
        R total = 0;
        for (int i = r0; i < r1; ++i) total += buf[r * pitch + i];
        R incl = total;
        for (int d = 1; d < 32; d *= 2) {
            R other = __shfl_up_sync(0xffffffffu, incl, d);
            if ((t & 31) >= d) incl += other;
        }
        if ((t & 31) == 31) totals[r * 8 + warp] = incl;
        before[r] = incl - total;
    }
    __syncthreads();
    TESSERA_UNROLL
    for (int r = 0; r < NR; ++r) {
        R acc = before[r];
        for (int w = 0; w < warp; ++w) acc += totals[r * 8 + w];
        for (int i = r0; i < r1; ++i) {
            acc += buf[r * pitch + i];
            buf[r * pitch + i] = acc;
        }
    }
}

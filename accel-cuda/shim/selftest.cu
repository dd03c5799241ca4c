// Kernels that test the shim itself (compiled into the shim only, never by NVRTC): block
// barriers with static and dynamic shared memory, early returns, warp shuffles and votes,
// atomics, 3-D blocks, and one deliberate race for ThreadSanitizer to find.
#include "common.cuh"

// Per-block sum of `in` by a shared-memory tree (a barrier per level); blocks of 128.
extern "C" __global__ void selftest_block_sum(const int* in, int* out, int n) {
    __shared__ int part[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? in[i] : 0;
    __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
TESSERA_EXPORT(selftest_block_sum)

// Every warp intrinsic once, per lane, into out[7 * lane + k]; one warp of 32.
extern "C" __global__ void selftest_warp(const int* in, int* out) {
    int lane = threadIdx.x;
    int v = in[lane];
    int sum = v;
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, d);
    int xsum = v;
    for (int m = 16; m > 0; m >>= 1) xsum += __shfl_xor_sync(0xffffffffu, xsum, m);
    int scan = v;
    for (int d = 1; d < 32; d <<= 1) {
        int up = __shfl_up_sync(0xffffffffu, scan, d);
        if (lane >= d) scan += up;
    }
    float f = __shfl_sync(0xffffffffu, (float)v * 0.5f, 3);
    out[7 * lane + 0] = __shfl_sync(0xffffffffu, sum, 0);
    out[7 * lane + 1] = xsum;
    out[7 * lane + 2] = scan;
    out[7 * lane + 3] = (int)(f * 2.0f);
    out[7 * lane + 4] = (int)__ballot_sync(0xffffffffu, v & 1);
    out[7 * lane + 5] = __any_sync(0xffffffffu, v == 7);
    out[7 * lane + 6] = __all_sync(0xffffffffu, v >= 0);
}
TESSERA_EXPORT(selftest_warp)

// Threads past `n` return at once; the rest still meet at two barriers and read a
// neighbour's value written before them. Blocks of 64.
extern "C" __global__ void selftest_early_exit(int* out, int n) {
    __shared__ int v[64];
    int t = threadIdx.x;
    if (t >= n) return;
    v[t] = t * 10 + (int)blockIdx.x;
    __syncthreads();
    int left = v[(t + n - 1) % n];
    __syncthreads();
    v[t] = left;
    __syncthreads();
    out[blockIdx.x * 64 + t] = v[t];
}
TESSERA_EXPORT(selftest_early_exit)

// Atomics from every thread: counts, float sums, maxima, and CAS-built increments.
extern "C" __global__ void selftest_atomics(int* count, float* total, unsigned* biggest, int* cas_count) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(count, 1);
    atomicAdd(total, 0.5f);
    atomicMax(biggest, i);
    int old = atomicAdd(cas_count, 0), seen;  // a plain read would race with the CAS
    do {
        seen = old;
        old = atomicCAS(cas_count, seen, seen + 2);
    } while (old != seen);
}
TESSERA_EXPORT(selftest_atomics)

// Reverses each block's slice through dynamic shared memory; 3-D blocks of 4 x 4 x 2
// flattened in CUDA's order (x fastest).
extern "C" __global__ void selftest_reverse(const float* in, float* out) {
    TESSERA_DYNAMIC_SHARED(float, tile);
    int per_block = blockDim.x * blockDim.y * blockDim.z;
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int base = (blockIdx.x + gridDim.x * blockIdx.y) * per_block;
    tile[t] = in[base + t];
    __syncthreads();
    out[base + t] = tile[per_block - 1 - t];
}
TESSERA_EXPORT(selftest_reverse)

// A missing barrier: each thread reads its neighbour's shared slot with no __syncthreads
// between the write and the read. ThreadSanitizer must report it.
extern "C" __global__ void selftest_race(int* out) {
    __shared__ int v[64];
    v[threadIdx.x] = (int)threadIdx.x;
    out[threadIdx.x] = v[(threadIdx.x + 1) % 64];
}
TESSERA_EXPORT(selftest_race)

// Barriers that never open: lane 0 waits for its warp, the other lanes for the block, so
// each barrier lacks a thread that waits on the other (on a GPU, the kernel hangs).
extern "C" __global__ void selftest_divergent_barriers(int* out) {
    if (threadIdx.x == 0) __syncwarp();
    else __syncthreads();
    out[threadIdx.x] = 1;
}
TESSERA_EXPORT(selftest_divergent_barriers)

// An off-by-one: the last thread reads one element past the input. AddressSanitizer must
// report it (device buffers are host allocations with red zones in the shim).
extern "C" __global__ void selftest_overrun(const int* in, int* out, int n) {
    int i = threadIdx.x;
    if (i <= n) out[0] = in[i];
}
TESSERA_EXPORT(selftest_overrun)

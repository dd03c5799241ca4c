// The CUDA host shim: runs tessera's unmodified .cu kernels on CPU threads, for tests on
// machines without a GPU. Force-included (g++ -include) before each kernel file.
//
// What it maps:
//   threadIdx / blockIdx / blockDim / gridDim   thread-local and per-launch values
//   __shared__                                  one static per kernel: blocks run one at a time
//   TESSERA_DYNAMIC_SHARED(T, name)             the launch's dynamic shared memory
//   __syncthreads()                             a barrier over the block's threads
//   __syncwarp(), __shfl_*_sync, __ballot_sync,
//   __any_sync, __all_sync                      a per-warp exchange between two barriers
//   atomicAdd / Min / Max / CAS / Exch          std::atomic_ref
// A block's threads run as fibers on the launching thread, switched at each barrier (an OS
// thread each on CPUs other than x86-64); ThreadSanitizer sees each fiber as a thread.
// Blocks of a grid run one after the other.
//
// Its limits (the kernel dialect, README.md): no lockstep, so warps synchronise only through
// `_sync` intrinsics and __syncwarp (as Volta and later require anyway); a warp-level
// intrinsic must be reached by every lane of the warp that has not returned, and the mask
// is not checked; blockDim is a multiple of 32 where warp intrinsics are used; no GPU
// memory model (the host's is stronger), no texture memory, no timing. A thread that
// returns early leaves the block's barriers, as on the GPU since Volta.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <climits>
#include <cfloat>
#include <utility>
#include <type_traits>

struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x = 1, unsigned int y = 1, unsigned int z = 1) : x(x), y(y), z(z) {}
};
struct int2 { int x, y; };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct uchar4 { unsigned char x, y, z, w; };
static inline int2 make_int2(int x, int y) { return {x, y}; }
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { return {x, y, z, w}; }

namespace shim {
extern thread_local uint3 thread_idx;
extern thread_local uint3 block_idx;
extern dim3 block_dim;
extern dim3 grid_dim;
extern unsigned char* dynamic_shared;
void sync_threads();
void sync_warp();
// Publishes `value` for the lane's warp, waits for every live lane, returns lane `src`'s.
uint64_t warp_exchange(uint64_t value, unsigned src);
// Every live lane's `value`, in lane order (lanes that returned read as 0).
uint32_t warp_ballot(bool value);
unsigned lane();

using Entry = void (*)(void** args);
struct Registrar { Registrar(const char* name, Entry entry); };

// Calls a kernel with its arguments unpacked from the driver-style `void** args`.
template <typename F, F f> struct Launcher;
template <typename... A, void (*f)(A...)> struct Launcher<void (*)(A...), f> {
    template <size_t... I> static void call(void** args, std::index_sequence<I...>) {
        f(*static_cast<std::remove_reference_t<A>*>(args[I])...);
    }
    static void run(void** args) { call(args, std::index_sequence_for<A...>{}); }
};

template <typename T> uint64_t to_bits(T v) { uint64_t b = 0; std::memcpy(&b, &v, sizeof(T)); return b; }
template <typename T> T from_bits(uint64_t b) { T v; std::memcpy(&v, &b, sizeof(T)); return v; }
}  // namespace shim

#define threadIdx (::shim::thread_idx)
#define blockIdx (::shim::block_idx)
#define blockDim (::shim::block_dim)
#define gridDim (::shim::grid_dim)
#define warpSize 32

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__ static const
#define TESSERA_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::shim::dynamic_shared)
#define TESSERA_EXPORT(kernel) \
    static ::shim::Registrar shim_registrar_##kernel(#kernel, &::shim::Launcher<decltype(&kernel), &kernel>::run);

static inline void __syncthreads() { shim::sync_threads(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { shim::sync_warp(); }
template <typename T> T __shfl_sync(unsigned, T v, int src, int width = 32) {
    unsigned l = shim::lane();
    unsigned base = l & ~unsigned(width - 1);
    return shim::from_bits<T>(shim::warp_exchange(shim::to_bits(v), base + (unsigned(src) & unsigned(width - 1))));
}
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
    unsigned l = shim::lane();
    unsigned in_seg = l & unsigned(width - 1);
    unsigned src = in_seg + d < unsigned(width) ? l + d : l;
    return shim::from_bits<T>(shim::warp_exchange(shim::to_bits(v), src));
}
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
    unsigned l = shim::lane();
    unsigned in_seg = l & unsigned(width - 1);
    unsigned src = in_seg >= d ? l - d : l;
    return shim::from_bits<T>(shim::warp_exchange(shim::to_bits(v), src));
}
template <typename T> T __shfl_xor_sync(unsigned, T v, int m, int width = 32) {
    unsigned l = shim::lane();
    unsigned src = l ^ unsigned(m);
    if ((src & ~unsigned(width - 1)) != (l & ~unsigned(width - 1))) src = l;
    return shim::from_bits<T>(shim::warp_exchange(shim::to_bits(v), src));
}
static inline unsigned __ballot_sync(unsigned, int p) { return shim::warp_ballot(p != 0); }
static inline int __any_sync(unsigned, int p) { return shim::warp_ballot(p != 0) != 0; }
static inline int __all_sync(unsigned, int p) { return shim::warp_ballot(p == 0) == 0; }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
static inline int __ffs(int v) { return __builtin_ffs(v); }
static inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(unsigned(v)); }
template <typename T> static inline T __ldg(const T* p) { return *p; }
static inline float __int_as_float(int v) { return shim::from_bits<float>(uint32_t(v)); }
static inline int __float_as_int(float v) { return int(uint32_t(shim::to_bits(v))); }
static inline float __uint_as_float(unsigned v) { return shim::from_bits<float>(v); }
static inline unsigned __float_as_uint(float v) { return unsigned(shim::to_bits(v)); }
static inline double __longlong_as_double(long long v) { return shim::from_bits<double>(uint64_t(v)); }
static inline long long __double_as_longlong(double v) { return (long long)shim::to_bits(v); }

template <typename T> static inline T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <typename T> static inline T atomicSub(T* p, T v) { return std::atomic_ref<T>(*p).fetch_sub(v); }
template <typename T> static inline T atomicExch(T* p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
template <typename T> static inline T atomicCAS(T* p, T expected, T desired) {
    std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
    return expected;
}
template <typename T> static inline T atomicMin(T* p, T v) {
    std::atomic_ref<T> a(*p);
    T old = a.load();
    while (v < old && !a.compare_exchange_weak(old, v)) {}
    return old;
}
template <typename T> static inline T atomicMax(T* p, T v) {
    std::atomic_ref<T> a(*p);
    T old = a.load();
    while (v > old && !a.compare_exchange_weak(old, v)) {}
    return old;
}
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// Device math with host equivalents (the fast intrinsics at full precision; glibc declares
// __expf and __logf itself).
using std::min;
using std::max;
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline int __float2int_rn(float x) { return int(std::nearbyint(x)); }
static inline int __float2int_rd(float x) { return int(std::floor(x)); }
static inline float __int2float_rn(int x) { return float(x); }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline unsigned __sad(int a, int b, unsigned c) { return unsigned(a > b ? a - b : b - a) + c; }
// sqrtf, expf, logf, fabsf, floorf, fminf, fmaxf, fmaf ... are the C library's (<math.h>).
#include <math.h>

// Semi-global matching (the core's stereo module), laid out like libSGM: census codes,
// a u8 cost volume of one piece of the tiling plan, one launch of every path direction
// adding its path costs into a u16 summed volume (a warp per path, disparities across lanes,
// warp-shuffle minima), winner-takes-all with the uniqueness test and the subpixel
// parabola, the right map by the diagonal search, the left-right check, the 3x3 median
// stitched into the whole map, and hole filling. Integer results equal the CPU's exactly:
// the path recursion is the exact integer one (the core's parameter check keeps every sum
// within a u16), and the float steps (parabola, rounding) are IEEE-rounded the same way.
//
// Layouts: a piece of `ew x eh` pixels; costs and sums at `[(y * ew + x) * dp + d]`, `dp`
// = 32 K disparity slots (K per lane), the `nd` real ones first; maps `f32`, row-major.
#include "common.cuh"

#define STEREO_INVALID_KEY 0xffffffffu
// "Infinite" path cost of a padding lane: above any real one (<= 65535), and room to add
// P1 / P2 without wrapping.
#define STEREO_INF_COST 0x3fffffffu

__device__ __forceinline__ bool finite_f(float v) { return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u; }

// ---------------------------------------------------------------------------------------
// Input: the Rec. 601 luma of an RGBA image (Rgba8::luma: 16-bit fixed point, rounded).
extern "C" __global__ void stereo_luma_rgba8(const u8* rgba, u8* luma, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u8* p = rgba + (i64)i * 4;
    u32 y = 19595u * p[0] + 38470u * p[1] + 7471u * p[2];
    luma[i] = (u8)((y + 32768u) >> 16);
}
TESSERA_EXPORT(stereo_luma_rgba8)

// ---------------------------------------------------------------------------------------
// Census transform: one thread per pixel of a 32 x 8 block, the block's pixels and their
// window margins (at most 4 x 3: 9 x 7 windows) in a shared tile with the border
// replicated. Bits in row-major window order, the first window pixel in the most
// significant used bit, the centre left out: bit = I(q) < I(p).
#define CENSUS_BX 32
#define CENSUS_BY 8
#define CENSUS_TW (CENSUS_BX + 8)
#define CENSUS_TH (CENSUS_BY + 6)
extern "C" __global__ void stereo_census(const u8* img, u64* codes, int w, int h, int win_w, int win_h) {
    __shared__ u8 tile[CENSUS_TH][CENSUS_TW];
    int rx = win_w / 2, ry = win_h / 2;
    int bx = blockIdx.x * CENSUS_BX, by = blockIdx.y * CENSUS_BY;
    int tid = threadIdx.y * CENSUS_BX + threadIdx.x;
    for (int i = tid; i < CENSUS_TW * CENSUS_TH; i += CENSUS_BX * CENSUS_BY) {
        int ty = i / CENSUS_TW, tx = i % CENSUS_TW;
        int sx = min(max(bx + tx - 4, 0), w - 1);
        int sy = min(max(by + ty - 3, 0), h - 1);
        tile[ty][tx] = img[(i64)sy * w + sx];
    }
    __syncthreads();
    int x = bx + threadIdx.x, y = by + threadIdx.y;
    if (x >= w || y >= h) return;
    int cx = threadIdx.x + 4, cy = threadIdx.y + 3;
    u8 c = tile[cy][cx];
    u64 code = 0;
    for (int j = -ry; j <= ry; ++j) {
        for (int i = -rx; i <= rx; ++i) {
            if (i == 0 && j == 0) continue;
            code = (code << 1) | (u64)(tile[cy + j][cx + i] < c);
        }
    }
    codes[(i64)y * w + x] = code;
}
TESSERA_EXPORT(stereo_census)

// ---------------------------------------------------------------------------------------
// Cost volume of the piece at (x0, y0) of the image: one thread per four disparity slots of
// a pixel (one u32 store; consecutive threads, consecutive slots). The match x - d is
// clamped to the image's column 0 (not the piece's). Padding slots get 0 (never read).
struct CensusCostOp {
    const u64* l;
    const u64* r;
    __device__ u8 operator()(i64 row, int x, int xr) const { return (u8)__popcll(l[row + x] ^ r[row + xr]); }
};
struct AdGrayOp {
    const u8* l;
    const u8* r;
    __device__ u8 operator()(i64 row, int x, int xr) const {
        int a = l[row + x], b = r[row + xr];
        return (u8)(a > b ? a - b : b - a);
    }
};
struct AdRgbaOp {
    const u8* l;
    const u8* r;
    __device__ u8 operator()(i64 row, int x, int xr) const {
        const u8* a = l + (row + x) * 4;
        const u8* b = r + (row + xr) * 4;
        u32 s = 0;
        for (int c = 0; c < 3; ++c) s += (u32)(a[c] > b[c] ? a[c] - b[c] : b[c] - a[c]);
        return (u8)((s + 1) / 3);
    }
};
struct MiOp {
    const u8* l;
    const u8* r;
    const u8* table;  // 256 x 256, left intensity major
    __device__ u8 operator()(i64 row, int x, int xr) const { return __ldg(&table[(u32)l[row + x] << 8 | r[row + xr]]); }
};

template <typename Op>
__device__ __forceinline__ void cost_volume(Op op, u8* cost, int w, int x0, int y0, int ew, int eh, int nd, int dp) {
    int quads = dp / 4;
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (i64)ew * eh * quads) return;
    int q = (int)(i % quads);
    int p = (int)(i / quads);
    int x = x0 + p % ew, y = y0 + p / ew;
    i64 row = (i64)y * w;
    u32 word = 0;
    for (int k = 0; k < 4; ++k) {
        int d = q * 4 + k;
        if (d < nd) word |= (u32)op(row, x, max(x - d, 0)) << (8 * k);
    }
    reinterpret_cast<u32*>(cost)[i] = word;
}

extern "C" __global__ void stereo_cost_census(const u64* cl, const u64* cr, u8* cost, int w, int x0, int y0, int ew, int eh, int nd, int dp) {
    cost_volume(CensusCostOp{cl, cr}, cost, w, x0, y0, ew, eh, nd, dp);
}
TESSERA_EXPORT(stereo_cost_census)

extern "C" __global__ void stereo_cost_ad_u8(const u8* l, const u8* r, u8* cost, int w, int x0, int y0, int ew, int eh, int nd, int dp) {
    cost_volume(AdGrayOp{l, r}, cost, w, x0, y0, ew, eh, nd, dp);
}
TESSERA_EXPORT(stereo_cost_ad_u8)

extern "C" __global__ void stereo_cost_ad_rgba8(const u8* l, const u8* r, u8* cost, int w, int x0, int y0, int ew, int eh, int nd, int dp) {
    cost_volume(AdRgbaOp{l, r}, cost, w, x0, y0, ew, eh, nd, dp);
}
TESSERA_EXPORT(stereo_cost_ad_rgba8)

extern "C" __global__ void stereo_cost_mi(const u8* l, const u8* r, const u8* table, u8* cost, int w, int x0, int y0, int ew, int eh, int nd, int dp) {
    cost_volume(MiOp{l, r, table}, cost, w, x0, y0, ew, eh, nd, dp);
}
TESSERA_EXPORT(stereo_cost_mi)

// ---------------------------------------------------------------------------------------
// Path aggregation along one direction r = (dx, dy) (eq. 13):
//   L(p, d) = C(p, d) + min(L(p-r, d), L(p-r, d-+1) + P1, min_i L(p-r, i) + P2) - min_k L(p-r, k)
// with L = C where p - r is outside the piece. One warp per path, lane l holding the K
// disparities l K .. l K + K - 1 in registers: d -+ 1 across lanes by one shuffle each way,
// the minimum over all disparities by a butterfly of shuffles. A launch walks `ndirs`
// directions, their paths numbered one after another: direction i is (dirs[3 i],
// dirs[3 i + 1]) and owns the warps dirs[3 i + 2] .. dirs[3 i + 5] - 1 (a last entry (0, 0,
// total) ends the table). It adds each path's costs into the summed volume S in one of three ways
// (`mode`):
//   STEREO_SUMS_STORE   S = L (the first of directions launched one after another),
//   STEREO_SUMS_ADD     S += L by a load and a store (the later ones),
//   STEREO_SUMS_ATOMIC  S += L by atomic adds of packed u16 fields into a zeroed S, so that
//                       all directions run in one launch (no dependent load of S per step).
// Every pixel lies on exactly one path of a direction, so the first two never race. The
// atomic adds are exact and their order does not matter: integer sums, and the core's
// parameter check keeps every total within a u16, so no field carries into the next
// (padding disparities add 0 there). A step's walk is latency-bound (the cost load, then the
// shuffles), so the next pixel's costs are loaded before the current step's arithmetic.

#define STEREO_SUMS_STORE 0
#define STEREO_SUMS_ADD 1
#define STEREO_SUMS_ATOMIC 2

template <int K> __device__ __forceinline__ void load_costs(const u8* p, u32 (&c)[K]) {
    if (K == 1) {
        c[0] = p[0];
    } else if (K == 2) {
        u32 v = *reinterpret_cast<const u16*>(p);
        for (int k = 0; k < K; ++k) c[k] = (v >> (8 * k)) & 0xff;
    } else if (K == 4) {
        u32 v = *reinterpret_cast<const u32*>(p);
        for (int k = 0; k < K; ++k) c[k] = (v >> (8 * k)) & 0xff;
    } else {
        u64 v = *reinterpret_cast<const u64*>(p);
        for (int k = 0; k < K; ++k) c[k] = (u32)(v >> (8 * k)) & 0xff;
    }
}

// K u16 sums at p (aligned to 2 K bytes) as u32 values, and back.
template <int K> __device__ __forceinline__ void load_sums(const u16* p, u32 (&s)[K]) {
    if (K == 1) {
        s[0] = p[0];
    } else if (K == 2) {
        u32 v = *reinterpret_cast<const u32*>(p);
        s[0] = v & 0xffff;
        s[1] = v >> 16;
    } else {
        const u64* q = reinterpret_cast<const u64*>(p);
        for (int j = 0; j < K / 4; ++j) {
            u64 v = q[j];
            for (int k = 0; k < 4; ++k) s[4 * j + k] = (u32)(v >> (16 * k)) & 0xffff;
        }
    }
}
template <int K> __device__ __forceinline__ void store_sums(u16* p, const u32 (&s)[K]) {
    if (K == 1) {
        p[0] = (u16)s[0];
    } else if (K == 2) {
        *reinterpret_cast<u32*>(p) = (s[0] & 0xffff) | (s[1] << 16);
    } else {
        u64* q = reinterpret_cast<u64*>(p);
        for (int j = 0; j < K / 4; ++j) {
            u64 v = 0;
            for (int k = 0; k < 4; ++k) v |= (u64)(s[4 * j + k] & 0xffff) << (16 * k);
            q[j] = v;
        }
    }
}

__device__ __forceinline__ u32 warp_min(u32 v) {
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The start pixel of path `i` of direction (dx, dy) in an ew x eh piece: every pixel whose
// predecessor p - r lies outside; first the rows a vertical step leaves, then the columns a
// horizontal step leaves (in the remaining rows).
__device__ __forceinline__ void path_start(int i, int dx, int dy, int ew, int eh, int& x, int& y) {
    int ady = min(dy < 0 ? -dy : dy, eh), adx = min(dx < 0 ? -dx : dx, ew);
    int from_rows = ady * ew;
    if (i < from_rows) {
        int r = i / ew;
        x = i % ew;
        y = dy > 0 ? r : eh - 1 - r;
    } else {
        int j = i - from_rows;
        int c = j % adx, r = j / adx;
        x = dx > 0 ? c : ew - 1 - c;
        y = dy > 0 ? ady + r : (dy < 0 ? eh - 1 - ady - r : r);
    }
}

// Atomic adds of the K u16 fields of lane's sums at p (the lane's slots of one pixel).
template <int K> __device__ __forceinline__ void add_sums_atomic(u16* p, const u32 (&s)[K], int lane) {
    if (K == 1) {
        // Two lanes share a 32-bit word: the even lane adds both fields.
        u32 odd = __shfl_down_sync(0xffffffffu, s[0], 1);
        if ((lane & 1) == 0) atomicAdd(reinterpret_cast<u32*>(p), s[0] | odd << 16);
    } else if (K == 2) {
        atomicAdd(reinterpret_cast<u32*>(p), s[0] | s[1] << 16);
    } else {
        u64* q = reinterpret_cast<u64*>(p);
        for (int j = 0; j < K / 4; ++j) {
            u64 v = 0;
            for (int k = 0; k < 4; ++k) v |= (u64)s[4 * j + k] << (16 * k);
            atomicAdd(q + j, v);
        }
    }
}

template <int K>
__device__ __forceinline__ void aggregate_path(const u8* cost, u16* sum, const u8* guide, int gstride, int ew, int eh, const i32* dirs,
                                               int ndirs, int nd, int p1, int p2, int adaptive, int mode) {
    const int dp = 32 * K;
    int lane = threadIdx.x & 31;
    int path = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
    if (path >= dirs[3 * ndirs + 2]) return;  // the whole warp
    int i = 0;
    while (path >= dirs[3 * i + 5]) ++i;
    int dx = dirs[3 * i], dy = dirs[3 * i + 1];
    path -= dirs[3 * i + 2];
    int x, y;
    path_start(path, dx, dy, ew, eh, x, y);
    u32 prev[K];
    u32 m = 0;
    int g_prev = 0;
    bool first = true;
    u32 c[K];
    load_costs<K>(cost + ((i64)y * ew + x) * dp + lane * K, c);
    for (;;) {
        i64 base = ((i64)y * ew + x) * dp + lane * K;
        int nx = x + dx, ny = y + dy;
        bool more = nx >= 0 && nx < ew && ny >= 0 && ny < eh;
        u32 next[K];
        if (more) load_costs<K>(cost + ((i64)ny * ew + nx) * dp + lane * K, next);
        int g = adaptive ? guide[(i64)y * gstride + x] : 0;
        u32 l[K];
        if (first) {
            for (int k = 0; k < K; ++k) l[k] = lane * K + k < nd ? c[k] : STEREO_INF_COST;
        } else {
            u32 pen2 = (u32)p2;
            if (adaptive) {
                u32 gd = (u32)(g > g_prev ? g - g_prev : g_prev - g);
                if (gd > 0) pen2 = max((u32)p2 / gd, (u32)p1);
            }
            u32 jump = m + pen2;
            u32 below = __shfl_up_sync(0xffffffffu, prev[K - 1], 1);
            u32 above = __shfl_down_sync(0xffffffffu, prev[0], 1);
            if (lane == 0) below = STEREO_INF_COST;
            if (lane == 31) above = STEREO_INF_COST;
            for (int k = 0; k < K; ++k) {
                u32 lo = k > 0 ? prev[k - 1] : below;
                u32 hi = k + 1 < K ? prev[k + 1] : above;
                u32 best = min(min(prev[k], min(lo, hi) + (u32)p1), jump);
                l[k] = lane * K + k < nd ? c[k] + best - m : STEREO_INF_COST;
            }
        }
        u32 local = l[0];
        for (int k = 1; k < K; ++k) local = min(local, l[k]);
        m = warp_min(local);
        if (mode == STEREO_SUMS_ATOMIC) {
            u32 s[K];
            for (int k = 0; k < K; ++k) s[k] = lane * K + k < nd ? l[k] : 0;
            add_sums_atomic<K>(sum + base, s, lane);
        } else {
            u32 s[K];
            if (mode == STEREO_SUMS_ADD) {
                load_sums<K>(sum + base, s);
                for (int k = 0; k < K; ++k) s[k] += l[k];
            } else {
                for (int k = 0; k < K; ++k) s[k] = l[k];
            }
            store_sums<K>(sum + base, s);
        }
        for (int k = 0; k < K; ++k) prev[k] = l[k];
        if (!more) break;
        for (int k = 0; k < K; ++k) c[k] = next[k];
        first = false;
        g_prev = g;
        x = nx;
        y = ny;
    }
}

// One instantiation per lane width K (disparities 32 K).
extern "C" __global__ void stereo_aggregate_k1(const u8* cost, u16* sum, const u8* guide, int gstride, int ew, int eh, const i32* dirs, int ndirs, int nd, int p1, int p2, int adaptive, int mode) {
    aggregate_path<1>(cost, sum, guide, gstride, ew, eh, dirs, ndirs, nd, p1, p2, adaptive, mode);
}
TESSERA_EXPORT(stereo_aggregate_k1)
extern "C" __global__ void stereo_aggregate_k2(const u8* cost, u16* sum, const u8* guide, int gstride, int ew, int eh, const i32* dirs, int ndirs, int nd, int p1, int p2, int adaptive, int mode) {
    aggregate_path<2>(cost, sum, guide, gstride, ew, eh, dirs, ndirs, nd, p1, p2, adaptive, mode);
}
TESSERA_EXPORT(stereo_aggregate_k2)
extern "C" __global__ void stereo_aggregate_k4(const u8* cost, u16* sum, const u8* guide, int gstride, int ew, int eh, const i32* dirs, int ndirs, int nd, int p1, int p2, int adaptive, int mode) {
    aggregate_path<4>(cost, sum, guide, gstride, ew, eh, dirs, ndirs, nd, p1, p2, adaptive, mode);
}
TESSERA_EXPORT(stereo_aggregate_k4)
extern "C" __global__ void stereo_aggregate_k8(const u8* cost, u16* sum, const u8* guide, int gstride, int ew, int eh, const i32* dirs, int ndirs, int nd, int p1, int p2, int adaptive, int mode) {
    aggregate_path<8>(cost, sum, guide, gstride, ew, eh, dirs, ndirs, nd, p1, p2, adaptive, mode);
}
TESSERA_EXPORT(stereo_aggregate_k8)

// ---------------------------------------------------------------------------------------
// Winner-takes-all: a warp per pixel (grid-stride), its sums across lanes as in the
// aggregation. Left: the first minimum (key S << 16 | d), the uniqueness test against the
// minimum more than one step away, the parabola through the neighbours. Right (when
// `right` is not null): argmin_d S(x + d, d) over x + d < ew, first on ties (eq. 16).
// Pixels of the piece's core the uniqueness test rejected are counted in counters[0].
template <int K>
__device__ __forceinline__ void wta(const u16* sum, float* left, float* right, int ew, int eh, int nd, int uniqueness, int subpixel,
                                    int cx, int cy, int cw, int ch, u64* counters) {
    const int dp = 32 * K;
    int lane = threadIdx.x & 31;
    int warps = (int)(gridDim.x * (blockDim.x / 32));
    int n = ew * eh;
    u64 rejected = 0;
    for (int p = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32); p < n; p += warps) {
        int x = p % ew, y = p / ew;
        const u16* px = sum + (i64)p * dp;
        u32 s[K];
        load_sums<K>(px + lane * K, s);
        u32 key = STEREO_INVALID_KEY;
        for (int k = 0; k < K; ++k) {
            int d = lane * K + k;
            if (d < nd) key = min(key, s[k] << 16 | (u32)d);
        }
        key = warp_min(key);
        int best = (int)(key & 0xffff);
        u32 m = key >> 16;
        bool unique = true;
        if (uniqueness > 0) {
            // No candidate counts as u16::MAX, as the CPU's padding lanes do.
            u32 away = 0xffffu;
            for (int k = 0; k < K; ++k) {
                int d = lane * K + k;
                if (d < nd && (d < best - 1 || d > best + 1)) away = min(away, s[k]);
            }
            away = warp_min(away);
            unique = !((u64)away * (u64)(100 - uniqueness) < (u64)m * 100);
        }
        if (lane == 0) {
            float v = TESSERA_INF_F;
            if (unique) {
                v = (float)best;
                if (subpixel && best > 0 && best + 1 < nd) {
                    int a = px[best - 1], c = px[best + 1];
                    int den = a + c - 2 * (int)m;
                    if (den > 0) v += (float)(a - c) / (float)(2 * den);
                }
            } else if (x >= cx && x < cx + cw && y >= cy && y < cy + ch) {
                rejected++;
            }
            left[p] = v;
        }
        if (right) {
            u32 rkey = STEREO_INVALID_KEY;
            for (int k = 0; k < K; ++k) {
                int d = lane * K + k;
                if (d < nd && x + d < ew) rkey = min(rkey, (u32)sum[((i64)p + d) * dp + d] << 16 | (u32)d);
            }
            rkey = warp_min(rkey);
            if (lane == 0) right[p] = (float)(rkey & 0xffff);
        }
    }
    if (lane == 0 && rejected) atomicAdd(&counters[0], (unsigned long long)rejected);
}

extern "C" __global__ void stereo_wta_k1(const u16* sum, float* left, float* right, int ew, int eh, int nd, int uniqueness, int subpixel, int cx, int cy, int cw, int ch, u64* counters) {
    wta<1>(sum, left, right, ew, eh, nd, uniqueness, subpixel, cx, cy, cw, ch, counters);
}
TESSERA_EXPORT(stereo_wta_k1)
extern "C" __global__ void stereo_wta_k2(const u16* sum, float* left, float* right, int ew, int eh, int nd, int uniqueness, int subpixel, int cx, int cy, int cw, int ch, u64* counters) {
    wta<2>(sum, left, right, ew, eh, nd, uniqueness, subpixel, cx, cy, cw, ch, counters);
}
TESSERA_EXPORT(stereo_wta_k2)
extern "C" __global__ void stereo_wta_k4(const u16* sum, float* left, float* right, int ew, int eh, int nd, int uniqueness, int subpixel, int cx, int cy, int cw, int ch, u64* counters) {
    wta<4>(sum, left, right, ew, eh, nd, uniqueness, subpixel, cx, cy, cw, ch, counters);
}
TESSERA_EXPORT(stereo_wta_k4)
extern "C" __global__ void stereo_wta_k8(const u16* sum, float* left, float* right, int ew, int eh, int nd, int uniqueness, int subpixel, int cx, int cy, int cw, int ch, u64* counters) {
    wta<8>(sum, left, right, ew, eh, nd, uniqueness, subpixel, cx, cy, cw, ch, counters);
}
TESSERA_EXPORT(stereo_wta_k8)

// ---------------------------------------------------------------------------------------
// Left-right check (eq. 16), a thread per pixel of the piece, in place on `left`: a finite
// D_L stays when x - round(D_L) is inside and |round(D_L) - D_R(x - round(D_L))| <= max_diff,
// round(d) = floor(d + 0.5) (in double, exact). Failures in the core are counted in
// counters[1]; when `occ` is not null the core's classes (1 occluded: D_R > round(D_L),
// 2 outside, 0 otherwise) are written at their place in the whole image (`occ` points at
// the core's first pixel, `occ_stride` per row).
extern "C" __global__ void stereo_lr_check(float* left, const float* right, int ew, int eh, int max_diff, int cx, int cy, int cw, int ch,
                                           u8* occ, int occ_stride, u64* counters) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    bool failed = false;
    if (p < ew * eh) {
        int x = p % ew, y = p / ew;
        float d = left[p];
        u8 cls = 0;
        if (finite_f(d)) {
            i64 di = (i64)floor((double)d + 0.5);
            i64 xr = (i64)x - di;
            bool inside = xr >= 0 && xr < ew;
            float dr = right[(i64)y * ew + (xr < 0 ? 0 : (xr >= ew ? ew - 1 : xr))];
            bool ok = inside && finite_f(dr) && fabs((double)di - (double)dr) <= (double)max_diff;
            if (!ok) {
                left[p] = TESSERA_INF_F;
                cls = !inside ? 2 : (finite_f(dr) && (double)dr > (double)di ? 1 : 0);
            }
            failed = !ok;
        }
        bool in_core = x >= cx && x < cx + cw && y >= cy && y < cy + ch;
        failed = failed && in_core;
        if (occ && in_core) occ[(i64)(y - cy) * occ_stride + (x - cx)] = cls;
    }
    unsigned votes = __ballot_sync(0xffffffffu, failed);
    if ((threadIdx.x & 31) == 0 && votes) atomicAdd(&counters[1], (unsigned long long)__popc(votes));
}
TESSERA_EXPORT(stereo_lr_check)

// ---------------------------------------------------------------------------------------
// 3x3 median of the valid values (the lower middle one of an even count; an invalid
// centre stays invalid; outside the piece counts as invalid), for the core's pixels,
// written at their place in the whole map (`out` points at the core's first pixel). A
// thread per core pixel of a 32 x 8 block, the block's window in a shared tile.
// `median` 0: the core is copied unchanged (the stitch alone).
extern "C" __global__ void stereo_median_stitch(const float* map, int ew, int eh, int cx, int cy, int cw, int ch, float* out, int out_stride,
                                                int median) {
    __shared__ float tile[CENSUS_BY + 2][CENSUS_BX + 2];
    int bx = blockIdx.x * CENSUS_BX, by = blockIdx.y * CENSUS_BY;
    int tid = threadIdx.y * CENSUS_BX + threadIdx.x;
    if (median) {
        for (int i = tid; i < (CENSUS_BX + 2) * (CENSUS_BY + 2); i += CENSUS_BX * CENSUS_BY) {
            int ty = i / (CENSUS_BX + 2), tx = i % (CENSUS_BX + 2);
            int x = cx + bx + tx - 1, y = cy + by + ty - 1;
            tile[ty][tx] = x >= 0 && x < ew && y >= 0 && y < eh ? map[(i64)y * ew + x] : TESSERA_INF_F;
        }
        __syncthreads();
    }
    int i = bx + threadIdx.x, j = by + threadIdx.y;
    if (i >= cw || j >= ch) return;
    float c = map[(i64)(cy + j) * ew + cx + i];
    if (median && finite_f(c)) {
        float v[9];
        int n = 0;
        for (int b = 0; b < 3; ++b)
            for (int a = 0; a < 3; ++a) {
                float t = tile[threadIdx.y + b][threadIdx.x + a];
                // Insertion into the sorted valid values.
                if (finite_f(t)) {
                    int k = n++;
                    while (k > 0 && v[k - 1] > t) {
                        v[k] = v[k - 1];
                        --k;
                    }
                    v[k] = t;
                }
            }
        c = v[(n - 1) / 2];
    }
    out[(i64)j * out_stride + i] = c;
}
TESSERA_EXPORT(stereo_median_stitch)

// ---------------------------------------------------------------------------------------
// Hole filling, step 1 (the left border strip), a warp per row, out of place (`src` ->
// `dst`). Scanning right to left with `cur` the nearest valid value to the right, the
// first pixel with x < cur latches: it and every pixel left of it take cur. The row is
// read in chunks of 32 pixels (lane 0 the rightmost): the nearest valid value right of each
// lane is a ballot and a shuffle, the latch the first lane of a ballot. Holes filled are
// counted in counters[2].
extern "C" __global__ void stereo_fill_border(const float* src, float* dst, int w, int h, u64* counters) {
    int lane = threadIdx.x & 31;
    int y = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
    if (y >= h) return;
    const float* row = src + (i64)y * w;
    float* out = dst + (i64)y * w;
    float carry = TESSERA_INF_F;  // the nearest valid value right of the chunk
    bool latched = false;
    float latch = 0.0f;
    u64 filled = 0;
    for (int hi = w - 1; hi >= 0; hi -= 32) {
        int x = hi - lane;
        float v = x >= 0 ? row[x] : TESSERA_INF_F;
        bool fin = finite_f(v);
        if (!latched) {
            unsigned mask = __ballot_sync(0xffffffffu, fin);
            unsigned below = mask & ((1u << lane) - 1u);
            int src_lane = below ? 31 - __clz((int)below) : lane;
            float right = __shfl_sync(0xffffffffu, v, src_lane);
            float nf = below ? right : carry;
            bool cond = x >= 0 && finite_f(nf) && (float)x < nf;
            unsigned hits = __ballot_sync(0xffffffffu, cond);
            if (hits) {
                int first = __ffs((int)hits) - 1;
                latch = __shfl_sync(0xffffffffu, nf, first);
                latched = true;
                if (lane >= first) {
                    filled += !fin && x >= 0;
                    v = latch;
                }
            } else if (mask) {
                carry = __shfl_sync(0xffffffffu, v, 31 - __clz((int)mask));
            }
        } else {
            filled += !fin && x >= 0;
            v = latch;
        }
        if (x >= 0) out[x] = v;
    }
    if (filled) atomicAdd(&counters[2], (unsigned long long)filled);
}
TESSERA_EXPORT(stereo_fill_border)

// Hole filling, step 2: a thread per pixel; an invalid pixel of `src` looks along the 8
// scanlines for the nearest valid values: class OUTSIDE with a value to the right takes
// that one, OCCLUDED the second lowest (or the lowest alone), others the lower median.
// `occ` may be null (every hole a mismatch). Writes every pixel of `dst`; fills counted
// in counters[2], valid pixels of the result in counters[3].
extern "C" __global__ void stereo_fill_lines(const float* src, float* dst, const u8* occ, int w, int h, u64* counters) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    bool filled = false, valid = false;
    if (p < w * h) {
        int x = p % w, y = p / w;
        float c = src[p];
        if (!finite_f(c)) {
            float v[8];
            int found = 0;
            float right = TESSERA_INF_F;
            const int dxs[8] = {1, -1, 0, 0, 1, -1, 1, -1};
            const int dys[8] = {0, 0, 1, -1, 1, 1, -1, -1};
            for (int k = 0; k < 8; ++k) {
                int dx = dxs[k], dy = dys[k];
                int sx = x + dx, sy = y + dy;
                while (sx >= 0 && sx < w && sy >= 0 && sy < h) {
                    float t = src[(i64)sy * w + sx];
                    if (finite_f(t)) {
                        int j = found++;
                        while (j > 0 && v[j - 1] > t) {
                            v[j] = v[j - 1];
                            --j;
                        }
                        v[j] = t;
                        if (k == 0) right = t;
                        break;
                    }
                    sx += dx;
                    sy += dy;
                }
            }
            if (found > 0) {
                u8 cls = occ ? occ[p] : 0;
                if (cls == 2 && finite_f(right)) c = right;
                else if (cls == 0) c = v[(found - 1) / 2];
                else c = v[min(1, found - 1)];
                filled = true;
            }
        }
        valid = finite_f(c);
        dst[p] = c;
    }
    unsigned f = __ballot_sync(0xffffffffu, filled), v = __ballot_sync(0xffffffffu, valid);
    if ((threadIdx.x & 31) == 0) {
        if (f) atomicAdd(&counters[2], (unsigned long long)__popc(f));
        if (v) atomicAdd(&counters[3], (unsigned long long)__popc(v));
    }
}
TESSERA_EXPORT(stereo_fill_lines)

// Valid pixels of a map (without filling), into counters[3].
extern "C" __global__ void stereo_count_valid(const float* map, int n, u64* counters) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = __ballot_sync(0xffffffffu, p < n && finite_f(map[p < n ? p : 0]));
    if ((threadIdx.x & 31) == 0 && v) atomicAdd(&counters[3], (unsigned long long)__popc(v));
}
TESSERA_EXPORT(stereo_count_valid)

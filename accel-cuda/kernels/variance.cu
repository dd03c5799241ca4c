// Local variance (variance/ in the core). The `recursive` method: exact O(1) running sums
// of x and x^2 over the tent (a box of width R + 1 convolved with itself) or the box, then
// one final step per pixel as the core forms it.
//
//   var_cols_*: one thread per column: the vertical kernel sums of x and x^2 (and, for
//               f32, of the indicator of non-finite values) at every row, by running
//               sums (tent: T(i+1) = T(i) + R(i) - L(i) with the box sums L over
//               [i - R, i] and R over [i + 1, i + R + 1]), outside rows by the border
//               applied to the original image. A warp reads one row's neighbouring
//               pixels, and writes the sums transposed (column x is line x) through a
//               shared staging tile (`WarpTile`), so both are coalesced.
//   var_rows_*: one thread per row: the same running sums along the row over the column
//               sums (outside columns mapped by the border, or the constant's column sum;
//               neighbouring rows are neighbouring values of a transposed line, so the
//               reads are coalesced; the outputs go through a staging tile too),
//               and the variance: for integers (W S2 - S1^2) / W^2 exactly (u128 numerator,
//               one f64 division, one f32 rounding), for f32 the core's f64 formula on
//               data shifted by the image's mean, NaN where the kernel holds a
//               non-finite input.
#include "common.cuh"

// x, x^2 and the non-finite indicator of one sample, as the sums accumulate them.
template <typename S> struct Moment {
    S x, x2;
    u32 bad;
};

__device__ __forceinline__ Moment<u64> moment_of(u8 v, double) { return {(u64)v, (u64)v * v, 0}; }
__device__ __forceinline__ Moment<u64> moment_of(u16 v, double) { return {(u64)v, (u64)v * v, 0}; }
__device__ __forceinline__ Moment<double> moment_of(float v, double shift) {
    bool finite = v - v == 0.0f;
    double d = finite ? (double)v - shift : 0.0;
    return {d, d * d, finite ? 0u : 1u};
}

template <typename S> __device__ __forceinline__ void add(Moment<S>& a, const Moment<S>& b) { a.x += b.x; a.x2 += b.x2; a.bad += b.bad; }
template <typename S> __device__ __forceinline__ void sub(Moment<S>& a, const Moment<S>& b) { a.x -= b.x; a.x2 -= b.x2; a.bad -= b.bad; }

// The running kernel sums of a line at position i: `t` the kernel's sums of the moments
// (tent of radius r, a box of width r + 1 convolved with itself, when `tent`, else a box of
// radius r) and, for the tent, the box sums `left` over [i - r, i] and `right` over
// [i + 1, i + r + 1]; `bad` the non-finite count, a plain box count over the support
// [i - r, i + r] (every weight there is > 0, so "any" is all that matters). `value(k)`
// gives the moment of sample k (any k: the caller applies the border).
template <typename S> struct RunningSums {
    Moment<S> t, left, right;
    u32 bad;

    // The sums at position i0, from the samples i0 - r .. i0 + r (+ 1 for the tent).
    template <typename V> __device__ void start(int i0, int r, bool tent, V value) {
        t = left = right = Moment<S>{0, 0, 0};
        bad = 0;
        int last = tent ? r + 1 : r;
        for (int j = -r; j <= last; ++j) {
            Moment<S> v = value(i0 + j);
            if (j <= r) {
                S w = tent ? (S)(r + 1 - (j < 0 ? -j : j)) : (S)1;
                t.x += w * v.x;
                t.x2 += w * v.x2;
                bad += v.bad;
            }
            // Two calls, not one on a chosen reference: that would put both in local memory.
            if (tent && j <= 0) add(left, v);
            if (tent && j > 0) add(right, v);
        }
        t.bad = bad;
    }

    // From position i to i + 1.
    template <typename V> __device__ void step(int i, int r, bool tent, V value) {
        Moment<S> leaving = value(i - r), entering = value(i + r + 1);
        bad += entering.bad - leaving.bad;
        if (tent) {
            // T(i + 1) = T(i) + R(i) - L(i); then both boxes move by one.
            t.x += right.x - left.x;
            t.x2 += right.x2 - left.x2;
            Moment<S> next = value(i + 1), far = value(i + r + 2);
            add(left, next);
            sub(left, leaving);
            sub(right, next);
            add(right, far);
        } else {
            t.x += entering.x - leaving.x;
            t.x2 += entering.x2 - leaving.x2;
        }
        t.bad = bad;
    }
};

// Running kernel sums along one line, outputs i0 .. i1 - 1 (a segment of the line: see
// `segment_of` in common.cuh): `emit(i, sum)` takes each output.
template <typename S, typename V, typename E>
__device__ void running_kernel(int i0, int i1, int r, bool tent, V value, E emit) {
    RunningSums<S> s;
    s.start(i0, r, tent, value);
    for (int i = i0; i < i1; ++i) {
        emit(i, s.t);
        if (i + 1 == i1) break;
        s.step(i, r, tent, value);
    }
}

// The warps per block of var_cols and of the row passes (their shared staging tiles).
#define VAR_WARPS 2

template <typename T, typename S>
__device__ void var_cols(const T* src, S* c1, S* c2, u32* cbad, int width, int height, int r, int tent, int mode, float outside, double shift, int seg) {
    __shared__ S t1[VAR_WARPS][32][33];
    __shared__ S t2[VAR_WARPS][32][33];
    __shared__ u32 tb[VAR_WARPS][32][33];
    int x, first, owners, y0, y1;
    bool live;
    if (!segment_of(height, seg, &y0, &y1) || !line_lane(width, &x, &first, &owners, &live)) return;
    int wp = threadIdx.x / 32;
    WarpTile<S> k1{t1[wp]}, k2{t2[wp]};
    WarpTile<u32> kb{tb[wp]};
    Moment<S> out_m = moment_of((T)outside, shift);
    auto value = [&](int yy) -> Moment<S> {
        int sy = source_index(yy, height, mode);
        return sy < 0 || !live ? out_m : moment_of(src[(i64)sy * width + x], shift);
    };
    // Transposed: column x's sums are line x of `height` values.
    running_kernel<S>(y0, y1, r, tent != 0, value, [&](int y, const Moment<S>& s) {
        k1.emit(y, y0, y1, s.x, owners, [&](int o, int yy, S v) { c1[(i64)(first + o) * height + yy] = v; });
        k2.emit(y, y0, y1, s.x2, owners, [&](int o, int yy, S v) { c2[(i64)(first + o) * height + yy] = v; });
        kb.emit(y, y0, y1, s.bad, owners, [&](int o, int yy, u32 v) { cbad[(i64)(first + o) * height + yy] = v; });
    });
}

// The column sums' moment at (column sx, row y) of the transposed sums, or `out_col` for a
// column outside (sx < 0).
template <typename S>
__device__ __forceinline__ Moment<S> column_moment(const S* c1, const S* c2, const u32* cbad, int sx, int y, int height, const Moment<S>& out_col) {
    if (sx < 0) return out_col;
    i64 i = (i64)sx * height + y;
    return Moment<S>{c1[i], c2[i], cbad[i]};
}

// The variance from exact integer sums: numerator W S2 - S1^2 in 128 bits (two 64-bit
// halves: NVRTC has no 128-bit type by default), one f64 division, one f32 rounding, as
// the core.
__device__ __forceinline__ float finish(const Moment<u64>& s, u64 total, double inv_w2, double) {
    u64 lo1 = s.x2 * total, hi1 = __umul64hi(s.x2, total);
    u64 lo2 = s.x * s.x, hi2 = __umul64hi(s.x, s.x);
    u64 lo = lo1 - lo2, hi = hi1 - hi2 - (lo1 < lo2 ? 1 : 0);
    double f = (double)hi * 18446744073709551616.0 + (double)lo;
    return (float)__dmul_rn(f, inv_w2);
}

// f32: the core's `S2 / W - (S1 / W)^2` on shifted f64 sums, clamped at 0; NaN where the
// kernel holds a non-finite input.
__device__ __forceinline__ float finish(const Moment<double>& s, u64, double inv_w, double) {
    if (s.bad) return __int_as_float(0x7fc00000);
    double m = __dmul_rn(s.x, inv_w);
    float v = (float)__dadd_rn(__dmul_rn(s.x2, inv_w), -__dmul_rn(m, m));
    return v < 0.0f ? 0.0f : v;
}

// The outputs x0 .. x1 - 1 of the rows first .. first + owners - 1 that a warp of a row
// pass walks (its staging tiles' lines).
struct RowSegment {
    int x0, x1, first, owners;
};

// The row passes' walk (var_rows, moment_rows, mean_var_rows): this thread's row and
// segment, the running kernel sums along it over the transposed column sums (outside
// columns mapped by the border, or a column wholly outside: the column kernel's weight
// times the constant's moments), `pixel(x, sums, segment)` for each output. Lanes past the
// rows walk the warp's first row so that its tiles see every step; whole warps or blocks
// past the image return at once.
template <typename T, typename S, typename P>
__device__ void row_walk(const S* c1, const S* c2, const u32* cbad, int width, int height, int r, int tent, int mode, float outside,
                         double shift, int seg, P pixel) {
    int y, first, owners, x0, x1;
    bool live;
    if (!segment_of(width, seg, &x0, &x1) || !line_lane(height, &y, &first, &owners, &live)) return;
    S col_weight = tent ? (S)(r + 1) * (S)(r + 1) : (S)(2 * r + 1);
    Moment<S> o = moment_of((T)outside, shift);
    Moment<S> out_col = {col_weight * o.x, col_weight * o.x2, 0};
    int yl = live ? y : first;
    auto value = [&](int xx) -> Moment<S> { return column_moment(c1, c2, cbad, source_index(xx, width, mode), yl, height, out_col); };
    RowSegment rows{x0, x1, first, owners};
    running_kernel<S>(x0, x1, r, tent != 0, value, [&](int x, const Moment<S>& s) { pixel(x, s, rows); });
}

template <typename T, typename S>
__device__ void var_rows(const S* c1, const S* c2, const u32* cbad, float* dst, int width, int height, int r, int tent, int mode,
                         float outside, double shift, u64 total, double inv, int seg) {
    __shared__ float tv[VAR_WARPS][32][33];
    WarpTile<float> kv{tv[threadIdx.x / 32]};
    row_walk<T, S>(c1, c2, cbad, width, height, r, tent, mode, outside, shift, seg, [&](int x, const Moment<S>& s, const RowSegment& l) {
        kv.emit(x, l.x0, l.x1, finish(s, total, inv, shift), l.owners, [&](int o, int xx, float v) { dst[(i64)(l.first + o) * width + xx] = v; });
    });
}

extern "C" __global__ void var_cols_u8(const u8* src, u64* c1, u64* c2, u32* cbad, int w, int h, int r, int tent, int mode, float outside, double shift, int seg) {
    var_cols<u8, u64>(src, c1, c2, cbad, w, h, r, tent, mode, outside, shift, seg);
}
TESSERA_EXPORT(var_cols_u8)
extern "C" __global__ void var_cols_u16(const u16* src, u64* c1, u64* c2, u32* cbad, int w, int h, int r, int tent, int mode, float outside, double shift, int seg) {
    var_cols<u16, u64>(src, c1, c2, cbad, w, h, r, tent, mode, outside, shift, seg);
}
TESSERA_EXPORT(var_cols_u16)
extern "C" __global__ void var_cols_f32(const float* src, double* c1, double* c2, u32* cbad, int w, int h, int r, int tent, int mode, float outside, double shift, int seg) {
    var_cols<float, double>(src, c1, c2, cbad, w, h, r, tent, mode, outside, shift, seg);
}
TESSERA_EXPORT(var_cols_f32)
extern "C" __global__ void var_rows_u8(const u64* c1, const u64* c2, const u32* cbad, float* dst, int w, int h, int r, int tent, int mode, float outside, double shift, u64 total, double inv, int seg) {
    var_rows<u8, u64>(c1, c2, cbad, dst, w, h, r, tent, mode, outside, shift, total, inv, seg);
}
TESSERA_EXPORT(var_rows_u8)
extern "C" __global__ void var_rows_u16(const u64* c1, const u64* c2, const u32* cbad, float* dst, int w, int h, int r, int tent, int mode, float outside, double shift, u64 total, double inv, int seg) {
    var_rows<u16, u64>(c1, c2, cbad, dst, w, h, r, tent, mode, outside, shift, total, inv, seg);
}
TESSERA_EXPORT(var_rows_u16)
extern "C" __global__ void var_rows_f32(const double* c1, const double* c2, const u32* cbad, float* dst, int w, int h, int r, int tent, int mode, float outside, double shift, u64 total, double inv, int seg) {
    var_rows<float, double>(c1, c2, cbad, dst, w, h, r, tent, mode, outside, shift, total, inv, seg);
}
TESSERA_EXPORT(var_rows_f32)

// Local tent means and variances for the contrast enhancement (the core's TentMomentRows):
// the same column sums as var_cols, then per pixel mean = S1 / W and var = S2 / W - mean^2
// (clamped at 0) in f64, as the core forms them for several scales at once.
__device__ __forceinline__ void moments_of(const Moment<u64>& s, double inv_w, double, float* m, float* v) {
    double mm = __dmul_rn((double)s.x, inv_w);
    double vv = __dadd_rn(__dmul_rn((double)s.x2, inv_w), -__dmul_rn(mm, mm));
    *m = (float)mm;
    *v = (float)(vv > 0.0 ? vv : 0.0);
}
__device__ __forceinline__ void moments_of(const Moment<double>& s, double inv_w, double shift, float* m, float* v) {
    if (s.bad) {
        *m = *v = __int_as_float(0x7fc00000);
        return;
    }
    double mm = __dmul_rn(s.x, inv_w);
    double vv = __dadd_rn(__dmul_rn(s.x2, inv_w), -__dmul_rn(mm, mm));
    *m = (float)__dadd_rn(shift, mm);
    *v = (float)(vv > 0.0 ? vv : 0.0);
}

template <typename T, typename S>
__device__ void moment_rows(const S* c1, const S* c2, const u32* cbad, float* mean, float* var, int width, int height, int r, int mode,
                            float outside, double shift, double inv_w, int seg) {
    __shared__ float tm[VAR_WARPS][32][33];
    __shared__ float tv[VAR_WARPS][32][33];
    WarpTile<float> km{tm[threadIdx.x / 32]}, kv{tv[threadIdx.x / 32]};
    row_walk<T, S>(c1, c2, cbad, width, height, r, 1, mode, outside, shift, seg, [&](int x, const Moment<S>& s, const RowSegment& l) {
        float m, v;
        moments_of(s, inv_w, shift, &m, &v);
        km.emit(x, l.x0, l.x1, m, l.owners, [&](int o, int xx, float q) { mean[(i64)(l.first + o) * width + xx] = q; });
        kv.emit(x, l.x0, l.x1, v, l.owners, [&](int o, int xx, float q) { var[(i64)(l.first + o) * width + xx] = q; });
    });
}

extern "C" __global__ void moment_rows_u8(const u64* c1, const u64* c2, const u32* cbad, float* mean, float* var, int w, int h, int r, int mode, float outside, double shift, double inv_w, int seg) {
    moment_rows<u8, u64>(c1, c2, cbad, mean, var, w, h, r, mode, outside, shift, inv_w, seg);
}
TESSERA_EXPORT(moment_rows_u8)
extern "C" __global__ void moment_rows_u16(const u64* c1, const u64* c2, const u32* cbad, float* mean, float* var, int w, int h, int r, int mode, float outside, double shift, double inv_w, int seg) {
    moment_rows<u16, u64>(c1, c2, cbad, mean, var, w, h, r, mode, outside, shift, inv_w, seg);
}
TESSERA_EXPORT(moment_rows_u16)
extern "C" __global__ void moment_rows_f32(const double* c1, const double* c2, const u32* cbad, float* mean, float* var, int w, int h, int r, int mode, float outside, double shift, double inv_w, int seg) {
    moment_rows<float, double>(c1, c2, cbad, mean, var, w, h, r, mode, outside, shift, inv_w, seg);
}
TESSERA_EXPORT(moment_rows_f32)

// ---- The variance paper's five f32 methods, on data shifted by the image's mean K and
// padded by the border (the core's `Padded`). This file is compiled without fused
// multiply-adds, so each expression rounds as the core's does: same operations, same
// order, same results.

// The padded image of x - K: one thread per padded pixel, the border's source pixel or the
// (shifted) constant.
template <typename T>
__device__ void pad_shift(const T* src, float* padded, int width, int height, int pad, int mode, float outside, double shift) {
    int pw = width + 2 * pad, ph = height + 2 * pad;
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= pw || y >= ph) return;
    int sx = source_index(x - pad, width, mode), sy = source_index(y - pad, height, mode);
    padded[(i64)y * pw + x] = (sx < 0 || sy < 0) ? outside : (float)((double)src[(i64)sy * width + sx] - shift);
}
extern "C" __global__ void pad_shift_u8(const u8* src, float* padded, int w, int h, int pad, int mode, float outside, double shift) {
    pad_shift<u8>(src, padded, w, h, pad, mode, outside, shift);
}
TESSERA_EXPORT(pad_shift_u8)
extern "C" __global__ void pad_shift_u16(const u16* src, float* padded, int w, int h, int pad, int mode, float outside, double shift) {
    pad_shift<u16>(src, padded, w, h, pad, mode, outside, shift);
}
TESSERA_EXPORT(pad_shift_u16)
extern "C" __global__ void pad_shift_f32(const float* src, float* padded, int w, int h, int pad, int mode, float outside, double shift) {
    pad_shift<float>(src, padded, w, h, pad, mode, outside, shift);
}
TESSERA_EXPORT(pad_shift_f32)

__device__ __forceinline__ float non_negative(float v) { return v < 0.0f ? 0.0f : v; }

// The direct O(N^2) methods: one thread per pixel, the kernel's rows then columns in the
// core's order, weights `wt` (n x n) summing to `total`.
//   method 0 usual (corrected two-pass), 1 koenig (E[x^2] - E[x]^2), 2 welford.
extern "C" __global__ void var_direct(const float* padded, float* dst, int width, int height, int r, const float* wt, float total, int method) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= width || y >= height) return;
    int n = 2 * r + 1, pw = width + 2 * r;
    const float* base = padded + (i64)y * pw + x;
    float out;
    if (method == 0) {
        float m = 0.0f;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) m += wt[j * n + i] * base[(i64)j * pw + i];
        m /= total;
        float s1 = 0.0f, s2 = 0.0f;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) {
                float d = base[(i64)j * pw + i] - m;
                float wd = wt[j * n + i] * d;
                s1 += wd;
                s2 += wd * d;
            }
        out = non_negative((s2 - s1 * s1 / total) / total);
    } else if (method == 1) {
        float s1 = 0.0f, s2 = 0.0f;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) {
                float v = base[(i64)j * pw + i], w = wt[j * n + i];
                s1 += w * v;
                s2 += w * v * v;
            }
        float m = s1 / total;
        out = non_negative(s2 / total - m * m);
    } else {
        float mean = 0.0f, m2 = 0.0f;
        double seen = 0.0;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) {
                float w = wt[j * n + i], v = base[(i64)j * pw + i];
                seen += (double)w;
                float f = (float)((double)w / seen);
                float delta = v - mean;
                mean += delta * f;
                m2 += w * delta * (v - mean);
            }
        out = non_negative(m2 / total);
    }
    dst[(i64)y * width + x] = out;
}
TESSERA_EXPORT(var_direct)

// One line's logarithmic pass (the core's LinePass), on the line's (mean, variance)
// samples m, v of length n with scratch tm, tv, in place; the result is left in *m, *v.
//   kind 0: pairwise tent (1-1 merges, twice per dilation d = 1, 2, 4, ...)
//   kind 1: threewise tent (1-2-1 merges at dilation d)
//   kind 2, 3: box of width 2r + 1 by blocks of 2^j (pairwise) or 3^j (threewise)
//              samples, joined by the digits of the width
__device__ void log_pass(float** pm, float** pv, float** ptm, float** ptv, int n, int r, int kind) {
    float *m = *pm, *v = *pv, *tm = *ptm, *tv = *ptv;
    auto swap = [](float*& a, float*& b) { float* t = a; a = b; b = t; };
    if (kind == 0) {
        int len = n;
        for (int d = 1; d <= r; d *= 2)
            for (int rep = 0; rep < 2; ++rep) {
                int out = len - d;
                for (int i = 0; i < out; ++i) {
                    float dd = m[i] - m[i + d];
                    tm[i] = 0.5f * (m[i] + m[i + d]);
                    tv[i] = 0.5f * (v[i] + v[i + d]) + 0.25f * dd * dd;
                }
                swap(m, tm);
                swap(v, tv);
                len -= d;
            }
    } else if (kind == 1) {
        int len = n;
        for (int d = 1; d <= r; d *= 2) {
            int out = len - 2 * d;
            for (int i = 0; i < out; ++i) {
                float a = m[i], b = m[i + d], c = m[i + 2 * d];
                float dab = a - b, dac = a - c, dbc = b - c;
                tm[i] = 0.25f * (a + c) + 0.5f * b;
                tv[i] = 0.25f * (v[i] + 2.0f * v[i + d] + v[i + 2 * d]) + 0.0625f * (2.0f * dab * dab + dac * dac + 2.0f * dbc * dbc);
            }
            swap(m, tm);
            swap(v, tv);
            len -= 2 * d;
        }
    } else {
        int base = kind == 2 ? 2 : 3;
        int total = 2 * r + 1;
        int width = 1, joined = 0, rest = total;
        for (;;) {
            for (int k = 0; k < rest % base; ++k) {
                int out = n - joined - width + 1;
                if (joined == 0) {
                    for (int i = 0; i < out; ++i) {
                        tm[i] = m[i];
                        tv[i] = v[i];
                    }
                } else {
                    float wa = (float)joined / (float)(joined + width), wb = 1.0f - wa, wab = wa * wb;
                    for (int i = 0; i < out; ++i) {
                        float bm = m[joined + i], bv = v[joined + i];
                        float d = tm[i] - bm;
                        tm[i] = wa * tm[i] + wb * bm;
                        tv[i] = wa * tv[i] + wb * bv + wab * d * d;
                    }
                }
                joined += width;
            }
            rest /= base;
            if (rest == 0) break;
            // The next level in place: blocks of base * width samples.
            int len = n - base * width + 1, off = width;
            for (int i = 0; i < len; ++i) {
                float a = m[i], b = m[i + off], va = v[i], vb = v[i + off];
                if (base == 2) {
                    float d = a - b;
                    m[i] = 0.5f * (a + b);
                    v[i] = 0.5f * (va + vb) + 0.25f * d * d;
                } else {
                    float c = m[i + 2 * off], vc = v[i + 2 * off];
                    float dab = a - b, dac = a - c, dbc = b - c;
                    m[i] = (a + b + c) * (1.0f / 3.0f);
                    v[i] = (va + vb + vc) * (1.0f / 3.0f) + (dab * dab + dac * dac + dbc * dbc) * (1.0f / 9.0f);
                }
            }
            width *= base;
        }
        swap(m, tm);
        swap(v, tv);
    }
    *pm = m;
    *pv = v;
    *ptm = tm;
    *ptv = tv;
}

// The horizontal pass: one thread per padded row; its line in `scratch` (4 x pw floats
// per row), the statistics of the first `width` positions into `hs` (means | variances).
extern "C" __global__ void var_log_rows(const float* padded, float* hs, float* scratch, int width, int height, int r, int kind) {
    int pw = width + 2 * r, ph = height + 2 * r;
    int y = blockIdx.x * blockDim.x + threadIdx.x;
    if (y >= ph) return;
    float* m = scratch + (i64)y * 4 * pw;
    float *v = m + pw, *tm = v + pw, *tv = tm + pw;
    for (int i = 0; i < pw; ++i) {
        m[i] = padded[(i64)y * pw + i];
        v[i] = 0.0f;
    }
    log_pass(&m, &v, &tm, &tv, pw, r, kind);
    float* out = hs + (i64)y * 2 * width;
    for (int i = 0; i < width; ++i) {
        out[i] = m[i];
        out[width + i] = v[i];
    }
}
TESSERA_EXPORT(var_log_rows)

// The vertical pass: one thread per column over the `ph` rows of `hs`; the variance of the
// first `height` positions, clamped at 0, into `dst`.
extern "C" __global__ void var_log_cols(const float* hs, float* dst, float* scratch, int width, int height, int r, int kind) {
    int ph = height + 2 * r;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= width) return;
    float* m = scratch + (i64)c * 4 * ph;
    float *v = m + ph, *tm = v + ph, *tv = tm + ph;
    for (int y = 0; y < ph; ++y) {
        m[y] = hs[(i64)y * 2 * width + c];
        v[y] = hs[(i64)y * 2 * width + width + c];
    }
    log_pass(&m, &v, &tm, &tv, ph, r, kind);
    for (int y = 0; y < height; ++y) dst[(i64)y * width + c] = non_negative(v[y]);
}
TESSERA_EXPORT(var_log_cols)

// Box (or tent) means and exact variances together, for the glare detector (the core's
// interleaved pairs): mean = S1 / W in f64 rounded to f32, the variance as var_rows.
template <typename T>
__device__ void mean_var_rows(const u64* c1, const u64* c2, const u32* cbad, float* mean, float* var, int width, int height, int r, int tent,
                              int mode, float outside, u64 total, double inv_w2, double inv_w, int seg) {
    __shared__ float tm[VAR_WARPS][32][33];
    __shared__ float tv[VAR_WARPS][32][33];
    WarpTile<float> km{tm[threadIdx.x / 32]}, kv{tv[threadIdx.x / 32]};
    row_walk<T, u64>(c1, c2, cbad, width, height, r, tent, mode, outside, 0.0, seg, [&](int x, const Moment<u64>& s, const RowSegment& l) {
        float m = (float)__dmul_rn((double)s.x, inv_w), v = finish(s, total, inv_w2, 0.0);
        km.emit(x, l.x0, l.x1, m, l.owners, [&](int o, int xx, float q) { mean[(i64)(l.first + o) * width + xx] = q; });
        kv.emit(x, l.x0, l.x1, v, l.owners, [&](int o, int xx, float q) { var[(i64)(l.first + o) * width + xx] = q; });
    });
}
extern "C" __global__ void mean_var_rows_u8(const u64* c1, const u64* c2, const u32* cbad, float* mean, float* var, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int seg) {
    mean_var_rows<u8>(c1, c2, cbad, mean, var, w, h, r, tent, mode, outside, total, inv_w2, inv_w, seg);
}
TESSERA_EXPORT(mean_var_rows_u8)
extern "C" __global__ void mean_var_rows_u16(const u64* c1, const u64* c2, const u32* cbad, float* mean, float* var, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int seg) {
    mean_var_rows<u16>(c1, c2, cbad, mean, var, w, h, r, tent, mode, outside, total, inv_w2, inv_w, seg);
}
TESSERA_EXPORT(mean_var_rows_u16)

// ---- The single-pass kernel moments of integer images (moments_fused_*): the sums of x and
// x^2 over the tent or box of radius r with no intermediate image, then one of the three
// final steps above (OUT: 0 the variance as var_rows, 1 the contrast's mean and variance as
// moment_rows, 2 the glare's mean and variance as mean_var_rows). The box filter's fused
// design (box_fused in filter.cu) carried to two moments and the tent. A block of
// `blockDim.x` threads (at most 256) owns a strip of `strip` output columns (grid x) and a
// segment of `seg` rows (grid y); the strip's extended row reaches r columns each side
// (border columns resolved by `source_index`, a column wholly outside sums the constant):
// L = xs + 2r lanes, at most NL per thread.
//
//   1. Column sums: each thread keeps its lanes' running sums (`RunningSums`: the tent's
//      three running moments, or the box's; `ColumnSum` wide) in registers, started at the segment's first
//      row (2r + 2 loads a lane) and stepped a row at a time (lane t + k blockDim.x, so a
//      warp reads neighbouring pixels of a row).
//   2. ROWS rows of column sums at a time go to shared memory, the x plane's rows then the
//      x^2 plane's, each behind two zeros.
//   3. Block-wide prefix sums of each row (`block_scan_rows`), twice for the tent.
//   4. With P the buffer after the scans, the output at column xp of the strip is, for
//      the tent, P[xp + 2r + 2] - 2 P[xp + r + 1] + P[xp] (the tent is a box of width r + 1
//      convolved with itself: a second difference of the twice-summed row), for the box
//      P[xp + 2r + 2] - P[xp + 1]. Wrapping u64 arithmetic: the true sums fit (the core
//      validates the radius against the type), so the differences are exact and every
//      output is the two passes' to the bit.
//
// Shared memory (dynamic): two buffers (a step's scans write one while the previous step's
// outputs read the other) of 2 x ROWS rows of L + 2 u64, and 2 x ROWS x 8 warp totals.
// Four barriers per step for the box, six for the tent.
// A column's kernel sums of x and x^2 held in 32 bits for u8 (at most (r + 1)^2 65025 for
// the tent of radius 255, 4095 x 65025 for the widest box: both below 2^32), 64 for u16.
template <typename T> struct ColumnSum {
    typedef u64 type;
};
template <> struct ColumnSum<u8> {
    typedef u32 type;
};

template <typename T, int OUT, int NL, int ROWS>
__device__ void moments_fused(const T* src, float* out_a, float* out_b, int width, int height, int r, int tent, int mode, float outside,
                              u64 total, double inv_w2, double inv_w, int strip, int seg) {
    TESSERA_DYNAMIC_SHARED(u64, shared);
    int x0 = blockIdx.x * strip, y0 = blockIdx.y * seg;
    if (x0 >= width || y0 >= height) return;
    int threads = blockDim.x, t = threadIdx.x;
    int xs = min(strip, width - x0), y1 = min(height, y0 + seg);
    int count = xs + 2 * r, pitch = count + 2;
    u64* totals = shared + 2 * 2 * ROWS * pitch;
    bool is_tent = tent != 0;
    typedef typename ColumnSum<T>::type C;
    Moment<u64> o = moment_of((T)outside, 0.0);
    Moment<C> out_m = {(C)o.x, (C)o.x2, 0};
    auto sample = [&](int yy, int g) -> Moment<C> {
        int sy = source_index(yy, height, mode);
        if (sy < 0 || g < 0) return out_m;
        C v = (C)src[(i64)sy * width + g];
        return {v, v * v, 0};
    };
    // This thread's lanes: the source column each reads (-1 outside the image), where its
    // sums go in a row of the buffer (-1: no lane), and their running sums.
    int from[NL], to[NL];
    RunningSums<C> col[NL];
    TESSERA_UNROLL
    for (int k = 0; k < NL; ++k) {
        int e = t + k * threads;
        from[k] = e < count ? source_index(x0 - r + e, width, mode) : -1;
        to[k] = e < count ? 2 + e : -1;
        int g = from[k];
        if (to[k] >= 0) col[k].start(y0, r, is_tent, [&](int yy) { return sample(yy, g); });
    }
    if (t == 0) {
        for (int q = 0; q < 2 * 2 * ROWS; ++q) shared[q * pitch] = shared[q * pitch + 1] = 0;
    }
    for (int y = y0, step = 0; y < y1; y += ROWS, ++step) {
        u64* buf = shared + (step & 1) * 2 * ROWS * pitch;
        // 1, 2: ROWS rows of column sums, the x plane (rows 0 .. ROWS - 1) then x^2.
        TESSERA_UNROLL
        for (int q = 0; q < ROWS; ++q) {
            int yy = y + q;
            TESSERA_UNROLL
            for (int k = 0; k < NL; ++k) {
                if (to[k] < 0) continue;
                int g = from[k];
                if (yy > y0 && yy < y1) col[k].step(yy - 1, r, is_tent, [&](int ys) { return sample(ys, g); });
                buf[q * pitch + to[k]] = (u64)col[k].t.x;
                buf[(ROWS + q) * pitch + to[k]] = (u64)col[k].t.x2;
            }
        }
        __syncthreads();
        // 3: prefix sums of every row; again for the tent.
        block_scan_rows<u64, 2 * ROWS>(buf, pitch, 2, totals);
        __syncthreads();
        if (is_tent) {
            block_scan_rows<u64, 2 * ROWS>(buf, pitch, 2, totals);
            __syncthreads();
        }
        // 4: the outputs of the step's rows.
        TESSERA_UNROLL
        for (int q = 0; q < ROWS; ++q) {
            int yy = y + q;
            if (yy >= y1) break;
            const u64 *p1 = buf + q * pitch, *p2 = buf + (ROWS + q) * pitch;
            for (int xp = t; xp < xs; xp += threads) {
                Moment<u64> s;
                if (is_tent) {
                    s.x = p1[xp + 2 * r + 2] - 2 * p1[xp + r + 1] + p1[xp];
                    s.x2 = p2[xp + 2 * r + 2] - 2 * p2[xp + r + 1] + p2[xp];
                } else {
                    s.x = p1[xp + 2 * r + 2] - p1[xp + 1];
                    s.x2 = p2[xp + 2 * r + 2] - p2[xp + 1];
                }
                s.bad = 0;
                i64 at = (i64)yy * width + x0 + xp;
                if (OUT == 0) {
                    out_a[at] = finish(s, total, inv_w2, 0.0);
                } else if (OUT == 1) {
                    moments_of(s, inv_w, 0.0, &out_a[at], &out_b[at]);
                } else {
                    out_a[at] = (float)__dmul_rn((double)s.x, inv_w);
                    out_b[at] = finish(s, total, inv_w2, 0.0);
                }
            }
        }
    }
}

// Each of the three final steps for u8 and u16 in two shapes: n2r2 (up to 2 lanes per
// thread, 2 rows per step: strips of up to 512 lanes with 256 threads) and n4r1 (4 lanes
// per thread, a row per step: up to 1024 lanes, for radii up to about 490).
extern "C" __global__ __launch_bounds__(256, 3) void moments_fused_var_u8_n2r2(const u8* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u8, 0, 2, 2>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_var_u8_n2r2)
extern "C" __global__ __launch_bounds__(256, 3) void moments_fused_var_u16_n2r2(const u16* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u16, 0, 2, 2>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_var_u16_n2r2)
extern "C" __global__ __launch_bounds__(256, 3) void moments_fused_contrast_u8_n2r2(const u8* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u8, 1, 2, 2>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_contrast_u8_n2r2)
extern "C" __global__ __launch_bounds__(256, 3) void moments_fused_contrast_u16_n2r2(const u16* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u16, 1, 2, 2>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_contrast_u16_n2r2)
extern "C" __global__ __launch_bounds__(256, 3) void moments_fused_glare_u8_n2r2(const u8* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u8, 2, 2, 2>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_glare_u8_n2r2)
extern "C" __global__ __launch_bounds__(256, 3) void moments_fused_glare_u16_n2r2(const u16* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u16, 2, 2, 2>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_glare_u16_n2r2)
extern "C" __global__ __launch_bounds__(256, 2) void moments_fused_var_u8_n4r1(const u8* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u8, 0, 4, 1>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_var_u8_n4r1)
extern "C" __global__ __launch_bounds__(256, 2) void moments_fused_var_u16_n4r1(const u16* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u16, 0, 4, 1>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_var_u16_n4r1)
extern "C" __global__ __launch_bounds__(256, 2) void moments_fused_contrast_u8_n4r1(const u8* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u8, 1, 4, 1>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_contrast_u8_n4r1)
extern "C" __global__ __launch_bounds__(256, 2) void moments_fused_contrast_u16_n4r1(const u16* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u16, 1, 4, 1>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_contrast_u16_n4r1)
extern "C" __global__ __launch_bounds__(256, 2) void moments_fused_glare_u8_n4r1(const u8* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u8, 2, 4, 1>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_glare_u8_n4r1)
extern "C" __global__ __launch_bounds__(256, 2) void moments_fused_glare_u16_n4r1(const u16* src, float* a, float* b, int w, int h, int r, int tent, int mode, float outside, u64 total, double inv_w2, double inv_w, int strip, int seg) {
    moments_fused<u16, 2, 4, 1>(src, a, b, w, h, r, tent, mode, outside, total, inv_w2, inv_w, strip, seg);
}
TESSERA_EXPORT(moments_fused_glare_u16_n4r1)

// The f32 methods' global shift K on the device (the core's `global_shift`): counts the
// finite values that `v - K`, rounded to f32, would not give back exactly. One thread per
// value, blocks of 256.
extern "C" __global__ void shift_lossy_f32(const float* x, int n, double k, u32* lossy) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (v - v == 0.0f && (double)(float)((double)v - k) + k != (double)v) atomicAdd(lossy, 1u);
}
TESSERA_EXPORT(shift_lossy_f32)

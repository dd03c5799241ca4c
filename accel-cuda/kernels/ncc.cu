// Template registration by normalized cross-correlation (ncc/ and stitch/register.rs in
// the core): every template search of one or several frame pairs in one launch, one warp
// per template. Each search names its reference and moving frame by a slot of a table of
// frame addresses, so a stitching run uploads each frame once and batches pairs.
//
// A warp runs the core's search for its template step by step (the centre-biased log
// search with acceptance, the plain three-step search, or the exhaustive scan), all lanes
// following the same control flow, and evaluates each candidate position together: the
// lanes split the template's pixels, accumulate the cross term and the window's sums, and
// combine them by shuffles. Coefficients are cached per template (a bitmap and values in
// global scratch), so no position is evaluated twice and the evaluation counts are the
// core's. Integer frames: exact integer sums and the core's final division and square
// root in f64, so every coefficient, decision and count equals the CPU's. f32 frames: the
// cross term and window sums in f64 (the core: f32 row dot products, integral images),
// within about 1e-6 of the CPU's coefficients. A second kernel evaluates the null probes
// and reduces each template's to its peak (ncc_null_peaks), a third sums the templates of integer frames for the host's texture test
// (template_sums, at the end of this file).
#include "common.cuh"

__constant__ int RING[8][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {1, 0}, {-1, 1}, {0, 1}, {1, 1}};
__constant__ int RING2[16][2] = {{-2, -2}, {-1, -2}, {0, -2}, {1, -2}, {2, -2}, {-2, -1}, {2, -1}, {-2, 0},
                                 {2, 0}, {-2, 1}, {2, 1}, {-2, 2}, {-1, 2}, {0, 2}, {1, 2}, {2, 2}};

// What one warp knows about its search.
struct NccSearch {
    int sx, sy;            // template's top-left in the reference
    int x0, x1, y0, y1;    // search area
    int xmax, ymax;        // last window position in the frame
    int cx0, cy0, side;    // the cache box
    double tsum, tnorm;    // S_t; n^2 var (integers) or the zero-mean norm (f32)
    double* values;
    u32* bits;
    u32 evaluations;
};

__device__ __forceinline__ u64 warp_sum(u64 v) {
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

// A lane's walk over a template's pixels k = lane, lane + 32, ... in row-major order (row
// k / rsz, column k % rsz) with no division a pixel: each step is 32 / rsz rows and
// 32 % rsz columns on, a column past the template carried into the next row. (Two integer
// divisions a pixel, emulated on a GPU, were most of an evaluation's dependent steps.)
struct PixelWalk {
    int row, col, rows_a_step, cols_a_step, rsz;
    __device__ PixelWalk(int rsz, int lane) : row(lane / rsz), col(lane % rsz), rows_a_step(32 / rsz), cols_a_step(32 % rsz), rsz(rsz) {}
    __device__ __forceinline__ void next() {
        row += rows_a_step;
        col += cols_a_step;
        if (col >= rsz) {
            col -= rsz;
            ++row;
        }
    }
};

// r from exact integer sums (the core's finish_int; i64 for u8, i128 for u16).
template <typename W>
__device__ double finish_int(double n2_var, int n, u64 stw, u64 sw, u64 sww, double tsum) {
    W nn = (W)n, w1 = (W)sw, w2 = (W)sww;
    W var_w = nn * w2 - w1 * w1;
    if (var_w <= 0) return -TESSERA_INF_D;
    W num = nn * (W)stw - (W)(i64)tsum * w1;
    double r = (double)num / sqrt(n2_var * (double)var_w);
    return fmin(fmax(r, -1.0), 1.0);
}

// Positions whose windows a warp evaluates together: a ring of the log search. Their loads
// are in flight at once, where one window at a time left each lane waiting on its loads.
#define NCC_GROUP 8

// The coefficients of the windows at (xs[g], ys[g]) for each g with want[g] (G at most),
// into out[g]. An integer window's exact sums, a lane's share of the template's pixels
// each, finished in `W` (wide enough for the pixel type's products: i64 for u8, i128 for
// u16); the same sums whichever windows are evaluated with it.
template <typename P, typename W, int G>
__device__ __forceinline__ void int_coefficients(const P* ref, const P* mov, int w, int rsz, const NccSearch& s, const int* xs, const int* ys, const bool* want, double* out, int lane) {
    u64 stw[G], sw[G], sww[G];
    TESSERA_UNROLL
    for (int g = 0; g < G; ++g) stw[g] = sw[g] = sww[g] = 0;
    int n = rsz * rsz;
    PixelWalk p(rsz, lane);
    for (int k = lane; k < n; k += 32, p.next()) {
        const int r = p.row, c = p.col;
        const u64 t = ref[(i64)(s.sy + r) * w + s.sx + c];
        TESSERA_UNROLL
        for (int g = 0; g < G; ++g)
            if (want[g]) {
                const u64 v = mov[(i64)(ys[g] + r) * w + xs[g] + c];
                stw[g] += t * v;
                sw[g] += v;
                sww[g] += v * v;
            }
    }
    TESSERA_UNROLL
    for (int g = 0; g < G; ++g)
        if (want[g]) out[g] = finish_int<W>(s.tnorm, n, warp_sum(stw[g]), warp_sum(sw[g]), warp_sum(sww[g]), s.tsum);
}

template <int G>
__device__ __forceinline__ void coefficients(const u8* ref, const u8* mov, int w, int rsz, const NccSearch& s, const int* xs, const int* ys, const bool* want, double* out, double, double, int lane) {
    int_coefficients<u8, i64, G>(ref, mov, w, rsz, s, xs, ys, want, out, lane);
}

template <int G>
__device__ __forceinline__ void coefficients(const u16* ref, const u16* mov, int w, int rsz, const NccSearch& s, const int* xs, const int* ys, const bool* want, double* out, double, double, int lane) {
    int_coefficients<u16, __int128, G>(ref, mov, w, rsz, s, xs, ys, want, out, lane);
}

// f32: the template zero-mean as the core stores it, window sums about the frame's first
// pixel `offset`, flat below `flat_tol`.
template <int G>
__device__ __forceinline__ void coefficients(const float* ref, const float* mov, int w, int rsz, const NccSearch& s, const int* xs, const int* ys, const bool* want, double* out, double offset, double flat_tol, int lane) {
    double cross[G], s1[G], s2[G];
    TESSERA_UNROLL
    for (int g = 0; g < G; ++g) cross[g] = s1[g] = s2[g] = 0.0;
    int n = rsz * rsz;
    double mean = s.tsum / n;
    PixelWalk p(rsz, lane);
    for (int k = lane; k < n; k += 32, p.next()) {
        const int r = p.row, c = p.col;
        const float t = (float)((double)ref[(i64)(s.sy + r) * w + s.sx + c] - mean);
        TESSERA_UNROLL
        for (int g = 0; g < G; ++g)
            if (want[g]) {
                const float v = mov[(i64)(ys[g] + r) * w + xs[g] + c];
                cross[g] += (double)t * (double)v;
                const double d = (double)v - offset;
                s1[g] += d;
                s2[g] += d * d;
            }
    }
    TESSERA_UNROLL
    for (int g = 0; g < G; ++g)
        if (want[g]) {
            const double c = warp_sum(cross[g]), a = warp_sum(s1[g]), b = warp_sum(s2[g]);
            const double var_w = b - a * a / n;
            if (s.tnorm <= 0.0 || var_w <= flat_tol) {
                out[g] = -TESSERA_INF_D;
            } else {
                const double r = c / sqrt(s.tnorm * var_w);
                out[g] = fmin(fmax(r, -1.0), 1.0);
            }
        }
}

// One window's coefficient.
template <typename T>
__device__ __forceinline__ double coefficient(const T* ref, const T* mov, int w, int rsz, const NccSearch& s, int x, int y, double offset, double flat_tol, int lane) {
    const bool want = true;
    double v;
    coefficients<1>(ref, mov, w, rsz, s, &x, &y, &want, &v, offset, flat_tol, lane);
    return v;
}

// The coefficients at (xs[g], ys[g]), g < G (G at most NCC_GROUP), into v[g], each computed
// once per search (the core's SearchCache) and counted as the core counts them one after
// another: a position cached, or met earlier in the group, is not evaluated again; the
// others are evaluated together.
template <int G, typename T>
__device__ void cached_group(const T* ref, const T* mov, int w, int rsz, NccSearch& s, const int* xs, const int* ys, double* v, double offset, double flat_tol, int lane) {
    int cell[G];
    bool want[G];
    TESSERA_UNROLL
    for (int g = 0; g < G; ++g) {
        cell[g] = (ys[g] - s.cy0) * s.side + (xs[g] - s.cx0);
        bool earlier = false;
        TESSERA_UNROLL
        for (int e = 0; e < g; ++e) earlier = earlier || cell[e] == cell[g];
        want[g] = !earlier && !(s.bits[cell[g] >> 5] & (1u << (cell[g] & 31)));
    }
    double found[G];
    coefficients<G>(ref, mov, w, rsz, s, xs, ys, want, found, offset, flat_tol, lane);
    TESSERA_UNROLL
    for (int g = 0; g < G; ++g)
        if (want[g]) {
            if (lane == 0) {
                s.values[cell[g]] = found[g];
                s.bits[cell[g] >> 5] |= 1u << (cell[g] & 31);
            }
            s.evaluations += 1;
        }
    __syncwarp();
    TESSERA_UNROLL
    for (int g = 0; g < G; ++g) v[g] = want[g] ? found[g] : s.values[cell[g]];
}

// The coefficient at (x, y), computed once per search (the core's SearchCache).
template <typename T>
__device__ double cached(const T* ref, const T* mov, int w, int rsz, NccSearch& s, int x, int y, double offset, double flat_tol, int lane) {
    double v;
    cached_group<1>(ref, mov, w, rsz, s, &x, &y, &v, offset, flat_tol, lane);
    return v;
}

struct Peak {
    int x, y;
    double v;
};

// Words of a search's record in `sites` and `stats`, and of its result in `out`.
#define NCC_SITE_WORDS 6
#define NCC_STAT_WORDS 4
#define NCC_RESULT_WORDS 6

// The vertex of the parabola through (-1, l), (0, c), (1, r) where c is the largest of
// the three, else 0: the core's `parabola` (ncc/subpixel.rs) to the bit.
__device__ double parabola_vertex(double l, double c, double r) {
    double den = __dadd_rn(__dadd_rn(l, -__dmul_rn(2.0, c)), r);
    if (!(isfinite(l) && isfinite(r) && c >= l && c >= r && den < 0.0)) return 0.0;
    double x = __dadd_rn(l, -r) / __dmul_rn(2.0, den);
    return x < -0.5 ? -0.5 : (x > 0.5 ? 0.5 : x);
}

// The subpixel offset of a peak from its 3 x 3 neighbourhood, given value by value in row
// order (`add(i, j, f)`: f at offset (i - 1, j - 1) from the peak), so that the
// neighbourhood needs no array: the core's `quadratic_peak` (ncc/subpixel.rs) to the bit,
// each product and sum rounded on its own (never fused into a multiply-add) in the core's
// order.
struct PeakFit {
    double b = 0.0, c = 0.0, e = 0.0, d = 0.0, g = 0.0;  // the quadratic's sums
    double centre = 0.0, left = 0.0, right = 0.0, up = 0.0, down = 0.0;
    bool finite = true;

    __device__ void add(int i, int j, double f) {
        double x = i - 1.0, y = j - 1.0;
        b = __dadd_rn(b, __dmul_rn(x, f));
        c = __dadd_rn(c, __dmul_rn(y, f));
        e = __dadd_rn(e, __dmul_rn(__dmul_rn(x, y), f));
        d = __dadd_rn(d, __dmul_rn(__dadd_rn(__dmul_rn(x, x), -2.0 / 3.0), f));
        g = __dadd_rn(g, __dmul_rn(__dadd_rn(__dmul_rn(y, y), -2.0 / 3.0), f));
        finite = finite && isfinite(f);
        if (j == 1 && i == 1) centre = f;
        if (j == 1 && i == 0) left = f;
        if (j == 1 && i == 2) right = f;
        if (j == 0 && i == 1) up = f;
        if (j == 2 && i == 1) down = f;
    }

    // The offset (dx, dy) once all nine values are in.
    __device__ void offset(double* dx, double* dy) const {
        *dx = 0.0;
        *dy = 0.0;
        if (!isfinite(centre)) return;
        if (finite) {
            double qb = b / 6.0, qc = c / 6.0, qe = e / 4.0, qd = d / 2.0, qg = g / 2.0;
            double det = __dadd_rn(__dmul_rn(__dmul_rn(4.0, qd), qg), -__dmul_rn(qe, qe));
            if (qd < 0.0 && qg < 0.0 && det > 0.0) {
                double x = __dadd_rn(__dmul_rn(__dmul_rn(-2.0, qg), qb), __dmul_rn(qe, qc)) / det;
                double y = __dadd_rn(__dmul_rn(__dmul_rn(-2.0, qd), qc), __dmul_rn(qe, qb)) / det;
                if (fabs(x) <= 1.0 && fabs(y) <= 1.0) {
                    *dx = x;
                    *dy = y;
                    return;
                }
            }
        }
        *dx = parabola_vertex(left, centre, right);
        *dy = parabola_vertex(up, centre, down);
    }
};

// frames: the device address of each slot's frame (w x h, packed). Per search, sites: the
// template's top-left in the reference, the search start, the reference's and the moving
// frame's slots; stats: S_t, the norm, and the moving frame's offset and flatness
// tolerance (f32). out, per search: best x, y, coefficient, evaluations, and the peak's
// subpixel offset (x, y; 0 without subpixel or a finite coefficient): one download for all.
template <typename T>
__device__ void ncc_search(const u64* frames, int w, int h, int rsz, const int* sites, const double* stats, int count, int radius,
                           int method, double accept, int subpixel, double* values, u32* bits, double* out) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= count) return;  // whole warps: blockDim is a multiple of 32
    const int* site = sites + (i64)NCC_SITE_WORDS * warp;
    const double* stat = stats + (i64)NCC_STAT_WORDS * warp;
    const T* ref = reinterpret_cast<const T*>(frames[site[4]]);
    const T* mov = reinterpret_cast<const T*>(frames[site[5]]);
    double offset = stat[2], flat_tol = stat[3];
    NccSearch s;
    s.sx = site[0];
    s.sy = site[1];
    int stx = site[2], sty = site[3];
    s.xmax = w - rsz;
    s.ymax = h - rsz;
    s.x0 = max(stx - radius, 0);
    s.x1 = min(stx + radius, s.xmax);
    s.y0 = max(sty - radius, 0);
    s.y1 = min(sty + radius, s.ymax);
    s.side = 2 * (radius + 1) + 1;
    s.cx0 = stx - radius - 1;
    s.cy0 = sty - radius - 1;
    s.tsum = stat[0];
    s.tnorm = stat[1];
    i64 cells = (i64)s.side * s.side;
    s.values = values + warp * cells;
    // Which cache cells hold a value: in the block's shared memory where the launch gave
    // it room (`bits` null; each warp clears its own words first, so the host clears
    // nothing), else in global scratch the host cleared.
    const i64 words = (cells + 31) / 32;
    if (bits == nullptr) {
        TESSERA_DYNAMIC_SHARED(u32, shared_bits);
        s.bits = shared_bits + (threadIdx.x >> 5) * words;
        for (i64 i = lane; i < words; i += 32) s.bits[i] = 0;
        __syncwarp();
    } else {
        s.bits = bits + warp * words;
    }
    s.evaluations = 0;
    auto clampx = [&](int x) { return min(max(x, s.x0), s.x1); };
    auto clampy = [&](int y) { return min(max(y, s.y0), s.y1); };
    auto get = [&](int x, int y) { return cached(ref, mov, w, rsz, s, x, y, offset, flat_tol, lane); };
    // The ring's positions (offsets `ring` from (cx, cy), times `step`, clamped to the
    // search area) evaluated together, then taken in ring order: `at` moves to each that
    // beats it, as one position at a time.
    auto ring_of = [&](const int (*ring)[2], int cx, int cy, int step, Peak& at) {
        int qx[NCC_GROUP], qy[NCC_GROUP];
        double v[NCC_GROUP];
        TESSERA_UNROLL
        for (int k = 0; k < NCC_GROUP; ++k) {
            qx[k] = clampx(cx + ring[k][0] * step);
            qy[k] = clampy(cy + ring[k][1] * step);
        }
        cached_group<NCC_GROUP>(ref, mov, w, rsz, s, qx, qy, v, offset, flat_tol, lane);
        TESSERA_UNROLL
        for (int k = 0; k < NCC_GROUP; ++k)
            if (v[k] > at.v) at = {qx[k], qy[k], v[k]};
    };
    auto probe = [&](int step, Peak& at) { ring_of(RING, at.x, at.y, step, at); };
    auto climb = [&](Peak& at) {
        for (;;) {
            int bx = at.x, by = at.y;
            probe(1, at);
            if (at.x == bx && at.y == by) {
                // The outer ring, its two halves in order.
                ring_of(RING2, bx, by, 1, at);
                ring_of(RING2 + NCC_GROUP, bx, by, 1, at);
                if (at.x == bx && at.y == by) break;
            }
        }
    };
    Peak peak;
    if (method == 2) {
        // Exhaustive: every position, the first maximum in raster order, eight positions
        // evaluated together (past the last, the last again: met earlier, not evaluated).
        peak = {s.x0, s.y0, -TESSERA_INF_D};
        const int wide = s.x1 - s.x0 + 1;
        const i64 total = (i64)wide * (s.y1 - s.y0 + 1);
        for (i64 k0 = 0; k0 < total; k0 += NCC_GROUP) {
            int qx[NCC_GROUP], qy[NCC_GROUP];
            double v[NCC_GROUP];
            TESSERA_UNROLL
            for (int g = 0; g < NCC_GROUP; ++g) {
                const i64 k = min(k0 + g, total - 1);
                qx[g] = s.x0 + (int)(k % wide);
                qy[g] = s.y0 + (int)(k / wide);
            }
            cached_group<NCC_GROUP>(ref, mov, w, rsz, s, qx, qy, v, offset, flat_tol, lane);
            TESSERA_UNROLL
            for (int g = 0; g < NCC_GROUP; ++g)
                if (k0 + g < total && v[g] > peak.v) peak = {qx[g], qy[g], v[g]};
        }
    } else {
        int cx = clampx(stx), cy = clampy(sty);
        Peak first = {cx, cy, get(cx, cy)};
        Peak near = first;
        bool accepting = method == 0;
        bool done = false;
        if (accepting) {
            climb(near);
            if (near.v >= accept) {
                peak = near;
                done = true;
            }
        }
        if (!done) {
            Peak far = first;
            int step = radius == 0 ? 0 : 1;
            while (radius != 0 && step < (radius + 1) / 2) step <<= 1;  // next power of two of ceil(r / 2)
            for (; step >= 1; step /= 2) probe(step, far);
            if (accepting) climb(far);
            peak = near.v >= far.v ? near : far;
        }
    }
    // The core's finish: the peak's coefficient, and its subpixel offset fitted to the
    // 3 x 3 neighbourhood (outside the frame: missing).
    double v = get(peak.x, peak.y);
    double dx = 0.0, dy = 0.0;
    if (v != -TESSERA_INF_D && subpixel) {
        // Lane k keeps the neighbourhood's k-th value (row order), gathered for the fit
        // after the evaluations, which need the warp's registers.
        double mine = -TESSERA_INF_D;
        for (int j = 0; j < 3; ++j)
            for (int i = 0; i < 3; ++i) {
                int xx = peak.x + i - 1, yy = peak.y + j - 1;
                double c = -TESSERA_INF_D;
                if (xx >= 0 && yy >= 0 && xx <= s.xmax && yy <= s.ymax) c = get(xx, yy);
                if (lane == 3 * j + i) mine = c;
            }
        PeakFit fit;
        for (int k = 0; k < 9; ++k) fit.add(k % 3, k / 3, __shfl_sync(0xffffffffu, mine, k));
        fit.offset(&dx, &dy);
    }
    if (lane == 0) {
        double* res = out + (i64)NCC_RESULT_WORDS * warp;
        res[0] = peak.x;
        res[1] = peak.y;
        res[2] = v;
        res[3] = s.evaluations;
        res[4] = dx;
        res[5] = dy;
    }
}

extern "C" __global__ void ncc_search_u8(const u64* frames, int w, int h, int rsz, const int* sites, const double* stats, int count, int radius, int method, double accept, int subpixel, double* values, u32* bits, double* out) {
    ncc_search<u8>(frames, w, h, rsz, sites, stats, count, radius, method, accept, subpixel, values, bits, out);
}
TESSERA_EXPORT(ncc_search_u8)
extern "C" __global__ void ncc_search_u16(const u64* frames, int w, int h, int rsz, const int* sites, const double* stats, int count, int radius, int method, double accept, int subpixel, double* values, u32* bits, double* out) {
    ncc_search<u16>(frames, w, h, rsz, sites, stats, count, radius, method, accept, subpixel, values, bits, out);
}
TESSERA_EXPORT(ncc_search_u16)
extern "C" __global__ void ncc_search_f32(const u64* frames, int w, int h, int rsz, const int* sites, const double* stats, int count, int radius, int method, double accept, int subpixel, double* values, u32* bits, double* out) {
    ncc_search<float>(frames, w, h, rsz, sites, stats, count, radius, method, accept, subpixel, values, bits, out);
}
TESSERA_EXPORT(ncc_search_f32)

// A launch's null probes, each template's reduced to its null peak (the core's NullPeak):
// a block per template, a warp per probe. A probe is the template's coefficient at the
// start of another search of the same launch, the one window there (a search of radius 0
// evaluates that window and nothing else). The template's record names its search (whose
// template, frames and terms the probes take), its probe count, and the searches at whose
// starts they are evaluated, all records of `sites` / `stats`. The block's first thread
// folds the coefficients in probe order as the core's NullPeak::of does (a flat window,
// -inf, skipped; a larger value, or any after a NaN, replaces the peak). out, per template:
// the peak (-inf where every window was flat, or there was none) and the number of windows
// not flat. The host checks that each start is a window inside the frame. A record: its
// own search, its probe count and the searches probed, counted from its pair's first
// search, which `bases` gives per record (a pair's records are the same wherever the pair
// lies in the launch).
#define NCC_NULL_SAMPLES 8
#define NCC_NULL_INTS (2 + NCC_NULL_SAMPLES)

template <typename T>
__device__ void ncc_null_peaks(const u64* frames, int w, int rsz, const int* sites, const double* stats, const int* nulls, const int* bases, double* out) {
    __shared__ double probed[NCC_NULL_SAMPLES];
    const int* null = nulls + (i64)NCC_NULL_INTS * blockIdx.x;  // a block per record
    int base = bases[blockIdx.x], search = base + null[0], probes = null[1];
    int k = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (k < probes) {  // whole warps: a warp per probe
        const int* site = sites + (i64)NCC_SITE_WORDS * search;
        const int* at = sites + (i64)NCC_SITE_WORDS * (base + null[2 + k]);
        const double* stat = stats + (i64)NCC_STAT_WORDS * search;
        const T* ref = reinterpret_cast<const T*>(frames[site[4]]);
        const T* mov = reinterpret_cast<const T*>(frames[site[5]]);
        NccSearch s;
        s.sx = site[0];
        s.sy = site[1];
        s.tsum = stat[0];
        s.tnorm = stat[1];
        double v = coefficient(ref, mov, w, rsz, s, at[2], at[3], stat[2], stat[3], lane);
        if (lane == 0) probed[k] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double peak = -TESSERA_INF_D;
        int windows = 0;
        for (int j = 0; j < probes; j++) {
            double c = probed[j];
            if (c == -TESSERA_INF_D) continue;
            if (windows == 0 || c > peak || peak != peak) peak = c;
            windows++;
        }
        out[2 * blockIdx.x] = peak;
        out[2 * blockIdx.x + 1] = windows;
    }
}

extern "C" __global__ void ncc_null_peaks_u8(const u64* frames, int w, int rsz, const int* sites, const double* stats, const int* nulls, const int* bases, double* out) {
    ncc_null_peaks<u8>(frames, w, rsz, sites, stats, nulls, bases, out);
}
TESSERA_EXPORT(ncc_null_peaks_u8)
extern "C" __global__ void ncc_null_peaks_u16(const u64* frames, int w, int rsz, const int* sites, const double* stats, const int* nulls, const int* bases, double* out) {
    ncc_null_peaks<u16>(frames, w, rsz, sites, stats, nulls, bases, out);
}
TESSERA_EXPORT(ncc_null_peaks_u16)
extern "C" __global__ void ncc_null_peaks_f32(const u64* frames, int w, int rsz, const int* sites, const double* stats, const int* nulls, const int* bases, double* out) {
    ncc_null_peaks<float>(frames, w, rsz, sites, stats, nulls, bases, out);
}
TESSERA_EXPORT(ncc_null_peaks_f32)

// The exact sums of each listed template (integer frames): a warp per template, its lanes
// splitting the pixels; u64 sums, which do not depend on the order they are added in. Each
// record is the reference's slot and the template's top-left pixel; the sums go out as S_t
// and S_tt per template, for the host's texture test (TemplateStats::of_int_sums).
#define NCC_TEMPLATE_INTS 3

template <typename T>
__device__ void template_sums(const u64* frames, int w, int rsz, const int* templates, int count, u64* out) {
    const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (t >= count) return;
    const int* rec = templates + (size_t)t * NCC_TEMPLATE_INTS;
    const T* ref = (const T*)frames[rec[0]];
    const int x0 = rec[1], y0 = rec[2];
    u64 s1 = 0, s2 = 0;
    PixelWalk p(rsz, lane);
    for (int i = lane; i < rsz * rsz; i += 32, p.next()) {
        const u64 v = ref[(size_t)(y0 + p.row) * w + x0 + p.col];
        s1 += v;
        s2 += v * v;
    }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    if (lane == 0) {
        out[2 * (size_t)t] = s1;
        out[2 * (size_t)t + 1] = s2;
    }
}

extern "C" __global__ void template_sums_u8(const u64* frames, int w, int rsz, const int* templates, int count, u64* out) {
    template_sums<u8>(frames, w, rsz, templates, count, out);
}
TESSERA_EXPORT(template_sums_u8)
extern "C" __global__ void template_sums_u16(const u64* frames, int w, int rsz, const int* templates, int count, u64* out) {
    template_sums<u16>(frames, w, rsz, templates, count, out);
}
TESSERA_EXPORT(template_sums_u16)

// The search's subpixel fit on its own, for its test against the core: `count`
// neighbourhoods of nine values (row by row), a thread each; out: each one's (dx, dy).
extern "C" __global__ void subpixel_peaks(const double* v, int count, double* out) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) return;
    PeakFit fit;
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) fit.add(i, j, v[9 * (i64)k + 3 * j + i]);
    fit.offset(&out[2 * (i64)k], &out[2 * (i64)k + 1]);
}
TESSERA_EXPORT(subpixel_peaks)

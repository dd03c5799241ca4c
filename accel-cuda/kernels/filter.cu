// The sliding-window filters (filter/ in the core): box sums and means over any window, in
// two passes whose cost per pixel does not depend on the window. The column sums between
// them are stored transposed (`lanes x height`: lane j's column is one contiguous line), so
// that both passes read and write whole cache lines:
//
//   box_cols_*:  one thread per lane column (x * channels + c) and segment of `seg` rows
//                (grid y): the window's sum at the segment's first row, then the running
//                sum down the segment. Threads of a warp read neighbouring lanes of one
//                row; each warp gathers 32 rows of its 32 sums in shared memory and writes
//                them out as 32 runs of 32 consecutive values of the transposed image.
//   box_rows_*:  one thread per row and segment of `seg` columns (grid y), channel c on
//                grid z: the running sum of the column sums along the segment (neighbouring
//                rows are neighbouring values of a transposed line), and the output (sum,
//                or mean rounded as the core rounds it), again gathered by 32 columns in
//                shared memory and written as 32 row runs.
//
// Measured on an H200 before the transposed layout: the row pass (a thread per row reading
// along its row, a warp touching 32 rows per load) was limited by L1 at 13.7 % of DRAM
// bandwidth, 384 of the box filter's 545 us. Segments exist for parallelism: a thread per
// whole line gives a 4096 x 4096 image 4096 threads: 6 % occupancy and 1 % of the copy
// bandwidth. Each segment restarts its sum from the window (cost m per segment; the host
// makes segments at least 2 m long). Integer sums are exact either way; f64 sums of f32 are
// re-seeded, not drifted.
//
// Borders as the core's `Border`: mode 0 reflect-101, 1 replicate, 2 constant, 3 normalize
// (outside pixels count as `outside`, 0 for normalize, whose mean divides by the in-bounds
// count). Sums are exact in integers (u8 and u16 columns in u32; u16 rows in u64) and in
// f64 for f32 input, as the core accumulates them.
#include "common.cuh"

// In-bounds indices of the window [c - before, c + after] within 0..n.
__device__ __forceinline__ int inside_count(int c, int before, int after, int n) {
    int lo = c - before < 0 ? 0 : c - before;
    int hi = c + after > n - 1 ? n - 1 : c + after;
    return hi + 1 - lo;
}

template <typename T, typename A>
__device__ void box_cols(const T* src, A* cols, int width, int height, int channels, int win_h, int mode, float outside, int seg) {
    __shared__ A cells[4][32][33];
    int lanes = width * channels;
    int j, warp_j, owners, y0, y1;
    bool live;
    if (!segment_of(height, seg, &y0, &y1) || !line_lane(lanes, &j, &warp_j, &owners, &live)) return;
    WarpTile<A> tile{cells[threadIdx.x / 32]};
    int up = win_h / 2, down = win_h - 1 - up;
    A out_value = (A)outside;
    auto value = [&](int yy) -> A {
        int r = source_index(yy, height, mode);
        return r < 0 || !live ? out_value : (A)src[(i64)r * lanes + j];
    };
    auto write = [&](int o, int y, A v) { cols[(i64)(warp_j + o) * height + y] = v; };
    A s = 0;
    for (int yy = y0 - up; yy <= y0 + down; ++yy) s += value(yy);
    for (int y = y0; y < y1; ++y) {
        // Unsigned sums wrap in between and come out exact: the true sum fits.
        if (y > y0) s = s + value(y + down) - value(y - 1 - up);
        tile.emit(y, y0, y1, s, owners, write);
    }
}

extern "C" __global__ void box_cols_u8(const u8* src, u32* cols, int w, int h, int c, int win_h, int mode, float outside, int seg) {
    box_cols<u8, u32>(src, cols, w, h, c, win_h, mode, outside, seg);
}
TESSERA_EXPORT(box_cols_u8)
extern "C" __global__ void box_cols_u16(const u16* src, u32* cols, int w, int h, int c, int win_h, int mode, float outside, int seg) {
    box_cols<u16, u32>(src, cols, w, h, c, win_h, mode, outside, seg);
}
TESSERA_EXPORT(box_cols_u16)
extern "C" __global__ void box_cols_f32(const float* src, double* cols, int w, int h, int c, int win_h, int mode, float outside, int seg) {
    box_cols<float, double>(src, cols, w, h, c, win_h, mode, outside, seg);
}
TESSERA_EXPORT(box_cols_f32)

// What box_rows and box_fused write for one window sum `s` of `area` pixels.
enum RowOutput { SUM = 0, MEAN = 1 };

// The output for the window sum `s` over `rows_in x cols_in` pixels: the sum itself, or the
// mean rounded as the core rounds it (f32: scaled by the reciprocal of the full area,
// divided by a normalized one; integers: half up, exactly).
template <typename O, int OUT, typename R>
__device__ __forceinline__ O box_output(R s, int rows_in, int cols_in, bool normalize) {
    if (OUT == SUM) return (O)s;
    u64 area = (u64)rows_in * (u64)cols_in;
    if constexpr (sizeof(O) == 4) {
        return normalize ? (O)((double)s / (double)area) : (O)((double)s * (1.0 / (double)area));
    } else {
        return (O)((2 * (u64)s + area) / (2 * area));
    }
}

template <typename A, typename R, typename O, int OUT>
__device__ void box_rows(const A* cols, O* dst, int width, int height, int channels, int win_w, int win_h, int mode, float outside, int seg) {
    __shared__ O cells[4][32][33];
    int ch = blockIdx.z;
    int y, warp_y, owners, x0, x1;
    bool live;
    if (!segment_of(width, seg, &x0, &x1) || !line_lane(height, &y, &warp_y, &owners, &live)) return;
    WarpTile<O> tile{cells[threadIdx.x / 32]};
    int lanes = width * channels;
    int left = win_w / 2, right = win_w - 1 - left;
    int up = win_h / 2, down = win_h - 1 - up;
    // A column wholly outside the image holds win_h outside pixels.
    R outside_col = (R)((double)outside * (double)win_h);
    auto value = [&](int xx) -> R {
        int c = source_index(xx, width, mode);
        return c < 0 || !live ? outside_col : (R)cols[(i64)(c * channels + ch) * height + y];
    };
    auto write = [&](int o, int x, O v) { dst[(i64)(warp_y + o) * lanes + (i64)x * channels + ch] = v; };
    R s = 0;
    for (int xx = x0 - left; xx <= x0 + right; ++xx) s += value(xx);
    bool normalize = mode == 3;
    int rows_in = normalize && live ? inside_count(y, up, down, height) : win_h;
    for (int x = x0; x < x1; ++x) {
        if (x > x0) s = s + value(x + right) - value(x - 1 - left);
        O v = box_output<O, OUT>(s, rows_in, normalize ? inside_count(x, left, right, width) : win_w, normalize);
        tile.emit(x, x0, x1, v, owners, write);
    }
}

extern "C" __global__ void box_sum_rows_u8(const u32* cols, u32* dst, int w, int h, int win_w, int win_h, int mode, float outside, int seg) {
    box_rows<u32, u32, u32, SUM>(cols, dst, w, h, 1, win_w, win_h, mode, outside, seg);
}
TESSERA_EXPORT(box_sum_rows_u8)
extern "C" __global__ void box_sum_rows_u16(const u32* cols, u32* dst, int w, int h, int win_w, int win_h, int mode, float outside, int seg) {
    box_rows<u32, u64, u32, SUM>(cols, dst, w, h, 1, win_w, win_h, mode, outside, seg);
}
TESSERA_EXPORT(box_sum_rows_u16)
extern "C" __global__ void box_sum_rows_f32(const double* cols, float* dst, int w, int h, int win_w, int win_h, int mode, float outside, int seg) {
    box_rows<double, double, float, SUM>(cols, dst, w, h, 1, win_w, win_h, mode, outside, seg);
}
TESSERA_EXPORT(box_sum_rows_f32)
extern "C" __global__ void mean_rows_u8(const u32* cols, u8* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int seg) {
    box_rows<u32, u32, u8, MEAN>(cols, dst, w, h, c, win_w, win_h, mode, outside, seg);
}
TESSERA_EXPORT(mean_rows_u8)
extern "C" __global__ void mean_rows_u16(const u32* cols, u16* dst, int w, int h, int win_w, int win_h, int mode, float outside, int seg) {
    box_rows<u32, u64, u16, MEAN>(cols, dst, w, h, 1, win_w, win_h, mode, outside, seg);
}
TESSERA_EXPORT(mean_rows_u16)
extern "C" __global__ void mean_rows_f32(const double* cols, float* dst, int w, int h, int win_w, int win_h, int mode, float outside, int seg) {
    box_rows<double, double, float, MEAN>(cols, dst, w, h, 1, win_w, win_h, mode, outside, seg);
}
TESSERA_EXPORT(mean_rows_f32)

// The single-pass box sums and means (box_fused_*): the input is read once and the output
// written once, with no intermediate image. A block of `blockDim.x` threads (a multiple of
// 32, at most 256) owns a strip of `strip` output pixels (grid x) and a segment of `seg`
// rows (grid y). The strip's extended row, its pixels widened by the window's reach on
// each side (border columns resolved by `source_index`), is `L = (xs + win_w - 1) c`
// lanes, at most NL per thread:
//
//   1. Column sums: each thread keeps the running window sums of its lanes (lane
//      t + k blockDim.x, so a warp reads neighbouring lanes of a row: coalesced) in
//      registers: the window's sum at the segment's first row (cost win_h loads per lane),
//      then for each next row the entering row added and the leaving one subtracted (that
//      row was read win_h rows earlier: mostly an L2 hit). A column wholly outside the
//      image (constant, normalize) sums the outside value.
//   2. ROWS rows of column sums at a time go to shared memory, each channel's lanes one
//      after the other (planar), behind a zero.
//   3. A block-wide inclusive scan of each row in place (`block_scan_rows`).
//   4. The window sum of output pixel xp, channel ch is P[ch ext + xp + win_w] - P[ch ext + xp]
//      (ext = xs + win_w - 1): exact in wrapping u32 for u8 (the window's true sum fits),
//      in u64 for u16, in f64 for f32 (as the core, which also takes differences of a
//      row's prefix sums); outputs are written as neighbouring lanes of a row (coalesced).
//
// Shared memory (dynamic): two buffers of ROWS x (L + 1) prefix entries (a step's scan
// writes one while the previous step's outputs read the other) and ROWS x 8 warp totals.
// Three barriers per step of ROWS rows. Each segment restarts its column sums (cost
// win_h rows of loads); the host makes segments tall against that and numerous enough
// to fill the device (filter.rs).
template <typename T, typename A, typename R, typename O, int OUT, int NL, int ROWS>
__device__ void box_fused(const T* src, O* dst, int width, int height, int channels, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    TESSERA_DYNAMIC_SHARED(R, shared);
    int x0 = blockIdx.x * strip, y0 = blockIdx.y * seg;
    if (x0 >= width || y0 >= height) return;
    int threads = blockDim.x, t = threadIdx.x;
    int xs = min(strip, width - x0), y1 = min(height, y0 + seg);
    int left = win_w / 2, right = win_w - 1 - left;
    int up = win_h / 2, down = win_h - 1 - up;
    int ext = xs + win_w - 1, count = ext * channels, pitch = count + 1;
    int lanes = width * channels;
    R* totals = shared + 2 * ROWS * pitch;
    // This thread's lanes: where each reads (global lane, -1 for an outside column) and
    // where its column sum goes in a row of the buffer.
    int from[NL], to[NL];
    A col[NL];
    A out_value = (A)outside;
    auto value = [&](int yy, int g) -> A {
        int r = source_index(yy, height, mode);
        return r < 0 || g < 0 ? out_value : (A)src[(i64)r * lanes + g];
    };
    TESSERA_UNROLL
    for (int k = 0; k < NL; ++k) {
        int e = t + k * threads;
        from[k] = -1;
        to[k] = -1;
        col[k] = 0;
        if (e < count) {
            int xe = e / channels, ch = e - xe * channels;
            int sx = source_index(x0 - left + xe, width, mode);
            from[k] = sx < 0 ? -1 : sx * channels + ch;
            to[k] = 1 + ch * ext + xe;
            for (int yy = y0 - up; yy <= y0 + down; ++yy) col[k] += value(yy, from[k]);
        }
    }
    if (t == 0) {
        for (int r = 0; r < 2 * ROWS; ++r) shared[r * pitch] = 0;
    }
    bool normalize = mode == 3;
    int outputs = xs * channels;
    for (int y = y0, step = 0; y < y1; y += ROWS, ++step) {
        R* buf = shared + (step & 1) * ROWS * pitch;
        // 1, 2: ROWS rows of column sums.
        TESSERA_UNROLL
        for (int r = 0; r < ROWS; ++r) {
            int yy = y + r;
            TESSERA_UNROLL
            for (int k = 0; k < NL; ++k) {
                if (to[k] < 0) continue;
                // Unsigned sums wrap in between and come out exact: the true sum fits.
                if (yy > y0 && yy < y1) col[k] = col[k] + value(yy + down, from[k]) - value(yy - 1 - up, from[k]);
                buf[r * pitch + to[k]] = (R)col[k];
            }
        }
        __syncthreads();
        // 3: each row's prefix sums.
        block_scan_rows<R, ROWS>(buf, pitch, 1, totals);
        __syncthreads();
        // 4: the outputs of the step's rows.
        TESSERA_UNROLL
        for (int r = 0; r < ROWS; ++r) {
            int yy = y + r;
            if (yy >= y1) break;
            const R* p = buf + r * pitch;
            int rows_in = normalize ? inside_count(yy, up, down, height) : win_h;
            for (int o = t; o < outputs; o += threads) {
                int xp = o / channels, ch = o - xp * channels;
                R s = p[ch * ext + xp + win_w] - p[ch * ext + xp];
                int cols_in = normalize ? inside_count(x0 + xp, left, right, width) : win_w;
                dst[(i64)yy * lanes + (i64)(x0 + xp) * channels + ch] = box_output<O, OUT>(s, rows_in, cols_in, normalize);
            }
        }
    }
}

// Each fused kernel in two shapes: n4r2 (up to 4 lanes per thread, 2 rows per step: strips
// of up to 1024 lanes with 256 threads) and n8r1 (8 lanes per thread, a row per step:
// strips of up to 2048 lanes).
extern "C" __global__ __launch_bounds__(256, 3) void box_fused_sum_u8_n4r2(const u8* src, u32* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<u8, u32, u32, u32, SUM, 4, 2>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_sum_u8_n4r2)
extern "C" __global__ __launch_bounds__(256, 3) void box_fused_sum_u16_n4r2(const u16* src, u32* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<u16, u32, u64, u32, SUM, 4, 2>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_sum_u16_n4r2)
extern "C" __global__ __launch_bounds__(256, 3) void box_fused_sum_f32_n4r2(const float* src, float* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<float, double, double, float, SUM, 4, 2>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_sum_f32_n4r2)
extern "C" __global__ __launch_bounds__(256, 3) void box_fused_mean_u8_n4r2(const u8* src, u8* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<u8, u32, u32, u8, MEAN, 4, 2>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_mean_u8_n4r2)
extern "C" __global__ __launch_bounds__(256, 3) void box_fused_mean_u16_n4r2(const u16* src, u16* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<u16, u32, u64, u16, MEAN, 4, 2>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_mean_u16_n4r2)
extern "C" __global__ __launch_bounds__(256, 3) void box_fused_mean_f32_n4r2(const float* src, float* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<float, double, double, float, MEAN, 4, 2>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_mean_f32_n4r2)
extern "C" __global__ __launch_bounds__(256, 2) void box_fused_sum_u8_n8r1(const u8* src, u32* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<u8, u32, u32, u32, SUM, 8, 1>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_sum_u8_n8r1)
extern "C" __global__ __launch_bounds__(256, 2) void box_fused_sum_u16_n8r1(const u16* src, u32* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<u16, u32, u64, u32, SUM, 8, 1>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_sum_u16_n8r1)
extern "C" __global__ __launch_bounds__(256, 2) void box_fused_sum_f32_n8r1(const float* src, float* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<float, double, double, float, SUM, 8, 1>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_sum_f32_n8r1)
extern "C" __global__ __launch_bounds__(256, 2) void box_fused_mean_u8_n8r1(const u8* src, u8* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<u8, u32, u32, u8, MEAN, 8, 1>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_mean_u8_n8r1)
extern "C" __global__ __launch_bounds__(256, 2) void box_fused_mean_u16_n8r1(const u16* src, u16* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<u16, u32, u64, u16, MEAN, 8, 1>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_mean_u16_n8r1)
extern "C" __global__ __launch_bounds__(256, 2) void box_fused_mean_f32_n8r1(const float* src, float* dst, int w, int h, int c, int win_w, int win_h, int mode, float outside, int strip, int seg) {
    box_fused<float, double, double, float, MEAN, 8, 1>(src, dst, w, h, c, win_w, win_h, mode, outside, strip, seg);
}
TESSERA_EXPORT(box_fused_mean_f32_n8r1)

// The separable FIR Gaussian (gaussian_fir.rs): a vertical then a horizontal pass of the
// 2r + 1 taps `wts`, in f32 with fused multiply-adds, as the core does. Two designs with the
// same arithmetic in the same order, so the same results bit for bit:
//
//   gauss_fir_cols_*:  one thread per lane column and a grid row per output row chunk: the
//                      vertical taps into an f32 image of lanes;
//   gauss_fir_rows_*:  one thread per output lane, a 2-D grid: the horizontal taps over that
//                      image (neighbouring threads read neighbouring lanes);
//   gauss_fir_fused_*: a block per tile of `tile_px` pixels x `tile_rows` rows: the vertical
//                      taps of the tile's rows over its columns and the r columns each side
//                      (within the image) into shared memory, then the horizontal taps from
//                      there, without the f32 image between the passes.

// The vertical taps at lane j of row y: taps past the edge read the border's source row,
// add `tap * outside` (constant) or are dropped and the kept taps rescaled to sum to one
// (normalize).
template <typename T>
__device__ float fir_vertical(const T* src, const float* wts, int r, int j, int y, int lanes, int height, int mode, float outside) {
    float bias = 0.0f, kept = 0.0f;
    bool dropped = false;
    for (int k = 0; k <= 2 * r; ++k) {
        if (source_index(y + k - r, height, mode) < 0) {
            bias = __fadd_rn(bias, __fmul_rn(wts[k], outside));  // rounded twice, as the core
            dropped = true;
        } else {
            kept += wts[k];
        }
    }
    bool rescale = mode == 3 && dropped;
    float acc = bias;
    for (int k = 0; k <= 2 * r; ++k) {
        int sy = source_index(y + k - r, height, mode);
        if (sy < 0) continue;
        float wk = rescale ? wts[k] / kept : wts[k];
        acc = fmaf((float)src[(i64)sy * lanes + j], wk, acc);
    }
    return acc;
}

__device__ __forceinline__ void store_lane(u8* p, float v) { *p = (u8)fminf(fmaxf(v + 0.5f, 0.0f), 255.0f); }
__device__ __forceinline__ void store_lane(u16* p, float v) { *p = (u16)fminf(fmaxf(v + 0.5f, 0.0f), 65535.0f); }
__device__ __forceinline__ void store_lane(float* p, float v) { *p = v; }

// The horizontal taps at pixel x, channel ch, over the vertical results `row`, which hold
// the columns from `first` on; the normalize correction at the edges, and the rounding of
// integers (half up, clamped), once, into *out.
template <typename O>
__device__ void fir_horizontal(const float* row, int first, O* out, const float* wts, int r, int x, int ch, int width, int channels, int mode, float outside) {
    float acc = 0.0f;
    for (int k = 0; k <= 2 * r; ++k) {
        int sx = source_index(x + k - r, width, mode);
        float v = sx < 0 ? outside : row[(sx - first) * channels + ch];
        acc = fmaf(v, wts[k], acc);
    }
    if (mode == 3 && (x < r || x >= width - r)) {
        // Normalize: divide by the weight of the taps inside the row.
        double inside = 0.0;
        for (int k = 0; k <= 2 * r; ++k) {
            int xx = x + k - r;
            if (xx >= 0 && xx < width) inside += (double)wts[k];
        }
        acc *= 1.0f / (float)inside;
    }
    store_lane(out, acc);
}

template <typename T>
__device__ void gauss_fir_cols(const T* src, float* tmp, const float* wts, int r, int width, int height, int channels, int mode, float outside) {
    int lanes = width * channels;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y;
    if (j >= lanes) return;
    tmp[(i64)y * lanes + j] = fir_vertical(src, wts, r, j, y, lanes, height, mode, outside);
}

template <typename O>
__device__ void gauss_fir_rows(const float* tmp, O* dst, const float* wts, int r, int width, int height, int channels, int mode, float outside) {
    int lanes = width * channels;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y;
    if (j >= lanes) return;
    fir_horizontal(tmp + (i64)y * lanes, 0, dst + (i64)y * lanes + j, wts, r, j / channels, j % channels, width, channels, mode, outside);
}

// Shared memory: tile_rows x (tile_px + 2r) x channels floats at most (filter.rs sizes it).
template <typename T>
__device__ void gauss_fir_fused(const T* src, T* dst, const float* wts, int r, int width, int height, int channels, int mode, float outside, int tile_px, int tile_rows) {
    TESSERA_DYNAMIC_SHARED(float, cols);
    int lanes = width * channels;
    int x0 = blockIdx.x * tile_px, y0 = blockIdx.y * tile_rows;
    // Every column the tile's horizontal taps read lies in [c0, c1): past the image's edge
    // they read the border's source columns, which are within r of that edge.
    int c0 = max(0, x0 - r), c1 = min(width, x0 + tile_px + r);
    int span = (c1 - c0) * channels;
    int rows = min(tile_rows, height - y0);
    for (int i = threadIdx.x; i < rows * span; i += blockDim.x) {
        int ry = i / span, l = i % span;
        cols[ry * span + l] = fir_vertical(src, wts, r, c0 * channels + l, y0 + ry, lanes, height, mode, outside);
    }
    __syncthreads();
    int out = (min(width, x0 + tile_px) - x0) * channels;
    for (int i = threadIdx.x; i < rows * out; i += blockDim.x) {
        int ry = i / out, j = x0 * channels + i % out;
        fir_horizontal(cols + ry * span, c0, dst + (i64)(y0 + ry) * lanes + j, wts, r, j / channels, j % channels, width, channels, mode, outside);
    }
}

extern "C" __global__ void gauss_fir_cols_u8(const u8* src, float* tmp, const float* wts, int r, int w, int h, int c, int mode, float outside) {
    gauss_fir_cols<u8>(src, tmp, wts, r, w, h, c, mode, outside);
}
TESSERA_EXPORT(gauss_fir_cols_u8)
extern "C" __global__ void gauss_fir_cols_u16(const u16* src, float* tmp, const float* wts, int r, int w, int h, int c, int mode, float outside) {
    gauss_fir_cols<u16>(src, tmp, wts, r, w, h, c, mode, outside);
}
TESSERA_EXPORT(gauss_fir_cols_u16)
extern "C" __global__ void gauss_fir_cols_f32(const float* src, float* tmp, const float* wts, int r, int w, int h, int c, int mode, float outside) {
    gauss_fir_cols<float>(src, tmp, wts, r, w, h, c, mode, outside);
}
TESSERA_EXPORT(gauss_fir_cols_f32)
extern "C" __global__ void gauss_fir_rows_u8(const float* tmp, u8* dst, const float* wts, int r, int w, int h, int c, int mode, float outside) {
    gauss_fir_rows<u8>(tmp, dst, wts, r, w, h, c, mode, outside);
}
TESSERA_EXPORT(gauss_fir_rows_u8)
extern "C" __global__ void gauss_fir_rows_u16(const float* tmp, u16* dst, const float* wts, int r, int w, int h, int c, int mode, float outside) {
    gauss_fir_rows<u16>(tmp, dst, wts, r, w, h, c, mode, outside);
}
TESSERA_EXPORT(gauss_fir_rows_u16)
extern "C" __global__ void gauss_fir_rows_f32(const float* tmp, float* dst, const float* wts, int r, int w, int h, int c, int mode, float outside) {
    gauss_fir_rows<float>(tmp, dst, wts, r, w, h, c, mode, outside);
}
TESSERA_EXPORT(gauss_fir_rows_f32)
extern "C" __global__ void gauss_fir_fused_u8(const u8* src, u8* dst, const float* wts, int r, int w, int h, int c, int mode, float outside, int tile_px, int tile_rows) {
    gauss_fir_fused<u8>(src, dst, wts, r, w, h, c, mode, outside, tile_px, tile_rows);
}
TESSERA_EXPORT(gauss_fir_fused_u8)
extern "C" __global__ void gauss_fir_fused_u16(const u16* src, u16* dst, const float* wts, int r, int w, int h, int c, int mode, float outside, int tile_px, int tile_rows) {
    gauss_fir_fused<u16>(src, dst, wts, r, w, h, c, mode, outside, tile_px, tile_rows);
}
TESSERA_EXPORT(gauss_fir_fused_u16)
extern "C" __global__ void gauss_fir_fused_f32(const float* src, float* dst, const float* wts, int r, int w, int h, int c, int mode, float outside, int tile_px, int tile_rows) {
    gauss_fir_fused<float>(src, dst, wts, r, w, h, c, mode, outside, tile_px, tile_rows);
}
TESSERA_EXPORT(gauss_fir_fused_f32)

// The recursive Gaussian (gaussian_iir.rs): Young - van Vliet's third-order causal and
// anti-causal passes with Triggs - Sdika's boundary start, in f64 as the core runs them
// (rounded to f32 between passes), with the additions and products in the core's order
// (no contraction into fused multiply-adds), so results follow the CPU's to f32 rounding.
// `coef` holds gain, a1, a2, a3 and the 3 x 3 Triggs - Sdika matrix (row-major).
//
//   iir_cols_*: one thread per lane column; the column extended by `margin` mirrored
//               samples on each side (reflect-101) is filtered down and up in `pad`
//               (sample t of lane j at pad[t * lanes + j]: coalesced).
//   iir_rows_*: one thread per (row, channel) line over `pad`'s rows margin..margin + h,
//               the line held interleaved in `line` (sample t at line[t * lines + l]:
//               coalesced), then the normalize factors and the rounding, once.
__device__ __forceinline__ double iir_step(const double* coef, float x, double& s0, double& s1, double& s2) {
    double v = __dadd_rn(__dadd_rn(__dadd_rn(__dmul_rn(coef[0], (double)x), __dmul_rn(coef[3], s2)), __dmul_rn(coef[2], s1)), __dmul_rn(coef[1], s0));
    s2 = s1;
    s1 = s0;
    s0 = v;
    return v;
}

// Filters one line of n samples stored at buf[t * step] in place; before sample 0 the input
// continues as `left`, after sample n - 1 as `right`.
__device__ void iir_line(float* buf, i64 step, int n, const double* coef, float left, float right) {
    double s0 = left, s1 = left, s2 = left;
    for (int t = 0; t < n; ++t) buf[t * step] = (float)iir_step(coef, buf[t * step], s0, s1, s2);
    double u = right;
    double d0 = s0 - u, d1 = s1 - u, d2 = s2 - u;
    double b[3];
    for (int i = 0; i < 3; ++i) {
        const double* r = coef + 4 + 3 * i;
        b[i] = __dadd_rn(__dadd_rn(__dadd_rn(__dmul_rn(r[0], d0), __dmul_rn(r[1], d1)), __dmul_rn(r[2], d2)), u);
    }
    s0 = b[0];
    s1 = b[1];
    s2 = b[2];
    buf[(i64)(n - 1) * step] = (float)s0;
    for (int t = n - 2; t >= 0; --t) buf[t * step] = (float)iir_step(coef, buf[t * step], s0, s1, s2);
}

__device__ __forceinline__ int reflect101(int i, int n) { return source_index(i, n, 0); }

// The constant a line continues with, given its first or last sample.
__device__ __forceinline__ float iir_edge(int mode, float outside, float sample) {
    return mode == 2 ? outside : (mode == 3 ? 0.0f : sample);
}

// Sample t of lane j of the column pass's padded buffer: the source row `t - margin`,
// mirrored (reflect-101) into the margins.
template <typename T> __device__ __forceinline__ float iir_col_sample(const T* src, int lanes, int height, int margin, int t, int j) {
    int sy = margin > 0 ? reflect101(t - margin, height) : t;
    return (float)src[(i64)sy * lanes + j];
}

// Sample t of line l (row y, channel ch) of the row pass: pad's row y + margin at column
// `t - margin`, mirrored into the margins.
__device__ __forceinline__ float iir_row_sample(const float* pad, int width, int channels, int margin, int l, int t) {
    int y = l / channels, ch = l % channels;
    int x = margin > 0 ? reflect101(t - margin, width) : t;
    return pad[(i64)(y + margin) * width * channels + (i64)x * channels + ch];
}

// Pixel x of line l of the row pass's result, normalized and stored.
template <typename O>
__device__ __forceinline__ void iir_store(const float* line, O* dst, const float* inv_nx, const float* inv_ny, int width, int channels, int margin, int mode, int lines, int l, int x) {
    int y = l / channels, ch = l % channels;
    float v = line[(i64)(x + margin) * lines + l];
    if (mode == 3) v *= inv_nx[x] * inv_ny[y];
    store_lane(dst + (i64)y * width * channels + (i64)x * channels + ch, v);
}

template <typename T>
__device__ void iir_cols(const T* src, float* pad, const double* coef, int lanes, int height, int margin, int mode, float outside) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= lanes) return;
    int n = height + 2 * margin;
    for (int t = 0; t < n; ++t) pad[(i64)t * lanes + j] = iir_col_sample(src, lanes, height, margin, t, j);
    float first = pad[j], last = pad[(i64)(n - 1) * lanes + j];
    iir_line(pad + j, lanes, n, coef, iir_edge(mode, outside, first), iir_edge(mode, outside, last));
}

template <typename O>
__device__ void iir_rows(const float* pad, float* line, O* dst, const double* coef, const float* inv_nx, const float* inv_ny,
                         int width, int height, int channels, int margin, int mode, float outside) {
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    int lines = height * channels;
    if (l >= lines) return;
    int n = width + 2 * margin;
    for (int t = 0; t < n; ++t) line[(i64)t * lines + l] = iir_row_sample(pad, width, channels, margin, l, t);
    float first = line[l], last = line[(i64)(n - 1) * lines + l];
    iir_line(line + l, lines, n, coef, iir_edge(mode, outside, first), iir_edge(mode, outside, last));
    for (int x = 0; x < width; ++x) iir_store(line, dst, inv_nx, inv_ny, width, channels, margin, mode, lines, l, x);
}

extern "C" __global__ void iir_cols_u8(const u8* src, float* pad, const double* coef, int lanes, int h, int margin, int mode, float outside) {
    iir_cols<u8>(src, pad, coef, lanes, h, margin, mode, outside);
}
TESSERA_EXPORT(iir_cols_u8)
extern "C" __global__ void iir_cols_u16(const u16* src, float* pad, const double* coef, int lanes, int h, int margin, int mode, float outside) {
    iir_cols<u16>(src, pad, coef, lanes, h, margin, mode, outside);
}
TESSERA_EXPORT(iir_cols_u16)
extern "C" __global__ void iir_cols_f32(const float* src, float* pad, const double* coef, int lanes, int h, int margin, int mode, float outside) {
    iir_cols<float>(src, pad, coef, lanes, h, margin, mode, outside);
}
TESSERA_EXPORT(iir_cols_f32)
extern "C" __global__ void iir_rows_u8(const float* pad, float* line, u8* dst, const double* coef, const float* inv_nx, const float* inv_ny, int w, int h, int c, int margin, int mode, float outside) {
    iir_rows<u8>(pad, line, dst, coef, inv_nx, inv_ny, w, h, c, margin, mode, outside);
}
TESSERA_EXPORT(iir_rows_u8)
extern "C" __global__ void iir_rows_u16(const float* pad, float* line, u16* dst, const double* coef, const float* inv_nx, const float* inv_ny, int w, int h, int c, int margin, int mode, float outside) {
    iir_rows<u16>(pad, line, dst, coef, inv_nx, inv_ny, w, h, c, margin, mode, outside);
}
TESSERA_EXPORT(iir_rows_u16)
extern "C" __global__ void iir_rows_f32(const float* pad, float* line, float* dst, const double* coef, const float* inv_nx, const float* inv_ny, int w, int h, int c, int margin, int mode, float outside) {
    iir_rows<float>(pad, line, dst, coef, inv_nx, inv_ny, w, h, c, margin, mode, outside);
}
TESSERA_EXPORT(iir_rows_f32)

// The recursive Gaussian, block-parallel (design `blocked`; after Nehab, Maximo, Lima and
// Hoppe, "GPU-efficient recursive filtering and summed-area tables", 2011). The filter is
// linear, so a block's output is its output from a zero state plus the zero-input response
// to the state entering it, and that state follows from the one entering the block before
// through a 3 x 3 matrix (the zero-input response over a block, computed on the host in
// f64). Lines are interleaved (sample t of line l at buf[t * lines + l]: a warp reads 32
// neighbouring lines' samples at once, coalesced), cut into blocks of `block` samples:
//   iir_pad_cols_*, iir_pad_rows: a thread per sample (neighbouring threads on
//               neighbouring lines): the padded lines, as the `line` design builds them;
//   iir_block_ends: a thread per (line, block): the block's pass from a zero state, its
//               last three states;
//   iir_block_carries: a thread per line: the state entering each block (over the ends),
//               from the line's start (the edge value; for the anti-causal pass Triggs -
//               Sdika's start from the causal pass's final state, whose first sample it
//               writes);
//   iir_block_apply: a thread per (line, block): the pass from the entering state, in place;
//   iir_store_*: a thread per output pixel.
// The causal pass runs forwards over samples 0 .. n - 1; the anti-causal one backwards over
// n - 2 .. 0 (sample n - 1 is its start). Each state is the f64 recursion's up to rounding
// in the matrix products, so outputs are the `line` design's within an f32 rounding (tested
// on the shim).

// The buffer index of position p of a pass over a line of n samples.
__device__ __forceinline__ i64 iir_at(int p, int n, int backward) { return backward ? (i64)n - 2 - p : (i64)p; }

// Sample i of a grid over `lines` interleaved lines: line i % lines, sample i / lines.
__device__ __forceinline__ bool iir_sample_of(int lines, i64 total, int& l, i64& t) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return false;
    l = (int)(i % lines);
    t = i / lines;
    return true;
}

template <typename T>
__device__ void iir_pad_cols(const T* src, float* pad, int lanes, int height, int margin) {
    int j;
    i64 t;
    if (!iir_sample_of(lanes, (i64)lanes * (height + 2 * margin), j, t)) return;
    pad[t * lanes + j] = iir_col_sample(src, lanes, height, margin, (int)t, j);
}
extern "C" __global__ void iir_pad_cols_u8(const u8* src, float* pad, int lanes, int h, int margin) { iir_pad_cols<u8>(src, pad, lanes, h, margin); }
TESSERA_EXPORT(iir_pad_cols_u8)
extern "C" __global__ void iir_pad_cols_u16(const u16* src, float* pad, int lanes, int h, int margin) { iir_pad_cols<u16>(src, pad, lanes, h, margin); }
TESSERA_EXPORT(iir_pad_cols_u16)
extern "C" __global__ void iir_pad_cols_f32(const float* src, float* pad, int lanes, int h, int margin) { iir_pad_cols<float>(src, pad, lanes, h, margin); }
TESSERA_EXPORT(iir_pad_cols_f32)

extern "C" __global__ void iir_pad_rows(const float* pad, float* line, int width, int height, int channels, int margin) {
    int lines = height * channels, l;
    i64 t;
    if (!iir_sample_of(lines, (i64)lines * (width + 2 * margin), l, t)) return;
    line[t * lines + l] = iir_row_sample(pad, width, channels, margin, l, (int)t);
}
TESSERA_EXPORT(iir_pad_rows)

extern "C" __global__ void iir_block_ends(const float* buf, double* ends, const double* coef, int lines, int n, int backward, int block) {
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    int k = blockIdx.y;
    if (l >= lines) return;
    int len = backward ? n - 1 : n;
    int p1 = min(len, (k + 1) * block);
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    for (int p = k * block; p < p1; ++p) iir_step(coef, buf[iir_at(p, n, backward) * lines + l], s0, s1, s2);
    double* e = ends + ((i64)k * lines + l) * 3;
    e[0] = s0;
    e[1] = s1;
    e[2] = s2;
}
TESSERA_EXPORT(iir_block_ends)

// `zir`: the zero-input response over a whole block, then over the last block (each 3 x 3,
// row-major: new state i = sum_j zir[3 i + j] old state j). `start`: per line, the causal
// pass's final state and the line's value after its end (written by the causal pass, read
// by the anti-causal one).
extern "C" __global__ void iir_block_carries(float* buf, double* ends, double* start, const double* coef, const double* zir, int lines, int n, int backward,
                                             int block, int mode, float outside) {
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= lines) return;
    int len = backward ? n - 1 : n;
    int blocks = (len + block - 1) / block;
    double s[3];
    double* st = start + (i64)l * 4;
    if (!backward) {
        double left = iir_edge(mode, outside, buf[l]);
        st[3] = iir_edge(mode, outside, buf[(i64)(n - 1) * lines + l]);
        s[0] = s[1] = s[2] = left;
    } else {
        double u = st[3];
        double d0 = st[0] - u, d1 = st[1] - u, d2 = st[2] - u;
        for (int i = 0; i < 3; ++i) {
            const double* r = coef + 4 + 3 * i;
            s[i] = __dadd_rn(__dadd_rn(__dadd_rn(__dmul_rn(r[0], d0), __dmul_rn(r[1], d1)), __dmul_rn(r[2], d2)), u);
        }
        buf[(i64)(n - 1) * lines + l] = (float)s[0];
    }
    for (int k = 0; k < blocks; ++k) {
        double* e = ends + ((i64)k * lines + l) * 3;
        const double* a = zir + (k + 1 == blocks ? 9 : 0);
        double next[3];
        for (int i = 0; i < 3; ++i) next[i] = a[3 * i] * s[0] + a[3 * i + 1] * s[1] + a[3 * i + 2] * s[2] + e[i];
        for (int i = 0; i < 3; ++i) {
            e[i] = s[i];
            s[i] = next[i];
        }
    }
    if (!backward) {
        st[0] = s[0];
        st[1] = s[1];
        st[2] = s[2];
    }
}
TESSERA_EXPORT(iir_block_carries)

extern "C" __global__ void iir_block_apply(float* buf, const double* carries, const double* coef, int lines, int n, int backward, int block) {
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    int k = blockIdx.y;
    if (l >= lines) return;
    int len = backward ? n - 1 : n;
    int p1 = min(len, (k + 1) * block);
    const double* c = carries + ((i64)k * lines + l) * 3;
    double s0 = c[0], s1 = c[1], s2 = c[2];
    for (int p = k * block; p < p1; ++p) {
        float* x = buf + iir_at(p, n, backward) * lines + l;
        *x = (float)iir_step(coef, *x, s0, s1, s2);
    }
}
TESSERA_EXPORT(iir_block_apply)

template <typename O>
__device__ void iir_store_all(const float* line, O* dst, const float* inv_nx, const float* inv_ny, int width, int height, int channels, int margin, int mode) {
    int lines = height * channels, l;
    i64 x;
    if (!iir_sample_of(lines, (i64)lines * width, l, x)) return;
    iir_store(line, dst, inv_nx, inv_ny, width, channels, margin, mode, lines, l, (int)x);
}
extern "C" __global__ void iir_store_u8(const float* line, u8* dst, const float* inv_nx, const float* inv_ny, int w, int h, int c, int margin, int mode) {
    iir_store_all<u8>(line, dst, inv_nx, inv_ny, w, h, c, margin, mode);
}
TESSERA_EXPORT(iir_store_u8)
extern "C" __global__ void iir_store_u16(const float* line, u16* dst, const float* inv_nx, const float* inv_ny, int w, int h, int c, int margin, int mode) {
    iir_store_all<u16>(line, dst, inv_nx, inv_ny, w, h, c, margin, mode);
}
TESSERA_EXPORT(iir_store_u16)
extern "C" __global__ void iir_store_f32(const float* line, float* dst, const float* inv_nx, const float* inv_ny, int w, int h, int c, int margin, int mode) {
    iir_store_all<float>(line, dst, inv_nx, inv_ny, w, h, c, margin, mode);
}
TESSERA_EXPORT(iir_store_f32)

//! The recursive two-pass sliding-window sum, O(1) per pixel whatever the window size.
//!
//! Vertical pass: a running sum per column (per channel lane) over the window's rows,
//! updated for each output row by adding the entering row and subtracting the leaving one
//! (vectorized across columns). Horizontal pass: a prefix sum along the border-extended row
//! of column sums (vectorized along the row: `crate::prefix`), and window sums as
//! differences of prefix sums `P[x + kw] - P[x]` (vectorized). Integer lanes accumulate in
//! wrapping integers, so differences are exact as long as one window's sum fits the
//! accumulator (guaranteed by [`MAX_WINDOW`]); f32 lanes accumulate in f64.
//!
//! Every other O(1) filter in the crate (box / mean, the recursive local variance, the
//! glare detector's local statistics) is built on [`window_sums`].

use crate::border::Border;
use crate::error::{Error, Result};
use crate::prefix::{prefix_sum, prefix_sum_in_place};
use crate::simd::{AlignedRow, Lane};
use alloc::vec::Vec;
use core::ops::Range;
use crate::cpu::multiversion;

/// Largest window side: 255 * 4095^2 < 2^32, so u8 window sums fit u32 exactly.
pub const MAX_WINDOW: usize = 4095;

/// A read-only image seen as rows of channel lanes (an RGBA row of `w` pixels is `4 w` u8).
#[derive(Clone, Copy, Debug)]
pub struct LaneView<'a, L> {
    pub data: &'a [L],
    /// Pixels per row.
    pub width: usize,
    pub height: usize,
    /// Lanes between row starts.
    pub stride: usize,
    /// Lanes per pixel (1 or 4).
    pub channels: usize,
}

impl<'a, L> LaneView<'a, L> {
    #[inline]
    fn row(&self, y: usize) -> &'a [L] {
        &self.data[y * self.stride..y * self.stride + self.width * self.channels]
    }
}

/// A window of `width x height` pixels; the output pixel sits at column `width / 2` and row
/// `height / 2` of its window (the centre for odd sizes, OpenCV's anchor for even ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub width: usize,
    pub height: usize,
}

impl Window {
    pub fn square(side: usize) -> Self {
        Window { width: side, height: side }
    }
    /// From a radius r: a (2r + 1) square.
    pub fn radius(r: usize) -> Self {
        Self::square(2 * r + 1)
    }
    pub fn validate(&self) -> Result<()> {
        crate::error::require_range("window width", self.width, 1, MAX_WINDOW as i64)?;
        crate::error::require_range("window height", self.height, 1, MAX_WINDOW as i64)
    }
    /// Pixels before and after the anchor along a side of length `k`.
    #[inline]
    pub fn reach(k: usize) -> (usize, usize) {
        (k / 2, k - 1 - k / 2)
    }
    pub fn area(&self) -> usize {
        self.width * self.height
    }
}

/// Calls `sink(y, sums)` for each output row `y` in `rows`, where `sums[x * channels + c]`
/// is the sum of channel `c` over the window around `(x, y)`, outside pixels given by
/// `border` (`Normalize` and `Constant` outside pixels count as 0 and the constant).
/// Cost: O(width + window width) per row, plus O(window height) rows to start a band.
pub fn window_sums<L: Lane>(
    src: &LaneView<'_, L>,
    win: Window,
    border: Border,
    rows: Range<usize>,
    mut sink: impl FnMut(usize, &[L::Acc]),
) -> Result<()> {
    win.validate()?;
    let (w, h, c) = (src.width, src.height, src.channels);
    if rows.end > h {
        return Err(Error::OutOfRange { name: "row", value: rows.end as i64, min: 0, max: h as i64 });
    }
    if rows.is_empty() {
        return Ok(());
    }
    let n = w * c;
    let (up, down) = Window::reach(win.height);
    let (left, _) = Window::reach(win.width);
    let outside = border.outside_value();
    let const_row: Vec<L> = match border {
        Border::Constant(_) | Border::Normalize => crate::error::try_filled(n, L::from_f32(outside))?,
        _ => Vec::new(),
    };
    let source_row = |yy: isize| -> &[L] {
        match border.source_index(yy, h) {
            Some(r) => src.row(r),
            None => &const_row,
        }
    };

    let mut col_row = AlignedRow::new(n + c, 0)?;
    let col = col_row.as_mut_slice();
    let y0 = rows.start as isize;
    // The band starts from its first window's column sums, in one pass over the column
    // blocks (rows mirrored or clamped past the edge come in as often as the window has them).
    let window_rows: Vec<&[L]> = (y0 - up as isize..=y0 + down as isize).map(source_row).collect();
    L::add_rows(&mut col[..n], &window_rows);
    // Column sum of a fully outside column (Constant border): kh copies of the constant.
    let outside_col = L::acc_from_f64(outside as f64 * win.height as f64);
    col[n..].fill(outside_col);
    let right = win.width - 1 - left;
    // Reflect101 of one channel with a window narrower than the image: the prefix covers
    // the row only, and the windows that reach past an edge add the mirrored columns'
    // sum from the same prefix (O(1) each). The row's cost is then O(width) whatever the
    // window; every other case prefixes the border-extended row.
    let mirror_direct = c == 1 && border == Border::Reflect101 && left < w && right < w;
    let plen = if mirror_direct { n + 1 } else { (w + win.width) * c };
    // For the extended columns left and right of the image, the lane of `col` each reads
    // (looked up once per call, not per row); lanes n..n + c of `col` hold the column sum
    // of a fully outside column.
    let lane_sources = |js: Range<usize>| -> Vec<usize> {
        js.flat_map(|j| {
            let from = border.source_index(j as isize - left as isize, w);
            (0..c).map(move |ch| from.map_or(n + ch, |x| x * c + ch))
        })
        .collect()
    };
    let (left_lanes, right_lanes) =
        if mirror_direct { (Vec::new(), Vec::new()) } else { (lane_sources(0..left), lane_sources(left + w..w + win.width - 1)) };
    // The prefix's vector stores start at p[1] (mirror_direct) or p[0]; mirror_direct
    // keeps MIRROR_PAD elements on each side.
    let pad = if mirror_direct { MIRROR_PAD } else { 0 };
    let mut p_row = AlignedRow::new(plen + 2 * pad, pad + mirror_direct as usize)?;
    let padded = p_row.as_mut_slice();
    let mut sums_row = AlignedRow::new(n, 0)?;
    let sums = sums_row.as_mut_slice();
    for y in rows {
        if y as isize > y0 {
            let enter = source_row(y as isize + down as isize);
            let leave = source_row(y as isize - up as isize - 1);
            L::slide_row(col, enter, leave);
        }
        if mirror_direct {
            // p[0] = 0, p[i + 1] = the sum of the first i + 1 column sums.
            prefix_sum(&col[..n], &mut padded[pad + 1..pad + plen], 1);
            mirrored_window_sums::<L>(padded, left, right, sums);
        } else {
            let p = &mut *padded;
            // p[(j + 1) c + ch] = column sum at extended column j - left (p[..c] stays 0).
            // The interior is one contiguous copy; only the border columns need a lookup.
            p[(left + 1) * c..(left + 1) * c + n].copy_from_slice(&col[..n]);
            let (left_ext, rest) = p[c..].split_at_mut(left * c);
            let right_ext = &mut rest[n..];
            for (d, &from) in left_ext.iter_mut().zip(&left_lanes) {
                *d = col[from];
            }
            for (d, &from) in right_ext.iter_mut().zip(&right_lanes) {
                *d = col[from];
            }
            prefix_sum_in_place(p, c);
            L::window_diff(p, win.width * c, sums);
        }
        sink(y, sums);
    }
    Ok(())
}

/// The edges of [`mirrored_window_sums`] go in runs of a multiple of this many windows
/// (one 512-bit vector of u32 sums), and its prefix row keeps this many elements on each
/// side for them to read.
const MIRROR_PAD: usize = 16;

multiversion! {
    /// Window sums of one channel from the prefix `p` of the row alone (`p[i]` = sum of the
    /// first `i` column sums, at `padded[MIRROR_PAD + i]`), Reflect101 outside,
    /// `left, right < w`: columns `-j` and `w - 1 + j` mirror `j` and `w - 1 - j`, so the
    /// outside part of a window is a run of interior columns, itself a difference of prefixes:
    /// `p[min(b, w - 1) + 1] - p[max(a, 0)]`, plus `p[-a + 1] - p[1]` past the left edge
    /// (`a = x - left < 0`) and `p[w - 1] - p[2w - 2 - b]` past the right one
    /// (`b = x + right > w - 1`).
    ///
    /// The edges, whose mirrored term runs backwards along `p`, are vector loops with a lane
    /// reversal over a multiple of 16 windows, so that they have no scalar tail: the run goes
    /// on past the edge into the interior, whose plain differences are written after it, and
    /// reads the padding, whose results land only there. A row too short for that takes the edges' formula one
    /// window at a time.
    fn mirrored_window_sums<L: Lane>(padded: &[L::Acc], left: usize, right: usize, sums: &mut [L::Acc]) {
        const B: usize = MIRROR_PAD;
        let w = sums.len();
        let add = L::acc_add;
        let p = &padded[MIRROR_PAD..MIRROR_PAD + w + 1];
        if left.next_multiple_of(B) + right > w || left + right.next_multiple_of(B) > w {
            return short_row_window_sums::<L>(p, left, right, sums);
        }
        // Left edge, x < left: p[x + right + 1] + p[left + 1 - x] - (p[0] + p[1]), the second
        // term read backwards from padded[MIRROR_PAD + left + 1].
        let (lw, rw) = (left.next_multiple_of(B), right.next_multiple_of(B));
        let first = add(p[0], p[1]);
        let rev = &padded[MIRROR_PAD + left + 2 - lw..MIRROR_PAD + left + 2];
        reversed_pair_sums::<L>(&mut sums[..lw], &p[right + 1..right + 1 + lw], rev, first, false);
        // Right edge, x >= w - right: (p[w] + p[w - 1]) - (p[x - left] + p[2w - 2 - right - x]).
        let last = add(p[w], p[w - 1]);
        let rev = &padded[MIRROR_PAD + w - 1 - right..MIRROR_PAD + w - 1 - right + rw];
        reversed_pair_sums::<L>(&mut sums[w - rw..], &p[w - rw - left..w - left], rev, last, true);
        L::window_diff(p, left + right + 1, &mut sums[left..w - right]);
    }
}

/// [`mirrored_window_sums`] of a row too short for its edge runs: the edges' formula one
/// window at a time. (Its own function: inlined, it changed how LLVM vectorized the runs.)
#[inline(never)]
fn short_row_window_sums<L: Lane>(p: &[L::Acc], left: usize, right: usize, sums: &mut [L::Acc]) {
    let w = sums.len();
    let (sub, add) = (L::acc_sub, L::acc_add);
    let interior = left..(w - right).max(left);
    for x in (0..left).chain(interior.end..w) {
        let (a, b) = (x as isize - left as isize, x + right);
        let mut s = sub(p[b.min(w - 1) + 1], p[a.max(0) as usize]);
        if a < 0 {
            s = add(s, sub(p[(1 - a) as usize], p[1]));
        }
        if b > w - 1 {
            s = add(s, sub(p[w - 1], p[2 * w - 2 - b]));
        }
        sums[x] = s;
    }
    if !interior.is_empty() {
        L::window_diff(p, left + right + 1, &mut sums[interior]);
    }
}

/// `out[i] = fwd[i] + rev[n - 1 - i] - k` (`k - (..)` if `negate`), `n = out.len()`, a
/// multiple of [`MIRROR_PAD`]: fixed-size chunks, each one vector load, lane reversal and
/// add. (A plain zipped loop left LLVM to pick the vector width by the run's length: runs
/// under 64 windows went scalar, 4x the cost of an interior window.)
#[inline(always)]
fn reversed_pair_sums<L: Lane>(out: &mut [L::Acc], fwd: &[L::Acc], rev: &[L::Acc], k: L::Acc, negate: bool) {
    const C: usize = MIRROR_PAD;
    let chunks = out.chunks_exact_mut(C).zip(fwd.chunks_exact(C)).zip(rev.rchunks_exact(C));
    for ((o, f), r) in chunks {
        crate::simd::vectorize_body_only();
        for j in 0..C {
            let v = L::acc_add(f[j], r[C - 1 - j]);
            o[j] = if negate { L::acc_sub(k, v) } else { L::acc_sub(v, k) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn naive(data: &[u8], w: usize, h: usize, win: Window, border: Border, x: usize, y: usize) -> u32 {
        let (up, _) = Window::reach(win.height);
        let (left, _) = Window::reach(win.width);
        let mut s = 0u32;
        for dy in 0..win.height {
            for dx in 0..win.width {
                let yy = border.source_index(y as isize + dy as isize - up as isize, h);
                let xx = border.source_index(x as isize + dx as isize - left as isize, w);
                s += match (xx, yy) {
                    (Some(xx), Some(yy)) => data[yy * w + xx] as u32,
                    _ => border.outside_value() as u32,
                };
            }
        }
        s
    }

    #[test]
    fn reflected_rows_match_naive_at_every_length_and_reach() {
        crate::testing::at_every_level(|_| {
            // Every row length up to 80 and every window that reaches past at most one image's
            // width: the edge blocks (with their tails in the interior and the padding), the
            // window-by-window formula of short rows, windows past both edges. Two long rows
            // take edges of 8 blocks and more.
            for w in (1..=80).chain([271, 333]) {
                let data: Vec<u8> = (0..2 * w).map(|i| (i * 73 % 256) as u8).collect();
                let view = LaneView { data: &data, width: w, height: 2, stride: w, channels: 1 };
                for kw in (1..2 * w).step_by(if w > 80 { 7 } else { 1 }) {
                    let win = Window { width: kw, height: 3 };
                    let mut got = vec![0u32; 2 * w];
                    window_sums(&view, win, Border::Reflect101, 0..2, |y, s| got[y * w..(y + 1) * w].copy_from_slice(s)).unwrap();
                    for y in 0..2 {
                        for x in 0..w {
                            let want = naive(&data, w, 2, win, Border::Reflect101, x, y);
                            assert_eq!(got[y * w + x], want, "w = {w}, {win:?}, ({x},{y})");
                        }
                    }
                }
            }
        });
    }

    #[test]
    fn sums_match_naive_for_every_border() {
        let (w, h) = (7, 5);
        let data: Vec<u8> = (0..w * h).map(|i| (i * 37 % 251) as u8).collect();
        let view = LaneView { data: &data, width: w, height: h, stride: w, channels: 1 };
        for border in [Border::Reflect101, Border::Replicate, Border::Constant(9.0), Border::Normalize] {
            for win in [Window::square(1), Window::square(3), Window { width: 4, height: 9 }, Window::square(15)] {
                let mut got = vec![0u32; w * h];
                window_sums(&view, win, border, 0..h, |y, s| got[y * w..(y + 1) * w].copy_from_slice(s)).unwrap();
                for y in 0..h {
                    for x in 0..w {
                        assert_eq!(got[y * w + x], naive(&data, w, h, win, border, x, y), "{border:?} {win:?} ({x},{y})");
                    }
                }
            }
        }
    }
}

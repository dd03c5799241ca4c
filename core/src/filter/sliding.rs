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
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;
#[cfg(feature = "std")]
use multiversion::multiversion;

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
        crate::error::require_range("window width", self.width as i64, 1, MAX_WINDOW as i64)?;
        crate::error::require_range("window height", self.height as i64, 1, MAX_WINDOW as i64)
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
        Border::Constant(_) | Border::Normalize => vec![L::from_f32(outside); n],
        _ => Vec::new(),
    };
    let source_row = |yy: isize| -> &[L] {
        match border.source_index(yy, h) {
            Some(r) => src.row(r),
            None => &const_row,
        }
    };

    let mut col_row = AlignedRow::new(n + c, 0);
    let col = col_row.as_mut_slice();
    let y0 = rows.start as isize;
    for yy in y0 - up as isize..=y0 + down as isize {
        L::add_row(col, source_row(yy));
    }
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
    // The prefix's vector stores start at p[1] (mirror_direct) or p[0].
    let mut p_row = AlignedRow::new(plen, mirror_direct as usize);
    let p = p_row.as_mut_slice();
    let mut sums_row = AlignedRow::new(n, 0);
    let sums = sums_row.as_mut_slice();
    for y in rows {
        if y as isize > y0 {
            let enter = source_row(y as isize + down as isize);
            let leave = source_row(y as isize - up as isize - 1);
            L::slide_row(col, enter, leave);
        }
        if mirror_direct {
            // p[0] = 0, p[i + 1] = the sum of the first i + 1 column sums.
            prefix_sum(&col[..n], &mut p[1..], 1);
            mirrored_window_sums::<L>(p, left, right, sums);
        } else {
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

/// Window sums of one channel from the prefix `p` of the row alone (`p[i]` = sum of the
/// first `i` column sums), Reflect101 outside, `left, right < w`: columns `-j` and
/// `w - 1 + j` mirror `j` and `w - 1 - j`, so the outside part of a window is a run of
/// interior columns, itself a difference of prefixes.
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn mirrored_window_sums<L: Lane>(p: &[L::Acc], left: usize, right: usize, sums: &mut [L::Acc]) {
    let w = sums.len();
    let (sub, add) = (L::acc_sub, L::acc_add);
    // Windows past the left edge only, past neither, past the right edge only.
    let left_only = left.min(w - right);
    let right_from = (w - right).max(left);
    // columns a..-1 (a = x - left < 0) mirror 1..=-a: p[left - x + 1] - p[1].
    let first = add(p[0], p[1]);
    let mirrors = &p[2 + left - left_only..left + 2];
    reversed_pair_sums::<L>(&mut sums[..left_only], &p[right + 1..], mirrors, first, false);
    if left < w - right {
        L::window_diff(p, left + right + 1, &mut sums[left..w - right]);
    }
    // columns w..=b (b = x + right > w - 1) mirror 2w - 2 - b ..= w - 2: p[w - 1] - p[2w - 2 - b].
    let last = add(p[w], p[w - 1]);
    let mirrors = &p[2 * w - 1 - right - w..2 * w - 1 - right - right_from];
    reversed_pair_sums::<L>(&mut sums[right_from..], &p[right_from - left..], mirrors, last, true);
    // Windows past both edges (wider than half the image): the whole row plus both mirrors.
    let both = w - right..left.max(w - right);
    for (x, o) in both.clone().zip(&mut sums[both]) {
        let (a, b) = (left - x, x + right);
        *o = add(sub(p[w], p[0]), add(sub(p[a + 1], p[1]), sub(p[w - 1], p[2 * w - 2 - b])));
    }
}

/// `out[i] = fwd[i] + rev[n - 1 - i] - k` (`k - (..)` if `negate`), `n = out.len() = rev.len()`:
/// the windows at a mirrored edge. In fixed blocks of 16, each one vector with a lane
/// reversal (a plain loop left up to 63 of a wide window's edge to its scalar tail); the
/// last block overlaps the one before.
#[inline(always)]
fn reversed_pair_sums<L: Lane>(out: &mut [L::Acc], fwd: &[L::Acc], rev: &[L::Acc], k: L::Acc, negate: bool) {
    const B: usize = 16;
    let one = |f: L::Acc, r: L::Acc| {
        let v = L::acc_add(f, r);
        if negate { L::acc_sub(k, v) } else { L::acc_sub(v, k) }
    };
    let n = out.len();
    if n < B {
        for ((o, &f), &r) in out.iter_mut().zip(fwd).zip(rev.iter().rev()) {
            *o = one(f, r);
        }
        return;
    }
    let mut s = 0;
    loop {
        let blocks = (
            <&mut [L::Acc; B]>::try_from(&mut out[s..s + B]),
            <&[L::Acc; B]>::try_from(&fwd[s..s + B]),
            <&[L::Acc; B]>::try_from(&rev[n - B - s..n - s]),
        );
        if let (Ok(o), Ok(f), Ok(r)) = blocks {
            for j in 0..B {
                o[j] = one(f[j], r[B - 1 - j]);
            }
        }
        if s == n - B {
            break;
        }
        s = (s + B).min(n - B);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

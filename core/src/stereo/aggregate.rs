//! Semi-global path aggregation (Hirschmueller 2008, eq. 13-14). Along each direction `r`
//!
//! `L_r(p, d) = C(p, d) + min(L_r(p - r, d), L_r(p - r, d -+ 1) + P1, min_i L_r(p - r, i) + P2)
//!              - min_k L_r(p - r, k)`
//!
//! and `L_r(p, d) = C(p, d)` where `p - r` is outside the image (the path starts there).
//! The subtraction keeps `L_r <= C_max + P2`, so with `(C_max + P2) * paths <= 65535`
//! ([`Penalties::validate`]) every path cost and their sum `S(p, d) = sum_r L_r(p, d)` fit
//! a u16 exactly: the saturating u16 arithmetic never actually saturates and the result
//! equals the exact integer recursion.
//!
//! Memory: only the summed volume is held, never one volume per direction. Directions are
//! run in two sweeps over the image, the downward ones top to bottom and the upward ones
//! bottom to top, each keeping only the last one or two rows of its path costs; the
//! horizontal paths ride along (one per sweep), so every row of `S` is touched twice. The
//! two sweeps run at the same time on disjoint halves of `S` (down on the top half while up
//! does the bottom half, then the other way round), so no row of `S` is written by two
//! threads and no lock is needed.
//! The inner loop runs along the disparity axis in u16 lanes (vpminuw / vpaddusw).

use super::{CostVolume, Rect, RowCost};
use crate::error::{Error, Result};
use crate::image::{check_same_size, ImageView, ImageViewMut};
use crate::parallel::{for_each_band, Parallelism};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
#[cfg(feature = "std")]
use multiversion::multiversion;

/// A path direction `r = (dx, dy)`: the path reaches `p` from `p - r`. `dy > 0` runs down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Direction {
    pub dx: i8,
    pub dy: i8,
}

const fn dir(dx: i8, dy: i8) -> Direction {
    Direction { dx, dy }
}

/// Left, right, down, up.
pub const PATHS_4: [Direction; 4] = [dir(1, 0), dir(-1, 0), dir(0, 1), dir(0, -1)];
/// The five directions of a single top-to-bottom pass.
pub const PATHS_5: [Direction; 5] = [dir(1, 0), dir(-1, 0), dir(0, 1), dir(1, 1), dir(-1, 1)];
/// Horizontals, verticals and diagonals.
pub const PATHS_8: [Direction; 8] =
    [dir(1, 0), dir(-1, 0), dir(0, 1), dir(0, -1), dir(1, 1), dir(-1, 1), dir(1, -1), dir(-1, -1)];
/// The 8 plus the knight moves.
pub const PATHS_16: [Direction; 16] = [
    dir(1, 0),
    dir(-1, 0),
    dir(0, 1),
    dir(0, -1),
    dir(1, 1),
    dir(-1, 1),
    dir(1, -1),
    dir(-1, -1),
    dir(2, 1),
    dir(-2, 1),
    dir(2, -1),
    dir(-2, -1),
    dir(1, 2),
    dir(-1, 2),
    dir(1, -2),
    dir(-1, -2),
];

/// The smoothness penalties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Penalties {
    /// Penalty for a disparity change of 1 between neighbours on a path.
    pub p1: u16,
    /// Penalty for a larger change (>= P1).
    pub p2: u16,
    /// Use `max(P1, P2 / |I(p) - I(p - r)|)` where the guide image changes along the path.
    pub adaptive_p2: bool,
}

impl Penalties {
    /// `P1 <= P2` and `(cost_max + P2) * paths <= 65535` (no u16 overflow; see module doc).
    pub fn validate(&self, paths: usize, cost_max: u16) -> Result<()> {
        if self.p2 < self.p1 {
            return Err(Error::InvalidParameter {
                name: "P2",
                reason: format!("P2 = {} is smaller than P1 = {}; need P1 <= P2", self.p2, self.p1),
            });
        }
        let paths = paths.max(1) as i64;
        let max = (65535 / paths - cost_max as i64).max(0);
        crate::error::require_range("P2", self.p2 as i64, 0, max)
    }

    /// P2 on the step from a pixel of intensity `from` to one of intensity `to`.
    #[inline]
    pub fn p2_step(&self, from: u8, to: u8) -> u16 {
        let g = from.abs_diff(to) as u16;
        if self.adaptive_p2 && g > 0 {
            (self.p2 / g).max(self.p1)
        } else {
            self.p2
        }
    }
}

/// The summed path costs `S(x, y, d)` at `data[(y * W + x) * D + d]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SummedVolume {
    pub width: usize,
    pub height: usize,
    pub disparities: usize,
    pub data: Vec<u16>,
}

impl SummedVolume {
    /// Checks that `data` holds exactly `width * height * disparities` sums, none of the sizes zero.
    pub fn validate(&self) -> Result<()> {
        let n = self.width.checked_mul(self.height).and_then(|n| n.checked_mul(self.disparities));
        if n != Some(self.data.len()) || self.data.is_empty() {
            return Err(Error::InvalidParameter {
                name: "summed volume",
                reason: format!("{} sums for {} x {} x {}", self.data.len(), self.width, self.height, self.disparities),
            });
        }
        Ok(())
    }
    #[inline]
    pub fn pixel(&self, x: usize, y: usize) -> &[u16] {
        let i = (y * self.width + x) * self.disparities;
        &self.data[i..i + self.disparities]
    }
}

/// One step of eq. 13 for all disparities of a pixel. `prev` holds the previous pixel's
/// path costs at `prev[1..=D]` with `prev[0] = prev[D + 1] = u16::MAX` (so `d -+ 1` outside
/// the range never wins) and `m` is their minimum. Writes `out[1..=D]`, adds to `sum`,
/// returns the minimum of the new costs.
#[inline(always)]
fn path_step(prev: &[u16], m: u16, cost: &[u8], p1: u16, p2: u16, out: &mut [u16], sum: &mut [u16]) -> u16 {
    let n = cost.len();
    let (same, lower, upper) = (&prev[1..n + 1], &prev[..n], &prev[2..n + 2]);
    let out = &mut out[1..n + 1];
    let sum = &mut sum[..n];
    let jump = m.saturating_add(p2);
    let mut mn = u16::MAX;
    for (((((o, s), &c), &a), &b), &e) in out.iter_mut().zip(sum.iter_mut()).zip(cost).zip(same).zip(lower).zip(upper) {
        let best = a.min(b.saturating_add(p1)).min(e.saturating_add(p1)).min(jump);
        // best >= m (every candidate is), so this never wraps.
        let l = (c as u16).wrapping_add(best.wrapping_sub(m));
        *o = l;
        *s = s.saturating_add(l);
        mn = mn.min(l);
    }
    mn
}

/// Path start: `L = C`. Same layout as [`path_step`].
#[inline(always)]
fn path_start(cost: &[u8], out: &mut [u16], sum: &mut [u16]) -> u16 {
    let n = cost.len();
    let out = &mut out[1..n + 1];
    let mut mn = u16::MAX;
    for ((o, s), &c) in out.iter_mut().zip(sum[..n].iter_mut()).zip(cost) {
        *o = c as u16;
        *s = s.saturating_add(c as u16);
        mn = mn.min(c as u16);
    }
    mn
}

#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn max_u8(v: &[u8]) -> u8 {
    v.iter().copied().fold(0, u8::max)
}

/// Bytes of path line buffers the sweeps of `dirs` hold for a `width x .. x disparities`
/// volume (the part of the working set beside the cost and summed volumes).
pub fn line_buffer_bytes(width: usize, disparities: usize, dirs: &[Direction], threads: usize) -> usize {
    let slot = disparities + 2;
    let vertical: usize = dirs.iter().filter(|r| r.dy != 0).map(|r| (r.dy.unsigned_abs() as usize + 1) * width * (slot + 1)).sum();
    let horizontal = if dirs.iter().any(|r| r.dy == 0) { threads.max(1) * 2 * 2 * slot } else { 0 };
    2 * (vertical + horizontal)
}

/// Sums eq. 13 over `dirs` for the cost volume: `S(p, d) = sum_r L_r(p, d)`.
///
/// `dirs` must be distinct members of [`PATHS_16`]; `guide` (the left image, same size as
/// the volume) is required when `pen.adaptive_p2` and gives `I` of the adaptive P2.
/// Errors: empty or unknown directions, P2 < P1, `(max cost + P2) * paths > 65535`, a
/// missing or mis-sized guide.
pub fn aggregate(
    cost: &CostVolume,
    dirs: &[Direction],
    pen: &Penalties,
    guide: Option<ImageView<'_, u8>>,
    par: Parallelism,
) -> Result<SummedVolume> {
    if dirs.is_empty() {
        return Err(Error::InvalidParameter { name: "directions", reason: "no aggregation direction given".into() });
    }
    for (i, r) in dirs.iter().enumerate() {
        if !PATHS_16.contains(r) || dirs[..i].contains(r) {
            return Err(Error::InvalidParameter {
                name: "directions",
                reason: format!("({}, {}) is unknown or repeated; directions are distinct members of PATHS_16", r.dx, r.dy),
            });
        }
    }
    let (w, h, nd) = (cost.width, cost.height, cost.disparities);
    if w == 0 || h == 0 || nd == 0 || cost.data.len() != w * h * nd {
        return Err(Error::InvalidParameter {
            name: "cost volume",
            reason: format!("{} costs for {w} x {h} x {nd}", cost.data.len()),
        });
    }
    let region = Rect { x: 0, y: 0, width: w, height: h };
    aggregate_rows(cost, region, nd, max_u8(&cost.data) as u16, dirs, pen, guide, par)
}

/// [`aggregate`] over costs computed row by row on demand (each sweep computes a row once
/// and uses it for all its directions), for the region `r` of the source's image: the
/// pipeline never holds a cost volume, only the summed one. `cost_max` bounds the costs
/// (for the overflow check); `guide` covers the region.
#[allow(clippy::too_many_arguments)]
pub(crate) fn aggregate_rows(
    src: &dyn RowCost,
    r: Rect,
    nd: usize,
    cost_max: u16,
    dirs: &[Direction],
    pen: &Penalties,
    guide: Option<ImageView<'_, u8>>,
    par: Parallelism,
) -> Result<SummedVolume> {
    let (w, h) = (r.width, r.height);
    if w == 0 || h == 0 || nd == 0 {
        return Err(Error::ZeroSize { width: w, height: h });
    }
    pen.validate(dirs.len(), cost_max)?;
    if pen.adaptive_p2 {
        match guide {
            Some(g) => check_same_size((w, h), g.size())?,
            None => {
                return Err(Error::InvalidParameter {
                    name: "guide",
                    reason: "adaptive P2 needs the guide (left) image".into(),
                })
            }
        }
    }
    let guide = if pen.adaptive_p2 { guide } else { None };
    let mut sum = vec![0u16; w * h * nd];
    let horizontal: Vec<Direction> = dirs.iter().copied().filter(|r| r.dy == 0).collect();
    let down: Vec<Direction> = dirs.iter().copied().filter(|r| r.dy > 0).collect();
    let up: Vec<Direction> = dirs.iter().copied().filter(|r| r.dy < 0).collect();

    // Horizontal paths ride along with the vertical sweeps (one each, to balance the two
    // threads), so each row of S is touched by two sweeps only; with no vertical direction
    // they run alone, rows in parallel.
    let n = w * nd;
    let (mut h_down, mut h_up) = (Vec::new(), Vec::new());
    for (i, r) in horizontal.iter().enumerate() {
        if up.is_empty() || (i % 2 == 0 && !down.is_empty()) {
            h_down.push(*r);
        } else {
            h_up.push(*r);
        }
    }
    let mut dn = Sweep::new(src, r, nd, down, h_down, *pen, guide);
    let mut upw = Sweep::new(src, r, nd, up, h_up, *pen, guide);
    match (dn.dirs.is_empty(), upw.dirs.is_empty()) {
        (true, true) => {
            if let Ok(view) = ImageViewMut::from_slice(&mut sum, n, h) {
                for_each_band(view, par, 8, |y0, mut band| {
                    let slot = nd + 2;
                    let mut a = vec![u16::MAX; slot];
                    let mut b = vec![u16::MAX; slot];
                    let mut crow = vec![0u8; w * nd];
                    for j in 0..band.height() {
                        let srow = band.row_mut(j);
                        src.cost_row(r.y + y0 + j, r.x, w, nd, &mut crow);
                        for d in &horizontal {
                            horizontal_row(&crow, nd, d.dx > 0, pen, guide.map(|g| g.row(y0 + j)), srow, &mut a, &mut b);
                        }
                    }
                });
            }
        }
        (false, true) => dn.run(0..h, &mut sum, 0),
        (true, false) => upw.run((0..h).rev(), &mut sum, 0),
        (false, false) => {
            // Down on the top half while up does the bottom half, then the other way round:
            // no row of S is written by two threads at once.
            let mid = h / 2;
            let (top, bottom) = sum.split_at_mut(mid * n);
            join(par, || dn.run(0..mid, top, 0), || upw.run((mid..h).rev(), bottom, mid));
            join(par, || dn.run(mid..h, bottom, mid), || upw.run((0..mid).rev(), top, 0));
        }
    }
    Ok(SummedVolume { width: w, height: h, disparities: nd, data: sum })
}

fn join(par: Parallelism, a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
    #[cfg(feature = "parallel")]
    if par.threads() > 1 {
        rayon::join(a, b);
        return;
    }
    let _ = par;
    a();
    b();
}

/// One horizontal path (`forward`: left to right) along a row of costs, added into `srow`;
/// one compiled version per x86 level so the per-pixel steps inline into it.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn horizontal_row(crow: &[u8], nd: usize, forward: bool, pen: &Penalties, grow: Option<&[u8]>, srow: &mut [u16], a: &mut [u16], b: &mut [u16]) {
    let w = crow.len() / nd;
    let (mut a, mut b) = (a, b);
    let mut m = 0;
    for i in 0..w {
        let x = if forward { i } else { w - 1 - i };
        let c = &crow[x * nd..(x + 1) * nd];
        let s = &mut srow[x * nd..(x + 1) * nd];
        if i == 0 {
            m = path_start(c, b, s);
        } else {
            let px = if forward { x - 1 } else { x + 1 };
            let p2 = grow.map_or(pen.p2, |g| pen.p2_step(g[px], g[x]));
            m = path_step(a, m, c, pen.p1, p2, b, s);
        }
        core::mem::swap(&mut a, &mut b);
    }
}

/// The state of one vertical sweep: for each of its directions, the path costs of the last
/// `keep` rows (ring buffer, `slot = D + 2` u16 per pixel with MAX sentinels) and their
/// per-pixel minima.
struct Sweep<'c> {
    src: &'c dyn RowCost,
    region: Rect,
    nd: usize,
    /// The costs of the current row.
    crow: Vec<u8>,
    dirs: Vec<Direction>,
    /// Horizontal directions run on each row of this sweep.
    horizontal: Vec<Direction>,
    scratch: (Vec<u16>, Vec<u16>),
    pen: Penalties,
    guide: Option<ImageView<'c, u8>>,
    keep: usize,
    bufs: Vec<Vec<u16>>,
    mins: Vec<Vec<u16>>,
}

impl<'c> Sweep<'c> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        src: &'c dyn RowCost,
        region: Rect,
        nd: usize,
        dirs: Vec<Direction>,
        horizontal: Vec<Direction>,
        pen: Penalties,
        guide: Option<ImageView<'c, u8>>,
    ) -> Self {
        let keep = dirs.iter().map(|r| r.dy.unsigned_abs() as usize).max().unwrap_or(0) + 1;
        let w = region.width;
        let slot = nd + 2;
        let bufs = dirs.iter().map(|_| vec![u16::MAX; keep * w * slot]).collect();
        let mins = dirs.iter().map(|_| vec![0u16; keep * w]).collect();
        let scratch = (vec![u16::MAX; slot], vec![u16::MAX; slot]);
        let crow = if dirs.is_empty() && horizontal.is_empty() { Vec::new() } else { vec![0u8; w * nd] };
        Sweep { src, region, nd, crow, dirs, horizontal, scratch, pen, guide, keep, bufs, mins }
    }

    /// Processes `rows` in order (all of this sweep's direction: increasing for down,
    /// decreasing for up), adding into the slab of `S` whose first row is `slab_y0`
    /// (S starts zeroed: the u16 adds of two sweeps then give the exact sum).
    fn run(&mut self, rows: impl Iterator<Item = usize>, slab: &mut [u16], slab_y0: usize) {
        let (w, h, nd) = (self.region.width, self.region.height, self.nd);
        let slot = nd + 2;
        let n = w * nd;
        for y in rows {
            let srow = &mut slab[(y - slab_y0) * n..(y - slab_y0 + 1) * n];
            self.src.cost_row(self.region.y + y, self.region.x, w, nd, &mut self.crow);
            let crow = &self.crow[..];
            let cur = y % self.keep;
            let mut views: Vec<DirRow<'_>> = Vec::with_capacity(self.dirs.len());
            for ((r, buf), mins) in self.dirs.iter().zip(self.bufs.iter_mut()).zip(self.mins.iter_mut()) {
                let py = y as isize - r.dy as isize;
                let has_prev_row = py >= 0 && py < h as isize;
                let prv = if has_prev_row { py as usize % self.keep } else { cur };
                let (out_row, prev_row) = split_pair(buf, w * slot, cur, prv);
                let (out_min, prev_min) = split_pair(mins, w, cur, prv);
                let grow = if has_prev_row { self.guide.map(|g| (g.row(y), g.row(py as usize))) } else { None };
                let prev = if has_prev_row { Some((prev_row, prev_min)) } else { None };
                views.push(DirRow { dx: r.dx as isize, out_row, out_min, prev, grow });
            }
            // The first horizontal path runs in the same loop over x as the vertical ones:
            // its step-to-step dependency chain overlaps with their independent work.
            let grow = self.guide.map(|g| g.row(y));
            let (a, b) = (&mut self.scratch.0[..], &mut self.scratch.1[..]);
            let forward = !matches!(self.horizontal.first(), Some(r) if r.dx < 0);
            let hz = self.horizontal.first().map(|_| (a, b));
            sweep_row(crow, nd, forward, hz, grow, &mut views, srow, &self.pen);
            for r in self.horizontal.iter().skip(1) {
                let (a, b) = (&mut self.scratch.0, &mut self.scratch.1);
                horizontal_row(crow, nd, r.dx > 0, &self.pen, grow, srow, a, b);
            }
        }
    }
}

/// One direction's buffers for the current row of a sweep.
struct DirRow<'a> {
    dx: isize,
    out_row: &'a mut [u16],
    out_min: &'a mut [u16],
    /// Row `y - dy`'s path costs and minima; `None` at the first row (paths start).
    prev: Option<(&'a [u16], &'a [u16])>,
    /// Guide rows `y` and `y - dy` for the adaptive P2.
    grow: Option<(&'a [u8], &'a [u8])>,
}

/// One row of a sweep: for each x (in the horizontal path's order), the horizontal step
/// when `hz` holds its two scratch slots, then every vertical / diagonal direction's step.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(feature = "std", multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma")))]
fn sweep_row<'d>(
    crow: &[u8],
    nd: usize,
    forward: bool,
    hz: Option<(&mut [u16], &mut [u16])>,
    hguide: Option<&[u8]>,
    dirs: &mut [DirRow<'d>],
    srow: &mut [u16],
    pen: &Penalties,
) {
    let w = crow.len() / nd;
    let slot = nd + 2;
    let has_h = hz.is_some();
    let (mut a, mut b): (&mut [u16], &mut [u16]) = match hz {
        Some((a, b)) => (a, b),
        None => (&mut [], &mut []),
    };
    let mut m = 0;
    for i in 0..w {
        let x = if forward { i } else { w - 1 - i };
        let c = &crow[x * nd..(x + 1) * nd];
        let s = &mut srow[x * nd..(x + 1) * nd];
        if has_h {
            if i == 0 {
                m = path_start(c, b, s);
            } else {
                let px = if forward { x - 1 } else { x + 1 };
                let p2 = hguide.map_or(pen.p2, |g| pen.p2_step(g[px], g[x]));
                m = path_step(a, m, c, pen.p1, p2, b, s);
            }
            core::mem::swap(&mut a, &mut b);
        }
        for dr in dirs.iter_mut() {
            let o = &mut dr.out_row[x * slot..(x + 1) * slot];
            let px = x as isize - dr.dx;
            dr.out_min[x] = match dr.prev {
                Some((prow, pmin)) if px >= 0 && px < w as isize => {
                    let px = px as usize;
                    let p2 = dr.grow.map_or(pen.p2, |(g, gp)| pen.p2_step(gp[px], g[x]));
                    path_step(&prow[px * slot..(px + 1) * slot], pmin[px], c, pen.p1, p2, o, s)
                }
                _ => path_start(c, o, s),
            };
        }
    }
}

/// Row `cur` of a ring buffer for writing and row `prv` (!= cur, unless unused) for reading.
fn split_pair(buf: &mut [u16], n: usize, cur: usize, prv: usize) -> (&mut [u16], &[u16]) {
    if cur == prv {
        // No previous row (path start): hand back an empty read slice.
        return (&mut buf[cur * n..(cur + 1) * n], &[]);
    }
    if cur < prv {
        let (a, b) = buf.split_at_mut(prv * n);
        (&mut a[cur * n..(cur + 1) * n], &b[..n])
    } else {
        let (a, b) = buf.split_at_mut(cur * n);
        (&mut b[..n], &a[prv * n..(prv + 1) * n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use proptest::prelude::*;

    fn random_volume(w: usize, h: usize, d: usize, seed: u64, cmax: u64) -> CostVolume {
        let mut s = seed | 1;
        let data = (0..w * h * d)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 33) % (cmax + 1)) as u8
            })
            .collect();
        CostVolume { width: w, height: h, disparities: d, data }
    }

    /// Brute force of eq. 13 for one direction in i64, straight from the definition:
    /// pixels visited in an order where `p - r` always comes first (rows in the direction
    /// of dy, columns in the direction of dx).
    fn path_ref(c: &CostVolume, r: Direction, pen: &Penalties, guide: Option<&Image<u8>>) -> Vec<i64> {
        let (w, h, nd) = (c.width as i64, c.height as i64, c.disparities);
        let mut l = vec![0i64; c.data.len()];
        let ys: Vec<i64> = if r.dy >= 0 { (0..h).collect() } else { (0..h).rev().collect() };
        let xs: Vec<i64> = if r.dx >= 0 { (0..w).collect() } else { (0..w).rev().collect() };
        for &y in &ys {
            for &x in &xs {
                let (px, py) = (x - r.dx as i64, y - r.dy as i64);
                let i = ((y * w + x) as usize) * nd;
                for d in 0..nd {
                    let cost = c.data[i + d] as i64;
                    if px < 0 || py < 0 || px >= w || py >= h {
                        l[i + d] = cost;
                        continue;
                    }
                    let j = ((py * w + px) as usize) * nd;
                    let prev = &l[j..j + nd];
                    let m = *prev.iter().min().unwrap();
                    let p2 = match guide {
                        Some(g) => {
                            let diff = (g.at(x as usize, y as usize) as i64 - g.at(px as usize, py as usize) as i64).abs();
                            if diff > 0 { (pen.p2 as i64 / diff).max(pen.p1 as i64) } else { pen.p2 as i64 }
                        }
                        None => pen.p2 as i64,
                    };
                    let mut best = prev[d].min(m + p2);
                    if d > 0 {
                        best = best.min(prev[d - 1] + pen.p1 as i64);
                    }
                    if d + 1 < nd {
                        best = best.min(prev[d + 1] + pen.p1 as i64);
                    }
                    l[i + d] = cost + best - m;
                }
            }
        }
        l
    }

    fn check_against_ref(c: &CostVolume, dirs: &[Direction], pen: Penalties, guide: Option<&Image<u8>>, par: Parallelism) {
        let got = aggregate(c, dirs, &pen, guide.map(|g| g.view()), par).unwrap();
        let mut want = vec![0i64; c.data.len()];
        for &r in dirs {
            for (acc, v) in want.iter_mut().zip(path_ref(c, r, &pen, guide)) {
                *acc += v;
            }
        }
        for (i, (&g, &wv)) in got.data.iter().zip(&want).enumerate() {
            assert_eq!(g as i64, wv, "index {i}, dirs {dirs:?}");
        }
    }

    #[test]
    fn every_single_path_matches_brute_force() {
        let c = random_volume(7, 6, 5, 11, 63);
        let pen = Penalties { p1: 7, p2: 40, adaptive_p2: false };
        for r in PATHS_16 {
            check_against_ref(&c, &[r], pen, None, Parallelism::Sequential);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn path_sets_match_brute_force(w in 1usize..11, h in 1usize..9, d in 1usize..20, seed in any::<u64>(),
                                       p1 in 0u16..30, extra in 0u16..200, set in 0usize..4, adaptive in any::<bool>()) {
            let c = random_volume(w, h, d, seed, 255);
            let pen = Penalties { p1, p2: p1 + extra, adaptive_p2: adaptive };
            let g = Image::from_fn(w, h, |x, y| ((x * 37 + y * 91 + seed as usize) % 7 * 20) as u8).unwrap();
            let dirs: &[Direction] = match set { 0 => &PATHS_4, 1 => &PATHS_5, 2 => &PATHS_8, _ => &PATHS_16 };
            check_against_ref(&c, dirs, pen, adaptive.then_some(&g), Parallelism::AllThreads);
        }
    }

    #[test]
    fn sum_stays_exact_at_the_penalty_bound() {
        // Largest allowed P2 for 16 paths with costs up to 255: the sum reaches its bound
        // without saturating.
        let c = random_volume(9, 9, 16, 5, 255);
        let p2 = (65535 / 16 - 255) as u16;
        check_against_ref(&c, &PATHS_16, Penalties { p1: 1, p2, adaptive_p2: false }, None, Parallelism::AllThreads);
    }

    #[test]
    fn rejects_bad_input() {
        let c = random_volume(4, 3, 4, 1, 255);
        let ok = Penalties { p1: 5, p2: 50, adaptive_p2: false };
        let bad_order = Penalties { p1: 50, p2: 5, adaptive_p2: false };
        assert!(matches!(aggregate(&c, &PATHS_8, &bad_order, None, Parallelism::Sequential), Err(Error::InvalidParameter { name: "P2", .. })));
        let too_big = Penalties { p1: 5, p2: 8000, adaptive_p2: false };
        assert!(matches!(aggregate(&c, &PATHS_8, &too_big, None, Parallelism::Sequential), Err(Error::OutOfRange { .. })));
        assert!(aggregate(&c, &[], &ok, None, Parallelism::Sequential).is_err());
        assert!(aggregate(&c, &[dir(3, 1)], &ok, None, Parallelism::Sequential).is_err());
        assert!(aggregate(&c, &[dir(1, 0), dir(1, 0)], &ok, None, Parallelism::Sequential).is_err());
        let adaptive = Penalties { adaptive_p2: true, ..ok };
        assert!(aggregate(&c, &PATHS_4, &adaptive, None, Parallelism::Sequential).is_err());
        let g = Image::<u8>::new(3, 3).unwrap();
        assert!(matches!(aggregate(&c, &PATHS_4, &adaptive, Some(g.view()), Parallelism::Sequential), Err(Error::SizeMismatch { .. })));
        let broken = CostVolume { width: 4, height: 3, disparities: 4, data: vec![0; 10] };
        assert!(aggregate(&broken, &PATHS_4, &ok, None, Parallelism::Sequential).is_err());
    }
}

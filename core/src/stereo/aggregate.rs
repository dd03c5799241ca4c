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
//! threads and no lock is needed. The second sweep over a row adds the stored half-sum
//! and hands the finished row (in a small buffer, not written back) to a sink, so the
//! consumer (the pipeline's WTA and left-right check) reads it while it is in cache and
//! `S` is written and read once; a path set that needs one sweep only (5 paths) holds no
//! volume at all. The kernels run along the disparity axis in blocks of `LANES` (32) u16
//! lanes (vpminuw / vpaddusw), the disparities padded to whole blocks: a portable one
//! (any CPU, any range) and, where the CPU has AVX-512BW and the range is at most 256,
//! `aggregate_avx512`, which keeps a pixel's blocks in registers (the private `Kernel`).

use super::{CostVolume, Rect, RowCost};
use crate::error::{Error, Result};
use crate::image::{check_same_size, ImageView};
use crate::parallel::Parallelism;
use crate::workspace::Workspace;
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
use crate::cpu::multiversion;

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
        crate::error::require_range("P2", self.p2, 0, max)
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

/// Disparity lanes per block of the kernels: one AVX-512 register of u16, two AVX2 ones.
/// The kernels store every pixel's disparities padded to whole blocks ([`padded`]), so
/// their loops have no remainder; padding lanes hold `u16::MAX` in the path costs (they
/// never win a minimum and act as the `d + 1` sentinel) and saturate to it in the sums.
pub(crate) const LANES: usize = 32;

/// `nd` rounded up to whole blocks: the disparity stride of the kernels' rows.
pub(crate) fn padded(nd: usize) -> usize {
    nd.div_ceil(LANES) * LANES
}

/// The implementation that runs the sweeps, and with it the layout of the line buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Plain Rust vectorized by the compiler at each level (`cpu::multiversion!`), any CPU:
    /// `dp + 2` lanes per pixel, the path costs at `1..=dp` between `u16::MAX` sentinels.
    Portable,
    /// [`super::aggregate_avx512`], the path costs of a pixel in `blocks` registers: `dp`
    /// lanes per pixel, rows 64-byte aligned.
    #[cfg(target_arch = "x86_64")]
    Avx512 { blocks: usize },
}

impl Kernel {
    /// The fastest kernel this CPU runs for `nd` disparities.
    pub(crate) fn best(#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))] nd: usize) -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            let blocks = padded(nd) / LANES;
            if blocks <= super::aggregate_avx512::MAX_BLOCKS && (crate::cpu::level() == crate::cpu::Level::Avx512) {
                return Kernel::Avx512 { blocks };
            }
        }
        Kernel::Portable
    }

    /// Lanes per pixel in the path-cost rows.
    fn slot(self, dp: usize) -> usize {
        match self {
            Kernel::Portable => dp + 2,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 { .. } => dp,
        }
    }
}

/// Extra lanes allocated per line buffer so that its rows can start on a 64-byte boundary.
const ALIGN_SLACK: usize = 32;

/// The first index from `p` on a 64-byte boundary (0 if there is none within the slack).
fn aligned_start(p: *const u16) -> usize {
    let o = p.align_offset(64);
    if o < ALIGN_SLACK {
        o
    } else {
        0
    }
}

/// The penalties as the kernels use them: P2 looked up by the guide's step `|I(p) - I(p - r)|`.
pub(crate) struct StepPenalties {
    pub(crate) p1: u16,
    pub(crate) p2: [u16; 256],
}

impl StepPenalties {
    fn new(pen: &Penalties) -> Self {
        let mut p2 = [pen.p2; 256];
        for (g, v) in p2.iter_mut().enumerate() {
            *v = pen.p2_step(0, g as u8);
        }
        StepPenalties { p1: pen.p1, p2 }
    }
    #[inline(always)]
    pub(crate) fn p2(&self, from: u8, to: u8) -> u16 {
        self.p2[from.abs_diff(to) as usize]
    }
}

/// One step of eq. 13 for all disparities of a pixel, in blocks of [`LANES`]. `prev` holds
/// the previous pixel's path costs at `prev[1..=dp]` with `prev[0] = prev[dp + 1] = u16::MAX`
/// (so `d -+ 1` outside the range never wins) and `m` is their minimum; `cost` has `dp`
/// lanes of which the first `nd` are real. Writes `out[1..=dp]`, adds to `sum`, returns
/// the minimum of the new costs. `PAD`: `nd < dp`, the lanes past `nd` are set to MAX.
/// Blocks are loaded into local arrays and stored back whole, so the compiler sees no
/// aliasing between the slices and keeps each block in registers.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn path_step<const PAD: bool>(prev: &[u16], m: u16, cost: &[u8], nd: usize, p1: u16, p2: u16, out: &mut [u16], sum: &mut [u16]) -> u16 {
    let jump = m.saturating_add(p2);
    let mut mn = [u16::MAX; LANES];
    for k in 0..cost.len() / LANES {
        let o = k * LANES;
        let same: [u16; LANES] = prev[o + 1..o + 1 + LANES].try_into().unwrap();
        let lower: [u16; LANES] = prev[o..o + LANES].try_into().unwrap();
        let upper: [u16; LANES] = prev[o + 2..o + 2 + LANES].try_into().unwrap();
        let c: [u8; LANES] = cost[o..o + LANES].try_into().unwrap();
        let mut s: [u16; LANES] = sum[o..o + LANES].try_into().unwrap();
        let mut l = [0u16; LANES];
        for i in 0..LANES {
            // min(a + P1, b + P1) = min(a, b) + P1, also saturating: one add fewer.
            let best = same[i].min(lower[i].min(upper[i]).saturating_add(p1)).min(jump);
            // best >= m (every candidate is), so this never wraps.
            let v = (c[i] as u16).wrapping_add(best.wrapping_sub(m));
            l[i] = if PAD && o + i >= nd { u16::MAX } else { v };
            s[i] = s[i].saturating_add(l[i]);
            mn[i] = mn[i].min(l[i]);
        }
        out[o + 1..o + 1 + LANES].copy_from_slice(&l);
        sum[o..o + LANES].copy_from_slice(&s);
    }
    mn.iter().copied().fold(u16::MAX, u16::min)
}

/// Path start: `L = C`. Same layout as [`path_step`].
#[inline(always)]
fn path_start<const PAD: bool>(cost: &[u8], nd: usize, out: &mut [u16], sum: &mut [u16]) -> u16 {
    let mut mn = [u16::MAX; LANES];
    for k in 0..cost.len() / LANES {
        let o = k * LANES;
        let c: [u8; LANES] = cost[o..o + LANES].try_into().unwrap();
        let mut s: [u16; LANES] = sum[o..o + LANES].try_into().unwrap();
        let mut l = [0u16; LANES];
        for i in 0..LANES {
            l[i] = if PAD && o + i >= nd { u16::MAX } else { c[i] as u16 };
            s[i] = s[i].saturating_add(l[i]);
            mn[i] = mn[i].min(l[i]);
        }
        out[o + 1..o + 1 + LANES].copy_from_slice(&l);
        sum[o..o + LANES].copy_from_slice(&s);
    }
    mn.iter().copied().fold(u16::MAX, u16::min)
}

multiversion! {
    fn max_u8(v: &[u8]) -> u8 {
        v.iter().copied().fold(0, u8::max)
    }
}

/// Bytes of path line buffers the sweeps of `dirs` hold for a `width x .. x disparities`
/// volume (the part of the working set beside the summed volume): ring buffers and minima
/// of the vertical and diagonal paths, horizontal scratch, cost rows and the final row of sums.
pub fn line_buffer_bytes(width: usize, disparities: usize, dirs: &[Direction], threads: usize) -> usize {
    let dp = padded(disparities);
    let slot = dp + 2;
    let vertical: usize = dirs.iter().filter(|r| r.dy != 0).map(|r| (r.dy.unsigned_abs() as usize + 1) * width * (slot + 1)).sum();
    let per_sweep = 2 * slot + width * dp * 3 / 2;
    2 * vertical + 2 * threads.clamp(1, 2) * per_sweep
}

/// Sums eq. 13 over `dirs` for the cost volume: `S(p, d) = sum_r L_r(p, d)`.
///
/// `dirs` must be distinct members of `PATHS_16`; `guide` (the left image, same size as
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
    aggregate_using(Kernel::best(cost.disparities), cost, dirs, pen, guide, par)
}

/// [`aggregate`] with the given kernel (tests run each one the CPU has).
fn aggregate_using(
    kernel: Kernel,
    cost: &CostVolume,
    dirs: &[Direction],
    pen: &Penalties,
    guide: Option<ImageView<'_, u8>>,
    par: Parallelism,
) -> Result<SummedVolume> {
    let (w, h, nd) = (cost.width, cost.height, cost.disparities);
    if w == 0 || h == 0 || nd == 0 || cost.data.len() != w * h * nd {
        return Err(Error::InvalidParameter {
            name: "cost volume",
            reason: format!("{} costs for {w} x {h} x {nd}", cost.data.len()),
        });
    }
    let region = Rect { x: 0, y: 0, width: w, height: h };
    let mut data = crate::error::try_filled(w * h * nd, 0u16)?;
    let mid = split_row(h);
    let (top, bottom) = data.split_at_mut(mid * w * nd);
    let dp = padded(nd);
    // Final rows arrive with stride dp; the volume has stride nd.
    let put = |half: &mut [u16], y0: usize, y: usize, s: &[u16]| {
        let row = &mut half[(y - y0) * w * nd..(y - y0 + 1) * w * nd];
        for (o, px) in row.chunks_exact_mut(nd).zip(s.chunks_exact(dp)) {
            o.copy_from_slice(&px[..nd]);
        }
    };
    let mut put_top = |y: usize, s: &[u16]| put(top, 0, y, s);
    let mut put_bottom = |y: usize, s: &[u16]| put(bottom, mid, y, s);
    let ws = &mut Workspace::default();
    let cost_max = max_u8(&cost.data) as u16;
    aggregate_rows(kernel, cost, region, nd, cost_max, dirs, pen, guide, par, ws, &mut put_top, &mut put_bottom)?;
    Ok(SummedVolume { width: w, height: h, disparities: nd, data })
}

/// The first row of the bottom half: [`aggregate_rows`] hands rows above it to its `top`
/// sink and the others to `bottom`.
pub(crate) fn split_row(height: usize) -> usize {
    height / 2
}

/// A consumer of final rows of `S`: `(y, row)` with pixel `x`'s sums at `row[x * dp..][..nd]`
/// (`dp` = [`padded`]`(nd)`, padding lanes `u16::MAX`).
pub(crate) type RowSink<'a> = dyn FnMut(usize, &[u16]) + Send + 'a;

/// [`aggregate`] over costs computed row by row on demand (each sweep computes a row once
/// and uses it for all its directions), for the region `r` of the source's image. Each
/// row of `S` is handed, once final, to `top` (rows above [`split_row`]) or `bottom`;
/// the two may run at the same time on two threads. `cost_max` bounds the costs (for the
/// overflow check); `guide` covers the region. The half-volumes and line buffers come
/// from `ws` and go back to it. `kernel` runs the sweeps (callers pass [`Kernel::best`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn aggregate_rows(
    kernel: Kernel,
    src: &dyn RowCost,
    r: Rect,
    nd: usize,
    cost_max: u16,
    dirs: &[Direction],
    pen: &Penalties,
    guide: Option<ImageView<'_, u8>>,
    par: Parallelism,
    ws: &mut Workspace,
    top: &mut RowSink<'_>,
    bottom: &mut RowSink<'_>,
) -> Result<()> {
    let (w, h) = (r.width, r.height);
    if w == 0 || h == 0 || nd == 0 {
        return Err(Error::ZeroSize { width: w, height: h });
    }
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
    let pen = StepPenalties::new(pen);
    let horizontal: Vec<Direction> = dirs.iter().copied().filter(|r| r.dy == 0).collect();
    let down: Vec<Direction> = dirs.iter().copied().filter(|r| r.dy > 0).collect();
    let up: Vec<Direction> = dirs.iter().copied().filter(|r| r.dy < 0).collect();

    // Horizontal paths ride along with the vertical sweeps (one each, to balance the two
    // threads), so each row of S is touched by two sweeps only.
    let (mut h_down, mut h_up) = (Vec::new(), Vec::new());
    for (i, r) in horizontal.iter().enumerate() {
        if up.is_empty() || (i % 2 == 0 && !down.is_empty()) {
            h_down.push(*r);
        } else {
            h_up.push(*r);
        }
    }
    let mut dn = Sweep::new(kernel, src, r, nd, down, h_down, &pen, guide, ws)?;
    let mut upw = Sweep::new(kernel, src, r, nd, up, h_up, &pen, guide, ws)?;
    let mid = split_row(h);
    if upw.is_empty() || dn.is_empty() {
        // One sweep finishes every row: no volume of S at all.
        let mut sink = |y: usize, s: &[u16]| if y < mid { top(y, s) } else { bottom(y, s) };
        if upw.is_empty() {
            dn.run(0..h, Out::Finish(None, &mut sink));
        } else {
            upw.run((0..h).rev(), Out::Finish(None, &mut sink));
        }
    } else {
        // Down on the top half while up does the bottom half, each storing its sums; then
        // the other way round, each adding the stored sums and finishing the rows: no row
        // of S is written by two threads at once. Each half of S is grown a row at a time
        // in its sweep's order (the bottom half upside down), so no thread first zeroes
        // the whole volume.
        // Each half starts with the lanes that put its rows on 64-byte boundaries.
        let n = w * padded(nd);
        let (mut upper, mut lower) = (ws.vec_with_capacity(mid * n + ALIGN_SLACK)?, ws.vec_with_capacity((h - mid) * n + ALIGN_SLACK)?);
        upper.resize(aligned_start(upper.as_ptr()), 0);
        lower.resize(aligned_start(lower.as_ptr()), 0);
        let (ua, la) = (upper.len(), lower.len());
        join(par, || dn.run(0..mid, Out::Store(&mut upper)), || upw.run((mid..h).rev(), Out::Store(&mut lower)));
        join(
            par,
            || dn.run(mid..h, Out::Finish(Some((&lower[la..], h - 1)), bottom)),
            || upw.run((0..mid).rev(), Out::Finish(Some((&upper[ua..], 0)), top)),
        );
        ws.recycle(upper);
        ws.recycle(lower);
    }
    dn.recycle(ws);
    upw.recycle(ws);
    Ok(())
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

/// Where a sweep puts its row sums.
enum Out<'a, 'f> {
    /// Appended to this half of S, in the sweep's order of rows: the first of two sweeps.
    Store(&'a mut Vec<u16>),
    /// Added to the stored row if any (the half of S the other sweep stored, and the row
    /// it stored first; only read), then handed to the sink: the row is final.
    Finish(Option<(&'a [u16], usize)>, &'a mut RowSink<'f>),
}

/// One row of a sweep with `kernel`: the horizontal path (in the order of
/// `input.forward`) when `hz` holds the portable kernel's two scratch slots (or, for the
/// AVX-512 kernel, is `Some` at all), and every direction of `input.dirs`; their path
/// costs summed, plus the `partial` sums if given (which may be `srow` itself), into
/// `srow` (`w * dp` lanes). `stream`: `srow` is a 64-byte aligned row that will not be
/// read again soon.
///
/// # Safety
/// `srow` is valid for writes of `w * dp` lanes, `partial` for as many reads; `dirs` are
/// in the kernel's layout.
unsafe fn kernel_row(
    kernel: Kernel,
    input: SweepRow<'_, '_>,
    hz: Option<(&mut [u16], &mut [u16])>,
    partial: Option<*const u16>,
    srow: *mut u16,
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))] stream: bool,
) {
    // crow holds w * dp costs: as many lanes as the row of sums.
    let n = input.crow.len();
    match kernel {
        Kernel::Portable => {
            // SAFETY: srow and partial cover n lanes (the caller); srow is initialized
            // (with the partial sums or zeros) before the slice is made.
            let srow = unsafe {
                match partial {
                    Some(p) if p != srow.cast_const() => core::ptr::copy_nonoverlapping(p, srow, n),
                    Some(_) => {}
                    None => core::ptr::write_bytes(srow, 0, n),
                }
                core::slice::from_raw_parts_mut(srow, n)
            };
            sweep_row(input, hz, srow);
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Kernel::best chose it on a CPU that has AVX-512BW, for blocks <=
        // MAX_BLOCKS; srow and dirs as the caller guarantees.
        Kernel::Avx512 { blocks } => unsafe {
            super::aggregate_avx512::sweep_row(blocks, input, hz.is_some(), partial, srow, stream)
        },
    }
}

/// The state of one vertical sweep: for each of its directions, the path costs of the last
/// `keep` rows (ring buffer in the kernel's layout) and their per-pixel minima.
struct Sweep<'c> {
    kernel: Kernel,
    src: &'c dyn RowCost,
    region: Rect,
    nd: usize,
    /// The costs of the current row (stride dp).
    crow: Vec<u8>,
    /// The sums of the current row when it is finished here ([`ALIGN_SLACK`] lanes longer).
    fin: Vec<u16>,
    dirs: Vec<Direction>,
    /// Horizontal directions run on each row of this sweep.
    horizontal: Vec<Direction>,
    /// The portable kernel's slots for the horizontal path.
    scratch: (Vec<u16>, Vec<u16>),
    pen: &'c StepPenalties,
    guide: Option<ImageView<'c, u8>>,
    keep: usize,
    /// Ring buffers, [`ALIGN_SLACK`] lanes longer than their rows.
    bufs: Vec<Vec<u16>>,
    mins: Vec<Vec<u16>>,
}

impl<'c> Sweep<'c> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        kernel: Kernel,
        src: &'c dyn RowCost,
        region: Rect,
        nd: usize,
        dirs: Vec<Direction>,
        horizontal: Vec<Direction>,
        pen: &'c StepPenalties,
        guide: Option<ImageView<'c, u8>>,
        ws: &mut Workspace,
    ) -> Result<Self> {
        let keep = dirs.iter().map(|r| r.dy.unsigned_abs() as usize).max().unwrap_or(0) + 1;
        let w = region.width;
        let dp = padded(nd);
        let slot = kernel.slot(dp);
        let bufs = dirs.iter().map(|_| ws.vec_filled(keep * w * slot + ALIGN_SLACK, u16::MAX)).collect::<Result<_>>()?;
        let mins = dirs.iter().map(|_| ws.vec_filled(keep * w, 0u16)).collect::<Result<_>>()?;
        let scratch = (vec![u16::MAX; dp + 2], vec![u16::MAX; dp + 2]);
        let empty = dirs.is_empty() && horizontal.is_empty();
        let crow = if empty { Vec::new() } else { crate::error::try_filled(w * dp, 0u8)? };
        Ok(Sweep { kernel, src, region, nd, crow, fin: Vec::new(), dirs, horizontal, scratch, pen, guide, keep, bufs, mins })
    }

    /// Hands the line buffers back to the workspace.
    fn recycle(self, ws: &mut Workspace) {
        for v in self.bufs.into_iter().chain(self.mins) {
            ws.recycle(v);
        }
    }

    fn is_empty(&self) -> bool {
        self.dirs.is_empty() && self.horizontal.is_empty()
    }

    /// Processes `rows` in order (all of this sweep's direction: increasing for down,
    /// decreasing for up), storing or finishing each row as `out` says.
    fn run(&mut self, rows: impl Iterator<Item = usize>, out: Out<'_, '_>) {
        let (w, h, nd) = (self.region.width, self.region.height, self.nd);
        let dp = padded(nd);
        let slot = self.kernel.slot(dp);
        let n = w * dp;
        let (mut store, stored, mut sink) = match out {
            Out::Store(slab) => (Some(slab), None, None),
            Out::Finish(stored, sink) => (None, stored, Some(sink)),
        };
        if sink.is_some() && self.fin.len() != n + ALIGN_SLACK {
            self.fin = vec![0u16; n + ALIGN_SLACK];
        }
        let fin = aligned_start(self.fin.as_ptr());
        for y in rows {
            // Where the row's sums go, and the stored partial sums they start from.
            let (srow, partial, stream): (*mut u16, Option<*const u16>, bool) = match (store.as_mut(), stored.as_ref()) {
                (Some(slab), _) => {
                    // Appended: written whole by the kernel before the length covers it.
                    slab.reserve(n);
                    let row: *mut u16 = slab.spare_capacity_mut().as_mut_ptr().cast();
                    (row, None, (row as usize).is_multiple_of(64))
                }
                // The other sweep ran the opposite way: its k-th stored row is y0 -+ k.
                // The finished row goes to `fin`, the stored one is only read.
                (None, Some((slab, y0))) => {
                    let k = y.abs_diff(*y0);
                    (self.fin[fin..].as_mut_ptr(), Some(slab[k * n..(k + 1) * n].as_ptr()), false)
                }
                (None, None) => (self.fin[fin..].as_mut_ptr(), None, false),
            };
            self.src.cost_row(self.region.y + y, self.region.x, w, nd, dp, &mut self.crow);
            let crow = &self.crow[..];
            let cur = y % self.keep;
            let mut views: Vec<DirRow<'_>> = Vec::with_capacity(self.dirs.len());
            for ((r, buf), mins) in self.dirs.iter().zip(self.bufs.iter_mut()).zip(self.mins.iter_mut()) {
                let py = y as isize - r.dy as isize;
                let has_prev_row = py >= 0 && py < h as isize;
                let prv = if has_prev_row { py as usize % self.keep } else { cur };
                let start = aligned_start(buf.as_ptr());
                let ring = &mut buf[start..start + self.keep * w * slot];
                let (out_row, prev_row) = split_pair(ring, w * slot, cur, prv);
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
            let input = SweepRow { crow, nd, forward, hguide: grow, dirs: &mut views, pen: self.pen };
            // SAFETY: srow covers n lanes: reserved in the slab (64-byte aligned rows when
            // streamed: see aggregate_rows) or `fin`; partial is a stored row of n lanes.
            // Views are in the kernel's layout.
            unsafe { kernel_row(self.kernel, input, hz, partial, srow, stream) };
            for r in self.horizontal.iter().skip(1) {
                let hz = Some((&mut self.scratch.0[..], &mut self.scratch.1[..]));
                let input = SweepRow { crow, nd, forward: r.dx > 0, hguide: grow, dirs: &mut [], pen: self.pen };
                // SAFETY: as above; the row is initialized now and adds to itself.
                unsafe { kernel_row(self.kernel, input, hz, Some(srow.cast_const()), srow, false) };
            }
            if let Some(slab) = store.as_mut() {
                // SAFETY: the kernel wrote the n reserved lanes.
                unsafe { slab.set_len(slab.len() + n) };
            }
            if let Some(sink) = sink.as_mut() {
                // SAFETY: srow's n lanes are initialized (written by the kernel).
                sink(y, unsafe { core::slice::from_raw_parts(srow, n) });
            }
        }
    }
}

/// One direction's buffers for the current row of a sweep (rows of the kernel's layout:
/// `Kernel::slot` lanes per pixel).
pub(crate) struct DirRow<'a> {
    pub(crate) dx: isize,
    pub(crate) out_row: &'a mut [u16],
    pub(crate) out_min: &'a mut [u16],
    /// Row `y - dy`'s path costs and minima; `None` at the first row (paths start).
    pub(crate) prev: Option<(&'a [u16], &'a [u16])>,
    /// Guide rows `y` and `y - dy` for the adaptive P2.
    pub(crate) grow: Option<(&'a [u8], &'a [u8])>,
}

/// What every kernel's row of a sweep reads: the row's costs `crow` (`w` pixels of the
/// kernel's `dp` lanes, `nd` of them real), the horizontal path's order (`forward`) and
/// guide row, the other directions' buffers and the penalties.
pub(crate) struct SweepRow<'r, 'd> {
    pub(crate) crow: &'r [u8],
    pub(crate) nd: usize,
    pub(crate) forward: bool,
    pub(crate) hguide: Option<&'r [u8]>,
    pub(crate) dirs: &'r mut [DirRow<'d>],
    pub(crate) pen: &'r StepPenalties,
}

multiversion! {
    /// One row of a sweep: for each x (in the horizontal path's order), the horizontal step
    /// when `hz` holds its two scratch slots, then every vertical / diagonal direction's step.
    fn sweep_row<'r, 'd>(input: SweepRow<'r, 'd>, hz: Option<(&mut [u16], &mut [u16])>, srow: &mut [u16]) {
        if padded(input.nd) > input.nd {
            sweep_row_impl::<true>(input, hz, srow);
        } else {
            sweep_row_impl::<false>(input, hz, srow);
        }
    }
}

#[inline(always)]
fn sweep_row_impl<const PAD: bool>(input: SweepRow<'_, '_>, hz: Option<(&mut [u16], &mut [u16])>, srow: &mut [u16]) {
    let SweepRow { crow, nd, forward, hguide, dirs, pen } = input;
    let dp = padded(nd);
    let w = crow.len() / dp;
    let slot = dp + 2;
    let p1 = pen.p1;
    let has_h = hz.is_some();
    let (mut a, mut b): (&mut [u16], &mut [u16]) = match hz {
        Some((a, b)) => (a, b),
        None => (&mut [], &mut []),
    };
    let mut m = 0;
    for i in 0..w {
        let x = if forward { i } else { w - 1 - i };
        let c = &crow[x * dp..(x + 1) * dp];
        let s = &mut srow[x * dp..(x + 1) * dp];
        if has_h {
            if i == 0 {
                m = path_start::<PAD>(c, nd, b, s);
            } else {
                let px = if forward { x - 1 } else { x + 1 };
                let p2 = hguide.map_or(pen.p2[0], |g| pen.p2(g[px], g[x]));
                m = path_step::<PAD>(a, m, c, nd, p1, p2, b, s);
            }
            core::mem::swap(&mut a, &mut b);
        }
        for dr in dirs.iter_mut() {
            let o = &mut dr.out_row[x * slot..(x + 1) * slot];
            let px = x as isize - dr.dx;
            dr.out_min[x] = match dr.prev {
                Some((prow, pmin)) if px >= 0 && px < w as isize => {
                    let px = px as usize;
                    let p2 = dr.grow.map_or(pen.p2[0], |(g, gp)| pen.p2(gp[px], g[x]));
                    path_step::<PAD>(&prow[px * slot..(px + 1) * slot], pmin[px], c, nd, p1, p2, o, s)
                }
                _ => path_start::<PAD>(c, nd, o, s),
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

    /// The portable kernel and the best one of this CPU (if another).
    fn kernels(nd: usize) -> Vec<Kernel> {
        let mut k = vec![Kernel::Portable];
        if Kernel::best(nd) != Kernel::Portable {
            k.push(Kernel::best(nd));
        }
        k
    }

    fn check_against_ref(c: &CostVolume, dirs: &[Direction], pen: Penalties, guide: Option<&Image<u8>>, par: Parallelism) {
        let mut want = vec![0i64; c.data.len()];
        for &r in dirs {
            for (acc, v) in want.iter_mut().zip(path_ref(c, r, &pen, guide)) {
                *acc += v;
            }
        }
        for kernel in kernels(c.disparities) {
            let got = aggregate_using(kernel, c, dirs, &pen, guide.map(|g| g.view()), par).unwrap();
            for (i, (&g, &wv)) in got.data.iter().zip(&want).enumerate() {
                assert_eq!(g as i64, wv, "index {i}, dirs {dirs:?}, {kernel:?}");
            }
        }
    }

    #[test]
    fn the_best_kernel_is_the_vector_one_where_the_cpu_has_it() {
        // Guards the dispatch: on an AVX-512BW machine (like CI's) the register kernel must
        // be the one that runs, for up to MAX_BLOCKS blocks, and the portable one above.
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::level() == crate::cpu::Level::Avx512 {
            assert_eq!(Kernel::best(64), Kernel::Avx512 { blocks: 2 });
            assert_eq!(Kernel::best(100), Kernel::Avx512 { blocks: 4 });
            assert_eq!(Kernel::best(256), Kernel::Avx512 { blocks: 8 });
            assert_eq!(Kernel::best(257), Kernel::Portable);
        }
        assert_eq!(Kernel::best(1000), Kernel::Portable);
    }

    #[test]
    fn every_single_path_matches_brute_force() {
        let c = random_volume(7, 6, 5, 11, 63);
        let pen = Penalties { p1: 7, p2: 40, adaptive_p2: false };
        for r in PATHS_16 {
            check_against_ref(&c, &[r], pen, None, Parallelism::Sequential);
        }
        // Sets with one sweep and two horizontal paths (the second runs on its own).
        for dirs in [&[dir(1, 0), dir(-1, 0)][..], &[dir(1, 0), dir(0, 1), dir(-1, 0)], &[dir(-1, 0), dir(1, -1), dir(1, 0)]] {
            check_against_ref(&c, dirs, pen, None, Parallelism::AllThreads);
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
    fn whole_and_partial_blocks_match_brute_force() {
        crate::testing::at_every_level(|_| {
            // The kernels work in blocks of LANES disparities: one, two and eight whole blocks
            // (no padding), padded last blocks, and 8 blocks + 3 (past the register kernel's
            // limit), for each sweep layout; at every level, on this thread.
            for (k, d) in [LANES, 2 * LANES, LANES + 9, 3 * LANES + 1, 8 * LANES, 8 * LANES + 3].into_iter().enumerate() {
                let (w, h) = (9, 7);
                let c = random_volume(w, h, d, 3 + k as u64, 63);
                let g = Image::from_fn(w, h, |x, y| ((x * 53 + y * 29 + k) % 5 * 40) as u8).unwrap();
                let pen = Penalties { p1: 9, p2: 120, adaptive_p2: true };
                for dirs in [&PATHS_4[..], &PATHS_5[..], &PATHS_8[..], &PATHS_16[..]] {
                    check_against_ref(&c, dirs, pen, Some(&g), Parallelism::Sequential);
                }
            }
        });
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

//! Quality of a registered pair, measured on the registered luminance after alignment:
//!
//! * [`overlap_ncc`]: Pearson's r between the reference and the moving frame over their
//!   whole overlap, the moving frame resampled bilinearly at the subpixel shift;
//! * [`grid_ncc`]: the original plugin's measure: a 5 x 5 grid of templates spread over the
//!   bounding box of the overlap, the mean of their coefficients (flat templates left out).
//!
//! Both are computed straight from the definition: they judge the registration, so they
//! share no code with the search that produced it. Integer frames sum exactly (module
//! `moments`), f32 frames in f64.

use super::moments::{region_moments, IntSample, Moments};
use alloc::vec::Vec;
use smallvec::SmallVec;
use crate::error::{require_finite, require_range, Result};
use crate::image::{ImageView, Pixel};
use crate::parallel::{map_few, map_indices, Parallelism};

/// A sample type of the quality measures.
pub trait QualitySample: Pixel + Into<f64> {
    /// `pearson_region` from exact integer sums, for integer samples; `None` for floats,
    /// which sum in f64.
    fn exact_pearson(_r: &ImageView<'_, Self>, _m: &ImageView<'_, Self>, _shift: (f64, f64), _region: Region, _par: Parallelism) -> Option<Option<f64>> {
        None
    }
    /// The measures of `pairs` ([`overlap_ncc`], [`grid_ncc`] with templates of `side`),
    /// their overlaps summed in bands of rows over `par`'s threads, to the bit as pair by
    /// pair: for integer samples; `None` for floats, which sum in f64 (in an order the
    /// bands would change).
    fn measures_of_pairs(_pairs: &[PairToMeasure<'_, Self>], _side: usize, _par: Parallelism) -> Option<Result<Vec<Measures>>> {
        None
    }
}

impl QualitySample for f32 {}

macro_rules! exact_quality_sample {
    ($t:ty) => {
        impl QualitySample for $t {
            fn exact_pearson(r: &ImageView<'_, Self>, m: &ImageView<'_, Self>, shift: (f64, f64), region: Region, par: Parallelism) -> Option<Option<f64>> {
                Some(exact_pearson(r, m, shift, region, par))
            }
            fn measures_of_pairs(pairs: &[PairToMeasure<'_, Self>], side: usize, par: Parallelism) -> Option<Result<Vec<Measures>>> {
                Some(measures_of_pairs(pairs, side, par))
            }
        }
    };
}
exact_quality_sample!(u8);
exact_quality_sample!(u16);

/// A pair's quality measures: [`overlap_ncc`] and [`grid_ncc`].
pub type Measures = (Option<f64>, Option<f64>);

/// A pair to measure: the reference, the moving frame, and the shift that aligns them.
pub type PairToMeasure<'v, T> = (ImageView<'v, T>, ImageView<'v, T>, (f64, f64));

/// Rows of an overlap summed as one job of [`measures_of_pairs`]: some 11 000 pixels of a
/// PAL overlap, a few microseconds, so that the threads sharing a pair's measures finish
/// within one band of each other.
const BAND_ROWS: usize = 16;

/// The quality measures ([`overlap_ncc`], [`grid_ncc`] with templates of `side`) of pairs of
/// integer frames, to the bit as those give them: each pair's [`QualityPlan`], its overlap
/// cut into bands of [`BAND_ROWS`] rows and its grid into rows of templates, the jobs
/// handed out over `par`'s threads (`map_few`: from a caller outside the pool, each thread
/// takes the next job as it becomes free), then each region's sums added (integers: the
/// same in any order). A run measures each pair so on all its threads: a thread out of
/// pairs takes bands of a pair still being measured, where a pair measured on its own
/// thread left the others waiting at the end of each window. Errors: as [`grid_ncc`].
pub(crate) fn measures_of_pairs<S: IntSample + QualitySample>(pairs: &[PairToMeasure<'_, S>], side: usize, par: Parallelism) -> Result<Vec<Measures>> {
    let mut plans = Vec::with_capacity(pairs.len());
    for (r, m, shift) in pairs {
        check(r, m, *shift)?;
        plans.push(QualityPlan::new(r.size(), *shift, side)?);
    }
    // The grid's rows first, each a job a few bands long: a thread that takes the last
    // jobs then finishes within a band of the others.
    let mut jobs: Vec<(usize, Job)> = Vec::new();
    for (k, plan) in plans.iter().enumerate() {
        let grid = plan.regions.len().saturating_sub(1);
        jobs.extend((1..=grid).step_by(GRID_SIDE).map(|g| (k, Job::Grid(g, (g + GRID_SIDE).min(grid + 1)))));
    }
    for (k, plan) in plans.iter().enumerate() {
        let Some(&(_, y0, _, y1)) = plan.regions.first() else { continue };
        jobs.extend((y0..y1).step_by(BAND_ROWS).map(|b| (k, Job::Band(b, (b + BAND_ROWS).min(y1)))));
    }
    let sums = map_few(jobs.len(), par, |j| {
        let (k, job) = jobs[j];
        let ((r, m, _), plan) = (&pairs[k], &plans[k]);
        match job {
            Job::Band(y0, y1) => {
                let (x0, _, x1, _) = plan.regions[0];
                alloc::vec![plan_sums(r, m, plan, (x0, y0, x1, y1))]
            }
            Job::Grid(first, end) => plan.regions[first..end].iter().map(|&g| plan_sums(r, m, plan, g)).collect(),
        }
    });
    // The overlap's sums are its bands' added; the grid's, its rows' in order.
    let mut measured: Vec<Vec<Moments<4>>> = plans.iter().map(|plan| alloc::vec![Moments::default(); plan.regions.len()]).collect();
    for (&(k, job), found) in jobs.iter().zip(sums) {
        match job {
            Job::Band(..) => measured[k][0].add(&found[0]),
            Job::Grid(first, end) => measured[k][first..end].copy_from_slice(&found),
        }
    }
    Ok(plans.iter().zip(measured).map(|(plan, sums)| plan.measures(sums)).collect())
}

/// A job of [`measures_of_pairs`]: a band of a pair's overlap (its rows), or a run of its
/// grid's templates (their indices in the plan's regions).
#[derive(Clone, Copy)]
enum Job {
    Band(usize, usize),
    Grid(usize, usize),
}

/// The sums of `region` at `plan`'s taps, summing only the taps of non-zero weight (at a
/// shift whole along an axis, one or two of the four): a tap of weight 0 adds nothing to
/// the measures, whether its sums are summed or left zero.
fn plan_sums<S: IntSample>(r: &ImageView<'_, S>, m: &ImageView<'_, S>, plan: &QualityPlan, region: Region) -> Moments<4> {
    let offsets = plan.taps.map(|t| t.0);
    let sums = |taps: &[usize]| -> Moments<4> {
        match *taps {
            [k] => spread(region_moments(r, m, plan.origin, [offsets[k]], region, Parallelism::Sequential), taps),
            [k, l] => spread(region_moments(r, m, plan.origin, [offsets[k], offsets[l]], region, Parallelism::Sequential), taps),
            _ => region_moments(r, m, plan.origin, offsets, region, Parallelism::Sequential),
        }
    };
    // A tap's weight is a product of the two axes' weights: one, two or four are non-zero.
    let mut live = [0; 4];
    let mut count = 0;
    for (k, t) in plan.taps.iter().enumerate() {
        if t.1 != 0.0 {
            live[count] = k;
            count += 1;
        }
    }
    sums(&live[..count])
}

/// The sums of `K` taps placed at the four-tap positions `at` (ascending), the other taps'
/// sums zero.
fn spread<const K: usize>(sums: Moments<K>, at: &[usize]) -> Moments<4> {
    let mut out = Moments::<4> { n: sums.n, a: sums.a, aa: sums.aa, ..Default::default() };
    for (i, &k) in at.iter().enumerate() {
        out.t[k] = sums.t[i];
        out.at[k] = sums.at[i];
        for (j, &l) in at.iter().enumerate().skip(i) {
            out.tt[k][l] = sums.tt[i][j];
        }
    }
    out
}

/// A rectangle of reference pixels `[x0, x1) x [y0, y1)`: `(x0, y0, x1, y1)`.
pub type Region = (usize, usize, usize, usize);

/// Pearson's r over `region` from the exact sums of its 1, 2 or 4 bilinear taps.
fn exact_pearson<S: IntSample>(r: &ImageView<'_, S>, m: &ImageView<'_, S>, shift: (f64, f64), region: Region, par: Parallelism) -> Option<f64> {
    let (origin, taps) = bilinear_taps(shift);
    match taps[..] {
        [(t0, w0)] => region_moments(r, m, origin, [t0], region, par).pearson(&[w0]),
        [(t0, w0), (t1, w1)] => region_moments(r, m, origin, [t0, t1], region, par).pearson(&[w0, w1]),
        [(t0, w0), (t1, w1), (t2, w2), (t3, w3)] => region_moments(r, m, origin, [t0, t1, t2, t3], region, par).pearson(&[w0, w1, w2, w3]),
        _ => None,
    }
}

/// The overlap of the reference with the moving frame shifted by `shift`, in reference
/// coordinates, keeping one pixel of margin for bilinear sampling: `(x0, y0, x1, y1)`
/// exclusive ends; `None` when empty.
pub(super) fn overlap(size: (usize, usize), shift: (f64, f64)) -> Option<(usize, usize, usize, usize)> {
    // Reference pixel X sees moving pixel X - sx, which needs 0 <= X - sx <= W - 2 to
    // sample bilinearly with both neighbours inside.
    let (w, h) = (size.0 as f64, size.1 as f64);
    let x0 = libm::ceil(shift.0).max(0.0);
    let y0 = libm::ceil(shift.1).max(0.0);
    let x1 = libm::floor(w - 2.0 + shift.0).min(w - 1.0) + 1.0;
    let y1 = libm::floor(h - 2.0 + shift.1).min(h - 1.0) + 1.0;
    (x1 > x0 && y1 > y0).then_some((x0 as usize, y0 as usize, x1 as usize, y1 as usize))
}

/// Integer offset and the two bilinear weights of a constant shift along one axis:
/// reference coordinate `x` samples the moving frame at `x - shift`, i.e. taps `x - o` and
/// `x - o + 1` with weights `(w0, w1)`.
fn taps(shift: f64) -> (i64, f64, f64) {
    let f = libm::floor(shift);
    let t = shift - f;
    if t == 0.0 {
        (f as i64, 1.0, 0.0)
    } else {
        // x - shift = (x - f - 1) + (1 - t).
        (f as i64 + 1, t, 1.0 - t)
    }
}

/// Bilinear taps, each an offset `(dx, dy)` and its weight: at most four, in line.
pub(super) type Taps = SmallVec<[((usize, usize), f64); 4]>;

/// The bilinear taps of a constant shift ([`taps`] along each axis): the integer offset
/// `origin` and each tap's `(dx, dy)` and weight, reference pixel `(x, y)` meeting moving
/// pixel `(x, y) - origin + (dx, dy)`; taps of weight 0 are left out (they may lie outside
/// the frame).
pub(super) fn bilinear_taps(shift: (f64, f64)) -> ((i64, i64), Taps) {
    let ((ox, wx0, wx1), (oy, wy0, wy1)) = (taps(shift.0), taps(shift.1));
    let mut found = SmallVec::new();
    for (dy, wy) in [(0, wy0), (1, wy1)] {
        for (dx, wx) in [(0, wx0), (1, wx1)] {
            if wx * wy != 0.0 {
                found.push(((dx, dy), wx * wy));
            }
        }
    }
    ((ox, oy), found)
}

/// Pearson's r of the reference and the aligned moving frame over the rectangle
/// `[x0, x1) x [y0, y1)` of reference coordinates. The shift is the same for every pixel,
/// so the bilinear weights are too: each moving sample is a fixed 4-tap combination at an
/// integer offset. Integer samples: exact sums (module `moments`). f32: one pass of sums of
/// `a - a0`, `b - b0` and their products, with `(a0, b0)` the first sample pair
/// (shift-invariant; small values keep the f64 cancellation small). Rows in parallel when
/// allowed.
pub(super) fn pearson_region<T: QualitySample>(r: &ImageView<'_, T>, m: &ImageView<'_, T>, shift: (f64, f64), region: Region, par: Parallelism) -> Option<f64> {
    if let Some(exact) = T::exact_pearson(r, m, shift, region, par) {
        return exact;
    }
    let (s, saa, sbb, sab) = region_sums(r, m, shift, region, par);
    // A flat side: its centred sum of squares vanishes up to rounding.
    let tol = 1e-12 * (s[2] + s[3] + 1.0);
    (saa > tol && sbb > tol).then(|| (sab / libm::sqrt(saa * sbb)).clamp(-1.0, 1.0))
}

/// The sums [`pearson_region`] is made of over the rectangle `[x0, x1) x [y0, y1)`: the raw
/// sums of the offset pairs and the centred sums `(sums, saa, sbb, sab)`.
fn region_sums<T: Pixel + Into<f64>>(
    r: &ImageView<'_, T>,
    m: &ImageView<'_, T>,
    shift: (f64, f64),
    (x0, y0, x1, y1): (usize, usize, usize, usize),
    par: Parallelism,
) -> (Sums, f64, f64, f64) {
    let sample = sampler(m, shift);
    let (a0, b0) = (r.row(y0)[x0].into(), sample(x0, y0));
    let rows = map_indices(y1 - y0, par, |k| {
        let y = y0 + k;
        let row = r.row(y);
        let mut s = Sums::default();
        for (x, &p) in row.iter().enumerate().take(x1).skip(x0) {
            add_pair(&mut s, p.into() - a0, sample(x, y) - b0);
        }
        s
    });
    centred(&rows, ((x1 - x0) * (y1 - y0)) as f64)
}

/// The moving frame `m` sampled bilinearly at reference pixel `(x, y)` for `shift`: valid
/// for the pixels of [`overlap`] at that shift.
pub(super) fn sampler<'m, T: Pixel + Into<f64>>(m: &'m ImageView<'_, T>, shift: (f64, f64)) -> impl Fn(usize, usize) -> f64 + Sync + 'm {
    let ((ox, wx0, wx1), (oy, wy0, wy1)) = (taps(shift.0), taps(shift.1));
    move |x: usize, y: usize| -> f64 {
        let (i, j) = ((x as i64 - ox) as usize, (y as i64 - oy) as usize);
        // A tap of weight 0 may sit just outside the frame: clamp its index.
        let (i1, j1) = ((i + 1).min(m.width() - 1), (j + 1).min(m.height() - 1));
        let (r0, r1) = (m.row(j), m.row(j1));
        wy0 * (wx0 * r0[i].into() + wx1 * r0[i1].into()) + wy1 * (wx0 * r1[i].into() + wx1 * r1[i1].into())
    }
}

/// The fraction of a white noise's variance that survives bilinear sampling at `shift`
/// (the sum of the squared tap weights along each axis, multiplied).
pub(super) fn bilinear_gain(shift: (f64, f64)) -> f64 {
    let ((_, a0, a1), (_, b0, b1)) = (taps(shift.0), taps(shift.1));
    (a0 * a0 + a1 * a1) * (b0 * b0 + b1 * b1)
}

/// Sums of the pairs `(a, b)` Pearson's r is made of: a, b, a², b², ab.
pub(super) type Sums = [f64; 5];

/// Adds the pair `(a, b)` to `s`.
pub(super) fn add_pair(s: &mut Sums, a: f64, b: f64) {
    s[0] += a;
    s[1] += b;
    s[2] += a * a;
    s[3] += b * b;
    s[4] += a * b;
}

/// The `rows`' sums added in order, and from them over `n` pairs the centred sums of
/// squares and of products: `(sums, saa, sbb, sab)`.
pub(super) fn centred(rows: &[Sums], n: f64) -> (Sums, f64, f64, f64) {
    let s = rows.iter().fold(Sums::default(), |mut t, r| {
        for (a, b) in t.iter_mut().zip(r) {
            *a += b;
        }
        t
    });
    (s, s[2] - s[0] * s[0] / n, s[3] - s[1] * s[1] / n, s[4] - s[0] * s[1] / n)
}

pub(super) fn check<T: Pixel>(r: &ImageView<'_, T>, m: &ImageView<'_, T>, shift: (f64, f64)) -> Result<()> {
    crate::image::check_same_size(r.size(), m.size())?;
    require_finite("shift x", shift.0)?;
    require_finite("shift y", shift.1)
}

/// Pearson's r over the whole overlap of `reference` and `moving` aligned by `shift`
/// (moving pixel `(u, v)` shows reference `(u + x, v + y)`; moving sampled bilinearly).
/// `None` when the overlap is empty or flat. Errors: sizes differ, non-finite shift.
pub fn overlap_ncc<T: QualitySample>(
    reference: ImageView<'_, T>,
    moving: ImageView<'_, T>,
    shift: (f64, f64),
    par: Parallelism,
) -> Result<Option<f64>> {
    check(&reference, &moving, shift)?;
    Ok(overlap(reference.size(), shift).and_then(|o| pearson_region(&reference, &moving, shift, o, par)))
}

/// What the overlap of a pair correlates where it cannot match: the largest [`overlap_ncc`]
/// at the eight displacements of a quarter of the frame's width and height (across, along
/// and diagonally) from `shift` whose overlap still covers a quarter of the frame. A faint
/// pair's true match correlates little (at contrast 0.3 and noise 3.5, the fundus's overlaps
/// 0.17 to 0.4), but the shading that smooth frames share correlates at any shift (up to 0.7
/// on the robustness footage): a match is told from chance by standing above this, not by a
/// fixed level. `None` when fewer than `MIN_NULL_DISPLACEMENTS` displacements keep enough
/// overlap or are flat. Errors: sizes differ, non-finite shift.
pub fn overlap_null_ncc<T: QualitySample>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, shift: (f64, f64), par: Parallelism) -> Result<Option<f64>> {
    check(&reference, &moving, shift)?;
    let (w, h) = (reference.width() as f64, reference.height() as f64);
    let (dx, dy) = (libm::round(w / 4.0), libm::round(h / 4.0));
    let mut nulls = alloc::vec::Vec::with_capacity(8);
    for (i, j) in [(-1.0, -1.0), (0.0, -1.0), (1.0, -1.0), (-1.0, 0.0), (1.0, 0.0), (-1.0, 1.0), (0.0, 1.0), (1.0, 1.0)] {
        let s = (shift.0 + i * dx, shift.1 + j * dy);
        let area = (w - libm::fabs(s.0)).max(0.0) * (h - libm::fabs(s.1)).max(0.0);
        if 4.0 * area < w * h {
            continue;
        }
        if let Some(r) = overlap(reference.size(), s).and_then(|o| pearson_region(&reference, &moving, s, o, par)) {
            nulls.push(r);
        }
    }
    Ok((nulls.len() >= MIN_NULL_DISPLACEMENTS).then(|| nulls.into_iter().fold(f64::NEG_INFINITY, f64::max)))
}

/// Fewest displacements [`overlap_null_ncc`] samples.
pub const MIN_NULL_DISPLACEMENTS: usize = 3;

/// The original plugin's measure: the mean coefficient of a 5 x 5 grid of `side x side`
/// templates spread evenly over the overlap's bounding box (each compared with the aligned
/// moving frame, sampled bilinearly); flat templates are left out. `None` when the overlap
/// is smaller than one template or every template is flat.
/// Errors: sizes differ, non-finite shift, `side` outside 3..=255.
pub fn grid_ncc<T: QualitySample>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, shift: (f64, f64), side: usize) -> Result<Option<f64>> {
    check(&reference, &moving, shift)?;
    require_range("quality template side", side, 3, 255)?;
    let Some(o) = overlap(reference.size(), shift) else { return Ok(None) };
    Ok(mean_coefficient(grid_regions(o, side).map(|g| pearson_region(&reference, &moving, shift, g, Parallelism::Sequential))))
}

/// The templates of [`grid_ncc`] in the overlap `o`: 5 x 5 of `side x side` spread evenly
/// over it, row by row; none when the overlap is smaller than one template.
fn grid_regions((x0, y0, x1, y1): Region, side: usize) -> impl Iterator<Item = Region> {
    let fits = x1 - x0 >= side && y1 - y0 >= side;
    let spread = move |lo: usize, hi: usize, k: usize| lo + (hi - side - lo) * k / (GRID_SIDE - 1);
    (0..if fits { GRID_REGIONS } else { 0 }).map(move |c| {
        let (tx, ty) = (spread(x0, x1, c % GRID_SIDE), spread(y0, y1, c / GRID_SIDE));
        (tx, ty, tx + side, ty + side)
    })
}

/// Templates along each side of the quality grid, and in all.
const GRID_SIDE: usize = 5;
const GRID_REGIONS: usize = GRID_SIDE * GRID_SIDE;

/// The mean of the coefficients that exist (flat templates have none); `None` without any.
fn mean_coefficient(coefficients: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let (sum, count) = coefficients.flatten().fold((0.0, 0usize), |(s, n), r| (s + r, n + 1));
    (count > 0).then(|| sum / count as f64)
}

/// The quality measures of a pair of integer frames ([`overlap_ncc`], [`grid_ncc`]) as
/// sums another device adds: the regions, and the four bilinear taps each reference pixel
/// meets. [`QualityPlan::measures`] turns the regions' [`Moments`] into the CPU's values to
/// the bit (integer sums do not depend on their order; a tap of weight 0 adds exactly 0).
#[derive(Clone, Debug, PartialEq)]
pub struct QualityPlan {
    /// Reference pixel `(x, y)` meets moving pixel `(x - origin.0 + dx, y - origin.1 + dy)`
    /// at tap `(dx, dy)`.
    pub origin: (i64, i64),
    /// The taps and their weights; a tap of weight 0 at `(0, 0)`, inside the frame.
    pub taps: [((usize, usize), f64); 4],
    /// The overlap first (none when it is empty), then the grid's templates.
    pub regions: Vec<Region>,
}

impl QualityPlan {
    /// The plan for frames of `size` at `shift`, templates of `side`. Errors: non-finite
    /// shift, `side` outside 3..=255.
    pub fn new(size: (usize, usize), shift: (f64, f64), side: usize) -> Result<Self> {
        require_finite("shift x", shift.0)?;
        require_finite("shift y", shift.1)?;
        require_range("quality template side", side, 3, 255)?;
        let (origin, weighted) = bilinear_taps(shift);
        let mut taps = [((0, 0), 0.0); 4];
        // In the order the CPU's four-tap sums take them, zero weights in their places.
        for (at, w) in weighted {
            taps[at.0 + 2 * at.1] = (at, w);
        }
        let mut regions: Vec<Region> = Vec::with_capacity(1 + GRID_REGIONS);
        if let Some(o) = overlap(size, shift) {
            regions.push(o);
            regions.extend(grid_regions(o, side));
        }
        Ok(QualityPlan { origin, taps, regions })
    }

    /// [`overlap_ncc`] and [`grid_ncc`] from the sums of [`QualityPlan::regions`], in order
    /// (taken one at a time: a device's sums are read where they were downloaded).
    pub fn measures(&self, sums: impl IntoIterator<Item = Moments<4>>) -> (Option<f64>, Option<f64>) {
        let weights = self.taps.map(|t| t.1);
        // The grid's templates lie in the overlap: any region at all means the overlap first.
        let mut r = sums.into_iter().map(|m| m.pearson(&weights));
        (r.next().flatten(), mean_coefficient(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use alloc::vec::Vec;

    fn scene(w: usize, h: usize, dx: f64, dy: f64) -> Image<f32> {
        // A smooth scene sampled at (x + dx, y + dy): exactly bilinear-friendly shifts
        // are not needed, the tests use integer shifts for exact results.
        Image::from_fn(w, h, |x, y| {
            let (x, y) = (x as f64 + dx, y as f64 + dy);
            (100.0 + 40.0 * libm::sin(x * 0.3) * libm::cos(y * 0.2) + 20.0 * libm::sin((x + y) * 0.13)) as f32
        })
        .unwrap()
    }

    #[test]
    fn aligned_frames_score_one() {
        let a = scene(80, 60, 0.0, 0.0);
        // b's pixel (u, v) shows a's (u + 7, v - 4).
        let b = scene(80, 60, 7.0, -4.0);
        let r = overlap_ncc(a.view(), b.view(), (7.0, -4.0), Parallelism::AllThreads).unwrap().unwrap();
        assert!((r - 1.0).abs() < 1e-9, "{r}");
        let g = grid_ncc(a.view(), b.view(), (7.0, -4.0), 9).unwrap().unwrap();
        assert!((g - 1.0).abs() < 1e-9, "{g}");
        // A wrong shift scores lower.
        let bad = overlap_ncc(a.view(), b.view(), (4.0, -1.0), Parallelism::Sequential).unwrap().unwrap();
        assert!(bad < 0.9, "{bad}");
        let badg = grid_ncc(a.view(), b.view(), (4.0, -1.0), 9).unwrap().unwrap();
        assert!(badg < 0.9, "{badg}");
    }

    /// Plain reference: every reference pixel whose moving position `(x - sx, y - sy)` lies
    /// in `[0, W - 2] x [0, H - 2]`, bilinear from its floor, two-pass Pearson in f64.
    fn reference(a: &Image<f32>, b: &Image<f32>, sx: f64, sy: f64) -> Option<f64> {
        let (w, h) = a.size();
        let (mut va, mut vb) = (Vec::new(), Vec::new());
        for y in 0..h {
            for x in 0..w {
                let (mx, my) = (x as f64 - sx, y as f64 - sy);
                if mx < 0.0 || my < 0.0 || mx > (w - 2) as f64 || my > (h - 2) as f64 {
                    continue;
                }
                let (i, j) = (mx.floor() as usize, my.floor() as usize);
                let (tx, ty) = (mx - i as f64, my - j as f64);
                let g = |u: usize, v: usize| b.at(u, v) as f64;
                va.push(a.at(x, y) as f64);
                vb.push((1.0 - ty) * ((1.0 - tx) * g(i, j) + tx * g(i + 1, j)) + ty * ((1.0 - tx) * g(i, j + 1) + tx * g(i + 1, j + 1)));
            }
        }
        if va.is_empty() {
            return None;
        }
        crate::ncc::coefficient::tests::pearson(&va, &vb)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        #[test]
        fn overlap_ncc_matches_reference(seed in 0u64..1000, sx in -20.0f64..20.0, sy in -15.0f64..15.0, whole in proptest::bool::ANY) {
            let (sx, sy) = if whole { (sx.round(), sy.round()) } else { (sx, sy) };
            let mut rng = crate::stitch::SplitMix64::new(seed);
            let a = Image::from_fn(40, 30, |_, _| (rng.uniform() * 255.0) as f32).unwrap();
            let b = Image::from_fn(40, 30, |x, y| a.at(x, y) * 0.5 + (rng.uniform() * 100.0) as f32).unwrap();
            let got = overlap_ncc(a.view(), b.view(), (sx, sy), Parallelism::AllThreads).unwrap();
            let want = reference(&a, &b, sx, sy);
            match (got, want) {
                (Some(g), Some(w)) => proptest::prop_assert!((g - w).abs() < 1e-9, "{} vs {}", g, w),
                (None, None) => {}
                // One-pixel overlaps are flat on one side in either implementation.
                (g, w) => proptest::prop_assert!(false, "{:?} vs {:?}", g, w),
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Integer frames (summed exactly) against the f64 definition on the same values.
        #[test]
        fn integer_overlap_ncc_matches_reference(seed in 0u64..1000, sx in -20.0f64..20.0, sy in -15.0f64..15.0, whole in proptest::bool::ANY, wide in proptest::bool::ANY) {
            let (sx, sy) = if whole { (sx.round(), sy.round()) } else { (sx, sy) };
            let mut rng = crate::stitch::SplitMix64::new(seed);
            let a = Image::from_fn(40, 30, |_, _| (rng.uniform() * 255.0) as u8).unwrap();
            let b = Image::from_fn(40, 30, |x, y| a.at(x, y) / 2 + (rng.uniform() * 100.0) as u8).unwrap();
            let want = reference(&a.map(|v| v as f32), &b.map(|v| v as f32), sx, sy);
            let got = if wide {
                overlap_ncc(a.map(|v| v as u16 * 257).view(), b.map(|v| v as u16 * 257).view(), (sx, sy), Parallelism::AllThreads).unwrap()
            } else {
                overlap_ncc(a.view(), b.view(), (sx, sy), Parallelism::AllThreads).unwrap()
            };
            match (got, want) {
                (Some(g), Some(w)) => proptest::prop_assert!((g - w).abs() < 1e-12, "{} vs {}", g, w),
                (None, None) => {}
                (g, w) => proptest::prop_assert!(false, "{:?} vs {:?}", g, w),
            }
        }
    }

    #[test]
    fn the_taps_are_the_bilinear_weights_with_the_zero_ones_left_out() {
        assert_eq!(bilinear_taps((3.0, -2.0)), ((3, -2), SmallVec::from_slice(&[((0, 0), 1.0)])));
        assert_eq!(bilinear_taps((2.25, 5.0)), ((3, 5), SmallVec::from_slice(&[((0, 0), 0.25), ((1, 0), 0.75)])));
        let (origin, four) = bilinear_taps((0.5, -0.75));
        assert_eq!(origin, (1, 0));
        assert_eq!(four.iter().map(|t| t.0).collect::<Vec<_>>(), [(0, 0), (1, 0), (0, 1), (1, 1)]);
        assert!((four.iter().map(|t| t.1).sum::<f64>() - 1.0).abs() < 1e-15);
    }

    /// A plan's sums, added here as a device would (four taps, zero weights included).
    fn planned<S: IntSample + QualitySample>(a: &Image<S>, b: &Image<S>, shift: (f64, f64), side: usize) -> (Option<f64>, Option<f64>) {
        let plan = QualityPlan::new(a.size(), shift, side).unwrap();
        let offsets = plan.taps.map(|t| t.0);
        let sums: Vec<Moments<4>> = plan.regions.iter().map(|&r| region_moments(&a.view(), &b.view(), plan.origin, offsets, r, Parallelism::Sequential)).collect();
        plan.measures(sums)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// A plan's measures are the CPU's to the bit, whatever the taps that carry weight.
        #[test]
        fn a_plans_measures_are_the_cpus_bit_for_bit(seed in 0u64..1000, sx in -30.0f64..30.0, sy in -25.0f64..25.0, whole_x in proptest::bool::ANY, whole_y in proptest::bool::ANY) {
            let shift = (if whole_x { sx.round() } else { sx }, if whole_y { sy.round() } else { sy });
            let src = crate::stitch::texture(80, 70, seed);
            let a = Image::from_fn(64, 48, |x, y| src.at(x + 3, y + 5) as u8).unwrap();
            let b = Image::from_fn(64, 48, |x, y| src.at(x + 9, y + 1) as u8).unwrap();
            let want = (overlap_ncc(a.view(), b.view(), shift, Parallelism::Sequential).unwrap(), grid_ncc(a.view(), b.view(), shift, 9).unwrap());
            proptest::prop_assert_eq!(planned(&a, &b, shift, 9), want);
            let (a16, b16) = (a.map(|v| v as u16 * 200), b.map(|v| v as u16 * 200 + 3));
            let want = (overlap_ncc(a16.view(), b16.view(), shift, Parallelism::Sequential).unwrap(), grid_ncc(a16.view(), b16.view(), shift, 9).unwrap());
            proptest::prop_assert_eq!(planned(&a16, &b16, shift, 9), want);
        }
    }

    /// Pairs measured together, their overlaps cut into bands (taller than one band, and
    /// not a whole number of them), give each pair's own measures to the bit, on one thread
    /// and on all: shifts whole and fractional, overlaps narrower than the grid's templates
    /// and none, a flat frame, u8 and u16.
    #[test]
    fn pairs_measured_together_give_each_pairs_measures() {
        let src = crate::stitch::texture(150, 150, 4);
        let frame = |x0: usize, y0: usize| Image::from_fn(97, 83, |x, y| src.row(y + y0)[x + x0] as u8).unwrap();
        let flat = Image::<u8>::filled(97, 83, 40).unwrap();
        let frames = [frame(0, 0), frame(6, 3), frame(20, 41), flat.clone()];
        let shifts = [(6.0, 3.0), (5.75, 2.5), (-14.25, -38.0), (0.0, 80.0), (96.5, 0.0), (2.0, -1.0)];
        let pairs: Vec<(usize, usize, (f64, f64))> = shifts.iter().enumerate().map(|(k, &s)| (k % 3, if k == 5 { 3 } else { (k + 1) % 3 }, s)).collect();
        for side in [9, 25] {
            for par in [Parallelism::Sequential, Parallelism::AllThreads] {
                let each = |a: &Image<u8>, b: &Image<u8>, s| (overlap_ncc(a.view(), b.view(), s, par).unwrap(), grid_ncc(a.view(), b.view(), s, side).unwrap());
                let want: Vec<Measures> = pairs.iter().map(|&(r, m, s)| each(&frames[r], &frames[m], s)).collect();
                assert!(want.iter().filter(|w| w.0.is_some() && w.1.is_some()).count() >= 3, "{want:?}");
                let views: Vec<PairToMeasure<'_, u8>> = pairs.iter().map(|&(r, m, s)| (frames[r].view(), frames[m].view(), s)).collect();
                assert_eq!(measures_of_pairs(&views, side, par).unwrap(), want, "side {side}");
                let wide: Vec<Image<u16>> = frames.iter().map(|f| f.map(|v| v as u16 * 257 + 1)).collect();
                let views: Vec<PairToMeasure<'_, u16>> = pairs.iter().map(|&(r, m, s)| (wide[r].view(), wide[m].view(), s)).collect();
                let want: Vec<Measures> = pairs.iter().map(|&(r, m, s)| (overlap_ncc(wide[r].view(), wide[m].view(), s, par).unwrap(), grid_ncc(wide[r].view(), wide[m].view(), s, side).unwrap())).collect();
                assert_eq!(measures_of_pairs(&views, side, par).unwrap(), want, "u16, side {side}");
            }
        }
        assert_eq!(measures_of_pairs::<u8>(&[], 9, Parallelism::AllThreads).unwrap(), Vec::new());
        // The errors of the measures pair by pair.
        let small = Image::<u8>::filled(96, 83, 40).unwrap();
        assert!(measures_of_pairs(&[(frames[0].view(), small.view(), (0.0, 0.0))], 9, Parallelism::Sequential).is_err());
        assert!(measures_of_pairs(&[(frames[0].view(), frames[1].view(), (f64::NAN, 0.0))], 9, Parallelism::Sequential).is_err());
        assert!(measures_of_pairs(&[(frames[0].view(), frames[1].view(), (0.0, 0.0))], 2, Parallelism::Sequential).is_err());
        // Floats are measured pair by pair.
        let f = scene(20, 20, 0.0, 0.0);
        assert!(f32::measures_of_pairs(&[(f.view(), f.view(), (0.0, 0.0))], 9, Parallelism::Sequential).is_none());
    }

    #[test]
    fn a_plan_without_overlap_has_no_regions_and_bad_input_errors() {
        let plan = QualityPlan::new((40, 30), (45.0, 0.0), 5).unwrap();
        assert!(plan.regions.is_empty());
        assert_eq!(plan.measures([]), (None, None));
        // An overlap narrower than a template: the overlap alone.
        assert_eq!(QualityPlan::new((40, 30), (0.0, 26.0), 5).unwrap().regions.len(), 1);
        assert_eq!(QualityPlan::new((40, 30), (1.5, -2.0), 5).unwrap().regions.len(), 26);
        assert!(QualityPlan::new((40, 30), (f64::NAN, 0.0), 5).is_err());
        assert!(QualityPlan::new((40, 30), (0.0, 0.0), 2).is_err());
    }

    #[test]
    fn overlap_region_matches_reference_count() {
        // The region is exactly the reference pixels whose bilinear sample lies inside.
        for (sx, sy) in [(0.0, 0.0), (3.5, -2.25), (-10.0, 5.0), (79.5, 0.0)] {
            let (w, h) = (40usize, 30usize);
            let mut want = 0;
            for y in 0..h {
                for x in 0..w {
                    let (mx, my) = (x as f64 - sx, y as f64 - sy);
                    if mx >= 0.0 && my >= 0.0 && mx <= (w - 2) as f64 && my <= (h - 2) as f64 {
                        want += 1;
                    }
                }
            }
            let got = overlap((w, h), (sx, sy)).map_or(0, |(a, b, c, d)| (c - a) * (d - b));
            assert_eq!(got, want, "{sx} {sy}");
        }
    }

    #[test]
    fn no_overlap_and_flat_give_none_and_bad_input_errors() {
        let a = scene(40, 30, 0.0, 0.0);
        assert_eq!(overlap_ncc(a.view(), a.view(), (45.0, 0.0), Parallelism::Sequential).unwrap(), None);
        assert_eq!(grid_ncc(a.view(), a.view(), (0.0, 29.5), 5).unwrap(), None);
        let flat = Image::<f32>::filled(40, 30, 3.0).unwrap();
        assert_eq!(overlap_ncc(flat.view(), a.view(), (1.0, 1.0), Parallelism::Sequential).unwrap(), None);
        assert_eq!(grid_ncc(flat.view(), a.view(), (1.0, 1.0), 5).unwrap(), None);
        let c = scene(41, 30, 0.0, 0.0);
        assert!(overlap_ncc(a.view(), c.view(), (0.0, 0.0), Parallelism::Sequential).is_err());
        assert!(overlap_ncc(a.view(), a.view(), (f64::NAN, 0.0), Parallelism::Sequential).is_err());
        assert!(grid_ncc(a.view(), a.view(), (0.0, 0.0), 2).is_err());
        assert!(grid_ncc(a.view(), a.view(), (0.0, f64::INFINITY), 5).is_err());
    }

    #[test]
    fn the_null_is_the_best_displaced_overlap_and_far_below_the_match() {
        // A frame pair of random texture, b's pixel (u, v) showing a's (u + 5, v - 3).
        let src = crate::stitch::texture(140, 110, 9);
        let cut = |x0: usize, y0: usize| Image::from_fn(120, 96, |x, y| src.row(y + y0)[x + x0]).unwrap();
        let (a, b) = (cut(5, 8), cut(10, 5));
        let shift = (5.0, -3.0);
        let matched = overlap_ncc(a.view(), b.view(), shift, Parallelism::Sequential).unwrap().unwrap();
        let null = overlap_null_ncc(a.view(), b.view(), shift, Parallelism::AllThreads).unwrap().unwrap();
        assert!(matched > 0.99 && null < 0.5, "match {matched}, null {null}");
        // The largest of the displacements a quarter frame away that keep a quarter overlap.
        let mut want = f64::NEG_INFINITY;
        for (i, j) in [(-1.0, -1.0), (0.0, -1.0), (1.0, -1.0), (-1.0, 0.0), (1.0, 0.0), (-1.0, 1.0), (0.0, 1.0), (1.0, 1.0)] {
            let s = (shift.0 + 30.0 * i, shift.1 + 24.0 * j);
            if 4.0 * (120.0 - libm::fabs(s.0)) * (96.0 - libm::fabs(s.1)) >= 120.0 * 96.0 {
                want = want.max(overlap_ncc(a.view(), b.view(), s, Parallelism::Sequential).unwrap().unwrap());
            }
        }
        assert_eq!(null, want);
        // A shift so large that few displacements keep a quarter overlap: no null.
        assert_eq!(overlap_null_ncc(a.view(), b.view(), (90.0, 70.0), Parallelism::Sequential).unwrap(), None);
        let flat = Image::<f32>::filled(120, 96, 3.0).unwrap();
        assert_eq!(overlap_null_ncc(flat.view(), b.view(), shift, Parallelism::Sequential).unwrap(), None);
        assert!(overlap_null_ncc(a.view(), cut(0, 0).view(), (f64::NAN, 0.0), Parallelism::Sequential).is_err());
        let c = Image::<f32>::filled(121, 96, 3.0).unwrap();
        assert!(overlap_null_ncc(a.view(), c.view(), shift, Parallelism::Sequential).is_err());
    }
}

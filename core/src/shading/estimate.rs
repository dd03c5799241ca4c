//! The flat field (and a constant dark field) estimated from the tiles themselves.
//!
//! BaSiC decomposes the stack of tiles into a low-rank part (the shading) and a sparse part
//! (the scene) by an ADMM iteration. Where the tiles show different parts of one specimen,
//! as a grid's do, the same model is found from per-pixel robust statistics across the
//! stack, the idea behind BaSiC's own initialisation and CIDRE's (Smith et al., Nat. Methods
//! 12, 404, 2015): at a fixed pixel `x`, tile i records `F(x) S_i(x) + D`, and the scene
//! values `S_i(x)` of tiles cut from different places are draws from one distribution
//! whatever `x` is, so any location statistic of the stack at `x` is `F(x)` times one
//! constant (plus `D`). The steps:
//!
//! 1. each tile is reduced to block means (blocks of `b x b` pixels, `b` so that the
//!    longer side has about [`BLOCKS`] blocks: the shading is smooth, and averaging a block
//!    takes the noise out); a block more than half saturated (at the type's largest value)
//!    is left out, and a tile that is blank (every pixel equal), mostly saturated or
//!    without light is left out whole, with its reason;
//! 2. with a dark field asked for, the constant `D` (see [`dark_level`]);
//! 3. each tile's blocks, less `D`, are divided by their mean, so a tile over a bright
//!    part of the specimen weighs as much as one over a dark part;
//! 4. at each block the interquartile mean across the tiles (the mean of the middle half:
//!    robust to the tiles where an object happens to lie, less noisy than the median);
//! 5. a polynomial surface fitted to those values (`surface.rs`, robust to what the stack
//!    did not average out), of degree 2 below 16 tiles and 4 from 16 (a tighter model where
//!    the statistics are poorer), evaluated at every pixel and divided by its mean.
//!
//! Its limits: the scene must not itself be brighter at the same place of every tile (a
//! grid over a specimen with structure that repeats at the tile's period), and below
//! [`RELIABLE_TILES`] tiles the statistics hold too few tiles to average the scene out: the
//! estimate is made and flagged unreliable.

use super::surface::{horner, Sample, Surface};
use super::Shading;
use crate::error::{Error, Result};
use crate::image::{AnyView, Image, ImageView, Pixel};
use crate::stitch::{majority_shape, tile_shape, FrameSource};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// The fewest usable tiles an estimate is made from.
pub const MIN_TILES: usize = 3;
/// Below this many usable tiles the estimate is flagged unreliable.
pub const RELIABLE_TILES: usize = 8;
/// Blocks along the tile's longer side.
pub const BLOCKS: usize = 96;
/// From this many usable tiles the flat field is a surface of degree 4, below it of
/// degree 2.
const QUARTIC_TILES: usize = 16;
/// The quantile of the stack that the dark level is read from ([`dark_level`]).
const LOW_QUANTILE: f64 = 0.1;
/// Below this relative range of the flat field (max / min - 1) the shading is too even for
/// the dark level to be told from the light ([`dark_level`]): well above what the scene
/// leaves in an estimate of an even field.
const MIN_RANGE: f64 = 0.1;

/// What to estimate.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct EstimateParams {
    /// Estimate a constant dark field too (else `D = 0`).
    pub dark: bool,
    /// The flat field's polynomial degree (1..=6); 0: 2 below 16 usable tiles, 4 from 16.
    pub degree: usize,
}

impl EstimateParams {
    pub fn validate(&self) -> Result<()> {
        crate::error::require_range("flat-field degree", self.degree, 0, 6)
    }
}

/// An estimated shading model and how it was found.
#[derive(Clone, Debug, PartialEq)]
pub struct ShadingEstimate {
    pub shading: Shading,
    /// Tiles whose statistics made the estimate.
    pub tiles_used: usize,
    /// Tiles left out, with the reason.
    pub excluded: Vec<(usize, String)>,
    /// The flat field's polynomial degree.
    pub degree: usize,
    /// Whether at least [`RELIABLE_TILES`] tiles made it.
    pub reliable: bool,
    /// The constant dark level (grey levels) where a dark field was asked for.
    pub dark_level: Option<f64>,
    /// Why the dark level is 0 where it could not be told from the light.
    pub dark_note: Option<String>,
}

/// Estimates the flat field (and, with `p.dark`, a constant dark field) of the tiles of
/// `tiles` (module doc); RGB tiles by their luma. Tiles of another size or type than most,
/// unreadable, blank or mostly saturated tiles are left out and listed.
/// Errors: bad parameters, fewer than [`MIN_TILES`] usable tiles, an estimate that falls
/// to or below zero somewhere (no usable shading in the tiles).
pub fn estimate_shading(tiles: &dyn FrameSource, p: &EstimateParams) -> Result<ShadingEstimate> {
    p.validate()?;
    let shapes: Vec<core::result::Result<crate::stitch::TileShape, String>> = (0..tiles.len()).map(|i| tile_shape(tiles, i)).collect();
    let common = majority_shape(&shapes).ok_or_else(|| Error::InvalidParameter { name: "tiles", reason: "no tile could be read".into() })?;
    let (w, h) = common.size;
    let b = w.max(h).div_ceil(BLOCKS).max(1);
    let grid = (w.div_ceil(b), h.div_ceil(b));
    let mut excluded = Vec::new();
    let mut stacks: Vec<Vec<f64>> = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        match shape {
            Err(why) => excluded.push((i, why.clone())),
            Ok(s) if *s != common => excluded.push((i, alloc::format!("it is {}x{} {}, most tiles {w}x{h} {}", s.size.0, s.size.1, s.type_name, common.type_name))),
            Ok(_) => {
                let f = tiles.frame(i).map_err(|why| Error::InvalidParameter { name: "tiles", reason: alloc::format!("tile {i} could not be read again: {why}") })?;
                let v = f.view().map_err(|why| Error::InvalidParameter { name: "tiles", reason: alloc::format!("tile {i}: {why}") })?;
                match blocks(&v, b, grid)? {
                    Ok(means) => stacks.push(means),
                    Err(why) => excluded.push((i, why)),
                }
            }
        }
    }
    let centres: Vec<(f64, f64)> = (0..grid.0 * grid.1)
        .map(|k| {
            let (bx, by) = (k % grid.0, k / grid.0);
            let cx = (bx * b) as f64 + ((w - bx * b).min(b)) as f64 / 2.0;
            let cy = (by * b) as f64 + ((h - by * b).min(b)) as f64 / 2.0;
            (2.0 * cx / w as f64 - 1.0, 2.0 * cy / h as f64 - 1.0)
        })
        .collect();
    if stacks.len() < MIN_TILES {
        return Err(too_few(stacks.len()));
    }
    let degree = if p.degree > 0 { p.degree } else if stacks.len() < QUARTIC_TILES { 2 } else { 4 };

    // 2. The dark level; 3 to 5, the flat field's surface.
    let (dark, dark_note) = if p.dark { dark_level(&stacks, &centres, degree)? } else { (0.0, None) };
    let (surface, used) = flat_surface(&stacks, &centres, degree, dark)?;
    let flat = evaluate(&surface, (w, h))?;
    let (lo, hi) = flat.as_slice().iter().fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    // (NaN fails too.)
    if lo.is_nan() || lo <= 0.02 * hi {
        return Err(Error::InvalidParameter {
            name: "flat field",
            reason: alloc::format!("the estimate falls to {lo:.3} of its mean where its largest value is {hi:.3}: the tiles show no usable shading (give the flat field as a file)"),
        });
    }
    let dark_image = if p.dark { Some(Image::filled(w, h, dark as f32)?) } else { None };
    Ok(ShadingEstimate {
        shading: Shading::new(flat, dark_image)?,
        tiles_used: used,
        excluded,
        degree,
        reliable: used >= RELIABLE_TILES,
        dark_level: p.dark.then_some(dark),
        dark_note,
    })
}

/// Steps 3 to 5 of the module doc: each tile's blocks less `dark` over their mean, the
/// stack's interquartile mean at each block, the surface fitted to them; with the number
/// of tiles that made it (a tile without light above `dark` is left out).
fn flat_surface(stacks: &[Vec<f64>], centres: &[(f64, f64)], degree: usize, dark: f64) -> Result<(Surface, usize)> {
    let mut normalised = Vec::with_capacity(stacks.len());
    for s in stacks {
        let (sum, n) = s.iter().filter(|v| !v.is_nan()).fold((0.0, 0usize), |(a, n), v| (a + v - dark, n + 1));
        let mean = sum / n as f64;
        if mean > 0.0 {
            normalised.push(s.iter().map(|v| (v - dark) / mean).collect::<Vec<f64>>());
        }
    }
    if normalised.len() < MIN_TILES {
        return Err(too_few(normalised.len()));
    }
    Ok((Surface::fit(&stack_samples(&normalised, centres, iq_mean), degree)?, normalised.len()))
}

fn too_few(n: usize) -> Error {
    Error::InvalidParameter { name: "tiles", reason: alloc::format!("{n} usable tile(s): estimating a flat field needs at least {MIN_TILES} (give the flat field as a file instead)") }
}

/// The constant dark level `D`. Where the flat field found without it varies by less than
/// [`MIN_RANGE`] across the tile, an offset cannot be told from the light: `D = 0`, with
/// the reason. Otherwise, without normalising the tiles, the stack's centre at a
/// block is `M(x) = m F(x) + D` and its low quantile `Q(x) = q F(x) + D`, `m` and `q` the
/// scene's location and low quantile ([`LOW_QUANTILE`]); both fitted as surfaces and
/// regressed over the blocks, `Q = a M + c` gives `a = q / m` and `c = D (1 - a)`, so
/// `D = c / (1 - a)`, limited to `[0, min Q]` (an offset cannot exceed the darkest signal).
fn dark_level(stacks: &[Vec<f64>], centres: &[(f64, f64)], degree: usize) -> Result<(f64, Option<String>)> {
    let (plain, _) = flat_surface(stacks, centres, degree, 0.0)?;
    let (lo, hi) = centres.iter().map(|&(u, v)| plain.at(u, v)).fold((f64::MAX, f64::MIN), |(l, h), f| (l.min(f), h.max(f)));
    if !(lo > 0.0 && hi / lo - 1.0 >= MIN_RANGE) {
        return Ok((0.0, Some(alloc::format!("the shading varies by {:.1} % across the tile: too little to tell a dark offset from the light, taken as 0", (hi / lo - 1.0) * 100.0))));
    }
    let m = Surface::fit(&stack_samples(stacks, centres, iq_mean), degree)?;
    let q = Surface::fit(&stack_samples(stacks, centres, |v| quantile(v, LOW_QUANTILE)), degree)?;
    let pts: Vec<(f64, f64)> = centres.iter().map(|&(u, v)| (m.at(u, v), q.at(u, v))).collect();
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let (sxx, sxy) = pts.iter().fold((0.0, 0.0), |(a, b), p| (a + (p.0 - mx) * (p.0 - mx), b + (p.0 - mx) * (p.1 - my)));
    let a = if sxx > 0.0 { sxy / sxx } else { f64::NAN };
    let c = my - a * mx;
    if !(a > 0.0 && a < 0.999) {
        return Ok((0.0, Some("the stack's low and central values do not follow one shading: the dark offset is taken as 0".into())));
    }
    let floor = pts.iter().map(|p| p.1).fold(f64::MAX, f64::min);
    Ok(((c / (1.0 - a)).clamp(0.0, floor.max(0.0)), None))
}

/// One sample per block: `stat` of the block's values across `stacks` (NaN, left-out
/// blocks, skipped), weighted by how many there are; blocks no tile has are left out.
fn stack_samples(stacks: &[Vec<f64>], centres: &[(f64, f64)], stat: impl Fn(&mut [f64]) -> f64) -> Vec<Sample> {
    let mut values = Vec::with_capacity(stacks.len());
    centres
        .iter()
        .enumerate()
        .filter_map(|(k, &(u, v))| {
            values.clear();
            values.extend(stacks.iter().map(|s| s[k]).filter(|x| !x.is_nan()));
            (!values.is_empty()).then(|| Sample { u, v, value: stat(&mut values), weight: values.len() as f64 })
        })
        .collect()
}

/// The mean of the middle half of `v` (all of it below 4 values).
fn iq_mean(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let trim = v.len() / 4;
    let mid = &v[trim..v.len() - trim];
    mid.iter().sum::<f64>() / mid.len() as f64
}

/// The `p` quantile of `v` (linear between order statistics).
fn quantile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let at = p * (v.len() - 1) as f64;
    let (i, t) = (at as usize, at - libm::floor(at));
    if i + 1 < v.len() { v[i] * (1.0 - t) + v[i + 1] * t } else { v[i] }
}

/// The surface at every pixel centre of a `w x h` tile, as f32.
fn evaluate(s: &Surface, (w, h): (usize, usize)) -> Result<Image<f32>> {
    let mut out = Image::<f32>::new(w, h)?;
    for y in 0..h {
        let poly = s.along(2.0 * (y as f64 + 0.5) / h as f64 - 1.0);
        for (x, o) in out.row_mut(y).iter_mut().enumerate() {
            *o = horner(&poly, 2.0 * (x as f64 + 0.5) / w as f64 - 1.0) as f32;
        }
    }
    Ok(out)
}

/// A tile's block means (`b x b` blocks, `grid` of them; the last ones partial), NaN where
/// more than half a block is saturated; or why the tile cannot be used.
fn blocks(v: &AnyView<'_>, b: usize, grid: (usize, usize)) -> Result<core::result::Result<Vec<f64>, String>> {
    match v {
        AnyView::U8(i) => block_means(*i, b, grid, |p| p as f64, |p| p == u8::MAX),
        AnyView::U16(i) => block_means(*i, b, grid, |p| p as f64, |p| p == u16::MAX),
        AnyView::F32(i) => block_means(*i, b, grid, |p| p as f64, |_| false),
        // Luma (Rec. 601); saturated where any colour is.
        AnyView::Rgba8(i) => block_means(*i, b, grid, |p| 0.299 * p.r as f64 + 0.587 * p.g as f64 + 0.114 * p.b as f64, |p| p.r == 255 || p.g == 255 || p.b == 255),
    }
}

fn block_means<T: Pixel>(img: ImageView<'_, T>, b: usize, grid: (usize, usize), value: impl Fn(T) -> f64, saturated: impl Fn(T) -> bool) -> Result<core::result::Result<Vec<f64>, String>> {
    let (w, h) = img.size();
    let mut sum = crate::error::try_filled(grid.0 * grid.1, 0.0f64)?;
    let mut good = crate::error::try_filled(grid.0 * grid.1, 0usize)?;
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for y in 0..h {
        let row = &mut sum[(y / b) * grid.0..(y / b + 1) * grid.0];
        let count = &mut good[(y / b) * grid.0..(y / b + 1) * grid.0];
        for (x, &p) in img.row(y).iter().enumerate() {
            let v = value(p);
            lo = lo.min(v);
            hi = hi.max(v);
            if !saturated(p) {
                row[x / b] += v;
                count[x / b] += 1;
            }
        }
    }
    if lo == hi {
        return Ok(Err(alloc::format!("blank (every pixel is {lo}): it shows no shading")));
    }
    let mut means = vec![f64::NAN; grid.0 * grid.1];
    let mut valid = 0;
    for k in 0..means.len() {
        let (bx, by) = (k % grid.0, k / grid.0);
        let area = (w - bx * b).min(b) * (h - by * b).min(b);
        if 2 * good[k] > area {
            means[k] = sum[k] / good[k] as f64;
            valid += 1;
        }
    }
    if 2 * valid <= means.len() {
        return Ok(Err("more than half of it is saturated".into()));
    }
    Ok(Ok(means))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::AnyView;
    use crate::stitch::{texture, InMemory, SplitMix64};

    /// A smooth, off-centre shading with a tilt, as a lamp a little off the axis gives:
    /// `1 - s r^2 / 2` about `(0.55 w, 0.45 h)` times a tilt `1 + 0.27 s u`, in float64
    /// (`s = 0`: even).
    fn shading(x: f64, y: f64, (w, h): (usize, usize), s: f64) -> f64 {
        let (u, v) = (2.0 * x / w as f64 - 1.1, 2.0 * y / h as f64 - 0.9);
        (1.0 - s * (u * u + v * v) / 2.0) * (1.0 + 0.27 * s * (2.0 * x / w as f64 - 1.0))
    }

    /// `n` tiles of `size`: random scenes (different textures and brightness) under the
    /// shading, plus `dark`, with noise, rounded to 16 bits.
    fn tiles(n: usize, size: (usize, usize), s: f64, dark: f64, seed: u64) -> (Vec<Image<u16>>, Image<f64>) {
        let (w, h) = size;
        let truth = Image::from_fn(w, h, |x, y| shading(x as f64 + 0.5, y as f64 + 0.5, size, s)).unwrap();
        let mean = truth.as_slice().iter().sum::<f64>() / (w * h) as f64;
        let truth = truth.map(|v| v / mean);
        let mut rng = SplitMix64::new(seed);
        let out = (0..n)
            .map(|k| {
                let scene = texture(w, h, seed * 100 + k as u64);
                let level = 2000.0 + 6000.0 * rng.uniform();
                Image::from_fn(w, h, |x, y| (truth.at(x, y) * level * (0.5 + scene.at(x, y) as f64 / 255.0) + dark + 20.0 * rng.normal()).round().clamp(0.0, 65535.0) as u16).unwrap()
            })
            .collect();
        (out, truth)
    }

    /// The root-mean-square and the largest difference of `got` from `truth`.
    fn errors(got: ImageView<'_, f32>, truth: &Image<f64>) -> (f64, f64) {
        let (w, h) = got.size();
        let d: Vec<f64> = (0..h).flat_map(|y| (0..w).map(move |x| (x, y))).map(|(x, y)| (got.row(y)[x] as f64 - truth.at(x, y)).abs()).collect();
        (libm::sqrt(d.iter().map(|v| v * v).sum::<f64>() / d.len() as f64), d.iter().cloned().fold(0.0, f64::max))
    }

    fn within(got: ImageView<'_, f32>, truth: &Image<f64>, rms: f64, worst: f64) -> bool {
        let e = errors(got, truth);
        e.0 < rms && e.1 < worst
    }

    #[test]
    fn the_flat_field_of_random_scenes_is_found_within_a_percent() {
        // 30 % fall-off at the farthest corner, 25 and 9 tiles: within 1 % of the float64
        // truth (RMS), the corners (extrapolated by the surface) within 3 and 4 %.
        for (n, worst) in [(25, 0.03), (9, 0.04)] {
            let (t, truth) = tiles(n, (160, 120), 0.3, 0.0, 7);
            let views: Vec<AnyView<'_>> = t.iter().map(|t| AnyView::U16(t.view())).collect();
            let e = estimate_shading(&InMemory(&views), &EstimateParams::default()).unwrap();
            let err = errors(e.shading.flat(), &truth);
            assert!(err.0 < 0.01 && err.1 < worst, "{n} tiles: {err:?}");
            assert_eq!((e.tiles_used, e.reliable, e.degree), (n, true, if n < 16 { 2 } else { 4 }));
            assert_eq!(e.dark_level, None);
        }
    }

    #[test]
    fn a_constant_dark_field_is_found() {
        let (t, truth) = tiles(36, (160, 120), 0.3, 1500.0, 9);
        let views: Vec<AnyView<'_>> = t.iter().map(|t| AnyView::U16(t.view())).collect();
        let e = estimate_shading(&InMemory(&views), &EstimateParams { dark: true, ..Default::default() }).unwrap();
        let d = e.dark_level.unwrap();
        // Within 300 grey levels (5 % of the mean signal).
        assert!((d - 1500.0).abs() < 300.0, "dark {d}");
        assert!(within(e.shading.flat(), &truth, 0.01, 0.04), "{:?}", errors(e.shading.flat(), &truth));
        // Without the dark level, the offset flattens the estimate.
        let plain = estimate_shading(&InMemory(&views), &EstimateParams::default()).unwrap();
        assert!(plain.shading.vignetting() < e.shading.vignetting() - 0.03, "{} vs {}", plain.shading.vignetting(), e.shading.vignetting());
        // No shading: the dark level cannot be told, 0 with the reason.
        let (t, _) = tiles(16, (160, 120), 0.0, 300.0, 2);
        let views: Vec<AnyView<'_>> = t.iter().map(|t| AnyView::U16(t.view())).collect();
        let e = estimate_shading(&InMemory(&views), &EstimateParams { dark: true, ..Default::default() }).unwrap();
        assert!(e.dark_level == Some(0.0) && e.dark_note.is_some(), "{:?}", e.dark_level);
    }

    #[test]
    fn blank_saturated_and_odd_tiles_are_left_out_and_few_tiles_flagged() {
        let (mut t, truth) = tiles(12, (120, 90), 0.3, 0.0, 4);
        t[2] = Image::filled(120, 90, 0).unwrap();
        t[5] = Image::filled(120, 90, 65535).unwrap();
        t[5].set(0, 0, 3);
        let small = Image::<u16>::filled(40, 30, 9).unwrap();
        let mut views: Vec<AnyView<'_>> = t.iter().map(|t| AnyView::U16(t.view())).collect();
        views[7] = AnyView::U16(small.view());
        let e = estimate_shading(&InMemory(&views), &EstimateParams::default()).unwrap();
        let reasons: Vec<(usize, bool)> = e.excluded.iter().map(|(i, why)| (*i, why.contains(["blank", "saturated", "40x30"][[2, 5, 7].iter().position(|k| k == i).unwrap()]))).collect();
        assert_eq!(reasons, [(2, true), (5, true), (7, true)], "{:?}", e.excluded);
        assert_eq!(e.tiles_used, 9);
        assert!(within(e.shading.flat(), &truth, 0.01, 0.05), "{:?}", errors(e.shading.flat(), &truth));
        // Four usable tiles: made, flagged unreliable; two: an error.
        let e = estimate_shading(&InMemory(&views[8..]), &EstimateParams::default()).unwrap();
        assert!(!e.reliable && e.tiles_used == 4);
        let err = estimate_shading(&InMemory(&views[..3]), &EstimateParams::default()).unwrap_err();
        assert!(alloc::format!("{err}").contains("2 usable tile(s)"), "{err}");
        assert!(estimate_shading(&InMemory(&views), &EstimateParams { degree: 7, ..Default::default() }).is_err());
        // 8-bit and float tiles alike.
        let small: Vec<Image<u8>> = t[8..].iter().map(|t| t.map(|v| (v / 64).min(255) as u8)).collect();
        let views: Vec<AnyView<'_>> = small.iter().map(|t| AnyView::U8(t.view())).collect();
        assert!(within(estimate_shading(&InMemory(&views), &EstimateParams::default()).unwrap().shading.flat(), &truth, 0.015, 0.06));
        let float: Vec<Image<f32>> = t[8..].iter().map(|t| t.map(|v| v as f32 / 65535.0)).collect();
        let views: Vec<AnyView<'_>> = float.iter().map(|t| AnyView::F32(t.view())).collect();
        assert!(within(estimate_shading(&InMemory(&views), &EstimateParams::default()).unwrap().shading.flat(), &truth, 0.015, 0.06));
    }
}

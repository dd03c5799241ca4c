//! The checks the firmware runs, on the images built into it, and that the host test
//! (`tests/firmware_checksums.rs`, which includes this file) runs on x86-64 to produce the
//! expected digests in `expected.rs`: one source for both, so they cannot drift apart.
//!
//! Each check turns an output into a [`Digest`]: an FNV-1a hash of its bytes, and two
//! float moments of its values. Integer outputs must hash bit-identically to the host's;
//! outputs computed in floating point (the Gaussian's f32 path before rounding, the
//! registration's subpixel shift) are compared through their moments within the bound
//! stated by [`Check::tolerance`], since the host's AVX2/AVX-512 kernels may round
//! differently from the portable ones on the target. (On the two targets here they do
//! not: every hash matches, floats included; the bounds are what is promised.)

use alloc::vec::Vec;
use tessera_core::filter::{gaussian_blur, mean_filter, BoxParams, GaussianParams, MAX_WINDOW};
use tessera_core::ncc::{NccSample, SearchFrame};
use tessera_core::stereo::{stereo_sgm, StereoParams};
use tessera_core::stitch::{register_pair, RegisterParams};
use tessera_core::variance::{local_variance, VarianceKernel, VarianceMethod, VarianceParams};
use tessera_core::{AnyView, Border, Error, Image, ImageView, Parallelism};

/// Width and height of every embedded image.
pub const W: usize = 160;
pub const H: usize = 120;

/// Raw 8-bit grey crops (made by `assets/make_assets.py`): a photograph for the filters,
/// two crops of another one 9 px right and 5 px up of each other, and the Middlebury
/// "cones" pair at half size.
static CAMERA: &[u8; W * H] = include_bytes!("../assets/camera.gray");
static COFFEE_REF: &[u8; W * H] = include_bytes!("../assets/coffee_ref.gray");
static COFFEE_MOVING: &[u8; W * H] = include_bytes!("../assets/coffee_moving.gray");
static CONES_LEFT: &[u8; W * H] = include_bytes!("../assets/cones_left.gray");
static CONES_RIGHT: &[u8; W * H] = include_bytes!("../assets/cones_right.gray");

/// The registration's true shift between the two coffee crops (`make_assets.py`).
pub const TRUE_SHIFT: (f64, f64) = (9.0, -5.0);

/// One operation the firmware runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// 7x7 mean filter of u8, Reflect101: exact integer sums, rounded half up.
    Mean,
    /// Gaussian blur of u8, sigma 2 (FIR, radius 6): f32 arithmetic, rounded once to u8.
    Gaussian,
    /// Local variance of u8 by the exact recursive method, tent radius 7: integer sums,
    /// one division per pixel into f32.
    Variance,
    /// `register_pair` of the coffee crops: the counts of templates and NCC evaluations
    /// (hashed, exact) and the subpixel shift (the moments, within a bound).
    Register,
    /// The same registration on the crops as f32, whose NCC cross terms run through
    /// `wide`'s f32x8 (`simd::dot_f32`): the shift, within the same bound (the counts may
    /// follow a different rounding of a near-tie, so they are not compared).
    RegisterF32,
    /// SGM with census 7x5, 32 disparities, 8 paths, integer disparities (no subpixel),
    /// left-right check, median and hole filling: the whole pipeline in integers.
    Stereo,
}

/// What a firmware built with only the mean filter runs, and what the full one runs.
pub const MEAN_ONLY: &[Check] = &[Check::Mean];
pub const FULL: &[Check] = &[
    Check::Mean,
    Check::Gaussian,
    Check::Variance,
    Check::Register,
    Check::RegisterF32,
    Check::Stereo,
];

impl Check {
    pub fn name(self) -> &'static str {
        match self {
            Check::Mean => "mean 7x7 u8",
            Check::Gaussian => "gaussian s=2 u8",
            Check::Variance => "variance recursive tent r=7",
            Check::Register => "register_pair",
            Check::RegisterF32 => "register_pair f32",
            Check::Stereo => "sgm census 32d",
        }
    }

    /// How far `sum` may lie from the host's (and `weighted`, whose weights reach 8, eight
    /// times as far); `None`: the moments are not compared. Gaussian: a pixel's single
    /// rounding may go the other way where its f32 value lies within an ulp of a half, so
    /// 0.1 % of the pixels may differ by one grey level. Shift: 1e-3 px on each axis, far
    /// below what registration resolves and far above the rounding of the refinement.
    pub fn tolerance(self) -> Option<f64> {
        match self {
            Check::Gaussian => Some((W * H) as f64 * 1e-3),
            Check::Register | Check::RegisterF32 => Some(2e-3),
            _ => None,
        }
    }

    /// Whether the hash must equal the host's: for every output but those that follow
    /// from f32 arithmetic (the Gaussian's u8 values, the f32 registration's counts).
    pub fn exact(self) -> bool {
        !matches!(self, Check::Gaussian | Check::RegisterF32)
    }

    /// Runs the operation (single-threaded, as on the target) and digests its output.
    pub fn run(self) -> Result<Digest, Error> {
        let camera = view(CAMERA)?;
        match self {
            Check::Mean => {
                let mut out = Image::<u8>::new(W, H)?;
                mean_filter(camera, out.view_mut(), &BoxParams::square(7, Border::Reflect101), Parallelism::Sequential)?;
                Ok(Digest::of_u8(out.as_slice()))
            }
            Check::Gaussian => {
                let mut out = Image::<u8>::new(W, H)?;
                gaussian_blur(camera, out.view_mut(), &GaussianParams::default(), Parallelism::Sequential)?;
                Ok(Digest::of_u8(out.as_slice()))
            }
            Check::Variance => {
                let mut out = Image::<f32>::new(W, H)?;
                let p = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius: 7 });
                local_variance(camera, out.view_mut(), &p, Parallelism::Sequential)?;
                Ok(Digest::of_f32(out.as_slice()))
            }
            Check::Register => register(view(COFFEE_REF)?, view(COFFEE_MOVING)?),
            Check::RegisterF32 => {
                let as_f32 = |v: ImageView<'_, u8>| v.to_image().map(|p| p as f32);
                let (reference, moving) = (as_f32(view(COFFEE_REF)?), as_f32(view(COFFEE_MOVING)?));
                register(reference.view(), moving.view())
            }
            Check::Stereo => {
                let mut disp = Image::<f32>::new(W, H)?;
                let p = StereoParams { max_disparity: 32, subpixel: false, ..StereoParams::default() };
                let (left, right) = (AnyView::U8(view(CONES_LEFT)?), AnyView::U8(view(CONES_RIGHT)?));
                stereo_sgm(left, right, disp.view_mut(), &p, Parallelism::Sequential)?;
                Ok(Digest::of_f32(disp.as_slice()))
            }
        }
    }
}

fn view(data: &'static [u8; W * H]) -> Result<ImageView<'static, u8>, Error> {
    ImageView::from_slice(data, W, H)
}

/// `register_pair` with the defaults (search radius 16): the counts of templates and NCC
/// evaluations hashed, the shift in the moments.
fn register<T: NccSample + Into<f64>>(reference: ImageView<'_, T>, moving: ImageView<'_, T>) -> Result<Digest, Error> {
    let moving = SearchFrame::new(moving)?;
    let p = RegisterParams { search_radius: 16, ..RegisterParams::default() };
    let r = register_pair(reference, &moving, &p, (0.0, 0.0), Parallelism::Sequential)?;
    let counts = [r.templates, r.textured, r.above_threshold, r.vectors_used, r.evaluations as usize];
    // A skipped pair has no shift: NaN moments never lie within a bound.
    let (x, y) = r.shift.unwrap_or((f64::NAN, f64::NAN));
    Ok(Digest { hash: Digest::of_usize(&counts).hash, ..Digest::of_f64(&[x, y]) })
}

/// A digest of one output: `hash` is FNV-1a over its values' little-endian bytes; `sum`
/// and `weighted` are `sum v_i` and `sum (i mod 8 + 1) v_i` over its finite values in f64
/// (the weights catch values moved to other places).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Digest {
    pub hash: u64,
    pub sum: f64,
    pub weighted: f64,
}

impl Digest {
    fn of<const N: usize>(values: impl Iterator<Item = ([u8; N], f64)>) -> Digest {
        let mut d = Digest { hash: 0xcbf2_9ce4_8422_2325, sum: 0.0, weighted: 0.0 };
        for (i, (bytes, v)) in values.enumerate() {
            for b in bytes {
                d.hash = (d.hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
            }
            // The invalid disparity is infinite; NaN is kept, so that it never agrees.
            if !v.is_infinite() {
                d.sum += v;
                d.weighted += (i % 8 + 1) as f64 * v;
            }
        }
        d
    }
    pub fn of_u8(v: &[u8]) -> Digest {
        Digest::of(v.iter().map(|&x| ([x], x as f64)))
    }
    pub fn of_f32(v: &[f32]) -> Digest {
        Digest::of(v.iter().map(|&x| (x.to_bits().to_le_bytes(), x as f64)))
    }
    pub fn of_f64(v: &[f64]) -> Digest {
        Digest::of(v.iter().map(|&x| (x.to_bits().to_le_bytes(), x)))
    }
    pub fn of_usize(v: &[usize]) -> Digest {
        Digest::of(v.iter().map(|&x| ((x as u64).to_le_bytes(), x as f64)))
    }

    /// Whether `self` (the target's) agrees with `expected` (the host's) under `check`'s
    /// rule: [`Check::exact`] and [`Check::tolerance`].
    pub fn agrees(&self, expected: &Digest, check: Check) -> bool {
        let hash_ok = !check.exact() || self.hash == expected.hash;
        let moments_ok = match check.tolerance() {
            None => true,
            Some(tol) => (self.sum - expected.sum).abs() <= tol && (self.weighted - expected.weighted).abs() <= 8.0 * tol,
        };
        hash_ok && moments_ok
    }
}

/// Bad input on the target: the same `Error` values as on the host, returned, never a
/// panic. Each entry is a name and whether the expected error came back; `full` adds the
/// Gaussian's case.
pub fn bad_input(full: bool) -> Vec<(&'static str, bool)> {
    let mut out = Vec::new();
    // An image type cannot hold zero pixels, so no operation ever sees one.
    let zero = Image::<u8>::new(0, 0).map(|_| ());
    out.push(("zero-size image", matches!(zero, Err(Error::ZeroSize { .. }))));
    let too_wide = (|| {
        let mut dst = Image::<u8>::new(W, H)?;
        let p = BoxParams::square(MAX_WINDOW + 2, Border::Reflect101);
        mean_filter(view(CAMERA)?, dst.view_mut(), &p, Parallelism::Sequential)
    })();
    out.push(("window above MAX_WINDOW", matches!(too_wide, Err(Error::OutOfRange { .. }))));
    if full {
        let nan = (|| {
            let mut dst = Image::<u8>::new(W, H)?;
            let p = GaussianParams { sigma: f64::NAN, ..GaussianParams::default() };
            gaussian_blur(view(CAMERA)?, dst.view_mut(), &p, Parallelism::Sequential)
        })();
        out.push(("NaN sigma", matches!(nan, Err(Error::InvalidFloat { .. }))));
    }
    out
}

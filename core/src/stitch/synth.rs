//! Synthetic image sequences with ground truth: a frame-sized window moving along a known,
//! smooth subpixel path over a larger photograph, as an endoscope sweeping over tissue
//! would see it. Each frame is resampled from the source (Keys bicubic, a = -0.5), blurred
//! (optional passes of the 3 x 3 mean filter, whose repetition approaches a Gaussian), its
//! gain drifted, and Gaussian noise added, then quantized to the source's pixel type.
//! Deterministic for a given seed (its own small PRNG; no `std` needed).

use crate::error::{require_finite, require_range, Error, Result};
use crate::filter::{mean_filter, BoxParams};
use crate::image::{AnyImage, Image, ImageView, Pixel, Rgba8};
use crate::parallel::{map_indices, Parallelism};
use crate::border::Border;
use alloc::string::String;
use alloc::vec::Vec;

/// Parameters of the generator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SynthParams {
    /// Frame size in pixels (default PAL, 720 x 576).
    pub frame_width: usize,
    pub frame_height: usize,
    /// Number of frames (>= 1).
    pub frames: usize,
    /// Source pixels are magnified by this factor (> 0) before the window is cut: a small
    /// source can feed a large frame. 1 samples the source at its own resolution.
    pub zoom: f64,
    /// Largest speed along each axis, in frame pixels per frame (> 0).
    pub max_step: f64,
    /// Standard deviation of the additive Gaussian noise, in grey levels (>= 0).
    pub noise_sigma: f64,
    /// Relative gain change from the first to the last frame (0.05: the last frame is 5 %
    /// brighter); linear in the frame index. In [-0.5, 0.5].
    pub gain_drift: f64,
    /// Passes of the 3 x 3 mean filter (each a blur of sigma about 0.82 px); 0 = none.
    pub blur_passes: usize,
    /// Seed of the path's frequencies and phases and of the noise.
    pub seed: u64,
}

impl Default for SynthParams {
    fn default() -> Self {
        SynthParams {
            frame_width: 720,
            frame_height: 576,
            frames: 60,
            zoom: 1.0,
            max_step: 3.0,
            noise_sigma: 2.0,
            gain_drift: 0.05,
            blur_passes: 0,
            seed: 1,
        }
    }
}

/// A generated sequence and its ground truth.
#[derive(Clone, Debug)]
pub struct SynthSequence<P> {
    pub frames: Vec<Image<P>>,
    /// Position of frame i relative to frame 0 in the report's convention: frame i's pixel
    /// `(u, v)` shows what frame 0 shows at `(u + x, v + y)`. `positions[0] == (0, 0)`.
    pub positions: Vec<(f64, f64)>,
    /// Top-left corner of each frame in magnified source coordinates.
    pub origins: Vec<(f64, f64)>,
}

/// A pixel type the generator produces: gray u8 / u16 / f32 and RGBA (alpha copied).
pub trait SynthPixel: Pixel + crate::filter::BoxPixel {
    /// Colour channels the generator resamples (1 or 3).
    const COLOURS: usize;
    fn channel(self, c: usize) -> f32;
    /// Builds a pixel from channel values (integers: rounded and saturated).
    fn from_channels(v: [f32; 3]) -> Self;
}

/// `x` clamped to `0..=max`, then rounded half away from zero (NaN gives 0), as
/// `libm::roundf(x).clamp(0, max)` but inline: a warp rounds every pixel, and the call
/// cost more than the interpolation. Not `(x + 0.5) as u32`, which rounds the largest
/// float below 0.5 up.
#[inline]
fn rounded(x: f32, max: f32) -> u32 {
    // NaN fails `x > 0` and becomes 0.
    let c = if x > 0.0 { x.min(max) } else { 0.0 };
    // SAFETY: `0 <= c <= max <= 65535`, finite: in range for i32, and truncation is the
    // floor.
    let t = unsafe { c.to_int_unchecked::<i32>() };
    (if c - t as f32 >= 0.5 { t + 1 } else { t }) as u32
}

impl SynthPixel for u8 {
    const COLOURS: usize = 1;
    fn channel(self, _c: usize) -> f32 {
        self as f32
    }
    fn from_channels(v: [f32; 3]) -> Self {
        rounded(v[0], 255.0) as u8
    }
}
impl SynthPixel for u16 {
    const COLOURS: usize = 1;
    fn channel(self, _c: usize) -> f32 {
        self as f32
    }
    fn from_channels(v: [f32; 3]) -> Self {
        rounded(v[0], 65535.0) as u16
    }
}
impl SynthPixel for f32 {
    const COLOURS: usize = 1;
    fn channel(self, _c: usize) -> f32 {
        self
    }
    fn from_channels(v: [f32; 3]) -> Self {
        v[0]
    }
}
impl SynthPixel for Rgba8 {
    const COLOURS: usize = 3;
    fn channel(self, c: usize) -> f32 {
        self.to_array()[c] as f32
    }
    fn from_channels(v: [f32; 3]) -> Self {
        let q = |x: f32| rounded(x, 255.0) as u8;
        Rgba8::new(q(v[0]), q(v[1]), q(v[2]), 255)
    }
}

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): tiny, fast, and good enough for noise and path parameters.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64, Option<f64>);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed, None)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Standard normal: Marsaglia's polar method (no trigonometry), which makes two per
    /// accepted point; the second is kept for the next call.
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.1.take() {
            return z;
        }
        loop {
            let (u, v) = (2.0 * self.uniform() - 1.0, 2.0 * self.uniform() - 1.0);
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let k = libm::sqrt(-2.0 * libm::log(s) / s);
                self.1 = Some(v * k);
                return u * k;
            }
        }
    }
}

/// Keys' cubic convolution weight (a = -0.5), "Cubic convolution interpolation for digital
/// image processing", IEEE Trans. ASSP 1981.
pub fn keys(t: f64) -> f64 {
    let t = libm::fabs(t);
    if t < 1.0 {
        (1.5 * t - 2.5) * t * t + 1.0
    } else if t < 2.0 {
        ((-0.5 * t + 2.5) * t - 4.0) * t + 2.0
    } else {
        0.0
    }
}

/// The path: a Lissajous-like sweep `x(i) = cx + ax sin(2 pi fx i / n + phx)` (same for y),
/// with random frequencies and phases, its amplitude limited by the room in the source
/// and by `max_step`.
fn path(p: &SynthParams, room: (f64, f64), rng: &mut SplitMix64) -> Vec<(f64, f64)> {
    let n = p.frames as f64;
    let mut axis = |room: f64, lo: f64, hi: f64| {
        let cycles = lo + (hi - lo) * rng.uniform();
        let phase = 2.0 * core::f64::consts::PI * rng.uniform();
        // Speed is at most amp * 2 pi cycles / n per frame.
        let amp = (room / 2.0).min(p.max_step * n / (2.0 * core::f64::consts::PI * cycles));
        (cycles, phase, amp)
    };
    let (ax, ay) = (axis(room.0, 0.4, 1.1), axis(room.1, 0.3, 0.9));
    let at = |(c, ph, a): (f64, f64, f64), i: f64, room: f64| {
        room / 2.0 + a * libm::sin(2.0 * core::f64::consts::PI * c * i / n + ph)
    };
    (0..p.frames).map(|i| (at(ax, i as f64, room.0), at(ay, i as f64, room.1))).collect()
}

/// Generates a sequence from `src` (see the module doc). Frame `i` samples the magnified
/// source at `(origins[i].0 + u, origins[i].1 + v) / zoom`; the origins stay two source
/// pixels inside the border, so no border rule is needed.
///
/// Errors: a frame size of zero, `frames == 0`, a non-finite or out-of-range parameter,
/// or a source too small for the frame at this zoom (it needs `frame / zoom + 4` pixels
/// per axis).
pub fn synth_sequence<P: SynthPixel>(src: ImageView<'_, P>, p: &SynthParams, par: Parallelism) -> Result<SynthSequence<P>> {
    let plan = synth_checked(src, p)?;
    let frames = map_indices(p.frames, par, |i| plan.frame(i));
    let frames = frames.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(SynthSequence { frames, positions: plan.positions, origins: plan.origins })
}

/// The parameter checks and the path of [`synth_sequence`].
fn synth_checked<'a, P: SynthPixel>(src: ImageView<'a, P>, p: &SynthParams) -> Result<SynthPlan<'a, P>> {
    if p.frame_width == 0 || p.frame_height == 0 {
        return Err(Error::ZeroSize { width: p.frame_width, height: p.frame_height });
    }
    require_range("frames", p.frames, 1, 1_000_000)?;
    crate::error::require_positive("zoom", p.zoom)?;
    crate::error::require_positive("max step", p.max_step)?;
    require_finite("noise sigma", p.noise_sigma)?;
    require_finite("gain drift", p.gain_drift)?;
    if p.noise_sigma < 0.0 {
        return Err(Error::InvalidFloat { name: "noise sigma", value: p.noise_sigma, expected: ">= 0" });
    }
    if libm::fabs(p.gain_drift) > 0.5 {
        return Err(Error::InvalidFloat { name: "gain drift", value: p.gain_drift, expected: "within [-0.5, 0.5]" });
    }
    require_range("blur passes", p.blur_passes, 0, 64)?;
    let (sw, sh) = src.size();
    // Room for the window's top-left corner, in magnified coordinates, keeping the cubic
    // kernel's 4 x 4 support inside the source.
    let room_x = (sw as f64 - 4.0) * p.zoom - p.frame_width as f64;
    let room_y = (sh as f64 - 4.0) * p.zoom - p.frame_height as f64;
    if room_x < 0.0 || room_y < 0.0 {
        return Err(Error::InvalidParameter {
            name: "source",
            reason: alloc::format!(
                "{sw}x{sh} at zoom {} is too small for {}x{} frames",
                p.zoom,
                p.frame_width,
                p.frame_height
            ),
        });
    }
    let mut rng = SplitMix64::new(p.seed);
    let offset = (1.0 * p.zoom + 0.5, 1.0 * p.zoom + 0.5);
    let origins: Vec<(f64, f64)> =
        path(p, (room_x, room_y), &mut rng).into_iter().map(|(x, y)| (x + offset.0, y + offset.1)).collect();
    let seed = rng.next_u64();
    let positions = origins.iter().map(|o| (o.0 - origins[0].0, o.1 - origins[0].1)).collect();
    Ok(SynthPlan { src, params: *p, origins, positions, seed })
}

/// A synthetic sequence before its frames are cut: the path and the ground truth, and each
/// frame on demand ([`SynthPlan::frame`], the same pixels as [`synth_sequence`]'s), so a
/// long sequence need not be held in memory. As a [`FrameSource`](super::FrameSource) it
/// cuts each frame when the run asks for it.
pub struct SynthPlan<'a, P> {
    src: ImageView<'a, P>,
    params: SynthParams,
    /// Top-left corner of each frame in magnified source coordinates.
    pub origins: Vec<(f64, f64)>,
    /// Position of each frame relative to frame 0 (as [`SynthSequence::positions`]).
    pub positions: Vec<(f64, f64)>,
    seed: u64,
}

impl<P: SynthPixel> SynthPlan<'_, P> {
    /// Frame `i` (< `params.frames`).
    pub fn frame(&self, i: usize) -> Result<Image<P>> {
        let Some(&origin) = self.origins.get(i) else {
            return Err(Error::OutOfRange { name: "frame", value: i as i64, min: 0, max: self.origins.len() as i64 - 1 });
        };
        render(self.src, &self.params, origin, i, self.seed)
    }
}

impl<P: SynthPixel> super::FrameSource for SynthPlan<'_, P>
where
    AnyImage: From<Image<P>>,
{
    fn len(&self) -> usize {
        self.origins.len()
    }
    fn frame(&self, i: usize) -> core::result::Result<super::Frame<'_>, String> {
        SynthPlan::frame(self, i).map(|f| super::Frame::Image(f.into())).map_err(|e| alloc::format!("{e}"))
    }
}

/// Plans a synthetic sequence ([`synth_sequence`], whose errors it reports) without
/// cutting its frames.
pub fn synth_plan<'a, P: SynthPixel>(src: ImageView<'a, P>, p: &SynthParams) -> Result<SynthPlan<'a, P>> {
    synth_checked(src, p)
}

fn render<P: SynthPixel>(src: ImageView<'_, P>, p: &SynthParams, origin: (f64, f64), i: usize, seed: u64) -> Result<Image<P>> {
    let (w, h) = (p.frame_width, p.frame_height);
    // Cubic weights are separable and the same for every pixel of a column / row.
    let taps = |o: f64, n: usize| -> Vec<(usize, [f64; 4])> {
        (0..n)
            .map(|u| {
                let s = (o + u as f64) / p.zoom - 0.5 * (1.0 - 1.0 / p.zoom);
                let f = libm::floor(s);
                let t = s - f;
                ((f as isize - 1).max(0) as usize, [keys(t + 1.0), keys(t), keys(1.0 - t), keys(2.0 - t)])
            })
            .collect()
    };
    let (cols, rows) = (taps(origin.0, w), taps(origin.1, h));
    let gain = 1.0 + p.gain_drift * if p.frames > 1 { i as f64 / (p.frames - 1) as f64 } else { 0.0 };
    let mut rng = SplitMix64::new(seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut planes = Vec::with_capacity(P::COLOURS);
    for c in 0..P::COLOURS {
        // Separable: the horizontal pass over the source rows the vertical taps need, then
        // the vertical pass (8 taps per pixel instead of 16).
        let rbase = rows[0].0;
        let rlast = rows[h - 1].0 + 3;
        let mut tmp = alloc::vec![0.0f64; (rlast - rbase + 1) * w];
        for (k, out) in tmp.chunks_exact_mut(w).enumerate() {
            let r = src.row(rbase + k);
            for (o, &(x0, wx)) in out.iter_mut().zip(&cols) {
                *o = wx.iter().enumerate().map(|(i, &kx)| kx * r[x0 + i].channel(c) as f64).sum();
            }
        }
        let mut plane = Image::<f32>::new(w, h)?;
        for (v, &(y0, wy)) in rows.iter().enumerate() {
            let out = plane.row_mut(v);
            let base = (y0 - rbase) * w;
            for (u, o) in out.iter_mut().enumerate() {
                let t = |j: usize| tmp[base + j * w + u];
                *o = (wy[0] * t(0) + wy[1] * t(1) + wy[2] * t(2) + wy[3] * t(3)) as f32;
            }
        }
        for _ in 0..p.blur_passes {
            let mut out = Image::<f32>::new(w, h)?;
            mean_filter(plane.view(), out.view_mut(), &BoxParams::square(3, Border::Reflect101), Parallelism::Sequential)?;
            plane = out;
        }
        for v in plane.as_mut_slice() {
            *v = (*v as f64 * gain + p.noise_sigma * rng.normal()) as f32;
        }
        planes.push(plane);
    }
    Image::from_fn(w, h, |x, y| {
        let mut v = [0.0f32; 3];
        for (c, plane) in planes.iter().enumerate() {
            v[c] = plane.at(x, y);
        }
        P::from_channels(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Image<u8> {
        Image::from_fn(120, 100, |x, y| ((x * 7 + y * 13 + (x * y) % 17) % 256) as u8).unwrap()
    }

    fn small() -> SynthParams {
        SynthParams { frame_width: 40, frame_height: 30, frames: 12, noise_sigma: 0.0, gain_drift: 0.0, ..Default::default() }
    }

    /// Plain reference: Keys' cubic at magnified position (x, y), straight from the
    /// definition (sum over the 4 x 4 neighbours).
    fn bicubic(src: &Image<u8>, x: f64, y: f64, zoom: f64) -> f64 {
        let (sx, sy) = (x / zoom - 0.5 * (1.0 - 1.0 / zoom), y / zoom - 0.5 * (1.0 - 1.0 / zoom));
        let (fx, fy) = (libm::floor(sx) as i64, libm::floor(sy) as i64);
        let mut acc = 0.0;
        for j in fy - 1..=fy + 2 {
            for i in fx - 1..=fx + 2 {
                acc += keys(sx - i as f64) * keys(sy - j as f64) * src.at(i as usize, j as usize) as f64;
            }
        }
        acc
    }

    #[test]
    fn noiseless_frames_match_the_bicubic_reference() {
        let src = source();
        for zoom in [1.0, 2.0, 0.75] {
            let p = SynthParams { zoom, frames: 5, ..small() };
            let seq = synth_sequence(src.view(), &p, Parallelism::Sequential).unwrap();
            for (f, o) in seq.frames.iter().zip(&seq.origins) {
                for (u, v) in [(0, 0), (39, 29), (17, 5), (3, 22)] {
                    let want = bicubic(&src, o.0 + u as f64, o.1 + v as f64, zoom).clamp(0.0, 255.0);
                    assert!((f.at(u, v) as f64 - want).abs() <= 0.5 + 1e-6, "zoom {zoom}: {} vs {want}", f.at(u, v));
                }
            }
            assert_eq!(seq.positions[0], (0.0, 0.0));
            for (pos, o) in seq.positions.iter().zip(&seq.origins) {
                assert!((pos.0 - (o.0 - seq.origins[0].0)).abs() < 1e-12 && (pos.1 - (o.1 - seq.origins[0].1)).abs() < 1e-12);
            }
        }
        // Keys' kernel interpolates: weights (0, 1, 0, 0) at integer positions.
        assert_eq!((keys(1.0), keys(0.0), keys(2.0)), (0.0, 1.0, 0.0));
    }

    #[test]
    fn path_respects_speed_and_room_and_is_deterministic() {
        let src = source();
        let p = SynthParams { max_step: 1.5, frames: 50, ..small() };
        let a = synth_sequence(src.view(), &p, Parallelism::AllThreads).unwrap();
        let b = synth_sequence(src.view(), &p, Parallelism::Sequential).unwrap();
        assert_eq!(a.positions, b.positions);
        assert!(a.frames.iter().zip(&b.frames).all(|(x, y)| x == y));
        for w in a.origins.windows(2) {
            assert!((w[1].0 - w[0].0).abs() <= 1.5 + 1e-9 && (w[1].1 - w[0].1).abs() <= 1.5 + 1e-9);
        }
        for o in &a.origins {
            assert!(o.0 >= 1.0 && o.0 + 40.0 <= 118.0 && o.1 >= 1.0 && o.1 + 30.0 <= 98.0, "{o:?}");
        }
        let c = synth_sequence(src.view(), &SynthParams { seed: 2, ..p }, Parallelism::Sequential).unwrap();
        assert_ne!(a.positions, c.positions);
    }

    #[test]
    fn noise_and_gain_have_the_requested_size() {
        let src = Image::<f32>::filled(200, 150, 100.0).unwrap();
        let p = SynthParams { frame_width: 150, frame_height: 100, frames: 3, noise_sigma: 4.0, gain_drift: 0.1, ..Default::default() };
        let seq = synth_sequence(src.view(), &p, Parallelism::Sequential).unwrap();
        for (i, f) in seq.frames.iter().enumerate() {
            let n = f.as_slice().len() as f64;
            let mean = f.as_slice().iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = f.as_slice().iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
            assert!((mean - 100.0 * (1.0 + 0.05 * i as f64)).abs() < 0.1, "{mean}");
            assert!((var.sqrt() - 4.0).abs() < 0.1, "{}", var.sqrt());
        }
    }

    #[test]
    fn rgba_and_blur() {
        let src = source().map(|v| Rgba8::new(v, 255 - v, v / 2, 255));
        let p = SynthParams { blur_passes: 2, ..small() };
        let seq = synth_sequence(src.view(), &p, Parallelism::Sequential).unwrap();
        assert_eq!(seq.frames.len(), 12);
        assert_eq!(seq.frames[0].size(), (40, 30));
        assert!(seq.frames[0].as_slice().iter().all(|p| p.a == 255));
    }

    #[test]
    fn bad_parameters_are_errors() {
        let src = source();
        let v = src.view();
        let s = Parallelism::Sequential;
        assert!(synth_sequence(v, &SynthParams { frame_width: 0, ..small() }, s).is_err());
        assert!(synth_sequence(v, &SynthParams { frames: 0, ..small() }, s).is_err());
        assert!(synth_sequence(v, &SynthParams { zoom: 0.0, ..small() }, s).is_err());
        assert!(synth_sequence(v, &SynthParams { zoom: f64::NAN, ..small() }, s).is_err());
        assert!(synth_sequence(v, &SynthParams { max_step: -1.0, ..small() }, s).is_err());
        assert!(synth_sequence(v, &SynthParams { noise_sigma: -1.0, ..small() }, s).is_err());
        assert!(synth_sequence(v, &SynthParams { gain_drift: 0.9, ..small() }, s).is_err());
        assert!(synth_sequence(v, &SynthParams { blur_passes: 1000, ..small() }, s).is_err());
        assert!(synth_sequence(v, &SynthParams { frame_width: 117, ..small() }, s).is_err());
        // Zoom lets a small source feed a large frame.
        assert!(synth_sequence(v, &SynthParams { frame_width: 200, frame_height: 150, frames: 2, zoom: 2.0, ..small() }, s).is_ok());
    }
}

//! Hard footage with ground truth, cut from real photographs: the conditions endoscopy and
//! microscope sweeps show (low contrast, noise, blur, gain drift, vignetting fixed to the
//! lens, large and wandering jumps, closed loops), so registration is judged on more than
//! the clean sequences of `tessera::stitch::synth_sequence`.
//!
//! Frame `i` samples the photograph at `(origin_i + (u, v))` with Keys' bicubic
//! interpolation, so its position in the report's convention is `origin_i - origin_0`.

use std::path::Path;
use tessera::stitch::keys;
use tessera::stitch::{Similarity, SplitMix64};
use tessera::Image;

/// The photographs the robustness suite is built from, of different character: a fundus
/// image (smooth, vessels), colonic tissue under the microscope (IHC), an indoor photo with
/// smooth porcelain and wood grain, an outdoor photo with a uniform sky, gravel and grass
/// (fine natural textures), a portrait, and the Middlebury cones scene (`shared/data`).
pub const PHOTOS: [&str; 8] = ["retina", "ihc", "coffee", "camera", "gravel", "grass", "astronaut", "cones"];

/// A photograph of [`PHOTOS`] as 8-bit grey, in f32.
pub fn photo(name: &str) -> Image<f32> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = match name {
        "retina" => root.join("assets/retina.jpg"),
        "cones" => super::shared_data().join("stereo/cones/im2.png"),
        _ => root.join("assets/photos").join(format!("{name}.png")),
    };
    let img = image::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_luma8();
    let (w, h) = img.dimensions();
    Image::from_vec(w as usize, h as usize, img.into_raw().into_iter().map(f32::from).collect()).unwrap()
}

/// How the frames are degraded.
#[derive(Clone, Copy, Debug)]
pub struct Conditions {
    /// Contrast around the photograph's mean (1: as it is; 0.3: low contrast).
    pub contrast: f64,
    /// Additive Gaussian noise, grey levels.
    pub noise: f64,
    /// Gaussian blur sigma in pixels (0: none), applied to the photograph.
    pub blur: f64,
    /// Relative gain change from the first frame to the last.
    pub gain_drift: f64,
    /// Radial fall-off of the lens: brightness at the corners is `1 - vignetting`.
    pub vignetting: f64,
}

impl Default for Conditions {
    fn default() -> Self {
        Conditions { contrast: 1.0, noise: 2.0, blur: 0.0, gain_drift: 0.0, vignetting: 0.0 }
    }
}

/// The photograph blurred by a sampled Gaussian of `sigma` (replicated borders).
fn blurred(src: &Image<f32>, sigma: f64) -> Image<f32> {
    if sigma <= 0.0 {
        return src.clone();
    }
    let r = (3.0 * sigma).ceil() as isize;
    let k: Vec<f64> = (-r..=r).map(|i| (-(i * i) as f64 / (2.0 * sigma * sigma)).exp()).collect();
    let s: f64 = k.iter().sum();
    let (w, h) = src.size();
    let pass = |img: &Image<f32>, dx: isize, dy: isize| {
        Image::from_fn(w, h, |x, y| {
            let mut acc = 0.0;
            for (j, kj) in k.iter().enumerate() {
                let o = j as isize - r;
                let xs = (x as isize + o * dx).clamp(0, w as isize - 1) as usize;
                let ys = (y as isize + o * dy).clamp(0, h as isize - 1) as usize;
                acc += kj * img.row(ys)[xs] as f64;
            }
            (acc / s) as f32
        })
        .unwrap()
    };
    pass(&pass(src, 1, 0), 0, 1)
}

/// A sequence cut from `src` at `origins` (top-left corners, photograph pixels, each at
/// least 2 px inside), `w x h` frames, under `c`; noise from `seed`. 8-bit frames.
pub fn render(src: &Image<f32>, origins: &[(f64, f64)], size: (usize, usize), c: &Conditions, seed: u64) -> Vec<Image<u8>> {
    let poses: Vec<Similarity> = origins.iter().map(|&o| Similarity::translation(o)).collect();
    render_posed(src, &poses, size, c, seed)
}

/// A sequence cut from `src` at `poses`: frame pixel `(u, v)` samples the photograph at
/// `pose(u, v)` (every pixel at least 2 px inside), `w x h` frames, under `c`; noise from
/// `seed`. Frame i's pose in the report's contract is `poses[0]^-1 poses[i]`.
pub fn render_posed(src: &Image<f32>, poses: &[Similarity], (w, h): (usize, usize), c: &Conditions, seed: u64) -> Vec<Image<u8>> {
    let mean = src.as_slice().iter().map(|&v| v as f64).sum::<f64>() / src.as_slice().len() as f64;
    let src = blurred(src, c.blur);
    let mut rng = SplitMix64::new(seed);
    let n = poses.len();
    poses
        .iter()
        .enumerate()
        .map(|(i, pose)| {
            let gain = 1.0 + c.gain_drift * if n > 1 { i as f64 / (n - 1) as f64 } else { 0.0 };
            let (cx, cy) = ((w as f64 - 1.0) / 2.0, (h as f64 - 1.0) / 2.0);
            let corner = cx.hypot(cy);
            Image::from_fn(w, h, |u, v| {
                let (sx, sy) = pose.apply((u as f64, v as f64));
                let (fx, fy) = (sx.floor(), sy.floor());
                let mut acc = 0.0;
                for j in -1..=2 {
                    let wy = keys(sy - (fy + j as f64));
                    let row = src.row((fy as isize + j) as usize);
                    for i in -1..=2 {
                        acc += wy * keys(sx - (fx + i as f64)) * row[(fx as isize + i) as usize] as f64;
                    }
                }
                let rad = (u as f64 - cx).hypot(v as f64 - cy) / corner;
                let lens = 1.0 - c.vignetting * rad * rad;
                let value = (mean + c.contrast * (acc - mean)) * gain * lens + c.noise * rng.normal();
                value.round().clamp(0.0, 255.0) as u8
            })
            .unwrap()
        })
        .collect()
}

/// A rolling sweep of `n` frames of `frame` size: the frame centres on a wandering path
/// (as [`wandering`], `step` px per frame) through a photograph of `size`, each frame turned
/// about its centre by `roll` radians more than the one before (its rate varying by half
/// either way along the path). Every frame stays inside the photograph however it turns.
pub fn rolling(n: usize, size: (usize, usize), frame: (usize, usize), step: f64, roll: f64, seed: u64) -> Vec<Similarity> {
    // A zoom of 0 keeps every scale at exactly 1.
    zooming(n, size, frame, step, 0.0, roll, seed)
}

/// An endoscope advancing and withdrawing: `n` frames of `frame` size whose centres wander
/// as in [`rolling`] (`step` px per frame, turning `roll` radians per frame, the rate varying
/// by half either way) while the scale (photograph pixels per frame pixel) changes by up
/// to `zoom` per frame (relative), smoothly: the rate is `zoom * tanh(2.5 cos(2 pi t))`, `t`
/// going from 0 to 1 along the sweep, so the probe advances (magnifies, scale below 1)
/// from the first frame, withdraws past where it started, and advances again, ending near
/// the first frame's scale. With `zoom` 0.01 and 80 frames the scale spans 0.85 to 1.17
/// of the first frame's. Every frame stays inside the photograph at every scale and
/// turn.
pub fn zooming(n: usize, size: (usize, usize), frame: (usize, usize), step: f64, zoom: f64, roll: f64, seed: u64) -> Vec<Similarity> {
    let mut log_scale = 0.0;
    let scales: Vec<f64> = (0..n)
        .map(|i| {
            if i > 0 {
                let t = (i as f64 - 0.5) / (n.max(2) - 1) as f64;
                log_scale -= zoom * (2.5 * (std::f64::consts::TAU * t).cos()).tanh();
            }
            log_scale.exp()
        })
        .collect();
    let largest = scales.iter().cloned().fold(1.0, f64::max);
    let half = largest * (frame.0 as f64 - 1.0).hypot(frame.1 as f64 - 1.0) / 2.0 + 3.0;
    let room = (size.0 as f64 - 2.0 * half, size.1 as f64 - 2.0 * half);
    assert!(room.0 > 4.0 && room.1 > 4.0, "photograph too small for zoomed frames");
    let centres = wandering(n, (room.0 - 4.0, room.1 - 4.0), step, 0.5, seed);
    let mut rng = SplitMix64::new(seed ^ 0x5eed);
    let phase = std::f64::consts::TAU * rng.uniform();
    let c = ((frame.0 as f64 - 1.0) / 2.0, (frame.1 as f64 - 1.0) / 2.0);
    let mut angle = 0.0;
    centres
        .iter()
        .zip(&scales)
        .enumerate()
        .map(|(i, (&(x, y), &scale))| {
            if i > 0 {
                angle += roll * (1.0 + 0.5 * (phase + i as f64 / 7.0).sin());
            }
            Similarity::about(c, (half - 2.0 + x - c.0, half - 2.0 + y - c.1), angle, scale)
        })
        .collect()
}

/// A wandering path of `n` frames inside `room` (the range of top-left corners), `step` px
/// per frame, the heading turning by up to `turn / 2` radians each frame (0.5: smooth;
/// 2: a hand-held probe whose direction wanders).
pub fn wandering(n: usize, room: (f64, f64), step: f64, turn: f64, seed: u64) -> Vec<(f64, f64)> {
    let mut rng = SplitMix64::new(seed);
    let mut at = (2.0 + room.0 * (0.3 + 0.4 * rng.uniform()), 2.0 + room.1 * (0.3 + 0.4 * rng.uniform()));
    let mut heading = std::f64::consts::TAU * rng.uniform();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(at);
        heading += turn * (rng.uniform() - 0.5);
        let mut next = (at.0 + step * heading.cos(), at.1 + step * heading.sin());
        // Turn back at the walls.
        if !(2.0..=2.0 + room.0).contains(&next.0) {
            heading = std::f64::consts::PI - heading;
            next.0 = at.0 + step * heading.cos();
        }
        if !(2.0..=2.0 + room.1).contains(&next.1) {
            heading = -heading;
            next.1 = at.1 + step * heading.sin();
        }
        at = (next.0.clamp(2.0, 2.0 + room.0), next.1.clamp(2.0, 2.0 + room.1));
    }
    out
}

/// `path` (top-left corners inside `room`) with `jerks` hand-held jerks: from each of as many
/// frames (seeded by `seed`, none of the first two), every later frame moved by up to
/// `reach` px each way, so that predictions from the frames before miss by as much.
pub fn jerky(path: &[(f64, f64)], room: (f64, f64), jerks: usize, reach: f64, seed: u64) -> Vec<(f64, f64)> {
    let mut rng = SplitMix64::new(seed);
    let mut out = path.to_vec();
    for _ in 0..jerks {
        let from = 2 + (rng.next_u64() as usize) % (path.len().max(3) - 2);
        let d = (reach * (2.0 * rng.uniform() - 1.0), reach * (2.0 * rng.uniform() - 1.0));
        for o in out.iter_mut().skip(from) {
            *o = (o.0 + d.0, o.1 + d.1);
        }
    }
    out.iter().map(|o| (o.0.clamp(2.0, 2.0 + room.0), o.1.clamp(2.0, 2.0 + room.1))).collect()
}

/// The room for frames of `frame` size in a photograph of `size` (corners 2 px inside).
pub fn room(size: (usize, usize), frame: (usize, usize)) -> (f64, f64) {
    (size.0 as f64 - frame.0 as f64 - 5.0, size.1 as f64 - frame.1 as f64 - 5.0)
}

/// A closed loop of `n` frames: an ellipse through `room`, 0.4 of its half-width and
/// half-height, started at a random phase, with a little jitter, ending where it began.
pub fn closed_loop(n: usize, room: (f64, f64), seed: u64) -> Vec<(f64, f64)> {
    let mut rng = SplitMix64::new(seed);
    let centre = (2.0 + room.0 / 2.0, 2.0 + room.1 / 2.0);
    let radii = (0.4 * room.0, 0.4 * room.1);
    let phase = std::f64::consts::TAU * rng.uniform();
    (0..n)
        .map(|i| {
            let a = phase + std::f64::consts::TAU * i as f64 / (n - 1) as f64;
            let jitter = if i == 0 || i + 1 == n { (0.0, 0.0) } else { (0.3 * rng.normal(), 0.3 * rng.normal()) };
            (centre.0 + radii.0 * a.cos() + jitter.0, centre.1 + radii.1 * a.sin() + jitter.1)
        })
        .collect()
}

/// `src` enlarged `factor` times by Keys' bicubic interpolation (a photograph of another
/// resolution, for grids larger than the photographs), edges replicated.
pub fn enlarged(src: &Image<f32>, factor: f64) -> Image<f32> {
    let (w, h) = src.size();
    let (nw, nh) = ((w as f64 * factor) as usize, (h as f64 * factor) as usize);
    Image::from_fn(nw, nh, |x, y| {
        let (sx, sy) = ((x as f64 + 0.5) / factor - 0.5, (y as f64 + 0.5) / factor - 0.5);
        let (fx, fy) = (sx.floor(), sy.floor());
        let mut acc = 0.0;
        for j in -1..=2 {
            let wy = keys(sy - (fy + j as f64));
            let row = src.row((fy as isize + j).clamp(0, h as isize - 1) as usize);
            for i in -1..=2 {
                acc += wy * keys(sx - (fx + i as f64)) * row[(fx as isize + i).clamp(0, w as isize - 1) as usize] as f64;
            }
        }
        acc.clamp(0.0, 255.0) as f32
    })
    .unwrap()
}

/// The tile of the grid tests (3 x 3 grids cut from the photographs).
pub const TILE: (usize, usize) = (180, 150);

/// Nominal corners of a 3 x 3 snake-row grid of [`TILE`]s overlapping by 25 %, and the true
/// corners in the photograph (`inset` px in, each off by up to 5 % of a tile, subpixel).
pub fn layout(seed: u64, inset: f64) -> (Vec<(f64, f64)>, Vec<(f64, f64)>) {
    use tessera::stitch::{grid_positions, Corner, SplitMix64, TileOrder};
    let nominal = grid_positions(3, 3, TILE, 0.25, TileOrder::SnakeRow, Corner::TopLeft).unwrap();
    let mut rng = SplitMix64::new(seed);
    let truth = nominal
        .iter()
        .map(|q| (q.0 + inset + (rng.uniform() * 2.0 - 1.0) * 0.05 * TILE.0 as f64, q.1 + inset + (rng.uniform() * 2.0 - 1.0) * 0.05 * TILE.1 as f64))
        .collect();
    (nominal, truth)
}

/// A sweep of 200 x 160 frames along a row of `src` (at 24 px a frame) across a flat band
/// 240 px wide a third of the way along (the photograph's mean), which it never comes back
/// over: the frames, their top-left corners and the band's columns.
pub fn flat_band_sweep(src: &Image<f32>, seed: u64) -> (Vec<Image<u8>>, Vec<(f64, f64)>, (usize, usize)) {
    let mut src = src.clone();
    let (w, h) = src.size();
    let band = (w / 3, (w / 3 + 240).min(w));
    let mean = src.as_slice().iter().map(|&v| v as f64).sum::<f64>() / (w * h) as f64;
    for y in 0..h {
        for x in band.0..band.1 {
            src.set(x, y, mean as f32);
        }
    }
    let frame = (200, 160);
    let (rw, rh) = room(src.size(), frame);
    let origins: Vec<(f64, f64)> = (0..).map(|k| (1.3 + 24.0 * k as f64, rh / 2.0 + 0.4 * k as f64 % 3.0)).take_while(|o| o.0 <= rw).collect();
    let frames = render(&src, &origins, frame, &Conditions::default(), seed);
    (frames, origins, band)
}

/// Saves `frames` as `dir/frame_NNNN.png` (the folder made); their paths in order.
pub fn save_frames(frames: &[Image<u8>], dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let p = dir.join(format!("frame_{i:04}.png"));
            tessera::io::save(&tessera::AnyImage::U8(f.clone()), &p).unwrap();
            p
        })
        .collect()
}

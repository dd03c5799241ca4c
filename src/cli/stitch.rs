//! `tessera stitch` (a panorama from an image sequence, or from the bundled photograph when
//! no input is given) and `tessera synth-seq` (a synthetic sequence with ground truth).

use super::common::{progress_bar, BackendArgs};
use super::frames;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera::stitch::{synth_plan, Acceptance, synth_sequence, Blend, FrameRecord, FrameSource, Motion, Panorama, RegisterParams, SearchMethod, StitchParams, SynthParams, SynthSequence};
use tessera::{AnyImage, AnyView, Image, Parallelism, Rgba8};

/// The default input: a CC0 fundus photograph (see assets/README.md).
pub const DEFAULT_IMAGE: &[u8] = include_bytes!("../../assets/retina.jpg");
pub const DEFAULT_IMAGE_NAME: &str = "assets/retina.jpg (CC0 fundus photograph, embedded)";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BlendArg {
    Overwrite,
    Average,
    Feather,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MethodArg {
    /// Centre-biased logarithmic search (default)
    Log,
    /// The original's plain logarithmic (three-step) search
    LogPlain,
    /// Every position of the search area
    Exhaustive,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MotionArg {
    /// Shift only (the original)
    Translation,
    /// Rotation, optionally scale, and shift (default)
    Similarity,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AcceptArg {
    /// Against the template's own null sample (default)
    Adaptive,
    /// A coefficient of at least --cthresh (the original)
    Fixed,
}

/// Each CLI choice enum maps one to one onto the core's, so the defaults come from the
/// core's parameter structs.
macro_rules! mirror_enum {
    ($arg:ident <=> $core:ident { $($v:ident),* }) => {
        impl From<$core> for $arg {
            fn from(v: $core) -> Self {
                match v { $($core::$v => $arg::$v),* }
            }
        }
        impl From<$arg> for $core {
            fn from(v: $arg) -> Self {
                match v { $($arg::$v => $core::$v),* }
            }
        }
    };
}
mirror_enum!(BlendArg <=> Blend { Overwrite, Average, Feather });
mirror_enum!(MethodArg <=> SearchMethod { Log, LogPlain, Exhaustive });
mirror_enum!(AcceptArg <=> Acceptance { Adaptive, Fixed });
mirror_enum!(MotionArg <=> Motion { Translation, Similarity });

/// Registration parameters shared by `stitch` and the bench.
#[derive(clap::Args, Clone, Debug)]
pub struct RegisterArgs {
    /// Template side in pixels (25 for half PAL, 31 for PAL)
    #[arg(long, default_value_t = RegisterParams::default().rsz)]
    pub rsz: usize,
    /// How a template's match is accepted: adaptive (its peak must beat what the same
    /// template scores where it cannot match by --null-margin) or fixed (the original's
    /// rule: a coefficient of at least --cthresh)
    #[arg(long, value_enum, default_value_t = RegisterParams::default().acceptance.into())]
    pub accept: AcceptArg,
    /// With --accept fixed, vectors with a coefficient below this are dropped; with
    /// adaptive, the level at which the log search stops early
    #[arg(long, default_value_t = RegisterParams::default().cthresh, allow_negative_numbers = true)]
    pub cthresh: f64,
    /// Adaptive acceptance: how far a peak must beat the template's largest null coefficient
    #[arg(long, default_value_t = RegisterParams::default().null_margin)]
    pub null_margin: f64,
    /// Adaptive acceptance: the lowest coefficient ever accepted
    #[arg(long, default_value_t = RegisterParams::default().min_coefficient, allow_negative_numbers = true)]
    pub min_coefficient: f64,
    /// Templates per side of the grid (6 for half PAL, 8 for PAL)
    #[arg(long, default_value_t = RegisterParams::default().npts)]
    pub npts: usize,
    /// Search radius in pixels around the predicted position
    #[arg(long, default_value_t = RegisterParams::default().search_radius)]
    pub search_radius: usize,
    /// Templates whose variance (grey levels squared) is below this are not searched
    /// [default: RegisterParams' (4) for 8-bit and RGB frames; for 16-bit and float frames,
    /// that scaled by (value range of the first frame / 255)^2]
    #[arg(long)]
    pub min_variance: Option<f64>,
    /// Search method
    #[arg(long, value_enum, default_value_t = RegisterParams::default().method.into())]
    pub method: MethodArg,
    /// Keep the consensus of the peak fits instead of refining the shift on the agreeing
    /// templates' pixels
    #[arg(long)]
    pub no_refine: bool,
    /// Motion model: similarity (rotation plus shift, fitted where a pair shows a visible
    /// turn; a pair that does not keeps the translation result exactly) or translation
    /// (the original)
    #[arg(long, value_enum, default_value_t = RegisterParams::default().motion.into())]
    pub motion: MotionArg,
    /// With --motion similarity: fit a scale (zoom) too
    #[arg(long)]
    pub fit_scale: bool,
    /// With --motion similarity: the largest turn, in degrees, a pair may show beyond the
    /// turn it was predicted to have
    #[arg(long, default_value_t = RegisterParams::default().max_turn)]
    pub max_turn: f64,
}

impl RegisterArgs {
    pub fn params(&self) -> RegisterParams {
        RegisterParams {
            rsz: self.rsz,
            cthresh: self.cthresh,
            acceptance: self.accept.into(),
            null_margin: self.null_margin,
            min_coefficient: self.min_coefficient,
            npts: self.npts,
            search_radius: self.search_radius,
            min_variance: self.min_variance.unwrap_or(RegisterParams::default().min_variance),
            method: self.method.into(),
            refine: !self.no_refine,
            motion: self.motion.into(),
            fit_scale: self.fit_scale,
            max_turn: self.max_turn,
            ..Default::default()
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct StitchArgs {
    /// Frames: image files, a directory (natural sort), a glob pattern ("frames/*.png"), or
    /// a multi-page TIFF. None: a synthetic sequence cut from the bundled photograph.
    pub inputs: Vec<PathBuf>,
    /// Panorama file (PNG, TIFF, ...; 32-bit float panoramas need .tif)
    #[arg(short, long, default_value = "panorama.png")]
    pub output: PathBuf,
    /// Write the JSON report here
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub register: RegisterArgs,
    /// How overlapping frames combine
    #[arg(long, value_enum, default_value_t = StitchParams::default().blend.into())]
    pub blend: BlendArg,
    /// Keep registering against a keyframe while the shift from it is within this fraction
    /// of the frame size (0: every frame against its predecessor, as the original)
    #[arg(long, default_value_t = StitchParams::default().keyframe_shift)]
    pub keyframe_shift: f64,
    /// Skip the per-pair quality measures
    #[arg(long)]
    pub no_quality: bool,
    /// When a frame does not register where its motion predicts, seed the search with this
    /// many coarse global estimates (phase correlation against the last good frame; 0: off)
    #[arg(long, default_value_t = StitchParams::default().coarse_candidates)]
    pub coarse: usize,
    /// Do not retry pairs on which too few templates agree with templates of twice the side
    #[arg(long)]
    pub no_grow: bool,
    /// Do not register frames that come back over earlier keyframes against them, nor solve
    /// the positions together: chain them along the registrations (the original)
    #[arg(long)]
    pub no_close_loops: bool,
    /// Do not let the whole overlap decide where templates are too faint (a pair too few
    /// templates agree on registers from a clear phase-correlation peak refined on the whole
    /// overlap, and faint matches are refined there)
    #[arg(long)]
    pub no_whole_overlap: bool,
    /// Refine every registered pair on the whole overlap, not only faint ones and the
    /// keyframes' links: two to four times more precise, at about a seventh of the speed on
    /// PAL frames
    #[arg(long)]
    pub refine_every_pair: bool,
    /// Keep the scale at 1 even where a pair shows a clear zoom (by default, under the
    /// similarity model without --fit-scale, the scale is fitted from such a pair on)
    #[arg(long)]
    pub no_detect_zoom: bool,
    /// Tile grid mode: the inputs are COLSxROWS tiles of a microscope scan (e.g. 4x3), in
    /// acquisition order; each neighbouring pair is registered from its nominal offset and
    /// all positions are solved together
    #[arg(long, value_name = "COLSxROWS", conflicts_with = "positions")]
    pub grid: Option<String>,
    /// Grid mode: overlap of neighbouring tiles, percent of the tile
    #[arg(long, default_value_t = tessera::stitch::grid::DEFAULT_OVERLAP * 100.0)]
    pub overlap: f64,
    /// Grid mode: acquisition order of the tiles
    #[arg(long, value_enum, default_value_t = super::grid::OrderArg::Row)]
    pub order: super::grid::OrderArg,
    /// Grid mode: corner of the first tile
    #[arg(long, value_enum, default_value_t = super::grid::StartArg::TopLeft)]
    pub start: super::grid::StartArg,
    /// Tile mode with nominal stage positions: a CSV file, one line per input tile, x and y
    /// (top-left corner) as its last two fields, in pixels (or micrometres with --pixel-size)
    #[arg(long, value_name = "FILE.csv")]
    pub positions: Option<PathBuf>,
    /// Micrometres per pixel: for --positions given in micrometres, and written into an
    /// OME-TIFF's metadata (PhysicalSizeX/Y)
    #[arg(long)]
    pub pixel_size: Option<f64>,
    /// Memory budget for the panorama, MiB: a larger canvas is composited in strips and
    /// streamed to a tiled, pyramidal OME-TIFF (an output not named .ome.tif becomes
    /// NAME.ome.tif), as is any output named .ome.tif / .ome.tiff
    /// [default: a quarter of the physical memory, or 4096]
    #[arg(long, value_name = "MiB")]
    pub max_mem: Option<usize>,
    /// OME-TIFF tile side in pixels (a multiple of 16)
    #[arg(long, default_value_t = 512)]
    pub ome_tile: usize,
    /// Write an OME-TIFF as BigTIFF even when it stays under 4 GiB (it is BigTIFF
    /// automatically past that)
    #[arg(long)]
    pub bigtiff: bool,
    /// Tile modes: how far a tile may be from its nominal position, fraction of the tile
    #[arg(long, default_value_t = tessera::stitch::GridParams::default().stage_error)]
    pub stage_error: f64,
    /// Decoded frames kept in memory for the composite, MiB; frames beyond it are decoded
    /// again when pasted (memory stays bounded whatever the sequence's length)
    #[arg(long, default_value_t = 64)]
    pub frame_cache: usize,
    /// Live mode: register frames as they appear in DIR (a file counts once it stops
    /// growing; frames in natural name order), or, with "-", the files named on standard
    /// input (one per line); rewrite the panorama and report as frames register, and write
    /// the final ones when the input ends: end of standard input, the stop file, SIGINT or
    /// SIGTERM (a second one aborts). Runs on the CPU
    #[arg(long, value_name = "DIR|-", conflicts_with_all = ["inputs", "grid", "positions", "frames", "seed"])]
    pub follow: Option<PathBuf>,
    /// Live mode: rewrite the panorama and report after every N frames (registered or
    /// skipped)
    #[arg(long, value_name = "N", requires = "follow")]
    pub update_every: Option<usize>,
    /// Live mode: rewrite them when S seconds have passed since the last rewrite and a
    /// frame has come since (with --update-every: whichever comes first) [default: 2
    /// without --update-every]
    #[arg(long, value_name = "S", requires = "follow")]
    pub update_seconds: Option<f64>,
    /// Live mode: a file of this name in DIR ends the run
    #[arg(long, value_name = "NAME", default_value = ".tessera-stop", requires = "follow")]
    pub stop_file: String,
    /// Live mode: how often DIR is listed, milliseconds; a file counts once two listings
    /// this far apart see it at the same size
    #[arg(long, value_name = "MS", default_value_t = 50, requires = "follow")]
    pub poll_ms: u64,
    /// Default input only: number of frames of the synthetic sequence
    #[arg(long, default_value_t = SynthParams::default().frames)]
    pub frames: usize,
    /// Default input only: seed of the synthetic path and noise
    #[arg(long, default_value_t = SynthParams::default().seed)]
    pub seed: u64,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(clap::Args, Debug)]
pub struct SynthSeqArgs {
    /// Source photograph (larger than the frames at the given zoom)
    pub image: PathBuf,
    /// Output directory: frame_0000.png ... and truth.json / truth.csv
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long, default_value_t = SynthParams::default().frames)]
    pub frames: usize,
    #[arg(long, default_value_t = SynthParams::default().frame_width)]
    pub width: usize,
    #[arg(long, default_value_t = SynthParams::default().frame_height)]
    pub height: usize,
    /// Magnification of the source before cutting frames
    #[arg(long, default_value_t = SynthParams::default().zoom)]
    pub zoom: f64,
    /// Largest speed along each axis, pixels per frame
    #[arg(long, default_value_t = SynthParams::default().max_step)]
    pub max_step: f64,
    /// Standard deviation of the Gaussian noise, grey levels
    #[arg(long, default_value_t = SynthParams::default().noise_sigma)]
    pub noise: f64,
    /// Relative gain change from the first to the last frame
    #[arg(long, default_value_t = SynthParams::default().gain_drift)]
    pub gain_drift: f64,
    /// Passes of a 3x3 mean blur (0: none)
    #[arg(long, default_value_t = SynthParams::default().blur_passes)]
    pub blur: usize,
    #[arg(long, default_value_t = SynthParams::default().seed)]
    pub seed: u64,
}

/// Natural order: digit runs compare as numbers ("f2" < "f10").
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut x, mut y) = (a.chars().peekable(), b.chars().peekable());
    loop {
        match (x.peek().copied(), y.peek().copied()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, _) => return std::cmp::Ordering::Less,
            (_, None) => return std::cmp::Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let take = |it: &mut std::iter::Peekable<std::str::Chars<'_>>| {
                    let mut s = String::new();
                    while let Some(c) = it.peek().copied().filter(char::is_ascii_digit) {
                        s.push(c);
                        it.next();
                    }
                    s
                };
                let (p, q) = (take(&mut x), take(&mut y));
                let (pt, qt) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                let o = pt.len().cmp(&qt.len()).then_with(|| pt.cmp(qt)).then_with(|| p.len().cmp(&q.len()));
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(&d);
                }
                x.next();
                y.next();
            }
        }
    }
}

/// `*` and `?` wildcard match of a whole file name.
fn wildcard(pattern: &[char], name: &[char]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some('*'), _) => wildcard(&pattern[1..], name) || (!name.is_empty() && wildcard(pattern, &name[1..])),
        (Some('?'), Some(_)) => wildcard(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => wildcard(&pattern[1..], &name[1..]),
        _ => false,
    }
}

const IMAGE_EXTENSIONS: [&str; 8] = ["png", "tif", "tiff", "jpg", "jpeg", "pgm", "ppm", "pnm"];

pub fn is_image_name(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

fn sorted_files(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && keep(p))
        .collect();
    files.sort_by(|a, b| natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(files)
}

/// The frame files the inputs name: files as given, directories (their image files in
/// natural order), and glob patterns in the last path component (`*`, `?`).
pub fn resolve_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        let s = input.to_string_lossy();
        if input.is_dir() {
            let files = sorted_files(input, is_image_name)?;
            if files.is_empty() {
                bail!("directory {} holds no image files ({})", input.display(), IMAGE_EXTENSIONS.join(", "));
            }
            out.extend(files);
        } else if !input.exists() && (s.contains('*') || s.contains('?')) {
            let dir = input.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let pattern: Vec<char> = input.file_name().map(|n| n.to_string_lossy().chars().collect()).unwrap_or_default();
            let files = sorted_files(dir, |p| {
                p.file_name().is_some_and(|n| wildcard(&pattern, &n.to_string_lossy().chars().collect::<Vec<_>>()))
            })?;
            if files.is_empty() {
                bail!("pattern {} matches no file", input.display());
            }
            out.extend(files);
        } else if input.exists() {
            out.push(input.clone());
        } else {
            bail!("{}: no such file or directory", input.display());
        }
    }
    Ok(out)
}

/// The frames the inputs name, as a source the run reads on demand, and a label per frame
/// (file name, or file name and page): one multi-page TIFF gives its pages, otherwise one
/// frame per file; each decoded when the run needs it and kept in a cache of `cache_bytes`.
pub fn frame_source(files: &[PathBuf], cache_bytes: usize) -> Result<(Box<dyn FrameSource>, Vec<String>)> {
    if let [one] = files {
        let pages = if tessera::io::is_tiff(one) { tessera::io::tiff_pages(one)? } else { 1 };
        if pages > 1 {
            let labels = (0..pages).map(|i| format!("{}#{i}", one.display())).collect();
            let source = frames::TiffPages { path: one.clone(), pages };
            return Ok((Box::new(frames::Cached::new(source, cache_bytes)), labels));
        }
    }
    let labels = files.iter().map(|f| f.display().to_string()).collect();
    Ok((Box::new(frames::Cached::new(frames::Files(files.to_vec()), cache_bytes)), labels))
}

/// The demo's synthetic path: PAL frames over the embedded photograph.
fn demo_params(frames: usize, seed: u64) -> SynthParams {
    SynthParams { frames, seed, max_step: 4.0, noise_sigma: 2.0, gain_drift: 0.05, ..Default::default() }
}

/// The embedded photograph the demo cuts its frames from.
pub fn demo_photograph() -> Result<Image<Rgba8>> {
    match tessera::io::load_from_memory(DEFAULT_IMAGE)? {
        AnyImage::Rgba8(src) => Ok(src),
        _ => bail!("internal: the embedded photograph is not RGB"),
    }
}

/// The default input's sequence, every frame in memory (for the benchmarks).
pub fn default_sequence(frames: usize, seed: u64) -> Result<SynthSequence<Rgba8>> {
    Ok(synth_sequence(demo_photograph()?.view(), &demo_params(frames, seed), Parallelism::AllThreads)?)
}

/// The default input's path and conditions with frames of `w x h` (for the benchmarks).
pub fn default_sequence_sized(frames: usize, (w, h): (usize, usize), seed: u64) -> Result<SynthSequence<Rgba8>> {
    let p = SynthParams { frame_width: w, frame_height: h, ..demo_params(frames, seed) };
    Ok(synth_sequence(demo_photograph()?.view(), &p, Parallelism::AllThreads)?)
}

pub fn round(x: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (x * k).round() / k
}

fn opt(x: Option<f64>) -> Value {
    x.map_or(Value::Null, |v| json!(round(v, 4)))
}

/// The report, the JSON contract of `tessera stitch --report` (the Python package returns
/// the same): frames, panorama, quality, params.
pub fn report(pano: &Panorama, labels: &[String], truth: Option<&[(f64, f64)]>, p: &StitchParams, extra: Value) -> Value {
    report_sized(pano, pano.canvas.image.size(), labels, truth, p, extra)
}

/// [`report`] of a panorama of `size`, whose canvas may have been streamed to disk (see
/// [`super::large`]) and stands in `pano` only for its origin.
pub fn report_sized(pano: &Panorama, size: (usize, usize), labels: &[String], truth: Option<&[(f64, f64)]>, p: &StitchParams, extra: Value) -> Value {
    // Scales are reported where fitted: asked for, or switched on by a detected zoom.
    let scaled = p.register.fit_scale || pano.frames.iter().any(|f| f.scale != 1.0);
    let frames: Vec<Value> = pano
        .frames
        .iter()
        .map(|f| {
            let mut o = json!({
                "index": f.index,
                "file": labels.get(f.index).cloned().unwrap_or_default(),
                "x": f.position.map(|q| round(q.0, 3)),
                "y": f.position.map(|q| round(q.1, 3)),
                "angle": f.position.map(|_| round(f.angle.to_degrees(), 4)),
                "status": if f.is_ok() { "ok" } else { "skipped" },
                "reference": f.reference,
                "ncc": round(f.ncc, 4),
                "vectors_used": f.vectors_used,
                "confidence": round(f.confidence, 3),
                "accepted_by": f.is_ok().then(|| if f.phase_significance.is_some() { "whole overlap" } else { p.register.acceptance.name() }),
                "margin": round(f.margin, 4),
                "phase_significance": opt(f.phase_significance),
                "evaluations": f.evaluations,
                "quality": opt(f.quality),
                "quality_grid": opt(f.quality_grid),
                "residual": opt(f.residual),
                "loop_closure": f.loop_closure,
            });
            if let Some(r) = &f.skip {
                o["reason"] = json!(r.describe());
            }
            if scaled {
                o["scale"] = json!(f.position.map(|_| round(f.scale, 6)));
            }
            if let Some(t) = truth.and_then(|t| t.get(f.index)) {
                o["true_x"] = json!(round(t.0, 3));
                o["true_y"] = json!(round(t.1, 3));
            }
            o
        })
        .collect();
    let (w, h) = size;
    let ok = pano.frames.iter().filter(|f| f.is_ok()).count();
    let r = &p.register;
    json!({
        "frames": frames,
        "panorama": {"width": w, "height": h, "origin_x": pano.canvas.origin.0, "origin_y": pano.canvas.origin.1,
                     "reference_frame": pano.reference,
                     "scale_fitted": scaled,
                     "origin_meaning": "panorama pixel (X, Y) shows what the reference frame shows at (X + origin_x, Y + origin_y)",
                     "pose_meaning": "frame pixel (u, v) shows what the reference frame shows at (x, y) + scale R(angle) (u, v), R(a) = [[cos a, -sin a], [sin a, cos a]], angle in degrees, x right, y down"},
        "quality": {"mean_ncc": opt(pano.mean_ncc()), "mean_overlap_ncc": opt(pano.mean_quality()),
                    "mean_grid_ncc": opt(pano.mean_quality_grid()), "frames_ok": ok, "frames_skipped": pano.frames.len() - ok},
        "params": {"rsz": r.rsz, "accept": r.acceptance.name(), "cthresh": r.cthresh, "null_margin": r.null_margin,
                   "min_coefficient": r.min_coefficient, "coarse_candidates": p.coarse_candidates, "grow_templates": p.grow_templates, "close_loops": p.close_loops, "whole_overlap": p.whole_overlap, "refine_every_pair": p.refine_every_pair, "detect_zoom": p.detect_zoom, "npts": r.npts, "search_radius": r.search_radius,
                   "min_variance": r.min_variance, "agreement": r.agreement, "min_vectors": r.min_vectors,
                   "subpixel": r.subpixel, "refine": r.refine, "method": format!("{:?}", r.method).to_lowercase(),
                   "motion": format!("{:?}", r.motion).to_lowercase(), "fit_scale": r.fit_scale, "max_turn": r.max_turn,
                   "blend": format!("{:?}", p.blend).to_lowercase(), "keyframe_shift": p.keyframe_shift},
        "run": extra,
    })
}

pub fn run_stitch(a: StitchArgs) -> Result<()> {
    let p = StitchParams {
        register: a.register.params(),
        blend: a.blend.into(),
        keyframe_shift: a.keyframe_shift,
        quality: !a.no_quality,
        coarse_candidates: a.coarse,
        grow_templates: !a.no_grow,
        close_loops: !a.no_close_loops,
        whole_overlap: !a.no_whole_overlap,
        refine_every_pair: a.refine_every_pair,
        detect_zoom: !a.no_detect_zoom,
    };
    p.validate()?;
    output_options(&a).validate()?;
    if a.follow.is_some() {
        return super::follow::run_follow(&a, p);
    }
    let backend = a.backend.open()?;
    let cache_bytes = a.frame_cache.saturating_mul(1 << 20);
    let demo = if a.inputs.is_empty() { Some(demo_photograph()?) } else { None };
    let (source, labels, truth): (Box<dyn FrameSource + '_>, Vec<String>, _) = match &demo {
        Some(photo) => {
            eprintln!("no input: stitching {} PAL frames cut from {DEFAULT_IMAGE_NAME} along a known path", a.frames);
            let plan = synth_plan(photo.view(), &demo_params(a.frames, a.seed))?;
            let truth = plan.positions.clone();
            let labels = (0..a.frames).map(|i| format!("synthetic frame {i}")).collect();
            (Box::new(frames::Cached::new(plan, cache_bytes)), labels, Some(truth))
        }
        None => {
            let (source, labels) = frame_source(&resolve_inputs(&a.inputs)?, cache_bytes)?;
            (source, labels, None)
        }
    };
    let p = scale_min_variance(p, &a.register, source.as_ref());
    if a.grid.is_some() || a.positions.is_some() {
        if demo.is_some() {
            bail!("tile modes (--grid, --positions) need the tiles as input");
        }
        return super::grid::run_grid(&a, &p, source.as_ref(), &labels);
    }
    let bar = progress_bar(source.len() as u64, "frames");
    let t0 = Instant::now();
    let mut progress = |done: usize| {
        bar.set_position(done as u64);
        ControlFlow::Continue(())
    };
    // The CPU (and any OME-TIFF output) registers first and then composites through
    // `large`, whole or in strips as the canvas's size asks; a GPU backend composites on its
    // device, the canvas whole.
    let (pano, written) = if backend.name() == "cpu" || tessera::ome_tiff::is_ome_tiff(&a.output) {
        let par = if a.backend.single_thread { Parallelism::Sequential } else { Parallelism::AllThreads };
        let (frames, reference) = tessera::stitch::register_frames(source.as_ref(), &p, par, &mut progress).map_err(|e| name_frame(e, &labels))?;
        bar.finish_and_clear();
        composite_registered(source.as_ref(), frames, reference, &p, &a)?
    } else {
        let pano = backend.stitch(source.as_ref(), &p, &mut progress).map_err(|e| name_frame(e, &labels))?;
        bar.finish_and_clear();
        let t_save = Instant::now();
        tessera::io::save(&pano.canvas.image, &a.output)?;
        let (size, seconds) = (pano.canvas.image.size(), t_save.elapsed().as_secs_f64());
        let written = super::large::Written { path: a.output.clone(), size, origin: pano.canvas.origin, strips: 1, ome: None, seconds };
        (pano, written)
    };
    conclude(&a, &p, &pano, &written, &labels, truth, backend.name(), t0.elapsed().as_secs_f64(), json!({}))
}

/// The texture threshold's default (`--min-variance` not given) scaled to the first frame
/// that reads ([`default_min_variance`]); a live source waits for it.
pub fn scale_min_variance(mut p: StitchParams, args: &RegisterArgs, source: &dyn FrameSource) -> StitchParams {
    if args.min_variance.is_none() {
        let first = (0..).take_while(|&i| i < source.len()).find_map(|i| source.frame(i).ok());
        if let Some(v) = first.as_ref().and_then(|f| f.view().ok()) {
            p.register.min_variance = default_min_variance(&v);
        }
    }
    p
}

/// Composites the registered `frames` of `source` (read once more) and writes the panorama
/// through [`super::large`]; returns the panorama (its canvas standing in for its origin
/// only: the pixels went to disk) and what was written.
pub fn composite_registered(source: &dyn FrameSource, frames: Vec<FrameRecord>, reference: usize, p: &StitchParams, a: &StitchArgs) -> Result<(Panorama, super::large::Written)> {
    let poses: Vec<_> = frames.iter().map(|r| r.pose()).collect();
    let first = (0..poses.len()).find(|&i| poses[i].is_some()).and_then(|i| source.frame(i).ok());
    let like = first.as_ref().ok_or_else(|| anyhow!("no registered frame could be read again"))?.view().map_err(|e| anyhow!(e))?;
    let written = super::large::write_composite(source, &like, &poses, p.blend, &a.output, &output_options(a))?;
    let canvas = tessera::stitch::Canvas { image: AnyImage::U8(Image::new(1, 1)?), origin: written.origin };
    Ok((Panorama { canvas, frames, reference }, written))
}

/// Says how the run went on stdout and writes the report (`--report`), `run` holding the
/// backend, timing and output, and the keys of `more`.
#[allow(clippy::too_many_arguments)]
pub fn conclude(a: &StitchArgs, p: &StitchParams, pano: &Panorama, written: &super::large::Written, labels: &[String], truth: Option<Vec<(f64, f64)>>, backend: &str, secs: f64, more: Value) -> Result<()> {
    if pano.reference != 0 {
        let why = pano.frames[0].skip.as_ref().map(|s| s.describe()).unwrap_or_default();
        println!("reference frame: {} ({}) at (0, 0), since frame 0 was skipped ({why})", pano.reference, labels[pano.reference]);
    }
    // The true path, relative to the reference frame like the positions.
    let truth: Option<Vec<(f64, f64)>> = truth.map(|t| {
        let r = t[pano.reference];
        t.iter().map(|q| (q.0 - r.0, q.1 - r.1)).collect()
    });

    let ok = pano.frames.iter().filter(|f| f.is_ok()).count();
    let (w, h) = written.size;
    println!(
        "{} frames: {ok} registered, {} skipped; panorama {w}x{h} -> {} ({:.1} frames/s on {}, {secs:.2} s)",
        pano.frames.len(),
        pano.frames.len() - ok,
        written.path.display(),
        pano.frames.len() as f64 / secs.max(1e-9),
        backend
    );
    let fmt = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.4}"));
    println!(
        "mean NCC {}, mean overlap NCC {}, mean 5x5-template NCC {}",
        fmt(pano.mean_ncc()),
        fmt(pano.mean_quality()),
        fmt(pano.mean_quality_grid())
    );
    for f in pano.frames.iter().filter(|f| !f.is_ok()) {
        println!("skipped frame {} ({}): {}", f.index, labels[f.index], f.skip.as_ref().map(|s| s.describe()).unwrap_or_default());
    }
    let mut extra = run_keys(backend, secs, written);
    if let (Value::Object(e), Value::Object(m)) = (&mut extra, more) {
        e.extend(m);
    }
    if let Some(t) = &truth {
        println!("{:>5} {:>10} {:>10} {:>10} {:>10} {:>8}", "frame", "x", "true x", "y", "true y", "error");
        let mut errs = Vec::new();
        for f in &pano.frames {
            let tp = t[f.index];
            match f.position {
                Some(q) => {
                    let e = (q.0 - tp.0).hypot(q.1 - tp.1);
                    errs.push(e);
                    println!("{:>5} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>8.3}", f.index, q.0, tp.0, q.1, tp.1, e);
                }
                None => println!("{:>5} {:>10} {:>10.3} {:>10} {:>10.3} {:>8}", f.index, "-", tp.0, "-", tp.1, "skipped"),
            }
        }
        let mean = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
        let max = errs.iter().cloned().fold(0.0, f64::max);
        println!("position error against the truth: mean {mean:.3} px, max {max:.3} px over {} frames", errs.len());
        extra["truth"] = json!({"source": DEFAULT_IMAGE_NAME, "mean_error_px": round(mean, 4), "max_error_px": round(max, 4)});
    }
    if let Some(path) = &a.report {
        let r = report_sized(pano, written.size, labels, truth.as_deref(), p, extra);
        write_replacing(path, serde_json::to_string_pretty(&r)?.as_bytes())?;
        println!("report -> {}", path.display());
    }
    Ok(())
}

/// The report's `run` keys every stitching run has.
pub fn run_keys(backend: &str, secs: f64, written: &super::large::Written) -> Value {
    json!({"backend": backend, "seconds": round(secs, 4), "output": written.path.display().to_string(),
           "peak_memory_mib": frames::peak_memory_mib().map(|m| round(m, 1)), "written": super::large::describe(written)})
}

/// Writes `bytes` to `path` through a hidden file beside it renamed over it, so a reader
/// (of a live run's report) never sees half a file.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> Result<()> {
    let part = partial_name(path);
    std::fs::write(&part, bytes).with_context(|| format!("cannot write {}", part.display()))?;
    std::fs::rename(&part, path).with_context(|| format!("cannot write {}", path.display()))
}

/// `DIR/.NAME.partial.EXT` for `DIR/NAME.EXT`: hidden, in the same file system, and of the
/// same extension (which picks the image format).
pub fn partial_name(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    path.with_file_name(format!(".{name}.partial{ext}"))
}

/// Where and how the panorama is written (`--max-mem`, `--ome-tile`, `--pixel-size`).
pub fn output_options(a: &StitchArgs) -> super::large::OutputOptions {
    let ome = tessera::ome_tiff::OmeTiffOptions { tile: a.ome_tile, pixel_size_um: a.pixel_size, bigtiff: a.bigtiff.then_some(true), ..Default::default() };
    super::large::OutputOptions { max_mem_mib: a.max_mem.unwrap_or_else(super::large::default_max_mem_mib), ome }
}

/// The texture threshold when none is given: `RegisterParams`' (4 squared grey levels on an 8-bit scale, a
/// standard deviation of 2), scaled for 16-bit and float frames by the first frame's value
/// range, so a float frame in [0, 1] gets the same relative threshold as an 8-bit one.
pub fn default_min_variance(frame: &AnyView<'_>) -> f64 {
    fn range<T: tessera::Pixel + Into<f64>>(v: &tessera::ImageView<'_, T>) -> f64 {
        let (lo, hi) = v.rows().flatten().fold((f64::MAX, f64::MIN), |(l, h), &x| {
            let x: f64 = x.into();
            if x.is_finite() { (l.min(x), h.max(x)) } else { (l, h) }
        });
        if hi > lo { hi - lo } else { 255.0 }
    }
    let r = match frame {
        AnyView::U8(_) | AnyView::Rgba8(_) => 255.0,
        AnyView::U16(v) => range(v),
        AnyView::F32(v) => range(v),
    };
    RegisterParams::default().min_variance * (r / 255.0) * (r / 255.0)
}

/// Replaces "frame N" in a core error with the frame's file name.
pub fn name_frame(e: tessera::Error, labels: &[String]) -> anyhow::Error {
    let mut msg = e.to_string();
    for (i, l) in labels.iter().enumerate().rev() {
        for end in [' ', ':'] {
            msg = msg.replace(&format!("frame {i}{end}"), &format!("frame {i} ({l}){end}"));
        }
    }
    anyhow!("{msg}")
}

pub fn run_synth_seq(a: SynthSeqArgs) -> Result<()> {
    let src = tessera::io::load(&a.image)?;
    let p = SynthParams {
        frame_width: a.width,
        frame_height: a.height,
        frames: a.frames,
        zoom: a.zoom,
        max_step: a.max_step,
        noise_sigma: a.noise,
        gain_drift: a.gain_drift,
        blur_passes: a.blur,
        seed: a.seed,
    };
    let par = Parallelism::AllThreads;
    let (frames, positions): (Vec<AnyImage>, Vec<(f64, f64)>) = match &src {
        AnyImage::U8(s) => split(synth_sequence(s.view(), &p, par)?),
        AnyImage::U16(s) => split(synth_sequence(s.view(), &p, par)?),
        AnyImage::F32(s) => split(synth_sequence(s.view(), &p, par)?),
        AnyImage::Rgba8(s) => split(synth_sequence(s.view(), &p, par)?),
        AnyImage::U32(_) => bail!("32-bit integer images are not supported"),
    };
    std::fs::create_dir_all(&a.output).with_context(|| format!("cannot create {}", a.output.display()))?;
    let ext = if matches!(frames[0], AnyImage::F32(_)) { "tif" } else { "png" };
    let bar = progress_bar(frames.len() as u64, "frames written");
    let mut csv = String::from("index,file,x,y\n");
    let mut list = Vec::new();
    for (i, (f, pos)) in frames.iter().zip(&positions).enumerate() {
        let name = format!("frame_{i:04}.{ext}");
        tessera::io::save(f, &a.output.join(&name))?;
        csv.push_str(&format!("{i},{name},{:.6},{:.6}\n", pos.0, pos.1));
        list.push(json!({"index": i, "file": name, "x": pos.0, "y": pos.1}));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let truth = json!({"source": a.image.display().to_string(),
        "convention": "frame i's pixel (u, v) shows what frame 0 shows at (u + x, v + y)",
        "params": {"width": a.width, "height": a.height, "frames": a.frames, "zoom": a.zoom, "max_step": a.max_step,
                   "noise_sigma": a.noise, "gain_drift": a.gain_drift, "blur_passes": a.blur, "seed": a.seed},
        "frames": list});
    std::fs::write(a.output.join("truth.json"), serde_json::to_string_pretty(&truth)?)?;
    std::fs::write(a.output.join("truth.csv"), csv)?;
    println!("{} frames of {}x{} -> {} (ground truth in truth.json / truth.csv)", frames.len(), a.width, a.height, a.output.display());
    Ok(())
}

fn split<P: tessera::Pixel>(s: SynthSequence<P>) -> (Vec<AnyImage>, Vec<(f64, f64)>)
where
    AnyImage: From<Image<P>>,
{
    (s.frames.into_iter().map(AnyImage::from).collect(), s.positions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut v = vec!["f10.png", "f2.png", "f1.png", "f02.png", "g.png", "f100.png"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["f1.png", "f2.png", "f02.png", "f10.png", "f100.png", "g.png"]);
    }

    #[test]
    fn wildcards() {
        let m = |p: &str, n: &str| wildcard(&p.chars().collect::<Vec<_>>(), &n.chars().collect::<Vec<_>>());
        assert!(m("*.png", "a.png") && m("f??.tif", "f01.tif") && m("*", "") && m("a*b*c", "aXXbYc"));
        assert!(!m("*.png", "a.tif") && !m("f?.tif", "f01.tif") && !m("a*b", "ac"));
    }
}

//! `tessera stitch` (a panorama from an image sequence, or from the bundled photograph when
//! no input is given) and `tessera synth-seq` (a synthetic sequence with ground truth).


use super::common::{choice, progress_bar, BackendArgs};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;
use tessera::frames::{self, grid_source, resolve_inputs};
use tessera::grid::Planes;
use tessera::large::{self, OutputOptions, Written};
use tessera::options::{scale_min_variance, RegisterOptions, StitchOptions};
use tessera::report::{report_sized, round};
use tessera::stitch::{synth_plan, synth_sequence, Acceptance, Blend, Corner, FrameRecord, FrameSource, Motion, Panorama, RegisterParams, SearchMethod, Similarity, StitchParams, SynthParams, SynthSequence, TileOrder};
use tessera::{AnyImage, Choice, Image, Parallelism, Rgba8};

/// The default input: a CC0 fundus photograph (see assets/README.md).
pub const DEFAULT_IMAGE: &[u8] = include_bytes!("../../assets/retina.jpg");
pub const DEFAULT_IMAGE_NAME: &str = "assets/retina.jpg (CC0 fundus photograph, embedded)";

/// Registration parameters shared by `stitch` and the bench.
#[derive(clap::Args, Clone, Debug)]
pub struct RegisterArgs {
    /// Template side in pixels (25 for half PAL, 31 for PAL)
    #[arg(long, default_value_t = RegisterParams::default().rsz)]
    pub rsz: usize,
    /// How a template's match is accepted: adaptive (its peak must beat what the same
    /// template scores where it cannot match by --null-margin) or fixed (the original's
    /// rule: a coefficient of at least --cthresh)
    #[arg(long, value_parser = choice::<Acceptance>(), default_value = RegisterParams::default().acceptance.name())]
    pub accept: Acceptance,
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
    #[arg(long, value_parser = choice::<SearchMethod>(), default_value = RegisterParams::default().method.name())]
    pub method: SearchMethod,
    /// Keep the consensus of the peak fits instead of refining the shift on the agreeing
    /// templates' pixels
    #[arg(long)]
    pub no_refine: bool,
    /// Motion model: similarity (rotation plus shift, fitted where a pair shows a visible
    /// turn; a pair that does not keeps the translation result exactly) or translation
    /// (the original)
    #[arg(long, value_parser = choice::<Motion>(), default_value = RegisterParams::default().motion.name())]
    pub motion: Motion,
    /// With --motion similarity: fit a scale (zoom) too
    #[arg(long)]
    pub fit_scale: bool,
    /// With --motion similarity: the largest turn, in degrees, a pair may show beyond the
    /// turn it was predicted to have
    #[arg(long, default_value_t = RegisterParams::default().max_turn)]
    pub max_turn: f64,
}

impl RegisterArgs {
    /// The library's registration options, one field per flag.
    pub fn options(&self) -> RegisterOptions {
        RegisterOptions {
            rsz: self.rsz,
            accept: self.accept,
            cthresh: self.cthresh,
            null_margin: self.null_margin,
            min_coefficient: self.min_coefficient,
            npts: self.npts,
            search_radius: self.search_radius,
            min_variance: self.min_variance,
            method: self.method,
            no_refine: self.no_refine,
            motion: self.motion,
            fit_scale: self.fit_scale,
            max_turn: self.max_turn,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct StitchArgs {
    /// Frames: image files, a directory (natural sort), a glob pattern ("frames/*.png"), or
    /// a multi-page TIFF. None: a synthetic sequence cut from the bundled photograph.
    /// Tiles may be named by fields: "scan/img_r{yy}_c{xx}_ch{c}.tif" ({x} column, {y}
    /// row, {i} tile, {c} channel, {t} time point or cycle; {iii}: three digits), which
    /// give the grid, channels and time points.
    pub inputs: Vec<PathBuf>,
    /// Panorama file (PNG, TIFF, ...; 32-bit float panoramas need .tif)
    #[arg(short, long, default_value = "panorama.png")]
    pub output: PathBuf,
    /// Write the JSON report here
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write each island the panorama does not hold (frames registered among themselves
    /// after the run lost its way, joined to nothing) as its own panorama here, named
    /// island-FIRST with the output's extension (FIRST: the island's first frame)
    #[arg(long, value_name = "DIR")]
    pub islands: Option<PathBuf>,
    #[command(flatten)]
    pub register: RegisterArgs,
    /// How overlapping frames combine
    #[arg(long, value_parser = choice::<Blend>(), default_value = StitchParams::default().blend.name())]
    pub blend: Blend,
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
    #[arg(long, default_value_t = tessera::stitch::DEFAULT_OVERLAP * 100.0)]
    pub overlap: f64,
    /// Grid mode: acquisition order of the tiles
    #[arg(long, value_parser = choice::<TileOrder>(), default_value = TileOrder::default().name())]
    pub order: TileOrder,
    /// Grid mode: corner of the first tile
    #[arg(long, value_parser = choice::<Corner>(), default_value = Corner::default().name())]
    pub start: Corner,
    /// Tile mode with nominal stage positions: a CSV file, one line per input tile, x and y
    /// (top-left corner) as its last two fields, in pixels (or micrometres with --pixel-size)
    #[arg(long, value_name = "FILE.csv")]
    pub positions: Option<PathBuf>,
    /// Tile mode with the nominal positions of a Fiji tile configuration (TileConfiguration.txt
    /// of Grid/Collection stitching or BigStitcher: `dim = 2`, lines `FILE; ; (X, Y)` in
    /// pixels); it names the tiles, relative to its folder, so no input is given. The
    /// registered positions are written as TileConfiguration.registered.txt beside the
    /// report (or the mosaic), in every tile mode
    #[arg(long, value_name = "FILE", conflicts_with_all = ["grid", "positions", "inputs"])]
    pub tile_config: Option<PathBuf>,
    /// Micrometres per pixel: for --positions given in micrometres, and written into an
    /// OME-TIFF's metadata (PhysicalSizeX/Y)
    #[arg(long)]
    pub pixel_size: Option<f64>,
    /// Memory budget for the panorama, MiB: a larger canvas is composited in strips and
    /// streamed to a tiled, pyramidal OME-TIFF (an output not named .ome.tif becomes
    /// NAME.ome.tif), as is any output named .ome.tif / .ome.tiff, or .ome.zarr (an
    /// OME-Zarr store, NGFF 0.5)
    /// [default: a quarter of the physical memory, or 4096]
    #[arg(long, value_name = "MiB")]
    pub max_mem: Option<usize>,
    /// Largest panorama written, in pixels: a larger canvas (a position far from the others)
    /// is refused before anything is written, naming the frame that makes it so
    #[arg(long, value_name = "PIXELS", default_value_t = large::DEFAULT_MAX_OUTPUT_PIXELS)]
    pub max_output_pixels: u64,
    /// OME-TIFF tile (and OME-Zarr chunk) side in pixels (a multiple of 16)
    #[arg(long, default_value_t = 512)]
    pub ome_tile: usize,
    /// Write an OME-TIFF as BigTIFF even when it stays under 4 GiB (it is BigTIFF
    /// automatically past that)
    #[arg(long)]
    pub bigtiff: bool,
    /// Tile modes: how far a tile may be from its nominal position, fraction of the tile
    #[arg(long, default_value_t = tessera::stitch::GridParams::default().stage_error)]
    pub stage_error: f64,
    /// Tile modes: correct the tiles' shading (vignetting, uneven illumination) before
    /// registration and in the mosaic: `estimate` finds the flat field from the tiles
    /// themselves (robust statistics across the tiles, fitted as a smooth surface; reliable
    /// from about 8 tiles of varied content), or FILE is the flat field as an image of the
    /// tile size (grey, any scale, positive everywhere), e.g. one written by --flatfield-out
    /// or by BaSiC
    #[arg(long, value_name = "estimate|FILE")]
    pub flatfield: Option<String>,
    /// Tile modes, with --flatfield: the camera's dark field (offset), subtracted before
    /// dividing by the flat field: `estimate` (with --flatfield estimate: one constant
    /// level found with the flat field) or FILE, an image of the tile size in the tiles'
    /// grey levels
    #[arg(long, value_name = "estimate|FILE", requires = "flatfield")]
    pub darkfield: Option<String>,
    /// Tile modes: write the flat field used (mean 1) to this 32-bit float TIFF, for
    /// inspection or to give it back with --flatfield FILE
    #[arg(long, value_name = "FILE.tif", requires = "flatfield")]
    pub flatfield_out: Option<PathBuf>,
    /// Tile modes: the inputs hold the grid in this many channels, block after block (every
    /// tile of channel 0, then of channel 1, ...) or one multi-page TIFF per tile with every
    /// plane (channels within time points), registered on --register-channel and
    /// written together as the C dimension of one OME-TIFF (-o NAME.ome.tif) or OME-Zarr
    /// (-o NAME.ome.zarr)
    #[arg(long, default_value_t = 1)]
    pub channels: usize,
    /// Tile modes with --channels: the channel (0-based) the tiles are registered on
    #[arg(long, default_value_t = 0)]
    pub register_channel: usize,
    /// Tile modes: the inputs hold the grid at this many time points, one after the other
    /// (each as --channels blocks), each registered on its own and written together as the
    /// T dimension of one OME-TIFF or OME-Zarr
    #[arg(long, default_value_t = 1)]
    pub time_points: usize,
    /// Tile modes: the inputs hold this many cycles of a re-stained slide, one after the
    /// other (each as --channels blocks): each registered on --register-channel (a stain
    /// every cycle shares), brought onto the first cycle wherever the slide was put back,
    /// and every cycle's channels written as channels of one OME-TIFF or OME-Zarr
    #[arg(long, default_value_t = 1, conflicts_with_all = ["time_points", "reuse_positions"])]
    pub cycles: usize,
    /// Tile modes with --time-points: place every time point's tiles where the first time
    /// point's registered (the stage revisits the same positions)
    #[arg(long)]
    pub reuse_positions: bool,
    /// Decoded frames kept in memory for the composite, MiB; frames beyond it are decoded
    /// again when pasted (memory stays bounded whatever the sequence's length)
    #[arg(long, default_value_t = 64)]
    pub frame_cache: usize,
    /// Live mode: register frames as they appear in DIR (a file counts once it stops
    /// growing; frames in natural name order), or, with "-", the files named on standard
    /// input (one per line); rewrite the panorama and report as frames register, and write
    /// the final ones when the input ends: end of standard input, the stop file, SIGINT or
    /// SIGTERM (a second one aborts). Runs on the CPU
    #[arg(long, value_name = "DIR|-", conflicts_with_all = ["inputs", "grid", "positions", "tile_config", "frames", "seed"])]
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

impl StitchArgs {
    /// The planes of a tile grid: --channels within --time-points or --cycles.
    pub fn planes(&self) -> Result<Planes> {
        Planes::new(self.channels, self.time_points, self.cycles, self.register_channel, self.reuse_positions)
    }

    /// The library's stitching options, one field per flag.
    pub fn options(&self) -> StitchOptions {
        StitchOptions {
            register: self.register.options(),
            blend: self.blend,
            keyframe_shift: self.keyframe_shift,
            no_quality: self.no_quality,
            coarse: self.coarse,
            no_grow: self.no_grow,
            no_close_loops: self.no_close_loops,
            no_whole_overlap: self.no_whole_overlap,
            refine_every_pair: self.refine_every_pair,
            no_detect_zoom: self.no_detect_zoom,
        }
    }
}

/// Tiles named by a pattern (`tiles/img_r{yy}_c{xx}_ch{c}.tif`, [`tessera::tile_names`]):
/// the files in the grid's order, their channels and time points (or cycles), and the grid
/// where the names give columns and rows.
fn expand_tile_names(a: &mut StitchArgs) -> Result<()> {
    let [pattern] = a.inputs.as_slice() else { return Ok(()) };
    if !tessera::tile_names::is_pattern(pattern) {
        return Ok(());
    }
    let named = tessera::tile_names::resolve(pattern)?;
    (a.channels, a.time_points, a.cycles) = named.planes(a.channels, a.time_points, a.cycles)?;
    if a.positions.is_none() && a.tile_config.is_none() {
        a.grid = named.grid(a.grid.as_deref(), a.order != TileOrder::default() || a.start != Corner::default())?;
    } else if named.grid.is_some() {
        bail!("the file names give each tile's column and row: not with --positions or --tile-config");
    }
    a.inputs = named.files;
    Ok(())
}

pub fn run_stitch(mut a: StitchArgs) -> Result<()> {
    expand_tile_names(&mut a)?;
    let p = a.options().params()?;
    output_options(&a).validate()?;
    if a.flatfield.is_some() && a.grid.is_none() && a.positions.is_none() && a.tile_config.is_none() {
        bail!("--flatfield corrects the tiles of a grid: give it with --grid, --positions or --tile-config");
    }
    let tiles = a.grid.is_some() || a.positions.is_some() || a.tile_config.is_some();
    if !tiles && a.planes()?.asked() {
        bail!("--channels, --time-points, --cycles, --register-channel and --reuse-positions are for tile grids (--grid, --positions, --tile-config)");
    }
    if a.islands.is_some() && (a.follow.is_some() || a.grid.is_some() || a.positions.is_some() || a.tile_config.is_some()) {
        bail!("--islands writes the islands of a sequence run: not with --follow or the tile modes");
    }
    if a.follow.is_some() {
        return super::follow::run_follow(&a, p);
    }
    let backend = a.backend.open()?;
    let cache_bytes = a.frame_cache.saturating_mul(1 << 20);
    let demo = if a.inputs.is_empty() && a.tile_config.is_none() { Some(demo_photograph()?) } else { None };
    let (source, labels, truth): (Box<dyn FrameSource + '_>, Vec<String>, _) = match &demo {
        Some(photo) => {
            eprintln!("no input: stitching {} PAL frames cut from {DEFAULT_IMAGE_NAME} along a known path", a.frames);
            let plan = synth_plan(photo.view(), &demo_params(a.frames, a.seed))?;
            let truth = plan.positions.clone();
            let labels = (0..a.frames).map(|i| format!("synthetic frame {i}")).collect();
            (Box::new(frames::Cached::new(plan, cache_bytes)), labels, Some(truth))
        }
        None => {
            // A Fiji tile configuration names the tiles itself.
            let files = match &a.tile_config {
                Some(cfg) => tessera::tile_config::read(cfg)?.into_iter().map(|t| t.0).collect(),
                None => resolve_inputs(&a.inputs)?,
            };
            let par = if a.backend.single_thread { Parallelism::Sequential } else { Parallelism::AllThreads };
            let (source, labels) = grid_source(&files, a.channels * a.time_points * a.cycles, cache_bytes, frames::read_ahead_depth(par))?;
            (source, labels, None)
        }
    };
    let p = scale_min_variance(p, a.register.min_variance, source.as_ref());
    if a.grid.is_some() || a.positions.is_some() || a.tile_config.is_some() {
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
    // The CPU (and any OME-TIFF or OME-Zarr output) registers first and then composites through
    // `large`, whole or in strips as the canvas's size asks; a GPU backend composites on its
    // device, the canvas whole.
    let (pano, written) = if backend.name() == "cpu" || large::is_tiled(&a.output) {
        let par = if a.backend.single_thread { Parallelism::Sequential } else { Parallelism::AllThreads };
        let (frames, reference) = tessera::stitch::register_frames(source.as_ref(), &p, par, &mut progress).map_err(|e| name_frame(e, &labels))?;
        bar.finish_and_clear();
        composite_registered(source.as_ref(), frames, reference, &p, &a, &labels)?
    } else {
        let pano = backend.stitch(source.as_ref(), &p, &mut progress).map_err(|e| name_frame(e, &labels))?;
        bar.finish_and_clear();
        let t_save = Instant::now();
        tessera::io::save(&pano.canvas.image, &a.output)?;
        let (size, seconds) = (pano.canvas.image.size(), t_save.elapsed().as_secs_f64());
        let written = Written { path: a.output.clone(), size, origin: pano.canvas.origin, strips: 1, ome: None, seconds, lost: Vec::new() };
        (pano, written)
    };
    let islands = match &a.islands {
        Some(dir) => write_islands(source.as_ref(), &pano.frames, &p, &a, dir, &labels)?,
        None => Vec::new(),
    };
    let more = if a.islands.is_some() { json!({"islands_written": islands}) } else { json!({}) };
    conclude(&a, &p, &pano, &written, &labels, truth, backend.name(), t0.elapsed().as_secs_f64(), more)
}

/// Writes each island of `frames` the panorama does not hold into `dir` as its own panorama
/// (`--islands`), its frames at their poses relative to the island's first frame. Returns
/// what it wrote: the island's first frame, its frames and the file.
fn write_islands(source: &dyn FrameSource, frames: &[FrameRecord], p: &StitchParams, a: &StitchArgs, dir: &std::path::Path, labels: &[String]) -> Result<Vec<Value>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let firsts: std::collections::BTreeSet<usize> = frames.iter().filter(|f| f.island_position.is_some()).filter_map(|f| f.island).collect();
    let ext = a.output.extension().and_then(|e| e.to_str()).unwrap_or("png");
    let mut written = Vec::new();
    for first in firsts {
        let poses: Vec<Option<Similarity>> = frames
            .iter()
            .map(|f| match (f.island, f.island_position) {
                (Some(i), Some((x, y))) if i == first => Some(Similarity { x, y, angle: f.angle, scale: f.scale }),
                _ => None,
            })
            .collect();
        let like = poses.iter().enumerate().filter(|(_, q)| q.is_some()).find_map(|(i, _)| source.frame(i).ok());
        let like = like.as_ref().ok_or_else(|| anyhow!("no frame of the island at frame {first} could be read again"))?.view().map_err(|e| anyhow!(e))?;
        let path = dir.join(format!("island-{first}.{ext}"));
        large::write_composite(source, &like, &poses, p.blend, &path, &output_options(a), &mut |_, _| Ok(())).map_err(|e| name_frame(e, labels))?;
        println!("island at frame {first} ({} frames, joined to nothing) -> {}", poses.iter().flatten().count(), path.display());
        written.push(json!({"first_frame": first, "frames": poses.iter().flatten().count(), "output": path.display().to_string()}));
    }
    Ok(written)
}

/// Composites the registered `frames` of `source` (read once more) and writes the panorama
/// through [`tessera::large`]; returns the panorama (its canvas standing in for its origin
/// only: the pixels went to disk) and what was written.
pub fn composite_registered(source: &dyn FrameSource, frames: Vec<FrameRecord>, reference: usize, p: &StitchParams, a: &StitchArgs, labels: &[String]) -> Result<(Panorama, Written)> {
    let poses: Vec<_> = frames.iter().map(|r| r.pose()).collect();
    let first = (0..poses.len()).filter(|&i| poses[i].is_some()).find_map(|i| source.frame(i).ok());
    let like = first.as_ref().ok_or_else(|| anyhow!("no registered frame could be read again"))?.view().map_err(|e| anyhow!(e))?;
    let written = large::write_composite(source, &like, &poses, p.blend, &a.output, &output_options(a), &mut |_, _| Ok(())).map_err(|e| name_frame(e, labels))?;
    let canvas = tessera::stitch::Canvas { image: AnyImage::U8(Image::new(1, 1)?), origin: written.origin };
    Ok((Panorama { canvas, frames, reference }, written))
}

/// Says how the run went on stdout and writes the report (`--report`), `run` holding the
/// backend, timing and output, and the keys of `more`.
#[allow(clippy::too_many_arguments)]
pub fn conclude(a: &StitchArgs, p: &StitchParams, pano: &Panorama, written: &Written, labels: &[String], truth: Option<Vec<(f64, f64)>>, backend: &str, secs: f64, more: Value) -> Result<()> {
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
    let on_islands = pano.frames.iter().filter(|f| f.island_position.is_some()).count();
    let (w, h) = written.size;
    let apart = if on_islands > 0 { format!(", {on_islands} on islands the panorama does not hold") } else { String::new() };
    println!(
        "{} frames: {ok} registered{apart}, {} skipped; panorama {w}x{h} -> {} ({:.1} frames/s on {}, {secs:.2} s)",
        pano.frames.len(),
        pano.frames.len() - ok - on_islands,
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
    for f in pano.frames.iter().filter(|f| !f.is_ok() && f.island_position.is_none()) {
        println!("skipped frame {} ({}): {}", f.index, labels[f.index], f.skip.as_ref().map(|s| s.describe()).unwrap_or_default());
    }
    for (i, why) in &written.lost {
        eprintln!("warning: frame {i} ({}) registered but could not be read again; it is missing from the panorama: {why}", labels.get(*i).map_or("", |l| l.as_str()));
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
                None => println!("{:>5} {:>10} {:>10.3} {:>10} {:>10.3} {:>8}", f.index, "-", tp.0, "-", tp.1, if f.island_position.is_some() { "island" } else { "skipped" }),
            }
        }
        let mean = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
        let max = errs.iter().cloned().fold(0.0, f64::max);
        println!("position error against the truth: mean {mean:.3} px, max {max:.3} px over {} frames", errs.len());
        extra["truth"] = json!({"source": DEFAULT_IMAGE_NAME, "mean_error_px": round(mean, 4), "max_error_px": round(max, 4)});
    }
    if let Some(path) = &a.report {
        let r = report_sized(pano, written.size, labels, truth.as_deref(), p, extra);
        tessera::io::write_bytes(path, serde_json::to_string_pretty(&r)?.as_bytes())?;
        println!("report -> {}", path.display());
    }
    Ok(())
}

/// The report's `run` keys every stitching run has.
pub fn run_keys(backend: &str, secs: f64, written: &Written) -> Value {
    json!({"backend": backend, "seconds": round(secs, 4), "output": written.path.display().to_string(),
           "peak_memory_mib": tessera::report::peak_memory_mib().map(|m| round(m, 1)), "written": large::describe(written)})
}

/// Where and how the panorama is written (`--max-mem`, `--max-output-pixels`, `--ome-tile`,
/// `--pixel-size`).
pub fn output_options(a: &StitchArgs) -> OutputOptions {
    let ome = tessera::ome_tiff::OmeTiffOptions { tile: a.ome_tile, pixel_size_um: a.pixel_size, bigtiff: a.bigtiff.then_some(true), ..Default::default() };
    let par = if a.backend.single_thread { Parallelism::Sequential } else { Parallelism::AllThreads };
    OutputOptions { max_mem_mib: a.max_mem.unwrap_or_else(large::default_max_mem_mib), max_output_pixels: a.max_output_pixels, ome, par }
}

/// Replaces "frame N" in an error's message with the frame's file name.
pub fn name_frame(e: impl std::fmt::Display, labels: &[String]) -> anyhow::Error {
    let mut msg = format!("{e:#}");
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
    tessera::io::write_bytes(&a.output.join("truth.json"), serde_json::to_string_pretty(&truth)?.as_bytes())?;
    tessera::io::write_bytes(&a.output.join("truth.csv"), csv.as_bytes())?;
    println!("{} frames of {}x{} -> {} (ground truth in truth.json / truth.csv)", frames.len(), a.width, a.height, a.output.display());
    Ok(())
}

fn split<P: tessera::Pixel>(s: SynthSequence<P>) -> (Vec<AnyImage>, Vec<(f64, f64)>)
where
    AnyImage: From<Image<P>>,
{
    (s.frames.into_iter().map(AnyImage::from).collect(), s.positions)
}

//! Writing a composite, however large: a canvas within the memory budget is composited
//! whole and saved in the output's format; a larger one, or any output named `.ome.tif` or
//! `.ome.zarr`, is composited in strips of whole tile rows (each strip pasting only the
//! frames that reach it, re-read from the frame source) and streamed to a pyramidal
//! OME-TIFF or OME-Zarr, so memory holds one strip, the writer's tile rows and the frame
//! cache, never the canvas.

use crate::ome_tiff::{is_ome_tiff, OmeTiffOptions, OmeTiffSummary, OmeTiffWriter, PixelKind};
use crate::ome_zarr::{is_ome_zarr, OmeZarrSummary, OmeZarrWriter};
use crate::stitch::{Blend, Compositor, Frame, FrameSource, Plan, Similarity};
use crate::Parallelism;
use crate::AnyView;
use anyhow::{anyhow, bail, Result};
use std::path::{Path, PathBuf};

/// Largest canvas planned at all, in pixels (2^40: a million by a million); beyond it a
/// position is surely wrong. Strips are still bounded by the core's `MAX_CANVAS`.
pub const MAX_STREAMED_CANVAS: usize = if usize::BITS > 32 { 1 << 40 } else { usize::MAX };

/// The default memory budget: a quarter of the physical memory (Linux's MemTotal), or
/// 4096 MiB where it cannot be read.
pub fn default_max_mem_mib() -> usize {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines().find_map(|l| l.strip_prefix("MemTotal:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
    });
    total_kib.map_or(4096, |k| (k / 1024 / 4).max(1))
}

/// The largest panorama written unless raised, in pixels: 2^32 (65 536 x 65 536; 4 GiB
/// as 8-bit gray, 16 GiB as RGB). Ten times the largest mosaic of the benchmarks (20 000 x
/// 20 000, `scripts/big_grid.py`), yet far below what a wrong position makes: a stage
/// position in micrometres read as pixels, or one stray line of a positions file, gives a
/// canvas of tens of gigapixels that would otherwise stream to disk for many minutes.
pub const DEFAULT_MAX_OUTPUT_PIXELS: u64 = 1 << 32;

/// How a composite is written.
#[derive(Clone, Debug)]
pub struct OutputOptions {
    /// Memory budget for the canvas, MiB.
    pub max_mem_mib: usize,
    /// The largest canvas written, pixels; a larger one is refused before anything is
    /// written, naming the frame that makes it so.
    pub max_output_pixels: u64,
    /// The OME-TIFF writer's settings (tile side, pixel size).
    pub ome: OmeTiffOptions,
    /// Where the canvas is pasted ([`Compositor::on`]): a batch of frames at a time, each
    /// band of rows on a thread; the same pixels on any number of threads.
    pub par: Parallelism,
}

impl Default for OutputOptions {
    /// [`default_max_mem_mib`], [`DEFAULT_MAX_OUTPUT_PIXELS`], the OME-TIFF defaults, every
    /// thread.
    fn default() -> Self {
        OutputOptions { max_mem_mib: default_max_mem_mib(), max_output_pixels: DEFAULT_MAX_OUTPUT_PIXELS, ome: OmeTiffOptions::default(), par: Parallelism::AllThreads }
    }
}

impl OutputOptions {
    /// Errors: a zero budget or output limit, bad OME-TIFF settings
    /// ([`OmeTiffOptions::validate`]). Checked before any work, so a bad option fails the
    /// run at once, not after its registration.
    pub fn validate(&self) -> Result<()> {
        if self.max_mem_mib == 0 {
            bail!("--max-mem must be at least 1 MiB");
        }
        if self.max_output_pixels == 0 {
            bail!("--max-output-pixels must be at least 1");
        }
        self.ome.validate().map_err(|e| anyhow!("--ome-tile / --pixel-size: {e}"))
    }
}

/// What was written.
#[derive(Clone, Debug)]
pub struct Written {
    pub path: PathBuf,
    pub size: (usize, usize),
    /// Frame-0 coordinates of the panorama's pixel (0, 0).
    pub origin: (i64, i64),
    /// Strips composited (1: the whole canvas at once).
    pub strips: usize,
    /// The OME-TIFF or OME-Zarr written, when the output is one.
    pub ome: Option<Tiled>,
    /// Seconds spent compositing and writing (a GPU backend's canvas: writing only).
    pub seconds: f64,
    /// The frames placed but missing from the panorama because they could not be read
    /// again (deleted or changed since they registered), with the reason.
    pub lost: Vec<(usize, String)>,
}

/// What a tiled, pyramidal output holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Tiled {
    Tiff(OmeTiffSummary),
    Zarr(OmeZarrSummary),
}

impl Tiled {
    /// Every level's size, full resolution first.
    pub fn levels(&self) -> &[(usize, usize)] {
        match self {
            Tiled::Tiff(t) => &t.levels,
            Tiled::Zarr(z) => &z.levels,
        }
    }
}

/// Whether `path` names a tiled, pyramidal output, always written in strips: an OME-TIFF
/// (`.ome.tif`) or an OME-Zarr store (`.zarr`).
pub fn is_tiled(path: &Path) -> bool {
    is_ome_tiff(path) || is_ome_zarr(path)
}

/// The writer of a tiled output, by its name.
enum TiledWriter {
    Tiff(OmeTiffWriter),
    Zarr(OmeZarrWriter),
}

impl TiledWriter {
    fn create(path: &Path, size: (usize, usize), kind: PixelKind, opts: &OmeTiffOptions) -> Result<Self> {
        Ok(if is_ome_zarr(path) { TiledWriter::Zarr(OmeZarrWriter::create(path, size, kind, opts)?) } else { TiledWriter::Tiff(OmeTiffWriter::create(path, size, kind, opts)?) })
    }

    fn write_strip(&mut self, strip: &AnyView<'_>) -> Result<()> {
        match self {
            TiledWriter::Tiff(w) => w.write_strip(strip),
            TiledWriter::Zarr(w) => w.write_strip(strip),
        }
    }

    fn finish(self) -> Result<Tiled> {
        Ok(match self {
            TiledWriter::Tiff(w) => Tiled::Tiff(w.finish()?),
            TiledWriter::Zarr(w) => Tiled::Zarr(w.finish()?),
        })
    }
}

/// Writes a whole image in memory as a pyramidal OME-TIFF or OME-Zarr, by `path`'s name
/// (strips of one tile row). Errors: 32-bit integer pixels, as the writers'.
pub fn write_tiled(img: &crate::AnyImage, path: &Path, opts: &OmeTiffOptions) -> Result<Tiled> {
    let Some(view) = img.view() else { bail!("32-bit integer images cannot be written as OME-TIFF or OME-Zarr") };
    let (w, h) = view.size();
    let mut wr = TiledWriter::create(path, (w, h), PixelKind::of(&view), opts)?;
    for y in (0..h).step_by(opts.tile) {
        wr.write_strip(&crate::ome_tiff::rows_of(&view, y, opts.tile.min(h - y))?)?;
    }
    wr.finish()
}

/// Bytes the compositor holds per canvas pixel: the pixel, and for the averaging blends
/// an f32 sum per colour and an f32 weight.
pub fn bytes_per_pixel(like: &AnyView<'_>, blend: Blend) -> usize {
    let (pixel, colours) = match like {
        AnyView::U8(_) => (1, 1),
        AnyView::U16(_) => (2, 1),
        AnyView::F32(_) => (4, 1),
        AnyView::Rgba8(_) => (4, 3),
    };
    pixel + if blend == Blend::Overwrite { 0 } else { 4 * (colours + 1) }
}

/// Composites the frames of `source` at `poses` (in frame-0 coordinates; `None`: left
/// out) with `blend`, `like` giving their type and size, and writes the result to
/// `output`, or, when the canvas is over the budget and `output` is not an OME-TIFF, to
/// `output` with its extension replaced by `.ome.tif` (said on stdout); an output named
/// `.ome.tif` or `.zarr` is always streamed ([`is_tiled`]). `on_strip` sees
/// each composited strip and its first canvas row once it is written (the whole canvas,
/// row 0, when it is composited at once; `&mut |_, _| Ok(())` to ignore them); an error
/// from it stops the run and is returned, the file left incomplete: the ImageJ plugin keeps
/// a pyramid level in memory this way and cancels on Esc.
/// The output is written to a temporary file beside it and renamed into place when complete
/// ([`crate::io::PartialFile`]): a run that fails leaves any previous file untouched.
/// Errors: no position, a canvas above `opts.max_output_pixels` (naming the frame farthest
/// from the others, [`check_output_size`]), less free space on the output's file system than
/// an uncompressed output takes, an unwritable output. A frame that cannot be read again
/// (deleted since it registered) is left out of the panorama and listed in
/// [`Written::lost`].
pub fn write_composite(
    source: &dyn FrameSource,
    like: &AnyView<'_>,
    poses: &[Option<Similarity>],
    blend: Blend,
    output: &Path,
    opts: &OutputOptions,
    on_strip: &mut dyn FnMut(&AnyView<'_>, usize) -> Result<()>,
) -> Result<Written> {
    opts.validate()?;
    let t0 = std::time::Instant::now();
    // Planned without a pixel limit (frame positions are bounded, so the size cannot
    // overflow), then held to the output limit with the frame that makes it so named.
    let plan = Plan::with_poses(like, poses, usize::MAX)?;
    check_output_size(&plan, poses, opts.max_output_pixels.min(MAX_STREAMED_CANVAS as u64))?;
    let (cw, ch) = plan.size;
    let per_row = cw * bytes_per_pixel(like, blend);
    let budget = opts.max_mem_mib.saturating_mul(1 << 20);
    let fits = per_row.saturating_mul(ch) <= budget && cw * ch <= crate::stitch::MAX_CANVAS;
    if fits && !is_tiled(output) {
        if crate::io::is_tiff(output) {
            crate::io::check_free_space(output, (cw * ch * PixelKind::of(like).samples() * PixelKind::of(like).sample_bytes()) as u64)?;
        }
        let mut lost = Vec::new();
        let canvas = composite_rows(source, &plan, blend, 0, ch, &|_| true, &mut lost, opts.par)?;
        crate::io::save(&canvas.image, output)?;
        on_strip(&canvas.image.view().ok_or_else(|| anyhow!("internal: canvas type"))?, 0)?;
        return Ok(Written { path: output.to_path_buf(), size: (cw, ch), origin: canvas.origin, strips: 1, ome: None, seconds: t0.elapsed().as_secs_f64(), lost });
    }
    let path = if is_tiled(output) {
        output.to_path_buf()
    } else {
        let p = output.with_extension("ome.tif");
        println!("the {cw}x{ch} canvas needs {} MiB, above --max-mem {}: writing it in strips to {}", per_row.saturating_mul(ch) >> 20, opts.max_mem_mib, p.display());
        p
    };
    let (summary, strips, lost) = stream_planes(source, like, &plan, &[&|_| true], blend, &path, opts, on_strip)?;
    Ok(Written { path, size: (cw, ch), origin: (plan.origin.0, plan.origin.1), strips, ome: Some(summary), seconds: t0.elapsed().as_secs_f64(), lost })
}

/// Composites `planes` (each a choice of the frames of `plan`, pasted from `source`) one
/// after the other in strips into the OME-TIFF or OME-Zarr at `path`, `on_strip` seeing each strip and
/// its first row. Returns the file's summary, the strips written and the frames that could
/// not be read again.
#[allow(clippy::too_many_arguments)]
fn stream_planes(
    source: &dyn FrameSource,
    like: &AnyView<'_>,
    plan: &Plan,
    planes: &[&dyn Fn(usize) -> bool],
    blend: Blend,
    path: &Path,
    opts: &OutputOptions,
    on_strip: &mut dyn FnMut(&AnyView<'_>, usize) -> Result<()>,
) -> Result<(Tiled, usize, Vec<(usize, String)>)> {
    let (cw, ch) = plan.size;
    // Strips of whole tile rows, half the budget each (the frame cache and the writer's
    // tile rows take the rest), at least one tile row, at most the core's canvas limit.
    let per_row = cw * bytes_per_pixel(like, blend);
    let budget = opts.max_mem_mib.saturating_mul(1 << 20);
    let tile = opts.ome.tile;
    let fit_rows = (budget / 2 / per_row.max(1)).min(crate::stitch::MAX_CANVAS / cw.max(1));
    let strip = (fit_rows / tile).max(1) * tile;
    let mut writer = TiledWriter::create(path, (cw, ch), PixelKind::of(like), &opts.ome)?;
    let (mut strips, mut lost) = (0, Vec::new());
    for only in planes {
        for y0 in (0..ch).step_by(strip) {
            let canvas = composite_rows(source, plan, blend, y0, (y0 + strip).min(ch), only, &mut lost, opts.par)?;
            let view = canvas.image.view().ok_or_else(|| anyhow!("internal: canvas type"))?;
            writer.write_strip(&view)?;
            on_strip(&view, y0)?;
            strips += 1;
        }
    }
    Ok((writer.finish()?, strips, lost))
}

/// One pose per frame of `frames` from `planes` (each a pose per frame, `None` where the
/// plane does not hold it): the poses of a canvas that holds every plane. Errors: a frame
/// placed by two planes, a plane longer than `frames`.
pub fn planes_union(planes: &[Vec<Option<Similarity>>], frames: usize) -> Result<Vec<Option<Similarity>>> {
    let mut union: Vec<Option<Similarity>> = vec![None; frames];
    for plane in planes {
        for (i, pose) in plane.iter().enumerate().filter(|q| q.1.is_some()) {
            match union.get_mut(i) {
                Some(u @ None) => *u = *pose,
                Some(Some(_)) => bail!("frame {i} is placed in two planes"),
                None => bail!("a plane places frame {i} of {frames}"),
            }
        }
    }
    Ok(union)
}

/// The composite in memory of the frames of `source` at `positions` (`None`: left out),
/// read again in order; the canvas takes the first placed frame's size and type. Errors: no
/// frame placed, a frame that cannot be read again, a canvas above the core's limit.
pub fn composite_in_memory(source: &dyn FrameSource, positions: &[Option<(f64, f64)>], blend: Blend) -> Result<crate::stitch::Canvas> {
    let unreadable = |i: usize, why: String| anyhow!("tile {i} could not be read again: {why}");
    let first = positions.iter().position(Option::is_some).ok_or_else(|| anyhow!("no tile could be used"))?;
    let like = source.frame(first).map_err(|e| unreadable(first, e))?;
    let mut canvas = Compositor::new(&like.view().map_err(|e| unreadable(first, e))?, positions, blend)?.on(Parallelism::AllThreads);
    paste_frames(source, &mut canvas, positions.iter().enumerate().filter(|q| q.1.is_some()).map(|q| q.0), None)?;
    Ok(canvas.finish())
}

/// The planes of a grid in memory, each a pose per frame of `source` (`None` where the plane
/// does not hold the frame), composited on one canvas planned over every plane's frames so
/// that they line up: one image per plane and the canvas's origin. Errors: no frame
/// placed, a frame placed by two planes, a frame that cannot be read again, a canvas above
/// `max_pixels` or the core's limit.
pub fn planes_in_memory(source: &dyn FrameSource, planes: &[Vec<Option<Similarity>>], blend: Blend, max_pixels: usize) -> Result<(Vec<crate::AnyImage>, (i64, i64))> {
    let union = planes_union(planes, source.len())?;
    let unreadable = |i: usize, why: String| anyhow!("tile {i} could not be read again: {why}");
    let first = union.iter().position(Option::is_some).ok_or_else(|| anyhow!("no tile could be used"))?;
    let like = source.frame(first).map_err(|e| unreadable(first, e))?;
    let plan = Plan::with_poses(&like.view().map_err(|e| unreadable(first, e))?, &union, max_pixels.min(crate::stitch::MAX_CANVAS))?;
    let mut images = Vec::with_capacity(planes.len());
    for plane in planes {
        let mut canvas = Compositor::rows(plan.clone(), blend, 0, plan.size.1)?.on(Parallelism::AllThreads);
        paste_frames(source, &mut canvas, plane.iter().enumerate().filter(|q| q.1.is_some()).map(|q| q.0), None)?;
        images.push(canvas.finish().image);
    }
    Ok((images, plan.origin))
}

/// [`write_composite`] of several planes into one OME-TIFF or OME-Zarr `output`, with the channels and
/// time points of `opts.ome.planes`: plane `p` (channel by channel within each time point)
/// holds the frames of `source` that `planes[p]` places, each a pose per frame of
/// `source`. One canvas is planned over every plane's frames, so the planes line up, and
/// each is streamed in strips within `opts.max_mem_mib`. Errors: an output not named
/// .ome.tif or .zarr, a plane count other than the options', a frame placed by two planes, as
/// `write_composite`.
pub fn write_planes(source: &dyn FrameSource, like: &AnyView<'_>, planes: &[Vec<Option<Similarity>>], blend: Blend, output: &Path, opts: &OutputOptions) -> Result<Written> {
    opts.validate()?;
    if !is_tiled(output) {
        bail!("{}: channels and time points are written as one OME-TIFF or OME-Zarr: name it .ome.tif or .ome.zarr", output.display());
    }
    if planes.len() != opts.ome.planes.0 * opts.ome.planes.1 {
        bail!("internal: {} planes for {} channels and {} time points", planes.len(), opts.ome.planes.0, opts.ome.planes.1);
    }
    let t0 = std::time::Instant::now();
    let union = planes_union(planes, source.len())?;
    let plan = Plan::with_poses(like, &union, usize::MAX)?;
    check_output_size(&plan, &union, opts.max_output_pixels.min(MAX_STREAMED_CANVAS as u64))?;
    let holds: Vec<_> = planes.iter().map(|plane| move |i: usize| plane[i].is_some()).collect();
    let only: Vec<&dyn Fn(usize) -> bool> = holds.iter().map(|h| h as &dyn Fn(usize) -> bool).collect();
    let (summary, strips, lost) = stream_planes(source, like, &plan, &only, blend, output, opts, &mut |_, _| Ok(()))?;
    Ok(Written { path: output.to_path_buf(), size: plan.size, origin: (plan.origin.0, plan.origin.1), strips, ome: Some(summary), seconds: t0.elapsed().as_secs_f64(), lost })
}

/// Refuses a canvas of `plan`'s size above `max_pixels`, naming the frame of `poses` farthest
/// from the median position of the frames (the one a wrong position most likely put there).
pub fn check_output_size(plan: &Plan, poses: &[Option<Similarity>], max_pixels: u64) -> Result<()> {
    let (cw, ch) = plan.size;
    let n = (cw as u64).saturating_mul(ch as u64);
    if n <= max_pixels {
        return Ok(());
    }
    let placed: Vec<(usize, f64, f64)> = poses.iter().enumerate().filter_map(|(i, p)| p.map(|p| (i, p.x, p.y))).collect();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mx, my) = (median(placed.iter().map(|p| p.1).collect()), median(placed.iter().map(|p| p.2).collect()));
    let far = placed.iter().max_by(|a, b| (a.1 - mx).abs().max((a.2 - my).abs()).total_cmp(&(b.1 - mx).abs().max((b.2 - my).abs())));
    let culprit = far.map_or(String::new(), |&(i, x, y)| {
        format!(": frame {i} at ({x:.0}, {y:.0}) lies {:.0} pixels from the frames' median position ({mx:.0}, {my:.0})", (x - mx).abs().max((y - my).abs()))
    });
    bail!("the panorama would be {cw}x{ch} = {n} pixels, above the output limit of {max_pixels} (--max-output-pixels){culprit}; nothing was written")
}

/// The canvas rows `y0..y1`: every frame that reaches them read from `source` and pasted
/// in sequence order on the threads of `par`; a frame that cannot be read again is left out
/// and added to `lost` (once), so that the panorama is made of the frames still there.
#[allow(clippy::too_many_arguments)]
fn composite_rows(source: &dyn FrameSource, plan: &Plan, blend: Blend, y0: usize, y1: usize, only: &dyn Fn(usize) -> bool, lost: &mut Vec<(usize, String)>, par: Parallelism) -> Result<crate::stitch::Canvas> {
    let mut c = Compositor::rows(plan.clone(), blend, y0, y1)?.on(par);
    let wanted: Vec<usize> = plan.frames_on_rows(y0, y1).into_iter().filter(|&i| only(i) && !lost.iter().any(|l| l.0 == i)).collect();
    paste_frames(source, &mut c, wanted, Some(lost))?;
    Ok(c.finish())
}

/// Pastes the frames `indices` of `source` into `c` in order, read a batch at a time
/// ([`Compositor::batch`]). A frame that cannot be read again is an error, or, with `lost`,
/// left out and added to it.
fn paste_frames(source: &dyn FrameSource, c: &mut Compositor, indices: impl IntoIterator<Item = usize>, mut lost: Option<&mut Vec<(usize, String)>>) -> Result<()> {
    let unreadable = |i: usize, why: String| anyhow!("tile {i} could not be read again: {why}");
    let batch = c.batch();
    let mut held: Vec<(usize, Frame<'_>)> = Vec::with_capacity(batch);
    let paste = |c: &mut Compositor, held: &mut Vec<(usize, Frame<'_>)>| -> Result<()> {
        let views = held.iter().map(|(i, f)| f.view().map(|v| (*i, v)).map_err(|e| unreadable(*i, e))).collect::<Result<Vec<_>>>()?;
        c.paste_many(&views)?;
        held.clear();
        Ok(())
    };
    for i in indices {
        match source.frame(i).and_then(|f| f.view().map(drop).map(|_| f)) {
            Ok(f) => held.push((i, f)),
            Err(why) => match lost.as_deref_mut() {
                Some(lost) => lost.push((i, why)),
                None => return Err(unreadable(i, why)),
            },
        }
        if held.len() >= batch {
            paste(c, &mut held)?;
        }
    }
    paste(c, &mut held)
}

/// The report's account of the output: size, strips, levels, peak memory.
pub fn describe(w: &Written) -> serde_json::Value {
    serde_json::json!({
        "path": w.path.display().to_string(),
        "strips": w.strips,
        "seconds": (w.seconds * 1e4).round() / 1e4,
        "ome_tiff": match &w.ome {
            Some(Tiled::Tiff(o)) => serde_json::json!({"levels": o.levels, "bigtiff": o.bigtiff, "bytes": o.bytes}),
            _ => serde_json::Value::Null,
        },
        "ome_zarr": match &w.ome {
            Some(Tiled::Zarr(o)) => serde_json::json!({"levels": o.levels, "chunks": o.chunks, "bytes": o.bytes}),
            _ => serde_json::Value::Null,
        },
        "lost_frames": w.lost.iter().map(|(i, why)| serde_json::json!({"index": i, "reason": why})).collect::<Vec<_>>(),
        "peak_memory_mib": crate::report::peak_memory_mib(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::SplitMix64;
    use crate::{AnyImage, Image};

    /// 40 x 30 grey frames, those in `gone` unreadable.
    struct Tiles {
        frames: Vec<AnyImage>,
        gone: Vec<usize>,
    }

    impl FrameSource for Tiles {
        fn len(&self) -> usize {
            self.frames.len()
        }
        fn frame(&self, i: usize) -> core::result::Result<Frame<'_>, String> {
            if self.gone.contains(&i) {
                return Err(format!("frame {i} is gone"));
            }
            self.frames[i].view().map(Frame::View).ok_or_else(|| "no view".into())
        }
    }

    /// Rows pasted in batches on the pool are the rows pasted frame by frame on one thread,
    /// a frame that cannot be read again left out and named once; reading every frame
    /// without a list of the lost is an error naming it.
    #[test]
    fn batches_on_the_pool_paste_the_rows_one_thread_pastes() {
        let mut rng = SplitMix64::new(3);
        let frames: Vec<AnyImage> = (0..40).map(|_| AnyImage::U8(Image::from_fn(40, 30, |_, _| (rng.uniform() * 255.0) as u8).unwrap())).collect();
        let poses: Vec<Option<Similarity>> = (0..40).map(|i| if i == 7 { None } else { Some(Similarity { x: (i % 8) as f64 * 31.0, y: (i / 8) as f64 * 23.0, angle: 0.0, scale: 1.0 }) }).collect();
        let tiles = Tiles { frames, gone: vec![3, 21] };
        let like = tiles.frames[0].view().unwrap();
        let plan = Plan::with_poses(&like, &poses, usize::MAX).unwrap();
        let ch = plan.size.1;
        for blend in [Blend::Overwrite, Blend::Feather] {
            let rows = |y0: usize, y1: usize, par: Parallelism| {
                let mut lost = Vec::new();
                let canvas = composite_rows(&tiles, &plan, blend, y0, y1, &|_| true, &mut lost, par).unwrap();
                (canvas.image, lost.into_iter().map(|l| l.0).collect::<Vec<_>>())
            };
            for (y0, y1) in [(0, ch), (10, 57), (ch - 5, ch)] {
                let (one, lost_one) = rows(y0, y1, Parallelism::Sequential);
                let (all, lost_all) = rows(y0, y1, Parallelism::AllThreads);
                assert!(one == all, "{blend:?} rows {y0}..{y1}");
                assert_eq!(lost_one, lost_all);
                let reached = plan.frames_on_rows(y0, y1);
                assert_eq!(lost_one, [3, 21].into_iter().filter(|i| reached.contains(i)).collect::<Vec<_>>(), "rows {y0}..{y1}");
            }
        }
        let mut c = Compositor::rows(plan.clone(), Blend::Overwrite, 0, ch).unwrap().on(Parallelism::AllThreads);
        let e = paste_frames(&tiles, &mut c, 0..10, None).unwrap_err();
        assert!(format!("{e}").contains("tile 3 could not be read again"), "{e}");
    }
}

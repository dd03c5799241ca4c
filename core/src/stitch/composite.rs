//! Compositing registered frames into one panorama canvas.
//!
//! Frames are pasted at their positions rounded to whole pixels (as the original plugin
//! pasted them; resampling would blur every frame). A frame whose pose turns or scales it
//! ([`Similarity`]) is resampled (bilinear, [`super::warp`]) into the canvas pixels whose
//! centres it covers. The canvas is the bounding box of the pasted frames. Blending where
//! frames overlap:
//! * `Overwrite`: the later frame wins (the original plugin's behaviour);
//! * `Average`: the plain mean of the frames covering a pixel;
//! * `Feather`: the mean weighted by each frame's distance to its own nearest edge,
//!   `w(u, v) = min(u + 1, W - u, v + 1, H - v)`, so seams fade (Szeliski, "Image alignment
//!   and stitching: a tutorial", 2006, section 6.2).
//!
//! Pixels no frame covers are 0 (RGBA: transparent black).
//!
//! A canvas too large for memory is composited in horizontal strips
//! ([`Compositor::rows`]): each strip pastes only the frames that reach its rows, in
//! sequence order, so its pixels are bit for bit those of the same rows of the whole
//! canvas (every pixel sees the same frames in the same order). The same holds for bands of
//! rows pasted on several threads at once ([`Compositor::on`]): each band takes a batch of
//! frames in sequence order, restricted to its rows.

use super::similarity::Similarity;
use super::synth::SynthPixel;
use super::warp::sample;
use crate::error::{try_filled, Error, Result};
use crate::image::{AnyImage, AnyView, Image, ImageView, ImageViewMut, Rgba8};
use crate::parallel::{map_slots, Parallelism};
use alloc::vec::Vec;

/// How overlapping frames combine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Blend {
    /// Later frames overwrite earlier ones (the original).
    #[default]
    Overwrite,
    /// Mean of the covering frames.
    Average,
    /// Mean weighted by distance to the frame's edge.
    Feather,
}

/// Largest canvas accepted, in pixels (2^28: 16384 x 16384).
pub const MAX_CANVAS: usize = 1 << 28;

/// A composited panorama.
#[derive(Clone, Debug, PartialEq)]
pub struct Canvas {
    pub image: AnyImage,
    /// Frame-0 coordinates of the canvas's pixel (0, 0): canvas pixel `(X, Y)` shows what
    /// frame 0 shows at `(X + origin.0, Y + origin.1)`.
    pub origin: (i64, i64),
}

/// Pastes `frames[i]` at `positions[i]` (frame-0 coordinates, the report's convention;
/// `None` leaves the frame out) into a new canvas of the frames' pixel type.
///
/// Errors: no frames, `positions` of another length, every position `None`, a
/// non-finite position, frames of differing size or type (naming the frame), or a canvas
/// above [`MAX_CANVAS`] pixels.
pub fn composite(frames: &[AnyView<'_>], positions: &[Option<(f64, f64)>], blend: Blend) -> Result<Canvas> {
    super::sequence::check_frames(frames)?;
    if positions.len() != frames.len() {
        return Err(Error::InvalidParameter {
            name: "positions",
            reason: alloc::format!("{} positions for {} frames", positions.len(), frames.len()),
        });
    }
    let mut canvas = Compositor::new(&frames[0], positions, blend)?;
    for (i, f) in frames.iter().enumerate() {
        if positions[i].is_some() {
            canvas.paste(i, f)?;
        }
    }
    Ok(canvas.finish())
}

/// Where the frames of a canvas go: the canvas's origin and size and each frame's top-left
/// corner in it, from the positions rounded to whole pixels (module doc). [`Compositor`]
/// pastes by it, and so does a backend that composites on its device, so the placement
/// arithmetic exists once.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Frame-0 coordinates of the canvas's pixel (0, 0) ([`Canvas::origin`]).
    pub origin: (i64, i64),
    /// Canvas width and height in pixels.
    pub size: (usize, usize),
    /// The size and pixel type every pasted frame must have.
    pub frame_size: (usize, usize),
    pub type_name: &'static str,
    /// Canvas coordinates of each frame's top-left pixel (of its bounding box, when
    /// turned); `None`: left out.
    pub at: Vec<Option<(usize, usize)>>,
    /// For each turned frame: the map from canvas pixels to its pixels, and its bounding
    /// box's size. `None` for a frame pasted upright (and one left out).
    pub turned: Vec<Option<(Similarity, (usize, usize))>>,
}

impl Plan {
    /// Plans the canvas for frames of `like`'s type and size at `positions` (module doc).
    /// Errors: every position `None`, a non-finite position, a canvas above [`MAX_CANVAS`].
    pub fn new(like: &AnyView<'_>, positions: &[Option<(f64, f64)>]) -> Result<Self> {
        Self::with_limit(like, positions, MAX_CANVAS)
    }

    /// [`Plan::new`] with a canvas of up to `max_pixels` pixels instead of [`MAX_CANVAS`]:
    /// for a canvas composited in strips ([`Compositor::rows`]), where only a strip must
    /// fit in memory. Errors as `Plan::new`, and a `max_pixels` of 0.
    pub fn with_limit(like: &AnyView<'_>, positions: &[Option<(f64, f64)>], max_pixels: usize) -> Result<Self> {
        let poses: Vec<Option<Similarity>> = positions.iter().map(|p| p.map(Similarity::translation)).collect();
        Self::with_poses(like, &poses, max_pixels)
    }

    /// [`Plan::with_limit`] for frames at `poses` (frame pixel `(u, v)` at `pose(u, v)` in
    /// frame-0 coordinates): a translation is placed by its rounded position, a turned or
    /// scaled frame by the bounding box of its pixel centres. Errors as `with_limit`, and a
    /// non-finite angle or a scale outside (0, 100].
    pub fn with_poses(like: &AnyView<'_>, poses: &[Option<Similarity>], max_pixels: usize) -> Result<Self> {
        if max_pixels == 0 {
            return Err(Error::InvalidParameter { name: "max_pixels", reason: "a canvas of at most 0 pixels".into() });
        }
        let (fw, fh) = like.size();
        // Per frame: the frame-0 box [x0, x1) x [y0, y1) it covers.
        let mut boxes = Vec::new();
        for (i, p) in poses.iter().enumerate() {
            boxes.push(match *p {
                Some(pose) => {
                    // The frame and the coordinate that is out of range, named.
                    for (axis, v) in [("x", pose.x), ("y", pose.y)] {
                        if !v.is_finite() || libm::fabs(v) > 1e9 {
                            return Err(Error::InvalidParameter { name: "frame position", reason: alloc::format!("frame {i}: {axis} = {v} (expected finite, |{axis}| <= 1e9)") });
                        }
                    }
                    crate::error::require_finite("frame angle", pose.angle)?;
                    if !(pose.scale > 0.0 && pose.scale <= 100.0) {
                        return Err(Error::InvalidFloat { name: "frame scale", value: pose.scale, expected: "within (0, 100]" });
                    }
                    Some(frame_box(&pose, (fw, fh)))
                }
                None => None,
            });
        }
        let placed = || boxes.iter().flatten();
        let (Some(x0), Some(y0)) = (placed().map(|b| b.0).min(), placed().map(|b| b.1).min()) else {
            return Err(Error::InvalidParameter { name: "positions", reason: "no frame has a position".into() });
        };
        let x1 = placed().map(|b| b.2).max().unwrap_or(x0);
        let y1 = placed().map(|b| b.3).max().unwrap_or(y0);
        let (cw, ch) = ((x1 - x0) as usize, (y1 - y0) as usize);
        if cw.checked_mul(ch).is_none_or(|n| n > max_pixels) {
            return Err(Error::InvalidParameter { name: "canvas", reason: alloc::format!("{cw}x{ch} exceeds {max_pixels} pixels") });
        }
        let at = boxes.iter().map(|b| b.map(|(x, y, _, _)| ((x - x0) as usize, (y - y0) as usize))).collect();
        let turned = poses.iter().zip(&boxes).map(|(p, b)| turn_of(p, b, (x0, y0))).collect();
        Ok(Plan { origin: (x0, y0), size: (cw, ch), frame_size: (fw, fh), type_name: like.type_name(), at, turned })
    }

    /// Where frame `i` goes (`None`: left out, whatever the frame). Errors: `i` out of
    /// range, a placed frame of another size or pixel type than planned (naming it).
    pub fn place(&self, i: usize, frame: &AnyView<'_>) -> Result<Option<(usize, usize)>> {
        let Some(&at) = self.at.get(i) else {
            return Err(Error::InvalidParameter { name: "frame index", reason: alloc::format!("frame {i} of {}", self.at.len()) });
        };
        if at.is_some() && (frame.size() != self.frame_size || frame.type_name() != self.type_name) {
            return Err(self.mismatch(i, frame));
        }
        Ok(at)
    }

    /// The frames placed on any of the canvas rows `y0..y1`, in sequence order: the frames a
    /// strip [`Compositor::rows`] needs.
    pub fn frames_on_rows(&self, y0: usize, y1: usize) -> Vec<usize> {
        let height = |i: usize| self.turned[i].map_or(self.frame_size.1, |t| t.1 .1);
        (0..self.at.len()).filter(|&i| self.at[i].is_some_and(|(_, y)| y < y1 && y + height(i) > y0)).collect()
    }

    fn mismatch(&self, i: usize, frame: &AnyView<'_>) -> Error {
        Error::InvalidParameter {
            name: "frames",
            reason: alloc::format!(
                "frame {i} is {}x{} {}, but the canvas was planned for {}x{} frames of another type or size",
                frame.size().0,
                frame.size().1,
                frame.type_name(),
                self.frame_size.0,
                self.frame_size.1
            ),
        }
    }
}

/// A canvas filled frame by frame in sequence order: [`Compositor`] on the host, or a
/// backend's canvas on its device (see [`stitch_frames_into`](super::stitch_frames_into)).
pub trait Pasting {
    /// Pastes frame `i` at its planned place ([`Compositor::paste`]).
    fn paste(&mut self, i: usize, frame: &AnyView<'_>) -> Result<()>;
    /// How many frames the canvas takes at once through [`paste_many`](Pasting::paste_many):
    /// one by default; a device's canvas takes several, whose uploads then overlap.
    fn batch(&self) -> usize {
        1
    }
    /// Pastes each `(i, frame)` of `frames` in order, as [`paste`](Pasting::paste) would.
    fn paste_many(&mut self, frames: &[(usize, AnyView<'_>)]) -> Result<()> {
        frames.iter().try_for_each(|(i, f)| self.paste(*i, f))
    }
    /// The finished canvas.
    fn finish(self: alloc::boxed::Box<Self>) -> Result<Canvas>;
}

/// The box `[x0, x1) x [y0, y1)` of frame-0 pixels a frame of `size` at `pose` covers: its
/// rounded placement for a translation, else the bounding box of its pixel centres.
fn frame_box(pose: &Similarity, (fw, fh): (usize, usize)) -> (i64, i64, i64, i64) {
    if pose.is_translation() {
        let (x, y) = (libm::round(pose.x) as i64, libm::round(pose.y) as i64);
        return (x, y, x + fw as i64, y + fh as i64);
    }
    let corners = [(0.0, 0.0), ((fw - 1) as f64, 0.0), (0.0, (fh - 1) as f64), ((fw - 1) as f64, (fh - 1) as f64)].map(|c| pose.apply(c));
    let lo = |k: fn(&(f64, f64)) -> f64| libm::floor(corners.iter().map(k).fold(f64::INFINITY, f64::min)) as i64;
    let hi = |k: fn(&(f64, f64)) -> f64| libm::ceil(corners.iter().map(k).fold(f64::NEG_INFINITY, f64::max)) as i64 + 1;
    (lo(|c| c.0), lo(|c| c.1), hi(|c| c.0), hi(|c| c.1))
}

/// A turned frame's entry of [`Plan::turned`]: the map from canvas pixels (the canvas's
/// pixel (0, 0) at frame-0 `origin`) to the frame's, and the size of its box `b`.
fn turn_of(pose: &Option<Similarity>, b: &Option<(i64, i64, i64, i64)>, origin: (i64, i64)) -> Option<(Similarity, (usize, usize))> {
    match (pose, b) {
        (Some(pose), Some(b)) if !pose.is_translation() => Some((pose.inverse().then(&Similarity::translation((origin.0 as f64, origin.1 as f64))), ((b.2 - b.0) as usize, (b.3 - b.1) as usize))),
        _ => None,
    }
}

/// A canvas being filled frame by frame, so that a long sequence is pasted without holding
/// every frame at once: plan it from the positions, [`paste`](Compositor::paste) each
/// placed frame in sequence order (any order gives the same `Average` and `Feather`;
/// `Overwrite` keeps the last pasted), then [`finish`](Compositor::finish). A clone
/// finished is a snapshot of the canvas so far.
#[derive(Clone)]
pub struct Compositor {
    blend: Blend,
    plan: Plan,
    pixels: Pixels,
    /// The first canvas row held (0 but for a strip, [`Compositor::rows`]).
    y0: usize,
    /// Where a batch of frames is pasted ([`Compositor::on`]).
    par: Parallelism,
}

/// The canvas and, for the blends that average, the running weighted sums.
#[derive(Clone)]
enum Pixels {
    U8(Paste<u8>),
    U16(Paste<u16>),
    F32(Paste<f32>),
    Rgba8(Paste<Rgba8>),
}

impl Compositor {
    /// Plans the canvas ([`Plan::new`], whose errors it returns) for `blend`.
    pub fn new(like: &AnyView<'_>, positions: &[Option<(f64, f64)>], blend: Blend) -> Result<Self> {
        Self::whole(Plan::new(like, positions)?, blend)
    }

    /// [`Compositor::new`] for frames at `poses` ([`Plan::with_poses`], whose errors it
    /// returns; the canvas at most [`MAX_CANVAS`] pixels).
    pub fn with_poses(like: &AnyView<'_>, poses: &[Option<Similarity>], blend: Blend) -> Result<Self> {
        Self::whole(Plan::with_poses(like, poses, MAX_CANVAS)?, blend)
    }

    fn whole(plan: Plan, blend: Blend) -> Result<Self> {
        let rows = plan.size.1;
        Self::rows(plan, blend, 0, rows)
    }

    /// A compositor of the canvas rows `y0..y1` of `plan` only (module doc): paste the
    /// frames [`Plan::frames_on_rows`] names, in sequence order (any other placed frame is
    /// let through and adds nothing); [`finish`](Compositor::finish) gives those rows, their
    /// origin in frame-0 coordinates. Errors: rows empty or past the canvas, a strip above
    /// [`MAX_CANVAS`] pixels.
    pub fn rows(plan: Plan, blend: Blend, y0: usize, y1: usize) -> Result<Self> {
        let (cw, ch) = plan.size;
        if y0 >= y1 || y1 > ch {
            return Err(Error::InvalidParameter { name: "rows", reason: alloc::format!("rows {y0}..{y1} of a canvas of {ch} rows") });
        }
        if cw.checked_mul(y1 - y0).is_none_or(|n| n > MAX_CANVAS) {
            return Err(Error::InvalidParameter { name: "rows", reason: alloc::format!("a strip of {cw}x{} exceeds {MAX_CANVAS} pixels", y1 - y0) });
        }
        let size = (cw, y1 - y0);
        use crate::image::Pixel;
        let pixels = match plan.type_name {
            t if t == u8::NAME => Pixels::U8(Paste::new(size, blend)?),
            t if t == u16::NAME => Pixels::U16(Paste::new(size, blend)?),
            t if t == f32::NAME => Pixels::F32(Paste::new(size, blend)?),
            t if t == Rgba8::NAME => Pixels::Rgba8(Paste::new(size, blend)?),
            _ => return Err(Error::UnsupportedType { op: "composite", types: "u8, u16, f32 and RGBA frames" }),
        };
        Ok(Compositor { blend, plan, pixels, y0, par: Parallelism::Sequential })
    }

    /// Plans frame `i` at `pose` (frame-0 coordinates, placed as [`Plan::with_poses`] places
    /// it), for a frame whose pose was not known when the canvas was planned: a live run's
    /// canvas, planned with room to grow, places each frame as it registers. Returns
    /// whether the frame fits the canvas; if not, nothing changes.
    pub fn place(&mut self, i: usize, pose: Similarity) -> bool {
        let plan = &mut self.plan;
        let finite = [pose.x, pose.y, pose.angle, pose.scale].iter().all(|v| v.is_finite() && libm::fabs(*v) <= 1e9) && pose.scale > 0.0;
        if !finite {
            return false;
        }
        let b = frame_box(&pose, plan.frame_size);
        let (x, y) = (b.0 - plan.origin.0, b.1 - plan.origin.1);
        let (right, bottom) = (b.2 - plan.origin.0, b.3 - plan.origin.1);
        if x < 0 || y < 0 || right > plan.size.0 as i64 || bottom > plan.size.1 as i64 {
            return false;
        }
        if plan.at.len() <= i {
            plan.at.resize(i + 1, None);
            plan.turned.resize(i + 1, None);
        }
        plan.at[i] = Some((x as usize, y as usize));
        plan.turned[i] = turn_of(&Some(pose), &Some(b), plan.origin);
        true
    }

    /// The same canvas, its batches of frames pasted on the threads of `par`
    /// ([`paste_many`](Compositor::paste_many)): the same pixels on any number.
    pub fn on(mut self, par: Parallelism) -> Self {
        self.par = par;
        self
    }

    /// Pastes frame `i` at its planned place (nothing for a frame left out). Errors: as
    /// [`Plan::place`].
    pub fn paste(&mut self, i: usize, frame: &AnyView<'_>) -> Result<()> {
        self.paste_many(&[(i, *frame)])
    }

    /// How many frames [`paste_many`](Compositor::paste_many) is best given at once: enough
    /// to share among the threads (a PAL frame alone is tens of microseconds of copying),
    /// at most about 4 MiB of them.
    pub fn batch(&self) -> usize {
        if self.par.threads() <= 1 {
            return 1;
        }
        let (w, h) = self.plan.frame_size;
        let bytes = w.saturating_mul(h).saturating_mul(self.pixels.bytes_per_pixel()).max(1);
        (BATCH_BYTES / bytes).clamp(1, MAX_BATCH)
    }

    /// Pastes each `(i, frame)` of `frames` in order, as [`paste`](Compositor::paste) would:
    /// every frame is checked first (nothing is pasted if one is wrong); then, on the threads
    /// of [`on`](Compositor::on), each band of rows takes the frames in order, restricted to
    /// its rows, so that every pixel sees the same frames in the same order.
    pub fn paste_many(&mut self, frames: &[(usize, AnyView<'_>)]) -> Result<()> {
        self.paste_in_bands(frames, self.bands())
    }

    /// [`paste_many`](Compositor::paste_many) in `bands` bands of rows.
    fn paste_in_bands(&mut self, frames: &[(usize, AnyView<'_>)], bands: usize) -> Result<()> {
        let mut placed = Vec::with_capacity(frames.len());
        for (i, frame) in frames {
            if let Some(at) = self.plan.place(*i, frame)? {
                if !self.pixels.holds(frame) {
                    return Err(self.plan.mismatch(*i, frame));
                }
                placed.push((*frame, at, self.plan.turned[*i]));
            }
        }
        if placed.is_empty() {
            return Ok(());
        }
        let (blend, y0, par) = (self.blend, self.y0, self.par);
        match &mut self.pixels {
            Pixels::U8(c) => c.paste_bands(&typed(&placed, |f| if let AnyView::U8(v) = f { Some(*v) } else { None }), blend, y0, bands, par),
            Pixels::U16(c) => c.paste_bands(&typed(&placed, |f| if let AnyView::U16(v) = f { Some(*v) } else { None }), blend, y0, bands, par),
            Pixels::F32(c) => c.paste_bands(&typed(&placed, |f| if let AnyView::F32(v) = f { Some(*v) } else { None }), blend, y0, bands, par),
            Pixels::Rgba8(c) => c.paste_bands(&typed(&placed, |f| if let AnyView::Rgba8(v) = f { Some(*v) } else { None }), blend, y0, bands, par),
        }
        Ok(())
    }

    /// Bands of rows a batch is pasted in: one on one thread, else two a thread of at least
    /// [`MIN_BAND_ROWS`] rows.
    fn bands(&self) -> usize {
        let threads = self.par.threads();
        if threads <= 1 {
            return 1;
        }
        (2 * threads).min(self.pixels.height().div_ceil(MIN_BAND_ROWS)).max(1)
    }

    /// The finished canvas.
    pub fn finish(self) -> Canvas {
        let bands = self.bands();
        self.finish_in_bands(bands)
    }

    /// [`finish`](Compositor::finish) in `bands` bands of rows.
    fn finish_in_bands(self, bands: usize) -> Canvas {
        let image = match self.pixels {
            Pixels::U8(c) => AnyImage::U8(c.finish(bands, self.par)),
            Pixels::U16(c) => AnyImage::U16(c.finish(bands, self.par)),
            Pixels::F32(c) => AnyImage::F32(c.finish(bands, self.par)),
            Pixels::Rgba8(c) => AnyImage::Rgba8(c.finish(bands, self.par)),
        };
        Canvas { image, origin: (self.plan.origin.0, self.plan.origin.1 + self.y0 as i64) }
    }
}

/// A frame to paste: its pixels, its top-left canvas pixel, and, where it turns, the
/// inverse of its pose and the size of its box ([`Plan::turned`]).
type Placed<'f, V> = (V, (usize, usize), Option<(Similarity, (usize, usize))>);

/// The frames of `placed` as the canvas's pixel type (those of another type are left out:
/// [`Compositor::paste_many`] checked them).
fn typed<'f, P>(placed: &[Placed<'f, AnyView<'f>>], view: impl Fn(&AnyView<'f>) -> Option<ImageView<'f, P>>) -> Vec<Placed<'f, ImageView<'f, P>>> {
    placed.iter().filter_map(|(f, at, turn)| Some((view(f)?, *at, *turn))).collect()
}

/// Bytes of frames a batch holds at most ([`Compositor::batch`]): ten PAL frames of 8 bits,
/// one of 4K (whose bands still share it). Frames read ahead to be pasted are memory a
/// run holds beyond its canvas, which must not grow with the sequence.
const BATCH_BYTES: usize = 4 << 20;
/// Frames a batch holds at most.
const MAX_BATCH: usize = 32;
/// Fewest canvas rows of a band pasted on a thread of its own.
const MIN_BAND_ROWS: usize = 32;

impl Pixels {
    fn holds(&self, frame: &AnyView<'_>) -> bool {
        matches!((self, frame), (Pixels::U8(_), AnyView::U8(_)) | (Pixels::U16(_), AnyView::U16(_)) | (Pixels::F32(_), AnyView::F32(_)) | (Pixels::Rgba8(_), AnyView::Rgba8(_)))
    }

    fn bytes_per_pixel(&self) -> usize {
        match self {
            Pixels::U8(_) => 1,
            Pixels::U16(_) => 2,
            Pixels::F32(_) | Pixels::Rgba8(_) => 4,
        }
    }

    fn height(&self) -> usize {
        match self {
            Pixels::U8(c) => c.canvas.height(),
            Pixels::U16(c) => c.canvas.height(),
            Pixels::F32(c) => c.canvas.height(),
            Pixels::Rgba8(c) => c.canvas.height(),
        }
    }
}

impl Pasting for Compositor {
    fn paste(&mut self, i: usize, frame: &AnyView<'_>) -> Result<()> {
        Compositor::paste(self, i, frame)
    }
    fn batch(&self) -> usize {
        Compositor::batch(self)
    }
    fn paste_many(&mut self, frames: &[(usize, AnyView<'_>)]) -> Result<()> {
        Compositor::paste_many(self, frames)
    }
    fn finish(self: alloc::boxed::Box<Self>) -> Result<Canvas> {
        Ok(Compositor::finish(*self))
    }
}

/// One pixel type's canvas; `acc` / `weight` hold the weighted channel sums and weights of
/// the averaging blends (empty for `Overwrite`).
#[derive(Clone)]
struct Paste<P> {
    canvas: Image<P>,
    acc: Vec<f32>,
    weight: Vec<f32>,
}

impl<P: SynthPixel> Paste<P> {
    fn new((cw, ch): (usize, usize), blend: Blend) -> Result<Self> {
        let sums = if blend == Blend::Overwrite { 0 } else { cw * ch };
        Ok(Paste { canvas: Image::new(cw, ch)?, acc: try_filled(sums.saturating_mul(P::COLOURS), 0.0)?, weight: try_filled(sums, 0.0)? })
    }

    /// The canvas (its first row canvas row `y0`) in `bands` bands of rows, each with its
    /// weighted sums and weights (none for `Overwrite`).
    fn rows(&mut self, y0: usize, bands: usize) -> Vec<Rows<'_, P>> {
        let (cw, ch) = self.canvas.size();
        let rows = ch.div_ceil(bands.max(1)).max(1);
        let sums = !self.weight.is_empty();
        let mut acc = self.acc.chunks_mut(if sums { rows * cw * P::COLOURS } else { 1 });
        let mut weight = self.weight.chunks_mut(if sums { rows * cw } else { 1 });
        self.canvas
            .view_mut()
            .into_row_bands(rows)
            .into_iter()
            .map(|(y, canvas)| Rows { canvas, acc: acc.next().unwrap_or_default(), weight: weight.next().unwrap_or_default(), y0: y0 + y })
            .collect()
    }

    /// Pastes the frames of `placed` in order, each band of rows on a thread of `par`.
    fn paste_bands(&mut self, placed: &[Placed<'_, ImageView<'_, P>>], blend: Blend, y0: usize, bands: usize, par: Parallelism) {
        let mut rows = self.rows(y0, bands);
        map_slots(&mut rows, par, |_, band| {
            for &(f, at, turn) in placed {
                match turn {
                    Some(turn) => band.add_turned(f, at, turn, blend),
                    None => band.add(f, at, blend),
                }
            }
        });
    }

    /// The canvas, each pixel of the averaging blends its weighted mean.
    fn finish(mut self, bands: usize, par: Parallelism) -> Image<P> {
        if !self.weight.is_empty() {
            let mut rows = self.rows(0, bands);
            map_slots(&mut rows, par, |_, band| band.mean());
        }
        self.canvas
    }
}

/// Consecutive rows of a canvas being pasted into, from canvas row `y0`: their pixels and,
/// for the averaging blends, their weighted channel sums and weights (empty for
/// `Overwrite`).
struct Rows<'a, P> {
    canvas: ImageViewMut<'a, P>,
    acc: &'a mut [f32],
    weight: &'a mut [f32],
    y0: usize,
}

impl<P: SynthPixel> Rows<'_, P> {
    /// Adds frame `f` whose top-left pixel goes to canvas `(x, y)`: only the frame's rows
    /// that land here (the feather weight still counts from the frame's own edges).
    fn add(&mut self, f: ImageView<'_, P>, (x, y): (usize, usize), blend: Blend) {
        let (w, h) = f.size();
        let y0 = self.y0;
        let v0 = y0.saturating_sub(y);
        let v1 = h.min((y0 + self.canvas.height()).saturating_sub(y));
        if blend == Blend::Overwrite {
            for v in v0..v1 {
                self.canvas.row_mut(y + v - y0)[x..x + w].copy_from_slice(f.row(v));
            }
            return;
        }
        let (c, cw) = (P::COLOURS, self.canvas.width());
        for v in v0..v1 {
            let row = f.row(v);
            let wy = (v + 1).min(h - v);
            for (u, &px) in row.iter().enumerate() {
                let k = match blend {
                    Blend::Feather => (u + 1).min(w - u).min(wy) as f32,
                    _ => 1.0,
                };
                let idx = (y + v - y0) * cw + x + u;
                self.weight[idx] += k;
                for ch in 0..c {
                    self.acc[idx * c + ch] += k * px.channel(ch);
                }
            }
        }
    }

    /// Adds the turned frame `f` whose bounding box (of size `size`) has its top-left pixel
    /// at canvas `(x, y)`, `inverse` mapping canvas pixels to the frame's: every canvas pixel
    /// of the box (in these rows) whose centre the frame covers gets the frame's bilinear
    /// value there, the feather weight counted from the frame's own edges.
    fn add_turned(&mut self, f: ImageView<'_, P>, (x, y): (usize, usize), (inverse, size): (Similarity, (usize, usize)), blend: Blend) {
        let (w, h) = f.size();
        let (c, cw, y0) = (P::COLOURS, self.canvas.width(), self.y0);
        let rows = y.max(y0)..(y + size.1).min(y0 + self.canvas.height());
        let to_frame = inverse.mapping();
        for row in rows {
            for col in x..x + size.0 {
                let (u, v) = to_frame((col as f64, row as f64));
                let Some(value) = sample(f, (u, v)) else { continue };
                if blend == Blend::Overwrite {
                    self.canvas.row_mut(row - y0)[col] = P::from_channels(value);
                    continue;
                }
                let idx = (row - y0) * cw + col;
                let k = match blend {
                    Blend::Feather => ((u + 1.0).min(w as f64 - u).min(v + 1.0).min(h as f64 - v)) as f32,
                    _ => 1.0,
                };
                self.weight[idx] += k;
                for ch in 0..c {
                    self.acc[idx * c + ch] += k * value[ch];
                }
            }
        }
    }

    /// Each covered pixel's weighted mean (the averaging blends).
    fn mean(&mut self) {
        let (c, cw) = (P::COLOURS, self.canvas.width());
        for r in 0..self.canvas.height() {
            let row = self.canvas.row_mut(r);
            for (col, px) in row.iter_mut().enumerate() {
                let idx = r * cw + col;
                let k = self.weight[idx];
                if k > 0.0 {
                    let mut v = [0.0f32; 3];
                    for ch in 0..c {
                        v[ch] = self.acc[idx * c + ch] / k;
                    }
                    *px = P::from_channels(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    /// Straightforward f64 reference of the three blends for gray frames.
    fn reference(frames: &[Image<f32>], at: &[(i64, i64)], blend: Blend) -> (Vec<f64>, (usize, usize), (i64, i64)) {
        let (w, h) = frames[0].size();
        let x0 = at.iter().map(|a| a.0).min().unwrap();
        let y0 = at.iter().map(|a| a.1).min().unwrap();
        let cw = (at.iter().map(|a| a.0).max().unwrap() - x0) as usize + w;
        let ch = (at.iter().map(|a| a.1).max().unwrap() - y0) as usize + h;
        let mut out = vec![0.0; cw * ch];
        for y in 0..ch {
            for x in 0..cw {
                let (mut s, mut k, mut last) = (0.0, 0.0, None);
                for (f, a) in frames.iter().zip(at) {
                    let (u, v) = (x as i64 + x0 - a.0, y as i64 + y0 - a.1);
                    if u >= 0 && v >= 0 && (u as usize) < w && (v as usize) < h {
                        let (u, v) = (u as usize, v as usize);
                        let wt = match blend {
                            Blend::Feather => (u + 1).min(w - u).min(v + 1).min(h - v) as f64,
                            _ => 1.0,
                        };
                        s += wt * f.at(u, v) as f64;
                        k += wt;
                        last = Some(f.at(u, v) as f64);
                    }
                }
                out[y * cw + x] = match blend {
                    Blend::Overwrite => last.unwrap_or(0.0),
                    _ if k > 0.0 => s / k,
                    _ => 0.0,
                };
            }
        }
        (out, (cw, ch), (x0, y0))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn blends_match_reference(n in 1usize..4, seed in any::<u64>(), pos in proptest::collection::vec((-12.0f64..12.0, -9.0f64..9.0), 4)) {
            let mut rng = crate::stitch::SplitMix64::new(seed);
            let frames: Vec<Image<f32>> = (0..n).map(|_| Image::from_fn(9, 7, |_, _| (rng.uniform() * 100.0) as f32).unwrap()).collect();
            let views: Vec<AnyView<'_>> = frames.iter().map(|f| AnyView::F32(f.view())).collect();
            let positions: Vec<Option<(f64, f64)>> = pos[..n].iter().map(|&p| Some(p)).collect();
            let at: Vec<(i64, i64)> = pos[..n].iter().map(|p| (libm::round(p.0) as i64, libm::round(p.1) as i64)).collect();
            for blend in [Blend::Overwrite, Blend::Average, Blend::Feather] {
                let c = composite(&views, &positions, blend).unwrap();
                let (want, size, origin) = reference(&frames, &at, blend);
                prop_assert_eq!(c.origin, origin);
                let AnyImage::F32(img) = c.image else { panic!("type") };
                prop_assert_eq!(img.size(), size);
                for (g, w) in img.as_slice().iter().zip(&want) {
                    prop_assert!((*g as f64 - w).abs() < 1e-3, "{:?}: {} vs {}", blend, g, w);
                }
            }
        }
    }

    /// Turned frames against a float64 reference: every canvas pixel whose centre a frame
    /// covers takes the frame's bilinear value there (overwrite: the last such frame; the
    /// averaging blends: weighted by the distance to the frame's own edges).
    #[test]
    fn turned_frames_match_the_reference_and_strips_the_whole() {
        let mut rng = crate::stitch::SplitMix64::new(7);
        let frames: Vec<Image<f32>> = (0..3).map(|_| Image::from_fn(11, 8, |_, _| (rng.uniform() * 100.0) as f32).unwrap()).collect();
        let views: Vec<AnyView<'_>> = frames.iter().map(|f| AnyView::F32(f.view())).collect();
        let poses = [Some(Similarity::IDENTITY), Some(Similarity::about((5.0, 3.5), (4.3, 2.2), 0.4, 1.0)), Some(Similarity { x: -3.0, y: 6.0, angle: -0.25, scale: 1.1 })];
        for blend in [Blend::Overwrite, Blend::Average, Blend::Feather] {
            let mut c = Compositor::with_poses(&views[0], &poses, blend).unwrap();
            for (i, v) in views.iter().enumerate() {
                c.paste(i, v).unwrap();
            }
            let canvas = c.finish();
            let AnyImage::F32(img) = &canvas.image else { panic!() };
            let (ox, oy) = canvas.origin;
            for y in 0..img.height() {
                for x in 0..img.width() {
                    let (mut s, mut k, mut last) = (0.0, 0.0, None);
                    for (f, pose) in frames.iter().zip(&poses) {
                        let pose = pose.unwrap();
                        let (u, v) = pose.inverse().apply(((x as i64 + ox) as f64, (y as i64 + oy) as f64));
                        let (u, v) = if pose.is_translation() { (libm::round(u), libm::round(v)) } else { (u, v) };
                        if !(u >= 0.0 && v >= 0.0 && u <= 10.0 && v <= 7.0) {
                            continue;
                        }
                        let (x0, y0) = (u.floor() as usize, v.floor() as usize);
                        let (x1, y1) = ((x0 + 1).min(10), (y0 + 1).min(7));
                        let (ax, ay) = (u - x0 as f64, v - y0 as f64);
                        let at = |a: usize, b: usize| f.at(a, b) as f64;
                        let value = (1.0 - ay) * ((1.0 - ax) * at(x0, y0) + ax * at(x1, y0)) + ay * ((1.0 - ax) * at(x0, y1) + ax * at(x1, y1));
                        let w = if blend == Blend::Feather { (u + 1.0).min(11.0 - u).min(v + 1.0).min(8.0 - v) } else { 1.0 };
                        s += w * value;
                        k += w;
                        last = Some(value);
                    }
                    let want = match blend {
                        Blend::Overwrite => last.unwrap_or(0.0),
                        _ if k > 0.0 => s / k,
                        _ => 0.0,
                    };
                    assert!((img.at(x, y) as f64 - want).abs() < 1e-3, "{blend:?} ({x}, {y}): {} vs {want}", img.at(x, y));
                }
            }
            // In strips, the same rows bit for bit.
            let plan = Plan::with_poses(&views[0], &poses, MAX_CANVAS).unwrap();
            for y0 in (0..plan.size.1).step_by(3) {
                let y1 = (y0 + 3).min(plan.size.1);
                let mut strip = Compositor::rows(plan.clone(), blend, y0, y1).unwrap();
                for i in plan.frames_on_rows(y0, y1) {
                    strip.paste(i, &views[i]).unwrap();
                }
                assert!(rows_of(&strip.finish().image, 0, y1 - y0) == rows_of(&canvas.image, y0, y1), "{blend:?} rows {y0}..{y1}");
            }
        }
        // Bad poses.
        for bad in [Similarity { angle: f64::NAN, ..Similarity::IDENTITY }, Similarity { scale: 0.0, angle: 0.1, ..Similarity::IDENTITY }, Similarity { scale: f64::INFINITY, ..Similarity::IDENTITY }] {
            assert!(Plan::with_poses(&views[0], &[Some(bad)], MAX_CANVAS).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn integer_and_rgba_frames_keep_their_type() {
        let a = Image::<u16>::filled(4, 3, 1000).unwrap();
        let b = Image::<u16>::filled(4, 3, 2001).unwrap();
        let c = composite(&[AnyView::U16(a.view()), AnyView::U16(b.view())], &[Some((0.0, 0.0)), Some((2.0, 0.0))], Blend::Average).unwrap();
        let AnyImage::U16(img) = c.image else { panic!() };
        assert_eq!(img.row(0), &[1000, 1000, 1501, 1501, 2001, 2001]);
        let r = Image::<Rgba8>::filled(2, 2, Rgba8::new(10, 20, 30, 255)).unwrap();
        let c = composite(&[AnyView::Rgba8(r.view()), AnyView::Rgba8(r.view())], &[Some((0.0, 0.0)), Some((3.0, 1.0))], Blend::Feather).unwrap();
        let AnyImage::Rgba8(img) = c.image else { panic!() };
        assert_eq!(img.size(), (5, 3));
        assert_eq!(img.at(0, 0), Rgba8::new(10, 20, 30, 255));
        assert_eq!(img.at(4, 0), Rgba8::default());
        // A frame left out (None) does not count.
        let c = composite(&[AnyView::U16(a.view()), AnyView::U16(b.view())], &[None, Some((5.0, 5.0))], Blend::Overwrite).unwrap();
        assert_eq!((c.origin, c.image.size()), ((5, 5), (4, 3)));
    }

    /// Frames of `make`'s pixels at scattered positions, composited whole and in strips of
    /// every height from 1 to 9 rows: each strip equals its rows of the whole, bit for bit.
    /// A batch pasted in bands of rows, on one thread or on the pool, gives the canvas of
    /// the frames pasted one at a time, bit for bit: every type and blend, turned frames,
    /// a frame left out, bands from one to more than the rows.
    #[test]
    fn batches_pasted_in_bands_are_the_canvas_of_one_frame_at_a_time() {
        let mut rng = crate::stitch::SplitMix64::new(11);
        let f32s: Vec<Image<f32>> = (0..6).map(|_| Image::from_fn(13, 9, |_, _| (rng.uniform() * 200.0) as f32).unwrap()).collect();
        let frames: Vec<AnyImage> = f32s
            .iter()
            .flat_map(|f| {
                let grey = |scale: f32| move |x, y| f.at(x, y) * scale;
                [
                    AnyImage::U8(Image::from_fn(13, 9, |x, y| grey(1.0)(x, y) as u8).unwrap()),
                    AnyImage::U16(Image::from_fn(13, 9, |x, y| grey(300.0)(x, y) as u16).unwrap()),
                    AnyImage::F32(f.clone()),
                    AnyImage::Rgba8(Image::from_fn(13, 9, |x, y| Rgba8 { r: f.at(x, y) as u8, g: (x * 19) as u8, b: (y * 23) as u8, a: 255 }).unwrap()),
                ]
            })
            .collect();
        let poses = [
            Some(Similarity::IDENTITY),
            Some(Similarity { x: 4.0, y: 3.0, angle: 0.0, scale: 1.0 }),
            None,
            Some(Similarity::about((6.0, 4.5), (5.3, 7.2), 0.3, 1.0)),
            Some(Similarity { x: -3.0, y: 9.0, angle: 0.0, scale: 1.0 }),
            Some(Similarity { x: 2.0, y: -5.0, angle: -0.2, scale: 1.05 }),
        ];
        for ty in 0..4 {
            let views: Vec<AnyView<'_>> = (0..6).map(|i| frames[4 * i + ty].view().unwrap()).collect();
            for blend in [Blend::Overwrite, Blend::Average, Blend::Feather] {
                let mut one = Compositor::with_poses(&views[0], &poses, blend).unwrap();
                for (i, v) in views.iter().enumerate() {
                    one.paste(i, v).unwrap();
                }
                let want = one.finish();
                let rows = want.image.size().1;
                let batch: Vec<(usize, AnyView<'_>)> = views.iter().copied().enumerate().collect();
                for par in [Parallelism::Sequential, Parallelism::AllThreads] {
                    for bands in [1, 2, 3, 7, rows, rows + 5] {
                        let mut c = Compositor::with_poses(&views[0], &poses, blend).unwrap().on(par);
                        c.paste_in_bands(&batch[..2], bands).unwrap();
                        c.paste_in_bands(&batch[2..], bands).unwrap();
                        let got = c.finish_in_bands(bands);
                        assert_eq!(got.origin, want.origin);
                        assert!(rows_of(&got.image, 0, rows) == rows_of(&want.image, 0, rows), "type {ty} {blend:?} {par:?} {bands} bands");
                    }
                }
            }
        }
        // A frame of another type in a batch: nothing of the batch is pasted.
        let u8s: Vec<AnyView<'_>> = (0..6).map(|i| frames[4 * i].view().unwrap()).collect();
        let mut c = Compositor::with_poses(&u8s[0], &poses, Blend::Overwrite).unwrap().on(Parallelism::AllThreads);
        let blank = c.clone().finish();
        assert!(c.paste_many(&[(0, u8s[0]), (1, frames[5].view().unwrap())]).is_err());
        assert!(rows_of(&c.finish().image, 0, blank.image.size().1) == rows_of(&blank.image, 0, blank.image.size().1));
    }

    fn strips_equal_whole<P: crate::image::Pixel>(make: impl Fn(u64) -> Image<P>)
    where
        AnyImage: From<Image<P>>,
    {
        let frames: Vec<AnyImage> = (0..5).map(|s| AnyImage::from(make(s))).collect();
        let views: Vec<AnyView<'_>> = frames.iter().map(|f| f.view().unwrap()).collect();
        let positions = [Some((0.0, 0.0)), Some((3.4, 2.6)), None, Some((-4.0, 7.0)), Some((1.0, -3.0))];
        for blend in [Blend::Overwrite, Blend::Average, Blend::Feather] {
            let whole = composite(&views, &positions, blend).unwrap();
            let plan = Plan::with_limit(&views[0], &positions, 1 << 40).unwrap();
            assert_eq!(plan, Plan::new(&views[0], &positions).unwrap());
            let ch = plan.size.1;
            for step in 1..10 {
                for y0 in (0..ch).step_by(step) {
                    let y1 = (y0 + step).min(ch);
                    let mut c = Compositor::rows(plan.clone(), blend, y0, y1).unwrap();
                    for i in plan.frames_on_rows(y0, y1) {
                        c.paste(i, &views[i]).unwrap();
                    }
                    let strip = c.finish();
                    assert_eq!(strip.origin, (whole.origin.0, whole.origin.1 + y0 as i64));
                    let want = rows_of(&whole.image, y0, y1);
                    assert!(want == rows_of(&strip.image, 0, y1 - y0), "{blend:?} rows {y0}..{y1}");
                }
            }
        }
    }

    /// Rows `y0..y1` as raw bytes, so that f32 compares bit for bit (NaN included).
    fn rows_of(img: &AnyImage, y0: usize, y1: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for y in y0..y1 {
            match img {
                AnyImage::U8(i) => out.extend_from_slice(i.row(y)),
                AnyImage::U16(i) => out.extend(i.row(y).iter().flat_map(|v| v.to_le_bytes())),
                AnyImage::F32(i) => out.extend(i.row(y).iter().flat_map(|v| v.to_bits().to_le_bytes())),
                AnyImage::Rgba8(i) => out.extend(i.row(y).iter().flat_map(|p| p.to_array())),
                AnyImage::U32(i) => out.extend(i.row(y).iter().flat_map(|v| v.to_le_bytes())),
            }
        }
        out
    }

    #[test]
    fn strips_are_bit_identical_to_the_whole_canvas() {
        let noise = |seed: u64| {
            let mut rng = crate::stitch::SplitMix64::new(seed);
            move |_: usize, _: usize| rng.uniform()
        };
        strips_equal_whole(|s| { let mut r = noise(s); Image::from_fn(9, 7, |x, y| (r(x, y) * 255.0) as u8).unwrap() });
        strips_equal_whole(|s| { let mut r = noise(s); Image::from_fn(9, 7, |x, y| (r(x, y) * 65535.0) as u16).unwrap() });
        strips_equal_whole(|s| { let mut r = noise(s); Image::from_fn(9, 7, |x, y| (r(x, y) * 1000.0 - 300.0) as f32).unwrap() });
        strips_equal_whole(
            |s| {
                let mut r = noise(s);
                Image::from_fn(9, 7, |x, y| {
                    let v = (r(x, y) * 16_777_215.0) as u32;
                    Rgba8::new(v as u8, (v >> 8) as u8, (v >> 16) as u8, 255)
                })
                .unwrap()
            },
        );
    }

    #[test]
    fn frames_placed_after_planning_paste_as_on_a_planned_canvas() {
        let mut rng = crate::stitch::SplitMix64::new(5);
        let frames: Vec<Image<f32>> = (0..4).map(|_| Image::from_fn(9, 7, |_, _| (rng.uniform() * 100.0) as f32).unwrap()).collect();
        let views: Vec<AnyView<'_>> = frames.iter().map(|f| AnyView::F32(f.view())).collect();
        let pos = [Some((0.0, 0.0)), Some((3.4, -2.6)), None, Some((-5.5, 4.2))];
        // Planned with room from two corners only; each frame placed as it comes.
        let room = Plan::new(&views[0], &[Some((-8.0, -8.0)), Some((8.0, 8.0))]).unwrap();
        for blend in [Blend::Overwrite, Blend::Average, Blend::Feather] {
            let mut live = Compositor::rows(Plan { at: Vec::new(), turned: Vec::new(), ..room.clone() }, blend, 0, room.size.1).unwrap();
            assert!(!live.place(9, Similarity::translation((9.0, 0.0))), "past the room's right edge");
            for (i, p) in pos.iter().enumerate() {
                if let Some(p) = *p {
                    assert!(live.place(i, Similarity::translation(p)));
                    live.paste(i, &views[i]).unwrap();
                }
            }
            let (live, planned) = (live.finish(), composite(&views, &pos, blend).unwrap());
            let AnyImage::F32(whole) = live.image else { panic!() };
            let AnyImage::F32(want) = planned.image else { panic!() };
            let at = ((planned.origin.0 - live.origin.0) as usize, (planned.origin.1 - live.origin.1) as usize);
            assert_eq!(whole.view().crop(at.0, at.1, want.width(), want.height()).unwrap().to_image(), want, "{blend:?}");
        }
    }

    #[test]
    fn bad_strips_are_errors() {
        let a = Image::<u8>::filled(4, 3, 1).unwrap();
        let v = AnyView::U8(a.view());
        let pos = [Some((0.0, 0.0)), Some((100_000.0, 0.0))];
        // Too large whole, fine in strips.
        assert!(Plan::new(&v, &[Some((0.0, 0.0)), Some((100_000.0, 20_000.0))]).is_err());
        let plan = Plan::with_limit(&v, &[Some((0.0, 0.0)), Some((100_000.0, 20_000.0))], 1 << 40).unwrap();
        assert_eq!(plan.frames_on_rows(0, 10), vec![0]);
        assert!(Compositor::rows(plan.clone(), Blend::Average, 0, 16).is_ok());
        assert!(Compositor::rows(plan.clone(), Blend::Average, 0, 20_003).is_err());
        assert!(Plan::with_limit(&v, &pos, 0).is_err());
        let plan = Plan::new(&v, &pos).unwrap();
        assert!(Compositor::rows(plan.clone(), Blend::Overwrite, 2, 2).is_err());
        assert!(Compositor::rows(plan.clone(), Blend::Overwrite, 0, 4).is_err());
        let f = Image::<f32>::filled(4, 3, 1.0).unwrap();
        let mut c = Compositor::rows(plan, Blend::Overwrite, 0, 3).unwrap();
        assert!(c.paste(0, &AnyView::F32(f.view())).is_err());
        assert!(c.paste(7, &v).is_err());
    }

    #[test]
    fn bad_input_is_an_error() {
        let a = Image::<u8>::filled(4, 3, 1).unwrap();
        let b = Image::<u8>::filled(4, 4, 1).unwrap();
        let f = Image::<f32>::filled(4, 3, 1.0).unwrap();
        let v = [AnyView::U8(a.view()), AnyView::U8(a.view())];
        assert!(composite(&[], &[], Blend::Overwrite).is_err());
        assert!(composite(&v, &[Some((0.0, 0.0))], Blend::Overwrite).is_err());
        assert!(composite(&v, &[None, None], Blend::Overwrite).is_err());
        assert!(composite(&v, &[Some((f64::NAN, 0.0)), None], Blend::Overwrite).is_err());
        // The message names the frame and the coordinate out of range (x here, not y).
        let err = composite(&v, &[Some((0.0, 0.0)), Some((1e12, 112.0))], Blend::Overwrite).unwrap_err();
        let err = alloc::format!("{err}");
        assert!(err.contains("frame 1: x = 1000000000000"), "{err}");
        let err = composite(&v, &[Some((3.0, f64::INFINITY)), None], Blend::Overwrite).unwrap_err();
        let err = alloc::format!("{err}");
        assert!(err.contains("frame 0: y = inf"), "{err}");
        assert!(composite(&v, &[Some((0.0, 0.0)), Some((1e8, 1e8))], Blend::Average).is_err());
        assert!(composite(&[AnyView::U8(a.view()), AnyView::U8(b.view())], &[Some((0.0, 0.0)); 2], Blend::Overwrite).is_err());
        assert!(composite(&[AnyView::U8(a.view()), AnyView::F32(f.view())], &[Some((0.0, 0.0)); 2], Blend::Overwrite).is_err());
    }
}

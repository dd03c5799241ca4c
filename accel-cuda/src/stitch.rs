//! Drives `kernels/stitch.cu`: the composite of a stitching run on the device. The canvas
//! is planned by the core ([`Plan`]: origin, size, rounded placements), the placed frames
//! uploaded a batch at a time (into one buffer, their staging copies on several threads)
//! and pasted in sequence order, a batch of frames that lie close by one launch, and the
//! canvas downloaded once; integer canvases are the CPU's
//! [`Compositor`](tessera_core::stitch::Compositor)'s bytes.

use crate::device::{args, as_bytes, blocks, int, zeroed_vec, Arg, DevBuf, DevImage, Gpu, Pod};
use crate::kernels::{Kernel, Module};
use std::cell::Cell;
use tessera_core::image::Pixel;
use tessera_core::stitch::{Blend, Canvas, Pasting, Plan};
use tessera_core::{AnyImage, AnyView, Image, ImageView, Result, Rgba8};

/// Threads per block of the paste (a canvas row of the batch's box per block row) and
/// finish launches.
const THREADS: u32 = 256;

/// Bytes of frames a device canvas takes at once: the run holds their host copies, the
/// device their copies in one buffer. A PAL sweep's frames go [`PASTE_MOST`] at a time, a
/// 4K RGBA frame's alone.
const PASTE_BYTES: usize = 64 << 20;

/// Frames one paste launch takes at most: each of its threads looks at every one.
const PASTE_MOST: usize = 16;

/// How many times its frames' pixels a launch's box of canvas pixels may cover: frames
/// that lie apart (a grid's scan turning to its next row) are pasted by launches of their
/// own, not by one whose threads mostly find no frame.
const BOX_SLACK: usize = 2;

/// Uploads and downloads of a run's composite, for the tests.
#[derive(Default)]
pub(crate) struct PasteCounts {
    pub(crate) uploads: Cell<usize>,
    pub(crate) downloads: Cell<usize>,
}

/// A frame pixel type and its kernels.
trait CanvasPixel: Pod + Pixel {
    const PASTE: &'static str;
    const FINISH: &'static str;
    /// Colour channels the averaging blends sum (the core's `SynthPixel::COLOURS`).
    const COLOURS: usize;
    fn view<'a>(v: &AnyView<'a>) -> Option<ImageView<'a, Self>>;
    fn image(i: Image<Self>) -> AnyImage;
}

macro_rules! canvas_pixel {
    ($t:ty, $var:ident, $suffix:literal, $colours:literal) => {
        impl CanvasPixel for $t {
            const PASTE: &'static str = concat!("stitch_paste_", $suffix);
            const FINISH: &'static str = concat!("stitch_finish_", $suffix);
            const COLOURS: usize = $colours;
            fn view<'a>(v: &AnyView<'a>) -> Option<ImageView<'a, Self>> {
                if let AnyView::$var(f) = v { Some(*f) } else { None }
            }
            fn image(i: Image<Self>) -> AnyImage {
                AnyImage::$var(i)
            }
        }
    };
}
canvas_pixel!(u8, U8, "u8", 1);
canvas_pixel!(u16, U16, "u16", 1);
canvas_pixel!(f32, F32, "f32", 1);
canvas_pixel!(Rgba8, Rgba8, "rgba", 3);

/// A canvas on the device: the pixels (zero: what no frame covers) and, for the averaging
/// blends, the weighted channel sums and weights.
struct DeviceCanvas<'g, P> {
    gpu: &'g Gpu,
    plan: Plan,
    blend: Blend,
    canvas: DevImage<'g, P>,
    sums: Option<(DevBuf<'g, f32>, DevBuf<'g, f32>)>,
    counts: &'g PasteCounts,
}

/// The device canvas for frames like `like` at `positions` ([`Plan::new`], whose errors it
/// returns; device memory short: [`Error::OutOfMemory`](tessera_core::Error)).
pub(crate) fn device_canvas<'g>(gpu: &'g Gpu, like: &AnyView<'_>, positions: &[Option<(f64, f64)>], blend: Blend, counts: &'g PasteCounts) -> Result<Box<dyn Pasting + 'g>> {
    let plan = Plan::new(like, positions)?;
    Ok(match like {
        AnyView::U8(_) => Box::new(DeviceCanvas::<u8>::new(gpu, plan, blend, counts)?),
        AnyView::U16(_) => Box::new(DeviceCanvas::<u16>::new(gpu, plan, blend, counts)?),
        AnyView::F32(_) => Box::new(DeviceCanvas::<f32>::new(gpu, plan, blend, counts)?),
        AnyView::Rgba8(_) => Box::new(DeviceCanvas::<Rgba8>::new(gpu, plan, blend, counts)?),
    })
}

impl<'g, P: CanvasPixel> DeviceCanvas<'g, P> {
    fn new(gpu: &'g Gpu, plan: Plan, blend: Blend, counts: &'g PasteCounts) -> Result<Self> {
        let (cw, ch) = plan.size;
        int(cw, "canvas width")?;
        let n = cw * ch; // at most MAX_CANVAS (the plan's check)
        let canvas = DevImage { buf: gpu.zeroed::<P>(n)?, width: cw, height: ch };
        let sums = match blend {
            Blend::Overwrite => None,
            Blend::Average | Blend::Feather => Some((gpu.zeroed::<f32>(n * P::COLOURS)?, gpu.zeroed::<f32>(n)?)),
        };
        Ok(DeviceCanvas { gpu, plan, blend, canvas, sums, counts })
    }
}

impl<P: CanvasPixel> Pasting for DeviceCanvas<'_, P> {
    fn paste(&mut self, i: usize, frame: &AnyView<'_>) -> Result<()> {
        self.paste_many(&[(i, *frame)])
    }

    fn batch(&self) -> usize {
        let (w, h) = self.plan.frame_size;
        (PASTE_BYTES / (w * h * std::mem::size_of::<P>()).max(1)).clamp(1, PASTE_MOST)
    }

    /// The placed frames pasted in order, consecutive ones whose box of canvas pixels stays
    /// within [`BOX_SLACK`] times their pixels by one launch ([`paste_launch`](Self::paste_launch)).
    fn paste_many(&mut self, frames: &[(usize, AnyView<'_>)]) -> Result<()> {
        let mut placed: Vec<(ImageView<'_, P>, (usize, usize))> = Vec::with_capacity(frames.len());
        for (i, frame) in frames {
            let Some(at) = self.plan.place(*i, frame)? else { continue };
            // The plan checked the type: this is the canvas's.
            if let Some(f) = P::view(frame) {
                placed.push((f, at));
            }
        }
        let (w, h) = self.plan.frame_size;
        let mut first = 0;
        while first < placed.len() {
            let mut end = first + 1;
            let mut bounds = Bounds::of(placed[first].1, (w, h));
            while end < placed.len() && end - first < PASTE_MOST {
                let grown = bounds.with(placed[end].1, (w, h));
                if grown.area() > BOX_SLACK * (end + 1 - first) * w * h {
                    break;
                }
                (bounds, end) = (grown, end + 1);
            }
            self.paste_launch(&placed[first..end], bounds)?;
            first = end;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Canvas> {
        let (cw, ch) = self.plan.size;
        if let Some((acc, weight)) = &self.sums {
            let n = (cw * ch) as u64;
            self.gpu.launch(Kernel::new(Module::Stitch, P::FINISH), [blocks(cw * ch, THREADS), 1, 1], [THREADS, 1, 1], 0, args![&self.canvas, acc, weight, n])?;
        }
        // Written whole by the download: no pass that zeroes it first.
        let mut image = Image::from_vec(cw, ch, zeroed_vec::<P>(cw * ch)?)?;
        self.gpu.download_view(&self.canvas, image.view_mut())?;
        self.counts.downloads.set(self.counts.downloads.get() + 1);
        Ok(Canvas { image: P::image(image), origin: self.plan.origin })
    }
}

impl<P: CanvasPixel> DeviceCanvas<'_, P> {
    /// Uploads `frames` (each a frame and its top-left on the canvas, all inside `bounds`)
    /// with their places into one buffer, then pastes them in order by one launch over
    /// `bounds`.
    fn paste_launch(&self, frames: &[(ImageView<'_, P>, (usize, usize))], bounds: Bounds) -> Result<()> {
        let (w, h) = self.plan.frame_size;
        // Placements lie inside the canvas, whose width and height fit an int (the plan's
        // check: at most MAX_CANVAS pixels).
        let places: Vec<i32> = frames.iter().flat_map(|&(_, (x, y))| [x as i32, y as i32]).collect();
        let mut parts: Vec<Vec<&[u8]>> = Vec::with_capacity(frames.len() + 1);
        parts.push(vec![as_bytes(&places)]);
        for (f, _) in frames {
            parts.push(if f.stride() == w { vec![as_bytes(&f.span()[..w * h])] } else { f.rows().map(as_bytes).collect() });
        }
        let (_buffer, at) = self.gpu.upload_gathered(&parts)?;
        self.counts.uploads.set(self.counts.uploads.get() + frames.len());
        // The frames lie a whole number of pixels apart (each part starts on 16 bytes).
        let stride = match at.get(1..3) {
            Some(&[a, b]) => (b - a) / std::mem::size_of::<P>() as u64,
            _ => 0,
        };
        let blend = match self.blend {
            Blend::Overwrite => 0,
            Blend::Average => 1,
            Blend::Feather => 2,
        };
        let (acc, weight) = self.sums.as_ref().map_or((Arg::Ptr(0), Arg::Ptr(0)), |(a, k)| (Arg::from(a), Arg::from(k)));
        let (bx, by, bw, bh) = (bounds.x0 as i32, bounds.y0 as i32, bounds.x1 - bounds.x0, bounds.y1 - bounds.y0);
        let list = args![Arg::Ptr(at[0]), Arg::Ptr(at[1]), frames.len() as i32, int(w, "width")?, int(h, "height")?, stride, &self.canvas, self.canvas.width as i32, bx, by, int(bw, "paste width")?, blend, acc, weight];
        let grid = [blocks(bw, THREADS), int(bh, "paste height")? as u32, 1];
        self.gpu.launch(Kernel::new(Module::Stitch, P::PASTE), grid, [THREADS, 1, 1], 0, list)
    }
}

/// The box `[x0, x1) x [y0, y1)` of canvas pixels that frames cover.
#[derive(Clone, Copy)]
struct Bounds {
    x0: usize,
    y0: usize,
    x1: usize,
    y1: usize,
}

impl Bounds {
    /// The pixels of a frame of `size` with its top-left at `(x, y)`.
    fn of((x, y): (usize, usize), (w, h): (usize, usize)) -> Bounds {
        Bounds { x0: x, y0: y, x1: x + w, y1: y + h }
    }

    /// This box grown to hold the frame of `size` at `at` too.
    fn with(self, at: (usize, usize), size: (usize, usize)) -> Bounds {
        let o = Bounds::of(at, size);
        Bounds { x0: self.x0.min(o.x0), y0: self.y0.min(o.y0), x1: self.x1.max(o.x1), y1: self.y1.max(o.y1) }
    }

    fn area(&self) -> usize {
        (self.x1 - self.x0) * (self.y1 - self.y0)
    }
}

#[cfg(all(test, feature = "shim"))]
mod tests {
    use super::*;
    use tessera_core::stitch::{Compositor, SplitMix64};

    /// A frame of random pixels of type `ty`, every channel drawn apart.
    fn random_frame(ty: &str, (w, h): (usize, usize), rng: &mut SplitMix64) -> AnyImage {
        let mut bits = || rng.next_u64();
        match ty {
            "u8" => AnyImage::U8(Image::from_fn(w, h, |_, _| (bits() >> 56) as u8).unwrap()),
            "u16" => AnyImage::U16(Image::from_fn(w, h, |_, _| (bits() >> 48) as u16).unwrap()),
            "f32" => AnyImage::F32(Image::from_fn(w, h, |_, _| (bits() >> 40) as f32 / 65536.0).unwrap()),
            _ => AnyImage::Rgba8(Image::from_fn(w, h, |_, _| Rgba8::from_array(bits().to_le_bytes()[..4].try_into().unwrap())).unwrap()),
        }
    }

    /// The `w` x `h` top-left of `image`: a view whose rows lie apart.
    fn cropped(image: &AnyImage, (w, h): (usize, usize)) -> AnyView<'_> {
        match image.view().unwrap() {
            AnyView::U8(v) => AnyView::U8(v.crop(0, 0, w, h).unwrap()),
            AnyView::U16(v) => AnyView::U16(v.crop(0, 0, w, h).unwrap()),
            AnyView::F32(v) => AnyView::F32(v.crop(0, 0, w, h).unwrap()),
            AnyView::Rgba8(v) => AnyView::Rgba8(v.crop(0, 0, w, h).unwrap()),
        }
    }

    /// Frames that lie close (pasted by one launch), one far off and the next back (each
    /// by a launch of its own), two on the same place, one left out and one read from a
    /// wider image: the CPU compositor's canvas for every pixel type and blend, pasted all
    /// at once or one at a time.
    #[test]
    fn batched_pastes_are_the_cpu_compositors_canvas() {
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::new()), crate::transfer::StagingConfig::for_shim());
        let size = (23, 17);
        let mut rng = SplitMix64::new(11);
        let positions = [Some((0.0, 0.0)), Some((3.0, 1.0)), Some((5.0, -2.0)), Some((90.0, 60.0)), Some((6.0, 2.0)), None, Some((6.0, 2.0)), Some((-4.0, 7.0))];
        for ty in ["u8", "u16", "f32", "rgba"] {
            let images: Vec<AnyImage> = (0..positions.len()).map(|_| random_frame(ty, (size.0 + 9, size.1), &mut rng)).collect();
            let frames: Vec<(usize, AnyView<'_>)> = images.iter().map(|i| cropped(i, size)).enumerate().collect();
            for blend in [Blend::Overwrite, Blend::Average, Blend::Feather] {
                let like = frames[0].1;
                let mut cpu = Compositor::new(&like, &positions, blend).unwrap();
                for (i, f) in &frames {
                    cpu.paste(*i, f).unwrap();
                }
                let want = Box::new(cpu).finish().unwrap();
                let counts = PasteCounts::default();
                let mut at_once = device_canvas(&gpu, &like, &positions, blend, &counts).unwrap();
                assert!(at_once.batch() >= frames.len());
                at_once.paste_many(&frames).unwrap();
                let mut one_by_one = device_canvas(&gpu, &like, &positions, blend, &counts).unwrap();
                for (i, f) in &frames {
                    one_by_one.paste(*i, f).unwrap();
                }
                assert_eq!(at_once.finish().unwrap(), want, "{ty} {blend:?} at once");
                assert_eq!(one_by_one.finish().unwrap(), want, "{ty} {blend:?} one by one");
                assert_eq!(counts.uploads.get(), 14, "{ty} {blend:?}");
            }
        }
    }

    /// Consecutive frames that lie close share a launch over the canvas pixels they cover;
    /// one far off, and the frames after it, start launches of their own.
    #[test]
    fn frames_that_lie_close_share_a_launch_over_their_box() {
        let log = crate::shim::LaunchLog::default();
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::dry_run("dry run", log.clone())), crate::transfer::StagingConfig::for_shim());
        let size = (23, 17);
        let images: Vec<AnyImage> = (0..8).map(|k| AnyImage::U8(Image::filled(size.0, size.1, k as u8).unwrap())).collect();
        let frames: Vec<(usize, AnyView<'_>)> = images.iter().map(|i| i.view().unwrap()).enumerate().collect();
        let positions = [Some((0.0, 0.0)), Some((3.0, 1.0)), Some((5.0, -2.0)), Some((90.0, 60.0)), Some((6.0, 2.0)), None, Some((6.0, 2.0)), Some((-4.0, 7.0))];
        let counts = PasteCounts::default();
        let mut canvas = device_canvas(&gpu, &frames[0].1, &positions, Blend::Overwrite, &counts).unwrap();
        canvas.paste_many(&frames).unwrap();
        let grids: Vec<[u32; 3]> = log.lock().unwrap().iter().filter(|l| l.kernel.name == "stitch_paste_u8").map(|l| l.grid).collect();
        // Boxes 28 x 20 (frames 0 to 2), 23 x 17 (frame 3), 33 x 22 (frames 4, 6 and 7):
        // one block of 256 threads across each, a block row a canvas row.
        assert_eq!(grids, [[1, 20, 1], [1, 17, 1], [1, 22, 1]]);
        assert_eq!(counts.uploads.get(), 7);
    }
}

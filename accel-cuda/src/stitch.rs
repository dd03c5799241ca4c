//! Drives `kernels/stitch.cu`: the composite of a stitching run on the device. The canvas
//! is planned by the core ([`Plan`]: origin, size, rounded placements), the placed frames
//! uploaded a few at a time (their staging copies on several threads) and each pasted in
//! sequence order by one launch,
//! and the canvas downloaded once;
//! integer canvases are the CPU's [`Compositor`](tessera_core::stitch::Compositor)'s bytes.

use crate::device::{args, blocks, int, zeroed_vec, Arg, DevBuf, DevImage, Gpu, Pod};
use crate::kernels::{Kernel, Module};
use std::cell::Cell;
use tessera_core::image::Pixel;
use tessera_core::stitch::{Blend, Canvas, Pasting, Plan};
use tessera_core::{AnyImage, AnyView, Image, ImageView, Result, Rgba8};

/// Threads per block of the paste (a row of the frame per block row) and finish launches.
const THREADS: u32 = 256;

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

/// Frames a device canvas takes at once: their uploads share the transfer threads
/// ([`Gpu::upload_views`]), then each is pasted in order by its own launch.
const PASTE_BATCH: usize = 4;

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
        PASTE_BATCH
    }

    /// The placed frames uploaded together (each into a buffer of the pool, which a later
    /// upload overwrites only after the launches before it), then a launch each in order.
    fn paste_many(&mut self, frames: &[(usize, AnyView<'_>)]) -> Result<()> {
        let mut placed = Vec::with_capacity(frames.len());
        for (i, frame) in frames {
            let Some((x, y)) = self.plan.place(*i, frame)? else { continue };
            // The plan checked the type: this is the canvas's.
            if let Some(f) = P::view(frame) {
                placed.push((f, x, y));
            }
        }
        let views: Vec<ImageView<'_, P>> = placed.iter().map(|&(f, _, _)| f).collect();
        let uploaded = self.gpu.upload_views(&views)?;
        self.counts.uploads.set(self.counts.uploads.get() + uploaded.len());
        let blend = match self.blend {
            Blend::Overwrite => 0,
            Blend::Average => 1,
            Blend::Feather => 2,
        };
        let (acc, weight) = self.sums.as_ref().map_or((Arg::Ptr(0), Arg::Ptr(0)), |(a, k)| (Arg::from(a), Arg::from(k)));
        for (dframe, &(_, x, y)) in uploaded.iter().zip(&placed) {
            let (w, h) = (dframe.width, dframe.height);
            // Placements lie inside the canvas, whose width fits an int.
            let list: Vec<Arg> = args![dframe, int(w, "width")?, int(h, "height")?, &self.canvas, self.canvas.width as i32, x as i32, y as i32, blend, acc, weight].to_vec();
            let grid = [blocks(w, THREADS), int(h, "height")? as u32, 1];
            self.gpu.launch(Kernel::new(Module::Stitch, P::PASTE), grid, [THREADS, 1, 1], 0, &list)?;
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

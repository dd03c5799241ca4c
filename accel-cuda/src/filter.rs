//! Drives `kernels/filter.cu`: box sums and means, and the Gaussian blur.
//!
//! Box sums and means run in one of two designs, each costing the same per pixel whatever
//! the window:
//!
//! - fused (the default): one kernel reads the input once and writes the output once.
//!   A block owns a strip of output columns plus the window's reach on each side and a
//!   segment of rows; it keeps running column sums in registers, and per row scans them in
//!   shared memory and takes each window's sum as a difference of prefixes. The tile shape
//!   is one of [`BOX_SHAPES`]: the device's tuning table's, or `short` (or named by
//!   [`BOX_SHAPE_ENV`]).
//!   Windows too wide for a shape's strip (more than about 2000 lanes with their reach)
//!   run two-pass.
//! - two-pass: a column pass of running sums into a transposed intermediate (u32, or f64
//!   for f32), then a row pass of running sums along it.
//!
//! [`BOX_KERNEL_ENV`] (`TESSERA_BOX_KERNEL`) `= fused | two-pass` picks the design for
//! measuring one against the other; [`BOX_SHAPE_ENV`] (`TESSERA_BOX_SHAPE`) `=` a shape's
//! name fixes the fused kernel's shape. Any other value is an error.
//!
//! The FIR Gaussian runs in one of two designs with the same arithmetic (the same results,
//! bit for bit): two-pass (the built-in default), a vertical pass into an f32 image then a
//! horizontal pass; or fused, a block per output tile that keeps its rows' vertical results
//! in shared memory for the horizontal taps. [`GAUSS_FIR_ENV`] (`TESSERA_GAUSS_FIR`)
//! `= fused | two-pass` picks one over the device's tuning table.
//!
//! Exactness: u8 / u16 sums and means are the CPU backend's, bit for bit in both designs
//! (exact integer sums, the same half-up rounding). f32 sums run in f64 as on the CPU; the
//! fused kernel takes differences of a row's f64 prefix sums as the core does (over a
//! strip rather than the whole row), the two-pass one running sums: the f32 results agree
//! to within one f32 rounding of the window's sum of |x| (tested: `tests/shim/filter.rs`).

use crate::device::{args, blocks, int, line_segment, Gpu, Pod};
use crate::kernels::{Kernel, Module};
use crate::tuning::{self, Design};
use tessera_core::choice::Choice;
use tessera_core::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera_core::image::{check_same_size, Pixel};
use crate::device_image::{AnyDst, AnySrc, Dst, Src};
use tessera_core::{Border, Error, Result, Rgba8};

const fn k(name: &'static str) -> Kernel {
    Kernel::new(Module::Filter, name)
}

/// Threads per block of the one-dimensional launches.
const BLOCK: u32 = 128;

/// The kernels' border code and outside value.
pub(crate) fn border_mode(b: Border) -> (i32, f32) {
    match b {
        Border::Reflect101 => (0, 0.0),
        Border::Replicate => (1, 0.0),
        Border::Constant(v) => (2, v),
        Border::Normalize => (3, 0.0),
    }
}

fn validate(src: (usize, usize), dst: (usize, usize), p: &BoxParams, integer_max: Option<f32>) -> Result<()> {
    check_same_size(src, dst)?;
    p.window().validate()?;
    p.border.validate(integer_max)
}

/// The column pass: window sums down each lane column, into an `h x lanes` image of `A`
/// (transposed: each lane's column sums are one line).
fn column_sums<'g, T: Pod + Pixel, A: Pod>(
    gpu: &'g Gpu,
    kernel: Kernel,
    src: &crate::device::DevImage<'_, T>,
    width: usize,
    height: usize,
    channels: usize,
    p: &BoxParams,
) -> Result<crate::device::DevBuf<'g, A>> {
    let lanes = width * channels;
    let cols = gpu.buffer::<A>(lanes * height)?;
    let (mode, outside) = border_mode(p.border);
    let seg = line_segment(height, p.height);
    gpu.launch(
        kernel,
        [blocks(lanes, BLOCK), blocks(height, seg as u32), 1],
        [BLOCK, 1, 1],
        0,
        args![src, &cols, int(width, "width")?, int(height, "height")?, channels as i32, p.height as i32, mode, outside, seg as i32],
    )?;
    Ok(cols)
}

/// Runs the column pass `cols_kernel` then the row pass `rows_kernel` (whose arguments
/// carry the channel count when `rows_take_channels`) on `src`, into `dst`.
#[allow(clippy::too_many_arguments)]
fn two_passes<T: Pod + Pixel, A: Pod, O: Pod + Pixel>(
    gpu: &Gpu,
    src: Src<'_, T>,
    dst: Dst<'_, O>,
    channels: usize,
    p: &BoxParams,
    cols_kernel: Kernel,
    rows_kernel: Kernel,
    rows_take_channels: bool,
) -> Result<()> {
    let (w, h) = src.size();
    int(w * channels, "width")?;
    let hi = int(h, "height")?;
    let dsrc = src.stage(gpu)?;
    let cols = column_sums::<T, A>(gpu, cols_kernel, &dsrc, w, h, channels, p)?;
    drop(dsrc);
    let out = dst.open(gpu)?;
    let (mode, outside) = border_mode(p.border);
    let (ww, wh) = (p.width as i32, p.height as i32);
    let w32 = w as i32;
    let seg = line_segment(w, p.width);
    let grid = [blocks(h, BLOCK), blocks(w, seg as u32), channels as u32];
    let seg = seg as i32;
    if rows_take_channels {
        gpu.launch(rows_kernel, grid, [BLOCK, 1, 1], 0, args![&cols, &out.target, w32, hi, channels as i32, ww, wh, mode, outside, seg])?;
    } else {
        gpu.launch(rows_kernel, grid, [BLOCK, 1, 1], 0, args![&cols, &out.target, w32, hi, ww, wh, mode, outside, seg])?;
    }
    out.finish(gpu)
}

/// The box / mean design (tuning family `box_kernel`, `tuning.rs`): `fused` (the built-in
/// default) or `two-pass`.
pub(crate) const BOX_KERNEL: &str = "box_kernel";
/// The fused kernel's tile shape (tuning family `box_shape`): the name of one of
/// [`BOX_SHAPES`]; unset, the table's or the built-in default shape.
pub(crate) const BOX_SHAPE: &str = "box_shape";
/// Environment variable choosing the box / mean design over the device's tuning table, for
/// measuring one against the other.
pub const BOX_KERNEL_ENV: &str = "TESSERA_BOX_KERNEL";
/// Environment variable fixing the fused kernel's tile shape over the device's table.
pub const BOX_SHAPE_ENV: &str = "TESSERA_BOX_SHAPE";

/// The box / mean kernel (tuning family `box_kernel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoxKernel {
    /// The single-pass tiled kernel (the built-in default).
    Fused,
    /// The column pass then the row pass through a transposed intermediate.
    TwoPass,
}

impl Choice for BoxKernel {
    const WHAT: &'static str = "box kernel design";
    const ALL: &'static [Self] = &[BoxKernel::Fused, BoxKernel::TwoPass];
    fn name(self) -> &'static str {
        match self {
            BoxKernel::Fused => "fused",
            BoxKernel::TwoPass => "two-pass",
        }
    }
}

impl Design for BoxKernel {
    const FAMILY: &'static str = BOX_KERNEL;
}

/// Which box / mean design runs: the kernel, and the fused kernel's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoxDesign {
    /// The single-pass tiled kernel, with a shape from [`BOX_SHAPES`] (None: picked from
    /// the window).
    Fused(Option<&'static BoxShape>),
    /// The column pass then the row pass.
    TwoPass,
}

impl BoxDesign {
    /// The design named by `kernel` (`fused` or `two-pass`; None: fused) and `shape` (a
    /// fused shape's name, or None), or an error naming what is allowed.
    pub fn parse(kernel: Option<&str>, shape: Option<&str>) -> Result<BoxDesign> {
        let shape = match shape {
            None | Some("") => None,
            Some(name) => Some(BOX_SHAPES.iter().find(|s| s.name == name).ok_or_else(|| {
                let names: Vec<&str> = BOX_SHAPES.iter().map(|s| s.name).collect();
                Error::Backend(format!("{BOX_SHAPE_ENV}={name}: expected one of {}", names.join(", ")))
            })?),
        };
        Ok(match kernel.map_or(Ok(BoxKernel::Fused), BoxKernel::from_name)? {
            BoxKernel::Fused => BoxDesign::Fused(shape),
            BoxKernel::TwoPass => BoxDesign::TwoPass,
        })
    }

    /// The design chosen for `gpu`: the kernel as [`tuning::chosen`] finds it, the shape
    /// likewise (family `box_shape`; unset, picked from the window).
    pub(crate) fn chosen(gpu: &Gpu) -> Result<BoxDesign> {
        let kernel = tuning::chosen::<BoxKernel>(gpu)?;
        let shape = gpu.tuning().choice(BOX_SHAPE, "");
        BoxDesign::parse(Some(kernel.name()), Some(&shape))
    }
}

/// The FIR Gaussian's design (tuning family `gauss_fir`): `two-pass` (the built-in default)
/// or `fused`.
pub(crate) const GAUSS_FIR: &str = "gauss_fir";
/// Environment variable choosing the FIR Gaussian's design over the device's tuning table.
pub const GAUSS_FIR_ENV: &str = "TESSERA_GAUSS_FIR";
/// The fused FIR Gaussian's output tile: this many lanes (pixels x channels) wide and rows
/// tall, run by a block of [`FIR_FUSED_BLOCK`] threads.
const FIR_TILE_LANES: usize = 128;
const FIR_TILE_ROWS: usize = 16;
const FIR_FUSED_BLOCK: u32 = 256;
/// The most dynamic shared memory a fused FIR tile may take (its rows' vertical results,
/// the taps' reach included); wider kernels run two-pass.
const FIR_FUSED_SHARED: usize = 48 * 1024;

/// Which FIR Gaussian design runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirDesign {
    TwoPass,
    Fused,
}

impl Choice for FirDesign {
    const WHAT: &'static str = "FIR Gaussian design";
    const ALL: &'static [Self] = &[FirDesign::TwoPass, FirDesign::Fused];
    fn name(self) -> &'static str {
        match self {
            FirDesign::TwoPass => "two-pass",
            FirDesign::Fused => "fused",
        }
    }
}

impl Design for FirDesign {
    const FAMILY: &'static str = GAUSS_FIR;
}

/// The recursive Gaussian's design (tuning family `gauss_iir`): `line` (the built-in
/// default: a thread per line, the CPU's recursion in its order, identical to it) or
/// `blocked` (a thread per block of [`IIR_BLOCK`] samples of a line, the states between
/// blocks carried by the zero-input response; within an f32 rounding of `line`).
pub(crate) const GAUSS_IIR: &str = "gauss_iir";
/// Environment variable choosing the recursive Gaussian's design over the tuning table.
pub const GAUSS_IIR_ENV: &str = "TESSERA_GAUSS_IIR";
/// Samples of a line one thread of the `blocked` design filters (at least; more where a
/// line would have over 65 535 blocks, the grid's y limit): at 32, a 4096² image's blocks
/// are two waves over an H100's 132 SMs (`tests/occupancy.rs`).
const IIR_BLOCK: usize = 32;

/// Which recursive Gaussian design runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IirDesign {
    Line,
    Blocked,
}

impl Choice for IirDesign {
    const WHAT: &'static str = "recursive Gaussian design";
    const ALL: &'static [Self] = &[IirDesign::Line, IirDesign::Blocked];
    fn name(self) -> &'static str {
        match self {
            IirDesign::Line => "line",
            IirDesign::Blocked => "blocked",
        }
    }
}

impl Design for IirDesign {
    const FAMILY: &'static str = GAUSS_IIR;
}

/// A tile shape of the fused kernel: its kernel variant (lanes per thread and rows per
/// step, so strips of up to `256 x lanes_per_thread` lanes, the window's reach included)
/// and how tall its segments are at least.
#[derive(Debug, PartialEq, Eq)]
pub struct BoxShape {
    pub name: &'static str,
    /// Lanes (pixels x channels) of the extended strip each of 256 threads holds at most.
    pub lanes_per_thread: usize,
    /// Rows each step of the kernel (one scan barrier sequence) handles.
    pub rows_per_step: usize,
    /// Segments are at least `max(32, window height x numerator / denominator)` rows (each
    /// segment restarts its column sums at a cost of a window height of rows), and no
    /// taller than what fills every multiprocessor with `resident` blocks, unless that
    /// minimum says otherwise.
    pub segment_windows: (usize, usize),
    /// Blocks of the shape's kernels a multiprocessor holds at once (their
    /// `__launch_bounds__` minimum, met at 256 threads).
    pub resident: usize,
    /// Kernels: sum u8, sum u16, sum f32, mean u8 (any channels), mean u16, mean f32.
    kernels: [&'static str; 6],
}

/// The fused kernel's shapes: `wide` (strips of up to 2048 lanes, a row per step,
/// segments of two window heights), `narrow` (strips of up to 1024 lanes, two rows per
/// step, segments of two window heights) and `short` (as narrow, segments of half a
/// window height: more blocks for large windows, at up to twice the restart cost).
/// Picked from the window: `wide` up to a window height of 31 (for 4096 x 4096 at 63 it
/// would give fewer blocks than an H200 has multiprocessors), `short` beyond.
pub const BOX_SHAPES: [BoxShape; 3] = [
    BoxShape {
        name: "wide",
        lanes_per_thread: 8,
        rows_per_step: 1,
        segment_windows: (2, 1),
        resident: 2,
        kernels: [
            "box_fused_sum_u8_n8r1",
            "box_fused_sum_u16_n8r1",
            "box_fused_sum_f32_n8r1",
            "box_fused_mean_u8_n8r1",
            "box_fused_mean_u16_n8r1",
            "box_fused_mean_f32_n8r1",
        ],
    },
    BoxShape {
        name: "narrow",
        lanes_per_thread: 4,
        rows_per_step: 2,
        segment_windows: (2, 1),
        resident: 3,
        kernels: N4R2,
    },
    BoxShape { name: "short", lanes_per_thread: 4, rows_per_step: 2, segment_windows: (1, 2), resident: 3, kernels: N4R2 },
];

const N4R2: [&str; 6] = [
    "box_fused_sum_u8_n4r2",
    "box_fused_sum_u16_n4r2",
    "box_fused_sum_f32_n4r2",
    "box_fused_mean_u8_n4r2",
    "box_fused_mean_u16_n4r2",
    "box_fused_mean_f32_n4r2",
];

/// The shape used where neither the environment nor the device's tuning table names one:
/// `short`, the fastest of the three at every window an H200 timed (4096x4096 f32, box sum
/// kernel ms at m = 3 / 31 / 255: wide 0.267 / 0.498 / 4.072, narrow 0.203 / 0.287 / 1.908,
/// short 0.204 / 0.240 / 0.706, segments filling every resident slot).
const DEFAULT_SHAPE: &BoxShape = &BOX_SHAPES[2];

/// Threads per block of the fused kernel (at most 8 warps: its warp totals hold 8).
const FUSED_THREADS: usize = 256;

/// A launch of the fused kernel.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FusedLaunch {
    /// Output pixels per strip and rows per segment.
    pub strip: usize,
    pub seg: usize,
    pub grid: [u32; 3],
    pub threads: u32,
    /// Dynamic shared memory, bytes.
    pub shared: u32,
}

/// How a strip kernel (the fused box sums, the fused variance moments) is cut: lanes of
/// the extended strip per thread, rows per step, and segment height in windows.
pub(crate) struct Strips {
    pub lanes_per_thread: usize,
    pub rows_per_step: usize,
    /// Segments are at least `max(32, window height x numerator / denominator)` rows.
    pub segment_windows: (usize, usize),
    /// Blocks of the kernel a multiprocessor holds at once (its `__launch_bounds__` minimum).
    pub resident: usize,
}

/// A strip kernel's prefix buffers in shared memory: `planes` rows per image row (the
/// box's sums; the variance's x and x^2), each behind `lead` zeros, of `bytes` per entry.
pub(crate) struct Prefix {
    pub planes: usize,
    pub lead: usize,
    pub bytes: usize,
}

impl BoxShape {
    pub(crate) fn strips(&self) -> Strips {
        Strips { lanes_per_thread: self.lanes_per_thread, rows_per_step: self.rows_per_step, segment_windows: self.segment_windows, resident: self.resident }
    }
}

/// How a strip kernel cut as `strips` covers a `w x h` image of `c` channels for a window
/// of `win_w x win_h`, its prefix buffers as `prefix` says, on `sms` multiprocessors;
/// None where the window is too wide for the strips.
pub(crate) fn fused_launch(cut: &Strips, (w, h, c): (usize, usize, usize), (win_w, win_h): (usize, usize), prefix: &Prefix, sms: usize) -> Option<FusedLaunch> {
    let capacity = FUSED_THREADS * cut.lanes_per_thread / c;
    // Strips narrower than a warp of pixels would spend most of their loads on the reach.
    let max_strip = capacity.checked_sub(win_w - 1).filter(|&s| s >= w.min(32))?;
    // Strips of equal width (rounded up to whole warps of pixels where that fits).
    let strips = w.div_ceil(max_strip);
    let mut strip = w.div_ceil(strips);
    if strip.next_multiple_of(32) <= max_strip {
        strip = strip.next_multiple_of(32);
    }
    let strips = w.div_ceil(strip);
    let lanes = (strip.min(w) + win_w - 1) * c;
    let threads = FUSED_THREADS.min(lanes.next_multiple_of(32));
    // Segments: tall against the restart, short enough that the blocks fill every
    // multiprocessor's resident slots once (a block past them would run in a second wave,
    // alone; at two blocks a multiprocessor where three fit, an H200 ran 4096² at a quarter
    // of its warps resident).
    let (num, den) = cut.segment_windows;
    let seg_min = 32.max(win_h * num / den);
    let per_strip = (cut.resident.max(1) * sms.max(1) / strips).max(1);
    let seg_fill = h.div_ceil(per_strip);
    let seg = seg_min.max(seg_fill).max(h.div_ceil(65_535)).min(h);
    let rows = cut.rows_per_step;
    let (planes, bytes) = (prefix.planes, prefix.bytes);
    let shared = (2 * planes * rows * (lanes + prefix.lead) + planes * rows * 8) * bytes;
    Some(FusedLaunch {
        strip,
        seg,
        grid: [strips as u32, h.div_ceil(seg) as u32, 1],
        threads: threads as u32,
        shared: u32::try_from(shared).ok()?,
    })
}

/// Which of a shape's kernels: the box sum or the mean of a pixel type.
#[derive(Clone, Copy)]
enum Op {
    SumU8 = 0,
    SumU16 = 1,
    SumF32 = 2,
    MeanU8 = 3,
    MeanU16 = 4,
    MeanF32 = 5,
}

/// Runs `op` on `src` into `dst` in the given design; the fused design falls back to the
/// two passes where the window is too wide for its strips.
#[allow(clippy::too_many_arguments)]
fn box_filter<T: Pod + Pixel, A: Pod, R: Pod, O: Pod + Pixel>(
    gpu: &Gpu,
    design: BoxDesign,
    src: Src<'_, T>,
    dst: Dst<'_, O>,
    channels: usize,
    p: &BoxParams,
    op: Op,
    (cols_kernel, rows_kernel, rows_take_channels): (&'static str, &'static str, bool),
) -> Result<()> {
    if let BoxDesign::Fused(fixed) = design {
        let (w, h) = src.size();
        // A fixed shape, or the window's and then the widest strips.
        let shapes = match fixed {
            Some(s) => [s, s],
            None => [DEFAULT_SHAPE, &BOX_SHAPES[0]],
        };
        for shape in shapes {
            let prefix = Prefix { planes: 1, lead: 1, bytes: std::mem::size_of::<R>() };
            if let Some(plan) = fused_launch(&shape.strips(), (w, h, channels), (p.width, p.height), &prefix, gpu.multiprocessors()) {
                return fused::<T, O>(gpu, src, dst, channels, p, k(shape.kernels[op as usize]), &plan);
            }
        }
    }
    two_passes::<T, A, O>(gpu, src, dst, channels, p, k(cols_kernel), k(rows_kernel), rows_take_channels)
}

/// The fused kernel `kernel` launched as `plan` says.
fn fused<T: Pod + Pixel, O: Pod + Pixel>(gpu: &Gpu, src: Src<'_, T>, dst: Dst<'_, O>, channels: usize, p: &BoxParams, kernel: Kernel, plan: &FusedLaunch) -> Result<()> {
    let (w, h) = src.size();
    let wi = int(w, "width")?;
    int(w * channels, "width")?;
    let hi = int(h, "height")?;
    let dsrc = src.stage(gpu)?;
    let out = dst.open(gpu)?;
    let (mode, outside) = border_mode(p.border);
    gpu.launch(
        kernel,
        plan.grid,
        [plan.threads, 1, 1],
        plan.shared,
        args![&dsrc, &out.target, wi, hi, channels as i32, p.width as i32, p.height as i32, mode, outside, plan.strip as i32, plan.seg as i32],
    )?;
    drop(dsrc);
    out.finish(gpu)
}

/// Mean filter ([`tessera_core::filter::mean_filter`]): identical to the CPU for u8, u16
/// and RGBA; f32 within one f32 rounding of the window's sum of |x| divided by its area.
pub(crate) fn mean_filter(gpu: &Gpu, src: AnySrc<'_>, dst: AnyDst<'_>, p: &BoxParams) -> Result<()> {
    let design = BoxDesign::chosen(gpu)?;
    match (src, dst) {
        (AnySrc::U8(s), AnyDst::U8(d)) => {
            validate(s.size(), d.size(), p, Some(255.0))?;
            box_filter::<u8, u32, u32, u8>(gpu, design, s, d, 1, p, Op::MeanU8, ("box_cols_u8", "mean_rows_u8", true))
        }
        (AnySrc::U16(s), AnyDst::U16(d)) => {
            validate(s.size(), d.size(), p, Some(65535.0))?;
            box_filter::<u16, u32, u64, u16>(gpu, design, s, d, 1, p, Op::MeanU16, ("box_cols_u16", "mean_rows_u16", false))
        }
        (AnySrc::F32(s), AnyDst::F32(d)) => {
            validate(s.size(), d.size(), p, None)?;
            box_filter::<f32, f64, f64, f32>(gpu, design, s, d, 1, p, Op::MeanF32, ("box_cols_f32", "mean_rows_f32", false))
        }
        (AnySrc::Rgba8(s), AnyDst::Rgba8(d)) => {
            validate(s.size(), d.size(), p, Some(255.0))?;
            // Each channel is a lane of its own: the kernels step over whole pixels.
            box_filter::<Rgba8, u32, u32, Rgba8>(gpu, design, s, d, 4, p, Op::MeanU8, ("box_cols_u8", "mean_rows_u8", true))
        }
        _ => Err(tessera_core::backend::type_mismatch("mean filter")),
    }
}

/// Box sum ([`tessera_core::filter::box_sum`]): u8 / u16 into u32, exact and identical to
/// the CPU; f32 into f32 summed in f64 (within one f32 rounding of the CPU's).
pub(crate) fn box_sum(gpu: &Gpu, src: AnySrc<'_>, dst: AnyDst<'_>, p: &BoxParams) -> Result<()> {
    let design = BoxDesign::chosen(gpu)?;
    match (src, dst) {
        (AnySrc::U8(s), AnyDst::U32(d)) => {
            validate(s.size(), d.size(), p, Some(255.0))?;
            box_filter::<u8, u32, u32, u32>(gpu, design, s, d, 1, p, Op::SumU8, ("box_cols_u8", "box_sum_rows_u8", false))
        }
        (AnySrc::U16(s), AnyDst::U32(d)) => {
            validate(s.size(), d.size(), p, Some(65535.0))?;
            let area = p.window().area() as u64;
            if 65535 * area > u32::MAX as u64 {
                return Err(Error::OutOfRange { name: "window area", value: area as i64, min: 1, max: (u32::MAX as u64 / 65535) as i64 });
            }
            box_filter::<u16, u32, u64, u32>(gpu, design, s, d, 1, p, Op::SumU16, ("box_cols_u16", "box_sum_rows_u16", false))
        }
        (AnySrc::F32(s), AnyDst::F32(d)) => {
            validate(s.size(), d.size(), p, None)?;
            box_filter::<f32, f64, f64, f32>(gpu, design, s, d, 1, p, Op::SumF32, ("box_cols_f32", "box_sum_rows_f32", false))
        }
        _ => Err(Error::UnsupportedType { op: "box sum", types: "other than u8 -> u32, u16 -> u32 or f32 -> f32" }),
    }
}

/// Gaussian blur ([`tessera_core::filter::gaussian_blur`]): the FIR as the core computes
/// it (same weights, vertical then horizontal pass, f32 fused multiply-adds, integers
/// rounded once), within 1e-5 relative (f32) or one level (integers, where the sums land
/// within rounding of a half) of the CPU; the IIR as `gaussian_iir` on the device.
pub(crate) fn gaussian_blur(gpu: &Gpu, src: AnySrc<'_>, dst: AnyDst<'_>, p: &GaussianParams) -> Result<()> {
    let (integer_max, channels) = match (&src, &dst) {
        (AnySrc::U8(_), AnyDst::U8(_)) => (Some(255.0), 1),
        (AnySrc::U16(_), AnyDst::U16(_)) => (Some(65535.0), 1),
        (AnySrc::F32(_), AnyDst::F32(_)) => (None, 1),
        (AnySrc::Rgba8(_), AnyDst::Rgba8(_)) => (Some(255.0), 4),
        _ => return Err(tessera_core::backend::type_mismatch("gaussian blur")),
    };
    check_same_size(src.size(), dst.size())?;
    p.validate(integer_max)?;
    if p.resolved_method(channels) == GaussianMethod::Iir {
        return gaussian_iir(gpu, tuning::chosen::<IirDesign>(gpu)?, src, dst, p);
    }
    let wts = tessera_core::filter::gaussian_weights(p.sigma, p.fir_radius());
    let design = tuning::chosen::<FirDesign>(gpu)?;
    match (src, dst) {
        (AnySrc::U8(s), AnyDst::U8(d)) => fir::<u8>(gpu, design, s, d, 1, &wts, p.border, "u8"),
        (AnySrc::U16(s), AnyDst::U16(d)) => fir::<u16>(gpu, design, s, d, 1, &wts, p.border, "u16"),
        (AnySrc::F32(s), AnyDst::F32(d)) => fir::<f32>(gpu, design, s, d, 1, &wts, p.border, "f32"),
        (AnySrc::Rgba8(s), AnyDst::Rgba8(d)) => fir::<Rgba8>(gpu, design, s, d, 4, &wts, p.border, "u8"),
        _ => Err(tessera_core::backend::type_mismatch("gaussian blur")),
    }
}

/// The FIR Gaussian in `design` for pixels of `channels` lanes of kernel type `lane`.
#[allow(clippy::too_many_arguments)]
fn fir<T: Pod + Pixel>(gpu: &Gpu, design: FirDesign, src: Src<'_, T>, dst: Dst<'_, T>, channels: usize, wts: &[f32], border: Border, lane: &str) -> Result<()> {
    let (w, h) = src.size();
    let lanes = w * channels;
    int(lanes, "width")?;
    let hi = int(h, "height")?;
    let r = (wts.len() / 2) as i32;
    let (mode, outside) = border_mode(border);
    let dsrc = src.stage(gpu)?;
    let dw = gpu.upload(wts)?;
    let (cols, rows, fused) = match lane {
        "u8" => ("gauss_fir_cols_u8", "gauss_fir_rows_u8", "gauss_fir_fused_u8"),
        "u16" => ("gauss_fir_cols_u16", "gauss_fir_rows_u16", "gauss_fir_fused_u16"),
        _ => ("gauss_fir_cols_f32", "gauss_fir_rows_f32", "gauss_fir_fused_f32"),
    };
    let tile_px = (FIR_TILE_LANES / channels).max(1);
    let shared = 4 * FIR_TILE_ROWS * (tile_px + 2 * r as usize) * channels;
    if design == FirDesign::Fused && shared <= FIR_FUSED_SHARED {
        let out = dst.open(gpu)?;
        let grid = [blocks(w, tile_px as u32), blocks(h, FIR_TILE_ROWS as u32), 1];
        let a = args![&dsrc, &out.target, &dw, r, w as i32, hi, channels as i32, mode, outside, tile_px as i32, FIR_TILE_ROWS as i32];
        gpu.launch(k(fused), grid, [FIR_FUSED_BLOCK, 1, 1], shared as u32, a)?;
        return out.finish(gpu);
    }
    let tmp = gpu.buffer::<f32>(lanes * h)?;
    let grid = [blocks(lanes, BLOCK), h as u32, 1];
    let args = |a: crate::device::Arg, b: crate::device::Arg| -> Vec<crate::device::Arg> { args![a, b, &dw, r, w as i32, hi, channels as i32, mode, outside].to_vec() };
    gpu.launch(k(cols), grid, [BLOCK, 1, 1], 0, &args(crate::device::Arg::from(&dsrc), crate::device::Arg::from(&tmp)))?;
    drop(dsrc);
    let out = dst.open(gpu)?;
    gpu.launch(k(rows), grid, [BLOCK, 1, 1], 0, &args(crate::device::Arg::from(&tmp), crate::device::Arg::from(&out.target)))?;
    out.finish(gpu)
}

/// The recursive Gaussian on the device: the core's coefficients
/// ([`IirCoefficients`](tessera_core::filter::IirCoefficients)), margin and edges, the same
/// f64 recursion, no fused multiply-adds. The `line` design runs it in the core's order:
/// identical to the CPU on the shim (tested bit for bit), the same IEEE operations on the
/// GPU. The `blocked` design carries the states between blocks of a line through matrix
/// products: within an f32 rounding of it (an integer output within a level).
fn gaussian_iir(gpu: &Gpu, design: IirDesign, src: AnySrc<'_>, dst: AnyDst<'_>, p: &GaussianParams) -> Result<()> {
    match (src, dst) {
        (AnySrc::U8(s), AnyDst::U8(d)) => iir::<u8>(gpu, design, s, d, 1, p, "u8"),
        (AnySrc::U16(s), AnyDst::U16(d)) => iir::<u16>(gpu, design, s, d, 1, p, "u16"),
        (AnySrc::F32(s), AnyDst::F32(d)) => iir::<f32>(gpu, design, s, d, 1, p, "f32"),
        (AnySrc::Rgba8(s), AnyDst::Rgba8(d)) => iir::<Rgba8>(gpu, design, s, d, 4, p, "u8"),
        _ => Err(tessera_core::backend::type_mismatch("gaussian blur")),
    }
}

/// Mirrored samples added on each side of a line for reflect-101 (as the core: the
/// response beyond 4 sigma is below 1e-4 of the mass, and what lies further is replicated).
fn iir_margin(sigma: f64, border: Border) -> usize {
    if border == Border::Reflect101 {
        (4.0 * sigma).ceil() as usize + 4
    } else {
        0
    }
}

fn iir<T: Pod + Pixel>(gpu: &Gpu, design: IirDesign, src: Src<'_, T>, dst: Dst<'_, T>, channels: usize, p: &GaussianParams, lane: &str) -> Result<()> {
    let (w, h) = src.size();
    let lanes = w * channels;
    let margin = iir_margin(p.sigma, p.border);
    let (tn, hn) = (h + 2 * margin, w + 2 * margin);
    int(lanes.max(tn).max(hn * h * channels), "image size")?;
    let c = tessera_core::filter::IirCoefficients::new(p.sigma);
    let mut coef = vec![c.gain, c.a[0], c.a[1], c.a[2]];
    coef.extend(c.m.iter().flatten());
    let dcoef = gpu.upload(&coef)?;
    let (mode, outside) = border_mode(p.border);
    // Normalize divides by the filter's response to the image's indicator, D(x) D(y):
    // the same recursion on a line of ones with a zero border.
    let (inv_nx, inv_ny) = if p.border == Border::Normalize {
        (iir_inverse_ones(gpu, w, &dcoef)?, iir_inverse_ones(gpu, h, &dcoef)?)
    } else {
        (vec![1.0f32], vec![1.0f32])
    };
    let (dnx, dny) = (gpu.upload(&inv_nx)?, gpu.upload(&inv_ny)?);
    let (cols, rows, pad_cols, store) = match lane {
        "u8" => ("iir_cols_u8", "iir_rows_u8", "iir_pad_cols_u8", "iir_store_u8"),
        "u16" => ("iir_cols_u16", "iir_rows_u16", "iir_pad_cols_u16", "iir_store_u16"),
        _ => ("iir_cols_f32", "iir_rows_f32", "iir_pad_cols_f32", "iir_store_f32"),
    };
    let lines = h * channels;
    let dsrc = src.stage(gpu)?;
    let pad = gpu.buffer::<f32>(lanes * tn)?;
    let line = gpu.buffer::<f32>(lines * hn)?;
    let out = dst.open(gpu)?;
    let one = [BLOCK, 1, 1];
    match design {
        IirDesign::Line => {
            gpu.launch(k(cols), [blocks(lanes, BLOCK), 1, 1], one, 0, args![&dsrc, &pad, &dcoef, lanes as i32, h as i32, margin as i32, mode, outside])?;
            drop(dsrc);
            let a = args![&pad, &line, &out.target, &dcoef, &dnx, &dny, w as i32, h as i32, channels as i32, margin as i32, mode, outside];
            gpu.launch(k(rows), [blocks(lines, BLOCK), 1, 1], one, 0, a)?;
        }
        IirDesign::Blocked => {
            gpu.launch(k(pad_cols), [blocks(lanes * tn, BLOCK), 1, 1], one, 0, args![&dsrc, &pad, lanes as i32, h as i32, margin as i32])?;
            drop(dsrc);
            iir_blocked_passes(gpu, &pad, lanes, tn, &dcoef, &c, (mode, outside))?;
            let a = args![&pad, &line, w as i32, h as i32, channels as i32, margin as i32];
            gpu.launch(k("iir_pad_rows"), [blocks(lines * hn, BLOCK), 1, 1], one, 0, a)?;
            drop(pad);
            iir_blocked_passes(gpu, &line, lines, hn, &dcoef, &c, (mode, outside))?;
            let a = args![&line, &out.target, &dnx, &dny, w as i32, h as i32, channels as i32, margin as i32, mode];
            gpu.launch(k(store), [blocks(lines * w, BLOCK), 1, 1], one, 0, a)?;
        }
    }
    out.finish(gpu)
}

/// The causal then the anti-causal pass of the `blocked` design over `buf`'s `lines`
/// interleaved lines of `n` samples, in place.
fn iir_blocked_passes(
    gpu: &Gpu,
    buf: &crate::device::DevBuf<'_, f32>,
    lines: usize,
    n: usize,
    dcoef: &crate::device::DevBuf<'_, f64>,
    c: &tessera_core::filter::IirCoefficients,
    (mode, outside): (i32, f32),
) -> Result<()> {
    let (li, ni) = (int(lines, "lines")?, int(n, "line length")?);
    let starts = gpu.buffer::<f64>(lines * 4)?;
    for backward in [0, 1] {
        let len = n - backward as usize;
        let block = IIR_BLOCK.max(len.div_ceil(65_535));
        let count = len.div_ceil(block);
        let mut zir = zero_input_response(c, block).to_vec();
        zir.extend(zero_input_response(c, len - count.max(1).saturating_sub(1) * block));
        let dzir = gpu.upload(&zir)?;
        let ends = gpu.buffer::<f64>(count.max(1) * lines * 3)?;
        let (grid, one) = ([blocks(lines, BLOCK), count as u32, 1], [BLOCK, 1, 1]);
        let bi = block as i32;
        gpu.launch(k("iir_block_ends"), grid, one, 0, args![buf, &ends, dcoef, li, ni, backward, bi])?;
        let a = args![buf, &ends, &starts, dcoef, &dzir, li, ni, backward, bi, mode, outside];
        gpu.launch(k("iir_block_carries"), [blocks(lines, BLOCK), 1, 1], one, 0, a)?;
        gpu.launch(k("iir_block_apply"), grid, one, 0, args![buf, &ends, dcoef, li, ni, backward, bi])?;
    }
    Ok(())
}

/// The recursion's zero-input response over `steps` samples: the 3 x 3 matrix (row-major)
/// taking the states (y[t-1], y[t-2], y[t-3]) before them to those after them.
fn zero_input_response(c: &tessera_core::filter::IirCoefficients, steps: usize) -> [f64; 9] {
    let mut m = [0.0; 9];
    for j in 0..3 {
        let mut s = [0.0f64; 3];
        s[j] = 1.0;
        for _ in 0..steps {
            let v = c.a[2] * s[2] + c.a[1] * s[1] + c.a[0] * s[0];
            s = [v, s[0], s[1]];
        }
        for i in 0..3 {
            m[3 * i + j] = s[i];
        }
    }
    m
}

/// `1 / D(i)` for `i < n`: `D` the recursive filter's response to `n` ones with a zero
/// border, run by the column kernel on a one-lane image.
fn iir_inverse_ones(gpu: &Gpu, n: usize, dcoef: &crate::device::DevBuf<'_, f64>) -> Result<Vec<f32>> {
    let ones = gpu.upload(&vec![1.0f32; n])?;
    let pad = gpu.buffer::<f32>(n)?;
    let (mode, _) = border_mode(Border::Normalize);
    gpu.launch(k("iir_cols_f32"), [1, 1, 1], [32, 1, 1], 0, args![&ones, &pad, dcoef, 1, n as i32, 0, mode, 0.0f32])?;
    let mut d = vec![0.0f32; n];
    gpu.download(&pad, &mut d)?;
    Ok(d.iter().map(|v| 1.0 / v).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_shapes_fit_their_kernels_and_fill_an_h200() {
        const BOX_F64: Prefix = Prefix { planes: 1, lead: 1, bytes: 8 };
        // 4096 x 4096 f32 (f64 prefixes) on 132 multiprocessors, every window of the
        // benchmark: within the kernels' lanes, warps and 48 KiB of shared memory; the
        // default shapes give at least one block per multiprocessor.
        for m in [1, 3, 5, 9, 15, 31, 63, 127, 255] {
            for shape in &BOX_SHAPES {
                let l = fused_launch(&shape.strips(), (4096, 4096, 1), (m, m), &BOX_F64, 132).unwrap();
                let lanes = l.strip + m - 1;
                assert!(lanes <= 256 * shape.lanes_per_thread && l.threads <= 256 && l.threads % 32 == 0, "{m} {l:?}");
                assert!(l.shared <= 48 * 1024, "{m} {l:?}");
                assert!(l.grid[0] as usize * l.strip >= 4096 && l.grid[1] as usize * l.seg >= 4096, "{m} {l:?}");
                let blocks = (l.grid[0] * l.grid[1]) as usize;
                if std::ptr::eq(shape, DEFAULT_SHAPE) {
                    assert!(blocks >= 132, "{} m = {m}: {l:?}", shape.name);
                }
                // Where the restart's minimum leaves room, one wave: every resident slot
                // filled, none past them.
                if l.seg > 32.max(m * shape.segment_windows.0 / shape.segment_windows.1) {
                    let slots = shape.resident * 132;
                    assert!(blocks <= slots && 10 * blocks >= 9 * slots, "{} m = {m}: {blocks} blocks for {slots} slots, {l:?}", shape.name);
                }
            }
        }
        // RGBA with a window wider than a narrow strip's lanes: no fused launch.
        let u32s = Prefix { planes: 1, lead: 1, bytes: 4 };
        assert!(fused_launch(&BOX_SHAPES[1].strips(), (1000, 10, 4), (255, 3), &u32s, 132).is_none());
        assert!(fused_launch(&BOX_SHAPES[0].strips(), (1000, 10, 4), (255, 3), &u32s, 132).is_some());
    }

    #[test]
    fn designs_parse_and_reject_unknown_names() {
        assert_eq!(BoxDesign::parse(None, None).unwrap(), BoxDesign::Fused(None));
        assert_eq!(BoxDesign::parse(Some("two-pass"), None).unwrap(), BoxDesign::TwoPass);
        assert_eq!(BoxDesign::parse(Some("fused"), Some("narrow")).unwrap(), BoxDesign::Fused(Some(&BOX_SHAPES[1])));
        assert!(BoxDesign::parse(Some("fast"), None).is_err());
        assert!(BoxDesign::parse(None, Some("tall")).is_err());
        // The built-in default of every family is the first design it lists.
        assert_eq!((FirDesign::ALL[0], IirDesign::ALL[0], BoxKernel::ALL[0]), (FirDesign::TwoPass, IirDesign::Line, BoxKernel::Fused));
        assert_eq!(FirDesign::from_name("fused").unwrap(), FirDesign::Fused);
        assert!(IirDesign::from_name("diagonal").is_err());
    }
}

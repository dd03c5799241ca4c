//! The `gpu` suite: the figures the CUDA backend is judged by (docs/gpu.md), each with the whole
//! call's time (uploads and downloads included) and, on a GPU, the kernels' own time
//! (`kernel_ms`, CUDA events around each launch) apart:
//!
//! - the device's copy bandwidth (device-to-device, bytes read plus written), measured in
//!   the same run, and each memory-bound kernel's bandwidth as a fraction of it;
//! - the host link's bandwidth each way (256 MiB; pageable, pinned and the backend's
//!   staged transfers), and the box sum's end-to-end rate as a fraction of the pinned link;
//! - box and mean 4096x4096 f32 over m = 3..255 (flatness of kernel time in m), in both
//!   designs (`kernel`: fused, two-pass), and the fused kernel's shapes at m = 3, 31, 255
//!   (`box_sum_f32_4096_shapes`);
//! - Gaussian 4096x4096 f32, sigma 2 and 20, each implementation, and the designs of the
//!   FIR (sigma 1, 2, 4) and of the recursion (sigma 5, 20, 60);
//! - the variance paper's Figure 7 (1920x1080 u8, tent R = 63, six methods), and the
//!   recursive method's designs (two passes, fused) at tent R = 7, 63, 255;
//! - SGM 1024x440 at 128 disparities, 4 and 8 paths, and Middlebury cones / teddy with
//!   bad 1.0 beside the CPU backend's;
//! - a chain (Gaussian, then local variance and contrast) as backend calls and on device
//!   images;
//! - matrix product 4096x4096 f32;
//! - stitching a 1 000-frame PAL sequence held in memory (NPTS 8, rsz 31) and the curve of
//!   time against template size (25..255), on the backend and on the same machine's CPU
//!   backend with all its threads (the 1 000 frames on one thread too); the first 200
//!   frames on the backend in each design of its host work (`gpu_stitch_pal_host_work`:
//!   the run's thread, the pool), and in each design the 1 000 frames' wall time inside
//!   device calls and the host's share of it a pair, by step, without and with the quality
//!   measures (`gpu_stitch_pal_host_share`).

use super::stereo::{data_dir, ground_truth, rgba, synthetic};
use super::{Bench, Recorder};
use crate::stitch::default_sequence_sized;
use anyhow::Result;
use serde_json::{json, Value};
use std::ops::ControlFlow;
use tessera::choice::names;
use tessera::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera::stereo::{self, Paths, StereoParams};
use tessera::stitch::{InMemory, RegisterParams, StitchParams};
use tessera::variance::{VarianceKernel, VarianceMethod, VarianceParams};
use tessera::{open_backend, AnyView, AnyViewMut, Backend, BackendChoice, Border, Image, Parallelism};

/// Bytes a filter of `w x h` f32 pixels must move at least: its input read once, its
/// output written once.
fn image_bytes(w: usize, h: usize) -> f64 {
    2.0 * (w * h * 4) as f64
}

/// Records `name_bandwidth`: `bytes` over the case's kernel time, in GB/s and as a
/// fraction of the copy bandwidth.
fn record_bandwidth(r: &mut Recorder, name: &str, params: &Value, backend: &str, bytes: f64, copy_gb_s: Option<f64>) {
    if let Some(k) = r.kernel_ms(name, params) {
        let gb_s = bytes / (k * 1e-3) / 1e9;
        let fraction = copy_gb_s.map(|c| (gb_s / c * 1000.0).round() / 1000.0);
        r.record(&format!("{name}_bandwidth"), params.clone(), backend, json!({"gb_s": gb_s.round(), "of_copy": fraction}));
    }
}

pub fn run(b: &Bench, r: &mut Recorder) -> Result<()> {
    let name = b.backend.name();
    let cpu = open_backend(BackendChoice::Cpu, Parallelism::AllThreads)?.backend;
    let cpu_1thread = open_backend(BackendChoice::Cpu, Parallelism::Sequential)?.backend;

    // The ceiling of memory-bound kernels, measured now.
    let copy_gb_s = if name == "cuda" && r.wants("copy_bandwidth") {
        match tessera_cuda::copy_bandwidth(1 << 30, 20) {
            Ok(g) => {
                r.record("copy_bandwidth", json!({"bytes": 1u64 << 30, "reps": 20}), name, json!({"gb_s": g.round()}));
                Some(g)
            }
            Err(e) => {
                r.record("copy_bandwidth", json!({"bytes": 1u64 << 30}), name, json!({"error": e.to_string()}));
                None
            }
        }
    } else {
        None
    };

    let link = link_cases(r, name);

    // Box sum and mean, 4096x4096 f32 (1024x1024 with --quick), m = 3..255, interleaved
    // (flatness in m), in each design (`kernel`: the fused kernel with the shape each
    // window picks, and the two passes; TESSERA_BOX_KERNEL set for each series).
    let n = if b.quick { 1024 } else { 4096 };
    let big: Image<f32> = super::filters::noise_u8(n, n, 11).map(|v| v as f32);
    let mut big_out = Image::<f32>::new(n, n)?;
    let windows = [3usize, 5, 9, 15, 31, 63, 127, 255];
    let boxes: Vec<BoxParams> = windows.iter().map(|&m| BoxParams::square(m, Border::Reflect101)).collect();
    let restore = EnvRestored::save(&[tessera_cuda::BOX_KERNEL_ENV, tessera_cuda::BOX_SHAPE_ENV]);
    std::env::remove_var(tessera_cuda::BOX_SHAPE_ENV);
    for kernel in names::<tessera_cuda::BoxKernel>() {
        std::env::set_var(tessera_cuda::BOX_KERNEL_ENV, kernel);
        let params: Vec<Value> = windows.iter().map(|&m| json!({"w": n, "h": n, "m": m, "kernel": kernel})).collect();
        for series in ["box_sum_f32_4096", "mean_f32_4096"] {
            r.time_interleaved_tagged(series, &params, &json!({"kernel": kernel}), name, |i| {
                let (src, dst) = (AnyView::F32(big.view()), AnyViewMut::F32(big_out.view_mut()));
                if series.starts_with("box") {
                    b.backend.box_sum(src, dst, &boxes[i])
                } else {
                    b.backend.mean_filter(src, dst, &boxes[i])
                }
            });
            for p in &params {
                record_bandwidth(r, series, p, name, image_bytes(n, n), copy_gb_s);
            }
        }
    }
    // The fused kernel's candidate shapes (TESSERA_BOX_SHAPE), box sum at m = 3, 31, 255
    // (3 and 255 with --quick), each shape's windows interleaved.
    std::env::set_var(tessera_cuda::BOX_KERNEL_ENV, "fused");
    let shape_windows: &[usize] = if b.quick { &[3, 255] } else { &[3, 31, 255] };
    for shape in tessera_cuda::BOX_SHAPES.iter().map(|s| s.name) {
        std::env::set_var(tessera_cuda::BOX_SHAPE_ENV, shape);
        let params: Vec<Value> = shape_windows.iter().map(|&m| json!({"w": n, "h": n, "m": m, "shape": shape})).collect();
        let series = "box_sum_f32_4096_shapes";
        r.time_interleaved_tagged(series, &params, &json!({"shape": shape}), name, |i| {
            let p = BoxParams::square(shape_windows[i], Border::Reflect101);
            b.backend.box_sum(AnyView::F32(big.view()), AnyViewMut::F32(big_out.view_mut()), &p)
        });
        for p in &params {
            record_bandwidth(r, series, p, name, image_bytes(n, n), copy_gb_s);
        }
    }
    drop(restore);

    // Gaussian, 4096x4096 f32, sigma 2 and 20, the default choice and each implementation.
    for sigma in [2.0, 20.0] {
        for (method, label) in [(GaussianMethod::Auto, "auto"), (GaussianMethod::Fir, "fir"), (GaussianMethod::Iir, "iir")] {
            let p = GaussianParams { sigma, method, ..Default::default() };
            let params = json!({"w": n, "h": n, "sigma": sigma, "method": label});
            r.time("gauss_f32_4096", params.clone(), name, b.reps_for(50.0), || {
                b.backend.gaussian_blur(AnyView::F32(big.view()), AnyViewMut::F32(big_out.view_mut()), &p)
            });
            record_bandwidth(r, "gauss_f32_4096", &params, name, image_bytes(n, n), copy_gb_s);
        }
    }
    // The Gaussian's designs side by side, each design's sigmas interleaved: the FIR's
    // (TESSERA_GAUSS_FIR: the fused kernel, the two passes) at sigma 1, 2 and 4, the
    // recursion's (TESSERA_GAUSS_IIR: a thread per line, the block-parallel recursion) at
    // sigma 5, 20 and 60.
    let families = [
        ("gauss_fir_f32_4096_designs", tessera_cuda::GAUSS_FIR_ENV, names::<tessera_cuda::FirDesign>(), [1.0, 2.0, 4.0], GaussianMethod::Fir),
        ("gauss_iir_f32_4096_designs", tessera_cuda::GAUSS_IIR_ENV, names::<tessera_cuda::IirDesign>(), [5.0, 20.0, 60.0], GaussianMethod::Iir),
    ];
    for (series, env, designs, sigmas, method) in families {
        let _restore = EnvRestored::save(&[env]);
        for design in designs {
            std::env::set_var(env, design);
            let params: Vec<Value> = sigmas.iter().map(|&sigma| json!({"w": n, "h": n, "sigma": sigma, "design": design})).collect();
            r.time_interleaved_tagged(series, &params, &json!({"design": design}), name, |i| {
                let p = GaussianParams { sigma: sigmas[i], method, ..Default::default() };
                b.backend.gaussian_blur(AnyView::F32(big.view()), AnyViewMut::F32(big_out.view_mut()), &p)
            });
            for p in &params {
                record_bandwidth(r, series, p, name, image_bytes(n, n), copy_gb_s);
            }
        }
    }

    // Matrix product 4096x4096 f32 (2 n^3 operations).
    if r.wants("matmul_f32_4096") {
        let a: Image<f32> = super::filters::noise_u8(n, n, 3).map(|v| v as f32 / 255.0);
        let c: Image<f32> = super::filters::noise_u8(n, n, 4).map(|v| v as f32 / 255.0);
        let params = json!({"n": n});
        r.time("matmul_f32_4096", params.clone(), name, b.reps_for(200.0).min(9), || b.backend.mat_mul(a.view(), c.view(), big_out.view_mut()));
        if let Some(k) = r.kernel_ms("matmul_f32_4096", &params) {
            r.record("matmul_f32_4096_tflops", params, name, json!(((2.0 * (n as f64).powi(3) / (k * 1e-3) / 1e12) * 100.0).round() / 100.0));
        }
    }
    drop(big);

    // The variance paper's Figure 7: 1920x1080 u8, tent R = 63 (R = 15 and 480x270 with
    // --quick), six methods.
    let (w, h, radius) = if b.quick { (480, 270, 15) } else { (1920, 1080, 63) };
    let scene = super::variance::scene_u8(w, h, 7);
    let mut var_out = Image::<f32>::new(w, h)?;
    for m in VarianceMethod::ALL {
        let p = VarianceParams::new(m, VarianceKernel::Tent { radius });
        let params = json!({"w": w, "h": h, "radius": radius, "kernel": "tent", "type": "u8"});
        r.time(&format!("gpu_fig7_{}", m.name()), params, name, b.reps_for(5.0), || {
            b.backend.local_variance(AnyView::U8(scene.view()), var_out.view_mut(), &p)
        });
    }

    // The kernel moments' designs (TESSERA_VARIANCE_KERNEL: the two passes, the fused
    // kernel), recursive variance of the same scene at tent R = 7, 63 and 255 (7 and 15
    // with --quick), each design's radii interleaved.
    let radii: &[usize] = if b.quick { &[7, 15] } else { &[7, 63, 255] };
    let restore = EnvRestored::save(&[tessera_cuda::VARIANCE_KERNEL_ENV]);
    for design in names::<tessera_cuda::MomentsDesign>() {
        std::env::set_var(tessera_cuda::VARIANCE_KERNEL_ENV, design);
        let params: Vec<Value> = radii.iter().map(|&radius| json!({"w": w, "h": h, "radius": radius, "kernel": "tent", "type": "u8", "design": design})).collect();
        r.time_interleaved_tagged("variance_u8_designs", &params, &json!({"design": design}), name, |i| {
            let p = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius: radii[i] });
            b.backend.local_variance(AnyView::U8(scene.view()), var_out.view_mut(), &p)
        });
    }
    drop(restore);

    link_fraction(r, name, n, link);
    chain_cases(b, r)?;
    stereo_cases(b, r, cpu.as_ref())?;
    stitch_cases(b, r, cpu.as_ref(), cpu_1thread.as_ref())?;
    Ok(())
}

/// Environment variables put back as they were when dropped: the kernel designs a series
/// sets for itself (`TESSERA_<FAMILY>`) do not outlive it.
struct EnvRestored(Vec<(&'static str, Option<std::ffi::OsString>)>);

impl EnvRestored {
    fn save(vars: &[&'static str]) -> Self {
        EnvRestored(vars.iter().map(|&v| (v, std::env::var_os(v))).collect())
    }
}

impl Drop for EnvRestored {
    fn drop(&mut self) {
        for (var, value) in &self.0 {
            match value {
                Some(v) => std::env::set_var(var, v),
                None => std::env::remove_var(var),
            }
        }
    }
}

/// Bytes of each host link measurement.
const LINK_BYTES: usize = 256 << 20;

/// `h2d_bandwidth` and `d2h_bandwidth` with `memory` pageable (the driver's copies from an
/// ordinary allocation), pinned (one page-locked buffer, one copy: the link itself) and
/// staged (the backend's transfers from an ordinary allocation through pinned chunks), 256
/// MiB, medians of 10; measured also when only the box sum runs, for its link fraction.
/// Returns the pinned figures, when measured.
fn link_cases(r: &mut Recorder, name: &str) -> Option<tessera_cuda::LinkBandwidth> {
    let wanted = ["h2d_bandwidth", "d2h_bandwidth", "box_sum_f32_4096"].iter().any(|c| r.wants(c));
    if name != "cuda" || !wanted {
        return None;
    }
    let reps = 10;
    let mut pinned = None;
    for (memory, label) in [(tessera_cuda::HostMemory::Pageable, "pageable"), (tessera_cuda::HostMemory::Pinned, "pinned"), (tessera_cuda::HostMemory::Staged, "staged")] {
        let params = json!({"bytes": LINK_BYTES, "memory": label, "reps": reps});
        match tessera_cuda::link_bandwidth(memory, LINK_BYTES, reps) {
            Ok(l) => {
                r.record("h2d_bandwidth", params.clone(), name, json!({"gb_s": round1(l.h2d_gb_s)}));
                r.record("d2h_bandwidth", params, name, json!({"gb_s": round1(l.d2h_gb_s)}));
                if memory == tessera_cuda::HostMemory::Pinned {
                    pinned = Some(l);
                }
            }
            Err(e) => {
                r.record("h2d_bandwidth", params.clone(), name, json!({"error": e.to_string()}));
                r.record("d2h_bandwidth", params, name, json!({"error": e.to_string()}));
            }
        }
    }
    pinned
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// `box_4096_f32_end_to_end_link_fraction`: the time the box sum m = 3's input and output
/// take over the pinned link (input at the host-to-device rate, output at the
/// device-to-host rate, one after the other) over its end-to-end median: 1 where the whole
/// call runs at the link's speed.
fn link_fraction(r: &mut Recorder, name: &str, n: usize, link: Option<tessera_cuda::LinkBandwidth>) {
    let params = json!({"w": n, "h": n, "m": 3usize, "kernel": "fused"});
    let (Some(link), Some(ms)) = (link, r.median_ms("box_sum_f32_4096", &params)) else { return };
    let bytes = (n * n * 4) as f64;
    let link_ms = (bytes / (link.h2d_gb_s * 1e9) + bytes / (link.d2h_gb_s * 1e9)) * 1e3;
    let gb_s = 2.0 * bytes / (ms * 1e-3) / 1e9;
    r.record(
        "box_4096_f32_end_to_end_link_fraction",
        params,
        name,
        json!({"fraction": (link_ms / ms * 1000.0).round() / 1000.0, "end_to_end_gb_s": round1(gb_s), "link_ms": (link_ms * 1e3).round() / 1e3, "end_to_end_ms": ms}),
    );
}

/// A chain on one image, 1920x1080 (480x270 with --quick), u8 and f32: a Gaussian (sigma 2),
/// then the local variance (tent, R 15) and contrast enhancement of the blurred image.
/// `path`: `calls`, three backend calls (each uploads its input and downloads its output:
/// three uploads, three downloads); on CUDA also `device`, the same operations on device
/// images (one upload, two downloads), interleaved with `calls`.
fn chain_cases(b: &Bench, r: &mut Recorder) -> Result<()> {
    let name = b.backend.name();
    if !r.wants("chain_1080p") {
        return Ok(());
    }
    let (w, h) = if b.quick { (480, 270) } else { (1920, 1080) };
    let scene = super::variance::scene_u8(w, h, 5);
    let gauss = GaussianParams { sigma: 2.0, ..Default::default() };
    let var = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius: 15 });
    let contrast = tessera::ContrastParams::default();
    let cuda = if name == "cuda" { Some(tessera::cuda::open_cuda()?) } else { None };
    let paths: &[&str] = if cuda.is_some() { &["calls", "device"] } else { &["calls"] };
    fn run<T>(b: &Bench, cuda: Option<&tessera::cuda::CudaBackend>, src: &Image<T>, device: bool, ops: (&GaussianParams, &VarianceParams, &tessera::ContrastParams)) -> tessera::Result<()>
    where
        T: tessera::cuda::DevicePixel + Default,
        for<'a> tessera::ImageView<'a, T>: Into<AnyView<'a>>,
        for<'a> tessera::ImageViewMut<'a, T>: Into<AnyViewMut<'a>>,
        for<'a, 'd> &'a tessera::cuda::DeviceImage<'d, T>: Into<tessera::cuda::DeviceSrc<'a, 'd>>,
        for<'a, 'd> &'a mut tessera::cuda::DeviceImage<'d, T>: Into<tessera::cuda::DeviceDst<'a, 'd>>,
    {
        let (w, h) = src.size();
        let (mut variance, mut enhanced) = (Image::<f32>::new(w, h)?, Image::<T>::new(w, h)?);
        match cuda {
            Some(c) if device => {
                let up = c.upload(src.view())?;
                let mut blurred = c.device_image::<T>(w, h)?;
                c.gaussian_blur_on_device(&up, &mut blurred, ops.0)?;
                let mut v = c.device_image::<f32>(w, h)?;
                c.local_variance_on_device(&blurred, &mut v, ops.1)?;
                let mut e = c.device_image::<T>(w, h)?;
                c.contrast_enhance_on_device(&blurred, &mut e, ops.2)?;
                c.download(&v, variance.view_mut())?;
                c.download(&e, enhanced.view_mut())
            }
            _ => {
                let mut blurred = Image::<T>::new(w, h)?;
                b.backend.gaussian_blur(src.view().into(), blurred.view_mut().into(), ops.0)?;
                b.backend.local_variance(blurred.view().into(), variance.view_mut(), ops.1)?;
                b.backend.contrast_enhance(blurred.view().into(), enhanced.view_mut().into(), ops.2)
            }
        }
    }
    let scene_f32: Image<f32> = scene.map(|v| v as f32);
    for ty in ["u8", "f32"] {
        let params: Vec<Value> = paths.iter().map(|p| json!({"w": w, "h": h, "type": ty, "sigma": 2.0, "radius": 15, "path": p})).collect();
        r.time_interleaved_tagged("chain_1080p", &params, &json!({"type": ty}), name, |i| {
            let device = paths[i] == "device";
            let ops = (&gauss, &var, &contrast);
            match ty {
                "u8" => run(b, cuda.as_ref(), &scene, device, ops),
                _ => run(b, cuda.as_ref(), &scene_f32, device, ops),
            }
        });
    }
    Ok(())
}

/// SGM: the synthetic 1024x440 pair at 128 disparities (4 and 8 paths, no refinement), and
/// cones / teddy with the default parameters, bad 1.0 of the backend beside the CPU's.
fn stereo_cases(b: &Bench, r: &mut Recorder, cpu: &dyn Backend) -> Result<()> {
    let name = b.backend.name();
    let base = StereoParams::default();
    let (sl, sr) = synthetic(1024, 440, 128)?;
    let mut disp = Image::<f32>::new(1024, 440)?;
    for (paths, label) in [(Paths::Four, "4path"), (Paths::Eight, "8path")] {
        let p = StereoParams { max_disparity: 128, paths, lr_check: false, median: false, fill: false, ..base };
        let params = json!({"w": 1024, "h": 440, "max_disp": 128, "paths": label});
        r.time("gpu_stereo_synth1024x440", params, name, b.reps_for(20.0), || {
            b.backend.stereo_sgm(AnyView::U8(sl.view()), AnyView::U8(sr.view()), disp.view_mut(), &p).map(|_| ())
        });
    }
    let dir = data_dir();
    for (scene, left, right, truth) in [("cones", "cones/im2.png", "cones/im6.png", "cones/disp2.png"), ("teddy", "teddy/im2.png", "teddy/im6.png", "teddy/disp2.pgm")] {
        let case = format!("gpu_stereo_{scene}");
        if !r.wants(&case) {
            continue;
        }
        let (l, rr, gt) = (rgba(&dir.join(left))?, rgba(&dir.join(right))?, ground_truth(&dir.join(truth))?);
        let (w, h) = l.size();
        for (paths, label) in [(Paths::Four, "4path"), (Paths::Eight, "8path")] {
            let p = StereoParams { paths, ..base };
            let mut scores = Vec::new();
            for be in [b.backend.as_ref(), cpu] {
                let mut d = Image::<f32>::new(w, h)?;
                be.stereo_sgm(AnyView::Rgba8(l.view()), AnyView::Rgba8(rr.view()), d.view_mut(), &p)?;
                scores.push((stereo::evaluate(d.view(), gt.view())?.bad1_all * 1000.0).round() / 1000.0);
            }
            let params = json!({"w": w, "h": h, "max_disp": p.max_disparity, "paths": label, "bad1_percent": scores[0], "cpu_bad1_percent": scores[1]});
            let mut d = Image::<f32>::new(w, h)?;
            r.time(&case, params, name, b.reps_for(10.0), || b.backend.stereo_sgm(AnyView::Rgba8(l.view()), AnyView::Rgba8(rr.view()), d.view_mut(), &p).map(|_| ()));
        }
    }
    Ok(())
}

/// The stitch `gpu_stitch_pal` times: `frames` PAL frames of the demo sweep as u8 luma,
/// and its parameters (NPTS 8, rsz 31, no quality measures).
pub(super) fn pal_stitch_case(frames: usize) -> Result<(Vec<Image<u8>>, StitchParams)> {
    let seq = default_sequence_sized(frames, (720, 576), 1)?;
    let luma = seq.frames.iter().map(|f| f.convert()).collect();
    Ok((luma, StitchParams { register: RegisterParams { rsz: 31, npts: 8, ..Default::default() }, quality: false, ..Default::default() }))
}

/// `gpu_stitch_pal_host_share`: where a device stitch of `views` spends its wall time, in
/// each design of its host work, one run each: inside device calls, and the rest, the
/// host's own work with the device idle, a pair (`host_us_per_pair`), and that by step
/// (`host_steps_us_per_pair`: the registrar's steps, and the core's own work). That rest
/// bounds the pairs a second however fast the device is: 20 000 a second leave 50 us a pair.
/// Each design is run as `p` asks (`quality` false: the stitch that `gpu_stitch_pal` times)
/// and with the quality measures too (the command line's default): a window's keyframe
/// links are refined on the pool beside its quality call, and with no call to wait on,
/// with the device idle, so the two shares differ by what the links cost the host
/// (`keyframes`: the frames others registered against, each after the first with its link).
fn host_share(r: &mut Recorder, views: &[AnyView<'_>], p: &StitchParams) -> Result<()> {
    let cuda = tessera::cuda::open_cuda()?;
    let _restore = EnvRestored::save(&[tessera_cuda::STITCH_HOST_WORK_ENV]);
    let pairs = views.len().saturating_sub(1).max(1) as f64;
    let tenths = |x: f64| (x * 10.0).round() / 10.0;
    let with_quality = StitchParams { quality: true, ..*p };
    for p in [p, &with_quality] {
        for design in names::<tessera_cuda::StitchHostWork>() {
            std::env::set_var(tessera_cuda::STITCH_HOST_WORK_ENV, design);
            let (pano, counts) = cuda.stitch_counted(&InMemory(views), p, &mut |_| ControlFlow::Continue(()))?;
            let params = json!({"w": 720, "h": 576, "frames": views.len(), "rsz": p.register.rsz, "npts": p.register.npts, "design": design, "quality": p.quality});
            let per_pair = |seconds: f64| json!(tenths(1e6 * seconds / pairs));
            let mut steps: serde_json::Map<String, Value> = counts.host_steps.parts().iter().map(|&(name, t)| (name.to_string(), per_pair(t))).collect();
            steps.insert("core".into(), per_pair(counts.core_seconds()));
            r.record(
                "gpu_stitch_pal_host_share",
                params,
                "cuda",
                json!({
                    "host_us_per_pair": tenths(1e6 * counts.host_seconds() / pairs),
                    "host_steps_us_per_pair": steps,
                    "device_ms": tenths(1e3 * counts.device_seconds),
                    "run_ms": tenths(1e3 * counts.run_seconds),
                    "registered": pano.frames.iter().filter(|f| f.is_ok()).count(),
                    "keyframes": pano.keyframes().len(),
                }),
            );
        }
    }
    Ok(())
}

/// Stitching a 1 000-frame PAL sequence held in memory (NPTS 8, rsz 31) on the backend, on
/// the CPU backend with all threads and on one (`cpu-1thread`: what the machine's cores
/// give the CPU), and time against template size on the backend and the CPU with all threads.
fn stitch_cases(b: &Bench, r: &mut Recorder, cpu: &dyn Backend, cpu_1thread: &dyn Backend) -> Result<()> {
    let (frames, curve_frames) = if b.quick { (20, 5) } else { (1000, 21) };
    if r.wants("gpu_stitch_pal") || r.wants("gpu_template_size_curve") {
        let (luma, p) = pal_stitch_case(frames)?;
        let views: Vec<AnyView<'_>> = luma.iter().map(|f| AnyView::U8(f.view())).collect();
        let pairs = (frames - 1) as f64;
        for (be, label) in [(b.backend.as_ref(), b.backend.name()), (cpu, cpu.name()), (cpu_1thread, "cpu-1thread")] {
            let params = json!({"w": 720, "h": 576, "frames": frames, "rsz": 31, "npts": 8});
            let mut registered = 0;
            let ms = r.time("gpu_stitch_pal", params.clone(), label, 3, || {
                let pano = be.stitch(&InMemory(&views), &p, &mut |_| ControlFlow::Continue(()))?;
                registered = pano.frames.iter().filter(|f| f.is_ok()).count();
                Ok::<_, tessera::Error>(())
            });
            if let Some(ms) = ms {
                r.record("gpu_stitch_pal_pairs_per_s", params, label, json!({"pairs_per_s": (1000.0 * pairs / ms).round(), "registered": registered}));
            }
        }
        // Where the device stitch does each pair's host work (TESSERA_STITCH_HOST_WORK: the
        // run's thread, or a pair to each of the pool's threads), each design timed on the
        // sequence's first 200 frames: the choice depends on the host's cores.
        if b.backend.name() != cpu.name() && r.wants("gpu_stitch_pal_host_work") {
            let _restore = EnvRestored::save(&[tessera_cuda::STITCH_HOST_WORK_ENV]);
            let part = &views[..views.len().min(200)];
            for design in names::<tessera_cuda::StitchHostWork>() {
                std::env::set_var(tessera_cuda::STITCH_HOST_WORK_ENV, design);
                let params = json!({"w": 720, "h": 576, "frames": part.len(), "rsz": 31, "npts": 8, "design": design});
                r.time("gpu_stitch_pal_host_work", params, b.backend.name(), 3, || b.backend.stitch(&InMemory(part), &p, &mut |_| ControlFlow::Continue(())).map(|_| ()));
            }
        }
        if b.backend.name() != cpu.name() && r.wants("gpu_stitch_pal_host_share") {
            host_share(r, &views, &p)?;
        }
        let short = &views[..curve_frames.min(views.len())];
        let n = (short.len() - 1) as f64;
        for rsz in [25usize, 31, 63, 95, 127, 191, 255] {
            let p = StitchParams { register: RegisterParams { rsz, ..Default::default() }, quality: false, ..Default::default() };
            for be in [b.backend.as_ref(), cpu] {
                let params = json!({"w": 720, "h": 576, "rsz": rsz, "npts": 6, "pairs": n});
                if let Some(ms) = r.time("gpu_template_size_curve", params.clone(), be.name(), 3, || be.stitch(&InMemory(short), &p, &mut |_| ControlFlow::Continue(())).map(|_| ())) {
                    r.record("gpu_template_size_curve_ms_per_pair", params, be.name(), json!((ms / n * 1e4).round() / 1e4));
                }
            }
        }
    }
    Ok(())
}

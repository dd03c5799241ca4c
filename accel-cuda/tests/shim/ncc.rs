//! `kernels/ncc.cu` on the CPU shim against the CPU backend: pair registration of frames cut
//! from a real photograph (Middlebury cones) with known shifts, every pixel type and search
//! method, equal to the CPU's registration (integers exactly: shift, vectors, coefficients,
//! evaluation counts); flat pairs, no overlap, bad parameters and mixed types as the CPU.
//! Stitching on the device (`mod stitching`): the CPU's records and panorama for every type
//! and blend, each frame uploaded once to register, several pairs per launch on smooth
//! footage, and skipped, unreadable and odd-sized frames and turns as the CPU.

use crate::common;

use common::shared_data;
use tessera_core::stitch::{PairRegistration, RegisterParams, SearchMethod, SkipReason};
use tessera_core::{AnyImage, AnyView, Backend, CpuBackend, Image, Parallelism, Rgba8};


fn cones() -> Image<Rgba8> {
    let rgb = image::open(shared_data().join("stereo/cones/im2.png")).unwrap().to_rgba8();
    Image::from_fn(rgb.width() as usize, rgb.height() as usize, |x, y| {
        let p = rgb.get_pixel(x as u32, y as u32).0;
        Rgba8::new(p[0], p[1], p[2], 255)
    })
    .unwrap()
}

/// The cones image in the four frame types.
fn typed(rgba: &Image<Rgba8>) -> [AnyImage; 4] {
    let g: Image<u8> = Image::from_fn(rgba.width(), rgba.height(), |x, y| rgba.at(x, y).luma()).unwrap();
    [AnyImage::U8(g.clone()), AnyImage::U16(g.map(|v| v as u16 * 257)), AnyImage::F32(g.map(|v| v as f32 / 4.0)), AnyImage::Rgba8(rgba.clone())]
}

fn crop(img: &AnyImage, x: usize, y: usize, w: usize, h: usize) -> AnyView<'_> {
    match img {
        AnyImage::U8(i) => AnyView::U8(i.view().crop(x, y, w, h).unwrap()),
        AnyImage::U16(i) => AnyView::U16(i.view().crop(x, y, w, h).unwrap()),
        AnyImage::F32(i) => AnyView::F32(i.view().crop(x, y, w, h).unwrap()),
        AnyImage::Rgba8(i) => AnyView::Rgba8(i.view().crop(x, y, w, h).unwrap()),
        _ => unreachable!(),
    }
}

#[test]
fn registrations_of_every_type_and_method_are_the_cpus() {
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let all = cones();
    // Moving pixel (u, v) shows reference pixel (u + 7, v - 4).
    let (x0, y0, w, h) = (150, 100, 120, 96);
    let images = typed(&all);
    let methods = [SearchMethod::Log, SearchMethod::LogPlain, SearchMethod::Exhaustive];
    // Type x method x subpixel: the pairwise subset by default, all 24 under `--full`.
    for case in common::cases(&[images.len(), methods.len(), 2]) {
        let (img, method, subpixel) = (&images[case[0]], methods[case[1]], case[2] == 0);
        let reference = crop(img, x0, y0, w, h);
        let moving = crop(img, x0 + 7, y0 - 4, w, h);
        let ty = reference.type_name();
        let min_variance = if ty == "u16" { 4.0 * 257.0 * 257.0 } else { 4.0 };
        let p = RegisterParams { rsz: 15, npts: 3, search_radius: 10, min_variance, method, subpixel, ..Default::default() };
        let want = cpu.register_pair(reference, moving, &p, (0.0, 0.0)).unwrap();
        let got = gpu.register_pair(reference, moving, &p, (0.0, 0.0)).unwrap();
        assert_the_cpus(&got, &want, ty, &format!("{ty} {method:?} subpixel {subpixel}"));
    }
    for img in &images {
        let reference = crop(img, x0, y0, w, h);
        let moving = crop(img, x0 + 7, y0 - 4, w, h);
        let min_variance = if reference.type_name() == "u16" { 4.0 * 257.0 * 257.0 } else { 4.0 };
        // A prediction that leaves no overlap, and a flat pair, are skipped as on the CPU.
        let p = RegisterParams { rsz: 15, npts: 3, search_radius: 10, min_variance, ..Default::default() };
        let far = gpu.register_pair(reference, moving, &p, (1e6, 0.0)).unwrap();
        assert_eq!(far.skip, Some(SkipReason::NoOverlap));
        let flat = AnyImage::like(&reference).unwrap();
        let r = gpu.register_pair(flat.view().unwrap(), flat.view().unwrap(), &p, (0.0, 0.0)).unwrap();
        assert_eq!(r, cpu.register_pair(flat.view().unwrap(), flat.view().unwrap(), &p, (0.0, 0.0)).unwrap());
        assert_eq!(r.skip, Some(SkipReason::NoTexture));
    }
}

/// The device's registration of the pair whose moving pixel (u, v) shows reference pixel
/// (u + 7, v - 4) is the CPU's: identical for integer frames; for f32, the same vectors
/// and evaluations, coefficients within 1e-6.
fn assert_the_cpus(got: &PairRegistration, want: &PairRegistration, ty: &str, what: &str) {
    let s = got.shift.unwrap_or_else(|| panic!("{what}: not registered: {:?}", got.skip));
    assert!((s.0 - 7.0).abs() <= 0.2 && (s.1 + 4.0).abs() <= 0.2, "{what}: {s:?}");
    if ty == "f32" {
        assert_eq!((got.vectors_used, got.evaluations), (want.vectors_used, want.evaluations), "{what}");
        let (a, b) = (got.shift.unwrap(), want.shift.unwrap());
        assert!((a.0 - b.0).abs() < 1e-3 && (a.1 - b.1).abs() < 1e-3, "{what}: {a:?} vs {b:?}");
        for (g, c) in got.vectors.iter().zip(&want.vectors) {
            assert!((g.coefficient - c.coefficient).abs() < 1e-6, "{what}: {} vs {}", g.coefficient, c.coefficient);
        }
    } else {
        assert_eq!(got, want, "{what}");
    }
}

/// Templates of a warp's width and wider (a lane's pixels then lie in one column, or
/// wrap past the template's row within a step), and a search too wide for its cache's
/// bitmap in shared memory, register as on the CPU, every type.
#[test]
fn wide_templates_and_wide_searches_are_the_cpus() {
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let all = cones();
    for img in &typed(&all) {
        // A search radius of 160 (in the whole image): the search caches' bitmaps too large
        // for a block's shared memory, kept in global memory instead.
        for (rsz, search_radius) in [(32, 8), (33, 8), (45, 8), (15, 160)] {
            let (x0, y0, w, h) = if search_radius > 100 { (0, 4, 443, 371) } else { (150, 100, 120, 96) };
            let reference = crop(img, x0, y0, w, h);
            let moving = crop(img, x0 + 7, y0 - 4, w, h);
            let ty = reference.type_name();
            let min_variance = if ty == "u16" { 4.0 * 257.0 * 257.0 } else { 4.0 };
            let p = RegisterParams { rsz, npts: 2, search_radius, min_variance, ..Default::default() };
            let want = cpu.register_pair(reference, moving, &p, (0.0, 0.0)).unwrap();
            let got = gpu.register_pair(reference, moving, &p, (0.0, 0.0)).unwrap();
            assert_the_cpus(&got, &want, ty, &format!("{ty} rsz {rsz} radius {search_radius}"));
        }
    }
}

#[test]
fn bad_input_is_the_cpus_error() {
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let a = Image::<u8>::from_fn(60, 50, |x, y| (x * 7 + y * 3) as u8).unwrap();
    let b = Image::<u8>::new(60, 49).unwrap();
    let f = Image::<f32>::new(60, 50).unwrap();
    let p = RegisterParams::default();
    let cases: Vec<(AnyView<'_>, AnyView<'_>, RegisterParams, (f64, f64))> = vec![
        (AnyView::U8(a.view()), AnyView::U8(b.view()), p, (0.0, 0.0)),
        (AnyView::U8(a.view()), AnyView::F32(f.view()), p, (0.0, 0.0)),
        (AnyView::U8(a.view()), AnyView::U8(a.view()), RegisterParams { rsz: 1, ..p }, (0.0, 0.0)),
        (AnyView::U8(a.view()), AnyView::U8(a.view()), RegisterParams { cthresh: 2.0, ..p }, (0.0, 0.0)),
        (AnyView::U8(a.view()), AnyView::U8(a.view()), p, (f64::NAN, 0.0)),
    ];
    for (r, m, p, pred) in cases {
        let want = cpu.register_pair(r, m, &p, pred);
        assert!(want.is_err());
        // (Debug text: an error holding NaN is not equal to itself.)
        assert_eq!(format!("{:?}", gpu.register_pair(r, m, &p, pred)), format!("{want:?}"));
    }
    let mut nan = Image::<f32>::from_fn(60, 50, |x, y| (x + y) as f32).unwrap();
    nan.view_mut().row_mut(3)[4] = f32::NAN;
    let p = RegisterParams { rsz: 9, npts: 2, search_radius: 4, ..p };
    assert_eq!(gpu.register_pair(AnyView::F32(nan.view()), AnyView::F32(nan.view()), &p, (0.0, 0.0)).is_err(), cpu.register_pair(AnyView::F32(nan.view()), AnyView::F32(nan.view()), &p, (0.0, 0.0)).is_err());
}

#[test]
fn stitching_a_sequence_cut_from_cones_gives_the_cpus_panorama() {
    use std::ops::ControlFlow;
    use tessera_core::stitch::{synth_sequence, SynthParams};
    use tessera_core::stitch::{InMemory, StitchParams};
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let g: Image<u8> = { let c = cones(); Image::from_fn(c.width(), c.height(), |x, y| c.at(x, y).luma()).unwrap() };
    let sp = SynthParams { frame_width: 112, frame_height: 88, frames: 4, seed: 5, ..Default::default() };
    let seq = synth_sequence(g.view(), &sp, Parallelism::Sequential).unwrap();
    let p = StitchParams { register: RegisterParams { rsz: 15, npts: 3, search_radius: 12, ..Default::default() }, ..Default::default() };
    let as_type = |ty: usize| -> Vec<AnyImage> {
        seq.frames
            .iter()
            .map(|f| match ty {
                0 => AnyImage::U8(f.clone()),
                1 => AnyImage::U16(f.map(|v| v as u16 * 257)),
                _ => AnyImage::Rgba8(f.map(|v| Rgba8::new(v, v, v, 255))),
            })
            .collect()
    };
    for ty in 0..3 {
        let mut frames = as_type(ty);
        let p = if ty == 1 { StitchParams { register: RegisterParams { min_variance: 4.0 * 257.0 * 257.0, ..p.register }, ..p } } else { p };
        // A frame of another size in the middle is skipped, as on the CPU.
        frames.insert(2, AnyImage::U8(Image::new(10, 10).unwrap()));
        let views: Vec<AnyView<'_>> = frames.iter().map(|f| f.view().unwrap()).collect();
        let want = cpu.stitch(&InMemory(&views), &p, &mut |_| ControlFlow::Continue(())).unwrap();
        let got = gpu.stitch(&InMemory(&views), &p, &mut |_| ControlFlow::Continue(())).unwrap();
        assert!(got.frames.iter().filter(|f| f.position.is_some()).count() >= 3, "type {ty}: {:?}", got.frames);
        assert_eq!(got, want, "type {ty}");
        let cancelled = gpu.stitch(&InMemory(&views), &p, &mut |done| if done >= 2 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) });
        assert!(matches!(cancelled, Err(tessera_core::Error::Cancelled)), "{cancelled:?}");
    }
}

mod stitching {
    use super::*;
    use std::cell::RefCell;
    use std::ops::ControlFlow;
    use tessera_core::stitch::SynthParams;
    use tessera_core::stitch::{Blend, Frame, FrameSource, InMemory, StitchParams};

    fn go_on(_: usize) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    fn cones_gray() -> Image<u8> {
        let c = cones();
        Image::from_fn(c.width(), c.height(), |x, y| c.at(x, y).luma()).unwrap()
    }

    /// Small templates and search areas: the shim runs every warp on threads.
    fn params(ty: &str, blend: Blend, keyframe_shift: f64) -> StitchParams {
        let min_variance = if ty == "u16" { 4.0 * 257.0 * 257.0 } else { 4.0 };
        StitchParams { register: RegisterParams { rsz: 15, npts: 3, search_radius: 12, min_variance, ..Default::default() }, blend, keyframe_shift, ..Default::default() }
    }

    fn as_type(f: &Image<u8>, ty: &str) -> AnyImage {
        match ty {
            "u8" => AnyImage::U8(f.clone()),
            "u16" => AnyImage::U16(f.map(|v| v as u16 * 257)),
            "f32" => AnyImage::F32(f.map(|v| v as f32 / 4.0)),
            _ => AnyImage::Rgba8(f.map(|v| Rgba8::new(v, 255 - v, v / 2, 255))),
        }
    }

    /// Frames "read from disk": owned copies, some unreadable, counting the reads.
    struct Disk {
        frames: Vec<Option<AnyImage>>,
        reads: RefCell<Vec<usize>>,
    }

    impl FrameSource for Disk {
        fn len(&self) -> usize {
            self.frames.len()
        }
        fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
            self.reads.borrow_mut()[i] += 1;
            self.frames[i].clone().map(Frame::Image).ok_or_else(|| "truncated file".into())
        }
    }

    /// `f` of the start of a long synthetic sweep over cones (smooth motion, nearly constant
    /// velocity), 112 x 88 frames.
    fn with_sweep<R>(seed: u64, f: impl FnOnce(&tessera_core::stitch::SynthPlan<'_, u8>) -> R) -> R {
        let g = cones_gray();
        f(&tessera_core::stitch::synth_plan(g.view(), &small_sweep(seed)).unwrap())
    }

    /// A sweep of small frames (112 x 88) over the photograph.
    fn small_sweep(seed: u64) -> SynthParams {
        SynthParams { frame_width: 112, frame_height: 88, frames: 400, seed, ..Default::default() }
    }

    /// The first `n` frames of a source.
    struct First<'s>(&'s dyn FrameSource, usize);

    impl FrameSource for First<'_> {
        fn len(&self) -> usize {
            self.1
        }
        fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
            self.0.frame(i)
        }
    }

    #[test]
    fn smooth_footage_uploads_each_frame_once_and_batches_pairs() {
        let cpu = CpuBackend::new(Parallelism::Sequential);
        let n = 16;
        with_sweep(5, |plan| for keyframe_shift in [0.25, 0.0] {
            let source = First(plan, n);
            let p = params("u8", Blend::Overwrite, keyframe_shift);
            let want = cpu.stitch(&source, &p, &mut go_on).unwrap();
            let (got, counts) = tessera_cuda::shim_stitch_counted(&source, &p, &mut go_on).unwrap();
            eprintln!("keyframe shift {keyframe_shift}: {counts:?}");
            assert!(want.frames.iter().all(|f| f.is_ok()), "{:?}", want.frames);
            assert_eq!(got, want, "keyframe shift {keyframe_shift}");
            assert_eq!(counts.uploads, vec![1; n], "each frame uploaded once to register");
            // Every registered pair's quality measures summed on the device (the panoramas
            // are equal: the CPU's values to the bit); a keyframe's link, refined on the whole
            // overlap, is measured again.
            assert!(want.frames.iter().skip(1).all(|f| f.quality.is_some() && f.quality_grid.is_some()));
            assert!(counts.quality_pairs >= n - 1, "{counts:?}");
            // A window's pairs summed in one launch, whatever the host's threads; a
            // keyframe's link measured again has a launch of its own.
            let again = counts.quality_pairs - (n - 1);
            assert!(2 * counts.quality_launches.saturating_sub(again) <= n - 1, "{counts:?}");
            assert_eq!((counts.paste_uploads, counts.canvas_downloads), (n, 1));
            // The buffer pool serves the windows' searches, whose sizes vary with their
            // textured templates (an exact-size pool made 58 allocations here).
            assert!(counts.allocations < 3 * n, "{counts:?}");
            // n - 1 pairs; most answered by launches that registered several.
            assert_eq!(counts.pairs, n - 1);
            assert!(counts.launches * 3 <= counts.pairs, "{counts:?}");
            // Each window's planned pairs are the requests the run makes: on smooth footage
            // no pair is registered that the run did not ask for.
            assert_eq!(counts.registered, counts.pairs, "{counts:?}");
        });
    }

    /// A backend's counted stitch reports the run's own time: the device calls of an
    /// earlier run on the same backend are not counted again, and the run's time splits into
    /// device calls and the host's rest.
    #[test]
    fn a_counted_stitch_splits_its_own_runs_time_between_device_and_host() {
        let cpu = CpuBackend::new(Parallelism::Sequential);
        let gpu = tessera_cuda::open_shim_cuda();
        let p = params("u8", Blend::Overwrite, 0.25);
        with_sweep(5, |plan| {
            let (long, short) = (First(plan, 10), First(plan, 2));
            let (first, before) = gpu.stitch_counted(&long, &p, &mut go_on).unwrap();
            let (second, counts) = gpu.stitch_counted(&short, &p, &mut go_on).unwrap();
            assert_eq!(first, cpu.stitch(&long, &p, &mut go_on).unwrap());
            assert_eq!(second, cpu.stitch(&short, &p, &mut go_on).unwrap());
            for c in [&before, &counts] {
                assert!(c.device_seconds > 0.0 && c.device_seconds <= c.run_seconds, "{c:?}");
                assert!((c.host_seconds() - (c.run_seconds - c.device_seconds)).abs() < 1e-12, "{c:?}");
                // The host's share by step: each step measured, none negative, their sum
                // within the host's share (the rest the core's own work).
                let s = &c.host_steps;
                assert!(s.parts().iter().all(|&(_, t)| t >= 0.0) && s.plans > 0.0 && s.conclusions > 0.0 && s.composite > 0.0, "{c:?}");
                assert!(s.total() <= c.host_seconds() + 1e-6, "{c:?}");
                assert!((c.core_seconds() - (c.host_seconds() - s.total()).max(0.0)).abs() < 1e-12, "{c:?}");
            }
            // One pair against nine: the first run's device time is not the second's.
            assert!(counts.device_seconds < before.device_seconds, "{before:?} then {counts:?}");
            assert_eq!((counts.pairs, counts.paste_uploads), (1, 2), "{counts:?}");
        });
    }

    #[test]
    fn each_host_work_design_gives_the_cpus_panorama() {
        use tessera_cuda::StitchHostWork;
        let cpu = CpuBackend::new(Parallelism::Sequential);
        let n = 12;
        with_sweep(7, |plan| {
            let source = First(plan, n);
            let p = params("u8", Blend::Overwrite, 0.25);
            let want = cpu.stitch(&source, &p, &mut go_on).unwrap();
            assert!(want.frames.iter().all(|f| f.is_ok()), "{:?}", want.frames);
            for design in ["run-thread", "pool"] {
                let gpu = tessera_cuda::open_shim_design::<StitchHostWork>(design).unwrap();
                assert_eq!(gpu.stitch(&source, &p, &mut go_on).unwrap(), want, "{design}");
            }
        });
        assert!(tessera_cuda::open_shim_design::<StitchHostWork>("every-core").is_err());
    }

    /// Where a device stitching run's time goes, printed (by hand: `--ignored --nocapture`):
    /// the run's wall time, the time inside device calls (here the shim's emulation), and
    /// the host's rest (a pair's share in the run, and the device's start and teardown, once
    /// a run) beside the CPU backend's whole run on one thread. Small frames and
    /// templates: 112 x 88, rsz 15, NPTS 3, radius 12.
    #[test]
    #[ignore]
    fn host_time_of_a_sweep() {
        host_time(40, &small_sweep(5), &params("u8", Blend::Overwrite, 0.25));
    }

    /// [`host_time_of_a_sweep`] on PAL frames (720 x 576, the photograph magnified three
    /// times) with the GPU's stitching case: rsz 31, NPTS 8, radius 32. 40 frames, or
    /// `TESSERA_HOST_TIME_FRAMES` (at most 400). The share a pair depends on the length: a
    /// run's first windows are short and its first device calls set things up once; past
    /// frame 100 the sweep makes keyframes, whose links are refined on the whole overlap on
    /// the host (both frames smoothed, a Gauss-Newton solve over the overlap's patches), and
    /// more of its later pairs have vectors that disagree, which the similarity consensus
    /// then searches.
    #[test]
    #[ignore]
    fn host_time_of_a_pal_sweep() {
        host_time(pal_sweep_frames(), &pal_sweep(), &pal_sweep_params());
    }

    /// [`host_time_of_a_pal_sweep`] without the quality measures, as the device benchmark's
    /// stitch (`gpu_stitch_pal`) runs: the keyframes' links, refined on the pool beside a
    /// window's quality call where it makes one, are then refined with the device idle.
    #[test]
    #[ignore]
    fn host_time_of_a_pal_sweep_without_quality_measures() {
        host_time(pal_sweep_frames(), &pal_sweep(), &StitchParams { quality: false, ..pal_sweep_params() });
    }

    /// The frames [`host_time_of_a_pal_sweep`] stitches: 40, or `TESSERA_HOST_TIME_FRAMES`.
    fn pal_sweep_frames() -> usize {
        std::env::var("TESSERA_HOST_TIME_FRAMES").map_or(40, |n| n.parse::<usize>().expect("TESSERA_HOST_TIME_FRAMES: a frame count").clamp(2, pal_sweep().frames))
    }

    /// [`host_time_of_a_pal_sweep`]'s sweep: PAL frames, the photograph magnified three times.
    fn pal_sweep() -> SynthParams {
        SynthParams { zoom: 3.0, frames: 400, seed: 5, ..Default::default() }
    }

    /// The GPU's stitching case: rsz 31, NPTS 8, radius 32.
    fn pal_sweep_params() -> StitchParams {
        StitchParams { register: RegisterParams { rsz: 31, npts: 8, ..Default::default() }, keyframe_shift: 0.25, ..Default::default() }
    }

    /// The PAL sweep's pairs whose vectors disagree search a similarity consensus of some
    /// hundreds of hypotheses over some tens of vectors, whose sets are counted on the
    /// device: every such pair of a launch in one more launch, and the panorama is the CPU's.
    #[test]
    fn similarity_consensuses_of_a_launch_are_counted_in_one_launch() {
        let n = 12;
        let held = held_frames(n, &pal_sweep());
        let views: Vec<AnyView<'_>> = held.iter().map(|f| AnyView::U8(f.view())).collect();
        let source = InMemory(&views);
        let p = pal_sweep_params();
        let want = CpuBackend::new(Parallelism::Sequential).stitch(&source, &p, &mut go_on).unwrap();
        let (got, counts) = tessera_cuda::shim_stitch_counted(&source, &p, &mut go_on).unwrap();
        assert_eq!(got, want);
        assert!(want.frames.iter().all(|f| f.is_ok()), "{:?}", want.frames);
        assert!(counts.consensus_pairs >= 1, "{counts:?}");
        assert!(counts.consensus_launches <= counts.launches, "{counts:?}");
    }

    /// The first `n` frames of the sequence `sp` of the cones photograph, made first and held
    /// in memory: making a synthetic frame costs more than its registration, and is the
    /// source's work, not the stitch's.
    fn held_frames(n: usize, sp: &SynthParams) -> Vec<Image<u8>> {
        let g = cones_gray();
        let plan = tessera_core::stitch::synth_plan(g.view(), sp).unwrap();
        (0..n)
            .map(|i| match FrameSource::frame(&plan, i).unwrap().view().unwrap() {
                AnyView::U8(v) => v.to_image(),
                other => panic!("a grey sweep gave a {} frame", other.type_name()),
            })
            .collect()
    }

    /// The first `n` frames of the sequence `sp` of the cones photograph, stitched on the
    /// shim with `p` and timed (see [`host_time_of_a_sweep`]).
    fn host_time(n: usize, sp: &SynthParams, p: &StitchParams) {
        let cpu = CpuBackend::new(Parallelism::Sequential);
        let held = held_frames(n, sp);
        let views: Vec<AnyView<'_>> = held.iter().map(|f| AnyView::U8(f.view())).collect();
        let source = InMemory(&views);
        // The host's thread pool started first, as the command line does before it reads a
        // frame: a process's one start, not a pair's work.
        Parallelism::AllThreads.start().unwrap();
        let t = std::time::Instant::now();
        let (got, counts) = tessera_cuda::shim_stitch_counted(&source, p, &mut go_on).unwrap();
        let total = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let want = cpu.stitch(&source, p, &mut go_on).unwrap();
        let cpu_s = t.elapsed().as_secs_f64();
        assert_eq!(got, want);
        assert!(want.frames.iter().all(|f| f.is_ok()), "{:?}", want.frames);
        let host = total - counts.device_seconds;
        let in_run = counts.host_seconds();
        let us = |t: f64| 1e6 * t / (n - 1) as f64;
        let steps: Vec<String> = counts.host_steps.parts().iter().map(|&(name, t)| format!("{name} {:.1}", us(t))).collect();
        eprintln!("the run's host share a pair, us: {}, the core's own work {:.1}; {} keyframes", steps.join(", "), us(counts.core_seconds()), got.keyframes().len());
        eprintln!(
            "{n} frames {}x{}: {total:.3} s, device calls {:.3} s, host {host:.4} s ({:.3} ms a pair; in the run {:.3} ms a pair, the device's start and teardown {:.2} ms); CPU backend, one thread: {:.3} ms a pair; {counts:?}",
            sp.frame_width,
            sp.frame_height,
            counts.device_seconds,
            1e3 * host / (n - 1) as f64,
            1e3 * in_run / (n - 1) as f64,
            1e3 * (total - counts.run_seconds),
            1e3 * cpu_s / (n - 1) as f64
        );
    }

    /// Small enough for ThreadSanitizer (scripts/test runs the `registrations` of this
    /// file under it): a launch of several pairs and the averaging paste.
    #[test]
    fn speculative_registrations_of_a_short_sweep_are_the_cpus() {
        let cpu = CpuBackend::new(Parallelism::Sequential);
        let p = params("u8", Blend::Feather, 0.25);
        let (got, want, counts) = with_sweep(5, |plan| {
            let source = First(plan, 5);
            let (got, counts) = tessera_cuda::shim_stitch_counted(&source, &p, &mut go_on).unwrap();
            (got, cpu.stitch(&source, &p, &mut go_on).unwrap(), counts)
        });
        assert_eq!(got, want);
        assert!(counts.launches < counts.pairs, "{counts:?}");
    }

    #[test]
    fn skips_bad_frames_and_turns_give_the_cpus_result_reading_each_frame_as_often() {
        let cpu = CpuBackend::new(Parallelism::Sequential);
        let g = cones_gray();
        // Whole-pixel crops along a path that turns twice.
        let mut at = vec![(150usize, 120usize)];
        for k in 0..15 {
            let (x, y) = at[k];
            at.push(match k {
                0..=4 => (x + 4, y + 1),
                5..=9 => (x - 3, y + 2),
                _ => (x + 1, y - 3),
            });
        }
        let crops: Vec<Image<u8>> = at.iter().map(|&(x, y)| Image::from_fn(112, 88, |u, v| g.at(x + u, y + v)).unwrap()).collect();
        let mut rng = tessera_core::stitch::SplitMix64::new(7);
        let noise = Image::from_fn(112, 88, |_, _| (rng.next_u64() >> 56) as u8).unwrap();
        for (ty, keyframe_shift, blend) in [("u8", 0.25, Blend::Feather), ("rgba", 0.0, Blend::Overwrite)] {
            let mut frames: Vec<Option<AnyImage>> = crops.iter().map(|f| Some(as_type(f, ty))).collect();
            frames[4] = Some(as_type(&Image::filled(112, 88, 90).unwrap(), ty));
            frames[9] = Some(as_type(&noise, ty));
            frames[12] = None;
            frames[14] = Some(as_type(&Image::filled(60, 88, 90).unwrap(), ty));
            let p = params("u8", blend, keyframe_shift);
            let disk = |frames: &[Option<AnyImage>]| Disk { frames: frames.to_vec(), reads: RefCell::new(vec![0; frames.len()]) };
            let (on_cpu, on_shim) = (disk(&frames), disk(&frames));
            let want = cpu.stitch(&on_cpu, &p, &mut go_on).unwrap();
            let (got, counts) = tessera_cuda::shim_stitch_counted(&on_shim, &p, &mut go_on).unwrap();
            let what = format!("{ty}, keyframe shift {keyframe_shift}");
            eprintln!("{what}: {counts:?}");
            for i in [4, 9, 12, 14] {
                assert!(want.frames[i].skip.is_some(), "{what}: frame {i}: {:?}", want.frames[i]);
            }
            assert_eq!(want.frames.iter().filter(|f| f.is_ok()).count(), 12, "{what}");
            assert_eq!(got, want, "{what}");
            assert_eq!(*on_shim.reads.borrow(), *on_cpu.reads.borrow(), "{what}: reads");
            // Frames that registered or were tried are uploaded once; the unreadable
            // and the odd-sized one never.
            for (i, &n) in counts.uploads.iter().enumerate() {
                assert!(n <= 1 && (n == 1 || [12, 14].contains(&i)), "{what}: frame {i} uploaded {n} times: {counts:?}");
            }
            assert_eq!((counts.paste_uploads, counts.canvas_downloads), (12, 1), "{what}");
        }
    }

    #[test]
    fn device_composites_of_every_type_and_blend_are_the_cpus() {
        let cpu = CpuBackend::new(Parallelism::Sequential);
        let gray: Vec<Image<u8>> = with_sweep(9, |plan| (0..6).map(|i| plan.frame(i).unwrap()).collect());
        let (types, blends) = (["u16", "f32", "rgba", "u8"], [Blend::Average, Blend::Feather, Blend::Overwrite]);
        // A stitch takes seconds on the shim: by default each type and each blend once
        // (every paste kernel), all 12 under `--full`.
        let coverage = if common::full() { common::Coverage::Full } else { common::Coverage::Each };
        for case in common::cases_at(&[types.len(), blends.len()], coverage) {
            let (ty, blend) = (types[case[0]], blends[case[1]]);
            let frames: Vec<AnyImage> = gray.iter().map(|f| as_type(f, ty)).collect();
            let views: Vec<AnyView<'_>> = frames.iter().map(|f| f.view().unwrap()).collect();
            let p = params(ty, blend, 0.25);
            let want = cpu.stitch(&InMemory(&views), &p, &mut go_on).unwrap();
            let got = tessera_cuda::open_shim().stitch(&InMemory(&views), &p, &mut go_on).unwrap();
            let what = format!("{ty} {blend:?}");
            assert!(want.frames.iter().all(|f| f.is_ok()), "{what}");
            if ty == "f32" {
                for (a, b) in got.frames.iter().zip(&want.frames) {
                    let (a, b) = (a.position.unwrap(), b.position.unwrap());
                    assert!((a.0 - b.0).abs() < 1e-3 && (a.1 - b.1).abs() < 1e-3, "{what}: {a:?} vs {b:?}");
                }
                // The same whole-pixel placements: the same arithmetic, the same canvas.
                assert_eq!(got.canvas, want.canvas, "{what}");
            } else {
                assert_eq!(got, want, "{what}");
            }
        }
    }
}

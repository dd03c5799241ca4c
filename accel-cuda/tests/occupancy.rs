//! The occupancy check: every kernel launch of the GPU benchmarks' headline cases, with the
//! launch shape its driver chooses (the shim poses as an H200 with its tuning table and
//! records the launches without running them) and the registers and static shared memory
//! ptxas gives the kernel for sm_90 (NVRTC), has at least half of an H100 SM's warp slots
//! resident and at least two waves of blocks over its 132 SMs, or a stated reason why not.
//!
//! NVRTC must be installed for this test to mean anything (as for `nvrtc_compile.rs`).

mod common;

use common::kernel_matches;
use std::collections::HashMap;
use tessera_core::filter::{BoxParams, GaussianParams};
use tessera_core::stereo::{Paths, StereoParams};
use tessera_core::variance::{VarianceKernel, VarianceMethod, VarianceParams};
use tessera_core::{AnyView, AnyViewMut, Backend, Border, Image};
use tessera_cuda::kernels::Module;
use tessera_cuda::nvrtc::{self, KernelResources};
use tessera_cuda::occupancy::H100;

/// Kernels below half occupancy or two waves at the benchmark sizes, and why that is so (a
/// `*` in a name stands for any text). A kernel missing its marks without a reason here
/// fails the test; a reason no launch needs fails it too.
const REASONS: &[(&str, &str)] = &[
    (
        "box_fused_*",
        "a block per strip of columns and segment of rows: 395 blocks at 4096², one wave of the \
         3 per SM its 80 registers allow (four lanes' running column sums and buffer places a \
         thread; 198 at m = 255, whose segments are at least half a window tall); more segments \
         would each restart m rows, and a second wave would run nearly empty. Measured faster \
         than the two passes on the H200 (tuning table), latency-bound by ncu; the design to \
         replace it scans several rows at once with fewer registers",
    ),
    (
        "iir_block_carries",
        "the `blocked` design carries each line's state from block to block: a thread per line, \
         128 small 3 x 3 products each at 4096² (0.02 waves, microseconds); the blocks' own passes \
         (iir_block_ends, iir_block_apply) run a thread per block of 32 samples",
    ),
    (
        "moments_fused_*",
        "a block per strip of columns and segment of rows: 170 blocks at 1080p, r = 63 (5 strips of \
         384 outputs reading 510 lanes, segments of 32 rows) and 3 per SM at 80 registers (the tent's \
         running sums of two lanes a thread), under one wave; narrower strips each read 2r more \
         lanes and shorter segments each restart 2r + 2 rows. Measured 2.5x faster than the two \
         passes on the H200 (tuning family variance_kernel), which that device's table chooses",
    ),
    (
        "stereo_aggregate_k*",
        "the path recursion runs along each path: a warp per path, 2 928 paths for 4 directions of \
         1024x440 (732 blocks of 4 warps); each lane already holds 4 of the 128 disparities",
    ),
    (
        "stereo_wta_k*",
        "a grid-stride loop over pixels, sized to one resident wave (132 SMs x 6 blocks of 256 at \
         its 40 registers): more waves would only queue blocks behind it",
    ),
    ("stereo_census", "a thread per pixel: 1024x440 pixels are 1.67 waves of 256-thread blocks at full occupancy"),
    ("stereo_median_stitch", "a thread per pixel: 1024x440 pixels are 1.67 waves of 256-thread blocks at full occupancy"),
    ("stereo_count_valid", "a thread per pixel: 1024x440 pixels are 1.67 waves of 256-thread blocks at full occupancy"),
];

/// The benchmarks' headline cases (`tessera bench gpu`), each an operation on a backend.
type Case = (String, Box<dyn Fn(&dyn Backend) -> tessera_core::Result<()>>);

fn cases() -> Vec<Case> {
    let n = 4096;
    let square = move |seed: u32| Image::from_fn(n, n, move |x, y| ((x * 7 + y * 13 + seed as usize) % 251) as f32).unwrap();
    let mut cases: Vec<Case> = Vec::new();
    for m in [3usize, 31, 255] {
        cases.push((
            format!("box sum 4096² f32, m = {m}"),
            Box::new(move |b: &dyn Backend| {
                let (src, mut out) = (square(1), Image::<f32>::new(n, n).unwrap());
                b.box_sum(AnyView::F32(src.view()), AnyViewMut::F32(out.view_mut()), &BoxParams::square(m, Border::Reflect101))
            }),
        ));
        cases.push((
            format!("mean 4096² f32, m = {m}"),
            Box::new(move |b: &dyn Backend| {
                let (src, mut out) = (square(2), Image::<f32>::new(n, n).unwrap());
                b.mean_filter(AnyView::F32(src.view()), AnyViewMut::F32(out.view_mut()), &BoxParams::square(m, Border::Reflect101))
            }),
        ));
    }
    for sigma in [2.0, 20.0] {
        cases.push((
            format!("Gaussian 4096² f32, sigma {sigma}"),
            Box::new(move |b: &dyn Backend| {
                let (src, mut out) = (square(3), Image::<f32>::new(n, n).unwrap());
                b.gaussian_blur(AnyView::F32(src.view()), AnyViewMut::F32(out.view_mut()), &GaussianParams { sigma, ..Default::default() })
            }),
        ));
    }
    // The recursive Gaussian's block-parallel candidate (tuning family `gauss_iir`).
    cases.push((
        "Gaussian 4096² f32, sigma 20, blocked recursion".into(),
        Box::new(move |b: &dyn Backend| {
            let (src, mut out) = (square(3), Image::<f32>::new(n, n).unwrap());
            std::env::set_var(tessera_cuda::GAUSS_IIR_ENV, "blocked");
            let r = b.gaussian_blur(AnyView::F32(src.view()), AnyViewMut::F32(out.view_mut()), &GaussianParams { sigma: 20.0, ..Default::default() });
            std::env::remove_var(tessera_cuda::GAUSS_IIR_ENV);
            r
        }),
    ));
    cases.push((
        "variance 1920x1080 u8, tent R 63, recursive".into(),
        Box::new(|b: &dyn Backend| {
            let src = Image::from_fn(1920, 1080, |x, y| ((x * 3 + y * 5) % 256) as u8).unwrap();
            let mut out = Image::<f32>::new(1920, 1080).unwrap();
            b.local_variance(AnyView::U8(src.view()), out.view_mut(), &VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius: 63 }))
        }),
    ));
    // The kernel moments' single-pass candidate (tuning family `variance_kernel`).
    cases.push((
        "variance 1920x1080 u8, tent R 63, recursive, fused".into(),
        Box::new(|b: &dyn Backend| {
            let src = Image::from_fn(1920, 1080, |x, y| ((x * 3 + y * 5) % 256) as u8).unwrap();
            let mut out = Image::<f32>::new(1920, 1080).unwrap();
            std::env::set_var(tessera_cuda::VARIANCE_KERNEL_ENV, "fused");
            let p = VarianceParams::new(VarianceMethod::Recursive, VarianceKernel::Tent { radius: 63 });
            let r = b.local_variance(AnyView::U8(src.view()), out.view_mut(), &p);
            std::env::remove_var(tessera_cuda::VARIANCE_KERNEL_ENV);
            r
        }),
    ));
    cases.push((
        "SGM 1024x440, 128 disparities, 4 paths".into(),
        Box::new(|b: &dyn Backend| {
            let l = Image::from_fn(1024, 440, |x, y| ((x * 7 ^ y * 13) % 256) as u8).unwrap();
            let r = Image::from_fn(1024, 440, |x, y| (((x + 9) * 7 ^ y * 13) % 256) as u8).unwrap();
            let mut disp = Image::<f32>::new(1024, 440).unwrap();
            let p = StereoParams { max_disparity: 128, paths: Paths::Four, lr_check: false, median: false, fill: false, ..Default::default() };
            b.stereo_sgm(AnyView::U8(l.view()), AnyView::U8(r.view()), disp.view_mut(), &p).map(|_| ())
        }),
    ));
    cases.push((
        "matrix product 4096 f32".into(),
        Box::new(move |b: &dyn Backend| {
            let (x, y, mut out) = (square(4), square(5), Image::<f32>::new(n, n).unwrap());
            b.mat_mul(x.view(), y.view(), out.view_mut())
        }),
    ));
    cases
}

/// The index in [`REASONS`] of `kernel`'s reason.
fn reason(kernel: &str) -> Option<usize> {
    REASONS.iter().position(|(n, _)| kernel_matches(n, kernel))
}

#[test]
fn every_benchmark_launch_fills_half_an_h100_sm_for_two_waves_or_says_why() {
    match nvrtc::load() {
        Ok(()) => {}
        Err(e) if std::env::var_os("TESSERA_REQUIRE_NVRTC").is_some() => panic!("TESSERA_REQUIRE_NVRTC is set: {e}"),
        Err(e) => return eprintln!("occupancy: SKIPPED (no NVRTC): {e}"),
    }
    let mut resources: HashMap<String, KernelResources> = HashMap::new();
    for m in Module::ALL {
        let c = nvrtc::compile(m, "sm_90").unwrap_or_else(|e| panic!("{} for sm_90: {e}", m.file()));
        resources.extend(nvrtc::resources(&c.log).into_iter().map(|r| (r.name.clone(), r)));
    }
    let mut missed = Vec::new();
    let mut used = vec![false; REASONS.len()];
    for (case, run) in cases() {
        let (backend, log) = tessera_cuda::open_shim_dry_run("NVIDIA H200");
        run(backend.as_ref()).unwrap_or_else(|e| panic!("{case}: {e}"));
        let mut launches = log.lock().unwrap().clone();
        assert!(!launches.is_empty(), "{case}: no launch recorded");
        launches.dedup();
        for l in launches {
            let name = l.kernel.name;
            let r = resources.get(name).unwrap_or_else(|| panic!("{case}: {name}: no ptxas report"));
            let threads = l.block.iter().product::<u32>();
            let blocks = l.grid.iter().map(|&g| g as u64).product::<u64>();
            let o = H100
                .occupancy(threads, r.registers, r.shared_bytes + l.shared_bytes, blocks)
                .unwrap_or_else(|| panic!("{case}: {name}: a block of {threads} threads does not fit on an SM ({r:?})"));
            let why = reason(name);
            eprintln!(
                "{case}: {name} grid {:?} block {:?} ({threads} threads, {} registers, {} B shared): {} blocks per SM ({}), {:.0} % occupancy, {:.2} waves{}",
                l.grid,
                l.block,
                r.registers,
                r.shared_bytes + l.shared_bytes,
                o.blocks_per_sm,
                o.limit,
                100.0 * o.fraction,
                o.waves,
                if why.is_some() { " (reason stated)" } else { "" }
            );
            if o.fraction >= 0.5 && o.waves >= 2.0 {
                continue;
            }
            match why {
                Some(i) => used[i] = true,
                None => missed.push(format!("{case}: {name}: {:.0} % occupancy ({}), {:.2} waves", 100.0 * o.fraction, o.limit, o.waves)),
            }
        }
    }
    assert!(missed.is_empty(), "launches below half occupancy or two waves, with no reason stated:\n{}", missed.join("\n"));
    let stale: Vec<&str> = REASONS.iter().zip(&used).filter(|(_, u)| !**u).map(|(r, _)| r.0).collect();
    assert!(stale.is_empty(), "reasons no launch needs any more: {stale:?}");
}

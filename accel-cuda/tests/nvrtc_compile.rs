//! Every kernel file compiles with NVRTC, through the backend's own loading code, to a
//! CUBIN for sm_90 (H100) and sm_80 (A100) and to PTX, with no spill and within the
//! register and shared-memory budget of each kernel.
//!
//! NVRTC must be installed for this test to mean anything: with `TESSERA_REQUIRE_NVRTC=1`
//! (set by `.ci/run`, which installs the pinned wheel) its absence fails the test; without,
//! the test says SKIPPED on stderr and passes.

mod common;

use common::kernel_matches;
use tessera_cuda::kernels::Module;
use tessera_cuda::nvrtc;

/// Registers per thread a kernel may use: at 64, a block of 256 threads leaves room for
/// four blocks per SM (65 536 registers). Kernels that need more are listed with their
/// budget and why.
const DEFAULT_REGISTERS: u32 = 64;
const REGISTER_BUDGET: &[(&str, u32)] = &[
    // A whole template search per warp: area, cache box, two peaks and the step state, and
    // a ring's eight windows' sums at once (24 accumulators of 64 bits); at 208 registers
    // two 128-thread blocks fit an SM, and a stitch window's launch (some 64 blocks) has
    // fewer blocks than an H100 has SMs: the search is bound by its dependent steps, not by
    // occupancy.
    ("ncc_search_*", 208),
    // A pair's quality sums: twenty u64 sums per thread (40 registers) and the taps'
    // addresses; at 80 registers three 256-thread blocks fit an SM, and a launch is a few
    // hundred blocks of a pair's regions, read once.
    ("quality_sums_*", 80),
    // A pair's quality measures from its regions' sums: a region's twenty sums, the taps'
    // weights and the f64 accumulators held at once; a launch is a thread per pair of a
    // window (some tens), so registers do not bound what runs at once.
    ("quality_measures", 96),
    // A pair's shift refinement: per lane its interior's three means, five gradient and
    // five resampled sums in f64, the step's state, and four pixels' terms read ahead of
    // their adds; a launch is a window's few pairs, a block of 384 threads each on an SM
    // of its own, so registers do not bound what runs at once (at 160, one block an SM).
    ("refine_shift_*", 160),
    // The fused box sums and means (a `*` in a name stands for any text):
    // per thread the column sums, sources and buffer places of its lanes (4 or 8) and a
    // row's run of the scan. The n4r2 shape is declared `__launch_bounds__(256, 3)`: at
    // most 80 registers, three 256-thread blocks per SM (61 440 registers), whose dynamic
    // shared memory (at most 2 x 2 x 1025 f64 prefixes + 128 B, 32.9 KB; half that for u8)
    // takes 99 of the SM's 228 KB; at 64 registers (four blocks) it spills. The n8r1 shape
    // (8 lanes per thread) spills at 80: `__launch_bounds__(256, 2)`, two blocks per SM
    // (66 KB of shared memory).
    ("box_fused_*_n8r1", 128),
    ("box_fused_*", 80),
    // The fused kernel moments: the box design carried to two moments and the tent, whose
    // running sums are three pairs of moments per lane (32-bit for u8, 64-bit for u16).
    // n2r2 is declared `__launch_bounds__(256, 3)` (at most 80 registers), n4r1, twice the
    // lanes, `(256, 2)` (at most 128).
    ("moments_fused_*_n4r1", 128),
    ("moments_fused_*", 80),
];
/// Static shared memory per block: 48 KiB, the most a kernel may declare statically. (The
/// fused box kernels' shared memory is dynamic: `filter::fused_launch` sizes it, within
/// 48 KiB, tested in `filter.rs`.)
const SHARED_BUDGET: u32 = 48 * 1024;

fn nvrtc_or_skip() -> bool {
    match nvrtc::load() {
        Ok(()) => true,
        Err(e) if std::env::var_os("TESSERA_REQUIRE_NVRTC").is_some() => panic!("TESSERA_REQUIRE_NVRTC is set: {e}"),
        Err(e) => {
            eprintln!("nvrtc: SKIPPED (no NVRTC): {e}");
            false
        }
    }
}

#[test]
fn every_kernel_compiles_for_hopper_and_ampere_without_spills() {
    if !nvrtc_or_skip() {
        return;
    }
    let (major, minor) = nvrtc::version().unwrap();
    assert_eq!((major, minor), (13, 0), "NVRTC is pinned to CUDA 13.0 (driver 580 rejects newer PTX)");
    for arch in ["sm_90", "sm_80"] {
        for m in Module::ALL {
            let c = nvrtc::compile(m, arch).unwrap_or_else(|e| panic!("{} for {arch}: {e}", m.file()));
            assert!(c.image.len() > 16, "{} for {arch}: empty CUBIN", m.file());
            let report = nvrtc::resources(&c.log);
            for k in m.kernels() {
                let r = report
                    .iter()
                    .find(|r| r.name == k)
                    .unwrap_or_else(|| panic!("{k} ({}, {arch}): no ptxas report in\n{}", m.file(), c.log));
                let budget = REGISTER_BUDGET
                    .iter()
                    .find(|(n, _)| kernel_matches(n, k))
                    .map_or(DEFAULT_REGISTERS, |b| b.1);
                assert_eq!((r.spill_stores, r.spill_loads), (0, 0), "{k} ({arch}) spills: {r:?}");
                assert!(r.registers <= budget, "{k} ({arch}) uses {} registers, budget {budget}", r.registers);
                assert!(r.shared_bytes <= SHARED_BUDGET, "{k} ({arch}) declares {} bytes of shared memory", r.shared_bytes);
                eprintln!("{arch} {k}: {} registers, {} B shared, {} B stack", r.registers, r.shared_bytes, r.stack_bytes);
            }
        }
    }
}

#[test]
fn every_kernel_file_compiles_to_ptx_for_other_gpus() {
    if !nvrtc_or_skip() {
        return;
    }
    for m in Module::ALL {
        let c = nvrtc::compile(m, "compute_90").unwrap_or_else(|e| panic!("{} to PTX: {e}", m.file()));
        let ptx = String::from_utf8_lossy(&c.image);
        for k in m.kernels() {
            assert!(ptx.contains(&format!(".entry {k}(")), "{k} missing from the PTX of {}", m.file());
        }
        // The files whose expressions must round as the core's hold no fused multiply-add.
        assert!(!nvrtc::unfused(m) || !ptx.contains("fma.rn."), "{}: {} fused multiply-adds", m.file(), ptx.matches("fma.rn.").count());
    }
}

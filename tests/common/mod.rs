//! What the workspace-level tests share.

// Each test crate includes this module and uses a part of it.
#![allow(dead_code)]

pub mod cases;
pub mod footage;

#[allow(unused_imports)]
pub use cases::{cases, cases_at, full, Coverage};

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `tessera` command-line program of this build: the tests of the package that builds
/// it (`cli/`, package `tessera-cli`) run it; the library's tests have none to run.
pub fn tessera() -> Command {
    Command::new(option_env!("CARGO_BIN_EXE_tessera").expect("the tessera program is run by the tessera-cli package's tests"))
}

/// A scratch directory `<tag>-<name>-<pid>` in the system's temporary directory, created
/// if missing.
pub fn temp_dir(tag: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("{tag}-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A deterministic 8-bit test pattern of `w x h` pixels.
pub fn pattern(w: usize, h: usize) -> tessera::Image<u8> {
    tessera::Image::from_fn(w, h, |x, y| ((x * 13 + y * 29 + x * y) % 256) as u8).unwrap()
}

/// The shared real data (`shared/data`): `$TESSERA_DATA` if set, else the first
/// `shared/data` holding `stereo/` beside the project root or one of its ancestors
/// (`../shared/data` in the usual layout; a git worktree one level deeper finds it too).
/// Panics with the places it looked: the suite needs the real data.
pub fn shared_data() -> PathBuf {
    if let Some(d) = std::env::var_os("TESSERA_DATA") {
        return d.into();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    root.ancestors()
        .map(|a| a.join("shared/data"))
        .find(|d| d.join("stereo").is_dir())
        .unwrap_or_else(|| panic!("no shared/data/stereo above {}; set TESSERA_DATA", root.display()))
}

use std::io::Write;
use std::sync::OnceLock;
use tessera::{open_backend, Backend, BackendChoice, Parallelism};

/// A backend the suites run on: its label, how it is opened, and, for a backend a machine
/// may lack, what its absence means (`None`: it must open).
pub struct Listed {
    pub label: &'static str,
    pub open: fn() -> Result<Box<dyn Backend>, tessera::Error>,
    pub may_be_absent: Option<&'static str>,
}

/// Backends that emulate a device on the CPU (the CUDA shim: a thread per CUDA thread).
/// The suite skips its full-size stereo case on them, saying so: 13 minutes of emulation
/// for a check the GPU itself makes; `accel-cuda/tests/shim/stereo.rs` checks Middlebury
/// crops bit for bit on the shim instead.
pub const EMULATED: &[&str] = &["cuda-shim"];

fn cpu_one_thread() -> Result<Box<dyn Backend>, tessera::Error> {
    open_backend(BackendChoice::Cpu, Parallelism::Sequential).map(|o| o.backend)
}

fn cpu_all_threads() -> Result<Box<dyn Backend>, tessera::Error> {
    open_backend(BackendChoice::Cpu, Parallelism::AllThreads).map(|o| o.backend)
}

fn cuda() -> Result<Box<dyn Backend>, tessera::Error> {
    open_backend(BackendChoice::Cuda, Parallelism::AllThreads).map(|o| o.backend)
}

/// The CUDA backend's kernels and launches on the CPU shim: the same suite as the GPU
/// gets, on every machine (slow; its speed means nothing).
fn cuda_shim() -> Result<Box<dyn Backend>, tessera::Error> {
    Ok(tessera_cuda::open_shim())
}

/// Every backend, listed once: a new backend gets the whole suite by a line here. The
/// first entry is the reference the others are compared with where no float64 reference
/// exists.
pub const BACKENDS: &[Listed] = &[
    Listed { label: "cpu-1thread", open: cpu_one_thread, may_be_absent: None },
    Listed { label: "cpu-all", open: cpu_all_threads, may_be_absent: None },
    Listed { label: "cuda", open: cuda, may_be_absent: Some("no CUDA device") },
    Listed { label: "cuda-shim", open: cuda_shim, may_be_absent: None },
];

/// Whether `label` is among the backends `narrowed_to` names (`TESSERA_BACKENDS`,
/// comma-separated; all when unset). The reference (the first listed) always runs: the GPU
/// machine runs the suite as `TESSERA_BACKENDS=cuda`, leaving out the shim's hour of
/// emulation there.
fn selected(label: &str, narrowed_to: Option<&str>) -> bool {
    narrowed_to.is_none_or(|list| label == BACKENDS[0].label || list.split(',').any(|l| l.trim() == label))
}

/// The listed backends that open on this machine, opened once per test process (a CUDA
/// context is costly) and shared by the tests. Each absent one is reported once as
/// `cuda: SKIPPED (no CUDA device): <reason>` on the process's stderr, past the test
/// harness's capture, so a run without a GPU says so instead of passing silently.
/// Panics if a backend that must open does not. `TESSERA_BACKENDS` narrows the list
/// ([`selected`]); a named backend that does not open is then a failure, not a skip.
pub fn backends() -> &'static [(&'static str, Box<dyn Backend>)] {
    static OPENED: OnceLock<Vec<(&'static str, Box<dyn Backend>)>> = OnceLock::new();
    OPENED.get_or_init(|| {
        let mut opened = Vec::new();
        let narrowed_to = std::env::var("TESSERA_BACKENDS").ok();
        for b in BACKENDS.iter().filter(|b| selected(b.label, narrowed_to.as_deref())) {
            let may_be_absent = if narrowed_to.is_some() { None } else { b.may_be_absent };
            match ((b.open)(), may_be_absent) {
                (Ok(backend), _) => opened.push((b.label, backend)),
                (Err(e), Some(absence)) => {
                    let _ = writeln!(std::io::stderr(), "{}: SKIPPED ({absence}): {e}", b.label);
                }
                (Err(e), None) => panic!("{}: {e}", b.label),
            }
        }
        opened
    })
}

/// An image of the shared data as RGBA (the Middlebury PNGs are RGB).
fn load_rgba(rel: &str) -> tessera::Image<tessera::Rgba8> {
    let path = shared_data().join(rel);
    match tessera::io::load(&path) {
        Ok(tessera::AnyImage::Rgba8(img)) => img,
        Ok(other) => panic!("{}: expected RGB, got {}", path.display(), other.view().map_or("u32", |v| v.type_name())),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// Middlebury cones, left view (450 x 375).
pub fn cones_left() -> tessera::Image<tessera::Rgba8> {
    load_rgba("stereo/cones/im2.png")
}

/// Middlebury cones, right view.
pub fn cones_right() -> tessera::Image<tessera::Rgba8> {
    load_rgba("stereo/cones/im6.png")
}

/// The left disparities of cones in pixels (`disp2.png` / 4), 0 where unknown.
pub fn cones_ground_truth() -> tessera::Image<f32> {
    let path = shared_data().join("stereo/cones/disp2.png");
    let raw: tessera::Image<u8> = match tessera::io::load(&path) {
        Ok(img) => img.view().unwrap_or_else(|| panic!("{}: not an image type", path.display())).to_gray_f32().convert(),
        Err(e) => panic!("{}: {e}", path.display()),
    };
    tessera::stereo::eval::ground_truth_from_u8(raw.view(), 4.0).unwrap()
}

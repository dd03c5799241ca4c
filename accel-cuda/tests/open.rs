//! Opening the CUDA backend where parts of CUDA are missing: a clear error for `cuda`, the
//! CPU with the reason for `auto`, never a panic. On CI (no driver) the driver's absence is
//! real; NVRTC's absence is made in a child process that looks for it in an empty place.

use tessera_core::{Backend, BackendChoice, CpuBackend, Error, Opened, Parallelism};

/// `choice` opened as the faces open it (`tessera::open_backend`, which this crate cannot
/// depend on): `BackendChoice::resolve` with the CPU and this crate's `open`.
fn open_backend(choice: BackendChoice) -> Result<Opened, Error> {
    choice.resolve(|| Box::new(CpuBackend::new(Parallelism::Sequential)) as Box<dyn Backend>, tessera_cuda::open)
}

#[test]
fn without_a_usable_gpu_cuda_is_an_error_and_auto_falls_back_saying_why() {
    match tessera_cuda::open() {
        Ok(b) => eprintln!("a CUDA device is present ({}): the absence checks do not apply here", b.name()),
        Err(e) => {
            assert!(matches!(e, Error::BackendUnavailable(_)), "{e:?}");
            assert!(e.to_string().contains("CUDA"), "{e}");
            let auto = open_backend(BackendChoice::Auto).unwrap();
            assert_eq!(auto.backend.name(), "cpu");
            let why = auto.fallback.unwrap();
            assert!(why.contains(&e.to_string()) && why.contains("CPU"), "{why}");
            let cuda = open_backend(BackendChoice::Cuda).unwrap_err();
            assert_eq!(cuda, e);
        }
    }
}

#[test]
fn without_nvrtc_compiling_is_an_error_naming_what_to_install() {
    if std::env::var_os("TESSERA_OPEN_CHILD").is_some() {
        let e = tessera_cuda::nvrtc::load().unwrap_err();
        assert!(e.contains("NVRTC (libnvrtc.so.13) not found") && e.contains("nvidia-cuda-nvrtc==13.0.88"), "{e}");
        let e = tessera_cuda::nvrtc::compile(tessera_cuda::kernels::Module::Linalg, "sm_90").unwrap_err();
        assert!(e.contains("NVRTC"), "{e}");
        assert!(tessera_cuda::open().is_err());
        return;
    }
    if std::path::Path::new("/usr/local/cuda/lib64/libnvrtc.so.13").exists() {
        eprintln!("NVRTC is installed system-wide here: its absence cannot be staged");
        return;
    }
    let empty = std::env::temp_dir().join(format!("tessera-no-nvrtc-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "without_nvrtc_compiling_is_an_error_naming_what_to_install", "--nocapture"])
        .env("TESSERA_OPEN_CHILD", "1")
        .env("TESSERA_NVRTC_DIR", &empty)
        .env_remove("CUDA_PATH")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&empty);
    assert!(out.status.success(), "child failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

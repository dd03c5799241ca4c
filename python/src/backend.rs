//! `backend="cpu"|"cuda"|"auto"`: opened once per process and kept (opening CUDA loads the
//! driver and compiles kernels; a call must not pay that again), by the same
//! `BackendChoice::resolve` and openers the CLI's `tessera::open_backend` uses, so `auto`'s
//! fallback rule and the CUDA library checks are the CLI's. There is one CUDA backend per
//! process, whatever the choice and thread setting that opened it, so that a device image
//! one call returns is another call's input.

use crate::errors::to_py;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use tessera::cuda::CudaBackend;
use tessera::{Backend, BackendChoice, CpuBackend, Opened, Parallelism};

/// An opened backend and, for `auto` without a GPU, why it is the CPU.
#[derive(Clone, Copy)]
pub struct Chosen {
    pub backend: &'static dyn Backend,
    /// The same backend where it is CUDA, for the operations on device images.
    pub cuda: Option<&'static CudaBackend>,
    pub fallback: Option<&'static str>,
}

type Key = (BackendChoice, bool);

fn cache() -> &'static Mutex<HashMap<Key, Chosen>> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Chosen>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The backend `name` asks for (`cpu`, `cuda`, `auto`; any case), with one thread or all.
/// `cuda` where no GPU is usable: `RuntimeError` with the reason (no driver, no device, a
/// driver too old, no NVRTC). Unknown name: `ValueError`.
pub fn choose(name: &str, single_thread: bool) -> PyResult<Chosen> {
    let choice: BackendChoice = name.parse().map_err(to_py)?;
    let key = (choice, single_thread);
    if let Some(c) = cache().lock().map_err(|_| poisoned())?.get(&key) {
        return Ok(*c);
    }
    let par = if single_thread { Parallelism::Sequential } else { Parallelism::AllThreads };
    // Opened outside the lock: a slow CUDA start does not block CPU callers.
    par.start().map_err(to_py)?;
    let cpu = || -> (&'static dyn Backend, Option<&'static CudaBackend>) { (Box::leak(Box::new(CpuBackend::new(par))), None) };
    let cuda = || cuda_backend().map(|c| (c as &'static dyn Backend, Some(c)));
    let Opened { backend: (backend, cuda), fallback } = choice.resolve(cpu, cuda).map_err(to_py)?;
    let chosen = Chosen { backend, cuda, fallback: fallback.map(|f| &*Box::leak(f.into_boxed_str())) };
    Ok(*cache().lock().map_err(|_| poisoned())?.entry(key).or_insert(chosen))
}

/// The process's CUDA backend, opened at the first call that asks for it (a failure is
/// not kept: a later call tries again).
fn cuda_backend() -> tessera::Result<&'static CudaBackend> {
    static CUDA: Mutex<Option<&'static CudaBackend>> = Mutex::new(None);
    let mut slot = CUDA.lock().map_err(|_| tessera::Error::Backend("the CUDA backend's lock was poisoned by an earlier panic".into()))?;
    if let Some(b) = *slot {
        return Ok(b);
    }
    let b: &'static CudaBackend = Box::leak(Box::new(tessera::cuda::open_cuda()?));
    *slot = Some(b);
    Ok(b)
}

fn poisoned() -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err("the backend cache was poisoned by an earlier panic")
}

//! `backend="cpu"|"cuda"|"auto"`: opened once per process and kept (opening CUDA loads the
//! driver and compiles kernels; a call must not pay that again), through the same
//! `tessera::open_backend` the CLI uses, so `auto`'s fallback rule and the CUDA library
//! checks are the CLI's.

use crate::errors::to_py;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use tessera::{open_backend, Backend, BackendChoice, Opened, Parallelism};

/// An opened backend and, for `auto` without a GPU, why it is the CPU.
#[derive(Clone, Copy)]
pub struct Chosen {
    pub backend: &'static dyn Backend,
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
    let Opened { backend, fallback } = open_backend(choice, par).map_err(to_py)?;
    let chosen = Chosen {
        backend: Box::leak(backend),
        fallback: fallback.map(|f| &*Box::leak(f.into_boxed_str())),
    };
    Ok(*cache().lock().map_err(|_| poisoned())?.entry(key).or_insert(chosen))
}

fn poisoned() -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err("the backend cache was poisoned by an earlier panic")
}

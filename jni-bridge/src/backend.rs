//! Backend choice per call: "cpu", "cuda" or "auto", by the core's one rule
//! ([`BackendChoice::resolve`]). What the bridge adds is the per-process cache: the CPU
//! backend is a static, and CUDA is opened once (creating a CUDA context costs far more
//! than any single call).

use crate::error::Result;
use std::sync::OnceLock;
use tessera_core::{Backend, BackendChoice, CpuBackend, Error, Parallelism};

static CPU: CpuBackend = CpuBackend::new(Parallelism::AllThreads);

/// The CUDA backend, opened on first use, or the reason it could not be opened.
fn cuda() -> std::result::Result<&'static dyn Backend, Error> {
    static CUDA: OnceLock<std::result::Result<Box<dyn Backend>, Error>> = OnceLock::new();
    match CUDA.get_or_init(tessera_cuda::open) {
        Ok(b) => Ok(b.as_ref()),
        Err(e) => Err(e.clone()),
    }
}

/// The backend named `name`: `cpu`, `cuda` (an `IllegalStateException` when no CUDA device
/// or driver is present) or `auto` (CUDA if available, else CPU). Any other name is an
/// `IllegalArgumentException`.
pub fn select(name: &str) -> Result<&'static dyn Backend> {
    let choice: BackendChoice = name.parse()?;
    Ok(choice.resolve(|| &CPU as &'static dyn Backend, cuda)?.backend)
}

/// The names of the backends usable in this process, comma-separated ("cpu" or "cpu,cuda").
pub fn available() -> String {
    match cuda() {
        Ok(_) => "cpu,cuda".to_string(),
        Err(_) => "cpu".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BridgeError;

    #[test]
    fn names() {
        assert_eq!(select("cpu").unwrap().name(), "cpu");
        assert!(select("auto").is_ok());
        assert!(matches!(select("gpu"), Err(BridgeError::Argument(ref m)) if m.contains("unknown backend")));
        assert!(available().split(',').any(|b| b == "cpu"));
        // cuda either opens or says why, as an IllegalStateException.
        match select("cuda") {
            Ok(b) => assert_eq!(b.name(), "cuda"),
            Err(e) => assert!(matches!(e, BridgeError::State(_))),
        }
    }
}

//! Backend choice per call: "cpu", "cuda" or "auto" (CUDA when it opens, else CPU).

use crate::error::{bad_arg, BridgeError, Result};
use std::sync::OnceLock;
use tessera_core::{Backend, CpuBackend, Parallelism};

static CPU: CpuBackend = CpuBackend::new(Parallelism::AllThreads);

/// The CUDA backend, opened once per process (creating a CUDA context costs far more than
/// any single call), or the reason it could not be opened.
fn cuda() -> &'static std::result::Result<Box<dyn Backend>, String> {
    static CUDA: OnceLock<std::result::Result<Box<dyn Backend>, String>> = OnceLock::new();
    CUDA.get_or_init(|| tessera_cuda::open().map_err(|e| e.to_string()))
}

/// The backend named `name`: `cpu`, `cuda` (an `IllegalStateException` when no CUDA device
/// or driver is present) or `auto` (CUDA if available, else CPU). Any other name is an
/// `IllegalArgumentException`.
pub fn select(name: &str) -> Result<&'static dyn Backend> {
    match name {
        "cpu" => Ok(&CPU),
        "cuda" => match cuda() {
            Ok(b) => Ok(b.as_ref()),
            Err(why) => Err(BridgeError::State(why.clone())),
        },
        "auto" => Ok(match cuda() {
            Ok(b) => b.as_ref(),
            Err(_) => &CPU,
        }),
        other => Err(bad_arg(format!("unknown backend \"{other}\": expected cpu, cuda or auto"))),
    }
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

    #[test]
    fn names() {
        assert_eq!(select("cpu").unwrap().name(), "cpu");
        assert!(select("auto").is_ok());
        assert!(matches!(select("gpu"), Err(BridgeError::Argument(_))));
        assert!(available().split(',').any(|b| b == "cpu"));
        // cuda either opens or says why, as an IllegalStateException.
        match select("cuda") {
            Ok(b) => assert_eq!(b.name(), "cuda"),
            Err(e) => assert!(matches!(e, BridgeError::State(_))),
        }
    }
}

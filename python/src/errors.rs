//! The core's [`Error`] as Python exceptions: bad parameters and shapes are `ValueError`,
//! unsupported pixel types `TypeError`, a missing backend or a device failure
//! `RuntimeError`, a refused allocation `MemoryError`. Nothing here panics.

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::PyErr;
use tessera::Error;

/// The exception for a core error, with the core's message.
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::UnsupportedType { .. } => PyTypeError::new_err(msg),
        Error::BackendUnavailable(_) | Error::Backend(_) => PyRuntimeError::new_err(msg),
        Error::OutOfMemory { .. } => PyMemoryError::new_err(msg),
        Error::ZeroSize { .. }
        | Error::StrideTooSmall { .. }
        | Error::BufferTooShort { .. }
        | Error::SizeMismatch { .. }
        | Error::OutOfRange { .. }
        | Error::InvalidFloat { .. }
        | Error::InvalidParameter { .. }
        | Error::NothingRegistered { .. } => PyValueError::new_err(msg),
        // Cancelled (only by a signal, which raises its own exception first) and any
        // variant a later core adds.
        _ => PyRuntimeError::new_err(msg),
    }
}

/// A `ValueError` with this message.
pub fn value_error(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

/// A `TypeError` with this message.
pub fn type_error(msg: impl Into<String>) -> PyErr {
    PyTypeError::new_err(msg.into())
}

//! One error type for every kind of bad input. No public function of the core panics on
//! input it is given; it returns one of these instead.

use alloc::string::String;
use core::fmt;

/// Everything that can be wrong with the input of an operation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An image with no pixels: width or height is zero.
    ZeroSize { width: usize, height: usize },
    /// A row stride shorter than the row it has to hold.
    StrideTooSmall { stride: usize, width: usize },
    /// A pixel buffer shorter than `stride * (height - 1) + width` (or whose size overflows).
    BufferTooShort { needed: usize, got: usize },
    /// Input and output (or two inputs) that must have the same size do not.
    SizeMismatch { expected: (usize, usize), got: (usize, usize) },
    /// A window, radius or other count outside what the operation accepts.
    OutOfRange { name: &'static str, value: i64, min: i64, max: i64 },
    /// A float parameter that is NaN, infinite, or outside its domain (e.g. sigma <= 0).
    InvalidFloat { name: &'static str, value: f64, expected: &'static str },
    /// A parameter value the operation does not accept, with the reason.
    InvalidParameter { name: &'static str, reason: String },
    /// A pixel type (or combination of types) the operation does not support.
    UnsupportedType { op: &'static str, types: &'static str },
    /// A backend that is not available here (no GPU, not compiled in, ...).
    BackendUnavailable(String),
    /// A failure inside a backend (for example a GPU error), with its message.
    Backend(String),
    /// A buffer of this many bytes could not be allocated: the input is too large for the
    /// memory available (an error instead of the process aborting).
    OutOfMemory { bytes: usize },
    /// A stitching run in which no two frames could be registered: there is no panorama to
    /// make. `why` summarises the frames' skip reasons.
    NothingRegistered { frames: usize, why: String },
    /// A long operation stopped because its progress callback asked it to (the user
    /// pressed Esc, a deadline passed); it produced no output.
    Cancelled,
}

/// Short alias used throughout the crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ZeroSize { width, height } => {
                write!(f, "image has no pixels: width {width}, height {height}")
            }
            Error::StrideTooSmall { stride, width } => {
                write!(f, "row stride {stride} is smaller than the width {width}")
            }
            Error::BufferTooShort { needed, got } => {
                write!(f, "pixel buffer too short: needs {needed} elements, got {got}")
            }
            Error::SizeMismatch { expected, got } => write!(
                f,
                "image sizes differ: expected {}x{}, got {}x{}",
                expected.0, expected.1, got.0, got.1
            ),
            Error::OutOfRange { name, value, min, max } => {
                write!(f, "{name} = {value} is out of range (allowed {min}..={max})")
            }
            Error::InvalidFloat { name, value, expected } => {
                write!(f, "{name} = {value} is invalid: expected {expected}")
            }
            Error::InvalidParameter { name, reason } => write!(f, "invalid {name}: {reason}"),
            Error::UnsupportedType { op, types } => {
                write!(f, "{op} does not support {types}")
            }
            Error::BackendUnavailable(why) => write!(f, "backend unavailable: {why}"),
            Error::Backend(why) => write!(f, "backend error: {why}"),
            Error::OutOfMemory { bytes } => {
                write!(f, "out of memory: a buffer of {} MiB could not be allocated", bytes.div_ceil(1 << 20))
            }
            Error::NothingRegistered { frames, why } => {
                write!(f, "no two of the {frames} frames could be registered: {why}")
            }
            Error::Cancelled => f.write_str("cancelled before the end of the run"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

/// Checks that a float parameter is finite and strictly positive.
pub fn require_positive(name: &'static str, value: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidFloat { name, value, expected: "a finite number > 0" })
    }
}

/// Checks that a float parameter is finite (any sign).
pub fn require_finite(name: &'static str, value: f64) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidFloat { name, value, expected: "a finite number" })
    }
}

/// Checks that a float parameter is finite and within `lo ..= hi`; `expected` says so in the
/// error.
pub fn require_within(name: &'static str, value: f64, lo: f64, hi: f64, expected: &'static str) -> Result<()> {
    require_finite(name, value)?;
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(Error::InvalidFloat { name, value, expected })
    }
}

/// An empty vector with room for `n` elements, or [`Error::OutOfMemory`] where the allocator
/// refuses.
pub fn try_with_capacity<T>(n: usize) -> Result<alloc::vec::Vec<T>> {
    let mut v = alloc::vec::Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory { bytes: n.saturating_mul(core::mem::size_of::<T>()) })?;
    Ok(v)
}

/// `n` copies of `value` in a new vector, or [`Error::OutOfMemory`] where the allocator
/// refuses (a large image on a small machine is an error, not an abort).
pub fn try_filled<T: Clone>(n: usize, value: T) -> Result<alloc::vec::Vec<T>> {
    let mut v = try_with_capacity(n)?;
    v.resize(n, value);
    Ok(v)
}

/// Checks that an integer parameter lies in `min..=max`.
///
/// `value` is any integer; one beyond `i64` (a huge `usize`) is reported as `i64::MAX`, never
/// wrapped to a negative number.
pub fn require_range(name: &'static str, value: impl TryInto<i64>, min: i64, max: i64) -> Result<()> {
    let value = value.try_into().unwrap_or(i64::MAX);
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(Error::OutOfRange { name, value, min, max })
    }
}

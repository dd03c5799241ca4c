//! How failures cross the boundary: every Rust error becomes a Java exception with the
//! core's message, and every panic (caught by `EnvUnowned::with_env`) becomes one too, so
//! nothing ever unwinds into the JVM.

use jni::errors::ErrorPolicy;
use jni::strings::JNIString;
use jni::{jni_str, Env};

/// What went wrong in a native call, already sorted by the Java exception it becomes.
#[derive(Debug)]
pub enum BridgeError {
    /// Bad input from Java (null or short array, zero size, a parameter out of range):
    /// `java.lang.IllegalArgumentException`.
    Argument(String),
    /// A backend that is not available here, or that failed at run time:
    /// `java.lang.IllegalStateException`.
    State(String),
    /// A long run stopped because its Java progress callback asked it to:
    /// `java.util.concurrent.CancellationException` (which callers can tell from a
    /// failure; it is an `IllegalStateException`, so a plain catch of those catches it too).
    Cancelled(String),
    /// A JNI call failed; usually a Java exception is already pending and is left to
    /// propagate.
    Jni(jni::errors::Error),
}

pub type Result<T> = std::result::Result<T, BridgeError>;

impl std::fmt::Display for BridgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BridgeError::Argument(m) | BridgeError::State(m) | BridgeError::Cancelled(m) => f.write_str(m),
            BridgeError::Jni(e) => write!(f, "JNI error: {e}"),
        }
    }
}

impl std::error::Error for BridgeError {}

impl From<jni::errors::Error> for BridgeError {
    fn from(e: jni::errors::Error) -> Self {
        BridgeError::Jni(e)
    }
}

impl From<tessera_core::Error> for BridgeError {
    /// A missing backend or a failure inside one is a state problem, a cancelled run a
    /// cancellation; everything else the core reports is about the input.
    fn from(e: tessera_core::Error) -> Self {
        match e {
            tessera_core::Error::BackendUnavailable(_) | tessera_core::Error::Backend(_) => {
                BridgeError::State(e.to_string())
            }
            tessera_core::Error::Cancelled => BridgeError::Cancelled(e.to_string()),
            other => BridgeError::Argument(other.to_string()),
        }
    }
}

/// Shorthand for an `IllegalArgumentException` message.
pub fn bad_arg(msg: impl Into<String>) -> BridgeError {
    BridgeError::Argument(msg.into())
}

/// The error policy of every entry point: `Argument` -> `IllegalArgumentException`,
/// `State` -> `IllegalStateException`, `Cancelled` -> `CancellationException`, a panic
/// -> `IllegalStateException` naming it as an internal error, a JNI error -> the pending Java exception (or a `RuntimeException`
/// when none is pending). The native method then returns the type's default (0 / null),
/// which Java never sees because the exception is thrown first.
#[derive(Debug, Default)]
pub struct ThrowJava;

fn throw(env: &mut Env<'_>, class: &jni::strings::JNIStr, msg: &str) {
    // If throwing itself fails (out of memory), the JVM already has an exception pending.
    let _ = env.throw_new(class, JNIString::new(msg));
}

impl<T: Default> ErrorPolicy<T, BridgeError> for ThrowJava {
    type Captures<'unowned_env_local: 'native_method, 'native_method> = ();

    fn on_error<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        err: BridgeError,
    ) -> jni::errors::Result<T> {
        if env.exception_check() {
            return Ok(T::default());
        }
        match &err {
            BridgeError::Argument(m) => throw(env, jni_str!("java/lang/IllegalArgumentException"), m),
            BridgeError::State(m) => throw(env, jni_str!("java/lang/IllegalStateException"), m),
            BridgeError::Cancelled(m) => throw(env, jni_str!("java/util/concurrent/CancellationException"), m),
            BridgeError::Jni(e) => throw(env, jni_str!("java/lang/RuntimeException"), &format!("tessera-jni: {e}")),
        }
        Ok(T::default())
    }

    fn on_panic<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        payload: Box<dyn std::any::Any + Send + 'static>,
    ) -> jni::errors::Result<T> {
        let what = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_string()
        };
        // A payload whose drop panics would abort; leak it instead (it is tiny and rare).
        std::mem::forget(payload);
        if !env.exception_check() {
            throw(env, jni_str!("java/lang/IllegalStateException"), &format!("tessera internal error (Rust panic): {what}"));
        }
        Ok(T::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_sort_into_argument_and_state() {
        let e: BridgeError = tessera_core::Error::ZeroSize { width: 0, height: 3 }.into();
        assert!(matches!(e, BridgeError::Argument(ref m) if m.contains("no pixels")));
        let e: BridgeError = tessera_core::Error::BackendUnavailable("no CUDA device".into()).into();
        assert!(matches!(e, BridgeError::State(ref m) if m.contains("no CUDA device")));
        let e: BridgeError = tessera_core::Error::Backend("launch failed".into()).into();
        assert!(matches!(e, BridgeError::State(_)));
        let e: BridgeError =
            tessera_core::Error::InvalidFloat { name: "sigma", value: f64::NAN, expected: "a finite number > 0" }.into();
        assert!(matches!(e, BridgeError::Argument(ref m) if m.contains("sigma")));
        let e: BridgeError = tessera_core::Error::Cancelled.into();
        assert!(matches!(e, BridgeError::Cancelled(ref m) if m.contains("cancelled")));
    }
}

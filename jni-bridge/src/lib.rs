//! tessera-jni: the JNI entry points of class `tessera.ij.Native`, used by the ImageJ /
//! Fiji plugin (`imagej-plugin/`).
//!
//! Every entry point takes ImageJ's own pixel arrays (`byte[]`, `short[]`, `float[]`,
//! `int[]`). Filters read and write them in place inside primitive-array critical sections
//! ([`pixels`]); the few copies are stated where they happen: RGB for the operations that
//! weigh the channels ([`local`], [`stereo`]), and the frames of a whole panorama run,
//! which reports progress to ImageJ between frames and can be cancelled there ([`stitch`]).
//! The backend is chosen per call by name ([`backend`]). Errors become Java exceptions
//! (a cancelled run a `CancellationException`) and panics are caught at the boundary
//! ([`error`]); nothing unwinds into the JVM and bad input never crashes it.

pub mod backend;
pub mod error;
pub mod filters;
pub mod local;
pub mod pixels;
pub mod stereo;
pub mod stitch;

use error::{Result, ThrowJava};
use jni::objects::{JClass, JString};
use jni::{Env, EnvUnowned};

/// Runs the body of a native method under the bridge's error policy.
pub(crate) fn guarded<'l, T: Default>(env: &mut EnvUnowned<'l>, f: impl FnOnce(&mut Env<'l>) -> Result<T>) -> T {
    env.with_env(f).resolve::<ThrowJava>()
}

/// Reads a backend name ("cpu", "cuda", "auto"); null means "auto".
pub(crate) fn backend_name(env: &Env<'_>, s: &JString<'_>) -> Result<String> {
    if s.as_raw().is_null() {
        return Ok("auto".into());
    }
    Ok(s.try_to_string(env)?)
}

/// `String Native.nativeVersion()` (behind `Native.version()`): the crate version and the instruction-set level the SIMD
/// kernels dispatch on (the core's one detection), e.g. "tessera-jni 0.1.0 (x86_64, Avx512 + census)".
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_nativeVersion<'l>(mut env: EnvUnowned<'l>, _c: JClass<'l>) -> JString<'l> {
    guarded(&mut env, |env| {
        let level = tessera_core::cpu::level();
        let feats = if tessera_core::cpu::census() { format!("{level:?} + census") } else { format!("{level:?}") };
        let v = format!("tessera-jni {} ({}, {feats})", env!("CARGO_PKG_VERSION"), std::env::consts::ARCH);
        Ok(JString::from_str(env, v)?)
    })
}

/// `String Native.backendList()`: the usable backends, comma-separated ("cpu" or
/// "cpu,cuda"); `Native.backends()` splits it.
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_backendList<'l>(mut env: EnvUnowned<'l>, _c: JClass<'l>) -> JString<'l> {
    guarded(&mut env, |env| Ok(JString::from_str(env, backend::available())?))
}

/// `void Native.panicCheck()`: raises a Rust panic inside the bridge, so a test (or a
/// worried user) can see the boundary turn it into an `IllegalStateException` while the
/// JVM keeps running.
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_panicCheck<'l>(mut env: EnvUnowned<'l>, _c: JClass<'l>) {
    guarded(&mut env, |_env| -> Result<()> { panic!("panicCheck: deliberate panic at the JNI boundary") })
}

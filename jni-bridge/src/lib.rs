//! tessera-jni: the JNI entry points of class `tessera.ij.Native`, used by the ImageJ /
//! Fiji plugin (`imagej-plugin/`).
//!
//! One native per operation: it takes ImageJ's own pixel arrays as `Object`s (`byte[]`,
//! `short[]`, `float[]`, `int[]` RGB; the type is read from the array, [`pixels`]), and one
//! options string in the ImageJ macro style with the command-line program's option names,
//! parsed once here ([`options`]), backend included (`backend=cpu|cuda|auto`, [`backend`]).
//! Filters read and write the arrays in place inside primitive-array critical sections;
//! the few copies are stated where they happen: RGB for the operations that weigh the
//! channels, converted once ([`pixels`]), and the frames of a whole panorama run, which
//! reports progress to ImageJ between frames and can be cancelled there ([`stitch`]), and
//! the tiles of a grid, likewise ([`grid`]).
//! Results come back as Java objects with named fields (`PairResult`, `StitchResult`,
//! `GridResult`, `StereoResult`, `GlareResult`), and `Native.defaults(op)` gives each operation's
//! options at the core's `Default`, so no default is written twice. Errors become Java
//! exceptions (a cancelled run a `CancellationException`) and panics are caught at the
//! boundary ([`error`]); nothing unwinds into the JVM and bad input never crashes it.

pub mod backend;
pub mod error;
pub mod filters;
pub mod grid;
pub mod grid_planes;
pub mod level;
pub mod local;
pub mod options;
pub mod pixels;
pub mod progress;
pub mod stereo;
pub mod stitch;
pub mod tile_names;

use error::{bad_arg, Result, ThrowJava};
use jni::objects::{JClass, JObject, JString};
use jni::{jni_sig, jni_str, Env, EnvUnowned};
use options::Op;

/// Runs the body of a native method under the bridge's error policy.
pub(crate) fn guarded<'l, T: Default>(env: &mut EnvUnowned<'l>, f: impl FnOnce(&mut Env<'l>) -> Result<T>) -> T {
    env.with_env(f).resolve::<ThrowJava>()
}

/// `Map<String, String> Native.defaults(String op)`: the options of operation `op` (`mean`,
/// `gauss`, `variance`, `contrast`, `glare`, `register`, `stitch`, `grid`, `stereo`) at the core's
/// defaults, in a `LinkedHashMap` in the order the operation lists them, values spelled as
/// the options string takes them (`rsz` -> `25`, `cthresh` -> `0.85`, `blend` ->
/// `overwrite`, `backend` -> `auto`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_nativeDefaults<'l>(mut env: EnvUnowned<'l>, _c: JClass<'l>, op: JString<'l>) -> JObject<'l> {
    guarded(&mut env, |env| {
        if op.is_null() {
            return Err(bad_arg("defaults: the operation name is null"));
        }
        let name = op.try_to_string(env)?;
        let pairs = op_defaults(&name)?;
        let map = env.new_object(jni_str!("java/util/LinkedHashMap"), jni_sig!("()V"), &[])?;
        for (k, v) in pairs {
            let (k, v) = (JString::from_str(env, k)?, JString::from_str(env, v)?);
            env.call_method(&map, jni_str!("put"), jni_sig!("(Ljava/lang/Object;Ljava/lang/Object;)Ljava/lang/Object;"), &[(&k).into(), (&v).into()])?;
            // Freed as they go: an operation with many options would overflow the frame's
            // local references.
            env.delete_local_ref(k);
            env.delete_local_ref(v);
        }
        Ok(map)
    })
}

/// The defaults of the operation called `name`.
fn op_defaults(name: &str) -> Result<Vec<(&'static str, String)>> {
    use tessera_core::{contrast::ContrastParams, filter::*, glare::GlareParams, stereo::StereoParams, stitch::*, variance::VarianceParams};
    /// Tries each operation's name in turn.
    macro_rules! by_name {
        ($($p:ty),+) => {{
            $(if name == <$p>::NAME { return options::defaults::<$p>(); })+
            Err(bad_arg(format!("defaults: unknown operation \"{name}\" (known: {})", [$(<$p>::NAME),+].join(", "))))
        }};
    }
    by_name!(BoxParams, GaussianParams, VarianceParams, ContrastParams, GlareParams, RegisterParams, StitchParams, crate::grid::GridRun, StereoParams)
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

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::{contrast::ContrastParams, filter::*, glare::GlareParams, stereo::StereoParams, stitch::*, variance::VarianceParams};

    /// `P`'s defaults, written out as the plugin gets them and read back, are `P::default()`.
    fn round_trip<P: Op + PartialEq + std::fmt::Debug>() {
        let d = op_defaults(P::NAME).unwrap();
        assert_eq!(d.last().unwrap(), &("backend", "auto".to_string()), "{}", P::NAME);
        let s: Vec<String> = d.iter().map(|(k, v)| format!("{k}=[{v}]")).collect();
        assert_eq!(options::parse::<P>(Some(&s.join(" "))).unwrap().0, P::default(), "{}", P::NAME);
    }

    #[test]
    fn every_operations_defaults_read_back_as_its_default() {
        round_trip::<BoxParams>();
        round_trip::<GaussianParams>();
        round_trip::<VarianceParams>();
        round_trip::<ContrastParams>();
        round_trip::<GlareParams>();
        round_trip::<RegisterParams>();
        round_trip::<StitchParams>();
        round_trip::<crate::grid::GridRun>();
        round_trip::<StereoParams>();
        assert!(op_defaults("sharpen").is_err());
    }
}

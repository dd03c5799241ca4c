//! Entry points of the sliding-window filters: `Native.meanFilter{8,16,32,Rgb}` and
//! `Native.gaussianBlur{8,16,32,Rgb}`. Each reads `src` and writes `dst` (distinct arrays
//! of the same type, `width * height` pixels) and runs on the named backend.

use crate::error::{bad_arg, Result};
use crate::pixels::{count, with_src_dst, JavaPixel};
use crate::{backend, backend_name, guarded};
use jni::objects::{JClass, JPrimitiveArray, JString};
use jni::sys::{jbyte, jdouble, jfloat, jint, jshort};
use jni::{Env, EnvUnowned};
use tessera_core::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera_core::Border;

/// The border code of the Java API: 0 reflect-101, 1 replicate, 2 constant (`value`),
/// 3 normalize (a mean over the in-image pixels only).
pub fn border(code: jint, value: jfloat) -> Result<Border> {
    Ok(match code {
        0 => Border::Reflect101,
        1 => Border::Replicate,
        2 => Border::Constant(value),
        3 => Border::Normalize,
        _ => return Err(bad_arg(format!("border = {code} is not one of 0 (reflect-101), 1 (replicate), 2 (constant), 3 (normalize)"))),
    })
}

/// Generates the four typed `extern "system"` functions of one generic entry point.
macro_rules! typed_natives {
    ($generic:ident, $params:tt, $($name:ident: $j:ty),+ $(,)?) => {
        $(typed_native!($generic, $params, $name, $j);)+
    };
}

/// One typed `extern "system"` function: `Native.<name>(src, dst, width, height,
/// <params>, backend)`.
macro_rules! typed_native {
    ($generic:ident, ($($arg:ident: $ty:ty),*), $name:ident, $j:ty) => {
        #[unsafe(no_mangle)]
        pub extern "system" fn $name<'l>(
            mut env: EnvUnowned<'l>,
            _class: JClass<'l>,
            src: JPrimitiveArray<'l, $j>,
            dst: JPrimitiveArray<'l, $j>,
            width: jint,
            height: jint,
            $($arg: $ty,)*
            backend: JString<'l>,
        ) {
            guarded(&mut env, |env| $generic::<$j>(env, &src, &dst, width, height, $($arg,)* &backend))
        }
    };
}

/// Mean over a `kw x kh` window (see `tessera_core::filter::mean_filter`).
#[allow(clippy::too_many_arguments)]
fn mean_filter<'l, J: JavaPixel>(
    env: &mut Env<'l>,
    src: &JPrimitiveArray<'l, J>,
    dst: &JPrimitiveArray<'l, J>,
    w: jint,
    h: jint,
    kw: jint,
    kh: jint,
    border_code: jint,
    border_value: jfloat,
    backend: &JString<'l>,
) -> Result<()> {
    let b = backend::select(&backend_name(env, backend)?)?;
    let p = BoxParams {
        width: count("kernel width", kw)?,
        height: count("kernel height", kh)?,
        border: border(border_code, border_value)?,
    };
    with_src_dst(env, src, dst, w, h, |s, d| b.mean_filter(s, d, &p))
}

typed_natives!(
    mean_filter,
    (kw: jint, kh: jint, border_code: jint, border_value: jfloat),
    Java_tessera_ij_Native_meanFilter8: jbyte,
    Java_tessera_ij_Native_meanFilter16: jshort,
    Java_tessera_ij_Native_meanFilter32: jfloat,
    Java_tessera_ij_Native_meanFilterRgb: jint,
);

/// Gaussian blur (see `tessera_core::filter::gaussian_blur`); `radius < 0` means the
/// default `ceil(3 sigma)`; `method` 0 auto, 1 FIR, 2 IIR.
#[allow(clippy::too_many_arguments)]
fn gaussian_blur<'l, J: JavaPixel>(
    env: &mut Env<'l>,
    src: &JPrimitiveArray<'l, J>,
    dst: &JPrimitiveArray<'l, J>,
    w: jint,
    h: jint,
    sigma: jdouble,
    radius: jint,
    method: jint,
    border_code: jint,
    border_value: jfloat,
    backend: &JString<'l>,
) -> Result<()> {
    let b = backend::select(&backend_name(env, backend)?)?;
    let method = match method {
        0 => GaussianMethod::Auto,
        1 => GaussianMethod::Fir,
        2 => GaussianMethod::Iir,
        m => return Err(bad_arg(format!("gaussian method = {m} is not one of 0 (auto), 1 (FIR), 2 (IIR)"))),
    };
    let p = GaussianParams {
        sigma,
        radius: if radius < 0 { None } else { Some(radius as usize) },
        method,
        border: border(border_code, border_value)?,
    };
    with_src_dst(env, src, dst, w, h, |s, d| b.gaussian_blur(s, d, &p))
}

typed_natives!(
    gaussian_blur,
    (sigma: jdouble, radius: jint, method: jint, border_code: jint, border_value: jfloat),
    Java_tessera_ij_Native_gaussianBlur8: jbyte,
    Java_tessera_ij_Native_gaussianBlur16: jshort,
    Java_tessera_ij_Native_gaussianBlur32: jfloat,
    Java_tessera_ij_Native_gaussianBlurRgb: jint,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn border_codes() {
        assert_eq!(border(0, 0.0).unwrap(), Border::Reflect101);
        assert_eq!(border(1, 0.0).unwrap(), Border::Replicate);
        assert_eq!(border(2, 7.0).unwrap(), Border::Constant(7.0));
        assert_eq!(border(3, 0.0).unwrap(), Border::Normalize);
        assert!(border(4, 0.0).is_err());
        assert!(border(-1, 0.0).is_err());
    }
}

//! Entry points of the local-statistics operations: `Native.localVariance{8,16,32,Rgb}`
//! (into a `float[]`), `Native.contrastEnhance{8,16,32,Rgb}` (same type out) and
//! `Native.glare{8,16,32,Rgb}` (a `byte[]` mask and a corrected image of the input's type).
//! Gray arrays are read and written in place (critical sections). These operations weigh
//! the colour channels (Rec. 601 luma, saturation), so an RGB image is first copied into
//! true-order RGBA (ImageJ's ints lie in memory as B, G, R, A) and, where the result is
//! RGB, copied back: one pass over the pixels each way, stated here because the gray paths
//! have none.

use crate::error::{bad_arg, Result};
use crate::filters::border;
use crate::pixels::{count, true_rgba, with_src_dst, with_src_dst2, write_imagej_rgba, JavaPixel};
use crate::{backend, backend_name, guarded};
use jni::objects::{JByteArray, JClass, JFloatArray, JIntArray, JPrimitiveArray, JString};
use jni::sys::{jbyte, jfloat, jint, jshort};
use jni::{Env, EnvUnowned};
use tessera_core::contrast::ContrastParams;
use tessera_core::glare::{GlareMode, GlareParams, GlareReport};
use tessera_core::variance::{VarianceKernel, VarianceMethod, VarianceParams};
use tessera_core::{AnyView, AnyViewMut, Backend, Image, Rgba8};

/// The six methods in the order of the Java API's method codes.
const METHODS: [VarianceMethod; 6] = [
    VarianceMethod::Usual,
    VarianceMethod::Koenig,
    VarianceMethod::Welford,
    VarianceMethod::Pairwise,
    VarianceMethod::Threewise,
    VarianceMethod::Recursive,
];

fn variance_params(method: jint, kernel: jint, radius: jint, border_code: jint, border_value: jfloat) -> Result<VarianceParams> {
    let method = usize::try_from(method)
        .ok()
        .and_then(|m| METHODS.get(m).copied())
        .ok_or_else(|| bad_arg(format!("variance method = {method} is not one of 0..=5 (usual, koenig, welford, pairwise, threewise, recursive)")))?;
    let radius = count("radius", radius)?;
    let kernel = match kernel {
        0 => VarianceKernel::Tent { radius },
        1 => VarianceKernel::Box { radius },
        k => return Err(bad_arg(format!("kernel = {k} is not one of 0 (tent), 1 (box)"))),
    };
    Ok(VarianceParams { method, kernel, border: border(border_code, border_value)? })
}

/// RGB in place (swapped channels) -> true order; other views as they are.
fn with_true_order<R>(src: AnyView<'_>, f: impl FnOnce(AnyView<'_>) -> tessera_core::Result<R>) -> tessera_core::Result<R> {
    match src {
        AnyView::Rgba8(v) => {
            let t = true_rgba(v)?;
            f(AnyView::Rgba8(t.view()))
        }
        other => f(other),
    }
}

/// Runs `op` from `src` into `dst` of the same type; an RGB pair goes through true-order
/// copies both ways.
fn same_type_op(
    src: AnyView<'_>,
    dst: AnyViewMut<'_>,
    op: impl FnOnce(AnyView<'_>, AnyViewMut<'_>) -> tessera_core::Result<()>,
) -> tessera_core::Result<()> {
    match (src, dst) {
        (AnyView::Rgba8(s), AnyViewMut::Rgba8(d)) => {
            let t = true_rgba(s)?;
            let mut out = Image::<Rgba8>::new(t.width(), t.height())?;
            op(AnyView::Rgba8(t.view()), AnyViewMut::Rgba8(out.view_mut()))?;
            write_imagej_rgba(&out, d)
        }
        (s, d) => op(s, d),
    }
}

fn f32_view(d: AnyViewMut<'_>) -> tessera_core::Result<tessera_core::ImageViewMut<'_, f32>> {
    match d {
        AnyViewMut::F32(v) => Ok(v),
        _ => Err(tessera_core::Error::UnsupportedType { op: "local variance", types: "an output other than f32" }),
    }
}

fn u8_view(d: AnyViewMut<'_>) -> tessera_core::Result<tessera_core::ImageViewMut<'_, u8>> {
    match d {
        AnyViewMut::U8(v) => Ok(v),
        _ => Err(tessera_core::Error::UnsupportedType { op: "glare", types: "a mask other than u8" }),
    }
}

#[allow(clippy::too_many_arguments)]
fn local_variance<'l, J: JavaPixel>(
    env: &mut Env<'l>,
    src: &JPrimitiveArray<'l, J>,
    dst: &JFloatArray<'l>,
    w: jint,
    h: jint,
    method: jint,
    kernel: jint,
    radius: jint,
    border_code: jint,
    border_value: jfloat,
    backend: &JString<'l>,
) -> Result<()> {
    let b = backend::select(&backend_name(env, backend)?)?;
    let p = variance_params(method, kernel, radius, border_code, border_value)?;
    with_src_dst(env, src, dst, w, h, |s, d| with_true_order(s, |s| b.local_variance(s, f32_view(d)?, &p)))
}

macro_rules! variance_natives {
    ($($name:ident: $j:ty),+ $(,)?) => {$(
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "system" fn $name<'l>(
            mut env: EnvUnowned<'l>,
            _class: JClass<'l>,
            src: JPrimitiveArray<'l, $j>,
            dst: JFloatArray<'l>,
            width: jint,
            height: jint,
            method: jint,
            kernel: jint,
            radius: jint,
            border_code: jint,
            border_value: jfloat,
            backend: JString<'l>,
        ) {
            guarded(&mut env, |env| local_variance::<$j>(env, &src, &dst, width, height, method, kernel, radius, border_code, border_value, &backend))
        }
    )+};
}
variance_natives!(
    Java_tessera_ij_Native_localVariance8: jbyte,
    Java_tessera_ij_Native_localVariance16: jshort,
    Java_tessera_ij_Native_localVariance32: jfloat,
    Java_tessera_ij_Native_localVarianceRgb: jint,
);

/// The tent radii from a Java `int[]` (null or empty: an error naming them).
fn radii(env: &Env<'_>, a: &JIntArray<'_>) -> Result<Vec<usize>> {
    if a.as_raw().is_null() {
        return Err(bad_arg("radii is null"));
    }
    let mut v = vec![0; a.len(env)?];
    a.get_region(env, 0, &mut v)?;
    v.into_iter().map(|r| count("radius", r)).collect()
}

#[allow(clippy::too_many_arguments)]
fn contrast<'l, J: JavaPixel>(
    env: &mut Env<'l>,
    src: &JPrimitiveArray<'l, J>,
    dst: &JPrimitiveArray<'l, J>,
    w: jint,
    h: jint,
    radii_arr: &JIntArray<'l>,
    alpha: jfloat,
    gain_max: jfloat,
    gain_min: jfloat,
    noise: jfloat,
    backend: &JString<'l>,
) -> Result<()> {
    let b = backend::select(&backend_name(env, backend)?)?;
    let p = ContrastParams { radii: radii(env, radii_arr)?, alpha, gain_max, gain_min, noise, ..ContrastParams::default() };
    with_src_dst(env, src, dst, w, h, |s, d| same_type_op(s, d, |s, d| b.contrast_enhance(s, d, &p)))
}

macro_rules! contrast_natives {
    ($($name:ident: $j:ty),+ $(,)?) => {$(
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "system" fn $name<'l>(
            mut env: EnvUnowned<'l>,
            _class: JClass<'l>,
            src: JPrimitiveArray<'l, $j>,
            dst: JPrimitiveArray<'l, $j>,
            width: jint,
            height: jint,
            radii: JIntArray<'l>,
            alpha: jfloat,
            gain_max: jfloat,
            gain_min: jfloat,
            noise: jfloat,
            backend: JString<'l>,
        ) {
            guarded(&mut env, |env| contrast::<$j>(env, &src, &dst, width, height, &radii, alpha, gain_max, gain_min, noise, &backend))
        }
    )+};
}
contrast_natives!(
    Java_tessera_ij_Native_contrastEnhance8: jbyte,
    Java_tessera_ij_Native_contrastEnhance16: jshort,
    Java_tessera_ij_Native_contrastEnhance32: jfloat,
    Java_tessera_ij_Native_contrastEnhanceRgb: jint,
);

fn describe(r: &GlareReport) -> String {
    format!(
        "{} spots, {} pixels; thresholds: brightness {:.3}, contrast {:.3} of the full scale {}",
        r.spots, r.pixels, r.brightness, r.min_contrast, r.full_scale
    )
}

#[allow(clippy::too_many_arguments)]
fn glare<'l, J: JavaPixel>(
    env: &mut Env<'l>,
    src: &JPrimitiveArray<'l, J>,
    mask: &JByteArray<'l>,
    corrected: &JPrimitiveArray<'l, J>,
    w: jint,
    h: jint,
    adaptive: bool,
    radii_arr: &JIntArray<'l>,
    k_sigma: jfloat,
    brightness: jfloat,
    min_contrast: jfloat,
    max_saturation: jfloat,
    min_area: jint,
    max_area: jint,
    grow: jint,
    fill_iterations: jint,
    backend: &JString<'l>,
) -> Result<JString<'l>> {
    let b: &dyn Backend = backend::select(&backend_name(env, backend)?)?;
    let p = GlareParams {
        mode: if adaptive { GlareMode::Adaptive } else { GlareMode::Manual },
        radii: radii(env, radii_arr)?,
        k_sigma,
        brightness,
        min_contrast,
        max_saturation,
        min_area: count("min area", min_area)?,
        max_area: count("max area", max_area)?,
        grow: count("grow", grow)?,
        fill_iterations: count("fill iterations", fill_iterations)?,
        ..GlareParams::default()
    };
    let report = with_src_dst2(env, src, mask, corrected, w, h, |s, m, c| {
        let m = u8_view(m)?;
        match (s, c) {
            (AnyView::Rgba8(s), AnyViewMut::Rgba8(c)) => {
                let t = true_rgba(s)?;
                let mut out = Image::<Rgba8>::new(t.width(), t.height())?;
                let r = b.glare(AnyView::Rgba8(t.view()), m, AnyViewMut::Rgba8(out.view_mut()), &p)?;
                write_imagej_rgba(&out, c)?;
                Ok(r)
            }
            (s, c) => b.glare(s, m, c, &p),
        }
    })?;
    Ok(JString::from_str(env, describe(&report))?)
}

macro_rules! glare_natives {
    ($($name:ident: $j:ty),+ $(,)?) => {$(
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "system" fn $name<'l>(
            mut env: EnvUnowned<'l>,
            _class: JClass<'l>,
            src: JPrimitiveArray<'l, $j>,
            mask: JByteArray<'l>,
            corrected: JPrimitiveArray<'l, $j>,
            width: jint,
            height: jint,
            adaptive: jni::sys::jboolean,
            radii: JIntArray<'l>,
            k_sigma: jfloat,
            brightness: jfloat,
            min_contrast: jfloat,
            max_saturation: jfloat,
            min_area: jint,
            max_area: jint,
            grow: jint,
            fill_iterations: jint,
            backend: JString<'l>,
        ) -> JString<'l> {
            guarded(&mut env, |env| glare::<$j>(env, &src, &mask, &corrected, width, height, adaptive, &radii, k_sigma,
                brightness, min_contrast, max_saturation, min_area, max_area, grow, fill_iterations, &backend))
        }
    )+};
}
glare_natives!(
    Java_tessera_ij_Native_glare8: jbyte,
    Java_tessera_ij_Native_glare16: jshort,
    Java_tessera_ij_Native_glare32: jfloat,
    Java_tessera_ij_Native_glareRgb: jint,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variance_codes() {
        let p = variance_params(5, 0, 7, 0, 0.0).unwrap();
        assert_eq!(p.method, VarianceMethod::Recursive);
        assert_eq!(p.kernel, VarianceKernel::Tent { radius: 7 });
        assert_eq!(variance_params(0, 1, 63, 1, 0.0).unwrap().kernel, VarianceKernel::Box { radius: 63 });
        assert!(variance_params(6, 0, 7, 0, 0.0).is_err());
        assert!(variance_params(-1, 0, 7, 0, 0.0).is_err());
        assert!(variance_params(0, 2, 7, 0, 0.0).is_err());
        assert!(variance_params(0, 0, -7, 0, 0.0).is_err());
    }

    #[test]
    fn rgb_order_round_trip() {
        let ij = Image::from_vec(2, 1, vec![Rgba8::new(1, 2, 3, 4), Rgba8::new(5, 6, 7, 8)]).unwrap();
        let t = true_rgba(ij.view()).unwrap();
        assert_eq!(t.as_slice()[0], Rgba8::new(3, 2, 1, 4));
        let mut back = Image::<Rgba8>::new(2, 1).unwrap();
        write_imagej_rgba(&t, back.view_mut()).unwrap();
        assert_eq!(back, ij);
    }
}

//! Entry points of the local-statistics operations: `Native.localVariance` (into a
//! `float[]`), `Native.contrastEnhance` (same type out) and `Native.glare` (a `byte[]` mask
//! and a corrected image of the input's type), with the options of the command-line
//! program's `variance`, `contrast` and `glare`. Arrays are read and written in place;
//! these operations weigh the colour channels (Rec. 601 luma, saturation), so RGB is
//! converted once on the way in and swapped in place on the way out
//! ([`weighted_channels`]).

use crate::error::{bad_arg, Result};
use crate::filters::src_dst_native;
use crate::options::{named, Op, Visitor};
use crate::pixels::{in_true_order, weighted_channels, with_views, Kind, PixelArray};
use crate::{guarded, options};
use jni::objects::{JClass, JObject, JString};
use jni::sys::jint;
use jni::{jni_sig, jni_str, EnvUnowned};
use tessera_core::contrast::ContrastParams;
use tessera_core::glare::{GlareParams, GlareReport};
use tessera_core::variance::{VarianceKernel, VarianceParams};
use tessera_core::{AnyViewMut, Error, ImageViewMut};

/// The kernel's shape, without its radius (a separate option).
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Tent,
    Box,
}
named!(Shape { "tent" => Shape::Tent, "box" => Shape::Box });

/// `method`, `kernel` (`tent`, `box`), `radius`, `border`.
impl Op for VarianceParams {
    const NAME: &'static str = "variance";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        v.field("method", &mut self.method)?;
        let mut shape = match self.kernel {
            VarianceKernel::Tent { .. } => Shape::Tent,
            VarianceKernel::Box { .. } => Shape::Box,
        };
        let mut radius = self.kernel.radius();
        v.field("kernel", &mut shape)?;
        v.field("radius", &mut radius)?;
        self.kernel = match shape {
            Shape::Tent => VarianceKernel::Tent { radius },
            Shape::Box => VarianceKernel::Box { radius },
        };
        v.field("border", &mut self.border)
    }
}

/// `radii` (tent radii, comma-separated), `alpha`, `gain-max`, `gain-min`, `noise`, `border`.
impl Op for ContrastParams {
    const NAME: &'static str = "contrast";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        v.field("radii", &mut self.radii)?;
        v.field("alpha", &mut self.alpha)?;
        v.field("gain-max", &mut self.gain_max)?;
        v.field("gain-min", &mut self.gain_min)?;
        v.field("noise", &mut self.noise)?;
        v.field("border", &mut self.border)
    }
}


/// `mode` (`adaptive`, `manual`), `radii` (box radii), `k-sigma`, `brightness`,
/// `min-contrast`, `max-saturation`, `min-area`, `max-area`, `max-elongation`, `grow`,
/// `fill-grow`, `fill-iterations`, `border`.
impl Op for GlareParams {
    const NAME: &'static str = "glare";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        v.field("mode", &mut self.mode)?;
        v.field("radii", &mut self.radii)?;
        v.field("k-sigma", &mut self.k_sigma)?;
        v.field("brightness", &mut self.brightness)?;
        v.field("min-contrast", &mut self.min_contrast)?;
        v.field("max-saturation", &mut self.max_saturation)?;
        v.field("min-area", &mut self.min_area)?;
        v.field("max-area", &mut self.max_area)?;
        v.field("max-elongation", &mut self.max_elongation)?;
        v.field("grow", &mut self.grow)?;
        v.field("fill-grow", &mut self.fill_grow)?;
        v.field("fill-iterations", &mut self.fill_iterations)?;
        v.field("border", &mut self.border)
    }
}

/// The `float[]` a variance is written into (its type checked before, by `src_to_dst`).
fn f32_out(d: AnyViewMut<'_>) -> tessera_core::Result<ImageViewMut<'_, f32>> {
    match d {
        AnyViewMut::F32(v) => Ok(v),
        _ => Err(Error::UnsupportedType { op: "local variance", types: "an output other than float[]" }),
    }
}

/// The `byte[]` a glare mask is written into (its type checked before).
fn u8_out(d: AnyViewMut<'_>) -> tessera_core::Result<ImageViewMut<'_, u8>> {
    match d {
        AnyViewMut::U8(v) => Ok(v),
        _ => Err(Error::UnsupportedType { op: "glare", types: "a mask other than byte[]" }),
    }
}

src_dst_native!(
    /// `void Native.localVariance(Object src, float[] dst, ...)`: the weighted variance
    /// around every pixel (RGB: of its Rec. 601 luma).
    Java_tessera_ij_Native_nativeLocalVariance: VarianceParams, Some(Kind::F32), |b, p, s, d| {
        in_true_order(s, |s| b.local_variance(s, f32_out(d)?, p))
    }
);

src_dst_native!(
    /// `void Native.contrastEnhance(...)`: multi-scale local contrast enhancement (RGB: on
    /// the luma, keeping hue).
    Java_tessera_ij_Native_nativeContrastEnhance: ContrastParams, None, |b, p, s, d| {
        weighted_channels(s, d, |s, d| b.contrast_enhance(s, d, p))
    }
);

/// The one-line report of a glare run, as the plugin logs it.
fn describe(r: &GlareReport) -> String {
    format!(
        "{} spots, {} pixels; thresholds: brightness {:.3}, contrast {:.3} of the full scale {}",
        r.spots, r.pixels, r.brightness, r.min_contrast, r.full_scale
    )
}

/// `GlareResult Native.glare(Object src, byte[] mask, Object corrected, int width, int
/// height, String options)`: `mask` gets 255 on glare, `corrected` (the type of `src`) the
/// image with the glare filled; the result names the spots, pixels and thresholds.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_tessera_ij_Native_nativeGlare<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    src: JObject<'l>,
    mask: JObject<'l>,
    corrected: JObject<'l>,
    width: jint,
    height: jint,
    options: JString<'l>,
) -> JObject<'l> {
    guarded(&mut env, |env| {
        let (p, b) = options::from_java::<GlareParams>(env, &options)?;
        let s = PixelArray::of(env, &src, "src")?;
        let (m, c) = (PixelArray::of(env, &mask, "mask")?, PixelArray::of(env, &corrected, "corrected")?);
        if c.kind != s.kind || m.kind != Kind::U8 {
            return Err(bad_arg(format!(
                "glare writes a byte[] mask and a corrected {} like src; got a {} and a {}",
                s.kind.java(),
                m.kind.java(),
                c.kind.java()
            )));
        }
        let r = with_views(env, [&s], [&m, &c], width, height, |[s], [m, c]| {
            let m = u8_out(m)?;
            weighted_channels(s, c, |s, c| b.glare(s, m, c, &p))
        })?;
        let summary = JString::from_str(env, describe(&r))?;
        Ok(env.new_object(
            jni_str!("tessera/ij/GlareResult"),
            jni_sig!("(IJFFFLjava/lang/String;)V"),
            &[
                (r.spots as jint).into(),
                (r.pixels as i64).into(),
                r.brightness.into(),
                r.min_contrast.into(),
                r.full_scale.into(),
                (&summary).into(),
            ],
        )?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse;
    use tessera_core::glare::GlareMode;
    use tessera_core::variance::VarianceMethod;

    #[test]
    fn variance_options() {
        let (p, _) = parse::<VarianceParams>(Some("method=welford kernel=box radius=63 border=replicate")).unwrap();
        assert_eq!(p.method, VarianceMethod::Welford);
        assert_eq!(p.kernel, VarianceKernel::Box { radius: 63 });
        let d = parse::<VarianceParams>(None).unwrap().0;
        assert_eq!((d.method, d.kernel), (VarianceMethod::Recursive, VarianceKernel::Tent { radius: 7 }));
        assert!(parse::<VarianceParams>(Some("method=fast")).is_err());
        assert!(parse::<VarianceParams>(Some("kernel=disc")).is_err());
        assert!(parse::<VarianceParams>(Some("radius=-7")).is_err());
    }

    #[test]
    fn contrast_and_glare_options() {
        let (c, _) = parse::<ContrastParams>(Some("radii=[3, 15] gain-max=2.5")).unwrap();
        assert_eq!((c.radii, c.gain_max, c.alpha), (vec![3, 15], 2.5, 1.0));
        let (g, _) = parse::<GlareParams>(Some("mode=manual brightness=0.9 min-area=4")).unwrap();
        assert_eq!((g.mode, g.brightness, g.min_area, g.radii), (GlareMode::Manual, 0.9, 4, vec![5, 15, 45]));
        assert!(parse::<GlareParams>(Some("mode=auto")).is_err());
    }
}

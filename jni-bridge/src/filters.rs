//! Entry points of the sliding-window filters: `Native.meanFilter` and
//! `Native.gaussianBlur`. Each reads `src` and writes `dst` (distinct arrays of the same
//! type, `width * height` pixels, any of ImageJ's four types) in place, with the options of
//! the command-line program's `mean` and `gauss`.

use crate::error::{bad_arg, Result};
use crate::options::{named, OptValue, Op, Visitor};
use crate::pixels::{with_views, PixelArray};
use crate::{guarded, options};
use jni::objects::{JClass, JObject, JString};
use jni::sys::jint;
use jni::{Env, EnvUnowned};
use tessera_core::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera_core::{AnyView, AnyViewMut, Backend, Border};

/// `reflect101` (also `reflect-101`, `mirror`), `replicate` (`clamp`), `normalize` (a
/// mean over the in-image pixels only) or `constant:V`, as the command line spells them.
impl OptValue for Border {
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "reflect101" | "reflect-101" | "mirror" => Ok(Border::Reflect101),
            "replicate" | "clamp" => Ok(Border::Replicate),
            "normalize" => Ok(Border::Normalize),
            other => match other.strip_prefix("constant:").map(str::parse) {
                Some(Ok(v)) => Ok(Border::Constant(v)),
                _ => Err("expected reflect101, replicate, normalize or constant:V (V a number)".into()),
            },
        }
    }
    fn show(&self) -> String {
        match self {
            Border::Reflect101 => "reflect101".into(),
            Border::Replicate => "replicate".into(),
            Border::Normalize => "normalize".into(),
            Border::Constant(v) => format!("constant:{v}"),
        }
    }
}

named!(GaussianMethod { "auto" => GaussianMethod::Auto, "fir" => GaussianMethod::Fir, "iir" => GaussianMethod::Iir });

/// `width`, `height` (the window), `border`.
impl Op for BoxParams {
    const NAME: &'static str = "mean";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        v.field("width", &mut self.width)?;
        v.field("height", &mut self.height)?;
        v.field("border", &mut self.border)
    }
}

/// `sigma`, `radius` (`auto`: ceil(3 sigma)), `method` (`auto`, `fir`, `iir`), `border`.
impl Op for GaussianParams {
    const NAME: &'static str = "gauss";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        v.field("sigma", &mut self.sigma)?;
        v.field("radius", &mut self.radius)?;
        v.field("method", &mut self.method)?;
        v.field("border", &mut self.border)
    }
}

/// The body of a filter entry point: `op` from `src` into `dst`, both of one type, with the
/// parameters and backend of `options`.
pub fn src_to_dst<P: Op>(
    env: &mut Env<'_>,
    src: &JObject<'_>,
    dst: &JObject<'_>,
    (w, h): (jint, jint),
    options: &JString<'_>,
    op: impl FnOnce(&dyn Backend, &P, AnyView<'_>, AnyViewMut<'_>) -> tessera_core::Result<()>,
) -> Result<()> {
    let (p, b) = options::from_java::<P>(env, options)?;
    let (s, d) = (PixelArray::of(env, src, "src")?, PixelArray::of(env, dst, "dst")?);
    same_type(&s, &d)?;
    with_views(env, [&s], [&d], w, h, |[s], [d]| op(b, &p, s, d))
}

/// Checks that an output has its input's pixel type.
pub fn same_type(src: &PixelArray<'_, '_>, dst: &PixelArray<'_, '_>) -> Result<()> {
    if src.kind != dst.kind {
        return Err(bad_arg(format!("src and dst pixel arrays have different types ({:?} and {:?})", src.kind, dst.kind)));
    }
    Ok(())
}

/// `void Native.meanFilter(Object src, Object dst, int width, int height, String options)`:
/// the mean over a `width x height` window (see `tessera_core::filter::mean_filter`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_nativeMeanFilter<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    src: JObject<'l>,
    dst: JObject<'l>,
    width: jint,
    height: jint,
    options: JString<'l>,
) {
    guarded(&mut env, |env| {
        src_to_dst::<BoxParams>(env, &src, &dst, (width, height), &options, |b, p, s, d| b.mean_filter(s, d, p))
    })
}

/// `void Native.gaussianBlur(Object src, Object dst, int width, int height, String options)`
/// (see `tessera_core::filter::gaussian_blur`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_nativeGaussianBlur<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    src: JObject<'l>,
    dst: JObject<'l>,
    width: jint,
    height: jint,
    options: JString<'l>,
) {
    guarded(&mut env, |env| {
        src_to_dst::<GaussianParams>(env, &src, &dst, (width, height), &options, |b, p, s, d| b.gaussian_blur(s, d, p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse;

    #[test]
    fn border_names() {
        for (s, b) in [("reflect101", Border::Reflect101), ("replicate", Border::Replicate), ("normalize", Border::Normalize), ("constant:7.5", Border::Constant(7.5))] {
            assert_eq!(Border::parse(s).unwrap(), b);
            assert_eq!(Border::parse(&b.show()).unwrap(), b);
        }
        assert_eq!(Border::parse("reflect-101").unwrap(), Border::Reflect101);
        assert!(Border::parse("constant:x").is_err());
        assert!(Border::parse("wrap").is_err());
    }

    #[test]
    fn mean_and_gauss_options() {
        let (p, _) = parse::<BoxParams>(Some("width=15 height=7 border=replicate backend=cpu")).unwrap();
        assert_eq!(p, BoxParams { width: 15, height: 7, border: Border::Replicate });
        let (g, _) = parse::<GaussianParams>(Some("sigma=2.5 method=iir backend=cpu")).unwrap();
        assert_eq!((g.sigma, g.radius, g.method), (2.5, None, GaussianMethod::Iir));
        assert_eq!(parse::<GaussianParams>(Some("radius=9")).unwrap().0.radius, Some(9));
        assert!(parse::<GaussianParams>(Some("method=box")).is_err());
    }
}

//! Entry points of the sliding-window filters: `Native.meanFilter` and
//! `Native.gaussianBlur`. Each reads `src` and writes `dst` (distinct arrays of the same
//! type, `width * height` pixels, any of ImageJ's four types) in place, with the options of
//! the command-line program's `mean` and `gauss`.

use crate::error::{bad_arg, Result};
use crate::options::{OptValue, Op, Visitor};
use crate::options;
use crate::pixels::{with_views, Kind, PixelArray};
use jni::objects::{JObject, JString};
use jni::sys::jint;
use jni::Env;
use tessera_core::filter::{BoxParams, GaussianParams};
use tessera_core::{AnyView, AnyViewMut, Backend, Border};

/// `reflect101` (also `reflect-101`, `mirror`), `replicate` (`clamp`), `normalize` (a
/// mean over the in-image pixels only) or `constant:V`, as the command line spells them.
impl OptValue for Border {
    /// The core's parser (`Border`'s `FromStr`), with the plugin's message.
    fn parse(s: &str) -> std::result::Result<Self, String> {
        s.parse().map_err(|_| "expected reflect101, replicate, normalize or constant:V (V a number)".into())
    }
    /// The core's name (`Border`'s `Display`).
    fn show(&self) -> String {
        self.to_string()
    }
}

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

/// The body of an entry point from `src` into `dst`: `op` with the parameters and backend
/// of `options`. `dst` has `src`'s pixel type, or `dst_kind` when one is given.
pub fn src_to_dst<P: Op>(
    env: &mut Env<'_>,
    (src, dst): (&JObject<'_>, &JObject<'_>),
    (w, h): (jint, jint),
    options: &JString<'_>,
    dst_kind: Option<Kind>,
    op: impl FnOnce(&dyn Backend, &P, AnyView<'_>, AnyViewMut<'_>) -> tessera_core::Result<()>,
) -> Result<()> {
    let (p, b) = options::from_java::<P>(env, options)?;
    let (s, d) = (PixelArray::of(env, src, "src")?, PixelArray::of(env, dst, "dst")?);
    let want = dst_kind.unwrap_or(s.kind);
    if d.kind != want {
        return Err(bad_arg(format!("dst is a {} array; {} takes a {} one here", d.kind.java(), P::NAME, want.java())));
    }
    with_views(env, [&s], [&d], w, h, |[s], [d]| op(b, &p, s, d))
}

/// A `void Native.<name>(Object src, Object dst, int width, int height, String options)`
/// entry point: [`src_to_dst`] with operation `$params`, output type `$dst_kind`, running
/// `$op`.
macro_rules! src_dst_native {
    ($(#[$doc:meta])* $name:ident: $params:ty, $dst_kind:expr, $op:expr) => {
        $(#[$doc])*
        #[unsafe(no_mangle)]
        pub extern "system" fn $name<'l>(
            mut env: jni::EnvUnowned<'l>,
            _class: jni::objects::JClass<'l>,
            src: jni::objects::JObject<'l>,
            dst: jni::objects::JObject<'l>,
            width: jni::sys::jint,
            height: jni::sys::jint,
            options: jni::objects::JString<'l>,
        ) {
            crate::guarded(&mut env, |env| {
                crate::filters::src_to_dst::<$params>(env, (&src, &dst), (width, height), &options, $dst_kind, $op)
            })
        }
    };
}
pub(crate) use src_dst_native;

src_dst_native!(
    /// `void Native.meanFilter(...)`: the mean over a `width x height` window (see
    /// `tessera_core::filter::mean_filter`).
    Java_tessera_ij_Native_nativeMeanFilter: BoxParams, None, |b, p, s, d| b.mean_filter(s, d, p)
);

src_dst_native!(
    /// `void Native.gaussianBlur(...)` (see `tessera_core::filter::gaussian_blur`).
    Java_tessera_ij_Native_nativeGaussianBlur: GaussianParams, None, |b, p, s, d| b.gaussian_blur(s, d, p)
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse;
    use tessera_core::filter::GaussianMethod;

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
        for m in [GaussianMethod::Auto, GaussianMethod::Fir, GaussianMethod::Iir] {
            assert_eq!(GaussianMethod::parse(&m.show()).unwrap(), m);
        }
    }
}

//! Entry point of semi-global matching: `Native.stereoSgm(Object left, Object right,
//! float[] disp, int width, int height, String options)`, both images 8-bit gray or both
//! RGB, read in place through critical sections, with the options of the command-line
//! program's `stereo`. RGB is converted once into true-order RGBA: census and MI match on
//! the Rec. 601 luma, which weighs the channels.

use crate::error::{bad_arg, Result};
use crate::options::{Op, OptValue, Visitor};
use crate::pixels::{in_true_order, with_views, Kind, PixelArray};
use crate::{guarded, options};
use jni::objects::{JClass, JObject, JString};
use jni::sys::jint;
use jni::{jni_sig, jni_str, EnvUnowned};
use tessera_core::choice::names;
use tessera_core::stereo::{Cost, CostKind, Paths, StereoParams, StereoStats};
use tessera_core::Choice;
use tessera_core::{AnyViewMut, Error};

/// The name of the hierarchical MI preset, beside the core's cost kinds.
const MI_HIERARCHICAL: &str = "mi-hierarchical";

/// `census` (7 x 5), `ad`, `mi` (the core's cost kinds by their names, at their default
/// settings) or `mi-hierarchical` ([`Cost::MI_HIERARCHICAL`]).
impl OptValue for Cost {
    fn parse(s: &str) -> std::result::Result<Self, String> {
        if s == MI_HIERARCHICAL {
            return Ok(Cost::MI_HIERARCHICAL);
        }
        CostKind::from_name(s).map(CostKind::default_cost).map_err(|_| format!("expected one of {}, {MI_HIERARCHICAL}", names::<CostKind>().join(", ")))
    }
    /// Meets only the defaults and what `parse` made: a cost of a kind at its default
    /// settings, or the hierarchical preset.
    fn show(&self) -> String {
        if *self == Cost::MI_HIERARCHICAL { MI_HIERARCHICAL.into() } else { self.kind().name().into() }
    }
}

/// 4, 5, 8 or 16.
impl OptValue for Paths {
    fn parse(s: &str) -> std::result::Result<Self, String> {
        let n = usize::parse(s)?;
        Paths::from_count(n).map_err(|e| e.to_string())
    }
    fn show(&self) -> String {
        self.count().to_string()
    }
}

/// `max-disp`, `cost` (`census` 7 x 5, `ad`, `mi`, `mi-hierarchical`), `paths`, `p1`,
/// `p2` (`auto`: the cost's defaults), `fixed-p2`, `uniqueness`, `subpixel`, `lr-check`,
/// `median`, `fill`.
impl Op for StereoParams {
    const NAME: &'static str = "stereo";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        v.field("max-disp", &mut self.max_disparity)?;
        v.field("cost", &mut self.cost)?;
        v.field("paths", &mut self.paths)?;
        v.field("p1", &mut self.p1)?;
        v.field("p2", &mut self.p2)?;
        let mut fixed = !self.adaptive_p2;
        v.field("fixed-p2", &mut fixed)?;
        self.adaptive_p2 = !fixed;
        v.field("uniqueness", &mut self.uniqueness)?;
        v.field("subpixel", &mut self.subpixel)?;
        v.field("lr-check", &mut self.lr_check)?;
        v.field("median", &mut self.median)?;
        v.field("fill", &mut self.fill)
    }
}

/// The one-line summary of a run, as the plugin shows it.
fn describe(s: &StereoStats) -> String {
    format!(
        "valid {}, rejected by uniqueness {}, rejected by the left-right check {}, filled {}, P1 {}, P2 {}, tiles {}",
        s.valid, s.rejected_uniqueness, s.rejected_lr, s.filled, s.p1, s.p2, s.tiles
    )
}

/// `StereoResult Native.stereoSgm(...)` (module doc): the left disparity map into `disp`
/// (invalid pixels +Infinity) and the run's counts.
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_nativeStereoSgm<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    left: JObject<'l>,
    right: JObject<'l>,
    disp: JObject<'l>,
    width: jint,
    height: jint,
    options: JString<'l>,
) -> JObject<'l> {
    guarded(&mut env, |env| {
        let (p, b) = options::from_java::<StereoParams>(env, &options)?;
        let (l, r, d) = (PixelArray::of(env, &left, "left")?, PixelArray::of(env, &right, "right")?, PixelArray::of(env, &disp, "disp")?);
        if l.kind != r.kind || !matches!(l.kind, Kind::U8 | Kind::Rgb) {
            return Err(bad_arg("stereo matching takes two 8-bit gray or two RGB images; convert 16-bit or 32-bit images to 8-bit first"));
        }
        if d.kind != Kind::F32 {
            return Err(bad_arg("the disparity map is a float[]"));
        }
        let s = with_views(env, [&l, &r], [&d], width, height, |[l, r], [d]| {
            let AnyViewMut::F32(d) = d else {
                return Err(Error::UnsupportedType { op: "stereo", types: "a disparity map other than float[]" });
            };
            in_true_order(l, |l| in_true_order(r, |r| b.stereo_sgm(l, r, d, &p)))
        })?;
        let summary = JString::from_str(env, describe(&s))?;
        Ok(env.new_object(
            jni_str!("tessera/ij/StereoResult"),
            jni_sig!("(JJJJIIILjava/lang/String;)V"),
            &[
                (s.valid as i64).into(),
                (s.rejected_uniqueness as i64).into(),
                (s.rejected_lr as i64).into(),
                (s.filled as i64).into(),
                (s.tiles as jint).into(),
                jint::from(s.p1).into(),
                jint::from(s.p2).into(),
                (&summary).into(),
            ],
        )?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse;

    #[test]
    fn stereo_options() {
        let p = parse::<StereoParams>(None).unwrap().0;
        assert_eq!((p.cost, p.paths, p.p1, p.p2, p.adaptive_p2), (Cost::CENSUS_7X5, Paths::Eight, None, None, true));
        let (p, _) = parse::<StereoParams>(Some("max-disp=128 cost=mi-hierarchical paths=16 p1=7 p2=90 fixed-p2 uniqueness=10 median=false")).unwrap();
        assert_eq!((p.max_disparity, p.cost, p.paths), (128, Cost::MI_HIERARCHICAL, Paths::Sixteen));
        assert_eq!((p.p1, p.p2, p.adaptive_p2, p.uniqueness, p.median), (Some(7), Some(90), false, 10, false));
        assert!(parse::<StereoParams>(Some("paths=6")).is_err());
        assert!(parse::<StereoParams>(Some("cost=sad")).is_err());
        assert!(parse::<StereoParams>(Some("p1=70000")).is_err());
        assert!(parse::<StereoParams>(Some("uniqueness=300")).is_err());
    }
}

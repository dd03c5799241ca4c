//! Entry points of panorama stitching: `Native.registerPair` (one frame pair, the unit that
//! Benchmark... times) and `Native.stitch` (a whole sequence: registration and composite),
//! with the options of the command-line program's `stitch` (`rsz`, `npts`, `cthresh`, ...).
//!
//! A pair is read in place through critical sections like the filters. A sequence is
//! different: it runs for seconds and calls a Java progress callback between frames, which
//! may cancel it (a JNI call, forbidden inside a critical section, and the GC must not be
//! held off that long), so each frame is copied into Rust memory first (one pass per frame,
//! small next to the registration) and the canvas comes back as a new Java array. RGB is
//! converted once each way on those copies (registration weighs the channels: Rec. 601 luma).
//! Results come back as `PairResult` / `StitchResult` objects with named fields.

use crate::error::{bad_arg, BridgeError, Result};
use crate::options::{Op, Visitor};
use crate::pixels::{dims, in_true_order, owned, to_java, with_views, PixelArray};
use crate::progress::with_java_progress;
use crate::{guarded, options};
use jni::objects::{JClass, JObject, JObjectArray, JString, JValue};
use jni::sys::{jdouble, jint};
use jni::{jni_sig, jni_str, Env, EnvUnowned};
use tessera_core::stitch::{FrameRecord, InMemory, Panorama, RegisterParams, Similarity, StitchParams};
use tessera_core::AnyView;


/// `rsz`, `accept` (`adaptive`, `fixed`), `cthresh`, `null-margin`, `min-coefficient`,
/// `npts`, `search-radius`, `min-variance`, `method` (`log`, `log-plain`, `exhaustive`),
/// `subpixel`, `refine`, `motion` (`translation`, `similarity`), `fit-scale` and `max-turn`
/// (degrees).
impl Op for RegisterParams {
    const NAME: &'static str = "register";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        v.field("rsz", &mut self.rsz)?;
        v.field("accept", &mut self.acceptance)?;
        v.field("cthresh", &mut self.cthresh)?;
        v.field("null-margin", &mut self.null_margin)?;
        v.field("min-coefficient", &mut self.min_coefficient)?;
        v.field("npts", &mut self.npts)?;
        v.field("search-radius", &mut self.search_radius)?;
        v.field("min-variance", &mut self.min_variance)?;
        v.field("method", &mut self.method)?;
        v.field("subpixel", &mut self.subpixel)?;
        v.field("refine", &mut self.refine)?;
        v.field("motion", &mut self.motion)?;
        v.field("fit-scale", &mut self.fit_scale)?;
        v.field("max-turn", &mut self.max_turn)
    }
}

/// The registration's options, then `blend` (`overwrite`, `average`, `feather`),
/// `keyframe-shift`, `coarse` (coarse candidates), `grow` (grow templates), `loops`
/// (close loops and solve the positions together), `whole-overlap` (let the whole
/// overlap decide where templates are too faint), `refine-every-pair` (refine every
/// pair on the whole overlap) and `detect-zoom` (fit the scale from the first pair that
/// shows a clear zoom on).
impl Op for StitchParams {
    const NAME: &'static str = "stitch";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        self.register.visit(v)?;
        v.field("blend", &mut self.blend)?;
        v.field("keyframe-shift", &mut self.keyframe_shift)?;
        v.field("coarse", &mut self.coarse_candidates)?;
        v.field("grow", &mut self.grow_templates)?;
        v.field("loops", &mut self.close_loops)?;
        v.field("whole-overlap", &mut self.whole_overlap)?;
        v.field("refine-every-pair", &mut self.refine_every_pair)?;
        v.field("detect-zoom", &mut self.detect_zoom)
    }
}

/// `PairResult Native.registerPair(Object reference, Object moving, int width, int height,
/// double predX, double predY, String options)`: the shift of `moving` against `reference`
/// (both `width x height`, one pixel type), searched around the predicted (predX, predY),
/// with its rotation (degrees) and scale: the moving pixel (u, v) shows the reference at
/// (x, y) + scale R(angle) (u, v), the core's contract ([`PairRegistration::motion`]).
///
/// [`PairRegistration::motion`]: tessera_core::stitch::PairRegistration::motion
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_tessera_ij_Native_nativeRegisterPair<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    reference: JObject<'l>,
    moving: JObject<'l>,
    width: jint,
    height: jint,
    pred_x: jdouble,
    pred_y: jdouble,
    options: JString<'l>,
) -> JObject<'l> {
    guarded(&mut env, |env| {
        let (p, b) = options::from_java::<RegisterParams>(env, &options)?;
        p.validate()?;
        let (r, m) = (PixelArray::of(env, &reference, "reference")?, PixelArray::of(env, &moving, "moving")?);
        if r.kind != m.kind {
            return Err(bad_arg("reference and moving frames have different pixel types"));
        }
        let reg = with_views(env, [&r, &m], [], width, height, |[r, m], []| {
            in_true_order(r, |r| in_true_order(m, |m| b.register_pair(r, m, &p, (pred_x, pred_y))))
        })?;
        let [x, y, angle, scale] = pose_values(reg.motion());
        let skip = reason(env, reg.skip.map(|s| s.describe()))?;
        Ok(env.new_object(
            jni_str!("tessera/ij/PairResult"),
            jni_sig!("(ZDDDDDIIDJLjava/lang/String;)V"),
            &[
                reg.shift.is_some().into(),
                x.into(),
                y.into(),
                angle.into(),
                scale.into(),
                reg.ncc.into(),
                (reg.vectors_used as jint).into(),
                (reg.templates as jint).into(),
                reg.confidence.into(),
                (reg.evaluations as i64).into(),
                (&skip).into(),
            ],
        )?)
    })
}

/// A pose as Java sees it: x, y, the angle in degrees (the plugin's unit, as the command
/// line's report) and the scale; all NaN for a skipped frame or pair.
fn pose_values(pose: Option<Similarity>) -> [f64; 4] {
    pose.map_or([f64::NAN; 4], |m| [m.x, m.y, m.angle.to_degrees(), m.scale])
}

/// A Java string for an optional reason (null when there is none).
pub(crate) fn reason<'l>(env: &mut Env<'l>, why: Option<String>) -> Result<JObject<'l>> {
    Ok(match why {
        Some(s) => JString::from_str(env, s)?.into(),
        None => JObject::null(),
    })
}

/// `StitchResult Native.stitch(Object[] frames, int width, int height, String options,
/// Native.Progress progress)`: registers every frame (frame i's position in frame-0
/// coordinates) and composites the canvas. `progress` (may be null) is called on this
/// thread after each frame; false stops the run (a `CancellationException`), and so does
/// an exception it throws, which is left pending for the caller.
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_nativeStitch<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    frames: JObjectArray<'l>,
    width: jint,
    height: jint,
    options: JString<'l>,
    progress: JObject<'l>,
) -> JObject<'l> {
    guarded(&mut env, |env| {
        let (p, b) = options::from_java::<StitchParams>(env, &options)?;
        p.validate()?;
        let (w, h) = dims(width, height)?;
        let owned_frames = copy_frames(env, &frames, w, h)?;
        let n = owned_frames.len();
        let views = owned_frames
            .iter()
            .map(|f| f.view().ok_or_else(|| BridgeError::State("internal: a frame image without a view".into())))
            .collect::<Result<Vec<AnyView<'_>>>>()?;
        // The callback runs outside any critical section (the frames are copies).
        let pano: Panorama = with_java_progress(env, &progress, n, ("panorama", "frame"), |report| b.stitch(&InMemory(&views), &p, report))?;
        stitch_result(env, &pano, n)
    })
}

/// Copies the frames of a Java `Object[]` (each an ImageJ pixel array of frame 1's type,
/// `w x h`) into Rust memory, freeing each element's local reference once copied.
pub(crate) fn copy_frames(env: &mut Env<'_>, frames: &JObjectArray<'_>, w: usize, h: usize) -> Result<Vec<tessera_core::AnyImage>> {
    if frames.is_null() {
        return Err(bad_arg("frames is null"));
    }
    let n = frames.len(env)?;
    if n == 0 {
        return Err(bad_arg("no frames"));
    }
    let mut out = Vec::with_capacity(n);
    let mut first = None;
    for i in 0..n {
        let obj = frames.get_element(env, i)?;
        let name = format!("frame {}", i + 1);
        let a = PixelArray::of(env, &obj, &name)?;
        if *first.get_or_insert(a.kind) != a.kind {
            return Err(bad_arg(format!("{name} has another pixel type than frame 1")));
        }
        if a.pixels() != w * h {
            return Err(bad_arg(format!("{name} holds {} pixels, not {w} x {h}", a.pixels())));
        }
        out.push(owned(env, &a, w, h)?);
        env.delete_local_ref(obj);
    }
    Ok(out)
}

/// The Java `StitchResult`: the canvas (a new array of the frames' type), its geometry and
/// one `StitchResult.Frame` per frame.
fn stitch_result<'l>(env: &mut Env<'l>, pano: &Panorama, n: usize) -> Result<JObject<'l>> {
    let records = env.new_object_array(n as jint, jni_str!("tessera/ij/StitchResult$Frame"), JObject::null())?;
    for (i, f) in pano.frames.iter().enumerate().take(n) {
        let record = frame_record(env, f)?;
        records.set_element(env, i, &record)?;
        env.delete_local_ref(record);
    }
    let pixels = to_java(env, &pano.canvas.image)?;
    let (cw, ch) = pano.canvas.image.size();
    let (ox, oy) = pano.canvas.origin;
    Ok(env.new_object(
        jni_str!("tessera/ij/StitchResult"),
        jni_sig!("(Ljava/lang/Object;IIII[Ltessera/ij/StitchResult$Frame;)V"),
        &[(&pixels).into(), (cw as jint).into(), (ch as jint).into(), (ox as jint).into(), (oy as jint).into(), JValue::Object(&records)],
    )?)
}

/// One frame's `StitchResult.Frame`: its pose ([`FrameRecord::pose`], angle in degrees; on
/// an island the panorama does not hold, relative to the island's first frame), island and
/// join (1-based frames, 0 for none) and scores (NaN where a value does not exist).
fn frame_record<'l>(env: &mut Env<'l>, f: &FrameRecord) -> Result<JObject<'l>> {
    let on_island = f.island_position.map(|(x, y)| Similarity { x, y, angle: f.angle, scale: f.scale });
    let [x, y, angle, scale] = pose_values(f.pose().or(on_island));
    let one_based = |i: Option<usize>| i.map_or(0, |i| i as jint + 1);
    let why = reason(env, f.skip.as_ref().map(|s| s.describe()))?;
    let record = env.new_object(
        jni_str!("tessera/ij/StitchResult$Frame"),
        jni_sig!("(ZZIIDDDDDIDDDLjava/lang/String;)V"),
        &[
            f.is_ok().into(),
            on_island.is_some().into(),
            one_based(f.island).into(),
            one_based(f.joined).into(),
            x.into(),
            y.into(),
            angle.into(),
            scale.into(),
            f.ncc.into(),
            (f.vectors_used as jint).into(),
            f.confidence.into(),
            f.quality.unwrap_or(f64::NAN).into(),
            f.quality_grid.unwrap_or(f64::NAN).into(),
            (&why).into(),
        ],
    )?;
    // A long sequence would overflow the frame's local references otherwise.
    env.delete_local_ref(why);
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{defaults, parse};
    use tessera_core::stitch::{Blend, Motion, SearchMethod};

    #[test]
    fn stitch_defaults_are_the_cores() {
        let d = defaults::<StitchParams>().unwrap();
        let get = |k: &str| d.iter().find(|(key, _)| *key == k).map(|(_, v)| v.as_str());
        assert_eq!((get("rsz"), get("npts"), get("cthresh")), (Some("25"), Some("6"), Some("0.85")));
        assert_eq!((get("method"), get("blend"), get("subpixel")), (Some("log"), Some("overwrite"), Some("true")));
        assert_eq!((get("motion"), get("fit-scale"), get("max-turn")), (Some("similarity"), Some("false"), Some("6")));
        assert_eq!(parse::<StitchParams>(None).unwrap().0, StitchParams::default());
    }

    #[test]
    fn stitch_options() {
        let (p, _) = parse::<StitchParams>(Some("rsz=31 npts=8 cthresh=0.9 search-radius=16 method=log-plain subpixel=false blend=feather keyframe-shift=0.5")).unwrap();
        assert_eq!((p.register.rsz, p.register.npts, p.register.cthresh, p.register.search_radius), (31, 8, 0.9, 16));
        assert_eq!((p.register.method, p.register.subpixel, p.blend, p.keyframe_shift), (SearchMethod::LogPlain, false, Blend::Feather, 0.5));
        assert!(parse::<StitchParams>(Some("blend=mosaic")).is_err());
        let (p, _) = parse::<RegisterParams>(Some("motion=translation fit-scale max-turn=2.5")).unwrap();
        assert_eq!((p.motion, p.fit_scale, p.max_turn), (Motion::Translation, true, 2.5));
        assert!(parse::<RegisterParams>(Some("motion=affine")).is_err());
        let zero = parse::<RegisterParams>(Some("max-turn=0")).unwrap().0;
        assert!(zero.validate().is_err(), "a turn limit of 0 is the core's error");
        assert!(parse::<RegisterParams>(Some("blend=feather")).is_err(), "a pair has no blend");
    }
}

//! Entry points of panorama stitching: `Native.registerPair{8,16,32,Rgb}` (one frame pair,
//! the unit that Benchmark... times) and `Native.stitch{8,16,32,Rgb}` (a whole sequence:
//! registration and composite).
//!
//! A pair is read in place through critical sections like the filters. A sequence is
//! different: it runs for seconds and calls a Java progress callback between frames, which
//! may cancel it (a JNI call, forbidden inside a critical section, and the GC must not be
//! held off that long), so its frames are copied into Rust memory first
//! (`Get<Type>ArrayRegion`, one memcpy per frame, small next to the registration), and the
//! canvas comes back as a new Java array. RGB frames are converted to true-order RGBA on
//! the way in (registration weighs the channels: Rec. 601 luma) and back to ImageJ ints on
//! the way out.

use crate::error::{bad_arg, BridgeError, Result};
use crate::pixels::{checked_len, dims, rgba_from_imagej, rgba_to_imagej, JavaPixel};
use crate::{backend, backend_name, guarded};
use jni::objects::{JClass, JIntArray, JDoubleArray, JObject, JObjectArray, JPrimitiveArray, JString};
use jni::sys::{jboolean, jbyte, jdouble, jfloat, jint, jshort};
use jni::{jni_sig, jni_str, Env, EnvUnowned};
use std::ops::ControlFlow;
use tessera_core::stitch::{Blend, Panorama, RegisterParams, SearchMethod, StitchParams};
use tessera_core::{AnyImage, AnyView, Image};

/// Registration parameters from the Java arguments (validated by the core).
#[allow(clippy::too_many_arguments)]
/// `method`: 0 the centre-biased log search (default), 1 the original's plain log
/// (three-step) search, 2 exhaustive search.
fn register_params(rsz: jint, npts: jint, cthresh: jdouble, radius: jint, min_variance: jdouble, subpixel: jboolean, method: jint) -> Result<RegisterParams> {
    let pos = |name: &str, v: jint| usize::try_from(v).map_err(|_| bad_arg(format!("{name} = {v} is negative")));
    let p = RegisterParams {
        rsz: pos("rsz", rsz)?,
        npts: pos("NPTS", npts)?,
        cthresh,
        search_radius: pos("search radius", radius)?,
        min_variance,
        subpixel,
        method: match method {
            0 => SearchMethod::Log,
            1 => SearchMethod::LogPlain,
            2 => SearchMethod::Exhaustive,
            m => return Err(bad_arg(format!("search method = {m} is not one of 0 (log), 1 (log-plain), 2 (exhaustive)"))),
        },
        ..RegisterParams::default()
    };
    p.validate()?;
    Ok(p)
}

/// The pixels of one Java frame as an owned tessera image. RGB becomes true-order RGBA.
trait FramePixel: JavaPixel + Copy + Default {
    fn owned(p: Vec<Self>, w: usize, h: usize) -> tessera_core::Result<AnyImage>;
    /// A new Java array holding `img` (of the type `owned` makes).
    fn to_java<'l>(env: &mut Env<'l>, img: &AnyImage) -> Result<JPrimitiveArray<'l, Self>>;
}

/// Reinterprets a vector of one 1-, 2- or 4-byte plain type as another of the same size.
fn recast<A: Copy, B: Copy>(v: &[A]) -> Vec<B> {
    const { assert!(size_of::<A>() == size_of::<B>()) };
    // SAFETY: same size, both plain data with every bit pattern valid (i8/u8, i16/u16,
    // f32/f32); the copy is a fresh, properly aligned Vec<B>.
    v.iter().map(|a| unsafe { std::mem::transmute_copy::<A, B>(a) }).collect()
}

macro_rules! gray_frame {
    ($j:ty, $core:ty, $variant:ident) => {
        impl FramePixel for $j {
            fn owned(p: Vec<$j>, w: usize, h: usize) -> tessera_core::Result<AnyImage> {
                Ok(AnyImage::$variant(Image::from_vec(w, h, recast::<$j, $core>(&p))?))
            }
            fn to_java<'l>(env: &mut Env<'l>, img: &AnyImage) -> Result<JPrimitiveArray<'l, $j>> {
                let AnyImage::$variant(i) = img else {
                    return Err(BridgeError::State("canvas has another pixel type than the frames".into()));
                };
                let a = JPrimitiveArray::<$j>::new(env, i.as_slice().len())?;
                a.set_region(env, 0, &recast::<$core, $j>(i.as_slice()))?;
                Ok(a)
            }
        }
    };
}
gray_frame!(jbyte, u8, U8);
gray_frame!(jshort, u16, U16);
gray_frame!(jfloat, f32, F32);

impl FramePixel for jint {
    fn owned(p: Vec<jint>, w: usize, h: usize) -> tessera_core::Result<AnyImage> {
        Ok(AnyImage::Rgba8(Image::from_vec(w, h, rgba_from_imagej(&p))?))
    }
    fn to_java<'l>(env: &mut Env<'l>, img: &AnyImage) -> Result<JPrimitiveArray<'l, jint>> {
        let AnyImage::Rgba8(i) = img else {
            return Err(BridgeError::State("canvas has another pixel type than the frames".into()));
        };
        let mut ints = vec![0; i.as_slice().len()];
        rgba_to_imagej(i.as_slice(), &mut ints);
        // ImageJ shows covered and uncovered canvas pixels alike; set alpha opaque.
        for v in &mut ints {
            *v |= 0xff00_0000u32 as jint;
        }
        let a = JPrimitiveArray::<jint>::new(env, ints.len())?;
        a.set_region(env, 0, &ints)?;
        Ok(a)
    }
}

/// Copies one Java frame (checked: not null, at least `w * h` pixels) into Rust memory.
fn copy_frame<J: FramePixel>(env: &Env<'_>, a: &JPrimitiveArray<'_, J>, name: &str, w: usize, h: usize) -> Result<AnyImage> {
    checked_len(env, a, name, w, h)?;
    let mut buf = vec![J::default(); w * h];
    a.get_region(env, 0, &mut buf)?;
    Ok(J::owned(buf, w, h)?)
}

/// `double[] out` of `registerPair`: ok (1/0), x, y, ncc, vectors used, templates,
/// confidence, NCC evaluations.
const PAIR_FIELDS: usize = 8;

#[allow(clippy::too_many_arguments)]
fn register_pair<'l, J: FramePixel>(
    env: &mut Env<'l>,
    reference: &JPrimitiveArray<'l, J>,
    moving: &JPrimitiveArray<'l, J>,
    w: jint,
    h: jint,
    rsz: jint,
    npts: jint,
    cthresh: jdouble,
    radius: jint,
    min_variance: jdouble,
    subpixel: jboolean,
    method: jint,
    pred_x: jdouble,
    pred_y: jdouble,
    backend: &JString<'l>,
    out: &JDoubleArray<'l>,
) -> Result<JString<'l>> {
    let b = backend::select(&backend_name(env, backend)?)?;
    let p = register_params(rsz, npts, cthresh, radius, min_variance, subpixel, method)?;
    if out.as_raw().is_null() || out.len(env)? < PAIR_FIELDS {
        return Err(bad_arg(format!("out must be a double[{PAIR_FIELDS}]")));
    }
    let (w, h) = dims(w, h)?;
    // Copied, not viewed in place: RGB needs the channel order fixed anyway, and a pair of
    // frames is small next to the searches.
    let r = copy_frame(env, reference, "reference", w, h)?;
    let m = copy_frame(env, moving, "moving", w, h)?;
    let (rv, mv) = (view(&r)?, view(&m)?);
    let reg = b.register_pair(rv, mv, &p, (pred_x, pred_y))?;
    let (x, y) = reg.shift.unwrap_or((f64::NAN, f64::NAN));
    let vals = [
        reg.shift.is_some() as u8 as f64,
        x,
        y,
        reg.ncc,
        reg.vectors_used as f64,
        reg.templates as f64,
        reg.confidence,
        reg.evaluations as f64,
    ];
    out.set_region(env, 0, &vals)?;
    match reg.skip {
        Some(why) => Ok(JString::from_str(env, why.describe())?),
        None => Ok(JString::null()),
    }
}

/// The view of a frame made by [`copy_frame`] (u8, u16, f32 or RGBA, which all have one).
fn view(img: &AnyImage) -> Result<AnyView<'_>> {
    img.view().ok_or_else(|| BridgeError::State("internal: a frame image without a view".into()))
}

macro_rules! register_natives {
    ($($name:ident: $j:ty),+ $(,)?) => {$(
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "system" fn $name<'l>(
            mut env: EnvUnowned<'l>,
            _class: JClass<'l>,
            reference: JPrimitiveArray<'l, $j>,
            moving: JPrimitiveArray<'l, $j>,
            width: jint,
            height: jint,
            rsz: jint,
            npts: jint,
            cthresh: jdouble,
            radius: jint,
            min_variance: jdouble,
            subpixel: jboolean,
            method: jint,
            pred_x: jdouble,
            pred_y: jdouble,
            backend: JString<'l>,
            out: JDoubleArray<'l>,
        ) -> JString<'l> {
            guarded(&mut env, |env| {
                register_pair::<$j>(env, &reference, &moving, width, height, rsz, npts, cthresh, radius,
                    min_variance, subpixel, method, pred_x, pred_y, &backend, &out)
            })
        }
    )+};
}
register_natives!(
    Java_tessera_ij_Native_registerPair8: jbyte,
    Java_tessera_ij_Native_registerPair16: jshort,
    Java_tessera_ij_Native_registerPair32: jfloat,
    Java_tessera_ij_Native_registerPairRgb: jint,
);

/// `double[] records` of `stitch`, per frame: ok (1/0), x, y, ncc, vectors used,
/// confidence, overlap quality (NaN when none), grid quality (NaN when none).
pub const RECORD_FIELDS: usize = 8;

#[allow(clippy::too_many_arguments)]
fn stitch<'l, J: FramePixel>(
    env: &mut Env<'l>,
    frames: &JObjectArray<'l>,
    w: jint,
    h: jint,
    p: StitchParams,
    backend: &JString<'l>,
    geom: &JIntArray<'l>,
    records: &JDoubleArray<'l>,
    reasons: &JObjectArray<'l, JString<'l>>,
    progress: &JObject<'l>,
) -> Result<JPrimitiveArray<'l, J>> {
    let b = backend::select(&backend_name(env, backend)?)?;
    p.validate()?;
    let (w, h) = dims(w, h)?;
    if frames.as_raw().is_null() {
        return Err(bad_arg("frames is null"));
    }
    let n = frames.len(env)?;
    if n == 0 {
        return Err(bad_arg("no frames"));
    }
    if geom.as_raw().is_null() || geom.len(env)? < 4 {
        return Err(bad_arg("geom must be an int[4]"));
    }
    if records.as_raw().is_null() || records.len(env)? < n * RECORD_FIELDS {
        return Err(bad_arg(format!("records must be a double[{} * frames]", RECORD_FIELDS)));
    }
    if reasons.as_raw().is_null() || reasons.len(env)? < n {
        return Err(bad_arg("reasons must be a String[frames]"));
    }
    let mut owned = Vec::with_capacity(n);
    for i in 0..n {
        let obj = frames.get_element(env, i)?;
        // SAFETY: the Java signature types `frames` as `byte[][]` / `short[][]` /
        // `float[][]` / `int[][]` matching `J`, so the JVM guarantees each element is an
        // array of `J` (or null, which `copy_frame` reports); the local reference is
        // owned by this frame of the native method only.
        let a = unsafe { JPrimitiveArray::<J>::from_raw(env, obj.into_raw()) };
        owned.push(copy_frame(env, &a, &format!("frame {}", i + 1), w, h)?);
        // Long stacks: free each element's local reference once copied.
        env.delete_local_ref(a);
    }
    let views = owned.iter().map(view).collect::<Result<Vec<AnyView<'_>>>>()?;
    // The callback runs on this thread between frames, outside any critical section (the
    // frames are copies). `boolean progress(done, total)`: false stops the run. A Java
    // exception thrown by it (or a missing method) stops the run too and is left pending,
    // so Java sees that exception; no JNI call is made after it.
    let mut progress_err = None;
    let mut last_done = 0;
    let result = {
        let mut report = |done: usize| -> ControlFlow<()> {
            last_done = done;
            if progress.as_raw().is_null() {
                return ControlFlow::Continue(());
            }
            let args = [(done as jint).into(), (n as jint).into()];
            match env.call_method(progress, jni_str!("progress"), jni_sig!("(II)Z"), &args).and_then(|v| v.z()) {
                Ok(true) => ControlFlow::Continue(()),
                Ok(false) => ControlFlow::Break(()),
                Err(e) => {
                    progress_err = Some(e);
                    ControlFlow::Break(())
                }
            }
        };
        b.stitch(&views, &p, &mut report)
    };
    if let Some(e) = progress_err {
        return Err(e.into());
    }
    let pano: Panorama = match result {
        Err(tessera_core::Error::Cancelled) => {
            return Err(BridgeError::Cancelled(format!("panorama cancelled after frame {last_done} of {n}")));
        }
        r => r?,
    };
    let (cw, ch) = pano.canvas.image.size();
    geom.set_region(env, 0, &[cw as jint, ch as jint, pano.canvas.origin.0 as jint, pano.canvas.origin.1 as jint])?;
    let mut rec = vec![f64::NAN; n * RECORD_FIELDS];
    for (i, f) in pano.frames.iter().enumerate().take(n) {
        let (x, y) = f.position.unwrap_or((f64::NAN, f64::NAN));
        rec[i * RECORD_FIELDS..(i + 1) * RECORD_FIELDS].copy_from_slice(&[
            f.is_ok() as u8 as f64,
            x,
            y,
            f.ncc,
            f.vectors_used as f64,
            f.confidence,
            f.quality.unwrap_or(f64::NAN),
            f.quality_grid.unwrap_or(f64::NAN),
        ]);
        if let Some(why) = &f.skip {
            let s = JString::from_str(env, why.describe())?;
            reasons.set_element(env, i, &s)?;
        }
    }
    records.set_region(env, 0, &rec)?;
    J::to_java(env, &pano.canvas.image)
}

fn blend(code: jint) -> Result<Blend> {
    Ok(match code {
        0 => Blend::Overwrite,
        1 => Blend::Average,
        2 => Blend::Feather,
        _ => return Err(bad_arg(format!("blend = {code} is not one of 0 (overwrite), 1 (average), 2 (feather)"))),
    })
}

macro_rules! stitch_natives {
    ($($name:ident: $j:ty),+ $(,)?) => {$(
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "system" fn $name<'l>(
            mut env: EnvUnowned<'l>,
            _class: JClass<'l>,
            frames: JObjectArray<'l>,
            width: jint,
            height: jint,
            rsz: jint,
            npts: jint,
            cthresh: jdouble,
            radius: jint,
            min_variance: jdouble,
            subpixel: jboolean,
            method: jint,
            blend_code: jint,
            keyframe_shift: jdouble,
            backend: JString<'l>,
            geom: JIntArray<'l>,
            records: JDoubleArray<'l>,
            reasons: JObjectArray<'l, JString<'l>>,
            progress: JObject<'l>,
        ) -> JPrimitiveArray<'l, $j> {
            guarded(&mut env, |env| {
                let p = StitchParams {
                    register: register_params(rsz, npts, cthresh, radius, min_variance, subpixel, method)?,
                    blend: blend(blend_code)?,
                    keyframe_shift,
                    quality: true,
                };
                stitch::<$j>(env, &frames, width, height, p, &backend, &geom, &records, &reasons, &progress)
            })
        }
    )+};
}
stitch_natives!(
    Java_tessera_ij_Native_stitch8: jbyte,
    Java_tessera_ij_Native_stitch16: jshort,
    Java_tessera_ij_Native_stitch32: jfloat,
    Java_tessera_ij_Native_stitchRgb: jint,
);

//! ImageJ's pixel arrays as tessera views, inside JNI critical sections (no copy).
//!
//! ImageJ stores 8-bit images as `byte[]`, 16-bit as `short[]` (both read unsigned), 32-bit
//! as `float[]` and RGB as `int[]` packed `0xAARRGGBB`. Every entry point takes them as
//! plain `Object`s; [`PixelArray::of`] reads the type from the array's class once per call,
//! and one untyped critical section (`Critical`) hands out the matching [`AnyView`], so
//! there is one code path for all four types instead of one native per type.
//!
//! RGB: an `int` lies in memory (x86-64 and AArch64 are little-endian) as the bytes B, G,
//! R, A, so an `int[]` seen as [`Rgba8`] has red and blue swapped. That is harmless, and
//! copy-free, for the per-channel operations (mean, Gaussian), which treat the four bytes
//! alike. The operations that weigh the channels (luma, saturation) convert once: the input
//! into true-order RGBA ([`in_true_order`], one pass, read straight from the Java array),
//! and an RGB output is written by the kernel into the Java array itself and put back into
//! ImageJ's order by one in-place swap ([`swap_red_blue`]); no intermediate `int[]` copy and
//! no second output buffer. Teaching every luma kernel (SIMD and CUDA) a B, G, R order would
//! save that pass at the price of a second layout in every backend; one memory-bound pass is
//! small next to the kernels that weigh the channels.

use crate::error::{bad_arg, BridgeError, Result};
use jni::objects::{JByteArray, JFloatArray, JIntArray, JObject, JShortArray};
use jni::sys::{jarray, jint, JNIEnv, JNI_ABORT};
use jni::Env;
use std::ffi::c_void;
use std::marker::PhantomData;
use tessera_core::image::check_layout;
use tessera_core::{AnyImage, AnyView, AnyViewMut, Image, ImageView, ImageViewMut, Rgba8};

/// The pixel type of an ImageJ array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `byte[]`, 8-bit gray (unsigned).
    U8,
    /// `short[]`, 16-bit gray (unsigned).
    U16,
    /// `float[]`, 32-bit gray.
    F32,
    /// `int[]`, packed RGB.
    Rgb,
}

impl Kind {
    /// The Java array type, for messages.
    pub fn java(self) -> &'static str {
        match self {
            Kind::U8 => "byte[]",
            Kind::U16 => "short[]",
            Kind::F32 => "float[]",
            Kind::Rgb => "int[]",
        }
    }
}

/// A Java pixel array: its reference, element type and length, checked not null.
pub struct PixelArray<'a, 'l> {
    obj: &'a JObject<'l>,
    pub kind: Kind,
    len: usize,
    name: &'a str,
}

impl<'a, 'l> PixelArray<'a, 'l> {
    /// Reads `obj`'s element type and length; `name` is what messages call it.
    pub fn of(env: &Env<'_>, obj: &'a JObject<'l>, name: &'a str) -> Result<Self> {
        if obj.is_null() {
            return Err(bad_arg(format!("{name} pixel array is null")));
        }
        // `as_cast` checks IsInstanceOf against a class looked up once per process.
        let (kind, len) = if let Ok(a) = env.as_cast::<JByteArray>(obj) {
            (Kind::U8, a.len(env)?)
        } else if let Ok(a) = env.as_cast::<JShortArray>(obj) {
            (Kind::U16, a.len(env)?)
        } else if let Ok(a) = env.as_cast::<JFloatArray>(obj) {
            (Kind::F32, a.len(env)?)
        } else if let Ok(a) = env.as_cast::<JIntArray>(obj) {
            (Kind::Rgb, a.len(env)?)
        } else {
            return Err(bad_arg(format!("{name} must be a byte[], short[], float[] or int[] (RGB) pixel array")));
        };
        Ok(PixelArray { obj, kind, len, name })
    }

    /// The number of pixels the array holds.
    pub fn pixels(&self) -> usize {
        self.len
    }

    /// Checks that the array holds at least `w * h` pixels. Done before any critical
    /// section, where no JNI call may be made.
    fn check(&self, w: usize, h: usize) -> Result<()> {
        check_layout(w, h, w, self.len).map_err(|e| bad_arg(format!("{}: {e}", self.name)))
    }
}

/// A Java `(width, height)` as sizes; negative values are bad input (zero is left to the
/// core, which reports it as an image without pixels).
pub fn dims(w: jint, h: jint) -> Result<(usize, usize)> {
    if w < 0 || h < 0 {
        return Err(bad_arg(format!("image size {w}x{h} is negative")));
    }
    Ok((w as usize, h as usize))
}

/// The elements of a Java primitive array, held through `GetPrimitiveArrayCritical` until
/// drop (`ReleasePrimitiveArrayCritical`), seen as pixels of the array's [`Kind`].
///
/// Written over the raw JNI function table rather than with jni-rs'
/// `AutoElementsCritical`, because that one calls `GetArrayLength` and `ExceptionCheck`
/// while a critical section is open, which the JNI specification forbids (`java
/// -Xcheck:jni` reports "Calling other JNI functions in the scope of
/// Get/ReleasePrimitiveArrayCritical"). Here nothing but Get / Release happens between the
/// two, so several arrays can be held at once, as the specification allows.
struct Critical<'a> {
    env: *mut JNIEnv,
    array: jarray,
    ptr: *mut c_void,
    kind: Kind,
    len: usize,
    mode: jint,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> Critical<'a> {
    /// # Safety
    /// `env` is this thread's JNI environment; until the guard drops, the thread makes no
    /// other JNI call except opening or closing other critical sections.
    unsafe fn new(env: *mut JNIEnv, a: &PixelArray<'_, '_>, copy_back: bool) -> Result<Self> {
        let array = a.obj.as_raw() as jarray;
        // SAFETY: `env` points at the JVM's function table (caller's contract); `array` is a
        // live, non-null primitive array (checked by `PixelArray::of`).
        let ptr = unsafe { ((**env).v1_2.GetPrimitiveArrayCritical)(env, array, std::ptr::null_mut()) };
        if ptr.is_null() {
            // The JVM has an OutOfMemoryError pending; the error policy lets it propagate.
            return Err(BridgeError::Jni(jni::errors::Error::NullPtr("GetPrimitiveArrayCritical")));
        }
        let mode = if copy_back { 0 } else { JNI_ABORT };
        Ok(Critical { env, array, ptr, kind: a.kind, len: a.len, mode, _borrow: PhantomData })
    }

    /// The elements as a slice of `T`, which has the size of the array's element type.
    ///
    /// # Safety
    /// `T` is `u8`, `u16`, `f32` or [`Rgba8`] for [`Kind`] `U8`, `U16`, `F32`, `Rgb` (same
    /// size, alignment no stricter than the Java element's, every bit pattern valid).
    unsafe fn slice<T>(&self) -> &[T] {
        // SAFETY: the JVM handed out `len` elements at `ptr`, valid until release; the
        // caller matched `T` to the element type.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<T>(), self.len) }
    }

    /// Mutable form of [`Critical::slice`]; same contract, and no other guard covers the array.
    unsafe fn slice_mut<T>(&mut self) -> &mut [T] {
        // SAFETY: as in `slice`; the caller made sure nothing else views this array.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<T>(), self.len) }
    }

    /// The pixels as a `w x h` view of the array's own type.
    fn view(&self, w: usize, h: usize) -> tessera_core::Result<AnyView<'_>> {
        // SAFETY: each arm names the element type of its kind (u8/i8, u16/i16, f32, and
        // Rgba8 = four u8 in an i32).
        Ok(match self.kind {
            Kind::U8 => AnyView::U8(ImageView::from_slice(unsafe { self.slice() }, w, h)?),
            Kind::U16 => AnyView::U16(ImageView::from_slice(unsafe { self.slice() }, w, h)?),
            Kind::F32 => AnyView::F32(ImageView::from_slice(unsafe { self.slice() }, w, h)?),
            Kind::Rgb => AnyView::Rgba8(ImageView::from_slice(unsafe { self.slice() }, w, h)?),
        })
    }

    /// The pixels as a writable `w x h` view of the array's own type.
    fn view_mut(&mut self, w: usize, h: usize) -> tessera_core::Result<AnyViewMut<'_>> {
        // SAFETY: as in `view`.
        Ok(match self.kind {
            Kind::U8 => AnyViewMut::U8(ImageViewMut::from_slice(unsafe { self.slice_mut() }, w, h)?),
            Kind::U16 => AnyViewMut::U16(ImageViewMut::from_slice(unsafe { self.slice_mut() }, w, h)?),
            Kind::F32 => AnyViewMut::F32(ImageViewMut::from_slice(unsafe { self.slice_mut() }, w, h)?),
            Kind::Rgb => AnyViewMut::Rgba8(ImageViewMut::from_slice(unsafe { self.slice_mut() }, w, h)?),
        })
    }
}

impl Drop for Critical<'_> {
    fn drop(&mut self) {
        // SAFETY: releases exactly what `new` acquired, once. Mode 0 copies back (a no-op
        // when the JVM handed out its own memory, as HotSpot does); JNI_ABORT does not.
        unsafe { ((**self.env).v1_2.ReleasePrimitiveArrayCritical)(self.env, self.array, self.ptr, self.mode) }
    }
}

/// All `N` values, or the first error (the other values are dropped: a critical section
/// already opened is released).
fn all_ok<T, E, const N: usize>(results: [std::result::Result<T, E>; N]) -> std::result::Result<[T; N], E> {
    if results.iter().any(|r| r.is_err()) {
        return Err(results.into_iter().find_map(|r| r.err()).unwrap_or_else(|| unreachable!("an error was seen")));
    }
    Ok(results.map(|r| r.unwrap_or_else(|_| unreachable!("no error was seen"))))
}

/// Runs `f` with the `inputs` as read-only views and the `outputs` as writable views, all
/// `w x h` and each of its own array's type, straight on the Java arrays' memory
/// (`GetPrimitiveArrayCritical`: no copy on HotSpot; the GC is held off for the duration,
/// so `f` makes no JNI call). Each output must be an array of its own: the inputs are read
/// while the outputs are written. Inputs may be the same array.
pub fn with_views<const I: usize, const O: usize, R>(
    env: &Env<'_>,
    inputs: [&PixelArray<'_, '_>; I],
    outputs: [&PixelArray<'_, '_>; O],
    w: jint,
    h: jint,
    f: impl FnOnce([AnyView<'_>; I], [AnyViewMut<'_>; O]) -> tessera_core::Result<R>,
) -> Result<R> {
    let (w, h) = dims(w, h)?;
    for a in inputs.iter().chain(&outputs) {
        a.check(w, h)?;
    }
    for (i, out) in outputs.iter().enumerate() {
        for other in inputs.iter().chain(&outputs[..i]) {
            if env.is_same_object(out.obj, other.obj)? {
                return Err(bad_arg(format!(
                    "{} and {} must be different arrays: the output is written while the input is read",
                    other.name, out.name
                )));
            }
        }
    }
    let raw = env.get_raw();
    let result = {
        // SAFETY: `raw` is this thread's environment; no JNI call happens until every guard
        // drops at the end of this block; the outputs alias neither each other nor an input
        // (checked above), so the shared and the mutable slices do not overlap.
        // Fixed-size arrays, not vectors: no allocation on the per-call path.
        let ins = all_ok(inputs.map(|a| unsafe { Critical::new(raw, a, false) }))?;
        let mut outs = all_ok(outputs.map(|a| unsafe { Critical::new(raw, a, true) }))?;
        let views = all_ok(ins.each_ref().map(|c| c.view(w, h)))?;
        let views_mut = all_ok(outs.each_mut().map(|c| c.view_mut(w, h)))?;
        f(views, views_mut)
    };
    Ok(result?)
}

/// An ImageJ pixel array copied into an owned tessera image (one pass; RGB becomes
/// true-order RGBA on the way), for a run that must call Java while it works.
pub fn owned(env: &Env<'_>, a: &PixelArray<'_, '_>, w: usize, h: usize) -> Result<AnyImage> {
    a.check(w, h)?;
    let n = w * h;
    // SAFETY: as in `with_views`, one array read, no JNI call while it is held.
    let c = unsafe { Critical::new(env.get_raw(), a, false)? };
    // SAFETY (each arm): the element type of the kind, as in `Critical::view`.
    let img = match a.kind {
        Kind::U8 => AnyImage::U8(Image::from_vec(w, h, unsafe { c.slice::<u8>() }[..n].to_vec())?),
        Kind::U16 => AnyImage::U16(Image::from_vec(w, h, unsafe { c.slice::<u16>() }[..n].to_vec())?),
        Kind::F32 => AnyImage::F32(Image::from_vec(w, h, unsafe { c.slice::<f32>() }[..n].to_vec())?),
        Kind::Rgb => AnyImage::Rgba8(Image::from_vec(w, h, unsafe { c.slice::<Rgba8>() }[..n].iter().map(swapped).collect())?),
    };
    Ok(img)
}

/// A new Java array of the ImageJ type of `img` holding its pixels (one pass; RGBA goes
/// back into ImageJ's order, with alpha opaque, as ImageJ shows every RGB pixel alike).
pub fn to_java<'l>(env: &mut Env<'l>, img: &AnyImage) -> Result<JObject<'l>> {
    let (w, h) = img.size();
    let n = w * h;
    let (obj, kind): (JObject<'l>, Kind) = match img {
        AnyImage::U8(_) => (JByteArray::new(env, n)?.into(), Kind::U8),
        AnyImage::U16(_) => (JShortArray::new(env, n)?.into(), Kind::U16),
        AnyImage::F32(_) => (JFloatArray::new(env, n)?.into(), Kind::F32),
        AnyImage::Rgba8(_) => (JIntArray::new(env, n)?.into(), Kind::Rgb),
        _ => return Err(BridgeError::State("internal: an image type ImageJ has no array for".into())),
    };
    let target = PixelArray { obj: &obj, kind, len: n, name: "result" };
    {
        // SAFETY: as in `with_views`, one new array written, no JNI call while it is held.
        let mut c = unsafe { Critical::new(env.get_raw(), &target, true)? };
        // SAFETY (each arm): the element type of the kind just created.
        match img {
            AnyImage::U8(i) => unsafe { c.slice_mut::<u8>() }.copy_from_slice(i.as_slice()),
            AnyImage::U16(i) => unsafe { c.slice_mut::<u16>() }.copy_from_slice(i.as_slice()),
            AnyImage::F32(i) => unsafe { c.slice_mut::<f32>() }.copy_from_slice(i.as_slice()),
            AnyImage::Rgba8(i) => {
                for (d, s) in unsafe { c.slice_mut::<Rgba8>() }.iter_mut().zip(i.as_slice()) {
                    *d = Rgba8 { a: 0xff, ..swapped(s) };
                }
            }
            _ => {}
        }
    }
    Ok(obj)
}

/// A pixel with red and blue traded: ImageJ's in-memory order to true RGBA and back.
fn swapped(p: &Rgba8) -> Rgba8 {
    Rgba8::new(p.b, p.g, p.r, p.a)
}

/// Runs `f` on `src` with an RGB image (seen in place, red and blue swapped) converted
/// once into true-order RGBA; other types as they are.
pub fn in_true_order<R>(src: AnyView<'_>, f: impl FnOnce(AnyView<'_>) -> tessera_core::Result<R>) -> tessera_core::Result<R> {
    match src {
        AnyView::Rgba8(v) => {
            let t = Image::from_fn(v.width(), v.height(), |x, y| swapped(&v.row(y)[x]))?;
            f(AnyView::Rgba8(t.view()))
        }
        other => f(other),
    }
}

/// Puts an RGB output that a kernel wrote in true order into ImageJ's order, in place;
/// other types are left alone.
pub fn swap_red_blue(dst: &mut AnyViewMut<'_>) {
    if let AnyViewMut::Rgba8(d) = dst {
        for y in 0..d.height() {
            for p in d.row_mut(y) {
                *p = swapped(p);
            }
        }
    }
}

/// Runs `op` from `src` into `dst` of the same type, for the operations that weigh the
/// colour channels: an RGB input is converted once into true order, the kernel writes the
/// Java output array directly, and one in-place swap puts it into ImageJ's order.
pub fn weighted_channels<R>(
    src: AnyView<'_>,
    mut dst: AnyViewMut<'_>,
    op: impl FnOnce(AnyView<'_>, AnyViewMut<'_>) -> tessera_core::Result<R>,
) -> tessera_core::Result<R> {
    let r = in_true_order(src, |s| op(s, reborrow(&mut dst)))?;
    swap_red_blue(&mut dst);
    Ok(r)
}

/// A shorter-lived writable view of the same pixels.
fn reborrow<'b>(v: &'b mut AnyViewMut<'_>) -> AnyViewMut<'b> {
    match v {
        AnyViewMut::U8(v) => AnyViewMut::U8(v.reborrow()),
        AnyViewMut::U16(v) => AnyViewMut::U16(v.reborrow()),
        AnyViewMut::U32(v) => AnyViewMut::U32(v.reborrow()),
        AnyViewMut::F32(v) => AnyViewMut::F32(v.reborrow()),
        AnyViewMut::Rgba8(v) => AnyViewMut::Rgba8(v.reborrow()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imagej_rgb_seen_in_place_has_blue_first_and_converts_once() {
        // What the copy-free path relies on: an ImageJ int seen as Rgba8 on a
        // little-endian machine is (B, G, R, A).
        let ints: [i32; 2] = [0x4411_2233, 0xff80_0001u32 as i32];
        let seen: [Rgba8; 2] = unsafe { std::mem::transmute(ints) };
        assert_eq!(seen[0], Rgba8::new(0x33, 0x22, 0x11, 0x44));
        let v = ImageView::from_slice(&seen, 2, 1).unwrap();
        in_true_order(AnyView::Rgba8(v), |t| {
            let AnyView::Rgba8(t) = t else { panic!("RGB stays RGB") };
            assert_eq!(t.row(0), &[Rgba8::new(0x11, 0x22, 0x33, 0x44), Rgba8::new(0x80, 0x00, 0x01, 0xff)]);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn weighted_channels_round_trip_is_the_identity() {
        // A copy kernel through the convert-once / swap-in-place path gives back the input.
        let src = Image::from_vec(3, 1, vec![Rgba8::new(1, 2, 3, 4), Rgba8::new(5, 6, 7, 8), Rgba8::new(9, 10, 11, 12)]).unwrap();
        let mut dst = Image::<Rgba8>::new(3, 1).unwrap();
        weighted_channels(AnyView::Rgba8(src.view()), AnyViewMut::Rgba8(dst.view_mut()), |s, d| {
            let (AnyView::Rgba8(s), AnyViewMut::Rgba8(mut d)) = (s, d) else { panic!("RGB") };
            assert_eq!(s.row(0)[0], Rgba8::new(3, 2, 1, 4), "the kernel sees true order");
            d.row_mut(0).copy_from_slice(s.row(0));
            Ok(())
        })
        .unwrap();
        assert_eq!(dst, src);
    }

    #[test]
    fn negative_sizes_are_errors() {
        assert!(dims(-1, 3).is_err());
        assert!(dims(3, -1).is_err());
        assert_eq!(dims(0, 2).unwrap(), (0, 2));
    }
}

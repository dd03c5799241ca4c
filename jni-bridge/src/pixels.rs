//! ImageJ's pixel arrays as tessera views, inside JNI critical sections (no copy).
//!
//! ImageJ stores 8-bit images as `byte[]`, 16-bit as `short[]` (both read unsigned), 32-bit
//! as `float[]` and RGB as `int[]` packed `0xAARRGGBB`. The first three are reinterpreted
//! in place as `u8` / `u16` / `f32`. An RGB `int` lies in memory (x86-64 is little-endian)
//! as the bytes B, G, R, A, so an `int[]` reinterpreted as [`Rgba8`] has red and blue
//! swapped: harmless, and copy-free, for per-channel operations (mean, Gaussian), which
//! treat the four bytes alike. Operations that weigh the channels (luma) must swap them
//! back first; see [`rgba_from_imagej`].

use crate::error::{bad_arg, BridgeError, Result};
use jni::objects::{JPrimitiveArray, TypeArray};
use jni::sys::{jarray, jbyte, jfloat, jint, jshort, JNIEnv, JNI_ABORT};
use jni::Env;
use std::marker::PhantomData;
use tessera_core::image::check_layout;
use tessera_core::{AnyView, AnyViewMut, ImageView, ImageViewMut, Rgba8};

/// An element type of a Java primitive array that holds ImageJ pixels.
pub trait JavaPixel: TypeArray {
    /// The same pixels as a run-time typed tessera view.
    fn view(p: &[Self], w: usize, h: usize) -> tessera_core::Result<AnyView<'_>>;
    fn view_mut(p: &mut [Self], w: usize, h: usize) -> tessera_core::Result<AnyViewMut<'_>>;
}

/// Reinterprets a slice of one plain-old-data type as another of the same size and an
/// alignment no stricter.
///
/// # Safety
/// `A` and `B` must have the same size, `align_of::<B>() <= align_of::<A>()`, and every
/// bit pattern must be a valid `B`.
unsafe fn cast<A, B>(p: &[A]) -> &[B] {
    const { assert!(size_of::<A>() == size_of::<B>() && align_of::<B>() <= align_of::<A>()) };
    // SAFETY: size and alignment checked at compile time; valid bit patterns guaranteed by
    // the caller; the length in elements is unchanged.
    unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<B>(), p.len()) }
}

/// Mutable form of [`cast`]; same contract.
unsafe fn cast_mut<A, B>(p: &mut [A]) -> &mut [B] {
    const { assert!(size_of::<A>() == size_of::<B>() && align_of::<B>() <= align_of::<A>()) };
    // SAFETY: as in `cast`.
    unsafe { std::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<B>(), p.len()) }
}

macro_rules! java_pixel {
    ($j:ty, $core:ty, $variant:ident) => {
        impl JavaPixel for $j {
            fn view(p: &[$j], w: usize, h: usize) -> tessera_core::Result<AnyView<'_>> {
                // SAFETY: same size, alignment of the target <= the source's, all bit
                // patterns valid (u8/i8, u16/i16, f32/f32, Rgba8 = four u8 / i32).
                let p: &[$core] = unsafe { cast(p) };
                Ok(AnyView::$variant(ImageView::from_slice(p, w, h)?))
            }
            fn view_mut(p: &mut [$j], w: usize, h: usize) -> tessera_core::Result<AnyViewMut<'_>> {
                // SAFETY: as in `view`.
                let p: &mut [$core] = unsafe { cast_mut(p) };
                Ok(AnyViewMut::$variant(ImageViewMut::from_slice(p, w, h)?))
            }
        }
    };
}
java_pixel!(jbyte, u8, U8);
java_pixel!(jshort, u16, U16);
java_pixel!(jfloat, f32, F32);
java_pixel!(jint, Rgba8, Rgba8);

/// ImageJ RGB ints as true-order [`Rgba8`] (a copy: red and blue trade places, alpha is
/// kept), for operations that weigh the channels.
pub fn rgba_from_imagej(p: &[jint]) -> Vec<Rgba8> {
    p.iter()
        .map(|&v| Rgba8::new((v >> 16) as u8, (v >> 8) as u8, v as u8, (v >> 24) as u8))
        .collect()
}

/// The inverse of [`rgba_from_imagej`], written into ImageJ's `int[]`.
pub fn rgba_to_imagej(src: &[Rgba8], dst: &mut [jint]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = ((s.a as u32) << 24 | (s.r as u32) << 16 | (s.g as u32) << 8 | s.b as u32) as jint;
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

/// A non-negative Java int parameter as `usize`.
pub fn count(name: &str, v: jint) -> Result<usize> {
    usize::try_from(v).map_err(|_| bad_arg(format!("{name} = {v} is negative")))
}

/// Checks that `a` is not null and holds at least `w * h` pixels; returns its length.
/// Done before any critical section, where no JNI call may be made.
pub fn checked_len<J: TypeArray>(env: &Env<'_>, a: &JPrimitiveArray<'_, J>, name: &str, w: usize, h: usize) -> Result<usize> {
    if a.as_raw().is_null() {
        return Err(bad_arg(format!("{name} pixel array is null")));
    }
    let len = a.len(env)?;
    check_layout(w, h, w, len).map_err(|e| bad_arg(format!("{name}: {e}")))?;
    Ok(len)
}

/// The elements of a Java primitive array, held through `GetPrimitiveArrayCritical` until
/// drop (`ReleasePrimitiveArrayCritical`).
///
/// Written over the raw JNI function table rather than with jni-rs'
/// `AutoElementsCritical`, because that one calls `GetArrayLength` and `ExceptionCheck`
/// while a critical section is open, which the JNI specification forbids (`java
/// -Xcheck:jni` reports "Calling other JNI functions in the scope of
/// Get/ReleasePrimitiveArrayCritical"). Here nothing but Get / Release happens between the
/// two, so two arrays can be held at once, as the specification allows.
struct Critical<'a, T> {
    env: *mut JNIEnv,
    array: jarray,
    ptr: *mut T,
    len: usize,
    mode: jint,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T: TypeArray> Critical<'a, T> {
    /// # Safety
    /// `env` is this thread's JNI environment; `array` is a live, non-null reference to a
    /// Java array of `T` holding exactly `len` elements; until the guard drops, the thread
    /// makes no other JNI call except opening or closing other critical sections.
    unsafe fn new(env: *mut JNIEnv, array: jarray, len: usize, copy_back: bool) -> Result<Self> {
        // SAFETY: `env` points at the JVM's function table (caller's contract).
        let ptr = unsafe { ((**env).v1_2.GetPrimitiveArrayCritical)(env, array, std::ptr::null_mut()) };
        if ptr.is_null() {
            // The JVM has an OutOfMemoryError pending; the error policy lets it propagate.
            return Err(BridgeError::Jni(jni::errors::Error::NullPtr("GetPrimitiveArrayCritical")));
        }
        let mode = if copy_back { 0 } else { JNI_ABORT };
        Ok(Critical { env, array, ptr: ptr.cast(), len, mode, _borrow: PhantomData })
    }

    fn as_slice(&self) -> &[T] {
        // SAFETY: the JVM handed out `len` elements at `ptr`, valid until release.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above; the caller made sure no other guard covers the same array.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> Drop for Critical<'_, T> {
    fn drop(&mut self) {
        // SAFETY: releases exactly what `new` acquired, once. Mode 0 copies back (a no-op
        // when the JVM handed out its own memory, as HotSpot does); JNI_ABORT does not.
        unsafe { ((**self.env).v1_2.ReleasePrimitiveArrayCritical)(self.env, self.array, self.ptr.cast(), self.mode) }
    }
}

/// Runs `f` with `src` as a read-only view and `dst` as a writable view of the same
/// `w x h` size, both straight on the Java arrays' memory (`GetPrimitiveArrayCritical`:
/// no copy on HotSpot; the GC is held off for the duration, so `f` makes no JNI call).
/// `src` and `dst` must be different arrays; their element types may differ (a filter
/// from 8-bit into 32-bit float, for example).
pub fn with_src_dst<'l, J: JavaPixel, K: JavaPixel, R>(
    env: &mut Env<'l>,
    src: &JPrimitiveArray<'l, J>,
    dst: &JPrimitiveArray<'l, K>,
    w: jint,
    h: jint,
    f: impl FnOnce(AnyView<'_>, AnyViewMut<'_>) -> tessera_core::Result<R>,
) -> Result<R> {
    let (w, h) = dims(w, h)?;
    let src_len = checked_len(env, src, "src", w, h)?;
    let dst_len = checked_len(env, dst, "dst", w, h)?;
    if env.is_same_object(src, dst)? {
        return Err(bad_arg("src and dst must be different arrays: the output is written while the input is read"));
    }
    let raw = env.get_raw();
    let result = {
        // SAFETY: `raw` is this thread's environment; both arrays are non-null with the
        // lengths just read; no JNI call happens until both guards drop at the end of
        // this block; the arrays are distinct (checked above), so the shared and the
        // mutable slice do not alias.
        let s = unsafe { Critical::<J>::new(raw, src.as_raw(), src_len, false)? };
        let mut d = unsafe { Critical::<K>::new(raw, dst.as_raw(), dst_len, true)? };
        let sv = J::view(s.as_slice(), w, h)?;
        let dv = K::view_mut(d.as_mut_slice(), w, h)?;
        f(sv, dv)
    };
    Ok(result?)
}

/// Runs `f` with `a` and `b` as read-only views and `dst` as a writable view, all `w x h`,
/// straight on the Java arrays inside critical sections (as [`with_src_dst`]). The three
/// arrays must be distinct, except that `a` and `b` may be the same array.
#[allow(clippy::too_many_arguments)]
pub fn with_pair_dst<'l, J: JavaPixel, K: JavaPixel, R>(
    env: &mut Env<'l>,
    a: &JPrimitiveArray<'l, J>,
    b: &JPrimitiveArray<'l, J>,
    dst: &JPrimitiveArray<'l, K>,
    w: jint,
    h: jint,
    f: impl FnOnce(AnyView<'_>, AnyView<'_>, AnyViewMut<'_>) -> tessera_core::Result<R>,
) -> Result<R> {
    let (w, h) = dims(w, h)?;
    let a_len = checked_len(env, a, "left", w, h)?;
    let b_len = checked_len(env, b, "right", w, h)?;
    let d_len = checked_len(env, dst, "dst", w, h)?;
    if env.is_same_object(a, dst)? || env.is_same_object(b, dst)? {
        return Err(bad_arg("the output array must differ from the inputs"));
    }
    let same = env.is_same_object(a, b)?;
    let raw = env.get_raw();
    let result = {
        // SAFETY: as in `with_src_dst`; `b` is not acquired a second time when it is `a`
        // (two shared views of one array are fine), and `dst` aliases neither.
        let sa = unsafe { Critical::<J>::new(raw, a.as_raw(), a_len, false)? };
        let sb = if same { None } else { Some(unsafe { Critical::<J>::new(raw, b.as_raw(), b_len, false)? }) };
        let mut d = unsafe { Critical::<K>::new(raw, dst.as_raw(), d_len, true)? };
        let av = J::view(sa.as_slice(), w, h)?;
        let bv = J::view(sb.as_ref().map_or(sa.as_slice(), |c| c.as_slice()), w, h)?;
        let dv = K::view_mut(d.as_mut_slice(), w, h)?;
        f(av, bv, dv)
    };
    Ok(result?)
}

/// Runs `f` with `dst` as a writable `w x h` view on the Java array (critical section).
pub fn with_dst<'l, K: JavaPixel, R>(
    env: &mut Env<'l>,
    dst: &JPrimitiveArray<'l, K>,
    w: jint,
    h: jint,
    f: impl FnOnce(AnyViewMut<'_>) -> tessera_core::Result<R>,
) -> Result<R> {
    let (w, h) = dims(w, h)?;
    let d_len = checked_len(env, dst, "dst", w, h)?;
    let raw = env.get_raw();
    let result = {
        // SAFETY: as in `with_src_dst`, with a single array.
        let mut d = unsafe { Critical::<K>::new(raw, dst.as_raw(), d_len, true)? };
        f(K::view_mut(d.as_mut_slice(), w, h)?)
    };
    Ok(result?)
}

/// Copies an ImageJ RGB `int[]` (checked: not null, `w * h` pixels) into true-order RGBA.
pub fn copy_rgb(env: &Env<'_>, a: &JPrimitiveArray<'_, jint>, name: &str, w: usize, h: usize) -> Result<Vec<Rgba8>> {
    checked_len(env, a, name, w, h)?;
    let mut buf = vec![0; w * h];
    a.get_region(env, 0, &mut buf)?;
    Ok(rgba_from_imagej(&buf))
}

/// Runs `f` with `src` read-only and two outputs, `a` and `b`, all `w x h`, straight on
/// the Java arrays inside critical sections (as [`with_src_dst`]); the three arrays must
/// be distinct.
#[allow(clippy::too_many_arguments)]
pub fn with_src_dst2<'l, J: JavaPixel, A: JavaPixel, B: JavaPixel, R>(
    env: &mut Env<'l>,
    src: &JPrimitiveArray<'l, J>,
    a: &JPrimitiveArray<'l, A>,
    b: &JPrimitiveArray<'l, B>,
    w: jint,
    h: jint,
    f: impl FnOnce(AnyView<'_>, AnyViewMut<'_>, AnyViewMut<'_>) -> tessera_core::Result<R>,
) -> Result<R> {
    let (w, h) = dims(w, h)?;
    let s_len = checked_len(env, src, "src", w, h)?;
    let a_len = checked_len(env, a, "first output", w, h)?;
    let b_len = checked_len(env, b, "second output", w, h)?;
    if env.is_same_object(src, a)? || env.is_same_object(src, b)? || env.is_same_object(a, b)? {
        return Err(bad_arg("the input and the two output arrays must be three different arrays"));
    }
    let raw = env.get_raw();
    let result = {
        // SAFETY: as in `with_src_dst`, with three distinct arrays.
        let s = unsafe { Critical::<J>::new(raw, src.as_raw(), s_len, false)? };
        let mut da = unsafe { Critical::<A>::new(raw, a.as_raw(), a_len, true)? };
        let mut db = unsafe { Critical::<B>::new(raw, b.as_raw(), b_len, true)? };
        let sv = J::view(s.as_slice(), w, h)?;
        let av = A::view_mut(da.as_mut_slice(), w, h)?;
        let bv = B::view_mut(db.as_mut_slice(), w, h)?;
        f(sv, av, bv)
    };
    Ok(result?)
}

/// An ImageJ RGB image seen in place (`int[]` as [`Rgba8`], red and blue trading places)
/// copied into true-order RGBA, for the operations that weigh the channels.
pub fn true_rgba(v: tessera_core::ImageView<'_, Rgba8>) -> tessera_core::Result<tessera_core::Image<Rgba8>> {
    tessera_core::Image::from_fn(v.width(), v.height(), |x, y| {
        let p = v.row(y)[x];
        Rgba8::new(p.b, p.g, p.r, p.a)
    })
}

/// Writes a true-order RGBA image into an ImageJ RGB image seen in place (the inverse of
/// [`true_rgba`]).
pub fn write_imagej_rgba(src: &tessera_core::Image<Rgba8>, mut dst: tessera_core::ImageViewMut<'_, Rgba8>) -> tessera_core::Result<()> {
    tessera_core::image::check_same_size(src.size(), dst.size())?;
    for y in 0..src.height() {
        for (d, s) in dst.row_mut(y).iter_mut().zip(src.row(y)) {
            *d = Rgba8::new(s.b, s.g, s.r, s.a);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imagej_rgb_round_trips_with_channels_in_place() {
        let ints: Vec<jint> = vec![0x00ff_8001u32 as jint, 0xff12_3456u32 as jint, 0];
        let rgba = rgba_from_imagej(&ints);
        assert_eq!(rgba[0], Rgba8::new(0xff, 0x80, 0x01, 0x00));
        assert_eq!(rgba[1], Rgba8::new(0x12, 0x34, 0x56, 0xff));
        let mut back = vec![0; 3];
        rgba_to_imagej(&rgba, &mut back);
        assert_eq!(back, ints);
    }

    #[test]
    fn imagej_rgb_reinterpreted_has_blue_first() {
        // What the copy-free path relies on: an ImageJ int seen as Rgba8 on x86-64.
        let ints: Vec<jint> = vec![0x0011_2233];
        let v = <jint as JavaPixel>::view(&ints, 1, 1).unwrap();
        match v {
            AnyView::Rgba8(v) => assert_eq!(v.row(0)[0], Rgba8::new(0x33, 0x22, 0x11, 0x00)),
            _ => panic!("int[] must view as Rgba8"),
        }
    }

    #[test]
    fn java_views_keep_unsigned_values() {
        let b: Vec<jbyte> = vec![-1, 0, 127, -128];
        match <jbyte as JavaPixel>::view(&b, 2, 2).unwrap() {
            AnyView::U8(v) => assert_eq!(v.span(), &[255, 0, 127, 128]),
            _ => panic!("byte[] must view as u8"),
        }
        let s: Vec<jshort> = vec![-1, 1];
        match <jshort as JavaPixel>::view(&s, 2, 1).unwrap() {
            AnyView::U16(v) => assert_eq!(v.span(), &[65535, 1]),
            _ => panic!("short[] must view as u16"),
        }
    }

    #[test]
    fn short_buffers_and_zero_sizes_are_errors() {
        let b: Vec<jbyte> = vec![0; 5];
        assert!(<jbyte as JavaPixel>::view(&b, 3, 2).is_err());
        assert!(<jbyte as JavaPixel>::view(&b, 0, 2).is_err());
        let mut f: Vec<jfloat> = vec![0.0; 5];
        assert!(<jfloat as JavaPixel>::view_mut(&mut f, 3, 2).is_err());
    }

    #[test]
    fn negative_sizes_and_counts_are_errors() {
        assert!(dims(-1, 3).is_err());
        assert!(dims(3, -1).is_err());
        assert_eq!(dims(0, 2).unwrap(), (0, 2));
        assert!(count("radius", -1).is_err());
        assert_eq!(count("radius", 5).unwrap(), 5);
    }
}

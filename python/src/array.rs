//! NumPy arrays as the core's image views, without copies.
//!
//! Inputs: a 2-D `uint8`, `uint16` or `float32` array is a gray image, an `(H, W, 4)`
//! `uint8` array an RGBA image. The core's `ImageView` has a row stride, so any array
//! whose pixels are contiguous within a row is taken as it is: C-contiguous arrays, row
//! slices, column ranges (`a[10:100, 20:200]`), every other row (`a[::2]`). Pixels that are
//! not adjacent within a row (`a[:, ::2]`, a transposed array, reversed rows or columns) have
//! no such view: a `ValueError` says so and names `numpy.ascontiguousarray` (the copy is
//! the caller's to make, so it is never hidden). Another dtype is a `TypeError`.
//!
//! Outputs are new NumPy arrays written in place by the core (no copy on the way out).
//! The input stays borrowed (read-only) for the call; while the GIL is released, another
//! Python thread that writes into the same array races with the call, as with any NumPy
//! function that releases the GIL.

use crate::backend::Chosen;
use crate::device::Lent;
use crate::errors::{to_py, type_error, value_error};
use crate::ops::Op;
use numpy::{
    Element, PyArray2, PyArray3, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray2, PyReadonlyArray3,
    PyReadwriteArray2, PyReadwriteArray3, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use tessera::dlpack::PixelKind;
use tessera::{AnyImage, AnyView, AnyViewMut, Image, ImageView, ImageViewMut, Pixel, Rgba8};

const _: () = assert!(std::mem::size_of::<Rgba8>() == 4 && std::mem::align_of::<Rgba8>() == 1);

/// The pixel types an argument accepts.
#[derive(Clone, Copy)]
pub struct Accepts {
    pub u8: bool,
    pub u16: bool,
    pub f32: bool,
    pub rgba: bool,
}

impl Accepts {
    /// Every input type of the core.
    pub const ALL: Accepts = Accepts { u8: true, u16: true, f32: true, rgba: true };
    /// The gray types.
    pub const GRAY: Accepts = Accepts { u8: true, u16: true, f32: true, rgba: false };
    /// 8-bit gray or RGBA (stereo).
    pub const U8_OR_RGBA: Accepts = Accepts { u8: true, u16: false, f32: false, rgba: true };
    /// float32 matrices.
    pub const F32: Accepts = Accepts { u8: false, u16: false, f32: true, rgba: false };

    fn describe(self) -> String {
        let mut v = Vec::new();
        if self.u8 {
            v.push("uint8 (H, W)");
        }
        if self.u16 {
            v.push("uint16 (H, W)");
        }
        if self.f32 {
            v.push("float32 (H, W)");
        }
        if self.rgba {
            v.push("uint8 RGBA (H, W, 4)");
        }
        v.join(", ")
    }
}

/// A NumPy array borrowed read-only for the call, by pixel type.
pub enum Input<'py> {
    U8(PyReadonlyArray2<'py, u8>),
    U16(PyReadonlyArray2<'py, u16>),
    F32(PyReadonlyArray2<'py, f32>),
    Rgba8(PyReadonlyArray3<'py, u8>),
}

fn is<T: Element>(arr: &Bound<'_, PyUntypedArray>) -> bool {
    arr.dtype().is_equiv_to(&numpy::dtype::<T>(arr.py()))
}

/// `obj` as an input image named `what` of one of the `accepts` types.
pub fn input<'py>(obj: &Bound<'py, PyAny>, what: &str, accepts: Accepts) -> PyResult<Input<'py>> {
    let arr = obj.cast::<PyUntypedArray>().map_err(|_| {
        let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        type_error(format!("{what}: expected a numpy.ndarray (or an array with __dlpack__), got {ty}"))
    })?;
    let shape = arr.shape().to_vec();
    let borrow = |e: numpy::BorrowError| value_error(format!("{what}: {e}"));
    let dtype = arr.dtype().str().map(|s| s.to_string()).unwrap_or_else(|_| "?".into());
    let expected = accepts.describe();
    let unsupported = |kind: &str| type_error(format!("{what}: {kind} is not supported by this operation; expected {expected}"));
    let (u8_, u16_, f32_) = (is::<u8>(arr), is::<u16>(arr), is::<f32>(arr));
    if !(u8_ || u16_ || f32_) {
        return Err(type_error(format!("{what}: dtype {dtype} is not supported; expected {expected}")));
    }
    match (shape.len(), shape.get(2).copied()) {
        (2, _) if u8_ => match accepts.u8 {
            true => Ok(Input::U8(obj.cast::<PyArray2<u8>>()?.try_readonly().map_err(borrow)?)),
            false => Err(unsupported("uint8 gray")),
        },
        (2, _) if u16_ => match accepts.u16 {
            true => Ok(Input::U16(obj.cast::<PyArray2<u16>>()?.try_readonly().map_err(borrow)?)),
            false => Err(unsupported("uint16")),
        },
        (2, _) => match accepts.f32 {
            true => Ok(Input::F32(obj.cast::<PyArray2<f32>>()?.try_readonly().map_err(borrow)?)),
            false => Err(unsupported("float32")),
        },
        (3, Some(4)) if u8_ => match accepts.rgba {
            true => Ok(Input::Rgba8(obj.cast::<PyArray3<u8>>()?.try_readonly().map_err(borrow)?)),
            false => Err(unsupported("uint8 RGBA")),
        },
        (3, Some(3)) if u8_ && accepts.rgba => Err(value_error(format!(
            "{what}: shape {shape:?} is RGB; tessera takes RGBA (H, W, 4): add an alpha channel, e.g. numpy.dstack([rgb, numpy.full(rgb.shape[:2], 255, numpy.uint8)])"
        ))),
        _ => Err(value_error(format!("{what}: shape {shape:?} ({dtype}) is not an image; expected {expected}"))),
    }
}

/// The row stride in elements of an array with `rows x cols` items of `item` bytes whose
/// strides are `strides` (bytes), where the items of a row are adjacent.
fn row_stride(what: &str, rows: usize, cols: usize, strides: [isize; 2], item: usize, ptr: usize, align: usize) -> PyResult<usize> {
    let item_i = item as isize;
    if cols > 1 && strides[1] != item_i {
        return Err(value_error(format!(
            "{what}: the pixels of a row are not adjacent in memory (column stride {} bytes, pixel {item} bytes: a transposed array, a column step or reversed columns); pass numpy.ascontiguousarray({what})",
            strides[1]
        )));
    }
    if ptr % align != 0 {
        return Err(value_error(format!("{what}: the pixel buffer is not aligned for its dtype; pass numpy.ascontiguousarray({what})")));
    }
    if rows <= 1 {
        return Ok(cols);
    }
    let s = strides[0];
    if s <= 0 || s % item_i != 0 || ((s / item_i) as usize) < cols {
        return Err(value_error(format!(
            "{what}: row stride {s} bytes does not hold a row of {cols} pixels of {item} bytes in order (reversed or overlapping rows); pass numpy.ascontiguousarray({what})"
        )));
    }
    Ok((s / item_i) as usize)
}

fn gray_view<'a, T: Element + Pixel>(what: &str, a: &'a PyReadonlyArray2<'_, T>) -> PyResult<ImageView<'a, T>> {
    let (h, w) = (a.shape()[0], a.shape()[1]);
    if h == 0 || w == 0 {
        return ImageView::new(&[], w, h, w).map_err(to_py);
    }
    let st = a.strides();
    let ptr = a.data();
    let stride = row_stride(what, h, w, [st[0], st[1]], std::mem::size_of::<T>(), ptr as usize, std::mem::align_of::<T>())?;
    // SAFETY: the array is borrowed read-only for 'a (the guard `a`), its buffer holds
    // rows `stride` elements apart with `w` adjacent elements each (checked above), so the
    // `stride * (h - 1) + w` elements from `ptr` lie in it; `ptr` is aligned for T.
    let data = unsafe { std::slice::from_raw_parts(ptr as *const T, stride * (h - 1) + w) };
    ImageView::new(data, w, h, stride).map_err(to_py)
}

fn rgba_view<'a>(what: &str, a: &'a PyReadonlyArray3<'_, u8>) -> PyResult<ImageView<'a, Rgba8>> {
    let (h, w) = (a.shape()[0], a.shape()[1]);
    if h == 0 || w == 0 {
        return ImageView::new(&[], w, h, w).map_err(to_py);
    }
    let st = a.strides();
    if st[2] != 1 {
        return Err(value_error(format!(
            "{what}: the four channels of a pixel are not adjacent (channel stride {} bytes); pass numpy.ascontiguousarray({what})",
            st[2]
        )));
    }
    let ptr = a.data();
    let stride = row_stride(what, h, w, [st[0], st[1]], 4, ptr as usize, 1)?;
    // SAFETY: as in `gray_view`, with RGBA pixels of 4 adjacent bytes (Rgba8 is repr(C),
    // four u8, alignment 1).
    let data = unsafe { std::slice::from_raw_parts(ptr as *const Rgba8, stride * (h - 1) + w) };
    ImageView::new(data, w, h, stride).map_err(to_py)
}

impl Input<'_> {
    /// The image view of the borrowed array (`what` names it in errors).
    pub fn view(&self, what: &str) -> PyResult<AnyView<'_>> {
        Ok(match self {
            Input::U8(a) => AnyView::U8(gray_view(what, a)?),
            Input::U16(a) => AnyView::U16(gray_view(what, a)?),
            Input::F32(a) => AnyView::F32(gray_view(what, a)?),
            Input::Rgba8(a) => AnyView::Rgba8(rgba_view(what, a)?),
        })
    }
}

/// A new output array, written by the core through [`Output::view_mut`].
pub enum Output<'py> {
    U8(Bound<'py, PyArray2<u8>>),
    U16(Bound<'py, PyArray2<u16>>),
    U32(Bound<'py, PyArray2<u32>>),
    F32(Bound<'py, PyArray2<f32>>),
    Rgba8(Bound<'py, PyArray3<u8>>),
}

/// The output array borrowed for writing.
pub enum OutputGuard<'py> {
    U8(PyReadwriteArray2<'py, u8>),
    U16(PyReadwriteArray2<'py, u16>),
    U32(PyReadwriteArray2<'py, u32>),
    F32(PyReadwriteArray2<'py, f32>),
    Rgba8(PyReadwriteArray3<'py, u8>),
}

impl<'py> Output<'py> {
    /// Zeros of the input's type and size.
    pub fn like(py: Python<'py>, v: &AnyView<'_>) -> Output<'py> {
        let (w, h) = v.size();
        match v {
            AnyView::U8(_) => Output::U8(PyArray2::zeros(py, [h, w], false)),
            AnyView::U16(_) => Output::U16(PyArray2::zeros(py, [h, w], false)),
            AnyView::F32(_) => Output::F32(PyArray2::zeros(py, [h, w], false)),
            AnyView::Rgba8(_) => Output::Rgba8(PyArray3::zeros(py, [h, w, 4], false)),
        }
    }

    /// Zeros of `kind` and `w x h`.
    pub fn of(py: Python<'py>, kind: PixelKind, w: usize, h: usize) -> Output<'py> {
        match kind {
            PixelKind::U8 => Output::U8(PyArray2::zeros(py, [h, w], false)),
            PixelKind::U16 => Output::U16(PyArray2::zeros(py, [h, w], false)),
            PixelKind::U32 => Output::U32(PyArray2::zeros(py, [h, w], false)),
            PixelKind::F32 => Output::F32(PyArray2::zeros(py, [h, w], false)),
            PixelKind::Rgba8 => Output::Rgba8(PyArray3::zeros(py, [h, w, 4], false)),
        }
    }

    /// float32 zeros of `w x h`.
    pub fn f32(py: Python<'py>, w: usize, h: usize) -> Output<'py> {
        Output::F32(PyArray2::zeros(py, [h, w], false))
    }

    /// uint8 zeros of `w x h`.
    pub fn u8(py: Python<'py>, w: usize, h: usize) -> Output<'py> {
        Output::U8(PyArray2::zeros(py, [h, w], false))
    }

    /// The array borrowed for writing (new and unshared, so the borrow cannot fail).
    pub fn write(&self) -> PyResult<OutputGuard<'py>> {
        let e = |e: numpy::BorrowError| value_error(e.to_string());
        Ok(match self {
            Output::U8(a) => OutputGuard::U8(a.try_readwrite().map_err(e)?),
            Output::U16(a) => OutputGuard::U16(a.try_readwrite().map_err(e)?),
            Output::U32(a) => OutputGuard::U32(a.try_readwrite().map_err(e)?),
            Output::F32(a) => OutputGuard::F32(a.try_readwrite().map_err(e)?),
            Output::Rgba8(a) => OutputGuard::Rgba8(a.try_readwrite().map_err(e)?),
        })
    }

    pub fn into_any(self) -> Bound<'py, PyAny> {
        match self {
            Output::U8(a) => a.into_any(),
            Output::U16(a) => a.into_any(),
            Output::U32(a) => a.into_any(),
            Output::F32(a) => a.into_any(),
            Output::Rgba8(a) => a.into_any(),
        }
    }
}

fn contiguous_mut<'a, T: Element + Pixel>(a: &'a mut PyReadwriteArray2<'_, T>) -> PyResult<ImageViewMut<'a, T>> {
    let (h, w) = (a.shape()[0], a.shape()[1]);
    let data = a.as_slice_mut().map_err(|e| value_error(e.to_string()))?;
    ImageViewMut::from_slice(data, w, h).map_err(to_py)
}

impl OutputGuard<'_> {
    /// The output as a writable view.
    pub fn view_mut(&mut self) -> PyResult<AnyViewMut<'_>> {
        Ok(match self {
            OutputGuard::U8(a) => AnyViewMut::U8(contiguous_mut(a)?),
            OutputGuard::U16(a) => AnyViewMut::U16(contiguous_mut(a)?),
            OutputGuard::U32(a) => AnyViewMut::U32(contiguous_mut(a)?),
            OutputGuard::F32(a) => AnyViewMut::F32(contiguous_mut(a)?),
            OutputGuard::Rgba8(a) => {
                let (h, w) = (a.shape()[0], a.shape()[1]);
                let bytes = a.as_slice_mut().map_err(|e| value_error(e.to_string()))?;
                // SAFETY: a new C-contiguous (h, w, 4) u8 array: h * w RGBA pixels of four
                // adjacent bytes (Rgba8: repr(C), size 4, alignment 1), borrowed mutably.
                let px = unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr() as *mut Rgba8, h * w) };
                AnyViewMut::Rgba8(ImageViewMut::from_slice(px, w, h).map_err(to_py)?)
            }
        })
    }

    /// The float32 output as a writable view (for the operations whose output is f32).
    pub fn f32_mut(&mut self) -> PyResult<ImageViewMut<'_, f32>> {
        match self.view_mut()? {
            AnyViewMut::F32(v) => Ok(v),
            _ => Err(value_error("internal: the output is not float32")),
        }
    }

    /// The uint8 output as a writable view.
    pub fn u8_mut(&mut self) -> PyResult<ImageViewMut<'_, u8>> {
        match self.view_mut()? {
            AnyViewMut::U8(v) => Ok(v),
            _ => Err(value_error("internal: the output is not uint8")),
        }
    }
}

/// One image in, one new image out: `op` on `image` (of the `accepts` types) with the GIL
/// released. A NumPy array or host DLPack array gives a new NumPy array; a CUDA array or a
/// `CudaImage` a new `CudaImage` (`device.rs`).
pub fn unary<'py>(py: Python<'py>, image: &Bound<'py, PyAny>, accepts: Accepts, chosen: Chosen, op: Op) -> PyResult<Bound<'py, PyAny>> {
    match crate::device::lent(image, "image", accepts, &chosen)? {
        Some(Lent::Device(d)) => crate::device::on_device(py, d, &chosen, &op),
        Some(Lent::Host { image: t, _tensor }) => crate::device::on_host(py, crate::device::host_view(&t)?, &chosen, &op),
        None => {
            let inp = input(image, "image", accepts)?;
            crate::device::on_host(py, inp.view("image")?, &chosen, &op)
        }
    }
}

/// An owned image moved into a NumPy array (the buffer is handed over, not copied).
pub fn image_to_numpy<'py>(py: Python<'py>, img: AnyImage) -> PyResult<Bound<'py, PyAny>> {
    use numpy::IntoPyArray;
    fn gray<'py, T: Element + Pixel>(py: Python<'py>, i: Image<T>) -> PyResult<Bound<'py, PyAny>> {
        let (w, h) = i.size();
        let a = numpy::ndarray::Array2::from_shape_vec((h, w), i.into_vec()).map_err(|e| value_error(e.to_string()))?;
        Ok(a.into_pyarray(py).into_any())
    }
    match img {
        AnyImage::U8(i) => gray(py, i),
        AnyImage::U16(i) => gray(py, i),
        AnyImage::U32(i) => gray(py, i),
        AnyImage::F32(i) => gray(py, i),
        AnyImage::Rgba8(i) => {
            let (w, h) = i.size();
            let mut v = std::mem::ManuallyDrop::new(i.into_vec());
            // SAFETY: Rgba8 is four u8 (repr(C), alignment 1, no padding): the allocation of
            // `len` pixels with capacity `cap` is one of `4 len` bytes with capacity `4 cap`
            // and the same alignment, so it can be owned as a Vec<u8>.
            let bytes = unsafe { Vec::from_raw_parts(v.as_mut_ptr() as *mut u8, v.len() * 4, v.capacity() * 4) };
            let a = numpy::ndarray::Array3::from_shape_vec((h, w, 4), bytes).map_err(|e| value_error(e.to_string()))?;
            Ok(a.into_pyarray(py).into_any())
        }
    }
}

//! Arrays of other libraries in and out through DLPack, and images that stay on the GPU.
//!
//! Inputs (of the one-image operations, glare and the matrix operations): besides NumPy arrays,
//! any object with `__dlpack__` and `__dlpack_device__` (PyTorch tensors, CuPy and JAX
//! arrays) is taken without a copy.
//! Host memory is read in place like a NumPy array (the same layout rules) and the output
//! is a new NumPy array. CUDA memory is read in place on the GPU by the CUDA backend, and
//! the output is a [`CudaImage`], which stays on the device: another call takes it as its
//! input without a transfer, and CuPy or PyTorch take it back without a copy
//! (`cupy.from_dlpack(x)`, `torch.from_dlpack(x)`, or `__cuda_array_interface__`).
//!
//! Ordering: a CUDA array is asked for with `stream=1` (the legacy default stream, where
//! the backend queues its kernels), so the producer's pending work on it comes first. A
//! `CudaImage` handed to a consumer on another stream is synchronized first.

use crate::backend::{choose, Chosen};
use crate::errors::{to_py, type_error, value_error};
use crate::ops::{kind_of, MatOp, Op};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::ffi::{c_void, CStr};
use std::sync::Arc;
use tessera::cuda::{CudaBackend, DeviceDst, DeviceImage, DevicePixel, DeviceSrc};
use tessera::dlpack::{self, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor, PixelKind, TensorImage};
use tessera::{AnyView, AnyViewMut, ImageView, ImageViewMut, Rgba8};

const DLTENSOR: &CStr = c"dltensor";
const DLTENSOR_VERSIONED: &CStr = c"dltensor_versioned";
const USED_DLTENSOR: &CStr = c"used_dltensor";
const USED_DLTENSOR_VERSIONED: &CStr = c"used_dltensor_versioned";

/// The CUDA backend's device (it opens device 0).
const DEVICE_ID: i32 = 0;

/// An image in the CUDA backend's memory, by pixel type.
pub enum AnyDeviceImage {
    U8(DeviceImage<'static, u8>),
    U16(DeviceImage<'static, u16>),
    U32(DeviceImage<'static, u32>),
    F32(DeviceImage<'static, f32>),
    Rgba8(DeviceImage<'static, Rgba8>),
}

/// `$body` with `$i` bound to the typed image inside `$e`.
macro_rules! each {
    ($e:expr, |$i:ident| $body:expr) => {
        match $e {
            AnyDeviceImage::U8($i) => $body,
            AnyDeviceImage::U16($i) => $body,
            AnyDeviceImage::U32($i) => $body,
            AnyDeviceImage::F32($i) => $body,
            AnyDeviceImage::Rgba8($i) => $body,
        }
    };
}

impl AnyDeviceImage {
    fn kind(&self) -> PixelKind {
        match self {
            AnyDeviceImage::U8(_) => PixelKind::U8,
            AnyDeviceImage::U16(_) => PixelKind::U16,
            AnyDeviceImage::U32(_) => PixelKind::U32,
            AnyDeviceImage::F32(_) => PixelKind::F32,
            AnyDeviceImage::Rgba8(_) => PixelKind::Rgba8,
        }
    }

    fn size(&self) -> (usize, usize) {
        each!(self, |i| i.size())
    }

    fn ptr(&self) -> u64 {
        each!(self, |i| i.device_ptr())
    }

    /// A new image of `kind` (zeros).
    fn zeros(b: &'static CudaBackend, kind: PixelKind, w: usize, h: usize) -> tessera::Result<Self> {
        Ok(match kind {
            PixelKind::U8 => AnyDeviceImage::U8(b.device_image(w, h)?),
            PixelKind::U16 => AnyDeviceImage::U16(b.device_image(w, h)?),
            PixelKind::U32 => AnyDeviceImage::U32(b.device_image(w, h)?),
            PixelKind::F32 => AnyDeviceImage::F32(b.device_image(w, h)?),
            PixelKind::Rgba8 => AnyDeviceImage::Rgba8(b.device_image(w, h)?),
        })
    }

    /// A copy of a host view.
    fn upload(b: &'static CudaBackend, v: AnyView<'_>) -> tessera::Result<Self> {
        Ok(match v {
            AnyView::U8(v) => AnyDeviceImage::U8(b.upload(v)?),
            AnyView::U16(v) => AnyDeviceImage::U16(b.upload(v)?),
            AnyView::F32(v) => AnyDeviceImage::F32(b.upload(v)?),
            AnyView::Rgba8(v) => AnyDeviceImage::Rgba8(b.upload(v)?),
        })
    }

    /// The memory of a lent CUDA tensor, borrowed.
    ///
    /// # Safety
    /// `t` describes device memory of the backend's context that stays allocated while
    /// the image lives (the lender's capsule is held).
    unsafe fn borrow(b: &'static CudaBackend, t: &TensorImage) -> tessera::Result<Self> {
        let (p, w, h) = (t.data as u64, t.width, t.height);
        // SAFETY: the caller's contract.
        unsafe {
            Ok(match t.pixel {
                PixelKind::U8 => AnyDeviceImage::U8(b.borrow_device_image(p, w, h)?),
                PixelKind::U16 => AnyDeviceImage::U16(b.borrow_device_image(p, w, h)?),
                PixelKind::U32 => AnyDeviceImage::U32(b.borrow_device_image(p, w, h)?),
                PixelKind::F32 => AnyDeviceImage::F32(b.borrow_device_image(p, w, h)?),
                PixelKind::Rgba8 => AnyDeviceImage::Rgba8(b.borrow_device_image(p, w, h)?),
            })
        }
    }

    /// As an operation's input (a `uint32` image is no operation's input).
    fn src(&self) -> tessera::Result<DeviceSrc<'_, 'static>> {
        Ok(match self {
            AnyDeviceImage::U8(i) => i.into(),
            AnyDeviceImage::U16(i) => i.into(),
            AnyDeviceImage::F32(i) => i.into(),
            AnyDeviceImage::Rgba8(i) => i.into(),
            AnyDeviceImage::U32(_) => return Err(tessera::Error::UnsupportedType { op: "an operation's input", types: "uint32" }),
        })
    }

    fn dst(&mut self) -> DeviceDst<'_, 'static> {
        each!(self, |i| i.into())
    }
}

/// `image` on the device of `b`, read into a new host array.
fn download<'py>(py: Python<'py>, b: &CudaBackend, image: &AnyDeviceImage) -> PyResult<Bound<'py, PyAny>> {
    let (w, h) = image.size();
    let out = crate::array::Output::of(py, image.kind(), w, h);
    {
        let mut g = out.write()?;
        let dst = g.view_mut()?;
        fn typed<T: DevicePixel>(b: &CudaBackend, i: &DeviceImage<'_, T>, d: ImageViewMut<'_, T>) -> tessera::Result<()> {
            b.download(i, d)
        }
        let r = match (image, dst) {
            (AnyDeviceImage::U8(i), AnyViewMut::U8(d)) => typed(b, i, d),
            (AnyDeviceImage::U16(i), AnyViewMut::U16(d)) => typed(b, i, d),
            (AnyDeviceImage::U32(i), AnyViewMut::U32(d)) => typed(b, i, d),
            (AnyDeviceImage::F32(i), AnyViewMut::F32(d)) => typed(b, i, d),
            (AnyDeviceImage::Rgba8(i), AnyViewMut::Rgba8(d)) => typed(b, i, d),
            _ => Err(tessera::backend::type_mismatch("download")),
        };
        py.detach(|| r).map_err(to_py)?;
    }
    Ok(out.into_any())
}

/// An image in GPU memory, returned by the operations given CUDA arrays (or by
/// :func:`to_device`). Pass it to another operation to keep working on the GPU; take it to
/// CuPy or PyTorch without a copy (``cupy.from_dlpack(x)``, ``torch.from_dlpack(x)``;
/// ``__cuda_array_interface__`` too); ``x.numpy()`` copies it to a NumPy array.
/// ``shape`` and ``dtype`` are NumPy's: ``(H, W)`` or ``(H, W, 4)`` for RGBA.
#[pyclass(frozen, name = "CudaImage", module = "tessera")]
pub struct CudaImage {
    image: Arc<AnyDeviceImage>,
    backend: &'static CudaBackend,
}

impl CudaImage {
    fn new(image: AnyDeviceImage, backend: &'static CudaBackend) -> Self {
        CudaImage { image: Arc::new(image), backend }
    }

    fn dims(&self) -> Vec<usize> {
        let (w, h) = self.image.size();
        match self.image.kind() {
            PixelKind::Rgba8 => vec![h, w, 4],
            _ => vec![h, w],
        }
    }
}

#[pymethods]
impl CudaImage {
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.dims())
    }

    /// The NumPy dtype's name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.image.kind().numpy_dtype()
    }

    /// A copy in a new NumPy array.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        download(py, self.backend, &self.image)
    }

    /// ``(2, 0)``: CUDA device 0.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::DEVICE_CUDA, DEVICE_ID)
    }

    /// The image lent as a DLPack capsule. The memory stays allocated until the consumer
    /// releases it (after this object is gone too). ``stream``: the consumer's stream; for
    /// any but the legacy default stream (``None``, ``1``) the device is synchronized first.
    /// ``dl_device`` other than ``(2, 0)`` or ``copy=True``: BufferError (no cross-device
    /// export or copy here; ``numpy()`` copies to the host).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = max_version; // the unversioned capsule, which every consumer takes
        if dl_device.is_some_and(|d| d != (dlpack::DEVICE_CUDA, DEVICE_ID)) {
            return Err(PyBufferError::new_err("a CudaImage is exported only on its own device (2, 0); numpy() copies it to the host"));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err("a CudaImage is exported without a copy (copy=True is not supported)"));
        }
        if !matches!(stream, None | Some(1) | Some(-1)) {
            let b = self.backend;
            py.detach(|| b.synchronize()).map_err(to_py)?;
        }
        let (w, h) = self.image.size();
        let device = DLDevice { device_type: dlpack::DEVICE_CUDA, device_id: DEVICE_ID };
        let t = dlpack::export(Arc::clone(&self.image), self.image.ptr() as *mut c_void, device, self.image.kind(), w, h);
        // SAFETY: `t` is a managed tensor of `export`, handed over once.
        unsafe { capsule(py, t) }
    }

    /// The CUDA Array Interface (version 3): the data pointer, shape, type; ``stream`` 1,
    /// the legacy default stream the backend's kernels were queued on.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", PyTuple::new(py, self.dims())?)?;
        let typestr = match self.image.kind() {
            PixelKind::U8 | PixelKind::Rgba8 => "|u1",
            PixelKind::U16 => "<u2",
            PixelKind::U32 => "<u4",
            PixelKind::F32 => "<f4",
        };
        d.set_item("typestr", typestr)?;
        d.set_item("data", (self.image.ptr(), false))?;
        d.set_item("strides", py.None())?;
        d.set_item("version", 3)?;
        d.set_item("stream", 1)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!("CudaImage(shape={:?}, dtype={})", self.dims(), self.dtype())
    }
}

/// A capsule named `dltensor` holding `t`; a capsule never consumed calls `t`'s deleter
/// when it is collected.
///
/// # Safety
/// `t` is a live managed tensor, owned by the capsule from here on.
unsafe fn capsule<'py>(py: Python<'py>, t: *mut DLManagedTensor) -> PyResult<Bound<'py, PyAny>> {
    unsafe extern "C" fn unconsumed(capsule: *mut ffi::PyObject) {
        // SAFETY: Python calls this with the capsule; a consumer renames what it takes.
        unsafe {
            if ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
                let t = ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
                if let Some(delete) = (*t).deleter {
                    delete(t);
                }
            }
        }
    }
    // SAFETY: a valid pointer and a static name; on failure the tensor is still ours.
    unsafe {
        let c = ffi::PyCapsule_New(t.cast(), DLTENSOR.as_ptr(), Some(unconsumed));
        if c.is_null() {
            if let Some(delete) = (*t).deleter {
                delete(t);
            }
        }
        Bound::from_owned_ptr_or_err(py, c)
    }
}

/// A tensor taken from a producer's capsule: ours until dropped, when its deleter runs.
pub struct Imported {
    plain: *mut DLManagedTensor,
    versioned: *mut DLManagedTensorVersioned,
}

// SAFETY: the tensor is owned (the capsule was marked used); its memory is read only while
// the `Imported` lives, and DLPack deleters may be called from any thread.
unsafe impl Send for Imported {}

impl Imported {
    /// The tensor of `capsule` (named `dltensor` or `dltensor_versioned`), taken: the
    /// capsule is renamed as used, per the protocol.
    fn take(capsule: &Bound<'_, PyAny>, what: &str) -> PyResult<Imported> {
        let c = capsule.as_ptr();
        // SAFETY: `c` is a live object; the capsule functions check its type and name.
        unsafe {
            if ffi::PyCapsule_IsValid(c, DLTENSOR.as_ptr()) == 1 {
                let plain = ffi::PyCapsule_GetPointer(c, DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
                if plain.is_null() || ffi::PyCapsule_SetName(c, USED_DLTENSOR.as_ptr()) != 0 {
                    return Err(PyErr::take(capsule.py()).unwrap_or_else(|| value_error(format!("{what}: an empty DLPack capsule"))));
                }
                return Ok(Imported { plain, versioned: std::ptr::null_mut() });
            }
            if ffi::PyCapsule_IsValid(c, DLTENSOR_VERSIONED.as_ptr()) == 1 {
                let versioned = ffi::PyCapsule_GetPointer(c, DLTENSOR_VERSIONED.as_ptr()).cast::<DLManagedTensorVersioned>();
                if versioned.is_null() || ffi::PyCapsule_SetName(c, USED_DLTENSOR_VERSIONED.as_ptr()) != 0 {
                    return Err(PyErr::take(capsule.py()).unwrap_or_else(|| value_error(format!("{what}: an empty DLPack capsule"))));
                }
                if (*versioned).version.major != 1 {
                    drop(Imported { plain: std::ptr::null_mut(), versioned });
                    return Err(value_error(format!("{what}: DLPack version {} is not supported (1.x is)", (*versioned).version.major)));
                }
                return Ok(Imported { plain: std::ptr::null_mut(), versioned });
            }
        }
        Err(type_error(format!("{what}: __dlpack__() did not return a DLPack capsule")))
    }

    fn tensor(&self) -> &DLTensor {
        // SAFETY: one of the two is a live managed tensor, owned by `self`.
        unsafe {
            if self.plain.is_null() {
                &(*self.versioned).dl_tensor
            } else {
                &(*self.plain).dl_tensor
            }
        }
    }

    fn image(&self, what: &str) -> PyResult<TensorImage> {
        // SAFETY: a producer's tensor: `shape` (and `strides`, if not null) hold `ndim` values.
        unsafe { TensorImage::of(self.tensor()) }.map_err(|e| match e {
            dlpack::NotAnImage::Type(m) => type_error(format!("{what}: {m}")),
            dlpack::NotAnImage::Layout(m) => value_error(format!("{what}: {m}")),
        })
    }
}

impl Drop for Imported {
    fn drop(&mut self) {
        // SAFETY: the tensor is owned and its deleter is called once.
        unsafe {
            if !self.plain.is_null() {
                if let Some(delete) = (*self.plain).deleter {
                    delete(self.plain);
                }
            } else if let Some(delete) = (*self.versioned).deleter {
                delete(self.versioned);
            }
        }
    }
}

/// An input given as something other than a NumPy array.
pub enum Lent {
    /// Host memory lent through DLPack.
    Host { image: TensorImage, _tensor: Imported },
    /// An image on the device: a `CudaImage`, or a CUDA tensor borrowed for the call
    /// (the image is dropped before the tensor is given back).
    Device(DeviceInput),
}

pub enum DeviceInput {
    Ours(Arc<AnyDeviceImage>),
    Borrowed { image: AnyDeviceImage, _tensor: Imported },
}

impl DeviceInput {
    fn image(&self) -> &AnyDeviceImage {
        match self {
            DeviceInput::Ours(i) => i,
            DeviceInput::Borrowed { image, .. } => image,
        }
    }
}

fn accepted(kind: PixelKind, accepts: crate::array::Accepts) -> bool {
    match kind {
        PixelKind::U8 => accepts.u8,
        PixelKind::U16 => accepts.u16,
        PixelKind::F32 => accepts.f32,
        PixelKind::Rgba8 => accepts.rgba,
        PixelKind::U32 => false,
    }
}

/// The CUDA backend of `chosen`, or why a device input cannot be used with it.
fn cuda_of(chosen: &Chosen, what: &str) -> PyResult<&'static CudaBackend> {
    chosen.cuda.ok_or_else(|| match chosen.fallback {
        Some(why) => pyo3::exceptions::PyRuntimeError::new_err(format!("{what}: a CUDA array needs the CUDA backend, which is not usable here: {why}")),
        None => value_error(format!("{what}: a CUDA array needs backend=\"cuda\" or \"auto\" (the CPU backend does not copy it to the host)")),
    })
}

/// `obj` as an input when it is not a NumPy array: a `CudaImage` or a DLPack producer.
/// `None`: neither (the caller's NumPy path reports what it is).
pub fn lent(obj: &Bound<'_, PyAny>, what: &str, accepts: crate::array::Accepts, chosen: &Chosen) -> PyResult<Option<Lent>> {
    let check = |kind: PixelKind| -> PyResult<()> {
        match accepted(kind, accepts) {
            true => Ok(()),
            false => Err(type_error(format!("{what}: {} {} is not supported by this operation", kind.numpy_dtype(), if kind == PixelKind::Rgba8 { "RGBA" } else { "gray" }))),
        }
    };
    if let Ok(c) = obj.cast::<CudaImage>() {
        let c = c.get();
        check(c.image.kind())?;
        let cuda = cuda_of(chosen, what)?;
        if !std::ptr::eq(cuda, c.backend) {
            return Err(value_error(format!("{what}: a CudaImage of another CUDA backend")));
        }
        return Ok(Some(Lent::Device(DeviceInput::Ours(Arc::clone(&c.image)))));
    }
    // NumPy arrays have `__dlpack__` too; the NumPy path reads them directly (and says more
    // of what is wrong with one).
    if obj.cast::<numpy::PyUntypedArray>().is_ok() || !obj.hasattr("__dlpack__")? || !obj.hasattr("__dlpack_device__")? {
        return Ok(None);
    }
    let (device_type, device_id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
    match device_type {
        dlpack::DEVICE_CPU | dlpack::DEVICE_CUDA_HOST => {
            let tensor = Imported::take(&obj.call_method0("__dlpack__")?, what)?;
            let image = tensor.image(what)?;
            check(image.pixel)?;
            Ok(Some(Lent::Host { image, _tensor: tensor }))
        }
        dlpack::DEVICE_CUDA => {
            let cuda = cuda_of(chosen, what)?;
            if device_id != DEVICE_ID {
                return Err(value_error(format!("{what}: an array on CUDA device {device_id}; the CUDA backend runs on device {DEVICE_ID}")));
            }
            let kwargs = PyDict::new(obj.py());
            kwargs.set_item("stream", 1)?;
            let tensor = Imported::take(&obj.call_method("__dlpack__", (), Some(&kwargs))?, what)?;
            let image = tensor.image(what)?;
            check(image.pixel)?;
            if !image.is_packed() {
                return Err(value_error(format!(
                    "{what}: the rows of a CUDA array must be packed (row stride {} pixels for a width of {}); pass a contiguous copy (x.contiguous(), cupy.ascontiguousarray(x))",
                    image.row_stride, image.width
                )));
            }
            if image.width == 0 || image.height == 0 {
                return Err(to_py(tessera::Error::ZeroSize { width: image.width, height: image.height }));
            }
            // SAFETY: the producer lent CUDA memory of device 0 (its primary context, which
            // the backend uses) of this layout; `tensor` keeps it lent while the image lives.
            let borrowed = unsafe { AnyDeviceImage::borrow(cuda, &image) }.map_err(to_py)?;
            Ok(Some(Lent::Device(DeviceInput::Borrowed { image: borrowed, _tensor: tensor })))
        }
        other => Err(value_error(format!("{what}: DLPack device type {other} is not supported (CPU 1, CUDA 2, CUDA host 3 are)"))),
    }
}

/// The host view of lent host memory.
pub fn host_view(t: &TensorImage) -> PyResult<AnyView<'_>> {
    fn typed<T: tessera::Pixel>(t: &TensorImage) -> PyResult<ImageView<'_, T>> {
        let (w, h, s) = (t.width, t.height, t.row_stride);
        if w == 0 || h == 0 {
            return ImageView::new(&[], w, h, w).map_err(to_py);
        }
        // SAFETY: `TensorImage::of` checked the layout: `s * (h - 1) + w` aligned pixels
        // from `data`, lent (held by the caller's `Imported`) for the view's lifetime.
        let data = unsafe { std::slice::from_raw_parts(t.data as *const T, s * (h - 1) + w) };
        ImageView::new(data, w, h, s).map_err(to_py)
    }
    Ok(match t.pixel {
        PixelKind::U8 => AnyView::U8(typed(t)?),
        PixelKind::U16 => AnyView::U16(typed(t)?),
        PixelKind::F32 => AnyView::F32(typed(t)?),
        PixelKind::Rgba8 => AnyView::Rgba8(typed(t)?),
        PixelKind::U32 => return Err(type_error("uint32 is no operation's input")),
    })
}

/// `op` on a device input: a new `CudaImage`, computed with the GIL released.
pub fn on_device<'py>(py: Python<'py>, input: DeviceInput, chosen: &Chosen, op: &Op) -> PyResult<Bound<'py, PyAny>> {
    let cuda = cuda_of(chosen, "image")?;
    let src = input.image();
    let (w, h) = src.size();
    let mut out = AnyDeviceImage::zeros(cuda, op.output(src.kind()), w, h).map_err(to_py)?;
    {
        let dst = out.dst();
        let s = src.src().map_err(to_py)?;
        py.detach(|| op.device(cuda, s, dst)).map_err(to_py)?;
    }
    drop(input);
    Ok(Bound::new(py, CudaImage::new(out, cuda))?.into_any())
}

/// A matrix operation on two device inputs: a new `CudaImage`, computed with the GIL
/// released.
pub fn matrices_on_device<'py>(py: Python<'py>, (a, b): (DeviceInput, DeviceInput), chosen: &Chosen, op: MatOp) -> PyResult<Bound<'py, PyAny>> {
    let cuda = cuda_of(chosen, "a")?;
    let (AnyDeviceImage::F32(x), AnyDeviceImage::F32(y)) = (a.image(), b.image()) else {
        return Err(type_error("a and b: matrices are float32"));
    };
    let (w, h) = op.output(x.size(), y.size());
    let mut out = cuda.device_image::<f32>(w, h).map_err(to_py)?;
    py.detach(|| op.device(cuda, x, y, &mut out)).map_err(to_py)?;
    drop((a, b));
    Ok(Bound::new(py, CudaImage::new(AnyDeviceImage::F32(out), cuda))?.into_any())
}

/// Stereo of a pair on the device: the disparity map as a new `CudaImage`, and the stats.
pub fn stereo_on_device<'py>(py: Python<'py>, (l, r): (DeviceInput, DeviceInput), chosen: &Chosen, p: &tessera::stereo::StereoParams) -> PyResult<(Bound<'py, PyAny>, tessera::stereo::StereoStats)> {
    let cuda = cuda_of(chosen, "left")?;
    let (w, h) = l.image().size();
    let mut map = cuda.device_image::<f32>(w, h).map_err(to_py)?;
    let stats = {
        let (a, b) = (l.image().src().map_err(to_py)?, r.image().src().map_err(to_py)?);
        py.detach(|| cuda.stereo_sgm_on_device(a, b, &mut map, p)).map_err(to_py)?
    };
    drop((l, r));
    Ok((Bound::new(py, CudaImage::new(AnyDeviceImage::F32(map), cuda))?.into_any(), stats))
}

/// Glare removal on a device input: the corrected image and the mask as new `CudaImage`s,
/// and the report.
pub fn glare_on_device<'py>(py: Python<'py>, input: DeviceInput, chosen: &Chosen, p: &tessera::GlareParams) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, tessera::GlareReport)> {
    let cuda = cuda_of(chosen, "image")?;
    let src = input.image();
    let (w, h) = src.size();
    let mut corrected = AnyDeviceImage::zeros(cuda, src.kind(), w, h).map_err(to_py)?;
    let mut mask = cuda.device_image::<u8>(w, h).map_err(to_py)?;
    let report = {
        let (s, d) = (src.src().map_err(to_py)?, corrected.dst());
        py.detach(|| cuda.glare_on_device(s, &mut mask, d, p)).map_err(to_py)?
    };
    drop(input);
    let corrected = Bound::new(py, CudaImage::new(corrected, cuda))?.into_any();
    let mask = Bound::new(py, CudaImage::new(AnyDeviceImage::U8(mask), cuda))?.into_any();
    Ok((corrected, mask, report))
}

/// `op` on a host view: a new NumPy array.
pub fn on_host<'py>(py: Python<'py>, src: AnyView<'_>, chosen: &Chosen, op: &Op) -> PyResult<Bound<'py, PyAny>> {
    let (w, h) = src.size();
    let out = crate::array::Output::of(py, op.output(kind_of(&src)), w, h);
    {
        let mut g = out.write()?;
        let dst = g.view_mut()?;
        let b = chosen.backend;
        py.detach(move || op.host(b, src, dst)).map_err(to_py)?;
    }
    Ok(out.into_any())
}

/// to_device(image, /, *, backend="auto")
///
/// A copy of ``image`` (a NumPy array, or any host array with ``__dlpack__``) in GPU memory,
/// as a :class:`CudaImage` that the operations take without a transfer (a ``CudaImage`` is
/// returned as it is; a CUDA array of another library is an operation's input as it is,
/// so it is a ValueError here). RuntimeError where no GPU is usable.
#[pyfunction]
#[pyo3(signature = (image, /, *, backend = crate::params::AUTO))]
pub fn to_device<'py>(py: Python<'py>, image: &Bound<'py, PyAny>, backend: &str) -> PyResult<Bound<'py, PyAny>> {
    let chosen = choose(backend, false)?;
    let cuda = cuda_of(&chosen, "image")?;
    let uploaded = match lent(image, "image", crate::array::Accepts::ALL, &chosen)? {
        Some(Lent::Device(DeviceInput::Ours(_))) => return Ok(image.clone()),
        Some(Lent::Device(DeviceInput::Borrowed { .. })) => {
            return Err(value_error("image: a CUDA array is on the device already: pass it to the operations as it is"));
        }
        Some(Lent::Host { image: t, _tensor }) => {
            let v = host_view(&t)?;
            py.detach(|| AnyDeviceImage::upload(cuda, v)).map_err(to_py)?
        }
        None => {
            let inp = crate::array::input(image, "image", crate::array::Accepts::ALL)?;
            let v = inp.view("image")?;
            py.detach(|| AnyDeviceImage::upload(cuda, v)).map_err(to_py)?
        }
    };
    Ok(Bound::new(py, CudaImage::new(uploaded, cuda))?.into_any())
}

/// A Python object kept alive by a lent tensor, released with the GIL taken (a consumer may
/// call the deleter from C code outside this module, where a plain `Py` would only queue
/// its release).
struct HeldArray(Option<Py<PyAny>>);

impl Drop for HeldArray {
    fn drop(&mut self) {
        if let Some(o) = self.0.take() {
            Python::attach(|_| drop(o));
        }
    }
}

/// _lend_host(array)
///
/// ``array``'s memory as a DLPack capsule of tessera's own exporter (device CPU), which
/// keeps ``array`` alive until the consumer releases it: the exporter behind
/// ``CudaImage.__dlpack__``, testable without a GPU.
#[pyfunction]
pub fn _lend_host<'py>(py: Python<'py>, array: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let inp = crate::array::input(array, "array", crate::array::Accepts::ALL)?;
    let v = inp.view("array")?;
    let (w, h) = v.size();
    let (ptr, stride) = match &v {
        AnyView::U8(v) => (v.span().as_ptr() as *mut c_void, v.stride()),
        AnyView::U16(v) => (v.span().as_ptr() as *mut c_void, v.stride()),
        AnyView::F32(v) => (v.span().as_ptr() as *mut c_void, v.stride()),
        AnyView::Rgba8(v) => (v.span().as_ptr() as *mut c_void, v.stride()),
    };
    if stride != w && h > 1 {
        return Err(value_error("array: rows must be packed"));
    }
    let t = dlpack::export(HeldArray(Some(array.clone().unbind())), ptr, DLDevice { device_type: dlpack::DEVICE_CPU, device_id: 0 }, kind_of(&v), w, h);
    // SAFETY: `t` is a managed tensor of `export`, handed over once.
    unsafe { capsule(py, t) }
}

//! DLPack, the C ABI through which array libraries (NumPy, CuPy, PyTorch, JAX) lend each
//! other memory without a copy: the structs of `dlpack.h` (version 1.0), reading a lent
//! tensor as an image ([`TensorImage::of`]), and lending one ([`export`]).
//!
//! A tensor is an image when it is 2-D `uint8`, `uint16`, `uint32` or `float32` `(H, W)`, or
//! `uint8` `(H, W, 4)` (RGBA), and the pixels of each row are adjacent (rows may be further
//! apart: a slice of rows or of a column range). Any other layout is an error naming why,
//! so the copy that would fix it is the caller's to make, never hidden.

use core::ffi::c_void;

/// `DLDeviceType`: the host.
pub const DEVICE_CPU: i32 = 1;
/// `DLDeviceType`: memory of a CUDA device.
pub const DEVICE_CUDA: i32 = 2;
/// `DLDeviceType`: page-locked host memory allocated through CUDA.
pub const DEVICE_CUDA_HOST: i32 = 3;

/// `DLDataTypeCode`.
const CODE_UINT: u8 = 1;
const CODE_FLOAT: u8 = 2;

/// `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

/// `DLDataType`: `lanes` values of `bits` bits of the kind `code`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// `DLTensor`. `strides` (in elements) may be null: C-contiguous.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// `DLManagedTensor`: a tensor and how to give it back (the capsule named `dltensor`).
#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

/// `DLManagedTensorVersioned` (DLPack 1.0; the capsule named `dltensor_versioned`).
#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
pub const FLAG_READ_ONLY: u64 = 1;

/// The pixel types a tensor can hold as an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelKind {
    U8,
    U16,
    U32,
    F32,
    /// `uint8 (H, W, 4)`.
    Rgba8,
}

impl PixelKind {
    /// Bytes of one pixel.
    pub fn bytes(self) -> usize {
        match self {
            PixelKind::U8 => 1,
            PixelKind::U16 => 2,
            PixelKind::U32 | PixelKind::F32 | PixelKind::Rgba8 => 4,
        }
    }

    /// Alignment of one pixel's element type.
    fn align(self) -> usize {
        match self {
            PixelKind::U8 | PixelKind::Rgba8 => 1,
            PixelKind::U16 => 2,
            PixelKind::U32 | PixelKind::F32 => 4,
        }
    }

    /// The DLPack element type (RGBA: its `uint8` channels).
    pub fn dtype(self) -> DLDataType {
        match self {
            PixelKind::U8 | PixelKind::Rgba8 => DLDataType { code: CODE_UINT, bits: 8, lanes: 1 },
            PixelKind::U16 => DLDataType { code: CODE_UINT, bits: 16, lanes: 1 },
            PixelKind::U32 => DLDataType { code: CODE_UINT, bits: 32, lanes: 1 },
            PixelKind::F32 => DLDataType { code: CODE_FLOAT, bits: 32, lanes: 1 },
        }
    }

    /// The tensor shape of a `width x height` image.
    pub fn shape(self, width: usize, height: usize) -> Vec<i64> {
        match self {
            PixelKind::Rgba8 => vec![height as i64, width as i64, 4],
            _ => vec![height as i64, width as i64],
        }
    }

    /// The NumPy name of the element type.
    pub fn numpy_dtype(self) -> &'static str {
        match self {
            PixelKind::U8 | PixelKind::Rgba8 => "uint8",
            PixelKind::U16 => "uint16",
            PixelKind::U32 => "uint32",
            PixelKind::F32 => "float32",
        }
    }
}

/// Why a tensor is not an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotAnImage {
    /// Its element type is not a pixel type.
    Type(String),
    /// Its shape or layout is not an image's.
    Layout(String),
}

impl core::fmt::Display for NotAnImage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NotAnImage::Type(m) | NotAnImage::Layout(m) => f.write_str(m),
        }
    }
}

/// A lent tensor read as an image: where its pixels are and how they lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorImage {
    pub device: DLDevice,
    pub pixel: PixelKind,
    /// Address of pixel (0, 0) (`data + byte_offset`).
    pub data: usize,
    pub width: usize,
    pub height: usize,
    /// Pixels from one row's start to the next's (`width` when rows are packed).
    pub row_stride: usize,
}

impl TensorImage {
    /// `t` as an image, or why it is not one.
    ///
    /// # Safety
    /// `t.shape` holds `t.ndim` values and `t.strides` is null or holds as many (what the
    /// DLPack producer guarantees for a tensor it lends).
    pub unsafe fn of(t: &DLTensor) -> Result<TensorImage, NotAnImage> {
        use NotAnImage::{Layout, Type};
        let nd = usize::try_from(t.ndim).map_err(|_| Layout(format!("a tensor of {} dimensions", t.ndim)))?;
        if !(2..=3).contains(&nd) {
            return Err(Layout(format!("a tensor of {nd} dimensions is not an image: expected (H, W) or (H, W, 4)")));
        }
        if t.shape.is_null() {
            return Err(Layout("a tensor without a shape".into()));
        }
        // SAFETY: the caller's contract: `ndim` values at `shape`, and at `strides` if not null.
        let shape = unsafe { core::slice::from_raw_parts(t.shape, nd) };
        let strides = (!t.strides.is_null()).then(|| unsafe { core::slice::from_raw_parts(t.strides, nd) });
        let dims: Vec<usize> = shape.iter().map(|&d| usize::try_from(d).map_err(|_| Layout(format!("a negative extent in shape {shape:?}")))).collect::<Result<_, _>>()?;
        let dt = t.dtype;
        let pixel = match (nd, dt.code, dt.bits, dt.lanes) {
            (_, _, _, l) if l != 1 => return Err(Type(format!("a vector dtype ({l} lanes) is not supported"))),
            (3, CODE_UINT, 8, _) if dims[2] == 4 => PixelKind::Rgba8,
            (3, _, _, _) => return Err(Layout(format!("shape {shape:?} is not an image: expected (H, W) or uint8 (H, W, 4)"))),
            (2, CODE_UINT, 8, _) => PixelKind::U8,
            (2, CODE_UINT, 16, _) => PixelKind::U16,
            (2, CODE_UINT, 32, _) => PixelKind::U32,
            (2, CODE_FLOAT, 32, _) => PixelKind::F32,
            _ => return Err(Type(format!("dtype (code {}, {} bits) is not supported: expected uint8, uint16, uint32 or float32", dt.code, dt.bits))),
        };
        let (height, width) = (dims[0], dims[1]);
        let channels = if pixel == PixelKind::Rgba8 { 4 } else { 1 };
        // Strides in elements: the channels adjacent, the pixels of a row adjacent, rows in
        // order and not overlapping (one pixel or one row may have any stride).
        let row_stride = match strides {
            None => width,
            Some(s) => {
                if channels == 4 && s[2] != 1 {
                    return Err(Layout(format!("the four channels of a pixel are not adjacent (strides {s:?} elements)")));
                }
                if width > 1 && s[1] != channels as i64 {
                    return Err(Layout(format!("the pixels of a row are not adjacent (strides {s:?} elements): a transposed array, a column step or reversed columns")));
                }
                if height <= 1 {
                    width
                } else if s[0] <= 0 || s[0] % channels as i64 != 0 || ((s[0] / channels as i64) as usize) < width {
                    return Err(Layout(format!("row stride {} elements does not hold a row of {width} pixels in order (reversed or overlapping rows)", s[0])));
                } else {
                    (s[0] / channels as i64) as usize
                }
            }
        };
        let data = (t.data as usize).checked_add(t.byte_offset as usize).ok_or(Layout("a data address past the address space".into()))?;
        if width > 0 && height > 0 {
            if data == 0 {
                return Err(Layout("a null data address".into()));
            }
            if data % pixel.align() != 0 {
                return Err(Layout("the pixel buffer is not aligned for its dtype".into()));
            }
            // The last pixel's end, in bytes from the first: within the address space.
            let span = row_stride.checked_mul(height - 1).and_then(|r| r.checked_add(width)).and_then(|n| n.checked_mul(pixel.bytes()));
            if span.and_then(|b| data.checked_add(b)).is_none() {
                return Err(Layout(format!("{width} x {height} pixels pass the end of the address space")));
            }
        }
        Ok(TensorImage { device: t.device, pixel, data, width, height, row_stride })
    }

    /// Whether the rows are packed (`row_stride == width`, or a single row).
    pub fn is_packed(&self) -> bool {
        self.row_stride == self.width || self.height <= 1
    }
}

/// What [`export`]'s deleter frees: the managed tensor first, so that its address is the
/// allocation's.
#[repr(C)]
struct Lent<O> {
    managed: DLManagedTensor,
    shape: Vec<i64>,
    owner: O,
}

unsafe extern "C" fn delete_lent<O>(t: *mut DLManagedTensor) {
    if !t.is_null() {
        // SAFETY: `t` is the first field of a `Lent<O>` that `export` boxed and leaked, and
        // DLPack calls the deleter once.
        drop(unsafe { Box::from_raw(t.cast::<Lent<O>>()) });
    }
}

/// A managed tensor lending the `width x height` image of `pixel`s at `data` (rows
/// packed) on `device`, which keeps `owner` (what holds the memory) until its deleter
/// is called. The caller hands the pointer to a consumer (in a capsule named `dltensor`),
/// or calls the deleter itself.
pub fn export<O: Send + 'static>(owner: O, data: *mut c_void, device: DLDevice, pixel: PixelKind, width: usize, height: usize) -> *mut DLManagedTensor {
    let mut lent = Box::new(Lent {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data,
                device,
                ndim: if pixel == PixelKind::Rgba8 { 3 } else { 2 },
                dtype: pixel.dtype(),
                shape: core::ptr::null_mut(),
                strides: core::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: core::ptr::null_mut(),
            deleter: Some(delete_lent::<O>),
        },
        shape: pixel.shape(width, height),
        owner,
    });
    // The shape's buffer is the box's own, and does not move with the box.
    lent.managed.dl_tensor.shape = lent.shape.as_mut_ptr();
    let raw = Box::into_raw(lent);
    // SAFETY: `raw` is a valid pointer to the boxed `Lent`; `manager_ctx` points back at it.
    unsafe {
        (*raw).managed.manager_ctx = raw.cast();
        &mut (*raw).managed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tensor(data: *mut c_void, dtype: DLDataType, shape: &mut [i64], strides: Option<&mut [i64]>) -> DLTensor {
        DLTensor {
            data,
            device: DLDevice { device_type: DEVICE_CPU, device_id: 0 },
            ndim: shape.len() as i32,
            dtype,
            shape: shape.as_mut_ptr(),
            strides: strides.map_or(core::ptr::null_mut(), |s| s.as_mut_ptr()),
            byte_offset: 0,
        }
    }

    #[test]
    fn tensors_read_as_images_with_their_row_strides() {
        let mut buf = vec![0f32; 64];
        let p = buf.as_mut_ptr().cast::<c_void>();
        let f32_ = PixelKind::F32.dtype();
        let mut shape = [4i64, 5];
        // SAFETY (each `of` below): shape and strides are the slices given, of `ndim` values.
        let packed = unsafe { TensorImage::of(&tensor(p, f32_, &mut shape, None)) }.unwrap();
        assert_eq!((packed.width, packed.height, packed.row_stride, packed.pixel), (5, 4, 5, PixelKind::F32));
        assert!(packed.is_packed());
        // Every other row of a 8 x 5 array.
        let strided = unsafe { TensorImage::of(&tensor(p, f32_, &mut shape, Some(&mut [10, 1]))) }.unwrap();
        assert_eq!(strided.row_stride, 10);
        assert!(!strided.is_packed());
        // A byte offset moves the first pixel.
        let mut t = tensor(p, f32_, &mut shape, None);
        t.byte_offset = 8;
        assert_eq!(unsafe { TensorImage::of(&t) }.unwrap().data, p as usize + 8);
        // RGBA: (H, W, 4) uint8.
        let mut rgba_shape = [2i64, 3, 4];
        let rgba = unsafe { TensorImage::of(&tensor(p, PixelKind::U8.dtype(), &mut rgba_shape, Some(&mut [12, 4, 1]))) }.unwrap();
        assert_eq!((rgba.pixel, rgba.width, rgba.row_stride), (PixelKind::Rgba8, 3, 3));
    }

    #[test]
    fn tensors_that_are_not_images_say_why() {
        let mut buf = vec![0u16; 64];
        let p = buf.as_mut_ptr().cast::<c_void>();
        let u16_ = PixelKind::U16.dtype();
        let err = |t: DLTensor| unsafe { TensorImage::of(&t) }.unwrap_err().to_string();
        assert!(err(tensor(p, u16_, &mut [4, 5], Some(&mut [1, 4]))).contains("not adjacent"), "transposed");
        assert!(err(tensor(p, u16_, &mut [4, 5], Some(&mut [5, -1]))).contains("not adjacent"), "reversed columns");
        assert!(err(tensor(p, u16_, &mut [4, 5], Some(&mut [-5, 1]))).contains("in order"), "reversed rows");
        assert!(err(tensor(p, u16_, &mut [4, 5], Some(&mut [3, 1]))).contains("in order"), "overlapping rows");
        assert!(err(tensor(p, u16_, &mut [4, 5, 3], None)).contains("not an image"), "RGB");
        assert!(err(tensor(p, u16_, &mut [20], None)).contains("1 dimensions"));
        let f64_ = DLDataType { code: CODE_FLOAT, bits: 64, lanes: 1 };
        assert!(matches!(unsafe { TensorImage::of(&tensor(p, f64_, &mut [4, 5], None)) }, Err(NotAnImage::Type(m)) if m.contains("not supported")));
        assert!(err(tensor(p, DLDataType { code: CODE_UINT, bits: 8, lanes: 4 }, &mut [4, 5], None)).contains("lanes"));
        assert!(err(tensor(p, u16_, &mut [4, -5], None)).contains("negative"));
        assert!(err(tensor(core::ptr::null_mut(), u16_, &mut [4, 5], None)).contains("null"));
        assert!(err(tensor(p.wrapping_byte_add(1), u16_, &mut [4, 5], None)).contains("aligned"));
        assert!(err(tensor(p, u16_, &mut [i64::MAX / 4, 5], None)).contains("address space"));
        let mut t = tensor(p, u16_, &mut [4, 5], None);
        t.byte_offset = u64::MAX;
        assert!(unsafe { TensorImage::of(&t) }.is_err());
    }

    #[test]
    fn an_exported_tensor_describes_the_image_and_its_deleter_releases_the_owner() {
        let owner = Arc::new(vec![7u16; 6 * 4]);
        let data = owner.as_ptr() as *mut c_void;
        let t = export(Arc::clone(&owner), data, DLDevice { device_type: DEVICE_CPU, device_id: 0 }, PixelKind::U16, 6, 4);
        assert_eq!(Arc::strong_count(&owner), 2);
        // SAFETY: `t` is a live managed tensor until its deleter runs below.
        unsafe {
            let img = TensorImage::of(&(*t).dl_tensor).unwrap();
            assert_eq!((img.pixel, img.width, img.height, img.row_stride, img.data), (PixelKind::U16, 6, 4, 6, data as usize));
            ((*t).deleter.unwrap())(t);
        }
        assert_eq!(Arc::strong_count(&owner), 1);
        let t = export((), data, DLDevice { device_type: DEVICE_CUDA, device_id: 3 }, PixelKind::Rgba8, 2, 3);
        unsafe {
            let img = TensorImage::of(&(*t).dl_tensor).unwrap();
            assert_eq!((img.pixel, img.width, img.height, img.device.device_id), (PixelKind::Rgba8, 2, 3, 3));
            ((*t).deleter.unwrap())(t);
        }
    }
}

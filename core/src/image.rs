//! The image model: an owned [`Image`], borrowed [`ImageView`] / [`ImageViewMut`] with a
//! row stride, and the run-time typed [`AnyView`] / [`AnyViewMut`] that the object-safe
//! [`Backend`](crate::Backend) takes.
//!
//! Pixels are stored row by row; pixel `(x, y)` is element `y * stride + x`. A view's
//! buffer must hold at least `stride * (height - 1) + width` elements, so the last row may
//! be short of a full stride (as in a crop of a larger image).

use crate::error::{Error, Result};
use alloc::vec::Vec;

/// Interleaved 8-bit RGBA, the `uchar4` of the OpenCL filters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rgba8 {
    pub r: u8,
    pub g: u8,
    pub b: u8,
    pub a: u8,
}

impl Rgba8 {
    pub const fn new(r: u8, g: u8, b: u8, a: u8) -> Self {
        Rgba8 { r, g, b, a }
    }
    /// The four channels as an array, in memory order.
    pub const fn to_array(self) -> [u8; 4] {
        [self.r, self.g, self.b, self.a]
    }
    pub const fn from_array(c: [u8; 4]) -> Self {
        Rgba8 { r: c[0], g: c[1], b: c[2], a: c[3] }
    }
    /// Rec. 601 luma (0.299 R + 0.587 G + 0.114 B), the weights ImageJ uses for RGB -> 8-bit
    /// when "weighted" conversion is on, rounded to the nearest integer.
    pub fn luma(self) -> u8 {
        // 16-bit fixed point: weights sum to 65536, so white maps to exactly 255.
        let y = 19595 * self.r as u32 + 38470 * self.g as u32 + 7471 * self.b as u32;
        ((y + 32768) >> 16) as u8
    }
}

/// Views a slice of RGBA pixels as its bytes (4 per pixel), for per-channel kernels.
pub fn rgba_as_bytes(p: &[Rgba8]) -> &[u8] {
    // SAFETY: Rgba8 is repr(C) of four u8, so it has size 4, align 1 and no padding.
    unsafe { core::slice::from_raw_parts(p.as_ptr().cast::<u8>(), p.len() * 4) }
}

/// Mutable byte view of RGBA pixels.
pub fn rgba_as_bytes_mut(p: &mut [Rgba8]) -> &mut [u8] {
    // SAFETY: as in `rgba_as_bytes`; every byte pattern is a valid Rgba8.
    unsafe { core::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<u8>(), p.len() * 4) }
}

/// A pixel type an image can hold.
pub trait Pixel: Copy + Default + Send + Sync + PartialEq + core::fmt::Debug + 'static {
    /// Name used in error messages ("u8", "rgba8", ...).
    const NAME: &'static str;
}
impl Pixel for u8 {
    const NAME: &'static str = "u8";
}
impl Pixel for u16 {
    const NAME: &'static str = "u16";
}
impl Pixel for u32 {
    const NAME: &'static str = "u32";
}
impl Pixel for f32 {
    const NAME: &'static str = "f32";
}
impl Pixel for Rgba8 {
    const NAME: &'static str = "rgba8";
}
/// f64 images are not an operation input; they hold float64 reference results.
impl Pixel for f64 {
    const NAME: &'static str = "f64";
}

/// Validates a (width, height, stride, buffer length) combination.
pub fn check_layout(width: usize, height: usize, stride: usize, len: usize) -> Result<()> {
    if width == 0 || height == 0 {
        return Err(Error::ZeroSize { width, height });
    }
    if stride < width {
        return Err(Error::StrideTooSmall { stride, width });
    }
    let needed = stride
        .checked_mul(height - 1)
        .and_then(|n| n.checked_add(width))
        .ok_or(Error::BufferTooShort { needed: usize::MAX, got: len })?;
    if len < needed {
        return Err(Error::BufferTooShort { needed, got: len });
    }
    Ok(())
}

/// A borrowed, read-only image.
#[derive(Clone, Copy, Debug)]
pub struct ImageView<'a, T> {
    data: &'a [T],
    width: usize,
    height: usize,
    stride: usize,
}

/// A borrowed, writable image.
#[derive(Debug)]
pub struct ImageViewMut<'a, T> {
    data: &'a mut [T],
    width: usize,
    height: usize,
    stride: usize,
}

/// An owned image with contiguous rows (`stride == width`).
#[derive(Clone, Debug, PartialEq)]
pub struct Image<T> {
    data: Vec<T>,
    width: usize,
    height: usize,
}

impl<'a, T: Pixel> ImageView<'a, T> {
    /// A view of `data` as `width x height` pixels with rows `stride` elements apart.
    pub fn new(data: &'a [T], width: usize, height: usize, stride: usize) -> Result<Self> {
        check_layout(width, height, stride, data.len())?;
        Ok(ImageView { data, width, height, stride })
    }
    /// A view of a contiguous buffer (`stride == width`).
    pub fn from_slice(data: &'a [T], width: usize, height: usize) -> Result<Self> {
        Self::new(data, width, height, width)
    }
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn height(&self) -> usize {
        self.height
    }
    pub fn stride(&self) -> usize {
        self.stride
    }
    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }
    /// Row `y` (exactly `width` pixels). Panics if `y >= height`, like slice indexing.
    #[inline]
    pub fn row(&self, y: usize) -> &'a [T] {
        let start = y * self.stride;
        &self.data[start..start + self.width]
    }
    /// Pixel `(x, y)`, or `None` outside the image.
    #[inline]
    pub fn get(&self, x: usize, y: usize) -> Option<T> {
        (x < self.width && y < self.height).then(|| self.data[y * self.stride + x])
    }
    /// The buffer from the first pixel to the last (`stride * (height - 1) + width`
    /// elements): row `y` starts at `y * stride`.
    pub fn span(&self) -> &'a [T] {
        &self.data[..self.stride * (self.height - 1) + self.width]
    }
    /// The rows, top to bottom.
    pub fn rows(&self) -> impl Iterator<Item = &'a [T]> + '_ {
        (0..self.height).map(move |y| self.row(y))
    }
    /// The sub-image `(x, y, w, h)`, sharing the buffer.
    pub fn crop(&self, x: usize, y: usize, w: usize, h: usize) -> Result<ImageView<'a, T>> {
        check_crop(self.size(), x, y, w, h)?;
        let start = y * self.stride + x;
        ImageView::new(&self.data[start..], w, h, self.stride)
    }
    /// Copies into an owned, contiguous image.
    pub fn to_image(&self) -> Image<T> {
        let mut data = Vec::with_capacity(self.width * self.height);
        for r in self.rows() {
            data.extend_from_slice(r);
        }
        Image { data, width: self.width, height: self.height }
    }
    /// [`to_image`](Self::to_image), or [`Error::OutOfMemory`] where the allocator refuses
    /// the copy.
    pub fn try_to_image(&self) -> Result<Image<T>> {
        let mut data = crate::error::try_with_capacity(self.width * self.height)?;
        for r in self.rows() {
            data.extend_from_slice(r);
        }
        Ok(Image { data, width: self.width, height: self.height })
    }
}

fn check_crop(size: (usize, usize), x: usize, y: usize, w: usize, h: usize) -> Result<()> {
    if w == 0 || h == 0 {
        return Err(Error::ZeroSize { width: w, height: h });
    }
    let fits = x.checked_add(w).is_some_and(|r| r <= size.0) && y.checked_add(h).is_some_and(|b| b <= size.1);
    if !fits {
        return Err(Error::InvalidParameter {
            name: "crop",
            reason: alloc::format!("{w}x{h} at ({x}, {y}) is outside the {}x{} image", size.0, size.1),
        });
    }
    Ok(())
}

impl<'a, T: Pixel> ImageViewMut<'a, T> {
    pub fn new(data: &'a mut [T], width: usize, height: usize, stride: usize) -> Result<Self> {
        check_layout(width, height, stride, data.len())?;
        Ok(ImageViewMut { data, width, height, stride })
    }
    pub fn from_slice(data: &'a mut [T], width: usize, height: usize) -> Result<Self> {
        Self::new(data, width, height, width)
    }
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn height(&self) -> usize {
        self.height
    }
    pub fn stride(&self) -> usize {
        self.stride
    }
    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }
    #[inline]
    pub fn row(&self, y: usize) -> &[T] {
        let start = y * self.stride;
        &self.data[start..start + self.width]
    }
    #[inline]
    pub fn row_mut(&mut self, y: usize) -> &mut [T] {
        let start = y * self.stride;
        &mut self.data[start..start + self.width]
    }
    /// A read-only view of the same pixels.
    pub fn as_view(&self) -> ImageView<'_, T> {
        ImageView { data: self.data, width: self.width, height: self.height, stride: self.stride }
    }
    /// A shorter-lived mutable view of the same pixels.
    pub fn reborrow(&mut self) -> ImageViewMut<'_, T> {
        ImageViewMut { data: self.data, width: self.width, height: self.height, stride: self.stride }
    }
    /// The sub-image `(x, y, w, h)` for writing.
    pub fn crop_mut(&mut self, x: usize, y: usize, w: usize, h: usize) -> Result<ImageViewMut<'_, T>> {
        check_crop(self.size(), x, y, w, h)?;
        let start = y * self.stride + x;
        ImageViewMut::new(&mut self.data[start..], w, h, self.stride)
    }
    /// Sets every pixel to `v`.
    pub fn fill(&mut self, v: T) {
        for y in 0..self.height {
            self.row_mut(y).fill(v);
        }
    }
    /// Copies `src` (same size) into this view.
    pub fn copy_from(&mut self, src: ImageView<'_, T>) -> Result<()> {
        check_same_size(src.size(), self.size())?;
        for y in 0..self.height {
            self.row_mut(y).copy_from_slice(src.row(y));
        }
        Ok(())
    }
    /// Splits into consecutive horizontal bands of at most `rows` rows each, with their
    /// first row index: the unit of row-parallel work.
    pub fn into_row_bands(self, rows: usize) -> Vec<(usize, ImageViewMut<'a, T>)> {
        let rows = rows.max(1);
        let (width, stride) = (self.width, self.stride);
        let mut out = Vec::new();
        let mut rest: &'a mut [T] = self.data;
        let mut y = 0;
        while y < self.height {
            let h = rows.min(self.height - y);
            let take = if y + h == self.height { rest.len() } else { h * stride };
            let (band, tail) = core::mem::take(&mut rest).split_at_mut(take);
            out.push((y, ImageViewMut { data: band, width, height: h, stride }));
            rest = tail;
            y += h;
        }
        out
    }
}

/// `Ok` when the two sizes are equal, else [`Error::SizeMismatch`].
pub fn check_same_size(expected: (usize, usize), got: (usize, usize)) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::SizeMismatch { expected, got })
    }
}

impl<T: Pixel> Image<T> {
    /// A `width x height` image filled with `T::default()` (zero).
    pub fn new(width: usize, height: usize) -> Result<Self> {
        Self::filled(width, height, T::default())
    }
    pub fn filled(width: usize, height: usize, v: T) -> Result<Self> {
        if width == 0 || height == 0 {
            return Err(Error::ZeroSize { width, height });
        }
        let n = width.checked_mul(height).ok_or(Error::BufferTooShort { needed: usize::MAX, got: 0 })?;
        Ok(Image { data: crate::error::try_filled(n, v)?, width, height })
    }
    /// Takes ownership of a contiguous pixel buffer of exactly `width * height` elements.
    pub fn from_vec(width: usize, height: usize, data: Vec<T>) -> Result<Self> {
        check_layout(width, height, width, data.len())?;
        if data.len() != width * height {
            return Err(Error::InvalidParameter {
                name: "buffer",
                reason: alloc::format!("{} elements for a {width}x{height} image", data.len()),
            });
        }
        Ok(Image { data, width, height })
    }
    /// Builds an image from `f(x, y)`.
    pub fn from_fn(width: usize, height: usize, mut f: impl FnMut(usize, usize) -> T) -> Result<Self> {
        let mut img = Self::new(width, height)?;
        for y in 0..height {
            for x in 0..width {
                img.data[y * width + x] = f(x, y);
            }
        }
        Ok(img)
    }
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn height(&self) -> usize {
        self.height
    }
    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }
    pub fn view(&self) -> ImageView<'_, T> {
        ImageView { data: &self.data, width: self.width, height: self.height, stride: self.width }
    }
    pub fn view_mut(&mut self) -> ImageViewMut<'_, T> {
        ImageViewMut { data: &mut self.data, width: self.width, height: self.height, stride: self.width }
    }
    #[inline]
    pub fn get(&self, x: usize, y: usize) -> Option<T> {
        (x < self.width && y < self.height).then(|| self.data[y * self.width + x])
    }
    /// Pixel `(x, y)`; panics outside the image (use [`Image::get`] for a checked read).
    #[inline]
    pub fn at(&self, x: usize, y: usize) -> T {
        self.data[y * self.width + x]
    }
    #[inline]
    pub fn set(&mut self, x: usize, y: usize, v: T) {
        self.data[y * self.width + x] = v;
    }
    #[inline]
    pub fn row(&self, y: usize) -> &[T] {
        &self.data[y * self.width..(y + 1) * self.width]
    }
    #[inline]
    pub fn row_mut(&mut self, y: usize) -> &mut [T] {
        &mut self.data[y * self.width..(y + 1) * self.width]
    }
    /// Applies `f` to every pixel, giving an image of another type.
    pub fn map<U: Pixel>(&self, f: impl FnMut(T) -> U) -> Image<U> {
        Image { data: self.data.iter().copied().map(f).collect(), width: self.width, height: self.height }
    }
    /// [`map`](Self::map), or [`Error::OutOfMemory`] where the allocator refuses the result.
    pub fn try_map<U: Pixel>(&self, f: impl FnMut(T) -> U) -> Result<Image<U>> {
        let mut data = crate::error::try_with_capacity(self.data.len())?;
        data.extend(self.data.iter().copied().map(f));
        Ok(Image { data, width: self.width, height: self.height })
    }
}

/// Per-pixel conversions between the pixel types. Integer -> float keeps the value
/// (no scaling to 0..1, as in ImageJ); float -> integer rounds to nearest and saturates
/// (NaN becomes 0); RGBA -> gray is the Rec. 601 luma; gray -> RGBA replicates it, alpha 255.
pub trait ConvertPixel<U> {
    fn convert(self) -> U;
}

macro_rules! convert_identity {
    ($($t:ty),*) => {$(impl ConvertPixel<$t> for $t { #[inline] fn convert(self) -> $t { self } })*};
}
convert_identity!(u8, u16, f32, Rgba8);

impl ConvertPixel<u16> for u8 {
    fn convert(self) -> u16 {
        self as u16
    }
}
impl ConvertPixel<f32> for u8 {
    fn convert(self) -> f32 {
        self as f32
    }
}
impl ConvertPixel<f32> for u16 {
    fn convert(self) -> f32 {
        self as f32
    }
}
impl ConvertPixel<u8> for u16 {
    /// Saturates at 255 (values are not rescaled).
    fn convert(self) -> u8 {
        self.min(255) as u8
    }
}
impl ConvertPixel<u8> for f32 {
    fn convert(self) -> u8 {
        // `as` saturates and maps NaN to 0.
        libm::roundf(self) as u8
    }
}
impl ConvertPixel<u16> for f32 {
    fn convert(self) -> u16 {
        libm::roundf(self) as u16
    }
}
impl ConvertPixel<u8> for Rgba8 {
    fn convert(self) -> u8 {
        self.luma()
    }
}
impl ConvertPixel<f32> for Rgba8 {
    /// Unrounded Rec. 601 luma.
    fn convert(self) -> f32 {
        0.299 * self.r as f32 + 0.587 * self.g as f32 + 0.114 * self.b as f32
    }
}
impl ConvertPixel<u16> for Rgba8 {
    fn convert(self) -> u16 {
        self.luma() as u16
    }
}
impl ConvertPixel<Rgba8> for u8 {
    fn convert(self) -> Rgba8 {
        Rgba8::new(self, self, self, 255)
    }
}
impl ConvertPixel<Rgba8> for u16 {
    fn convert(self) -> Rgba8 {
        let v = self.min(255) as u8;
        Rgba8::new(v, v, v, 255)
    }
}
impl ConvertPixel<Rgba8> for f32 {
    fn convert(self) -> Rgba8 {
        let v: u8 = self.convert();
        Rgba8::new(v, v, v, 255)
    }
}

impl<'a, T: Pixel> ImageView<'a, T> {
    /// Converts every pixel to another type (see [`ConvertPixel`] for the rules).
    pub fn convert<U: Pixel>(&self) -> Image<U>
    where
        T: ConvertPixel<U>,
    {
        let mut data = Vec::with_capacity(self.width * self.height);
        for r in self.rows() {
            data.extend(r.iter().map(|&p| p.convert()));
        }
        Image { data, width: self.width, height: self.height }
    }
    /// [`convert`](Self::convert), or [`Error::OutOfMemory`] where the allocator refuses the
    /// result.
    pub fn try_convert<U: Pixel>(&self) -> Result<Image<U>>
    where
        T: ConvertPixel<U>,
    {
        let mut data = crate::error::try_with_capacity(self.width * self.height)?;
        for r in self.rows() {
            data.extend(r.iter().map(|&p| p.convert()));
        }
        Ok(Image { data, width: self.width, height: self.height })
    }
}

impl<T: Pixel> Image<T> {
    /// Converts every pixel to another type (see [`ConvertPixel`] for the rules).
    pub fn convert<U: Pixel>(&self) -> Image<U>
    where
        T: ConvertPixel<U>,
    {
        self.view().convert()
    }
}

impl Image<Rgba8> {
    /// Splits into the four channel planes R, G, B, A.
    pub fn split_channels(&self) -> [Image<u8>; 4] {
        core::array::from_fn(|c| self.map(|p| p.to_array()[c]))
    }
    /// Joins four same-size planes into one RGBA image.
    pub fn merge_channels(planes: [ImageView<'_, u8>; 4]) -> Result<Self> {
        let size = planes[0].size();
        for p in &planes[1..] {
            check_same_size(size, p.size())?;
        }
        Image::from_fn(size.0, size.1, |x, y| {
            Rgba8::new(
                planes[0].row(y)[x],
                planes[1].row(y)[x],
                planes[2].row(y)[x],
                planes[3].row(y)[x],
            )
        })
    }
}

/// A read-only view whose pixel type is known only at run time: what the object-safe
/// [`Backend`](crate::Backend) takes, and what the CLI and the JNI bridge hand it.
#[derive(Clone, Copy, Debug)]
pub enum AnyView<'a> {
    U8(ImageView<'a, u8>),
    U16(ImageView<'a, u16>),
    F32(ImageView<'a, f32>),
    Rgba8(ImageView<'a, Rgba8>),
}

/// A writable view whose pixel type is known only at run time.
#[derive(Debug)]
pub enum AnyViewMut<'a> {
    U8(ImageViewMut<'a, u8>),
    U16(ImageViewMut<'a, u16>),
    U32(ImageViewMut<'a, u32>),
    F32(ImageViewMut<'a, f32>),
    Rgba8(ImageViewMut<'a, Rgba8>),
}

/// An owned image whose pixel type is known only at run time.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyImage {
    U8(Image<u8>),
    U16(Image<u16>),
    U32(Image<u32>),
    F32(Image<f32>),
    Rgba8(Image<Rgba8>),
}

macro_rules! dispatch {
    ($e:expr, $v:ident => $body:expr) => {
        match $e {
            Self::U8($v) => $body,
            Self::U16($v) => $body,
            Self::F32($v) => $body,
            Self::Rgba8($v) => $body,
        }
    };
}

impl<'a> AnyView<'a> {
    pub fn size(&self) -> (usize, usize) {
        dispatch!(self, v => v.size())
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            AnyView::U8(_) => u8::NAME,
            AnyView::U16(_) => u16::NAME,
            AnyView::F32(_) => f32::NAME,
            AnyView::Rgba8(_) => Rgba8::NAME,
        }
    }
    /// The bytes of its pixels.
    pub fn bytes(&self) -> usize {
        fn of<T: Pixel>(v: &ImageView<'_, T>) -> usize {
            v.width() * v.height() * core::mem::size_of::<T>()
        }
        dispatch!(self, v => of(v))
    }
    /// The luminance as f32 (gray types keep their values; RGBA gives Rec. 601 luma).
    pub fn to_gray_f32(&self) -> Image<f32> {
        dispatch!(self, v => v.convert::<f32>())
    }
}

impl<'a> AnyViewMut<'a> {
    pub fn size(&self) -> (usize, usize) {
        match self {
            AnyViewMut::U8(v) => v.size(),
            AnyViewMut::U16(v) => v.size(),
            AnyViewMut::U32(v) => v.size(),
            AnyViewMut::F32(v) => v.size(),
            AnyViewMut::Rgba8(v) => v.size(),
        }
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            AnyViewMut::U8(_) => u8::NAME,
            AnyViewMut::U16(_) => u16::NAME,
            AnyViewMut::U32(_) => u32::NAME,
            AnyViewMut::F32(_) => f32::NAME,
            AnyViewMut::Rgba8(_) => Rgba8::NAME,
        }
    }
}

impl AnyImage {
    pub fn size(&self) -> (usize, usize) {
        match self {
            AnyImage::U8(i) => i.size(),
            AnyImage::U16(i) => i.size(),
            AnyImage::U32(i) => i.size(),
            AnyImage::F32(i) => i.size(),
            AnyImage::Rgba8(i) => i.size(),
        }
    }
    /// A read-only view (u32 images, which only sums produce, are viewed as f32 copies
    /// by the caller; they are not an input type).
    pub fn view(&self) -> Option<AnyView<'_>> {
        match self {
            AnyImage::U8(i) => Some(AnyView::U8(i.view())),
            AnyImage::U16(i) => Some(AnyView::U16(i.view())),
            AnyImage::F32(i) => Some(AnyView::F32(i.view())),
            AnyImage::Rgba8(i) => Some(AnyView::Rgba8(i.view())),
            AnyImage::U32(_) => None,
        }
    }
    pub fn view_mut(&mut self) -> AnyViewMut<'_> {
        match self {
            AnyImage::U8(i) => AnyViewMut::U8(i.view_mut()),
            AnyImage::U16(i) => AnyViewMut::U16(i.view_mut()),
            AnyImage::U32(i) => AnyViewMut::U32(i.view_mut()),
            AnyImage::F32(i) => AnyViewMut::F32(i.view_mut()),
            AnyImage::Rgba8(i) => AnyViewMut::Rgba8(i.view_mut()),
        }
    }
    /// A zeroed image of the same type and size as `v` ([`Error::OutOfMemory`] where it
    /// cannot be allocated).
    pub fn like(v: &AnyView<'_>) -> Result<AnyImage> {
        let (w, h) = v.size();
        Ok(match v {
            AnyView::U8(_) => AnyImage::U8(Image::new(w, h)?),
            AnyView::U16(_) => AnyImage::U16(Image::new(w, h)?),
            AnyView::F32(_) => AnyImage::F32(Image::new(w, h)?),
            AnyView::Rgba8(_) => AnyImage::Rgba8(Image::new(w, h)?),
        })
    }
}

macro_rules! any_from {
    ($($t:ty => $var:ident),*) => {$(
        impl<'a> From<ImageView<'a, $t>> for AnyView<'a> { fn from(v: ImageView<'a, $t>) -> Self { AnyView::$var(v) } }
        impl<'a> From<ImageViewMut<'a, $t>> for AnyViewMut<'a> { fn from(v: ImageViewMut<'a, $t>) -> Self { AnyViewMut::$var(v) } }
        impl From<Image<$t>> for AnyImage { fn from(v: Image<$t>) -> Self { AnyImage::$var(v) } }
    )*};
}
any_from!(u8 => U8, u16 => U16, f32 => F32, Rgba8 => Rgba8);
impl<'a> From<ImageViewMut<'a, u32>> for AnyViewMut<'a> {
    fn from(v: ImageViewMut<'a, u32>) -> Self {
        AnyViewMut::U32(v)
    }
}
impl From<Image<u32>> for AnyImage {
    fn from(v: Image<u32>) -> Self {
        AnyImage::U32(v)
    }
}

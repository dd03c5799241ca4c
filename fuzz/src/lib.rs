//! What the fuzz targets share: reading numbers, images and borders out of the fuzzer's
//! bytes. Every value is taken modulo its range, so any byte string is a valid input and
//! the fuzzer explores the library's parameter space instead of our parser's.

use tessera::{AnyImage, Border, Image, Rgba8};

/// The fuzzer's bytes, read front to back; past the end every read gives 0.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.u16() as usize % (hi - lo + 1)
    }
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
    /// Any f32 bit pattern: NaN, infinities and denormals included.
    pub fn f32_bits(&mut self) -> f32 {
        f32::from_bits(u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()]))
    }
    /// A float parameter: usually a plain value in `lo..hi`, sometimes a pathological one.
    pub fn param(&mut self, lo: f32, hi: f32) -> f32 {
        match self.u8() % 8 {
            0 => self.f32_bits(),
            1 => -1.0,
            _ => lo + (hi - lo) * self.u8() as f32 / 255.0,
        }
    }
    pub fn border(&mut self) -> Border {
        match self.u8() % 5 {
            0 => Border::Reflect101,
            1 => Border::Replicate,
            2 => Border::Normalize,
            3 => Border::Constant(self.range(0, 300) as f32),
            _ => Border::Constant(self.f32_bits()),
        }
    }
    /// A `w x h` image of a pixel type chosen by `kind` (u8, u16, f32 with any bits, RGBA),
    /// its pixels the next bytes.
    pub fn image(&mut self, kind: u8, w: usize, h: usize) -> AnyImage {
        let img = match kind % 4 {
            0 => Image::from_fn(w, h, |_, _| self.u8()).map(AnyImage::U8),
            1 => Image::from_fn(w, h, |_, _| self.u16()).map(AnyImage::U16),
            2 => Image::from_fn(w, h, |_, _| if self.u8() == 0 { self.f32_bits() } else { self.u8() as f32 }).map(AnyImage::F32),
            _ => Image::from_fn(w, h, |_, _| Rgba8::new(self.u8(), self.u8(), self.u8(), 255)).map(AnyImage::Rgba8),
        };
        img.expect("sizes are at least 1")
    }
}

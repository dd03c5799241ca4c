//! Shading correction of microscope tiles (flat field and dark field), in the model of
//! BaSiC (Peng et al., "A BaSiC tool for background and shading correction of optical
//! microscopy images", Nat. Commun. 8, 14836, 2017):
//!
//! `I_i(x) = F(x) * S_i(x) + D(x)`
//!
//! where `I_i` is tile i as recorded, `S_i` the scene it shows, `F` the flat field (the
//! illumination and the lens's fall-off, smooth, mean 1) and `D` the dark field (the
//! camera's offset, added whatever the light). The correction recovers
//! `S_i(x) = (I_i(x) - D(x)) / F(x)`: vignetting darkens the same corners of every tile,
//! does not move with the content and so pulls every pair's registration towards the
//! nominal offset, and leaves a step of brightness at every seam of the mosaic.
//!
//! [`Shading`] holds `F` and `D` (from files, or from [`estimate_shading`], which finds them
//! from the tiles themselves: `estimate.rs`, fitted as smooth surfaces by `surface.rs`;
//! [`refine_from_overlaps`] then corrects an estimate from what registered overlaps say,
//! `overlaps.rs`) and
//! applies them ([`Shading::correct`]); [`Corrected`] applies them to every frame of a
//! [`FrameSource`], so registration and the composite both see corrected tiles.

mod estimate;
mod overlaps;
mod surface;

pub use estimate::{estimate_shading, EstimateParams, ShadingEstimate, MIN_TILES, RELIABLE_TILES};
pub use overlaps::{refine_from_overlaps, OverlapFit};

use crate::error::{Error, Result};
use crate::image::{AnyImage, AnyView, Image, ImageView, Rgba8};
use crate::stitch::{Frame, FrameSource};
use alloc::string::String;

/// A flat field `F` (normalised to mean 1) and an optional dark field `D`, both of the
/// tiles' size, in the tiles' pixel units for `D`.
#[derive(Clone, Debug, PartialEq)]
pub struct Shading {
    flat: Image<f32>,
    /// `1 / F`, what the correction multiplies by.
    gain: Image<f32>,
    dark: Option<Image<f32>>,
}

impl Shading {
    /// A shading model from a flat field (any positive scale: it is divided by its mean, so
    /// a raw image of an empty, evenly lit field serves as it is) and an optional dark
    /// field (in the tiles' grey levels). Errors: an empty flat field, a non-finite or
    /// non-positive flat-field value (named by its pixel), a dark field of another size or
    /// with a non-finite or negative value.
    pub fn new(flat: Image<f32>, dark: Option<Image<f32>>) -> Result<Shading> {
        let (w, h) = flat.size();
        if w == 0 || h == 0 {
            return Err(Error::ZeroSize { width: w, height: h });
        }
        let mut sum = 0.0f64;
        for y in 0..h {
            for (x, &v) in flat.row(y).iter().enumerate() {
                if !(v.is_finite() && v > 0.0) {
                    return Err(Error::InvalidParameter { name: "flat field", reason: alloc::format!("pixel ({x}, {y}) is {v}: every flat-field value must be positive and finite") });
                }
                sum += v as f64;
            }
        }
        let mean = sum / (w * h) as f64;
        let flat = flat.try_map(|v| (v as f64 / mean) as f32)?;
        if let Some(d) = &dark {
            if d.size() != (w, h) {
                return Err(Error::InvalidParameter { name: "dark field", reason: alloc::format!("it is {}x{}, the flat field {w}x{h}: both must be of the tiles' size", d.width(), d.height()) });
            }
            for y in 0..h {
                if let Some(x) = d.row(y).iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
                    return Err(Error::InvalidParameter { name: "dark field", reason: alloc::format!("pixel ({x}, {y}) is {}: every dark-field value must be finite and not negative", d.row(y)[x]) });
                }
            }
        }
        let gain = flat.try_map(|v| 1.0 / v)?;
        Ok(Shading { flat, gain, dark })
    }

    /// A shading model from grey images of any type (converted to f32), as [`Shading::new`].
    /// Errors: an RGB image (a flat field is one plane), and those of [`Shading::new`].
    pub fn from_views(flat: &AnyView<'_>, dark: Option<&AnyView<'_>>) -> Result<Shading> {
        let plane = |v: &AnyView<'_>, name: &'static str| match v {
            AnyView::Rgba8(_) => Err(Error::InvalidParameter { name, reason: "it is an RGB image: a flat or dark field must be one grey plane (8-, 16-bit or float)".into() }),
            other => Ok(other.to_gray_f32()),
        };
        Shading::new(plane(flat, "flat field")?, dark.map(|d| plane(d, "dark field")).transpose()?)
    }

    /// The size of the tiles it corrects.
    pub fn size(&self) -> (usize, usize) {
        self.flat.size()
    }

    /// The flat field, mean 1.
    pub fn flat(&self) -> ImageView<'_, f32> {
        self.flat.view()
    }

    /// The dark field, when there is one.
    pub fn dark(&self) -> Option<ImageView<'_, f32>> {
        self.dark.as_ref().map(|d| d.view())
    }

    /// The strength of the vignetting the flat field describes: `1 - min F / max F`, the
    /// fraction of light the darkest pixel loses against the brightest (0: even).
    pub fn vignetting(&self) -> f64 {
        let (lo, hi) = self.flat.as_slice().iter().fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        1.0 - lo as f64 / hi as f64
    }

    /// `(tile - D) / F` as a new image of the tile's type: integer tiles rounded to the
    /// nearest value (halves away from zero) and clamped to the type's range (0..=255,
    /// 0..=65535), so a bright corner lifted past the top saturates; float tiles neither
    /// rounded nor clamped. RGB tiles: each colour channel corrected alike, alpha kept.
    /// Errors: a tile of another size than the fields.
    pub fn correct(&self, tile: &AnyView<'_>) -> Result<AnyImage> {
        if tile.size() != self.size() {
            return Err(Error::SizeMismatch { expected: self.size(), got: tile.size() });
        }
        let dark = self.dark.as_ref().map(|d| d.view());
        Ok(match tile {
            AnyView::U8(v) => AnyImage::U8(self.apply(*v, dark, |x| libm::roundf(x).clamp(0.0, 255.0) as u8)?),
            AnyView::U16(v) => AnyImage::U16(self.apply(*v, dark, |x| libm::roundf(x).clamp(0.0, 65535.0) as u16)?),
            AnyView::F32(v) => AnyImage::F32(self.apply(*v, dark, |x| x)?),
            AnyView::Rgba8(v) => {
                let (w, h) = v.size();
                let round = |x: f32| libm::roundf(x).clamp(0.0, 255.0) as u8;
                let mut out = Image::<Rgba8>::new(w, h)?;
                for y in 0..h {
                    let (g, d) = (self.gain.row(y), dark.map(|d| d.row(y)));
                    for (x, (o, p)) in out.row_mut(y).iter_mut().zip(v.row(y)).enumerate() {
                        let off = d.map_or(0.0, |d| d[x]);
                        let c = |c: u8| round((c as f32 - off) * g[x]);
                        *o = Rgba8::new(c(p.r), c(p.g), c(p.b), p.a);
                    }
                }
                AnyImage::Rgba8(out)
            }
        })
    }

    /// `out(x) = store((src(x) - D(x)) * gain(x))` for a grey tile.
    fn apply<T: crate::image::Pixel + Into<f64>, U: crate::image::Pixel>(&self, src: ImageView<'_, T>, dark: Option<ImageView<'_, f32>>, store: impl Fn(f32) -> U) -> Result<Image<U>> {
        let (w, h) = src.size();
        let mut out = Image::<U>::new(w, h)?;
        for y in 0..h {
            let (g, s) = (self.gain.row(y), src.row(y));
            let o = out.row_mut(y);
            match dark {
                Some(d) => {
                    let d = d.row(y);
                    for x in 0..w {
                        o[x] = store((Into::<f64>::into(s[x]) as f32 - d[x]) * g[x]);
                    }
                }
                None => {
                    for x in 0..w {
                        o[x] = store(Into::<f64>::into(s[x]) as f32 * g[x]);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The frames of `inner` corrected by `shading` ([`Shading::correct`]) as they are read: a
/// frame of another size than the shading's cannot be had (its reason names both sizes),
/// so a registration leaves it out as it leaves out an unreadable tile.
pub struct Corrected<'a> {
    pub inner: &'a dyn FrameSource,
    pub shading: &'a Shading,
}

impl FrameSource for Corrected<'_> {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn frame(&self, i: usize) -> core::result::Result<Frame<'_>, String> {
        let f = self.inner.frame(i)?;
        let v = f.view()?;
        if v.size() != self.shading.size() {
            let (s, t) = (v.size(), self.shading.size());
            return Err(alloc::format!("it is {}x{}, the flat field {}x{}", s.0, s.1, t.0, t.1));
        }
        self.shading.correct(&v).map(Frame::Image).map_err(|e| alloc::format!("{e}"))
    }
    fn ready(&self) -> usize {
        self.inner.ready()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::InMemory;

    #[test]
    fn correction_divides_by_the_flat_field_after_the_dark_field() {
        let flat = Image::from_fn(4, 2, |x, _| if x < 2 { 1.0f32 } else { 3.0 }).unwrap();
        let dark = Image::filled(4, 2, 10.0f32).unwrap();
        let s = Shading::new(flat, Some(dark)).unwrap();
        // Mean 2: normalised to 0.5 and 1.5.
        assert_eq!(s.flat().row(0), &[0.5, 0.5, 1.5, 1.5]);
        assert!((s.vignetting() - 2.0 / 3.0).abs() < 1e-6);
        let t = Image::from_fn(4, 2, |x, _| [60u16, 100, 40, 65535][x]).unwrap();
        match s.correct(&AnyView::U16(t.view())).unwrap() {
            // (60 - 10) / 0.5 = 100; (100 - 10) / 0.5 = 180; (40 - 10) / 1.5 = 20;
            // (65535 - 10) / 1.5 = 43683.3 -> 43683.
            AnyImage::U16(o) => assert_eq!(o.row(1), &[100, 180, 20, 43683]),
            other => panic!("{other:?}"),
        }
        // 8-bit: lifted past 255 saturates; halves round away from zero.
        let t = Image::from_fn(4, 1, |x, _| [200u8, 15, 11, 250][x]).unwrap();
        let s = Shading::new(Image::from_fn(4, 1, |x, _| if x < 2 { 1.0f32 } else { 3.0 }).unwrap(), Some(Image::filled(4, 1, 10.0).unwrap())).unwrap();
        match s.correct(&AnyView::U8(t.view())).unwrap() {
            // 380 -> 255; (15 - 10) / 0.5 = 10; (11 - 10) / 1.5 = 0.67 -> 1; 240 / 1.5 = 160.
            AnyImage::U8(o) => assert_eq!(o.row(0), &[255, 10, 1, 160]),
            other => panic!("{other:?}"),
        }
        // Float: exact, below zero kept.
        let t = Image::from_fn(4, 1, |x, _| [5.0f32, 10.0, 13.0, 0.0][x]).unwrap();
        match s.correct(&AnyView::F32(t.view())).unwrap() {
            AnyImage::F32(o) => assert_eq!(o.row(0), &[-10.0, 0.0, 2.0, -10.0 * (1.0 / 1.5f32)]),
            other => panic!("{other:?}"),
        }
        // RGB: each colour alike, alpha kept.
        let t = Image::filled(4, 1, Rgba8::new(20, 30, 40, 7)).unwrap();
        match s.correct(&AnyView::Rgba8(t.view())).unwrap() {
            AnyImage::Rgba8(o) => assert_eq!((o.row(0)[0], o.row(0)[3]), (Rgba8::new(20, 40, 60, 7), Rgba8::new(7, 13, 20, 7))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_fields_and_tiles_are_errors() {
        let ok = || Image::filled(3, 2, 1.0f32).unwrap();
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let mut f = ok();
            f.set(2, 1, bad);
            let e = Shading::new(f, None).unwrap_err();
            assert!(alloc::format!("{e}").contains("pixel (2, 1)"), "{e}");
        }
        let e = Shading::new(ok(), Some(Image::filled(2, 2, 0.0).unwrap())).unwrap_err();
        assert!(alloc::format!("{e}").contains("2x2, the flat field 3x2"), "{e}");
        for bad in [-1.0, f32::NAN] {
            let mut d = Image::filled(3, 2, 0.0f32).unwrap();
            d.set(0, 1, bad);
            assert!(Shading::new(ok(), Some(d)).is_err());
        }
        let rgb = Image::filled(3, 2, Rgba8::new(1, 1, 1, 1)).unwrap();
        assert!(alloc::format!("{}", Shading::from_views(&AnyView::Rgba8(rgb.view()), None).unwrap_err()).contains("RGB"));
        let s = Shading::new(ok(), None).unwrap();
        let t = Image::filled(4, 2, 1u8).unwrap();
        assert!(s.correct(&AnyView::U8(t.view())).is_err());
        // Through a frame source: the odd tile cannot be had, with both sizes named.
        let good = Image::filled(3, 2, 9u8).unwrap();
        let views = [AnyView::U8(good.view()), AnyView::U8(t.view())];
        let inner = InMemory(&views);
        let c = Corrected { inner: &inner, shading: &s };
        assert!(c.frame(0).is_ok());
        assert!(c.frame(1).err().is_some_and(|e| e.contains("4x2, the flat field 3x2")));
    }
}

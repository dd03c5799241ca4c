//! Reading and writing images for the command line: PNG, TIFF (8/16-bit and 32-bit float
//! gray, RGB(A), multi-page stacks), JPEG and PGM/PPM. RGB inputs become `Rgba8` with
//! alpha 255; gray+alpha drops the alpha.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Cursor, Read, Seek};
use std::path::Path;
use tessera_core::{AnyImage, Image, Rgba8};

fn extension(path: &Path) -> String {
    path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase()
}

fn is_tiff(path: &Path) -> bool {
    matches!(extension(path).as_str(), "tif" | "tiff")
}

/// Loads the image at `path` (the first page of a TIFF stack).
pub fn load(path: &Path) -> Result<AnyImage> {
    let ctx = || format!("cannot read image {}", path.display());
    if is_tiff(path) {
        let f = BufReader::new(File::open(path).with_context(ctx)?);
        let mut pages = read_tiff(f, false).with_context(ctx)?;
        return pages.pop().ok_or_else(|| anyhow!("{}: TIFF without images", path.display()));
    }
    let img = image::ImageReader::open(path)
        .with_context(ctx)?
        .with_guessed_format()
        .with_context(ctx)?
        .decode()
        .with_context(ctx)?;
    from_dynamic(img)
}

/// Loads an image from encoded bytes (any supported format, found by its content).
pub fn load_from_memory(bytes: &[u8]) -> Result<AnyImage> {
    if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        let mut pages = read_tiff(Cursor::new(bytes), false)?;
        return pages.pop().ok_or_else(|| anyhow!("TIFF without images"));
    }
    from_dynamic(image::load_from_memory(bytes)?)
}

/// Loads every page of a multi-page TIFF (or the single image of any other file).
pub fn load_stack(path: &Path) -> Result<Vec<AnyImage>> {
    if is_tiff(path) {
        let f = BufReader::new(File::open(path).with_context(|| format!("cannot open {}", path.display()))?);
        return read_tiff(f, true).with_context(|| format!("cannot read TIFF stack {}", path.display()));
    }
    Ok(vec![load(path)?])
}

fn from_dynamic(img: image::DynamicImage) -> Result<AnyImage> {
    use image::DynamicImage as D;
    let (w, h) = (img.width() as usize, img.height() as usize);
    Ok(match img {
        D::ImageLuma8(b) => Image::from_vec(w, h, b.into_raw())?.into(),
        D::ImageLuma16(b) => Image::from_vec(w, h, b.into_raw())?.into(),
        D::ImageLumaA8(_) => Image::from_vec(w, h, img.to_luma8().into_raw())?.into(),
        D::ImageLumaA16(_) => Image::from_vec(w, h, img.to_luma16().into_raw())?.into(),
        D::ImageRgb32F(_) | D::ImageRgba32F(_) => {
            // Float colour: keep the luminance as f32 gray.
            let rgb = img.to_rgb32f();
            let data = rgb.pixels().map(|p| 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]).collect();
            Image::from_vec(w, h, data)?.into()
        }
        other => {
            let rgba = other.to_rgba8();
            let data = rgba.pixels().map(|p| Rgba8::new(p[0], p[1], p[2], p[3])).collect();
            Image::from_vec(w, h, data)?.into()
        }
    })
}

fn read_tiff<R: Read + Seek>(r: R, all_pages: bool) -> Result<Vec<AnyImage>> {
    use tiff::decoder::{Decoder, DecodingResult as R8};
    use tiff::ColorType as C;
    let mut dec = Decoder::new(r)?;
    let mut out = Vec::new();
    loop {
        let (w, h) = dec.dimensions()?;
        let (w, h) = (w as usize, h as usize);
        let color = dec.colortype()?;
        let img: AnyImage = match (color, dec.read_image()?) {
            (C::Gray(8), R8::U8(v)) => Image::from_vec(w, h, v)?.into(),
            (C::Gray(16), R8::U16(v)) => Image::from_vec(w, h, v)?.into(),
            (C::Gray(32), R8::F32(v)) => Image::from_vec(w, h, v)?.into(),
            (C::Gray(32), R8::U32(v)) => Image::from_vec(w, h, v)?.into(),
            (C::RGB(8), R8::U8(v)) => {
                Image::from_vec(w, h, v.chunks_exact(3).map(|c| Rgba8::new(c[0], c[1], c[2], 255)).collect())?.into()
            }
            (C::RGBA(8), R8::U8(v)) => {
                Image::from_vec(w, h, v.chunks_exact(4).map(|c| Rgba8::new(c[0], c[1], c[2], c[3])).collect())?.into()
            }
            (c, _) => bail!("unsupported TIFF pixel type {c:?} (supported: 8/16-bit gray, 32-bit float gray, 8-bit RGB/RGBA)"),
        };
        out.push(img);
        if !all_pages || !dec.more_images() {
            return Ok(out);
        }
        dec.next_image()?;
    }
}

/// Saves `img` to `path`, the format chosen by the extension. 32-bit float and 32-bit
/// integer images need `.tif` / `.tiff`.
pub fn save(img: &AnyImage, path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let ctx = || format!("cannot write {}", path.display());
    if is_tiff(path) {
        return write_tiff(std::slice::from_ref(img), path).with_context(ctx);
    }
    let (w, h) = (img.size().0 as u32, img.size().1 as u32);
    let dynamic: image::DynamicImage = match img {
        AnyImage::U8(i) => image::GrayImage::from_raw(w, h, i.as_slice().to_vec()).map(Into::into),
        AnyImage::U16(i) => {
            image::ImageBuffer::<image::Luma<u16>, _>::from_raw(w, h, i.as_slice().to_vec()).map(Into::into)
        }
        AnyImage::Rgba8(i) => {
            let raw: Vec<u8> = i.as_slice().iter().flat_map(|p| p.to_array()).collect();
            let rgba = image::RgbaImage::from_raw(w, h, raw).map(image::DynamicImage::from);
            // JPEG and PPM have no alpha channel.
            match extension(path).as_str() {
                "jpg" | "jpeg" | "ppm" | "pnm" => rgba.map(|d| d.to_rgb8().into()),
                _ => rgba,
            }
        }
        AnyImage::F32(_) | AnyImage::U32(_) => {
            bail!("{}: 32-bit images can only be written as TIFF (.tif)", path.display())
        }
    }
    .ok_or_else(|| anyhow!("internal: buffer size"))?;
    dynamic.save(path).with_context(ctx)
}

/// Writes one or more images as a (multi-page) TIFF, without compression.
pub fn write_tiff(pages: &[AnyImage], path: &Path) -> Result<()> {
    use tiff::encoder::{colortype as ct, TiffEncoder};
    let mut enc = TiffEncoder::new(BufWriter::new(File::create(path)?))?;
    for img in pages {
        let (w, h) = (img.size().0 as u32, img.size().1 as u32);
        match img {
            AnyImage::U8(i) => enc.write_image::<ct::Gray8>(w, h, i.as_slice())?,
            AnyImage::U16(i) => enc.write_image::<ct::Gray16>(w, h, i.as_slice())?,
            AnyImage::U32(i) => enc.write_image::<ct::Gray32>(w, h, i.as_slice())?,
            AnyImage::F32(i) => enc.write_image::<ct::Gray32Float>(w, h, i.as_slice())?,
            AnyImage::Rgba8(i) => {
                let raw: Vec<u8> = i.as_slice().iter().flat_map(|p| [p.r, p.g, p.b]).collect();
                enc.write_image::<ct::RGB8>(w, h, &raw)?
            }
        }
    }
    Ok(())
}

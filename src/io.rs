//! Reading and writing images for the command line: PNG, TIFF (8/16-bit and 32-bit float
//! gray, RGB(A), multi-page stacks), JPEG and PGM/PPM. RGB inputs become `Rgba8` with
//! alpha 255; gray+alpha drops the alpha.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Cursor, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use tessera_core::{AnyImage, Image, Rgba8};

fn extension(path: &Path) -> String {
    path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase()
}

/// Whether `path` names a TIFF file (by its extension).
pub fn is_tiff(path: &Path) -> bool {
    matches!(extension(path).as_str(), "tif" | "tiff")
}

/// The largest image the decoders accept, in pixels, unless raised with [`set_max_pixels`]:
/// 100 megapixels (10 000 x 10 000), about 400 MB as RGBA, checked from the file's header
/// before any pixel buffer is allocated, so a small file that claims a huge image (a
/// decompression bomb) is a clear error instead of gigabytes of memory.
pub const DEFAULT_MAX_PIXELS: u64 = 100_000_000;

static MAX_PIXELS: AtomicU64 = AtomicU64::new(DEFAULT_MAX_PIXELS);

/// Sets the decoders' pixel limit for this process (the command line's `--max-pixels`).
pub fn set_max_pixels(n: u64) {
    MAX_PIXELS.store(n, Ordering::Relaxed);
}

/// Refuses an image of `w x h` above the pixel limit, before it is decoded.
fn check_pixels(w: u64, h: u64) -> Result<()> {
    let max = MAX_PIXELS.load(Ordering::Relaxed);
    let n = w.saturating_mul(h);
    if n > max {
        bail!("the image is {w} x {h} = {n} pixels, above the limit of {max} (raise it with --max-pixels)");
    }
    Ok(())
}

/// Loads the image at `path` (the first page of a TIFF stack; [`load_stack`] reads them
/// all). Warns on stderr when a JPEG lacks its end marker (a truncated file decodes with its
/// missing part filled in).
pub fn load(path: &Path) -> Result<AnyImage> {
    let ctx = || format!("cannot read image {}", path.display());
    if is_tiff(path) {
        let f = BufReader::new(File::open(path).with_context(ctx)?);
        let mut pages = read_tiff(f, false).with_context(ctx)?;
        return pages.pop().ok_or_else(|| anyhow!("{}: TIFF without images", path.display()));
    }
    let bytes = read_file(path).with_context(ctx)?;
    let img = decode(&bytes).with_context(ctx)?;
    if let Some(w) = jpeg_truncation(&bytes) {
        eprintln!("warning: {}: {w}", path.display());
    }
    Ok(img)
}

/// The bytes of the file at `path`, in a buffer reserved first (an out-of-memory error where
/// it cannot be).
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let mut bytes = try_vec(usize::try_from(len).unwrap_or(usize::MAX))?;
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Decodes any format but TIFF, the size checked against the limit from the header first.
fn decode(bytes: &[u8]) -> Result<AnyImage> {
    let mut reader = image::ImageReader::new(Cursor::new(bytes)).with_guessed_format()?;
    // The crate's own allocation limit (512 MiB by default) would refuse some images below
    // ours with a vaguer message; ours is the one that decides.
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_PIXELS.load(Ordering::Relaxed).saturating_mul(16));
    reader.limits(limits);
    probe_memory(DECODER_SETUP_BYTES)?;
    let decoder = reader.into_decoder()?;
    let (w, h) = image::ImageDecoder::dimensions(&decoder);
    check_pixels(w as u64, h as u64)?;
    // The decoder's buffer, and the conversion of its pixels into ours (4 bytes a pixel; 16
    // for float colour, through RGB float), must be possible before the decoder allocates
    // without a check.
    let float = matches!(image::ImageDecoder::color_type(&decoder), image::ColorType::Rgb32F | image::ColorType::Rgba32F);
    let converted = (w as u64) * (h as u64) * if float { 16 } else { 4 };
    probe_memory(image::ImageDecoder::total_bytes(&decoder).saturating_add(converted))?;
    from_dynamic(image::DynamicImage::from_decoder(decoder)?)
}

/// What a decoder may allocate without a check while it reads an image's header (the PNG
/// decoder's stream buffer, up to 128 KiB, among them), with room to spare: probed before a
/// decoder is made, so that memory too short for the header is an error, not an abort.
const DECODER_SETUP_BYTES: u64 = 1 << 20;

/// Whether `bytes` can be allocated now: reserved and released at once. The decoders of the
/// `image` and `tiff` crates allocate their pixel buffers without a fallible path (an
/// allocation failure there aborts the process), so a decode is preceded by this check of
/// the buffers the image's header says it needs: an image too large for the memory left is
/// an out-of-memory error instead of an abort. (What the decoder allocates then is what was
/// just released, so it fits, barring another thread allocating in between.)
fn probe_memory(bytes: u64) -> Result<()> {
    let n = usize::try_from(bytes).map_err(|_| tessera_core::Error::OutOfMemory { bytes: usize::MAX })?;
    drop(try_vec::<u8>(n)?);
    Ok(())
}

/// Why a JPEG looks truncated (no end-of-image marker at its end), or `None` for other
/// formats and whole JPEGs. The decoder fills a truncated file's missing rows silently.
fn jpeg_truncation(bytes: &[u8]) -> Option<&'static str> {
    let is_jpeg = bytes.starts_with(&[0xFF, 0xD8, 0xFF]);
    let end = bytes.iter().rposition(|&b| b != 0).map_or(bytes, |i| &bytes[..=i]);
    (is_jpeg && !end.ends_with(&[0xFF, 0xD9]))
        .then_some("the JPEG data has no end-of-image marker: the file is probably truncated, and the lower part of the image is made up by the decoder")
}

/// The width and height of the image at `path`, read from its header only (PFM included),
/// so that sizes can be compared before anything large is decoded.
pub fn dimensions(path: &Path) -> Result<(usize, usize)> {
    let ctx = || format!("cannot read image {}", path.display());
    if extension(path) == "pfm" {
        let mut head = [0u8; 128];
        let n = File::open(path).with_context(ctx)?.read(&mut head).with_context(ctx)?;
        let fields: Vec<&[u8]> = head[..n].split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty()).take(3).collect();
        let num = |f: Option<&&[u8]>| f.and_then(|f| std::str::from_utf8(f).ok()).and_then(|s| s.parse::<usize>().ok());
        return match (num(fields.get(1)), num(fields.get(2))) {
            (Some(w), Some(h)) => Ok((w, h)),
            _ => Err(anyhow!("{}: not a PFM header", path.display())),
        };
    }
    let reader = image::ImageReader::open(path).with_context(ctx)?.with_guessed_format().with_context(ctx)?;
    probe_memory(DECODER_SETUP_BYTES).with_context(ctx)?;
    let (w, h) = reader.into_dimensions().with_context(ctx)?;
    Ok((w as usize, h as usize))
}

/// Loads an image from encoded bytes (any supported format, found by its content).
pub fn load_from_memory(bytes: &[u8]) -> Result<AnyImage> {
    if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        let mut pages = read_tiff(Cursor::new(bytes), false)?;
        return pages.pop().ok_or_else(|| anyhow!("TIFF without images"));
    }
    decode(bytes)
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
        D::ImageLumaA8(b) => Image::from_vec(w, h, try_collect(w * h, b.pixels().map(|p| p[0]))?)?.into(),
        D::ImageLumaA16(b) => Image::from_vec(w, h, try_collect(w * h, b.pixels().map(|p| p[0]))?)?.into(),
        D::ImageRgb8(b) => Image::from_vec(w, h, try_collect(w * h, b.pixels().map(|p| Rgba8::new(p[0], p[1], p[2], 255)))?)?.into(),
        D::ImageRgba8(b) => Image::from_vec(w, h, try_collect(w * h, b.pixels().map(|p| Rgba8::new(p[0], p[1], p[2], p[3])))?)?.into(),
        D::ImageRgb32F(_) | D::ImageRgba32F(_) => {
            // Float colour: keep the luminance as f32 gray.
            let rgb = img.to_rgb32f();
            Image::from_vec(w, h, try_collect(w * h, rgb.pixels().map(|p| 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]))?)?.into()
        }
        other => {
            let rgba = other.to_rgba8();
            Image::from_vec(w, h, try_collect(w * h, rgba.pixels().map(|p| Rgba8::new(p[0], p[1], p[2], p[3])))?)?.into()
        }
    })
}

/// A TIFF decoder with the pixel limit applied.
fn tiff_decoder<R: Read + Seek>(r: R) -> Result<tiff::decoder::Decoder<R>> {
    let mut limits = tiff::decoder::Limits::default();
    limits.decoding_buffer_size = usize::try_from(MAX_PIXELS.load(Ordering::Relaxed).saturating_mul(16)).unwrap_or(usize::MAX);
    Ok(tiff::decoder::Decoder::new(r)?.with_limits(limits))
}

fn read_tiff<R: Read + Seek>(r: R, all_pages: bool) -> Result<Vec<AnyImage>> {
    let mut dec = tiff_decoder(r)?;
    let mut out = Vec::new();
    loop {
        out.push(read_tiff_page(&mut dec)?);
        if !all_pages || !dec.more_images() {
            return Ok(out);
        }
        dec.next_image()?;
    }
}

/// The page the decoder stands on.
fn read_tiff_page<R: Read + Seek>(dec: &mut tiff::decoder::Decoder<R>) -> Result<AnyImage> {
    use tiff::decoder::DecodingResult as R8;
    use tiff::tags::Tag;
    use tiff::ColorType as C;
    let (w, h) = dec.dimensions()?;
    check_pixels(w as u64, h as u64)?;
    let (w, h) = (w as usize, h as usize);
    let color = dec.colortype()?;
    // The decoder's buffer (up to 4 samples of 4 bytes a pixel) and an RGB image's
    // conversion to RGBA: possible before the decoder allocates without a check
    // ([`probe_memory`]).
    probe_memory((w as u64) * (h as u64) * 20)?;
    // PlanarConfiguration 2: each channel stored whole after the other (what tifffile
    // writes for a (3, H, W) array); the decoder returns only the first plane.
    if matches!(color, C::RGB(_) | C::RGBA(_)) && dec.find_tag_unsigned::<u16>(Tag::PlanarConfiguration)? == Some(2) {
        bail!("planar RGB TIFF (one plane per channel) is not supported: save it with interleaved channels (tifffile: an (H, W, 3) array, or planarconfig='contig')");
    }
    Ok(match (color, dec.read_image()?) {
        (C::Gray(8), R8::U8(v)) => Image::from_vec(w, h, v)?.into(),
        (C::Gray(16), R8::U16(v)) => Image::from_vec(w, h, v)?.into(),
        (C::Gray(32), R8::F32(v)) => Image::from_vec(w, h, v)?.into(),
        (C::Gray(32), R8::U32(v)) => Image::from_vec(w, h, v)?.into(),
        (C::RGB(8), R8::U8(v)) => Image::from_vec(w, h, try_collect(w * h, v.chunks_exact(3).map(|c| Rgba8::new(c[0], c[1], c[2], 255)))?)?.into(),
        (C::RGBA(8), R8::U8(v)) => Image::from_vec(w, h, try_collect(w * h, v.chunks_exact(4).map(|c| Rgba8::new(c[0], c[1], c[2], c[3])))?)?.into(),
        (c, _) => bail!("unsupported TIFF pixel type {c:?} (supported: 8/16-bit gray, 32-bit float gray, 8-bit RGB/RGBA)"),
    })
}

/// The size and pixel type name [`load`] gives the TIFF at `path`, read from its first
/// directory alone where that settles them: 8- or 16-bit grey or 8-bit interleaved RGB(A),
/// uncompressed, every strip or tile within the file, within the pixel limit. `None` where
/// only decoding can tell (another format, compression, 32-bit samples, a short file).
pub fn tiff_shape(path: &Path) -> Option<((usize, usize), &'static str)> {
    use tiff::tags::Tag;
    use tiff::ColorType as C;
    if !is_tiff(path) {
        return None;
    }
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut dec = tiff_decoder(BufReader::new(file)).ok()?;
    let (w, h) = dec.dimensions().ok()?;
    check_pixels(w as u64, h as u64).ok()?;
    let type_name = match dec.colortype().ok()? {
        C::Gray(8) => "u8",
        C::Gray(16) => "u16",
        C::RGB(8) | C::RGBA(8) if dec.find_tag_unsigned::<u16>(Tag::PlanarConfiguration).ok()? != Some(2) => <tessera_core::Rgba8 as tessera_core::Pixel>::NAME,
        _ => return None,
    };
    // Uncompressed unsigned samples: what the decoder reads as the type above.
    if dec.find_tag_unsigned::<u16>(Tag::Compression).ok()?.unwrap_or(1) != 1 || dec.find_tag_unsigned_vec::<u16>(Tag::SampleFormat).ok()?.is_some_and(|f| f.iter().any(|&f| f != 1)) {
        return None;
    }
    let (offsets, counts) = match dec.find_tag_unsigned_vec::<u64>(Tag::StripOffsets).ok()? {
        Some(o) => (o, dec.find_tag_unsigned_vec::<u64>(Tag::StripByteCounts).ok()??),
        None => (dec.find_tag_unsigned_vec::<u64>(Tag::TileOffsets).ok()??, dec.find_tag_unsigned_vec::<u64>(Tag::TileByteCounts).ok()??),
    };
    let whole = !offsets.is_empty() && offsets.len() == counts.len() && offsets.iter().zip(&counts).all(|(&o, &c)| o.checked_add(c).is_some_and(|end| end <= len));
    whole.then_some(((w as usize, h as usize), type_name))
}

/// The number of pages of the TIFF at `path`, counted from its directories without
/// decoding any pixel.
pub fn tiff_pages(path: &Path) -> Result<usize> {
    let mut dec = tiff_decoder(BufReader::new(File::open(path).with_context(|| format!("cannot open {}", path.display()))?))?;
    let mut n = 1;
    while dec.more_images() {
        dec.next_image()?;
        n += 1;
    }
    Ok(n)
}

/// Page `i` (from 0) of the TIFF at `path`, decoded alone.
pub fn load_tiff_page(path: &Path, i: usize) -> Result<AnyImage> {
    let ctx = || format!("cannot read page {i} of {}", path.display());
    let mut dec = tiff_decoder(BufReader::new(File::open(path).with_context(ctx)?)).with_context(ctx)?;
    dec.seek_to_image(i).with_context(ctx)?;
    read_tiff_page(&mut dec).with_context(ctx)
}

/// Saves `img` to `path`, the format chosen by the extension (`.ome.tif` / `.ome.tiff`: a
/// pyramidal OME-TIFF, [`crate::ome_tiff`]; `.zarr`: an OME-Zarr store, [`crate::ome_zarr`]). 32-bit float and 32-bit integer images need
/// `.tif` / `.tiff`. The file is written beside `path` and renamed over it when complete
/// ([`write_atomically`]): a failed save leaves any previous file as it was.
pub fn save(img: &AnyImage, path: &Path) -> Result<()> {
    let ctx = || format!("cannot write {}", path.display());
    if crate::large::is_tiled(path) {
        return crate::large::write_tiled(img, path, &Default::default()).map(drop).with_context(ctx);
    }
    if is_tiff(path) {
        return write_tiff(std::slice::from_ref(img), path).with_context(ctx);
    }
    let format = image::ImageFormat::from_path(path).with_context(ctx)?;
    let (w, h) = (img.size().0 as u32, img.size().1 as u32);
    // The encoder's copy of the pixels, reserved first: a canvas too large for memory is an
    // error, not an abort.
    let dynamic: image::DynamicImage = match img {
        AnyImage::U8(i) => image::GrayImage::from_raw(w, h, try_copy(i.as_slice())?).map(Into::into),
        AnyImage::U16(i) => image::ImageBuffer::<image::Luma<u16>, _>::from_raw(w, h, try_copy(i.as_slice())?).map(Into::into),
        AnyImage::Rgba8(i) => {
            // JPEG and PPM have no alpha channel.
            let alpha = !matches!(extension(path).as_str(), "jpg" | "jpeg" | "ppm" | "pnm");
            let px = i.as_slice();
            if alpha {
                image::RgbaImage::from_raw(w, h, try_collect(px.len() * 4, px.iter().flat_map(|p| p.to_array()))?).map(Into::into)
            } else {
                image::RgbImage::from_raw(w, h, try_collect(px.len() * 3, px.iter().flat_map(|p| [p.r, p.g, p.b]))?).map(Into::into)
            }
        }
        AnyImage::F32(_) | AnyImage::U32(_) => {
            bail!("{}: 32-bit images can only be written as TIFF (.tif)", path.display())
        }
    }
    .ok_or_else(|| anyhow!("internal: buffer size"))?;
    // The encoders (PNG's compressed stream, JPEG's planes) allocate without a fallible
    // path; at most twice the pixels' bytes, checked first ([`probe_memory`]).
    probe_memory(2 * dynamic.as_bytes().len() as u64)?;
    write_atomically(path, |part| {
        let mut file = BufWriter::new(File::create(part)?);
        dynamic.write_to(&mut file, format)?;
        // Flushed here, not on drop, so that a failing write is an error.
        file.flush()?;
        Ok(())
    })
    .with_context(ctx)
}

/// A copy of `s` in a vector reserved first ([`tessera_core::Error::OutOfMemory`] where the
/// allocator refuses).
pub fn try_copy<T: Clone>(s: &[T]) -> Result<Vec<T>> {
    let mut v = try_vec(s.len())?;
    v.extend_from_slice(s);
    Ok(v)
}

/// An empty vector with room for `n` elements, or an out-of-memory error where the allocator
/// refuses: every buffer whose size follows an input is reserved this way.
pub fn try_vec<T>(n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| tessera_core::Error::OutOfMemory { bytes: n.saturating_mul(std::mem::size_of::<T>()) })?;
    Ok(v)
}

/// The `n` items of `it` in a vector reserved first ([`try_vec`]).
pub fn try_collect<T>(n: usize, it: impl IntoIterator<Item = T>) -> Result<Vec<T>> {
    let mut v = try_vec(n)?;
    v.extend(it.into_iter().take(n));
    Ok(v)
}

/// Writes one or more images as a (multi-page) TIFF, without compression, through a
/// temporary file renamed over `path` when complete ([`write_atomically`]).
pub fn write_tiff(pages: &[AnyImage], path: &Path) -> Result<()> {
    use tiff::encoder::{colortype as ct, TiffEncoder};
    let bytes: u64 = pages.iter().map(|p| (p.size().0 * p.size().1 * pixel_bytes(p)) as u64).sum();
    check_free_space(path, bytes)?;
    write_atomically(path, |part| {
        let mut file = BufWriter::new(File::create(part)?);
        let mut enc = TiffEncoder::new(&mut file)?;
        for img in pages {
            let (w, h) = (img.size().0 as u32, img.size().1 as u32);
            match img {
                AnyImage::U8(i) => enc.write_image::<ct::Gray8>(w, h, i.as_slice())?,
                AnyImage::U16(i) => enc.write_image::<ct::Gray16>(w, h, i.as_slice())?,
                AnyImage::U32(i) => enc.write_image::<ct::Gray32>(w, h, i.as_slice())?,
                AnyImage::F32(i) => enc.write_image::<ct::Gray32Float>(w, h, i.as_slice())?,
                AnyImage::Rgba8(i) => {
                    let raw = try_collect(i.as_slice().len() * 3, i.as_slice().iter().flat_map(|p| [p.r, p.g, p.b]))?;
                    enc.write_image::<ct::RGB8>(w, h, &raw)?
                }
            }
        }
        drop(enc);
        // The buffered tail reaches the file (and its error the caller) here.
        file.flush()?;
        Ok(())
    })
}

/// Bytes per pixel of `img` as the TIFF writer stores it (RGBA as RGB).
fn pixel_bytes(img: &AnyImage) -> usize {
    match img {
        AnyImage::U8(_) => 1,
        AnyImage::U16(_) => 2,
        AnyImage::Rgba8(_) => 3,
        AnyImage::U32(_) | AnyImage::F32(_) => 4,
    }
}

/// A file being written under a hidden temporary name beside its target
/// (`DIR/.NAME.PID.partial.EXT` for `DIR/NAME.EXT`: the same file system, so the rename is
/// atomic, and the same extension); [`commit`](PartialFile::commit) renames it over the
/// target, and dropping it uncommitted removes it. A reader of the target sees the previous
/// file or the complete new one, never a part.
pub struct PartialFile {
    part: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl PartialFile {
    /// The temporary file's place for `target` (its folder created). Nothing is written yet.
    pub fn new(target: &Path) -> Result<Self> {
        if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        Ok(PartialFile { part: partial_name(target), target: target.to_path_buf(), committed: false })
    }

    /// Where to write.
    pub fn path(&self) -> &Path {
        &self.part
    }

    /// The file this one replaces.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames the written file over the target.
    pub fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.part, &self.target).with_context(|| format!("cannot write {}", self.target.display()))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.part);
        }
    }
}

/// `DIR/.NAME.PID.partial.EXT` for `DIR/NAME.EXT` (module doc of [`PartialFile`]).
fn partial_name(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.partial{ext}", std::process::id()))
}

/// Writes `path` through `write`, which is given a temporary path beside it
/// ([`PartialFile`]): renamed over `path` once `write` succeeds, removed when it fails, so
/// that `path` is never half-written and a failure leaves its previous content untouched.
/// Every writer of the library and of the command line goes through here.
pub fn write_atomically<T>(path: &Path, write: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let part = PartialFile::new(path)?;
    let value = write(part.path())?;
    part.commit()?;
    Ok(value)
}

/// Writes `bytes` to `path` atomically ([`write_atomically`]): a report or a disparity map.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |part| {
        File::create(part)?.write_all(bytes)?;
        Ok(())
    })
    .with_context(|| format!("cannot write {}", path.display()))
}

/// Bytes free to an unprivileged writer on the file system that holds `path` (or would: the
/// nearest existing folder above it), or `None` where it cannot be told.
pub fn free_space(path: &Path) -> Option<u64> {
    let mut dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    while !dir.exists() {
        dir = dir.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    }
    free_space_of(dir)
}

#[cfg(unix)]
fn free_space_of(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a statvfs the call fills.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

#[cfg(not(unix))]
fn free_space_of(_: &Path) -> Option<u64> {
    None
}

/// Refuses a write of about `bytes` to `path` that its file system has no room for, before
/// anything is written (where the free space can be told).
pub fn check_free_space(path: &Path, bytes: u64) -> Result<()> {
    if let Some(free) = free_space(path) {
        if bytes > free {
            let mib = |b: u64| b.div_ceil(1 << 20);
            bail!("{} needs about {} MiB but its file system has {} MiB free", path.display(), mib(bytes), mib(free));
        }
    }
    Ok(())
}

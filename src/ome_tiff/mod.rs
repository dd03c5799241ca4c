//! A streaming writer of tiled, pyramidal OME-TIFF: the full-resolution image in the first
//! (and only top-level) directory, with the OME-XML in its ImageDescription, and each
//! sub-resolution level a SubIFD of it, flagged reduced-resolution (NewSubfileType 1): the
//! OME-TIFF pyramid layout that Bio-Formats 6+, QuPath and napari (tifffile) read.
//!
//! The image arrives as horizontal strips in order, so it never needs to be in memory
//! whole: each level keeps one row of tiles, writes it out when it is full, and hands it,
//! halved ([`crate::pyramid`]), to the next level. Memory is about two tile rows of the full
//! width, whatever the height. Tiles are written uncompressed, so the file's size is known
//! from the start and BigTIFF is chosen when it could pass 4 GiB.
//!
//! Pixel types: 8- and 16-bit and 32-bit float gray, and 8-bit RGB: an RGBA image is
//! written as RGB, its alpha (the compositor's coverage mask) dropped, as
//! [`crate::io::write_tiff`] does and as viewers expect of a microscopy image.

pub mod ifd;
pub mod xml;

use anyhow::{bail, Context, Result};
use ifd::{Ifd, Kind};
use crate::pyramid::{level_sizes, AnyPyramid, Sample, TileSink};
use std::fs::File;
use crate::write_behind::WriteBehind;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use tessera_core::AnyView;

/// Whether `path` asks for an OME-TIFF (`.ome.tif` / `.ome.tiff`, any case).
pub fn is_ome_tiff(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    name.ends_with(".ome.tif") || name.ends_with(".ome.tiff")
}

/// How the file is written.
#[derive(Clone, Debug, PartialEq)]
pub struct OmeTiffOptions {
    /// Tile side in pixels: a multiple of 16 (TIFF's rule) from 16 to 4096.
    pub tile: usize,
    /// Micrometres per pixel, written as OME's PhysicalSizeX/Y when known.
    pub pixel_size_um: Option<f64>,
    /// `Some(true)`: BigTIFF always; `Some(false)`: classic TIFF (an error past 4 GiB);
    /// `None`: BigTIFF only when the file could pass 4 GiB.
    pub bigtiff: Option<bool>,
    /// The image's name in the OME-XML.
    pub name: String,
    /// Channels and time points (gray images): the planes arrive one after the other,
    /// channel by channel within each time point, each a full image of strips.
    pub planes: (usize, usize),
}

impl OmeTiffOptions {
    /// Errors: a tile that is not a multiple of 16 in 16..=4096, a pixel size that is not
    /// finite and positive.
    pub fn validate(&self) -> Result<()> {
        if !self.tile.is_multiple_of(16) || !(16..=4096).contains(&self.tile) {
            bail!("OME-TIFF tile side {} must be a multiple of 16 from 16 to 4096", self.tile);
        }
        if let Some(s) = self.pixel_size_um {
            if !s.is_finite() || s <= 0.0 {
                bail!("pixel size {s} µm must be finite and positive");
            }
        }
        if self.planes.0 == 0 || self.planes.1 == 0 {
            bail!("an OME-TIFF of {} channels and {} time points holds no plane", self.planes.0, self.planes.1);
        }
        Ok(())
    }
}

impl Default for OmeTiffOptions {
    fn default() -> Self {
        OmeTiffOptions { tile: 512, pixel_size_um: None, bigtiff: None, name: "tessera panorama".into(), planes: (1, 1) }
    }
}

/// The pixel layouts the writer stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelKind {
    U8,
    U16,
    F32,
    /// 8-bit RGB, from `Rgba8` strips (alpha dropped).
    Rgb8,
}

impl PixelKind {
    /// The layout strips of `v`'s type are written in.
    pub fn of(v: &AnyView<'_>) -> Self {
        match v {
            AnyView::U8(_) => PixelKind::U8,
            AnyView::U16(_) => PixelKind::U16,
            AnyView::F32(_) => PixelKind::F32,
            AnyView::Rgba8(_) => PixelKind::Rgb8,
        }
    }
    pub fn samples(self) -> usize {
        if self == PixelKind::Rgb8 { 3 } else { 1 }
    }
    pub fn sample_bytes(self) -> usize {
        match self {
            PixelKind::U8 | PixelKind::Rgb8 => 1,
            PixelKind::U16 => 2,
            PixelKind::F32 => 4,
        }
    }
    fn ome_type(self) -> &'static str {
        match self {
            PixelKind::U8 | PixelKind::Rgb8 => "uint8",
            PixelKind::U16 => "uint16",
            PixelKind::F32 => "float",
        }
    }
}

/// What a finished file holds.
#[derive(Clone, Debug, PartialEq)]
pub struct OmeTiffSummary {
    /// Every level's size, full resolution first.
    pub levels: Vec<(usize, usize)>,
    pub bigtiff: bool,
    pub bytes: u64,
}

/// The file being written, where its end is, and the tiles of the plane being written
/// (offset, bytes) per level, in row-major order.
struct Out {
    w: WriteBehind,
    pos: u64,
    scratch: Vec<u8>,
    tiles: Vec<Vec<(u64, u64)>>,
}

impl<T: Sample> TileSink<T> for Out {
    fn tile_row(&mut self, level: usize, _row: usize, tiles: Vec<Vec<T>>) -> std::io::Result<()> {
        for t in tiles {
            self.scratch.clear();
            T::extend_le(&t, &mut self.scratch);
            self.w.write_all(&self.scratch)?;
            self.tiles[level].push((self.pos, self.scratch.len() as u64));
            self.pos += self.scratch.len() as u64;
        }
        Ok(())
    }
}

/// A pyramidal OME-TIFF being written strip by strip (module doc): [`create`](Self::create),
/// [`write_strip`](Self::write_strip) the rows top to bottom, [`finish`](Self::finish).
/// A writer dropped unfinished leaves an incomplete file.
pub struct OmeTiffWriter {
    path: PathBuf,
    out: Out,
    /// The temporary file written, renamed over `path` by `finish` (removed if dropped).
    part: crate::io::PartialFile,
    kind: PixelKind,
    size: (usize, usize),
    sizes: Vec<(usize, usize)>,
    big: bool,
    xml: String,
    tile: usize,
    rows_in: usize,
    body: AnyPyramid,
    /// The planes the file holds, and the tiles of each plane written so far.
    planes: usize,
    done: Vec<Vec<Vec<(u64, u64)>>>,
}

impl OmeTiffWriter {
    /// Starts the file `path` (its folder created) for a `width x height` image of `kind`:
    /// written to a temporary file beside it that [`finish`](Self::finish) renames over
    /// `path` ([`crate::io::PartialFile`]); a writer dropped unfinished removes it and leaves
    /// `path` as it was.
    /// With several planes (`opts.planes`), their strips come plane after plane.
    /// Errors: a zero size, a tile that is not a multiple of 16 in 16..=4096, a pixel size
    /// that is not finite and positive, no plane, channels of RGB pixels, a file past 4 GiB
    /// with `bigtiff: Some(false)`, less free space on the file system than the file takes,
    /// a path that cannot be written.
    pub fn create(path: &Path, (width, height): (usize, usize), kind: PixelKind, opts: &OmeTiffOptions) -> Result<Self> {
        if width == 0 || height == 0 {
            bail!("cannot write an empty image ({width}x{height}) as OME-TIFF");
        }
        if width > u32::MAX as usize || height > u32::MAX as usize {
            bail!("{width}x{height} is beyond TIFF's 32-bit image size");
        }
        opts.validate()?;
        if kind == PixelKind::Rgb8 && opts.planes.0 > 1 {
            bail!("an RGB OME-TIFF holds its colours as one channel; several channels must be gray");
        }
        let planes = opts.planes.0 * opts.planes.1;
        let tile = opts.tile;
        let sizes = level_sizes((width, height), tile);
        let xml = xml::ome_xml(&xml::Pixels {
            name: &opts.name,
            size: (width, height),
            type_name: kind.ome_type(),
            samples: kind.samples(),
            pixel_size_um: opts.pixel_size_um,
            channels: opts.planes.0,
            times: opts.planes.1,
        });
        // The file's size is known up front (tiles uncompressed); the directories hold two
        // offsets per tile and a few hundred bytes of tags.
        let tile_bytes = (tile * tile * kind.samples() * kind.sample_bytes()) as u64;
        let tiles: u64 = sizes.iter().map(|&(w, h)| (w.div_ceil(tile) * h.div_ceil(tile)) as u64).sum();
        let estimate = 16 + planes as u64 * (tiles * (tile_bytes + 16) + sizes.len() as u64 * 1024) + xml.len() as u64;
        let fits = estimate <= u32::MAX as u64;
        let big = match opts.bigtiff {
            Some(false) if !fits => bail!("a {width}x{height} OME-TIFF takes about {estimate} bytes, more than classic TIFF's 4 GiB: use BigTIFF"),
            Some(b) => b,
            None => !fits,
        };
        crate::io::check_free_space(path, estimate)?;
        let part = crate::io::PartialFile::new(path)?;
        let file = File::create(part.path()).with_context(|| format!("cannot write {}", path.display()))?;
        let w = WriteBehind::new(file).with_context(|| format!("cannot write {}", path.display()))?;
        let mut out = Out { w, pos: 0, scratch: Vec::new(), tiles: vec![Vec::new(); sizes.len()] };
        let head = ifd::header(big, 0);
        out.w.write_all(&head).with_context(|| format!("cannot write {}", path.display()))?;
        out.pos = head.len() as u64;
        let body = AnyPyramid::new(kind, &sizes, tile);
        Ok(OmeTiffWriter { path: path.to_path_buf(), out, part, kind, size: (width, height), sizes, big, xml, tile, rows_in: 0, body, planes, done: Vec::new() })
    }


    /// Whether the file is a BigTIFF.
    pub fn is_bigtiff(&self) -> bool {
        self.big
    }

    /// The rows of the current plane written so far.
    pub fn rows_written(&self) -> usize {
        self.rows_in
    }

    /// The planes written whole so far.
    pub fn planes_written(&self) -> usize {
        self.done.len()
    }

    /// Writes the next rows of the image (of the current plane; a plane's last rows start
    /// the next): `strip` is as wide as the image, of its pixel type, and no taller than the
    /// rows still missing (any height; a multiple of the tile side keeps the buffering to
    /// one row of tiles).
    pub fn write_strip(&mut self, strip: &AnyView<'_>) -> Result<()> {
        let (w, h) = strip.size();
        if PixelKind::of(strip) != self.kind {
            bail!("a {} strip for an OME-TIFF of {:?} pixels", strip.type_name(), self.kind);
        }
        if self.done.len() == self.planes {
            bail!("every plane of {} is written", self.path.display());
        }
        if w != self.size.0 || h == 0 || self.rows_in + h > self.size.1 {
            bail!("a {w}x{h} strip at row {} of a {}x{} image", self.rows_in, self.size.0, self.size.1);
        }
        let ctx = || format!("cannot write {}", self.path.display());
        let written = self.body.push_strip(strip, &mut self.out);
        written.with_context(ctx)?;
        self.rows_in += h;
        if self.rows_in == self.size.1 {
            self.body = AnyPyramid::new(self.kind, &self.sizes, self.tile);
            let plane = std::mem::replace(&mut self.out.tiles, vec![Vec::new(); self.sizes.len()]);
            self.done.push(plane);
            if self.done.len() < self.planes {
                self.rows_in = 0;
            }
        }
        Ok(())
    }

    /// Writes the directories, completes the file and renames it into place. Errors: rows
    /// still missing, a write that fails.
    pub fn finish(mut self) -> Result<OmeTiffSummary> {
        if self.done.len() != self.planes {
            bail!("{}: only {} of {} planes and {} of {} rows of the next were written", self.path.display(), self.done.len(), self.planes, self.rows_in, self.size.1);
        }
        // Per plane, its levels' directories: the full resolution in the top-level chain
        // (the XML in the first), the others its SubIFDs.
        let mut dirs: Vec<Ifd> = Vec::new();
        for (p, plane) in self.done.iter().enumerate() {
            dirs.extend(plane.iter().enumerate().map(|(k, t)| self.directory(k, t, p == 0)));
        }
        // Every directory's size is known before its offset: place them all after the
        // tiles, then point each plane's first at its levels and at the next plane's.
        let start = self.out.pos + (self.out.pos & 1);
        let mut at = vec![start];
        for d in &dirs[..dirs.len() - 1] {
            at.push(at.last().copied().unwrap_or(start) + d.byte_len() as u64);
        }
        let levels = self.sizes.len();
        let mut next = vec![0u64; dirs.len()];
        for p in 0..self.planes {
            let first = p * levels;
            if levels > 1 {
                let kind = dirs[first].offset_kind();
                dirs[first].set(330, kind, &at[first + 1..first + levels]);
            }
            if p + 1 < self.planes {
                next[first] = at[first + levels];
            }
        }
        let ctx = || format!("cannot write {}", self.path.display());
        let mut bytes = vec![0u8; (start - self.out.pos) as usize];
        for ((d, &a), &n) in dirs.iter().zip(&at).zip(&next) {
            bytes.extend(d.to_bytes(a, n));
        }
        if !self.big && start + bytes.len() as u64 > u32::MAX as u64 {
            bail!("internal: the classic TIFF passed 4 GiB");
        }
        self.out.w.write_all(&bytes).with_context(ctx)?;
        let end = self.out.pos + bytes.len() as u64;
        let mut file = self.out.w.into_file().with_context(ctx)?;
        file.seek(SeekFrom::Start(0)).with_context(ctx)?;
        file.write_all(&ifd::header(self.big, start)).with_context(ctx)?;
        self.part.commit()?;
        Ok(OmeTiffSummary { levels: self.sizes.clone(), bigtiff: self.big, bytes: end })
    }

    /// Level `k`'s directory of a plane, its tile offsets `tiles` (the SubIFDs of level 0
    /// set later), the OME-XML in the `first` plane's.
    fn directory(&self, k: usize, tiles: &[(u64, u64)], first: bool) -> Ifd {
        let mut d = Ifd::new(self.big);
        let (w, h) = self.sizes[k];
        let spp = self.kind.samples() as u64;
        let bits = (self.kind.sample_bytes() * 8) as u64;
        let format = if self.kind == PixelKind::F32 { 3 } else { 1 };
        let off = d.offset_kind();
        d.set(254, Kind::Long, &[if k == 0 { 0 } else { 1 }]);
        d.set(256, Kind::Long, &[w as u64]);
        d.set(257, Kind::Long, &[h as u64]);
        d.set(258, Kind::Short, &vec![bits; spp as usize]);
        d.set(259, Kind::Short, &[1]);
        d.set(262, Kind::Short, &[if spp == 3 { 2 } else { 1 }]);
        if k == 0 && first {
            d.set_ascii(270, &self.xml);
        }
        if k == 0 {
            // Placeholder of the right length; the offsets are set once known.
            if self.sizes.len() > 1 {
                d.set(330, off, &vec![0; self.sizes.len() - 1]);
            }
        }
        d.set(277, Kind::Short, &[spp]);
        d.set(284, Kind::Short, &[1]);
        d.set_ascii(305, concat!("tessera ", env!("CARGO_PKG_VERSION")));
        d.set(322, Kind::Long, &[self.tile as u64]);
        d.set(323, Kind::Long, &[self.tile as u64]);
        d.set(324, off, &tiles.iter().map(|t| t.0).collect::<Vec<_>>());
        d.set(325, off, &tiles.iter().map(|t| t.1).collect::<Vec<_>>());
        d.set(339, Kind::Short, &vec![format; spp as usize]);
        d
    }
}

/// Rows `y..y + h` of `v`.
pub fn rows_of<'a>(v: &AnyView<'a>, y: usize, h: usize) -> Result<AnyView<'a>> {
    let w = v.size().0;
    Ok(match v {
        AnyView::U8(v) => AnyView::U8(v.crop(0, y, w, h)?),
        AnyView::U16(v) => AnyView::U16(v.crop(0, y, w, h)?),
        AnyView::F32(v) => AnyView::F32(v.crop(0, y, w, h)?),
        AnyView::Rgba8(v) => AnyView::Rgba8(v.crop(0, y, w, h)?),
    })
}

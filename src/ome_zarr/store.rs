//! The OME-Zarr writer itself (the `ome-zarr` feature, through the `zarrs` crate).

use super::OmeZarrSummary;
use crate::ome_tiff::{OmeTiffOptions, PixelKind};
use crate::pyramid::{level_sizes, AnyPyramid, Sample, TileSink};
use anyhow::{anyhow, bail, Context, Result};
use rayon::prelude::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tessera_core::AnyView;
use zarrs::array::{Array, ArrayBuilder, Element};
use zarrs::filesystem::FilesystemStore;
use zarrs::group::GroupBuilder;

/// gzip level of the chunks: level 1 compresses the canvas's flat and empty areas nearly
/// as well as the higher levels at several times their speed.
const GZIP_LEVEL: u32 = 1;

/// Where a plane's chunk rows go: every level's array and the plane's (t, c) indices.
struct Chunks {
    arrays: Vec<Array<FilesystemStore>>,
    /// The plane being written: time point and first channel (RGB planes fill three).
    plane: (u64, u64),
    /// Colours interleaved in a tile (3: RGB, each its own channel).
    spp: usize,
    tile: usize,
    stored: usize,
}

impl<T: Sample + Element + Send + Sync> TileSink<T> for Chunks {
    fn tile_row(&mut self, level: usize, row: usize, tiles: Vec<Vec<T>>) -> std::io::Result<()> {
        let (array, (t, c0), spp, n) = (&self.arrays[level], self.plane, self.spp, self.tile * self.tile);
        // One job per chunk: a tile, or one colour of it.
        let jobs: Vec<(usize, usize)> = (0..tiles.len()).flat_map(|col| (0..spp).map(move |s| (col, s))).collect();
        let stored = jobs
            .par_iter()
            .map(|&(col, s)| {
                let own;
                let data: &[T] = if spp == 1 {
                    &tiles[col]
                } else {
                    own = tiles[col].iter().skip(s).step_by(spp).copied().collect::<Vec<T>>();
                    &own
                };
                debug_assert_eq!(data.len(), n);
                let empty = data.iter().all(|v| v.widen() == 0.0);
                if !empty {
                    array.store_chunk(&[t, c0 + s as u64, row as u64, col as u64], data).map_err(std::io::Error::other)?;
                }
                Ok(usize::from(!empty))
            })
            .sum::<std::io::Result<usize>>()?;
        self.stored += stored;
        Ok(())
    }
}

/// An OME-Zarr store being written strip by strip (module doc): [`create`](Self::create),
/// [`write_strip`](Self::write_strip) the rows top to bottom, plane after plane,
/// [`finish`](Self::finish). A writer dropped unfinished removes what it wrote.
pub struct OmeZarrWriter {
    part: PartialDir,
    kind: PixelKind,
    size: (usize, usize),
    sizes: Vec<(usize, usize)>,
    tile: usize,
    planes: (usize, usize),
    rows_in: usize,
    planes_done: usize,
    body: AnyPyramid,
    chunks: Chunks,
}

impl OmeZarrWriter {
    /// Starts the store `path` (a folder; its parent created) for a `width x height` image
    /// of `kind`, with `opts`' chunk side (`tile`), pixel size, name and planes (channels,
    /// time points). Errors: a zero size, bad options ([`OmeTiffOptions::validate`]),
    /// channels of RGB pixels, a `path` that exists and is not an OME-Zarr store (a store is
    /// replaced when the new one is complete), less free space than the uncompressed image
    /// takes, a folder that cannot be written.
    pub fn create(path: &Path, (width, height): (usize, usize), kind: PixelKind, opts: &OmeTiffOptions) -> Result<Self> {
        if width == 0 || height == 0 {
            bail!("cannot write an empty image ({width}x{height}) as OME-Zarr");
        }
        opts.validate()?;
        if kind == PixelKind::Rgb8 && opts.planes.0 > 1 {
            bail!("an RGB OME-Zarr holds its colours as its three channels; several channels must be gray");
        }
        let (channels, times) = opts.planes;
        let store_channels = if kind == PixelKind::Rgb8 { 3 } else { channels };
        let tile = opts.tile;
        let sizes = level_sizes((width, height), tile);
        let bytes = (store_channels * times) as u64 * sizes.iter().map(|&(w, h)| (w * h) as u64).sum::<u64>() * kind.sample_bytes() as u64;
        crate::io::check_free_space(path, bytes)?;
        let part = PartialDir::new(path)?;
        let ctx = || format!("cannot write {}", path.display());
        let store = Arc::new(FilesystemStore::new(part.path()).with_context(ctx)?);
        let attributes = json!({ "ome": ngff_metadata(opts, kind, sizes.len(), store_channels) });
        let serde_json::Value::Object(attributes) = attributes else { bail!("internal: NGFF metadata") };
        GroupBuilder::new().attributes(attributes).build(store.clone(), "/").map_err(|e| anyhow!(e)).with_context(ctx)?.store_metadata().with_context(ctx)?;
        let (data_type, fill): (_, zarrs::array::FillValue) = match kind {
            PixelKind::U8 | PixelKind::Rgb8 => (zarrs::array::data_type::uint8(), 0u8.into()),
            PixelKind::U16 => (zarrs::array::data_type::uint16(), 0u16.into()),
            PixelKind::F32 => (zarrs::array::data_type::float32(), 0f32.into()),
        };
        let codec = Arc::new(zarrs::array::codec::GzipCodec::new(GZIP_LEVEL).map_err(|e| anyhow!(e))?);
        let mut arrays = Vec::with_capacity(sizes.len());
        for (k, &(w, h)) in sizes.iter().enumerate() {
            let array = ArrayBuilder::new(vec![times as u64, store_channels as u64, h as u64, w as u64], vec![1, 1, tile as u64, tile as u64], data_type.clone(), fill.clone())
                .bytes_to_bytes_codecs(vec![codec.clone()])
                .dimension_names(Some(["t", "c", "y", "x"]))
                .build(store.clone(), &format!("/{k}"))
                .map_err(|e| anyhow!(e))
                .with_context(ctx)?;
            array.store_metadata().with_context(ctx)?;
            arrays.push(array);
        }
        let spp = kind.samples();
        Ok(OmeZarrWriter {
            part,
            kind,
            size: (width, height),
            body: AnyPyramid::new(kind, &sizes, tile),
            sizes,
            tile,
            planes: (channels, times),
            rows_in: 0,
            planes_done: 0,
            chunks: Chunks { arrays, plane: (0, 0), spp, tile, stored: 0 },
        })
    }

    /// Writes the next rows of the current plane (a plane's last rows start the next):
    /// `strip` is as wide as the image, of its pixel type, and no taller than the rows still
    /// missing.
    pub fn write_strip(&mut self, strip: &AnyView<'_>) -> Result<()> {
        let (w, h) = strip.size();
        let target = self.part.target.display().to_string();
        if PixelKind::of(strip) != self.kind {
            bail!("a {} strip for an OME-Zarr of {:?} pixels", strip.type_name(), self.kind);
        }
        if self.planes_done == self.planes.0 * self.planes.1 {
            bail!("every plane of {target} is written");
        }
        if w != self.size.0 || h == 0 || self.rows_in + h > self.size.1 {
            bail!("a {w}x{h} strip at row {} of a {}x{} image", self.rows_in, self.size.0, self.size.1);
        }
        let written = self.body.push_strip(strip, &mut self.chunks);
        written.with_context(|| format!("cannot write {target}"))?;
        self.rows_in += h;
        if self.rows_in == self.size.1 {
            self.planes_done += 1;
            self.rows_in = 0;
            self.body = AnyPyramid::new(self.kind, &self.sizes, self.tile);
            let c = self.planes.0.max(1);
            self.chunks.plane = ((self.planes_done / c) as u64, (self.planes_done % c) as u64);
        }
        Ok(())
    }

    /// Completes the store and renames it into place. Errors: planes or rows still missing,
    /// a store that cannot be replaced.
    pub fn finish(self) -> Result<OmeZarrSummary> {
        let planes = self.planes.0 * self.planes.1;
        if self.planes_done != planes {
            bail!("{}: only {} of {planes} planes and {} of {} rows of the next were written", self.part.target.display(), self.planes_done, self.rows_in, self.size.1);
        }
        let bytes = folder_bytes(self.part.path());
        let chunks = self.chunks.stored;
        self.part.commit()?;
        Ok(OmeZarrSummary { levels: self.sizes, chunks, bytes })
    }
}

/// The group's `ome` attributes (NGFF 0.5): the axes, each level's scale (and the half-pixel
/// translation of a 2x2 mean: level `k`'s pixel `i` covers full-resolution pixels
/// `2^k i .. 2^k (i + 1)`), and the channels' names, colours and display windows.
fn ngff_metadata(opts: &OmeTiffOptions, kind: PixelKind, levels: usize, channels: usize) -> serde_json::Value {
    let (unit, pixel) = match opts.pixel_size_um {
        Some(s) => (Some("micrometer"), s),
        None => (None, 1.0),
    };
    let space = |name: &str| match unit {
        Some(u) => json!({"name": name, "type": "space", "unit": u}),
        None => json!({"name": name, "type": "space"}),
    };
    let datasets: Vec<_> = (0..levels)
        .map(|k| {
            let f = (1u64 << k) as f64;
            json!({
                "path": k.to_string(),
                "coordinateTransformations": [
                    {"type": "scale", "scale": [1.0, 1.0, f * pixel, f * pixel]},
                    {"type": "translation", "translation": [0.0, 0.0, (f - 1.0) / 2.0 * pixel, (f - 1.0) / 2.0 * pixel]},
                ],
            })
        })
        .collect();
    let max = match kind {
        PixelKind::U8 | PixelKind::Rgb8 => 255.0,
        PixelKind::U16 => 65535.0,
        PixelKind::F32 => 1.0,
    };
    let channel = |c: usize| {
        let (label, color) = match (kind, c) {
            (PixelKind::Rgb8, 0) => ("red".to_string(), "FF0000"),
            (PixelKind::Rgb8, 1) => ("green".to_string(), "00FF00"),
            (PixelKind::Rgb8, _) => ("blue".to_string(), "0000FF"),
            _ => (format!("channel {c}"), "FFFFFF"),
        };
        json!({"label": label, "color": color, "active": true, "window": {"min": 0.0, "max": max, "start": 0.0, "end": max}})
    };
    json!({
        "version": "0.5",
        "multiscales": [{
            "name": opts.name,
            "axes": [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"}, space("y"), space("x")],
            "datasets": datasets,
        }],
        "omero": {"channels": (0..channels).map(channel).collect::<Vec<_>>(), "rdefs": {"model": if kind == PixelKind::Rgb8 { "color" } else { "greyscale" }}},
    })
}

/// The bytes of every file under `dir`.
fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => folder_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// A store written in a hidden folder beside its target (`DIR/.NAME.PID.partial`), renamed
/// over it by [`commit`](Self::commit) and removed when dropped uncommitted: the folder
/// counterpart of [`crate::io::PartialFile`].
struct PartialDir {
    part: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl PartialDir {
    /// Errors: a `target` that exists and is not a Zarr store (never replaced), a parent
    /// that cannot be created.
    fn new(target: &Path) -> Result<Self> {
        if target.exists() && !is_zarr_store(target) {
            bail!("{} exists and is not a Zarr store: choose another name or remove it", target.display());
        }
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let part = dir.join(format!(".{name}.{}.partial", std::process::id()));
        let _ = std::fs::remove_dir_all(&part);
        std::fs::create_dir(&part).with_context(|| format!("cannot write {}", target.display()))?;
        Ok(PartialDir { part, target: target.to_path_buf(), committed: false })
    }

    fn path(&self) -> &Path {
        &self.part
    }

    /// Replaces the target (a previous store) with the written folder.
    fn commit(mut self) -> Result<()> {
        let ctx = || format!("cannot write {}", self.target.display());
        if self.target.exists() {
            if !is_zarr_store(&self.target) {
                bail!("{} appeared while it was written and is not a Zarr store", self.target.display());
            }
            std::fs::remove_dir_all(&self.target).with_context(ctx)?;
        }
        std::fs::rename(&self.part, &self.target).with_context(ctx)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for PartialDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.part);
        }
    }
}

/// Whether `dir` is a folder holding Zarr metadata (v3's `zarr.json` or v2's `.zgroup` /
/// `.zarray`): the only kind of existing output a new store replaces.
fn is_zarr_store(dir: &Path) -> bool {
    dir.is_dir() && ["zarr.json", ".zgroup", ".zarray"].iter().any(|f| dir.join(f).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyramid::halve;
    use tessera_core::{Image, Rgba8};

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tessera-ome-zarr-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Level `k`, plane `(t, c)` of the store at `path`, read back through zarrs.
    fn read_plane<T: zarrs::array::ElementOwned>(path: &Path, k: usize, t: u64, c: u64) -> (usize, usize, Vec<T>) {
        let store = Arc::new(FilesystemStore::new(path).unwrap());
        let a = Array::open(store, &format!("/{k}")).unwrap();
        let shape = a.shape().to_vec();
        let subset = zarrs::array::ArraySubset::new_with_ranges(&[t..t + 1, c..c + 1, 0..shape[2], 0..shape[3]]);
        (shape[3] as usize, shape[2] as usize, a.retrieve_array_subset::<Vec<T>>(&subset).unwrap())
    }

    #[test]
    fn strips_of_any_height_give_every_level_of_every_plane() {
        let d = scratch("strips");
        let (w, h) = (150, 133);
        let planes: Vec<Image<u16>> = (0..4).map(|p| Image::from_fn(w, h, |x, y| ((x * 37 + y * 11 + p * 1000) % 60_000) as u16).unwrap()).collect();
        let opts = OmeTiffOptions { tile: 32, planes: (2, 2), ..OmeTiffOptions::default() };
        for step in [7, 32, 133] {
            let path = d.join(format!("s{step}.ome.zarr"));
            let mut wr = OmeZarrWriter::create(&path, (w, h), PixelKind::U16, &opts).unwrap();
            for img in &planes {
                let v: AnyView = img.view().into();
                for y in (0..h).step_by(step) {
                    wr.write_strip(&crate::ome_tiff::rows_of(&v, y, step.min(h - y)).unwrap()).unwrap();
                }
            }
            let summary = wr.finish().unwrap();
            assert_eq!(summary.levels, level_sizes((w, h), 32));
            for (p, img) in planes.iter().enumerate() {
                let mut want: Vec<u16> = img.as_slice().to_vec();
                for (k, &(lw, lh)) in summary.levels.iter().enumerate() {
                    let (gw, gh, got) = read_plane::<u16>(&path, k, (p / 2) as u64, (p % 2) as u64);
                    assert_eq!((gw, gh), (lw, lh));
                    assert!(got == want, "strips of {step}: plane {p} level {k}");
                    want = halve(&want, lw, lh, 1);
                }
            }
        }
    }

    #[test]
    fn rgb_becomes_three_channels_and_empty_chunks_are_not_stored() {
        let d = scratch("rgb");
        let path = d.join("c.ome.zarr");
        // The left half empty (the canvas outside every frame): its chunks are not stored.
        let img = Image::from_fn(64, 20, |x, y| if x < 32 { Rgba8::default() } else { Rgba8 { r: x as u8, g: y as u8, b: 200, a: 255 } }).unwrap();
        let opts = OmeTiffOptions { tile: 32, ..OmeTiffOptions::default() };
        let mut wr = OmeZarrWriter::create(&path, (64, 20), PixelKind::Rgb8, &opts).unwrap();
        wr.write_strip(&img.view().into()).unwrap();
        let summary = wr.finish().unwrap();
        // Level 0: 3 channels of the right chunk; level 1 (32 x 10): one chunk a channel.
        assert_eq!(summary.chunks, 6);
        let (_, _, g) = read_plane::<u8>(&path, 0, 0, 1);
        assert!(g.iter().enumerate().all(|(i, &v)| v == if i % 64 < 32 { 0 } else { (i / 64) as u8 }));
        let (_, _, b) = read_plane::<u8>(&path, 0, 0, 2);
        assert_eq!(b[63], 200);
    }

    #[test]
    fn bad_input_is_an_error_and_an_unfinished_store_leaves_nothing() {
        let d = scratch("bad");
        let opts = OmeTiffOptions::default();
        let path = d.join("a.ome.zarr");
        assert!(OmeZarrWriter::create(&path, (0, 10), PixelKind::U8, &opts).is_err());
        assert!(OmeZarrWriter::create(&path, (10, 10), PixelKind::U8, &OmeTiffOptions { tile: 100, ..opts.clone() }).is_err());
        assert!(OmeZarrWriter::create(&path, (10, 10), PixelKind::Rgb8, &OmeTiffOptions { planes: (2, 1), ..opts.clone() }).is_err());
        let a = Image::from_fn(10, 4, |x, _| x as u8).unwrap();
        let f = Image::from_fn(10, 4, |x, _| x as f32).unwrap();
        let mut wr = OmeZarrWriter::create(&path, (10, 10), PixelKind::U8, &opts).unwrap();
        assert!(wr.write_strip(&f.view().into()).is_err());
        wr.write_strip(&a.view().into()).unwrap();
        wr.write_strip(&a.view().into()).unwrap();
        assert!(wr.write_strip(&a.view().into()).is_err(), "past the last row");
        assert!(wr.finish().is_err(), "rows missing");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "nothing left behind");
        // A folder that is not a store is never replaced.
        let mine = d.join("mine.zarr");
        std::fs::create_dir(&mine).unwrap();
        assert!(OmeZarrWriter::create(&mine, (10, 10), PixelKind::U8, &opts).is_err());
        // A path under a regular file cannot be written.
        std::fs::write(d.join("file"), b"x").unwrap();
        assert!(OmeZarrWriter::create(&d.join("file/x.ome.zarr"), (10, 10), PixelKind::U8, &opts).is_err());
    }

    #[test]
    fn zarr_names_and_stores_are_recognised() {
        assert!(super::super::is_ome_zarr(Path::new("a/mosaic.ome.zarr")));
        assert!(super::super::is_ome_zarr(Path::new("M.ZARR")));
        assert!(!super::super::is_ome_zarr(Path::new("mosaic.ome.tif")));
        assert!(!is_zarr_store(Path::new("/nonexistent/x.zarr")));
    }

    #[test]
    fn the_metadata_scales_each_level_by_two_with_the_pixel_size() {
        let opts = OmeTiffOptions { pixel_size_um: Some(0.5), ..OmeTiffOptions::default() };
        let m = ngff_metadata(&opts, PixelKind::U16, 3, 2);
        let ds = &m["multiscales"][0]["datasets"];
        assert_eq!(ds[2]["path"], "2");
        assert_eq!(ds[2]["coordinateTransformations"][0]["scale"], json!([1.0, 1.0, 2.0, 2.0]));
        assert_eq!(ds[1]["coordinateTransformations"][1]["translation"], json!([0.0, 0.0, 0.25, 0.25]));
        assert_eq!(m["multiscales"][0]["axes"][3], json!({"name": "x", "type": "space", "unit": "micrometer"}));
        assert_eq!(m["omero"]["channels"].as_array().map(Vec::len), Some(2));
    }
}

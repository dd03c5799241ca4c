//! The pyramidal OME-TIFF writer read back through the `tiff` crate's decoder (every level,
//! classic and BigTIFF, strips of any height), its bad input, and `tessera stitch` writing
//! an `.ome.tif` (and streaming a canvas over `--max-mem`) equal to its PNG output, and a
//! 20 000 x 20 000 panorama streamed with a peak under 1 GiB.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use tessera::large::{write_tiled, Tiled};
use tessera::ome_tiff::{rows_of, OmeTiffOptions, OmeTiffSummary, OmeTiffWriter, PixelKind};
use tessera::{AnyImage, Image, Rgba8};
use tiff::decoder::{Decoder, DecodingResult};
use tiff::tags::Tag;

fn dir(name: &str) -> PathBuf {
    let d = common::temp_dir("tessera-ometiff", name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Samples of a level as f64, interleaved.
fn samples(r: DecodingResult) -> Vec<f64> {
    match r {
        DecodingResult::U8(v) => v.into_iter().map(f64::from).collect(),
        DecodingResult::U16(v) => v.into_iter().map(f64::from).collect(),
        DecodingResult::F32(v) => v.into_iter().map(f64::from).collect(),
        _ => panic!("unexpected sample type"),
    }
}

/// Every level of the file: (width, height, samples), the full resolution first, each
/// sub-resolution level read by pointing a copy's header at its SubIFD.
fn read_levels(path: &Path) -> (Vec<(usize, usize, Vec<f64>)>, String) {
    read_levels_with(path, true)
}

/// The file with its first bytes replaced by `head` (a header pointing elsewhere), read
/// from disk so a large file is not held in memory.
struct Patched {
    file: std::io::BufReader<std::fs::File>,
    head: Vec<u8>,
}

impl std::io::Read for Patched {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::Seek;
        let pos = self.file.stream_position()? as usize;
        let n = self.file.read(buf)?;
        let end = (pos + n).min(self.head.len());
        if pos < end {
            buf[..end - pos].copy_from_slice(&self.head[pos..end]);
        }
        Ok(n)
    }
}

impl std::io::Seek for Patched {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.file.seek(to)
    }
}

fn open_at(path: &Path, head: Vec<u8>) -> Decoder<Patched> {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    Decoder::new(Patched { file, head }).unwrap().with_limits(tiff::decoder::Limits::unlimited())
}

/// [`read_levels`], the pixels left out (empty) unless `pixels`.
fn read_levels_with(path: &Path, pixels: bool) -> (Vec<(usize, usize, Vec<f64>)>, String) {
    let mut bytes = vec![0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open(path).unwrap(), &mut bytes).unwrap();
    let big = bytes[2] == 43;
    let mut dec = open_at(path, bytes.clone());
    let xml = dec.get_tag_ascii_string(Tag::ImageDescription).unwrap();
    let subs = dec.find_tag_unsigned_vec::<u64>(Tag::SubIfd).unwrap().unwrap_or_default();
    assert_eq!(dec.find_tag_unsigned::<u32>(Tag::NewSubfileType).unwrap(), Some(0));
    assert!(!dec.more_images(), "one top-level directory");
    let mut levels = vec![level(&mut dec, pixels)];
    for off in subs {
        let mut b = bytes.clone();
        if big {
            b[8..16].copy_from_slice(&off.to_le_bytes());
        } else {
            b[4..8].copy_from_slice(&(off as u32).to_le_bytes());
        }
        let mut d = open_at(path, b);
        assert_eq!(d.find_tag_unsigned::<u32>(Tag::NewSubfileType).unwrap(), Some(1), "reduced-resolution flag");
        levels.push(level(&mut d, pixels));
    }
    (levels, xml)
}

fn level(d: &mut Decoder<Patched>, pixels: bool) -> (usize, usize, Vec<f64>) {
    assert_eq!(d.get_chunk_type(), tiff::decoder::ChunkType::Tile);
    let (w, h) = d.dimensions().unwrap();
    (w as usize, h as usize, if pixels { samples(d.read_image().unwrap()) } else { Vec::new() })
}

/// Reference 2x2 mean (written apart from the writer's): `ceil` halves, edge pixels
/// averaging what they have, integers rounded half up.
fn halve(src: &[f64], w: usize, h: usize, spp: usize, integer: bool) -> (usize, usize, Vec<f64>) {
    let (hw, hh) = (w.div_ceil(2), h.div_ceil(2));
    let mut out = vec![0.0; hw * hh * spp];
    for y in 0..hh {
        for x in 0..hw {
            for c in 0..spp {
                let (mut s, mut n) = (0.0, 0.0);
                for yy in 2 * y..(2 * y + 2).min(h) {
                    for xx in 2 * x..(2 * x + 2).min(w) {
                        s += src[(yy * w + xx) * spp + c];
                        n += 1.0;
                    }
                }
                out[(y * hw + x) * spp + c] = if integer { ((s + n / 2.0) / n).floor() } else { (s / n) as f32 as f64 };
            }
        }
    }
    (hw, hh, out)
}

fn full_samples(img: &AnyImage) -> (Vec<f64>, usize) {
    match img {
        AnyImage::U8(i) => (i.as_slice().iter().map(|&v| v as f64).collect(), 1),
        AnyImage::U16(i) => (i.as_slice().iter().map(|&v| v as f64).collect(), 1),
        AnyImage::F32(i) => (i.as_slice().iter().map(|&v| v as f64).collect(), 1),
        AnyImage::Rgba8(i) => (i.as_slice().iter().flat_map(|p| [p.r as f64, p.g as f64, p.b as f64]).collect(), 3),
        AnyImage::U32(_) => unreachable!(),
    }
}

/// `img` written as an OME-TIFF at `path`.
fn write_ome_tiff(img: &AnyImage, path: &Path, opts: &OmeTiffOptions) -> Result<OmeTiffSummary, String> {
    match write_tiled(img, path, opts).map_err(|e| e.to_string())? {
        Tiled::Tiff(t) => Ok(t),
        other => Err(format!("not an OME-TIFF: {other:?}")),
    }
}

/// Writes `img` and checks every level against the reference pyramid.
fn round_trip(img: &AnyImage, opts: &OmeTiffOptions, name: &str) -> (String, Vec<u8>) {
    let path = dir(name).join("x.ome.tif");
    let summary = write_ome_tiff(img, &path, opts).unwrap();
    let (levels, xml) = read_levels(&path);
    let (w, h) = img.size();
    let (mut want, spp) = full_samples(img);
    let integer = !matches!(img, AnyImage::F32(_));
    let (mut lw, mut lh) = (w, h);
    assert_eq!(levels.len(), summary.levels.len());
    for (k, (gw, gh, got)) in levels.iter().enumerate() {
        assert_eq!((*gw, *gh), (lw, lh), "{name}: level {k} size");
        assert_eq!(summary.levels[k], (lw, lh));
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()) && got.len() == want.len(), "{name}: level {k} pixels");
        (lw, lh, want) = halve(&want, lw, lh, spp, integer);
    }
    let (tw, th, _) = levels.last().unwrap();
    assert!(*tw <= opts.tile && *th <= opts.tile, "the last level fits one tile");
    assert!(levels.len() == 1 || levels[levels.len() - 2].0 > opts.tile || levels[levels.len() - 2].1 > opts.tile);
    (xml, std::fs::read(&path).unwrap())
}

fn pattern<T>(w: usize, h: usize, f: impl Fn(usize, usize) -> T) -> Image<T>
where
    T: tessera::Pixel,
{
    Image::from_fn(w, h, f).unwrap()
}

#[test]
fn every_level_reads_back_for_every_pixel_type() {
    let opts = OmeTiffOptions { tile: 64, pixel_size_um: Some(0.325), ..Default::default() };
    let (w, h) = (301, 171);
    let xml = round_trip(&pattern(w, h, |x, y| ((x * 13 + y * 29 + x * y) % 256) as u8).into(), &opts, "u8").0;
    for want in [r#"SizeX="301""#, r#"SizeY="171""#, r#"Type="uint8""#, r#"PhysicalSizeX="0.325""#, r#"PhysicalSizeY="0.325""#, r#"SizeC="1""#] {
        assert!(xml.contains(want), "{want} not in {xml}");
    }
    let xml = round_trip(&pattern(w, h, |x, y| (x * 211 + y * 977) as u16).into(), &opts, "u16").0;
    assert!(xml.contains(r#"Type="uint16""#));
    let xml = round_trip(&pattern(w, h, |x, y| (x as f32 * 0.37 - y as f32 * 1.3).sin() * 1e3).into(), &opts, "f32").0;
    assert!(xml.contains(r#"Type="float""#));
    let rgba = pattern(w, h, |x, y| Rgba8::new(x as u8, y as u8, (x ^ y) as u8, if x % 3 == 0 { 0 } else { 255 }));
    let xml = round_trip(&rgba.into(), &opts, "rgb").0;
    assert!(xml.contains(r#"SamplesPerPixel="3""#) && xml.contains(r#"Type="uint8""#));
    // One tile: no sub-resolution level.
    round_trip(&pattern(40, 17, |x, y| (x + y) as u8).into(), &opts, "one-tile");
    // The default 512 tiles.
    round_trip(&pattern(1100, 530, |x, y| (x * y % 65521) as u16).into(), &OmeTiffOptions::default(), "tile512");
}

#[test]
fn forced_bigtiff_reads_back() {
    let opts = OmeTiffOptions { tile: 32, bigtiff: Some(true), ..Default::default() };
    let (_, bytes) = round_trip(&pattern(100, 70, |x, y| (x * 7 + y) as u16).into(), &opts, "big");
    assert_eq!(&bytes[..4], &[b'I', b'I', 43, 0]);
}

#[test]
fn strips_of_any_height_give_the_same_file() {
    let img: AnyImage = pattern(150, 133, |x, y| ((x * 5 + y * 3) % 251) as u8).into();
    let opts = OmeTiffOptions { tile: 32, ..Default::default() };
    let d = dir("strips");
    let whole = d.join("whole.ome.tif");
    write_ome_tiff(&img, &whole, &opts).unwrap();
    let view = img.view().unwrap();
    for step in [1, 7, 32, 64, 133] {
        let path = d.join(format!("s{step}.ome.tif"));
        let mut w = OmeTiffWriter::create(&path, (150, 133), PixelKind::U8, &opts).unwrap();
        for y in (0..133).step_by(step) {
            w.write_strip(&rows_of(&view, y, step.min(133 - y)).unwrap()).unwrap();
        }
        w.finish().unwrap();
        assert!(std::fs::read(&path).unwrap() == std::fs::read(&whole).unwrap(), "strips of {step} rows");
    }
}

#[test]
fn bad_input_is_an_error() {
    let d = dir("bad");
    let opts = OmeTiffOptions::default();
    assert!(OmeTiffWriter::create(&d.join("a.ome.tif"), (0, 10), PixelKind::U8, &opts).is_err());
    assert!(OmeTiffWriter::create(&d.join("a.ome.tif"), (10, 0), PixelKind::U8, &opts).is_err());
    assert!(OmeTiffWriter::create(&d.join("a.ome.tif"), (10, 10), PixelKind::U8, &OmeTiffOptions { tile: 100, ..Default::default() }).is_err());
    assert!(OmeTiffWriter::create(&d.join("a.ome.tif"), (10, 10), PixelKind::U8, &OmeTiffOptions { pixel_size_um: Some(f64::NAN), ..Default::default() }).is_err());
    assert!(OmeTiffWriter::create(&d.join("a.ome.tif"), (10, 10), PixelKind::U8, &OmeTiffOptions { pixel_size_um: Some(-1.0), ..Default::default() }).is_err());
    // Classic TIFF refused past 4 GiB (nothing is written before the check).
    assert!(OmeTiffWriter::create(&d.join("huge.ome.tif"), (70_000, 70_000), PixelKind::U8, &OmeTiffOptions { bigtiff: Some(false), ..Default::default() }).is_err());
    // Automatic BigTIFF past 4 GiB, classic below.
    assert!(OmeTiffWriter::create(&d.join("huge.ome.tif"), (70_000, 70_000), PixelKind::U8, &opts).unwrap().is_bigtiff());
    assert!(!OmeTiffWriter::create(&d.join("small.ome.tif"), (50_000, 50_000), PixelKind::U8, &opts).unwrap().is_bigtiff());
    // Unwritable: a path under a regular file.
    std::fs::write(d.join("file"), b"x").unwrap();
    assert!(OmeTiffWriter::create(&d.join("file/a.ome.tif"), (10, 10), PixelKind::U8, &opts).is_err());
    let a = pattern(10, 4, |x, _| x as u8);
    let f = pattern(10, 4, |x, _| x as f32);
    let narrow = pattern(9, 4, |x, _| x as u8);
    let mut w = OmeTiffWriter::create(&d.join("b.ome.tif"), (10, 10), PixelKind::U8, &opts).unwrap();
    assert!(w.write_strip(&f.view().into()).is_err());
    assert!(w.write_strip(&narrow.view().into()).is_err());
    w.write_strip(&a.view().into()).unwrap();
    w.write_strip(&a.view().into()).unwrap();
    assert!(w.write_strip(&a.view().into()).is_err(), "past the last row");
    assert_eq!(w.rows_written(), 8);
    assert!(w.finish().is_err(), "rows missing");
    assert!(write_ome_tiff(&AnyImage::U32(pattern(3, 3, |_, _| 1u32)), &d.join("c.ome.tif"), &opts).is_err());
}

fn stitch(args: &[&str], out: &Path, report: &Path) -> Value {
    let o = common::tessera()
        .arg("stitch")
        .args(["--frames", "12", "--backend", "cpu", "--no-quality"])
        .args(args)
        .arg("-o")
        .arg(out)
        .arg("--report")
        .arg(report)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

/// `tessera stitch` to PNG, to `.ome.tif`, and to PNG over a 1 MiB budget (streamed in
/// strips to `.ome.tif`): the OME-TIFFs' full levels equal the PNG's pixels (RGB).
#[test]
fn the_cli_writes_an_ome_tiff_equal_to_its_png() {
    let d = dir("cli");
    for blend in ["overwrite", "feather"] {
        let png = d.join(format!("{blend}.png"));
        stitch(&["--blend", blend], &png, &d.join("r.json"));
        let want = tessera::io::load(&png).unwrap();
        let (want, _) = full_samples(&want);
        let ome = d.join(format!("{blend}.ome.tif"));
        let r = stitch(&["--blend", blend, "--pixel-size", "0.5", "--ome-tile", "128"], &ome, &d.join("r.json"));
        assert_eq!(r["run"]["written"]["strips"], 1);
        let (levels, xml) = read_levels(&ome);
        assert!(levels.len() > 1 && xml.contains(r#"PhysicalSizeX="0.5""#));
        assert!(levels[0].2 == want, "{blend}: .ome.tif differs from the PNG");
        // Over the budget: strips, written beside the PNG's name.
        let streamed = d.join(format!("{blend}-big.png"));
        let r = stitch(&["--blend", blend, "--max-mem", "1", "--ome-tile", "64"], &streamed, &d.join("r.json"));
        let path = PathBuf::from(r["run"]["output"].as_str().unwrap());
        assert!(path.to_string_lossy().ends_with(&format!("{blend}-big.ome.tif")) && !streamed.exists());
        assert!(r["run"]["written"]["strips"].as_u64().unwrap() > 1, "{r}");
        assert_eq!((r["panorama"]["width"].as_u64().unwrap() as usize, r["panorama"]["height"].as_u64().unwrap() as usize), (levels[0].0, levels[0].1));
        let (levels, _) = read_levels(&path);
        assert!(levels[0].2 == want, "{blend}: streamed strips differ from the PNG");
    }
}

#[test]
fn the_cli_refuses_an_unwritable_ome_tiff() {
    let d = dir("cli-bad");
    std::fs::write(d.join("file"), b"x").unwrap();
    // A tile of 0 once divided the strip height (a panic) on the streamed path of any
    // output; every bad writer option is refused before the run registers anything.
    let bad: [&[&str]; 8] = [
        &["-o", "file/x.ome.tif"],
        &["-o", "x.ome.tif", "--ome-tile", "100"],
        &["-o", "x.ome.tif", "--max-mem", "0"],
        &["-o", "x.ome.tif", "--ome-tile", "0"],
        &["-o", "x.png", "--max-mem", "1", "--ome-tile", "0"],
        &["-o", "x.ome.tif", "--ome-tile", "18446744073709551615"],
        &["-o", "x.ome.tif", "--pixel-size", "NaN"],
        &["-o", "x.ome.tif", "--pixel-size", "-1"],
    ];
    for args in bad {
        let o = common::tessera().current_dir(&d).args(["stitch", "--frames", "4", "--backend", "cpu"]).args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("rror") && !err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A 34 000 x 34 000 f32 image (4.6 GB at full resolution, 6.2 GB with its levels) streamed
/// in strips: BigTIFF chosen by itself, and the last tile of the full level, past 4 GiB in
/// the file, holds its pixels. Run by hand (`--ignored`): it writes 6 GB to the temporary
/// directory and removes it.
#[test]
#[ignore]
fn a_file_past_4_gib_is_bigtiff_and_reads_back() {
    let (w, h, tile) = (34_000usize, 34_000usize, 512usize);
    let path = dir("past4gib").join("huge.ome.tif");
    let value = |x: usize, y: usize| ((x / tile) + (y / tile) * 100) as f32;
    let mut wr = OmeTiffWriter::create(&path, (w, h), PixelKind::F32, &OmeTiffOptions::default()).unwrap();
    assert!(wr.is_bigtiff());
    for y0 in (0..h).step_by(tile) {
        let strip = pattern(w, tile.min(h - y0), |x, y| value(x, y0 + y));
        wr.write_strip(&strip.view().into()).unwrap();
    }
    let summary = wr.finish().unwrap();
    assert!(summary.bigtiff && summary.bytes > 1 << 32);
    let mut dec = Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
    assert_eq!(dec.dimensions().unwrap(), (w as u32, h as u32));
    let n = dec.tile_count().unwrap();
    let last = match dec.read_chunk(n - 1).unwrap() {
        DecodingResult::F32(v) => v,
        _ => panic!("type"),
    };
    // The last tile covers x from 33 792 and y from 33 792: 208 x 208 pixels of value 66 * 100 + 66.
    assert!(last.iter().take(208).all(|&v| v == value(w - 1, h - 1)), "{:?}", &last[..4]);
    let subs = dec.find_tag_unsigned_vec::<u64>(Tag::SubIfd).unwrap().unwrap();
    assert_eq!(subs.len(), summary.levels.len() - 1);
    assert!(subs.iter().all(|&o| o > 1 << 32));
    drop(dec);
    std::fs::remove_file(&path).unwrap();
}

/// A whole-slide size: a 20 000 x 20 000 panorama (five 1000-px tiles at their stage
/// positions, corners and centre, no overlap, so none registers and each keeps its
/// position) written by `tessera stitch --positions` to an OME-TIFF in strips with a peak
/// under 1 GiB (the canvas alone is 381 MiB), every level's size, and the full level read
/// back: each tile where it was put, zero elsewhere.
#[test]
fn a_20000_pixel_panorama_streams_in_under_a_gib() {
    let d = dir("20k");
    let (side, tile) = (20_000usize, 1000usize);
    let at = [(0, 0), (19_000, 0), (0, 19_000), (19_000, 19_000), (9_500, 9_500)];
    let mut csv = String::from("file,x,y\n");
    for (i, &(x, y)) in at.iter().enumerate() {
        let img = pattern(tile, tile, |u, v| ((u * 7 + v * 13 + i * 50) % 251 + 1) as u8);
        tessera::io::save(&img.into(), &d.join(format!("t{i}.pgm"))).unwrap();
        csv.push_str(&format!("t{i}.pgm,{x},{y}\n"));
    }
    std::fs::write(d.join("pos.csv"), csv).unwrap();
    let out = d.join("big.ome.tif");
    let o = common::tessera()
        .current_dir(&d)
        .args(["stitch", "t0.pgm", "t1.pgm", "t2.pgm", "t3.pgm", "t4.pgm", "--positions", "pos.csv", "--max-mem", "256", "--report", "r.json", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    let peak = r["run"]["peak_memory_mib"].as_f64().unwrap();
    println!("20000 x 20000 OME-TIFF: peak {peak} MiB, {} strips, {} s", r["run"]["written"]["strips"], r["run"]["written"]["seconds"]);
    assert!(peak < 1024.0, "peak {peak} MiB");
    assert!(r["run"]["written"]["strips"].as_u64().unwrap() > 1);
    let (levels, _) = read_levels_with(&out, false);
    let sizes: Vec<(usize, usize)> = levels.iter().map(|l| (l.0, l.1)).collect();
    assert_eq!(sizes, [20000, 10000, 5000, 2500, 1250, 625, 313].map(|s| (s, s)));
    let file = std::io::BufReader::new(std::fs::File::open(&out).unwrap());
    let mut dec = Decoder::new(file).unwrap().with_limits(tiff::decoder::Limits::unlimited());
    let DecodingResult::U8(full) = dec.read_image().unwrap() else { panic!("8-bit") };
    for (i, &(x0, y0)) in at.iter().enumerate() {
        for v in (0..tile).step_by(7) {
            for u in (0..tile).step_by(3) {
                assert_eq!(full[(y0 + v) * side + x0 + u], ((u * 7 + v * 13 + i * 50) % 251 + 1) as u8);
            }
        }
    }
    let covered = |x: usize, y: usize| at.iter().any(|&(x0, y0)| x >= x0 && x < x0 + tile && y >= y0 && y < y0 + tile);
    let uncovered_nonzero = (0..side).step_by(37).flat_map(|y| (0..side).step_by(41).map(move |x| (x, y))).filter(|&(x, y)| !covered(x, y) && full[y * side + x] != 0).count();
    assert_eq!(uncovered_nonzero, 0);
    // The file is 540 MB: not left behind.
    drop(dec);
    std::fs::remove_dir_all(&d).unwrap();
}

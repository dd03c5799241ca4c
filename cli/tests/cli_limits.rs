//! The command line's limits and failure behaviour: decoder limits before allocation
//! (decompression bombs), truncated JPEGs said aloud, stacks processed page by page,
//! one bad input among many not stopping the rest, and clear messages for inputs that are
//! not supported.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tessera::filter::{mean_filter, BoxParams};
use tessera::{io, AnyImage, Image, Parallelism};
use common::tessera;

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("tessera-limits", name)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
        }
    }
    !c
}

/// A PNG that claims `w x h` 8-bit gray pixels with a few bytes of data: what a
/// decompression bomb's header looks like to a decoder.
fn bomb_png(path: &Path, w: u32, h: u32) {
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut c = (data.len() as u32).to_be_bytes().to_vec();
        let body = [kind, data].concat();
        c.extend_from_slice(&body);
        c.extend_from_slice(&crc32(&body).to_be_bytes());
        c
    };
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    // zlib stream of a few zero bytes (stored block).
    let idat = [0x78, 0x01, 0x01, 0x04, 0x00, 0xFB, 0xFF, 0, 0, 0, 0, 0, 0x04, 0x00, 0x01];
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &chunk(b"IHDR", &ihdr), &chunk(b"IDAT", &idat), &chunk(b"IEND", &[])].concat();
    std::fs::write(path, png).unwrap();
}

fn sample(seed: usize) -> Image<u8> {
    Image::from_fn(61, 43, |x, y| ((x * 13 + y * 29 + x * y * seed) % 256) as u8).unwrap()
}

#[test]
fn a_decompression_bomb_is_refused_before_allocation() {
    let d = temp_dir("bomb");
    let bomb = d.join("bomb.png");
    bomb_png(&bomb, 20_000, 20_000);
    // Under an address-space limit far below the 400 MB the image would need as 8-bit
    // gray (and the 5 GB `glare` would use), the run ends with a message, not a signal.
    for cmd in ["glare", "mean", "stitch"] {
        let script = format!(
            "ulimit -v 300000; exec \"$0\" {cmd} \"$1\" -o \"$2\" {}",
            if cmd == "glare" { "--mask \"$2.mask.png\"" } else { "" }
        );
        let out = Command::new("sh")
            .args(["-c", &script, env!("CARGO_BIN_EXE_tessera")])
            .arg(&bomb)
            .arg(d.join("out.png"))
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{cmd}: ended by a signal or succeeded: {err}");
        assert!(err.contains("20000 x 20000") && err.contains("--max-pixels"), "{cmd}: {err}");
    }
    // Raising the limit lets the decoder try (and report this file's missing data).
    let out = tessera().args(["mean", "--max-pixels", "400000000"]).arg(&bomb).arg("-o").arg(d.join("o.png")).output().unwrap();
    assert!(!out.status.success() && !stderr(&out).contains("--max-pixels"), "{}", stderr(&out));
}

#[test]
fn a_truncated_jpeg_is_said_aloud() {
    let d = temp_dir("jpeg");
    let whole = d.join("whole.jpg");
    io::save(&AnyImage::U8(sample(3)), &whole).unwrap();
    let bytes = std::fs::read(&whole).unwrap();
    let cut = d.join("cut.jpg");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let ok = tessera().arg("mean").arg(&whole).arg("-o").arg(d.join("a.png")).output().unwrap();
    assert!(ok.status.success() && !stderr(&ok).contains("warning"), "{}", stderr(&ok));
    let out = tessera().arg("mean").arg(&cut).arg("-o").arg(d.join("b.png")).output().unwrap();
    let err = stderr(&out);
    assert!(err.contains("warning") && err.contains("truncated") && err.contains("cut.jpg"), "{err}");
}

#[test]
fn one_bad_input_does_not_stop_the_others() {
    let d = temp_dir("many");
    let (a, b, bad) = (d.join("a.png"), d.join("b.png"), d.join("bad.png"));
    io::save(&AnyImage::U8(sample(1)), &a).unwrap();
    io::save(&AnyImage::U8(sample(2)), &b).unwrap();
    std::fs::write(&bad, b"not an image").unwrap();
    let out_dir = d.join("out");
    let out = tessera().arg("mean").args([&a, &bad, &b]).arg("-o").arg(&out_dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("1 of 3 inputs failed") && err.contains("bad.png"), "{err}");
    for (name, seed) in [("a.png", 1), ("b.png", 2)] {
        let AnyImage::U8(got) = io::load(&out_dir.join(name)).unwrap() else { panic!("8-bit output") };
        let mut want = Image::<u8>::new(61, 43).unwrap();
        mean_filter(sample(seed).view(), want.view_mut(), &BoxParams::default(), Parallelism::Sequential).unwrap();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn every_page_of_a_stack_is_processed() {
    let d = temp_dir("stack");
    let stack = d.join("stack.tif");
    let pages: Vec<AnyImage> = (1..4).map(|s| AnyImage::U8(sample(s))).collect();
    io::write_tiff(&pages, &stack).unwrap();
    let out = d.join("out.tif");
    let o = tessera().arg("mean").arg(&stack).arg("-o").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let got = io::load_stack(&out).unwrap();
    assert_eq!(got.len(), 3);
    for (i, page) in got.iter().enumerate() {
        let mut want = Image::<u8>::new(61, 43).unwrap();
        mean_filter(sample(i + 1).view(), want.view_mut(), &BoxParams::default(), Parallelism::Sequential).unwrap();
        assert_eq!(page, &AnyImage::U8(want), "page {i}");
    }
    // A stack into a single-image format is refused, saying how to get every page.
    let o = tessera().arg("mean").arg(&stack).arg("-o").arg(d.join("out.png")).output().unwrap();
    assert!(!o.status.success() && stderr(&o).contains("stack of 3 pages"), "{}", stderr(&o));
}

#[test]
fn stereo_sizes_are_compared_before_decoding() {
    let d = temp_dir("stereo");
    let bomb = d.join("gt.png");
    bomb_png(&bomb, 20_000, 20_000);
    let cones = common::shared_data().join("stereo/cones");
    // A size mismatch is reported from the headers, before the 400 MB ground truth (or a
    // second image) is decoded: under a 300 MB address-space limit, a message, not a signal.
    for args in [vec!["stereo-eval".into(), cones.join("im2.png"), bomb.clone()], vec!["stereo".into(), cones.join("im2.png"), bomb.clone(), "-o".into(), d.join("d.pfm")]] {
        let out = Command::new("sh").args(["-c", "ulimit -v 300000; exec \"$@\"", "sh", env!("CARGO_BIN_EXE_tessera")]).args(&args).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("sizes differ") && err.contains("20000x20000"), "{args:?}: {err}");
    }
}

/// A 4x2 RGB TIFF stored planar (PlanarConfiguration 2: the red plane, then green, then
/// blue), as tifffile writes a (3, H, W) array.
fn planar_rgb_tiff(path: &Path) {
    let (w, h) = (4u32, 2u32);
    let plane = (w * h) as usize;
    // Header, then the IFD at 8, then BitsPerSample's three values, then the planes.
    let entries: [(u16, u16, u32, u32); 10] = [
        (256, 3, 1, w),              // ImageWidth
        (257, 3, 1, h),              // ImageLength
        (258, 3, 3, 0),              // BitsPerSample, offset patched below
        (259, 3, 1, 1),              // Compression: none
        (262, 3, 1, 2),              // Photometric: RGB
        (273, 4, 3, 0),              // StripOffsets, offset patched below
        (277, 3, 1, 3),              // SamplesPerPixel
        (278, 3, 1, h),              // RowsPerStrip
        (279, 4, 3, 0),              // StripByteCounts, offset patched below
        (284, 3, 1, 2),              // PlanarConfiguration: planar
    ];
    let ifd_len = 2 + entries.len() * 12 + 4;
    let bits_at = 8 + ifd_len as u32;
    let offsets_at = bits_at + 6;
    let counts_at = offsets_at + 12;
    let data_at = counts_at + 12;
    let mut f = b"II*\0".to_vec();
    f.extend_from_slice(&8u32.to_le_bytes());
    f.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    for (tag, kind, count, value) in entries {
        let value = match tag {
            258 => bits_at,
            273 => offsets_at,
            279 => counts_at,
            _ => value,
        };
        f.extend_from_slice(&tag.to_le_bytes());
        f.extend_from_slice(&kind.to_le_bytes());
        f.extend_from_slice(&count.to_le_bytes());
        f.extend_from_slice(&value.to_le_bytes());
    }
    f.extend_from_slice(&0u32.to_le_bytes());
    for _ in 0..3 {
        f.extend_from_slice(&8u16.to_le_bytes());
    }
    for i in 0..3 {
        f.extend_from_slice(&(data_at + i * plane as u32).to_le_bytes());
    }
    for _ in 0..3 {
        f.extend_from_slice(&(plane as u32).to_le_bytes());
    }
    for c in 0..3u8 {
        f.extend(std::iter::repeat_n(40 * (c + 1), plane));
    }
    std::fs::write(path, f).unwrap();
}

#[test]
fn unsupported_or_odd_inputs_get_messages_that_say_what_to_do() {
    let d = temp_dir("messages");
    // A planar RGB TIFF: not "pixel buffer too short", but how to save it.
    let planar = d.join("planar.tif");
    planar_rgb_tiff(&planar);
    let o = tessera().arg("mean").arg(&planar).arg("-o").arg(d.join("p.png")).output().unwrap();
    assert!(!o.status.success() && stderr(&o).contains("planar RGB TIFF") && stderr(&o).contains("interleaved"), "{}", stderr(&o));
    // A window size beyond i64 is reported as given, not as -1.
    let img = d.join("in.png");
    io::save(&AnyImage::U8(sample(1)), &img).unwrap();
    let o = tessera().args(["mean", "-m", "18446744073709551615"]).arg(&img).arg("-o").arg(d.join("m.png")).output().unwrap();
    assert!(!o.status.success() && !stderr(&o).contains("= -1") && stderr(&o).contains("window width"), "{}", stderr(&o));
    // A negative threshold is a value, not an unknown option.
    let frames = d.join("frames");
    let o = tessera().arg("synth-seq").arg(common::shared_data().join("stereo/teddy/im2.png")).arg("-o").arg(&frames).args(["--frames", "3", "--width", "120", "--height", "100"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = tessera().args(["stitch", "--cthresh", "-1"]).arg(&frames).arg("-o").arg(d.join("s.png")).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Stereo tiles below 16x16 are refused at once instead of taking minutes.
    let cones = common::shared_data().join("stereo/cones");
    let o = tessera().args(["stereo", "--tile", "1x1"]).arg(cones.join("im2.png")).arg(cones.join("im6.png")).arg("-o").arg(d.join("t.pfm")).output().unwrap();
    assert!(!o.status.success() && stderr(&o).contains("smallest tile"), "{}", stderr(&o));
}

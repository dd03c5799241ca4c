//! The command line's limits and failure behaviour: decoder limits before allocation
//! (decompression bombs), truncated JPEGs said aloud, stacks processed page by page,
//! one bad input among many not stopping the rest, and clear messages for inputs that are
//! not supported.

use crate::common;

use std::ffi::OsStr;
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

/// `n` tiles `image(i)` saved in `d` as `{prefix}{i}.png`.
fn tiles(d: &Path, prefix: &str, n: usize, image: impl Fn(usize) -> AnyImage) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let f = d.join(format!("{prefix}{i}.png"));
            io::save(&image(i), &f).unwrap();
            f
        })
        .collect()
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

/// `tessera ARGS` under an address-space limit of `kib` KiB (`ulimit -v`), with one malloc
/// arena (the arenas' reservations would make the baseline depend on the core count) and
/// without backtraces (a panic's symbolizer that runs out of memory deadlocks).
fn limited(kib: u64, args: &[std::ffi::OsString]) -> Output {
    Command::new("sh")
        .args(["-c", &format!("ulimit -v {kib}; exec \"$@\""), "sh", env!("CARGO_BIN_EXE_tessera")])
        .args(args)
        .env("MALLOC_ARENA_MAX", "1")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .unwrap()
}

/// The smallest limit, within 8 MiB, under which `args` (on a tiny input) succeeds: the
/// program's own address space (code, threads' stacks) on this machine.
fn baseline_kib(args: &[std::ffi::OsString]) -> u64 {
    let (mut lo, mut hi) = (8 << 10, 1 << 20);
    let o = limited(hi, args);
    assert!(o.status.success(), "{args:?} fails under 1 GiB: {}", stderr(&o));
    while hi - lo > 8 << 10 {
        let mid = (lo + hi) / 2;
        if limited(mid, args).status.success() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

#[test]
fn every_command_ends_with_an_error_when_memory_runs_out() {
    let d = temp_dir("memory");
    let os = |v: &[&dyn AsRef<std::ffi::OsStr>]| v.iter().map(|s| s.as_ref().to_os_string()).collect::<Vec<_>>();
    // 2000 x 1500 (3 megapixels: 12 MiB as RGBA), and a tiny input of each kind for the
    // baseline.
    let (w, h) = (2000, 1500);
    let texture = |x: usize, y: usize| ((x * 7 ^ y * 13) + (x * y) / 97) as u8;
    let gray = Image::from_fn(w, h, texture).unwrap();
    let rgb = Image::from_fn(w, h, |x, y| tessera::Rgba8::new(texture(x, y), texture(y, x), (x + y) as u8, 255)).unwrap();
    let paths = |tag: &str, big: &dyn Fn() -> AnyImage, small: &dyn Fn() -> AnyImage| {
        let (b, s) = (d.join(format!("{tag}.png")), d.join(format!("{tag}-small.png")));
        io::save(&big(), &b).unwrap();
        io::save(&small(), &s).unwrap();
        (b, s)
    };
    let (rgb_big, rgb_small) = paths("rgb", &|| AnyImage::Rgba8(rgb.clone()), &|| AnyImage::Rgba8(rgb.view().crop(0, 0, 96, 80).unwrap().to_image()));
    let (gray_big, gray_small) = paths("gray", &|| AnyImage::U8(gray.clone()), &|| AnyImage::U8(gray.view().crop(0, 0, 96, 80).unwrap().to_image()));
    let positions = d.join("positions.csv");
    std::fs::write(&positions, "0,0,0\n1,10,0\n").unwrap();
    let out = |name: &str| d.join(name);
    // Each command as it is run on an input: every command of `tessera --help` that reads an
    // image (bench reads none).
    let commands: Vec<(&str, Box<dyn Fn(&Path) -> Vec<std::ffi::OsString>>, bool)> = vec![
        ("mean", Box::new(|i: &Path| os(&[&"mean", &i, &"-o", &out("mean.png")])), false),
        ("gauss", Box::new(|i: &Path| os(&[&"gauss", &i, &"-s", &"3", &"-o", &out("gauss.png")])), false),
        ("box", Box::new(|i: &Path| os(&[&"box", &i, &"-o", &out("box.tif")])), true),
        ("variance", Box::new(|i: &Path| os(&[&"variance", &i, &"-o", &out("var.tif")])), false),
        ("contrast", Box::new(|i: &Path| os(&[&"contrast", &i, &"-o", &out("contrast.png")])), false),
        ("glare", Box::new(|i: &Path| os(&[&"glare", &i, &"-o", &out("glare.png"), &"--mask", &out("mask.png")])), false),
        ("stereo", Box::new(|i: &Path| os(&[&"stereo", &i, &i, &"--max-disp", &"16", &"-o", &out("d.pfm")])), false),
        ("stereo-eval", Box::new(|i: &Path| os(&[&"stereo-eval", &i, &i])), true),
        ("stitch", Box::new(|i: &Path| os(&[&"stitch", &"--backend", &"cpu", &i, &i, &"-o", &out("pano.png")])), false),
        ("stitch --grid", Box::new(|i: &Path| os(&[&"stitch", &i, &i, &"--grid", &"2x1", &"-o", &out("grid.png")])), false),
        ("stitch --positions", Box::new(|i: &Path| os(&[&"stitch", &i, &i, &"--positions", &positions, &"-o", &out("pos.png")])), false),
        ("synth-seq", Box::new(|i: &Path| os(&[&"synth-seq", &i, &"-o", &out("seq"), &"--frames", &"2", &"--width", &"64", &"--height", &"48"])), false),
    ];
    let need = (w * h * 4 / 1024) as u64;
    for (name, args, is_gray) in &commands {
        let (big, small) = if *is_gray { (&gray_big, &gray_small) } else { (&rgb_big, &rgb_small) };
        let base = baseline_kib(&args(small));
        // From far too little for the input (its decode) to enough for most commands: each
        // limit stops the run at another allocation, which must be an error.
        let mut failed = 0;
        for k in [1, 4, 12, 32] {
            let o = limited(base + need * k / 4, &args(big));
            let err = stderr(&o);
            assert!(!err.contains("memory allocation of") && !err.contains("panicked"), "{name} under {} KiB: {err}", base + need * k / 4);
            if !o.status.success() {
                assert_eq!(o.status.code(), Some(1), "{name} under {} KiB: ended by a signal: {err}", base + need * k / 4);
                assert!(err.contains("out of memory"), "{name} under {} KiB: {err}", base + need * k / 4);
                failed += 1;
            }
        }
        assert!(failed > 0, "{name}: never short of memory above its baseline of {base} KiB");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// An image read under every limit in steps of 64 KiB, from too little for its file to
/// enough for its pixels: each ends in an error or a result, never an abort. A decoder
/// allocates its own buffers without a check as it reads the header (the PNG decoder's 128
/// KiB stream buffer): that step is probed first, where one limit in some hundred had
/// aborted there.
#[test]
fn reading_an_image_ends_with_an_error_at_every_limit() {
    let d = temp_dir("decode");
    let (w, h) = (2000, 1500);
    let gray = Image::from_fn(w, h, |x, y| ((x * 7 ^ y * 13) + (x * y) / 97) as u8).unwrap();
    let (big, small) = (d.join("big.png"), d.join("small.png"));
    io::save(&AnyImage::U8(gray.clone()), &big).unwrap();
    io::save(&AnyImage::U8(gray.view().crop(0, 0, 96, 80).unwrap().to_image()), &small).unwrap();
    let args = |i: &Path| vec![OsStr::new("box").to_os_string(), i.as_os_str().to_os_string(), OsStr::new("-o").to_os_string(), d.join("box.tif").into_os_string()];
    let base = baseline_kib(&args(&small));
    let file = std::fs::metadata(&big).unwrap().len() / 1024;
    let (mut failed, mut passed) = (0, 0);
    for kib in (base..base + file + 2 * (w * h / 1024) as u64).step_by(64) {
        let o = limited(kib, &args(&big));
        let err = stderr(&o);
        assert!(!err.contains("memory allocation of") && !err.contains("panicked"), "under {kib} KiB: {err}");
        match o.status.code() {
            Some(0) => passed += 1,
            Some(1) => {
                assert!(err.contains("out of memory"), "under {kib} KiB: {err}");
                failed += 1;
            }
            _ => panic!("under {kib} KiB: ended by a signal: {err}"),
        }
    }
    assert!(failed > 10, "{failed} limits short of memory, {passed} enough");
    let _ = std::fs::remove_dir_all(&d);
}

/// `tessera ARGS` with a file size limit of `kib` KiB, as a full disk stops a write: the
/// write fails (SIGXFSZ ignored, as its default action would end the process).
fn size_limited(kib: u64, args: &[&std::ffi::OsStr]) -> Output {
    Command::new("sh")
        .args(["-c", &format!("trap '' XFSZ; ulimit -f {}; exec \"$@\"", kib * 2), "sh", env!("CARGO_BIN_EXE_tessera")])
        .args(args)
        .output()
        .unwrap()
}

/// The names in `dir` that are temporary files of a write.
fn partials(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains(".partial")).collect()
}

#[test]
fn a_failed_write_leaves_the_previous_file_untouched() {
    let d = temp_dir("atomic");
    let input = d.join("in.png");
    io::save(&AnyImage::U8(Image::from_fn(400, 300, |x, y| ((x * 31) ^ (y * 17) ^ (x * y)) as u8).unwrap()), &input).unwrap();
    // PNG, TIFF and OME-TIFF outputs that outgrow a 16 KiB file size limit.
    for name in ["out.png", "out.tif", "out.ome.tif"] {
        let target = d.join(name);
        std::fs::write(&target, b"the previous file").unwrap();
        let o = size_limited(16, &[OsStr::new("mean"), input.as_os_str(), OsStr::new("-o"), target.as_os_str()]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot write"), "{name}: {}", stderr(&o));
        assert_eq!(std::fs::read(&target).unwrap(), b"the previous file", "{name}");
        assert!(partials(&d).is_empty(), "{name}: {:?}", partials(&d));
        // Without the limit, the same run replaces it.
        let o = tessera().arg("mean").arg(&input).arg("-o").arg(&target).output().unwrap();
        assert!(o.status.success() && io::load(&target).unwrap().size() == (400, 300), "{name}: {}", stderr(&o));
    }
    // A stitch whose panorama fits but whose report does not: two frames alike (they
    // register; the panorama is one 160 x 120 frame, under 20 KiB) and a hundred flat ones
    // (skipped), a report of about 70 KiB over a 32 KiB limit. The previous report stays,
    // valid JSON.
    let frames: Vec<PathBuf> = (0..102)
        .map(|i| {
            let f = d.join(format!("frame{i:03}.png"));
            let img = if i < 2 { common::pattern(160, 120) } else { Image::filled(160, 120, 90).unwrap() };
            io::save(&AnyImage::U8(img), &f).unwrap();
            f
        })
        .collect();
    let report = d.join("report.json");
    std::fs::write(&report, b"{\"previous\": true}").unwrap();
    let mut args: Vec<&OsStr> = vec![OsStr::new("stitch"), OsStr::new("--backend"), OsStr::new("cpu")];
    args.extend(frames.iter().map(|f| f.as_os_str()));
    let pano = d.join("pano.png");
    args.extend([OsStr::new("-o"), pano.as_os_str(), OsStr::new("--report"), report.as_os_str()]);
    let o = size_limited(32, &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(pano.exists(), "{}", stderr(&o));
    let kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(kept, serde_json::json!({"previous": true}));
    assert!(partials(&d).is_empty(), "{:?}", partials(&d));
}

#[test]
fn an_outsized_panorama_is_refused_before_anything_is_written() {
    let d = temp_dir("outsized");
    let tiles = tiles(&d, "tile", 3, |i| AnyImage::U16(Image::from_fn(100, 80, |x, y| ((x * 13 + y * 29 + i * 7) % 4096) as u16).unwrap()));
    let csv = d.join("positions.csv");
    // One line of the file far from the others: 200 000 pixels off, a 40-gigapixel canvas.
    std::fs::write(&csv, "file,x,y\ntile0,0,0\ntile1,90,0\ntile2,200000,200000\n").unwrap();
    let out = d.join("mosaic.ome.tif");
    let t = std::time::Instant::now();
    let o = tessera().arg("stitch").args(&tiles).arg("--positions").arg(&csv).arg("-o").arg(&out).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--max-output-pixels") && err.contains("frame 2") && err.contains("tile2.png") && err.contains("200000"), "{err}");
    assert!(t.elapsed().as_secs() < 30 && !out.exists() && partials(&d).is_empty(), "{err}");
    // Raised past it, the 16-bit canvas of 1.6 TB is refused for the free space it needs.
    std::fs::write(&csv, "tile0,0,0\ntile1,90,0\ntile2,900000,900000\n").unwrap();
    let o = tessera().arg("stitch").args(&tiles).arg("--positions").arg(&csv).args(["--max-output-pixels", "1000000000000"]).arg("-o").arg(&out).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("MiB free") && err.contains("mosaic.ome.tif"), "{err}");
    assert!(!out.exists() && partials(&d).is_empty(), "{err}");
}

#[test]
fn positions_grids_and_live_inputs_get_precise_messages() {
    let d = temp_dir("inputs");
    let tiles = tiles(&d, "t", 2, |i| AnyImage::U8(sample(i + 1)));
    let run = |extra: &[&str]| {
        let o = tessera().arg("stitch").args(&tiles).args(extra).arg("-o").arg(d.join("m.png")).output().unwrap();
        assert_eq!(o.status.code(), Some(1));
        stderr(&o)
    };
    // NaN on the first line is a value, not a header.
    let csv = d.join("nan.csv");
    std::fs::write(&csv, "0,NaN,0\n1,50,0\n").unwrap();
    let err = run(&["--positions", csv.to_str().unwrap()]);
    assert!(err.contains("nan.csv line 1") && err.contains("NaN") && !err.contains("positions, but"), "{err}");
    std::fs::write(&csv, "0,0,0\n1,50,inf\n").unwrap();
    let err = run(&["--positions", csv.to_str().unwrap()]);
    assert!(err.contains("line 2") && err.contains("inf"), "{err}");
    // A grid whose tile count overflows.
    let err = run(&["--grid", "18446744073709551615x2"]);
    assert!(err.contains("more than any tile count"), "{err}");
    // --follow on a file.
    let o = tessera().args(["stitch", "--follow"]).arg(&csv).arg("-o").arg(d.join("m.png")).output().unwrap();
    assert!(!o.status.success() && stderr(&o).contains("not a directory"), "{}", stderr(&o));
}

//! Tile grids through the command line (`tessera stitch --grid`, `--positions`): a 3 x 3
//! grid cut from a real photograph at stage positions off by up to 5 % of a tile each,
//! with a blank tile, stitched from a grid and from a positions file (the library's grids:
//! `tests/grid.rs`).

use crate::common;
use crate::repo;

use common::footage::{layout, render, Conditions, TILE};
use common::{temp_dir, tessera};
use repo::photo;
use serde_json::Value;
use tessera::{AnyImage, Image};

fn report(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Writes `tiles` as `tile_NN.png` into `d/tiles` and stitches them as a 3 x 3 snake-row
/// grid overlapping by 25 % into `d/mosaic.png`; returns the tile folder and the report.
fn stitch_grid(tiles: &[AnyImage], d: &std::path::Path) -> (std::path::PathBuf, Value) {
    let dir = d.join("tiles");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, t) in tiles.iter().enumerate() {
        tessera::io::save(t, &dir.join(format!("tile_{i:02}.png"))).unwrap();
    }
    let rep = d.join("grid.json");
    let o = tessera()
        .arg("stitch")
        .arg(&dir)
        .args(["--grid", "3x3", "--overlap", "25", "--order", "snake-row", "--backend", "cpu", "-o"])
        .arg(d.join("mosaic.png"))
        .arg("--report")
        .arg(&rep)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (dir, report(&rep))
}

#[test]
fn the_command_line_stitches_a_grid_and_a_positions_file() {
    let src = photo("gravel");
    let (nominal, truth) = layout(4, 30.0);
    let mut tiles: Vec<AnyImage> = render(&src, &truth, TILE, &Conditions::default(), 8).into_iter().map(AnyImage::U8).collect();
    tiles[4] = AnyImage::U8(Image::filled(TILE.0, TILE.1, 90).unwrap());
    let d = temp_dir("tessera-grid", "cli");
    let (dir, r) = stitch_grid(&tiles, &d);
    let frames = r["frames"].as_array().unwrap();
    assert_eq!((frames.len(), r["pairs"].as_array().unwrap().len()), (9, 12));
    for f in frames {
        let i = f["index"].as_u64().unwrap() as usize;
        let (x, y) = (f["x"].as_f64().unwrap(), f["y"].as_f64().unwrap());
        if i == 4 {
            // The blank centre tile: where the stage puts it (relative to where it puts the
            // others: within the stage's error of the truth), flagged.
            assert_eq!(f["status"], "nominal", "{f}");
            let t = (truth[4].0 - truth[0].0, truth[4].1 - truth[0].1);
            assert!((x - t.0).abs() <= 0.1 * TILE.0 as f64 && (y - t.1).abs() <= 0.1 * TILE.1 as f64, "{f} vs {t:?} (nominal {:?})", (nominal[4].0 - nominal[0].0, nominal[4].1 - nominal[0].1));
        } else {
            assert_eq!(f["status"], "ok", "{f}");
            let t = (truth[i].0 - truth[0].0, truth[i].1 - truth[0].1);
            assert!((x - t.0).hypot(y - t.1) < 0.5, "{f} vs {t:?}");
        }
    }
    assert!(r["pairs"].as_array().unwrap().iter().all(|q| (q["b"] == 4 || q["a"] == 4) == (q["status"] == "rejected")), "{}", r["pairs"]);
    let mosaic = tessera::io::load(&d.join("mosaic.png")).unwrap();
    assert_eq!(mosaic.size().0 as u64, r["panorama"]["width"].as_u64().unwrap());

    // The same layout as stage positions in micrometres (0.5 um per pixel).
    let csv = d.join("stage.csv");
    let lines: Vec<String> = nominal.iter().enumerate().map(|(i, q)| format!("tile_{i:02}.png,{},{}", q.0 * 0.5, q.1 * 0.5)).collect();
    std::fs::write(&csv, format!("file,x_um,y_um\n{}\n", lines.join("\n"))).unwrap();
    let rep2 = d.join("positions.json");
    let o = tessera().arg("stitch").arg(&dir).arg("--positions").arg(&csv).args(["--pixel-size", "0.5", "-o"]).arg(d.join("m2.png")).arg("--report").arg(&rep2).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r2 = report(&rep2);
    for (f, g) in frames.iter().zip(r2["frames"].as_array().unwrap()) {
        assert_eq!((&f["x"], &f["y"], &f["status"]), (&g["x"], &g["y"], &g["status"]));
    }
    // Bad input: a grid of the wrong size, a malformed grid, both modes at once.
    for args in [vec!["--grid", "4x3"], vec!["--grid", "3by3"], vec!["--grid", "0x3"]] {
        let o = tessera().arg("stitch").arg(&dir).args(&args).arg("-o").arg(d.join("x.png")).output().unwrap();
        assert!(!o.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("--grid"), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = tessera().arg("stitch").arg(&dir).args(["--grid", "3x3", "--positions"]).arg(&csv).arg("-o").arg(d.join("x.png")).output().unwrap();
    assert!(!o.status.success());
    let _ = std::fs::remove_dir_all(&d);
}

/// A 100 x 100 first tile among 180 x 150 tiles: left out with its reason, every other tile
/// registered and composited (the odd first tile once set the grid's size and type, and
/// the mosaic was that tile alone).
#[test]
fn an_odd_first_tile_is_left_out_not_the_grid() {
    let src = photo("gravel");
    let (_, truth) = layout(4, 30.0);
    let mut tiles: Vec<AnyImage> = render(&src, &truth, TILE, &Conditions::default(), 8).into_iter().map(AnyImage::U8).collect();
    tiles[0] = AnyImage::U8(Image::filled(100, 100, 90).unwrap());
    let d = temp_dir("tessera-grid", "odd-first");
    let (_, r) = stitch_grid(&tiles, &d);
    let frames = r["frames"].as_array().unwrap();
    assert_ne!(frames[0]["status"], "ok", "{}", frames[0]);
    assert!(frames[0].to_string().contains("100x100"), "{}", frames[0]);
    for f in &frames[1..] {
        assert_eq!(f["status"], "ok", "{f}");
    }
    let mosaic = tessera::io::load(&d.join("mosaic.png")).unwrap();
    assert!(mosaic.size().0 > 2 * TILE.0 && mosaic.size().1 > 2 * TILE.1, "{:?}", mosaic.size());
    let _ = std::fs::remove_dir_all(&d);
}

/// A Fiji tile configuration in, Fiji's registered configuration out: the grid's tiles named
/// by a `TileConfiguration.txt` whose overlap is wrong (0 % where it is 25 %), stitched with
/// `--tile-config`; `TileConfiguration.registered.txt` beside the report holds the report's
/// positions, and read back as the nominal positions it gives them again. A bad file is an
/// error naming its line.
#[test]
fn a_fiji_tile_configuration_round_trips() {
    let src = photo("gravel");
    let (_, truth) = layout(4, 30.0);
    let tiles: Vec<AnyImage> = render(&src, &truth, TILE, &Conditions::default(), 8).into_iter().map(AnyImage::U8).collect();
    let d = temp_dir("tessera-grid", "fiji");
    let dir = d.join("tiles");
    std::fs::create_dir_all(&dir).unwrap();
    let mut cfg = String::from("# Define the number of dimensions we are working on\ndim = 2\n\n# Define the image coordinates\n");
    // Snake-row order (the layout's), at the positions of touching tiles.
    for (i, t) in tiles.iter().enumerate() {
        tessera::io::save(t, &dir.join(format!("tile_{i:02}.png"))).unwrap();
        let (r, c) = (i / 3, if (i / 3) % 2 == 0 { i % 3 } else { 2 - i % 3 });
        cfg.push_str(&format!("tile_{i:02}.png; ; ({}.0, {}.0)\n", c * TILE.0, r * TILE.1));
    }
    let config = dir.join("TileConfiguration.txt");
    std::fs::write(&config, &cfg).unwrap();
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let run = |config: &std::path::Path, tag: &str| {
        let rep = out.join(format!("{tag}.json"));
        let o = tessera().arg("stitch").arg("--tile-config").arg(config).args(["--backend", "cpu", "-o"]).arg(out.join(format!("{tag}.png"))).arg("--report").arg(&rep).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (report(&rep), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (r, stderr) = run(&config, "first");
    assert!(stderr.contains("stage model: overlap 2") && stderr.contains("the stage's offsets corrected"), "{stderr}");
    let model = &r["stage_model"];
    for key in ["overlap_x_percent", "overlap_y_percent"] {
        assert!((model[key].as_f64().unwrap() - 25.0).abs() < 3.0, "{model}");
    }
    assert_eq!(r["components"].as_array().unwrap().len(), 1, "{}", r["components"]);
    let frames = r["frames"].as_array().unwrap();
    for f in frames {
        let i = f["index"].as_u64().unwrap() as usize;
        assert_eq!((&f["status"], &f["component"]), (&Value::from("ok"), &Value::from(0)), "{f}");
        let t = (truth[i].0 - truth[0].0, truth[i].1 - truth[0].1);
        assert!((f["x"].as_f64().unwrap() - t.0).hypot(f["y"].as_f64().unwrap() - t.1) < 0.5, "{f} vs {t:?}");
    }
    let registered = out.join("TileConfiguration.registered.txt");
    let back = tessera::tile_config::read(&registered).unwrap();
    assert_eq!(back.len(), 9);
    for ((file, q), f) in back.iter().zip(frames) {
        assert!(file.ends_with(f["file"].as_str().unwrap().rsplit('/').next().unwrap()) && file.exists(), "{}", file.display());
        assert!((q.0 - f["x"].as_f64().unwrap()).abs() < 1e-3 && (q.1 - f["y"].as_f64().unwrap()).abs() < 1e-3, "{q:?} vs {f}");
    }
    // The registered configuration as the nominal one: the same positions.
    let (again, _) = run(&registered, "again");
    for (f, g) in frames.iter().zip(again["frames"].as_array().unwrap()) {
        assert!((f["x"].as_f64().unwrap() - g["x"].as_f64().unwrap()).hypot(f["y"].as_f64().unwrap() - g["y"].as_f64().unwrap()) < 0.05, "{f} vs {g}");
    }
    // A bad line: the error names the file and the line.
    std::fs::write(&config, cfg.replace("tile_04.png; ; (", "tile_04.png; (")).unwrap();
    let o = tessera().arg("stitch").arg("--tile-config").arg(&config).arg("-o").arg(out.join("x.png")).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("TileConfiguration.txt line 9: expected `FILE; ; (X, Y)`"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `--flatfield estimate` on a 3 x 3 grid of gravel under 30 % vignetting: the report says
/// shading was corrected, how strong the vignetting was and the seams' step before and
/// after; `--flatfield-out` writes the flat field, which `--flatfield FILE` takes back; bad
/// fields and flags are clear errors.
#[test]
fn the_command_line_corrects_shading_and_refuses_bad_fields() {
    let src = photo("gravel");
    let (_, truth) = layout(4, 30.0);
    let tiles: Vec<AnyImage> = render(&src, &truth, TILE, &Conditions { vignetting: 0.3, ..Conditions::default() }, 8).into_iter().map(AnyImage::U8).collect();
    let d = temp_dir("tessera-grid", "flatfield");
    let dir = d.join("tiles");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, t) in tiles.iter().enumerate() {
        tessera::io::save(t, &dir.join(format!("tile_{i:02}.png"))).unwrap();
    }
    let run = |extra: &[&str]| {
        tessera()
            .arg("stitch")
            .arg(&dir)
            .args(["--grid", "3x3", "--overlap", "25", "--order", "snake-row", "--backend", "cpu", "-o"])
            .arg(d.join("mosaic.png"))
            .arg("--report")
            .arg(d.join("grid.json"))
            .args(extra)
            .output()
            .unwrap()
    };
    let flat = d.join("flat.tif");
    let o = run(&["--flatfield", "estimate", "--flatfield-out", flat.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report(&d.join("grid.json"));
    let s = &r["shading"];
    assert_eq!((s["corrected"].as_bool(), s["flatfield"].as_str()), (Some(true), Some("estimate")), "{s}");
    assert_eq!(s["estimate"]["tiles_used"], 9);
    let v = s["vignetting_percent"].as_f64().unwrap();
    assert!((20.0..40.0).contains(&v), "{s}");
    let (before, after) = (s["seam_step_before"].as_f64().unwrap(), s["seam_step_after"].as_f64().unwrap());
    assert!(after < before, "{s}");
    assert!(r["frames"].as_array().unwrap().iter().all(|f| f["status"] == "ok"));
    assert!(matches!(tessera::io::load(&flat).unwrap(), AnyImage::F32(ref f) if f.size() == TILE));
    // Given back as a file.
    let o = run(&["--flatfield", flat.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report(&d.join("grid.json"));
    assert_eq!(r["shading"]["flatfield"].as_str(), flat.to_str());
    // Without it: "corrected": false.
    let o = run(&[]);
    assert!(o.status.success());
    assert_eq!(report(&d.join("grid.json"))["shading"]["corrected"], false);
    // Bad fields and flags.
    let small = d.join("small.tif");
    tessera::io::save(&AnyImage::F32(Image::filled(40, 30, 1.0).unwrap()), &small).unwrap();
    let zero = d.join("zero.tif");
    tessera::io::save(&AnyImage::F32(Image::from_fn(TILE.0, TILE.1, |x, y| if (x, y) == (7, 2) { 0.0 } else { 1.0 }).unwrap()), &zero).unwrap();
    let nan = d.join("nan.tif");
    tessera::io::save(&AnyImage::F32(Image::from_fn(TILE.0, TILE.1, |x, y| if (x, y) == (1, 1) { f32::NAN } else { 1.0 }).unwrap()), &nan).unwrap();
    for (args, want) in [
        (vec!["--flatfield", small.to_str().unwrap()], "it is 40x30, the tiles 180x150"),
        (vec!["--flatfield", zero.to_str().unwrap()], "pixel (7, 2) is 0"),
        (vec!["--flatfield", nan.to_str().unwrap()], "pixel (1, 1) is NaN"),
        (vec!["--flatfield", "no-such-flat.tif"], "no such file"),
        (vec!["--darkfield", "estimate"], "--flatfield"),
        (vec!["--flatfield", flat.to_str().unwrap(), "--darkfield", "estimate"], "needs --flatfield estimate"),
        (vec!["--flatfield", "estimate", "--flatfield-out", "flat.png"], "32-bit float TIFF"),
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&d).ok();
}

/// The top-level planes of the OME-TIFF at `path` (full resolution, grey u8) and its XML.
fn planes(path: &std::path::Path) -> (Vec<Vec<u8>>, (usize, usize), String) {
    use tiff::decoder::{Decoder, DecodingResult};
    let mut d = Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap())).unwrap();
    let xml = d.get_tag_ascii_string(tiff::tags::Tag::ImageDescription).unwrap();
    let size = d.dimensions().unwrap();
    let mut out = Vec::new();
    loop {
        match d.read_image().unwrap() {
            DecodingResult::U8(v) => out.push(v),
            other => panic!("not u8: {:?}", std::mem::discriminant(&other)),
        }
        if !d.more_images() {
            break;
        }
        d.next_image().unwrap();
    }
    (out, (size.0 as usize, size.1 as usize), xml)
}

/// A 3 x 3 grid in two channels (two photographs seen through the same stage positions)
/// at two time points (the stage off by other errors the second time): each time point
/// registered on channel 1 and brought onto the first, every channel placed with it, all
/// four planes in one OME-TIFF whose channels and time points line up; then the second
/// time point placed where the first registered (`--reuse-positions`); and bad input.
#[test]
fn channels_and_time_points_are_planes_of_one_ome_tiff() {
    let (first, second) = (photo("gravel"), photo("grass"));
    let (_, truth0) = layout(4, 30.0);
    let (_, truth1) = layout(11, 30.0);
    let d = temp_dir("tessera-grid", "planes");
    let dir = d.join("tiles");
    std::fs::create_dir_all(&dir).unwrap();
    let mut k = 0;
    for (t, truth) in [&truth0, &truth1].into_iter().enumerate() {
        for src in [&first, &second] {
            for tile in render(src, truth, TILE, &Conditions::default(), 8 + t as u64) {
                tessera::io::save(&AnyImage::U8(tile), &dir.join(format!("tile_{k:02}.png"))).unwrap();
                k += 1;
            }
        }
    }
    let run = |extra: &[&str], out: &str| {
        let (o, rep) = (d.join(out), d.join(format!("{out}.json")));
        let done = tessera().arg("stitch").arg(&dir).args(["--grid", "3x3", "--overlap", "25", "--order", "snake-row", "--backend", "cpu"]).args(extra).arg("-o").arg(&o).arg("--report").arg(&rep).output().unwrap();
        (done, o, rep)
    };
    let (done, out, rep) = run(&["--channels", "2", "--time-points", "2", "--register-channel", "1"], "planes.ome.tif");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let r = report(&rep);
    assert_eq!((r["planes"]["channels"].as_u64(), r["planes"]["time_points"].as_u64()), (Some(2), Some(2)));
    // Time point 1 brought onto time point 0 by its tile 0's offset.
    let offset = &r["time_points"][1]["offset_to_time_point_0"];
    let want = (truth1[0].0 - truth0[0].0, truth1[0].1 - truth0[0].1);
    assert!((offset[0].as_f64().unwrap() - want.0).hypot(offset[1].as_f64().unwrap() - want.1) < 0.2, "{offset} vs {want:?}");
    for t in 0..2 {
        assert!(r["time_points"][t]["frames"].as_array().unwrap().iter().all(|f| f["status"] == "ok"), "{}", r["time_points"][t]);
    }
    let (p, (w, h), xml) = planes(&out);
    assert_eq!(p.len(), 4);
    assert!(xml.contains(r#"SizeC="2""#) && xml.contains(r#"SizeT="2""#), "{xml}");
    // Where both time points cover the canvas a channel shows the same scene: the planes
    // differ by the noise and the tiles' rounding to whole pixels, far less than by a
    // misplacement of two pixels; the two channels show different photographs.
    let mean_diff = |a: &[u8], b: &[u8], dx: usize| {
        let both: Vec<f64> = (0..h).flat_map(|y| (0..w - dx).map(move |x| (y * w + x, y * w + x + dx))).map(|(i, j)| (a[i], b[j])).filter(|(x, y)| *x > 0 && *y > 0).map(|(x, y)| (x as f64 - y as f64).abs()).collect();
        assert!(both.len() > w * h / 2, "{} of {} pixels covered by both", both.len(), w * h);
        both.iter().sum::<f64>() / both.len() as f64
    };
    for c in 0..2 {
        let (same, moved) = (mean_diff(&p[c], &p[2 + c], 0), mean_diff(&p[c], &p[2 + c], 2));
        assert!(same < moved / 2.0, "channel {c}: {same} grey levels between time points, {moved} two pixels apart");
    }
    assert!(mean_diff(&p[0], &p[1], 0) > 2.0 * mean_diff(&p[0], &p[2], 0));

    // The stage revisits the first time point's positions.
    let (done, _, rep) = run(&["--channels", "2", "--time-points", "2", "--reuse-positions"], "reused.ome.tif");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let r = report(&rep);
    assert_eq!((r["time_points"][0]["registered"].as_bool(), r["time_points"][1]["registered"].as_bool()), (Some(true), Some(false)));

    // Bad input: blocks that do not divide the inputs, a channel beyond them, reuse without
    // time points, planes outside an OME-TIFF or outside grid mode.
    for (args, out, says) in [
        (vec!["--channels", "5"], "bad.ome.tif", "channels"),
        (vec!["--channels", "2", "--time-points", "2", "--register-channel", "2"], "bad.ome.tif", "--register-channel"),
        (vec!["--channels", "4", "--reuse-positions"], "bad.ome.tif", "--time-points"),
        (vec!["--channels", "4"], "bad.png", "OME-TIFF"),
    ] {
        let (done, _, _) = run(&args, out);
        assert!(!done.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&done.stderr).contains(says), "{args:?}: {}", String::from_utf8_lossy(&done.stderr));
    }
    let o = tessera().arg("stitch").arg(&dir).args(["--channels", "2", "-o"]).arg(d.join("seq.png")).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("tile grids"));

    // The same tiles named by their time point, row, column and channel (numbered from 1,
    // as microscopes write them): the pattern alone gives the grid, the channels and the
    // time points, and the mosaic is the blocks-of-files one.
    let named = d.join("named");
    std::fs::create_dir_all(&named).unwrap();
    for k in 0..36 {
        let (block, tile) = (k / 9, k % 9);
        let (t, c) = (block / 2, block % 2);
        let (row, col) = (tile / 3, if (tile / 3) % 2 == 1 { 2 - tile % 3 } else { tile % 3 });
        std::fs::copy(dir.join(format!("tile_{k:02}.png")), named.join(format!("scan_t{}_r{row}_c{col}_w{}{}.png", t + 1, c + 1, ["DAPI", "GFP"][c]))).unwrap();
    }
    let pattern = named.join("scan_t{t}_r{y}_c{x}_w{c}*.png");
    let by_name = |extra: &[&str], out: &str| tessera().arg("stitch").arg(&pattern).args(["--overlap", "25", "--register-channel", "1", "--backend", "cpu"]).args(extra).arg("-o").arg(d.join(out)).output().unwrap();
    let done = by_name(&[], "named.ome.tif");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let (q, size, xml) = planes(&d.join("named.ome.tif"));
    assert!(xml.contains(r#"SizeC="2""#) && xml.contains(r#"SizeT="2""#), "{xml}");
    // Placed as the blocks of files are (the tiles paste in another order: where tiles
    // overlap, the planes differ by the noise, not by a misplacement).
    assert_eq!((q.len(), size), (4, (w, h)));
    for k in 0..4 {
        let (same, moved) = (mean_diff(&p[k], &q[k], 0), mean_diff(&p[k], &q[k], 2));
        assert!(same < moved / 4.0, "plane {k}: {same} grey levels apart, {moved} two pixels apart");
    }
    for (extra, says) in [(vec!["--channels", "3"], "the file names give 2"), (vec!["--order", "snake-row"], "does not apply"), (vec!["--grid", "9x1"], "the file names give 3x3")] {
        let done = by_name(&extra, "bad.ome.tif");
        assert!(!done.status.success() && String::from_utf8_lossy(&done.stderr).contains(says), "{extra:?}: {}", String::from_utf8_lossy(&done.stderr));
    }
    let _ = std::fs::remove_dir_all(&d);
}

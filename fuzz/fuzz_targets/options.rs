//! The faces' option values into parameters (`tessera::options`): arbitrary numbers (zero,
//! negative, huge, NaN and infinities) in every field of the stitching and stereo options,
//! converted and validated; arbitrary text as a `--grid` value and as a positions CSV (with
//! an arbitrary pixel size). Each is a value or an error, never a panic; a positions file
//! that parses gives finite positions only.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tessera::options::{parse_grid, parse_positions, parse_wxh, RegisterOptions, StereoOptions, StitchOptions};
use tessera::stereo::CostKind;
use tessera::stitch::{Acceptance, Blend, Motion, SearchMethod};
use tessera_fuzz::Bytes;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    // A number of any size: small, a boundary, or any 64 bits.
    let count = |b: &mut Bytes<'_>| match b.u8() % 4 {
        0 => b.range(0, 80),
        1 => [0, 1, usize::MAX, usize::MAX / 2 + 1, 1 << 32][b.range(0, 4)],
        _ => u64::from_le_bytes([b.u8(), b.u8(), b.u8(), b.u8(), b.u8(), b.u8(), b.u8(), b.u8()]) as usize,
    };
    let float = |b: &mut Bytes<'_>| match b.u8() % 4 {
        0 => f64::from_bits(u64::from_le_bytes([b.u8(), b.u8(), b.u8(), b.u8(), b.u8(), b.u8(), b.u8(), b.u8()])),
        _ => b.param(-2.0, 2.0) as f64,
    };
    let register = RegisterOptions {
        rsz: count(&mut b),
        accept: [Acceptance::Adaptive, Acceptance::Fixed][b.range(0, 1)],
        cthresh: float(&mut b),
        null_margin: float(&mut b),
        min_coefficient: float(&mut b),
        npts: count(&mut b),
        search_radius: count(&mut b),
        min_variance: b.bool().then(|| float(&mut b)),
        method: [SearchMethod::Log, SearchMethod::LogPlain, SearchMethod::Exhaustive][b.range(0, 2)],
        no_refine: b.bool(),
        motion: [Motion::Translation, Motion::Similarity][b.range(0, 1)],
        fit_scale: b.bool(),
        max_turn: float(&mut b),
    };
    let stitch = StitchOptions {
        register,
        blend: [Blend::Overwrite, Blend::Average, Blend::Feather][b.range(0, 2)],
        keyframe_shift: float(&mut b),
        no_quality: b.bool(),
        coarse: count(&mut b),
        no_grow: b.bool(),
        no_close_loops: b.bool(),
        no_whole_overlap: b.bool(),
        refine_every_pair: b.bool(),
        no_detect_zoom: b.bool(),
    };
    let _ = stitch.params();
    let text = |b: &mut Bytes<'_>| {
        let n = b.range(0, 24);
        String::from_utf8_lossy(&(0..n).map(|_| b"0123456789xX.-+e, NaNinf"[b.range(0, 23)]).collect::<Vec<u8>>()).into_owned()
    };
    let stereo = StereoOptions {
        max_disp: count(&mut b),
        cost: [CostKind::Census, CostKind::Ad, CostKind::Mi][b.range(0, 2)],
        census_window: text(&mut b),
        mi_iterations: count(&mut b),
        mi_levels: count(&mut b),
        paths: count(&mut b),
        p1: b.bool().then(|| b.u16()),
        p2: b.bool().then(|| b.u16()),
        fixed_p2: b.bool(),
        uniqueness: b.u8(),
        subpixel: b.bool(),
        lr_check: b.bool(),
        median: b.bool(),
        fill: b.bool(),
        tile: b.bool().then(|| text(&mut b)),
        overlap: count(&mut b),
        max_mem: count(&mut b),
    };
    if let Ok(p) = stereo.params() {
        let _ = p.validate(b.range(1, 4096));
    }
    let _ = parse_wxh(&text(&mut b), "tile");
    if let Ok((cols, rows)) = parse_grid(&text(&mut b)) {
        assert!(cols > 0 && rows > 0 && cols.checked_mul(rows).is_some());
    }
    // The rest of the bytes as a positions file.
    let pixel_size = b.bool().then(|| float(&mut b));
    let csv = String::from_utf8_lossy(b.0);
    if let Ok(positions) = parse_positions(&csv, pixel_size, "fuzz.csv") {
        assert!(positions.iter().all(|p| p.0.is_finite() && p.1.is_finite()));
    }
});

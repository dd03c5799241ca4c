//! Semi-global matching with a random small pair and random parameters: every cost, path
//! set, penalty, tiling and post-processing switch. Errors are fine; nothing may panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tessera::stereo::{Cost, Paths, StereoParams, Tiling};
use tessera::{Backend, CpuBackend, Image, Parallelism};
use tessera_fuzz::Bytes;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let be = CpuBackend::new(Parallelism::Sequential);
    // u8 gray or RGBA (kinds 0 and 3), now and then a type stereo refuses.
    let kind = [0, 3, 0, 3, 1, 2][b.range(0, 5)];
    let (w, h) = (b.range(1, 48), b.range(1, 40));
    let (left, right) = (b.image(kind, w, h), b.image(kind, w, h));
    let cost = match b.u8() % 4 {
        0 => Cost::Ad,
        1 => Cost::Mi { iterations: b.range(0, 4), levels: b.range(0, 4) },
        _ => Cost::Census { width: b.range(0, 11), height: b.range(0, 9) },
    };
    let tiling = if b.bool() {
        Tiling::Auto { max_bytes: b.u16() as usize * b.range(1, 200), overlap: b.range(0, 40) }
    } else {
        Tiling::Tiles { width: b.range(0, 64), height: b.range(0, 64), overlap: b.range(0, 40) }
    };
    let p = StereoParams {
        max_disparity: b.range(0, 70),
        cost,
        paths: Paths::from_count([4, 5, 8, 16, 3][b.range(0, 4)]).unwrap_or(Paths::Eight),
        p1: if b.bool() { Some(b.u16()) } else { None },
        p2: if b.bool() { Some(b.u16()) } else { None },
        adaptive_p2: b.bool(),
        uniqueness: b.u8(),
        subpixel: b.bool(),
        lr_check: b.bool(),
        lr_max_diff: b.u16() % 5,
        median: b.bool(),
        fill: b.bool(),
        tiling,
    };
    let mut disp = Image::<f32>::new(w, h).unwrap();
    let _ = be.stereo_sgm(left.view().unwrap(), right.view().unwrap(), disp.view_mut(), &p);
});

//! Registration and stitching on mutated frames: a few small frames made from the bytes
//! (mostly one type and size, sometimes another, NaN and infinities in float frames), a
//! random prediction and parameters; `register_pair` and `stitch` through the CPU backend.
//! A frame that cannot be registered is skipped; nothing may panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::ops::ControlFlow;
use tessera::stitch::{Acceptance, Blend, InMemory, RegisterParams, SearchMethod, StitchParams};
use tessera::{AnyView, Backend, CpuBackend, Parallelism};
use tessera_fuzz::Bytes;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let be = CpuBackend::new(Parallelism::Sequential);
    let kind = b.u8();
    let (w, h) = (b.range(1, 64), b.range(1, 64));
    let frames: Vec<_> = (0..b.range(1, 5))
        .map(|_| {
            // One frame in eight of another type or size.
            if b.u8() % 8 == 0 {
                let k = b.u8();
                let (fw, fh) = (b.range(1, 64), b.range(1, 64));
                b.image(k, fw, fh)
            } else {
                b.image(kind, w, h)
            }
        })
        .collect();
    let views: Vec<AnyView<'_>> = frames.iter().map(|f| f.view().expect("an input type")).collect();
    let register = RegisterParams {
        rsz: b.range(0, 70),
        npts: b.range(0, 10),
        cthresh: b.param(-1.5, 1.5) as f64,
        search_radius: b.range(0, 80),
        min_variance: b.param(0.0, 20.0) as f64,
        method: [SearchMethod::Log, SearchMethod::LogPlain, SearchMethod::Exhaustive][b.range(0, 2)],
        acceptance: [Acceptance::Adaptive, Acceptance::Fixed][b.range(0, 1)],
        null_margin: b.param(-0.5, 2.5) as f64,
        min_coefficient: b.param(-1.5, 1.5) as f64,
        refine: b.bool(),
        ..Default::default()
    };
    let prediction = (b.param(-40.0, 40.0) as f64, b.param(-40.0, 40.0) as f64);
    if views.len() >= 2 {
        let _ = be.register_pair(views[0], views[1], &register, prediction);
    }
    let p = StitchParams {
        register,
        blend: [Blend::Overwrite, Blend::Average, Blend::Feather][b.range(0, 2)],
        keyframe_shift: b.param(0.0, 0.8) as f64,
        quality: b.bool(),
        coarse_candidates: b.range(0, 9),
        grow_templates: b.bool(),
        close_loops: b.bool(),
        whole_overlap: b.bool(),
        refine_every_pair: b.bool(),
        detect_zoom: b.bool(),
    };
    let _ = be.stitch(&InMemory(&views), &p, &mut |_| ControlFlow::Continue(()));
});

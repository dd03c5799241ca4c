//! Checksums of every Backend operation's output, on every pixel type it accepts, over
//! the real data in `../shared/data`: the proof that a refactoring changed no result.
//! Run before and after, on the same machine, and compare:
//!
//! ```sh
//! cargo run --release --example checksums > before.txt   # ... change ...
//! cargo run --release --example checksums > after.txt && diff before.txt after.txt
//! ```
//!
//! Float outputs depend on the SIMD level the CPU selects (FMA contracts differently from
//! multiply-then-add), so the lists compare on one machine, not across machines.

use std::ops::ControlFlow;
use std::path::PathBuf;
use tessera::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera::stereo::{Cost, StereoParams};
use tessera::stitch::{synth_sequence, SynthParams};
use tessera::stitch::{Blend, InMemory, RegisterParams, SearchMethod, StitchParams};
use tessera::{
    AnyImage, AnyView, AnyViewMut, Backend, Border, ContrastParams, CpuBackend, GlareMode, GlareParams, Image,
    Parallelism, Rgba8, VarianceKernel, VarianceMethod, VarianceParams,
};

/// FNV-1a over the bytes of a slice of plain pixels.
fn fnv<T: Copy>(data: &[T]) -> u64 {
    // SAFETY: the pixel types here (u8, u16, u32, f32, Rgba8) are plain data without padding.
    let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) };
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn hash(img: &AnyImage) -> u64 {
    match img {
        AnyImage::U8(i) => fnv(i.as_slice()),
        AnyImage::U16(i) => fnv(i.as_slice()),
        AnyImage::U32(i) => fnv(i.as_slice()),
        AnyImage::F32(i) => fnv(i.as_slice()),
        AnyImage::Rgba8(i) => fnv(i.as_slice()),
    }
}

fn data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TESSERA_DATA") {
        return d.into();
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    root.ancestors().map(|a| a.join("shared/data")).find(|d| d.join("stereo").is_dir()).expect("shared/data")
}

/// The input in every pixel type: gray u8 (luma), u16 (u8 * 257), f32, and RGBA.
fn inputs(rgba: &Image<Rgba8>) -> Vec<AnyImage> {
    let g: Image<u8> = rgba.convert();
    vec![
        AnyImage::U8(g.clone()),
        AnyImage::U16(g.map(|v| v as u16 * 257)),
        AnyImage::F32(g.map(|v| v as f32 / 3.0)),
        AnyImage::Rgba8(rgba.clone()),
    ]
}

fn load_rgba(path: PathBuf) -> Image<Rgba8> {
    match tessera::io::load(&path).expect("load") {
        AnyImage::Rgba8(i) => i,
        AnyImage::U8(i) => i.convert(),
        other => panic!("unexpected pixel type in {}: {:?}", path.display(), other.size()),
    }
}

fn main() {
    let be = CpuBackend::new(Parallelism::AllThreads);
    let data = data_dir();
    let cones_l = load_rgba(data.join("stereo/cones/im2.png"));
    let cones_r = load_rgba(data.join("stereo/cones/im6.png"));
    let teddy = load_rgba(data.join("stereo/teddy/im2.png"));
    let out = |name: String, h: u64| println!("{name:<60} {h:016x}");

    for (scene, src) in [("cones", &cones_l), ("teddy", &teddy)] {
        for img in inputs(src) {
            let v = img.view().unwrap();
            let t = v.type_name();
            for border in [Border::Reflect101, Border::Replicate, Border::Constant(9.0), Border::Normalize] {
                for (w, h) in [(1, 1), (7, 5), (63, 63)] {
                    let p = BoxParams { width: w, height: h, border };
                    let mut o = AnyImage::like(&v).unwrap();
                    be.mean_filter(v, o.view_mut(), &p).unwrap();
                    out(format!("{scene} mean {t} {w}x{h} {border:?}"), hash(&o));
                    if !matches!(v, AnyView::Rgba8(_)) {
                        let mut s = match v {
                            AnyView::F32(_) => AnyImage::F32(Image::new(v.size().0, v.size().1).unwrap()),
                            _ => AnyImage::U32(Image::new(v.size().0, v.size().1).unwrap()),
                        };
                        be.box_sum(v, s.view_mut(), &p).unwrap();
                        out(format!("{scene} box_sum {t} {w}x{h} {border:?}"), hash(&s));
                    }
                }
            }
            for (sigma, method) in [(1.0, GaussianMethod::Fir), (2.0, GaussianMethod::Auto), (8.0, GaussianMethod::Iir)] {
                let p = GaussianParams { sigma, method, ..Default::default() };
                let mut o = AnyImage::like(&v).unwrap();
                be.gaussian_blur(v, o.view_mut(), &p).unwrap();
                out(format!("{scene} gaussian {t} {sigma} {method:?}"), hash(&o));
            }
            for method in VarianceMethod::ALL {
                for kernel in [VarianceKernel::Tent { radius: 7 }, VarianceKernel::Box { radius: 5 }] {
                    let p = VarianceParams::new(method, kernel);
                    let (w, h) = v.size();
                    let mut o = Image::<f32>::new(w, h).unwrap();
                    be.local_variance(v, o.view_mut(), &p).unwrap();
                    out(format!("{scene} variance {t} {method:?} {kernel:?}"), fnv(o.as_slice()));
                }
            }
            let mut o = AnyImage::like(&v).unwrap();
            be.contrast_enhance(v, o.view_mut(), &ContrastParams::default()).unwrap();
            out(format!("{scene} contrast {t}"), hash(&o));
            for mode in [GlareMode::Adaptive, GlareMode::Manual] {
                let (w, h) = v.size();
                let mut mask = Image::<u8>::new(w, h).unwrap();
                let mut fixed = AnyImage::like(&v).unwrap();
                let p = GlareParams { mode, ..Default::default() };
                match be.glare(v, mask.view_mut(), fixed.view_mut(), &p) {
                    Ok(r) => out(format!("{scene} glare {t} {mode:?} spots {} px {}", r.spots, r.pixels), fnv(mask.as_slice()) ^ hash(&fixed)),
                    Err(e) => out(format!("{scene} glare {t} {mode:?} error {e}"), 0),
                }
            }
            // Registration: the image against itself cropped by a known shift.
            let (w, h) = v.size();
            let a = crop(&img, 0, 0, w - 40, h - 30);
            let b = crop(&img, 13, 7, w - 40, h - 30);
            for method in [SearchMethod::Log, SearchMethod::Exhaustive] {
                let p = RegisterParams { method, ..Default::default() };
                let r = be.register_pair(a.view().unwrap(), b.view().unwrap(), &p, (12.0, 8.0)).unwrap();
                out(format!("{scene} register_pair {t} {method:?} {:?} {:?} ncc {:.12}", r.shift, r.skip, r.ncc), 0);
            }
        }
    }

    // Stitching: synthetic sequences cut from two photographs, every pixel type.
    for (scene, src) in [("cones", &cones_l), ("teddy", &teddy)] {
        let g: Image<u8> = src.convert();
        let sp = SynthParams { frame_width: 200, frame_height: 160, frames: 12, zoom: 1.0, seed: 3, ..Default::default() };
        let seq = synth_sequence(g.view(), &sp, Parallelism::AllThreads).unwrap();
        for blend in [Blend::Overwrite, Blend::Average, Blend::Feather] {
            let frames: Vec<AnyImage> = seq.frames.iter().map(|f| AnyImage::U8(f.clone())).collect();
            let typed: Vec<Vec<AnyImage>> = vec![
                frames.clone(),
                frames.iter().map(|f| match f { AnyImage::U8(i) => AnyImage::U16(i.map(|v| v as u16 * 257)), _ => unreachable!() }).collect(),
                frames.iter().map(|f| match f { AnyImage::U8(i) => AnyImage::F32(i.convert()), _ => unreachable!() }).collect(),
                frames.iter().map(|f| match f { AnyImage::U8(i) => AnyImage::Rgba8(i.convert()), _ => unreachable!() }).collect(),
            ];
            for fs in typed {
                let views: Vec<AnyView<'_>> = fs.iter().map(|f| f.view().unwrap()).collect();
                let p = StitchParams { blend, ..Default::default() };
                let pano = be.stitch(&InMemory(&views), &p, &mut |_| ControlFlow::Continue(())).unwrap();
                let pos: Vec<String> = pano.frames.iter().map(|f| format!("{:?}", f.position)).collect();
                let quality: Vec<String> = pano.frames.iter().map(|f| format!("{:?} {:?}", f.quality, f.quality_grid)).collect();
                out(format!("{scene} stitch {} {blend:?} positions {} quality {}", views[0].type_name(), fnv(pos.join(";").as_bytes()), fnv(quality.join(";").as_bytes())), hash(&pano.canvas.image));
            }
        }
    }

    // Stereo: cones, every cost, gray and RGBA.
    let costs = [Cost::CENSUS_7X5, Cost::Ad, Cost::Mi { iterations: 3, levels: 2 }];
    for cost in costs {
        for rgba in [false, true] {
            let (w, h) = cones_l.size();
            let mut d = Image::<f32>::new(w, h).unwrap();
            let p = StereoParams { cost, ..Default::default() };
            let (gl, gr): (Image<u8>, Image<u8>) = (cones_l.convert(), cones_r.convert());
            let (l, r) = if rgba {
                (AnyView::Rgba8(cones_l.view()), AnyView::Rgba8(cones_r.view()))
            } else {
                (AnyView::U8(gl.view()), AnyView::U8(gr.view()))
            };
            let s = be.stereo_sgm(l, r, d.view_mut(), &p).unwrap();
            out(format!("cones stereo {cost:?} rgba={rgba} valid {}", s.valid), fnv(d.as_slice()));
        }
    }

    // Matrices.
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    for (m, k, n) in [(1, 1, 1), (37, 53, 29), (256, 256, 256)] {
        let a = Image::from_fn(k, m, |_, _| rnd()).unwrap();
        let b = Image::from_fn(n, k, |_, _| rnd()).unwrap();
        let mut c = Image::<f32>::new(n, m).unwrap();
        be.mat_mul(a.view(), b.view(), c.view_mut()).unwrap();
        out(format!("mat_mul {m}x{k}x{n}"), fnv(c.as_slice()));
        let a2 = Image::from_fn(n, m, |_, _| rnd()).unwrap();
        let mut d = Image::<f32>::new(n, m).unwrap();
        be.mat_add(a2.view(), c.view(), d.view_mut()).unwrap();
        out(format!("mat_add {m}x{n}"), fnv(d.as_slice()));
    }
    let _ = AnyViewMut::U8; // every view type is exercised above
}

fn crop(img: &AnyImage, x: usize, y: usize, w: usize, h: usize) -> AnyImage {
    match img {
        AnyImage::U8(i) => AnyImage::U8(i.view().crop(x, y, w, h).unwrap().to_image()),
        AnyImage::U16(i) => AnyImage::U16(i.view().crop(x, y, w, h).unwrap().to_image()),
        AnyImage::F32(i) => AnyImage::F32(i.view().crop(x, y, w, h).unwrap().to_image()),
        AnyImage::Rgba8(i) => AnyImage::Rgba8(i.view().crop(x, y, w, h).unwrap().to_image()),
        AnyImage::U32(_) => unreachable!("inputs are never u32"),
    }
}

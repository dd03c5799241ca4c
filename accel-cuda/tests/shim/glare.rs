//! `kernels/glare.cu` on the CPU shim against the CPU backend: highlights painted on a crop
//! of Middlebury cones (round spots of several sizes, a bright line that is not glare, a
//! large bright area that is not either), every pixel type, manual and adaptive thresholds,
//! every border: the report, the mask and the corrected image identical to the CPU's;
//! bad parameters as the CPU's errors.

use crate::common;

use common::shared_data;
use tessera_core::glare::{GlareMode, GlareParams};
use tessera_core::{AnyImage, AnyView, Backend, Border, CpuBackend, Image, Parallelism, Rgba8};
use tessera_cuda::MomentsDesign;

/// A 96 x 72 crop of cones with four round highlights (radius 1.5 to 4, white with a soft
/// rim), a one-pixel bright line and a bright 20 x 14 block.
fn painted() -> Image<Rgba8> {
    let rgb = image::open(shared_data().join("stereo/cones/im2.png")).unwrap().to_rgba8();
    let spots = [(20.0, 15.0, 2.5), (60.0, 20.0, 4.0), (35.0, 50.0, 1.5), (80.0, 55.0, 3.0)];
    Image::from_fn(96, 72, |x, y| {
        let p = rgb.get_pixel(200 + x as u32, 150 + y as u32).0;
        // The photograph dimmed, so that the painted highlights stand out as real ones do.
        let mut c = [p[0] as f32 * 0.6, p[1] as f32 * 0.6, p[2] as f32 * 0.6];
        for &(sx, sy, r) in &spots {
            let d = ((x as f32 - sx).powi(2) + (y as f32 - sy).powi(2)).sqrt();
            let a = (1.0 - (d - r).max(0.0) / 1.5).clamp(0.0, 1.0);
            for v in &mut c {
                *v = *v * (1.0 - a) + 252.0 * a;
            }
        }
        if x == 10 && (30..60).contains(&y) {
            c = [250.0; 3];
        }
        if (50..70).contains(&x) && (35..49).contains(&y) {
            c = [245.0, 245.0, 240.0];
        }
        Rgba8::new(c[0] as u8, c[1] as u8, c[2] as u8, 200)
    })
    .unwrap()
}

fn typed(rgba: &Image<Rgba8>) -> [AnyImage; 4] {
    let g: Image<u8> = Image::from_fn(rgba.width(), rgba.height(), |x, y| rgba.at(x, y).luma()).unwrap();
    [AnyImage::U8(g.clone()), AnyImage::U16(g.map(|v| v as u16 * 257)), AnyImage::F32(g.map(|v| v as f32 / 2.0)), AnyImage::Rgba8(rgba.clone())]
}

#[test]
fn reports_masks_and_fills_are_the_cpus() {
    let gpu = tessera_cuda::open_shim();
    let img = painted();
    let params = [
        GlareParams { radii: vec![3, 9], fill_iterations: 30, ..Default::default() },
        GlareParams { mode: GlareMode::Manual, radii: vec![9, 3, 3], brightness: 0.85, min_contrast: 0.05, grow: 2, fill_grow: 1, fill_iterations: 10, border: Border::Replicate, ..Default::default() },
        GlareParams { mode: GlareMode::Manual, radii: vec![5], min_contrast: 0.1, max_elongation: 10.0, min_area: 1, fill_iterations: 0, border: Border::Constant(0.0), ..Default::default() },
    ];
    assert_glare_is_the_cpus(gpu.as_ref(), &typed(&img), &params);
}

/// Each image of `srcs` under each of `params`: `gpu`'s report, mask and fill equal the
/// CPU's, and the painted highlights are found.
fn assert_glare_is_the_cpus(gpu: &dyn Backend, srcs: &[AnyImage], params: &[GlareParams]) {
    let cpu = CpuBackend::new(Parallelism::Sequential);
    for src in srcs {
        let view = src.view().unwrap();
        let mut found = 0;
        for p in params {
            let (w, h) = view.size();
            let (mut want_mask, mut got_mask) = (Image::<u8>::new(w, h).unwrap(), Image::<u8>::new(w, h).unwrap());
            let (mut want_fill, mut got_fill) = (AnyImage::like(&view).unwrap(), AnyImage::like(&view).unwrap());
            let want = cpu.glare(view, want_mask.view_mut(), want_fill.view_mut(), p).unwrap();
            let got = gpu.glare(view, got_mask.view_mut(), got_fill.view_mut(), p).unwrap();
            let what = format!("{} {p:?}", view.type_name());
            found += want.spots;
            assert_eq!(got, want, "{what}: report");
            assert!(got_mask == want_mask, "{what}: mask");
            assert!(got_fill == want_fill, "{what}: fill");
        }
        assert!(found >= 2, "{}: the painted highlights must be found", view.type_name());
    }
}

#[test]
fn fused_moments_give_the_cpus_glare() {
    // The glare detector's box means and variances by the single-pass kernel (u8 and u16
    // luminance): the same report, mask and fill as the CPU.
    let gpu = tessera_cuda::open_shim_design::<MomentsDesign>("fused").unwrap();
    let img = painted();
    let params = [
        GlareParams { radii: vec![3, 9], fill_iterations: 30, ..Default::default() },
        GlareParams { mode: GlareMode::Manual, radii: vec![9, 3, 3], brightness: 0.85, min_contrast: 0.05, grow: 2, fill_grow: 1, fill_iterations: 10, border: Border::Constant(0.0), ..Default::default() },
    ];
    assert_glare_is_the_cpus(gpu.as_ref(), &typed(&img)[..2], &params);
}

/// Glare on device images (the mask and the corrected image written in place) gives the
/// host call's report, mask and fill, every type; outputs that overlap are errors.
#[test]
fn glare_on_device_images_is_the_host_calls() {
    use tessera_cuda::{DeviceImage, DevicePixel};
    let gpu = tessera_cuda::open_shim_cuda();
    let img = painted();
    let p = GlareParams { radii: vec![3, 9], fill_iterations: 30, ..Default::default() };
    fn typed_run<T: DevicePixel + PartialEq + core::fmt::Debug>(gpu: &tessera_cuda::CudaBackend, src: &Image<T>, p: &GlareParams)
    where
        for<'a> tessera_core::ImageView<'a, T>: Into<AnyView<'a>>,
        for<'a> tessera_core::ImageViewMut<'a, T>: Into<tessera_core::AnyViewMut<'a>>,
        for<'a, 'b> &'a DeviceImage<'b, T>: Into<tessera_cuda::DeviceSrc<'a, 'b>>,
        for<'a, 'b> &'a mut DeviceImage<'b, T>: Into<tessera_cuda::DeviceDst<'a, 'b>>,
    {
        let (w, h) = src.size();
        let (mut mask, mut fill) = (Image::<u8>::new(w, h).unwrap(), Image::<T>::new(w, h).unwrap());
        let want = gpu.glare(src.view().into(), mask.view_mut(), fill.view_mut().into(), p).unwrap();
        assert!(want.spots >= 2);
        let up = gpu.upload(src.view()).unwrap();
        let (mut dmask, mut dfill) = (gpu.device_image::<u8>(w, h).unwrap(), gpu.device_image::<T>(w, h).unwrap());
        let got = gpu.glare_on_device(&up, &mut dmask, &mut dfill, p).unwrap();
        let (mut mask2, mut fill2) = (Image::<u8>::new(w, h).unwrap(), Image::<T>::new(w, h).unwrap());
        gpu.download(&dmask, mask2.view_mut()).unwrap();
        gpu.download(&dfill, fill2.view_mut()).unwrap();
        assert_eq!(got, want);
        assert_eq!(mask2.as_slice(), mask.as_slice());
        assert_eq!(fill2.as_slice(), fill.as_slice());
    }
    let AnyImage::U8(g) = &typed(&img)[0] else { unreachable!() };
    typed_run(&gpu, g, &p);
    typed_run(&gpu, &g.map(|v| v as u16 * 257), &p);
    typed_run(&gpu, &g.map(|v| v as f32 / 2.0), &p);
    typed_run(&gpu, &img, &p);
    // The mask may not be the corrected image, nor either output the input.
    let up = gpu.upload(g.view()).unwrap();
    let mut out = gpu.device_image::<u8>(96, 72).unwrap();
    // SAFETY: `out` holds 96 x 72 u8 and outlives the alias.
    let mut alias = unsafe { gpu.borrow_device_image::<u8>(out.device_ptr(), 96, 72) }.unwrap();
    assert!(gpu.glare_on_device(&up, &mut alias, &mut out, &p).is_err());
    let mut mask = gpu.device_image::<u8>(96, 72).unwrap();
    // SAFETY: `up` holds 96 x 72 u8 and outlives the alias.
    let mut over_input = unsafe { gpu.borrow_device_image::<u8>(up.device_ptr(), 96, 72) }.unwrap();
    assert!(gpu.glare_on_device(&up, &mut mask, &mut over_input, &p).is_err());
}

#[test]
fn images_without_highlights_and_bad_input_are_the_cpus() {
    let gpu = tessera_cuda::open_shim();
    let cpu = CpuBackend::new(Parallelism::Sequential);
    let flat = Image::<u8>::filled(20, 10, 90).unwrap();
    let (mut m1, mut m2) = (Image::<u8>::new(20, 10).unwrap(), Image::<u8>::new(20, 10).unwrap());
    let (mut f1, mut f2) = (Image::<u8>::new(20, 10).unwrap(), Image::<u8>::new(20, 10).unwrap());
    let p = GlareParams::default();
    let want = cpu.glare(AnyView::U8(flat.view()), m1.view_mut(), tessera_core::AnyViewMut::U8(f1.view_mut()), &p).unwrap();
    let got = gpu.glare(AnyView::U8(flat.view()), m2.view_mut(), tessera_core::AnyViewMut::U8(f2.view_mut()), &p).unwrap();
    assert_eq!((got, &m2, &f2), (want, &m1, &f1));
    let mut small = Image::<u8>::new(19, 10).unwrap();
    for p in [GlareParams { radii: vec![], ..Default::default() }, GlareParams { k_sigma: -1.0, ..Default::default() }, GlareParams { min_area: 0, ..Default::default() }, GlareParams { border: Border::Normalize, ..Default::default() }] {
        let want = cpu.glare(AnyView::U8(flat.view()), m1.view_mut(), tessera_core::AnyViewMut::U8(f1.view_mut()), &p);
        assert!(want.is_err(), "{p:?}");
        assert_eq!(gpu.glare(AnyView::U8(flat.view()), m2.view_mut(), tessera_core::AnyViewMut::U8(f2.view_mut()), &p), want);
    }
    let want = cpu.glare(AnyView::U8(flat.view()), small.view_mut(), tessera_core::AnyViewMut::U8(f1.view_mut()), &p);
    assert_eq!(gpu.glare(AnyView::U8(flat.view()), small.view_mut(), tessera_core::AnyViewMut::U8(f2.view_mut()), &p), want);
    let rgba = Image::<Rgba8>::new(20, 10).unwrap();
    assert!(gpu.glare(AnyView::Rgba8(rgba.view()), m2.view_mut(), tessera_core::AnyViewMut::U8(f2.view_mut()), &p).is_err());
}

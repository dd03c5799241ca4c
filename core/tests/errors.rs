//! Every kind of bad input is an `Error`, never a panic.

use tessera_core::filter::{box_sum, mean_filter, mean_filter_naive, BoxParams};
use tessera_core::{AnyView, AnyViewMut, Backend, Border, CpuBackend, Error, Image, ImageView, ImageViewMut, Parallelism};

#[test]
fn zero_width_or_height() {
    let data = [0u8; 4];
    assert!(matches!(ImageView::new(&data, 0, 2, 2), Err(Error::ZeroSize { width: 0, height: 2 })));
    assert!(matches!(ImageView::new(&data, 2, 0, 2), Err(Error::ZeroSize { .. })));
    assert!(matches!(Image::<f32>::new(0, 5), Err(Error::ZeroSize { .. })));
}

#[test]
fn stride_smaller_than_width() {
    let data = [0u8; 16];
    assert_eq!(ImageView::new(&data, 4, 2, 3).unwrap_err(), Error::StrideTooSmall { stride: 3, width: 4 });
}

#[test]
fn buffer_too_short() {
    let mut data = [0u16; 10];
    // 3 rows of stride 4 need 4 * 2 + 4 = 12 elements.
    assert_eq!(ImageView::new(&data, 4, 3, 4).unwrap_err(), Error::BufferTooShort { needed: 12, got: 10 });
    assert!(ImageViewMut::new(&mut data, 4, 3, 4).is_err());
    // A crop whose last row is short of a full stride is fine.
    assert!(ImageView::new(&data, 2, 3, 4).is_ok());
    // Sizes whose product overflows are an error too, not a panic.
    assert!(matches!(ImageView::new(&data, 2, usize::MAX, usize::MAX), Err(Error::BufferTooShort { .. })));
    assert!(Image::<u8>::from_vec(3, 3, vec![0; 8]).is_err());
}

#[test]
fn mismatched_input_and_output() {
    let src = Image::<u8>::new(8, 8).unwrap();
    let mut dst = Image::<u8>::new(8, 7).unwrap();
    let err = mean_filter(src.view(), dst.view_mut(), &BoxParams::default(), Parallelism::Sequential).unwrap_err();
    assert_eq!(err, Error::SizeMismatch { expected: (8, 8), got: (8, 7) });
    let mut sums = Image::<u32>::new(7, 8).unwrap();
    assert!(box_sum(src.view(), sums.view_mut(), &BoxParams::default(), Parallelism::Sequential).is_err());
}

#[test]
fn window_out_of_range() {
    let src = Image::<f32>::new(8, 8).unwrap();
    let mut dst = Image::<f32>::new(8, 8).unwrap();
    for (w, h) in [(0, 3), (3, 0), (4096, 3), (3, usize::MAX)] {
        let p = BoxParams { width: w, height: h, border: Border::Reflect101 };
        let err = mean_filter(src.view(), dst.view_mut(), &p, Parallelism::AllThreads).unwrap_err();
        assert!(matches!(err, Error::OutOfRange { .. }), "{w}x{h}: {err}");
        assert!(mean_filter_naive(src.view(), dst.view_mut(), &p).is_err());
    }
}

#[test]
fn u16_box_sum_that_could_overflow_u32() {
    let src = Image::<u16>::new(8, 8).unwrap();
    let mut dst = Image::<u32>::new(8, 8).unwrap();
    let p = BoxParams::square(300, Border::Reflect101); // 65535 * 90000 > 2^32
    assert!(matches!(box_sum(src.view(), dst.view_mut(), &p, Parallelism::Sequential), Err(Error::OutOfRange { .. })));
}

#[test]
fn bad_border_constants() {
    let src = Image::<u8>::new(4, 4).unwrap();
    let mut dst = Image::<u8>::new(4, 4).unwrap();
    for v in [f32::NAN, f32::INFINITY, -1.0, 256.0, 2.5] {
        let p = BoxParams::square(3, Border::Constant(v));
        assert!(matches!(mean_filter(src.view(), dst.view_mut(), &p, Parallelism::Sequential), Err(Error::InvalidFloat { .. })), "{v}");
    }
    let srcf = Image::<f32>::new(4, 4).unwrap();
    let mut dstf = Image::<f32>::new(4, 4).unwrap();
    assert!(mean_filter(srcf.view(), dstf.view_mut(), &BoxParams::square(3, Border::Constant(f32::NAN)), Parallelism::Sequential).is_err());
    assert!(mean_filter(srcf.view(), dstf.view_mut(), &BoxParams::square(3, Border::Constant(2.5)), Parallelism::Sequential).is_ok());
}

#[test]
fn crop_outside_the_image() {
    let img = Image::<u8>::new(10, 10).unwrap();
    assert!(img.view().crop(5, 5, 6, 1).is_err());
    assert!(img.view().crop(0, 0, 0, 1).is_err());
    assert!(img.view().crop(usize::MAX, 0, 2, 1).is_err());
    assert!(img.view().crop(5, 5, 5, 5).is_ok());
}

#[test]
fn backend_rejects_mismatched_pixel_types() {
    let cpu = CpuBackend::default();
    let src = Image::<u8>::new(4, 4).unwrap();
    let mut dst = Image::<f32>::new(4, 4).unwrap();
    let err = cpu.mean_filter(AnyView::U8(src.view()), AnyViewMut::F32(dst.view_mut()), &BoxParams::default()).unwrap_err();
    assert!(matches!(err, Error::UnsupportedType { .. }));
    let err = cpu.box_sum(AnyView::U8(src.view()), AnyViewMut::F32(dst.view_mut()), &BoxParams::default()).unwrap_err();
    assert!(matches!(err, Error::UnsupportedType { .. }));
    // Errors print a readable message.
    assert!(err.to_string().contains("box sum"));
}

#[test]
fn an_allocation_the_system_refuses_is_an_error() {
    // 2^22 x 2^22 f32 = 64 TiB: no machine here has it, and the request must come back as
    // an error rather than abort the process.
    assert!(matches!(Image::<f32>::new(1 << 22, 1 << 22), Err(Error::OutOfMemory { .. })));
    let e = Image::<u8>::new(1 << 23, 1 << 23).unwrap_err();
    assert!(e.to_string().contains("out of memory"), "{e}");
}

#[test]
fn a_huge_count_is_reported_as_given() {
    // usize::MAX used to wrap to -1 in the message.
    let p = BoxParams { width: usize::MAX, height: 3, border: Border::Reflect101 };
    let src = Image::<u8>::new(8, 8).unwrap();
    let mut dst = Image::<u8>::new(8, 8).unwrap();
    let e = mean_filter(src.view(), dst.view_mut(), &p, Parallelism::Sequential).unwrap_err();
    assert!(!e.to_string().contains("-1") && e.to_string().contains(&i64::MAX.to_string()), "{e}");
}

#[test]
fn the_stereo_budget_bounds_the_working_set() {
    use tessera_core::stereo::{stereo_sgm, StereoParams, Tiling};
    let (w, h) = (300, 200);
    let l = Image::<u8>::from_fn(w, h, |x, y| ((x * 7 + y * 13) % 251) as u8).unwrap();
    let mut d = Image::<f32>::new(w, h).unwrap();
    let run = |max_bytes: usize, d: &mut Image<f32>| {
        let p = StereoParams { max_disparity: 16, tiling: Tiling::Auto { max_bytes, overlap: 8 }, ..Default::default() };
        stereo_sgm(AnyView::U8(l.view()), AnyView::U8(l.view()), d.view_mut(), &p, Parallelism::Sequential)
    };
    // The whole-image buffers alone (about 28 bytes a pixel, 1.7 MB) exceed a 1 MB budget:
    // an error saying what would do, before any allocation.
    let e = run(1 << 20, &mut d).unwrap_err();
    assert!(e.to_string().contains("needs at least"), "{e}");
    // A budget that holds them and some bands: the run's peak stays within it.
    let stats = run(3 << 20, &mut d).unwrap();
    assert!(stats.tiles > 1 && stats.peak_bytes <= 3 << 20, "{stats:?}");
}

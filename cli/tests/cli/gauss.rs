//! `tessera gauss` end to end: each method and its parameters reach the library, and bad
//! Gaussian parameters come back as messages.

use crate::common;

use std::path::PathBuf;
use tessera::filter::{gaussian_blur, GaussianMethod, GaussianParams};
use tessera::{io, AnyImage, Border, Image, Parallelism};
use common::tessera;

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("tessera-cli-gauss", name)
}

fn sample() -> Image<u8> {
    common::pattern(83, 57)
}

#[test]
fn each_method_matches_the_library() {
    let d = temp_dir("methods");
    let input = d.join("in.png");
    io::save(&sample().into(), &input).unwrap();
    let cases: [(&[&str], GaussianParams); 5] = [
        // No option: the core's defaults, which the CLI shows and uses.
        (&[], GaussianParams::default()),
        (&["--sigma", "1.5"], GaussianParams { sigma: 1.5, ..Default::default() }),
        (
            &["--sigma", "2", "--method", "fir", "--radius", "4", "--border", "normalize"],
            GaussianParams { sigma: 2.0, radius: Some(4), method: GaussianMethod::Fir, border: Border::Normalize },
        ),
        (
            &["--sigma", "6", "--method", "iir", "--border", "replicate"],
            GaussianParams { sigma: 6.0, radius: None, method: GaussianMethod::Iir, border: Border::Replicate },
        ),
        (
            &["--sigma", "12", "--border", "constant:7"],
            GaussianParams { sigma: 12.0, border: Border::Constant(7.0), ..Default::default() },
        ),
    ];
    for (i, (args, p)) in cases.iter().enumerate() {
        let out = d.join(format!("out{i}.png"));
        let st = tessera().arg("gauss").args(*args).arg(&input).arg("-o").arg(&out).status().unwrap();
        assert!(st.success(), "{args:?}");
        let AnyImage::U8(got) = io::load(&out).unwrap() else { panic!("expected 8-bit output") };
        let mut want = Image::<u8>::new(83, 57).unwrap();
        gaussian_blur(sample().view(), want.view_mut(), p, Parallelism::Sequential).unwrap();
        assert_eq!(got, want, "{args:?}");
    }
}

#[test]
fn float_tiff_in_float_tiff_out() {
    let d = temp_dir("f32");
    let input = d.join("in.tif");
    let img: Image<f32> = sample().map(|v| v as f32 * 0.5 - 20.0);
    io::save(&img.clone().into(), &input).unwrap();
    let out = d.join("out.tif");
    let st = tessera().args(["gauss", "--sigma", "3", "--method", "fir"]).arg(&input).arg("-o").arg(&out).status().unwrap();
    assert!(st.success());
    let AnyImage::F32(got) = io::load(&out).unwrap() else { panic!("expected f32 output") };
    let mut want = Image::<f32>::new(83, 57).unwrap();
    let p = GaussianParams { sigma: 3.0, method: GaussianMethod::Fir, ..Default::default() };
    gaussian_blur(img.view(), want.view_mut(), &p, Parallelism::Sequential).unwrap();
    assert_eq!(got, want);
}

#[test]
fn bad_gaussian_parameters_are_messages() {
    let d = temp_dir("errors");
    let input = d.join("in.png");
    io::save(&sample().into(), &input).unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["--radius", "0"], "radius"),
        (&["--radius", "5000"], "radius"),
        (&["--sigma", "0"], "sigma"),
        (&["--sigma", "inf"], "sigma"),
        (&["--method", "iir", "--sigma", "0.3"], "sigma"),
        (&["--method", "spline"], "is not one of fir, iir, auto"),
    ];
    for (args, needle) in cases {
        let out = tessera().arg("gauss").args(args).arg(&input).arg("-o").arg(d.join("x.png")).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

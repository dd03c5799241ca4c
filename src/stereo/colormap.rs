//! A colour map for looking at disparity maps: `t = d / max_disparity` clamped to [0, 1]
//! through the piecewise-linear "jet" ramp (dark blue - blue - cyan - yellow - red - dark
//! red, near = warm); invalid pixels are black.

use tessera_core::error::{require_positive, Result};
use tessera_core::image::{Image, ImageView, Rgba8};

/// The jet colour of `t` in [0, 1].
pub fn jet(t: f32) -> Rgba8 {
    let t = t.clamp(0.0, 1.0);
    let ch = |c: f32| (255.0 * (1.5 - (4.0 * t - c).abs()).clamp(0.0, 1.0) + 0.5) as u8;
    Rgba8::new(ch(3.0), ch(2.0), ch(1.0), 255)
}

/// Colours `disp` with [`jet`] over `0..=max_disparity` (finite, > 0); invalid = black.
pub fn colorize(disp: ImageView<'_, f32>, max_disparity: f32) -> Result<Image<Rgba8>> {
    require_positive("max disparity", max_disparity as f64)?;
    Image::from_fn(disp.width(), disp.height(), |x, y| {
        let d = disp.row(y)[x];
        if d.is_finite() { jet(d / max_disparity) } else { Rgba8::new(0, 0, 0, 255) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_ends_and_invalid() {
        assert_eq!(jet(0.0), Rgba8::new(0, 0, 128, 255));
        assert_eq!(jet(1.0), Rgba8::new(128, 0, 0, 255));
        assert_eq!(jet(0.5), Rgba8::new(128, 255, 128, 255));
        let d = Image::from_vec(3, 1, vec![0.0, f32::INFINITY, 64.0]).unwrap();
        let c = colorize(d.view(), 64.0).unwrap();
        assert_eq!(c.row(0), &[jet(0.0), Rgba8::new(0, 0, 0, 255), jet(1.0)]);
        assert!(colorize(d.view(), 0.0).is_err());
    }
}

//! Entry points of semi-global matching: `Native.stereoSgm8(byte[] left, byte[] right,
//! float[] disp, ...)` (read in place through critical sections) and
//! `Native.stereoSgmRgb(int[] left, int[] right, float[] disp, ...)`. RGB is copied into
//! true-order RGBA first: census and MI match on the Rec. 601 luma, which weighs the
//! channels, so ImageJ's byte order (B, G, R in memory) cannot be used as it is.

use crate::error::{bad_arg, Result};
use crate::pixels::{copy_rgb, dims, with_dst, with_pair_dst};
use crate::{backend, backend_name, guarded};
use jni::objects::{JClass, JFloatArray, JIntArray, JByteArray, JString};
use jni::sys::{jboolean, jint};
use jni::{Env, EnvUnowned};
use tessera_core::stereo::{Cost, Paths, StereoParams, StereoStats};
use tessera_core::{AnyView, AnyViewMut, ImageView};

/// Stereo parameters from the Java arguments: `cost` 0 census (the default 7 x 5
/// window), 1 AD, 2 MI (3 iterations at full resolution), 3 hierarchical MI; `paths` 4, 5,
/// 8 or 16; `p1`, `p2` < 0 take the cost's defaults; the rest as `StereoParams::default()`
/// (intensity-adaptive P2, automatic bands).
#[allow(clippy::too_many_arguments)]
fn params(max_disp: jint, cost: jint, paths: jint, p1: jint, p2: jint, uniqueness: jint, subpixel: jboolean, lr_check: jboolean, median: jboolean, fill: jboolean) -> Result<StereoParams> {
    let cost = match cost {
        0 => Cost::CENSUS_7X5,
        1 => Cost::Ad,
        2 => Cost::MI,
        3 => Cost::MI_HIERARCHICAL,
        c => return Err(bad_arg(format!("cost = {c} is not one of 0 (census), 1 (AD), 2 (MI), 3 (hierarchical MI)"))),
    };
    let penalty = |name: &str, v: jint| -> Result<Option<u16>> {
        if v < 0 {
            Ok(None)
        } else {
            u16::try_from(v).map(Some).map_err(|_| bad_arg(format!("{name} = {v} is above 65535")))
        }
    };
    Ok(StereoParams {
        max_disparity: usize::try_from(max_disp).map_err(|_| bad_arg(format!("max disparity = {max_disp} is negative")))?,
        cost,
        paths: Paths::from_count(usize::try_from(paths).map_err(|_| bad_arg(format!("paths = {paths} is negative")))?)?,
        p1: penalty("P1", p1)?,
        p2: penalty("P2", p2)?,
        uniqueness: u8::try_from(uniqueness).map_err(|_| bad_arg(format!("uniqueness = {uniqueness} is not within 0..=255")))?,
        subpixel,
        lr_check,
        median,
        fill,
        ..StereoParams::default()
    })
}

fn describe(s: &StereoStats) -> String {
    format!(
        "valid {}, rejected by uniqueness {}, rejected by the left-right check {}, filled {}, P1 {}, P2 {}, tiles {}",
        s.valid, s.rejected_uniqueness, s.rejected_lr, s.filled, s.p1, s.p2, s.tiles
    )
}

fn disparity(d: AnyViewMut<'_>) -> tessera_core::Result<tessera_core::ImageViewMut<'_, f32>> {
    match d {
        AnyViewMut::F32(v) => Ok(v),
        _ => Err(tessera_core::Error::UnsupportedType { op: "stereo", types: "a disparity map other than f32" }),
    }
}

/// `String Native.stereoSgm8(byte[] left, byte[] right, float[] disp, int w, int h, ...)`:
/// returns a summary of the run ([`StereoStats`]).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_tessera_ij_Native_stereoSgm8<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    left: JByteArray<'l>,
    right: JByteArray<'l>,
    disp: JFloatArray<'l>,
    width: jint,
    height: jint,
    max_disp: jint,
    cost: jint,
    paths: jint,
    p1: jint,
    p2: jint,
    uniqueness: jint,
    subpixel: jboolean,
    lr_check: jboolean,
    median: jboolean,
    fill: jboolean,
    backend: JString<'l>,
) -> JString<'l> {
    guarded(&mut env, |env: &mut Env<'l>| {
        let b = backend::select(&backend_name(env, &backend)?)?;
        let p = params(max_disp, cost, paths, p1, p2, uniqueness, subpixel, lr_check, median, fill)?;
        let stats = with_pair_dst(env, &left, &right, &disp, width, height, |l, r, d| b.stereo_sgm(l, r, disparity(d)?, &p))?;
        Ok(JString::from_str(env, describe(&stats))?)
    })
}

/// `String Native.stereoSgmRgb(int[] left, int[] right, float[] disp, int w, int h, ...)`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_tessera_ij_Native_stereoSgmRgb<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    left: JIntArray<'l>,
    right: JIntArray<'l>,
    disp: JFloatArray<'l>,
    width: jint,
    height: jint,
    max_disp: jint,
    cost: jint,
    paths: jint,
    p1: jint,
    p2: jint,
    uniqueness: jint,
    subpixel: jboolean,
    lr_check: jboolean,
    median: jboolean,
    fill: jboolean,
    backend: JString<'l>,
) -> JString<'l> {
    guarded(&mut env, |env: &mut Env<'l>| {
        let b = backend::select(&backend_name(env, &backend)?)?;
        let p = params(max_disp, cost, paths, p1, p2, uniqueness, subpixel, lr_check, median, fill)?;
        let (w, h) = dims(width, height)?;
        let l = copy_rgb(env, &left, "left", w, h)?;
        let r = copy_rgb(env, &right, "right", w, h)?;
        let stats = with_dst(env, &disp, width, height, |d| {
            let lv = AnyView::Rgba8(ImageView::from_slice(&l, w, h)?);
            let rv = AnyView::Rgba8(ImageView::from_slice(&r, w, h)?);
            b.stereo_sgm(lv, rv, disparity(d)?, &p)
        })?;
        Ok(JString::from_str(env, describe(&stats))?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_codes() {
        let p = params(64, 0, 8, -1, -1, 0, true, true, true, true).unwrap();
        assert_eq!(p.cost, Cost::CENSUS_7X5);
        assert_eq!(p.paths, Paths::Eight);
        assert_eq!((p.p1, p.p2), (None, None));
        assert_eq!(params(64, 1, 4, 7, 90, 10, false, false, false, false).unwrap().p2, Some(90));
        assert_eq!(params(64, 3, 8, -1, -1, 0, true, true, true, true).unwrap().cost, Cost::MI_HIERARCHICAL);
        assert!(params(64, 4, 8, -1, -1, 0, true, true, true, true).is_err());
        assert!(params(64, 0, 6, -1, -1, 0, true, true, true, true).is_err());
        assert!(params(-1, 0, 8, -1, -1, 0, true, true, true, true).is_err());
        assert!(params(64, 0, 8, 70000, -1, 0, true, true, true, true).is_err());
        assert!(params(64, 0, 8, -1, -1, 300, true, true, true, true).is_err());
    }
}

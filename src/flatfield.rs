//! The faces' shading correction: `--flatfield estimate|FILE` and `--darkfield
//! estimate|FILE` turned into one [`Shading`] (the core's `shading`: estimated from the
//! tiles, or read from image files of the tile size), and the estimated flat field written
//! out as a 32-bit float TIFF for inspection and reuse.

use crate::shading::{estimate_shading, refine_from_overlaps, EstimateParams, OverlapFit, Shading, ShadingEstimate};
use crate::stitch::FrameSource;
use crate::{AnyImage, Image};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Where a field comes from: estimated from the tiles, or an image file.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldSource {
    Estimate,
    File(PathBuf),
}

impl FieldSource {
    /// `estimate`, or the path of an image file (which must exist). Errors: an empty value,
    /// a file that does not exist.
    pub fn parse(s: &str, flag: &str) -> Result<FieldSource> {
        match s.trim() {
            "" => bail!("{flag}: give `estimate` or an image file"),
            "estimate" => Ok(FieldSource::Estimate),
            path => {
                let p = PathBuf::from(path);
                if !p.is_file() {
                    bail!("{flag} {path}: no such file (give `estimate` to find it from the tiles, or an image of the tile size)");
                }
                Ok(FieldSource::File(p))
            }
        }
    }
}

/// The shading a run corrects, and how it was found.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub shading: Shading,
    /// The estimate's account, where the flat field was estimated.
    pub estimate: Option<ShadingEstimate>,
    pub flat: FieldSource,
    pub dark: Option<FieldSource>,
    /// Where an estimate was refined from the registered overlaps ([`refine`]), how.
    pub refined: Option<OverlapFit>,
}

/// The shading of `flat` and `dark` for the tiles of `source`, of size `tile`:
/// `estimate` finds the flat field (and, with `dark` = `estimate`, a constant dark level)
/// from the tiles; a file is an image of the tile size, grey (8-, 16-bit or float; the flat
/// field of any scale, positive everywhere; the dark field in the tiles' grey levels).
/// Errors, each naming the flag and the file: a dark field without a flat field, an
/// estimated dark field with a flat field from a file, an unreadable or RGB file, a file
/// of another size than the tiles, a non-positive or non-finite flat-field value, a
/// negative or non-finite dark-field value, an estimate that fails (too few usable tiles).
pub fn prepare(flat: Option<&FieldSource>, dark: Option<&FieldSource>, source: &dyn FrameSource, tile: (usize, usize)) -> Result<Option<Prepared>> {
    let Some(flat) = flat else {
        if dark.is_some() {
            bail!("--darkfield needs --flatfield (estimate, or a file)");
        }
        return Ok(None);
    };
    let read = |p: &Path, flag: &str| -> Result<Image<f32>> {
        let img = crate::io::load(p).with_context(|| format!("{flag} {}", p.display()))?;
        let plane = match &img {
            AnyImage::Rgba8(_) => bail!("{flag} {}: an RGB image; a flat or dark field must be one grey plane (8-, 16-bit or float)", p.display()),
            AnyImage::U32(_) => bail!("{flag} {}: 32-bit integer images are not supported; use 16-bit or float", p.display()),
            other => other.view().ok_or_else(|| anyhow!("{flag} {}: unreadable pixels", p.display()))?.to_gray_f32(),
        };
        if plane.size() != tile {
            bail!("{flag} {}: it is {}x{}, the tiles {}x{}: the field must be of the tile size", p.display(), plane.width(), plane.height(), tile.0, tile.1);
        }
        Ok(plane)
    };
    match flat {
        FieldSource::Estimate => {
            let dark_file = match dark {
                Some(FieldSource::File(p)) => Some(read(p, "--darkfield")?),
                _ => None,
            };
            let mut e = estimate_shading(source, &EstimateParams { dark: dark == Some(&FieldSource::Estimate), degree: 0 }).map_err(|e| anyhow!("--flatfield estimate: {e}"))?;
            if let Some(d) = dark_file {
                // A dark field from a file replaces the estimate's (none was estimated).
                e.shading = Shading::new(e.shading.flat().to_image(), Some(d)).map_err(|e| anyhow!("--darkfield: {e}"))?;
            }
            Ok(Some(Prepared { shading: e.shading.clone(), estimate: Some(e), flat: flat.clone(), dark: dark.cloned(), refined: None }))
        }
        FieldSource::File(p) => {
            let d = match dark {
                Some(FieldSource::Estimate) => bail!("--darkfield estimate needs --flatfield estimate (the dark level is found together with the flat field)"),
                Some(FieldSource::File(d)) => Some(read(d, "--darkfield")?),
                None => None,
            };
            let f = read(p, "--flatfield")?;
            let shading = Shading::new(f, d).map_err(|e| anyhow!("--flatfield {} / --darkfield: {e}", p.display()))?;
            Ok(Some(Prepared { shading, estimate: None, flat: flat.clone(), dark: dark.cloned(), refined: None }))
        }
    }
}

/// An estimated flat field refined from the overlaps of the accepted `pairs` of the raw
/// `tiles` at `positions` (the core's `refine_from_overlaps`: the ratio of what two tiles
/// record of one place is the flat field's, whatever the specimen, where the stack's
/// statistic cannot tell a gradient of the specimen from shading), kept where it brings the
/// overlaps' log ratios closer. A flat field from a file is the user's and stays as given.
/// Errors: a tile of another size than the field.
pub fn refine(prepared: &mut Prepared, tiles: &dyn FrameSource, positions: &[Option<(f64, f64)>], pairs: &[(usize, usize)]) -> Result<()> {
    if prepared.flat != FieldSource::Estimate {
        return Ok(());
    }
    if let Some((shading, fit)) = refine_from_overlaps(tiles, &prepared.shading, positions, pairs)? {
        if fit.log_ratio_after < fit.log_ratio_before {
            prepared.shading = shading;
            prepared.refined = Some(fit);
        }
    }
    Ok(())
}

/// Writes the flat field (mean 1) as a 32-bit float TIFF at `path` (atomically).
pub fn write_flat(shading: &Shading, path: &Path) -> Result<()> {
    if !crate::io::is_tiff(path) {
        bail!("--flatfield-out {}: the flat field is written as a 32-bit float TIFF; name it .tif", path.display());
    }
    crate::io::save(&AnyImage::F32(shading.flat().to_image()), path)
}

/// The report's `shading` object: whether shading was corrected, where the fields came
/// from, the vignetting strength (`1 - min F / max F`), and for an estimate the tiles it
/// used, those it left out, its degree, whether it is reliable and the dark level; the
/// seam steps before and after, where measured.
pub fn describe(p: Option<&Prepared>, seams: Option<(f64, f64)>) -> Value {
    let Some(p) = p else {
        return json!({"corrected": false});
    };
    let name = |s: &FieldSource| match s {
        FieldSource::Estimate => "estimate".to_string(),
        FieldSource::File(f) => f.display().to_string(),
    };
    let mut o = json!({
        "corrected": true,
        "flatfield": name(&p.flat),
        "darkfield": p.dark.as_ref().map(name),
        "vignetting_percent": crate::report::round(p.shading.vignetting() * 100.0, 2),
        "meaning": "tiles corrected as (tile - dark field) / flat field before registration and in the mosaic; vignetting: 1 - the flat field's smallest value over its largest",
    });
    if let Some(e) = &p.estimate {
        o["estimate"] = json!({
            "tiles_used": e.tiles_used,
            "excluded": e.excluded.iter().map(|(i, why)| json!({"index": i, "reason": why})).collect::<Vec<_>>(),
            "degree": e.degree,
            "reliable": e.reliable,
            "dark_level": e.dark_level.map(|d| crate::report::round(d, 3)),
            "dark_note": e.dark_note,
        });
    }
    if let Some(f) = &p.refined {
        o["refined_from_overlaps"] = json!({
            "pairs": f.pairs,
            "squares": f.squares,
            "log_ratio_rms_before": crate::report::round(f.log_ratio_before, 4),
            "log_ratio_rms_after": crate::report::round(f.log_ratio_after, 4),
            "change_percent": crate::report::round(f.change * 100.0, 2),
            "meaning": "the estimate's tilt and curvature corrected from the registered overlaps: the log ratio of what two tiles record of one place (8 x 8 squares), root mean square over the squares with the estimate and with the refined field; change: the refinement's range over the tile",
        });
    }
    if let Some((before, after)) = seams {
        o["seam_step_before"] = json!(crate::report::round(before, 3));
        o["seam_step_after"] = json!(crate::report::round(after, 3));
        o["seam_step_meaning"] = json!("mean |difference| of 8 x 8 block means of the two tiles over each accepted pair's overlap, grey levels, averaged over the pairs: uncorrected tiles, then corrected");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::InMemory;
    use crate::AnyView;

    #[test]
    fn bad_fields_are_clear_errors() {
        let dir = std::env::temp_dir().join(format!("tessera-flat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tile = Image::from_fn(30, 20, |x, y| (x + y) as u8 + 10).unwrap();
        let views = [AnyView::U8(tile.view())];
        let src = InMemory(&views);
        let write = |name: &str, img: AnyImage| {
            let p = dir.join(name);
            crate::io::save(&img, &p).unwrap();
            FieldSource::File(p)
        };
        let small = write("small.tif", AnyImage::F32(Image::filled(10, 20, 1.0).unwrap()));
        let zero = write("zero.tif", AnyImage::F32(Image::from_fn(30, 20, |x, _| if x == 3 { 0.0 } else { 1.0 }).unwrap()));
        let nan = write("nan.tif", AnyImage::F32(Image::from_fn(30, 20, |x, _| if x == 4 { f32::NAN } else { 1.0 }).unwrap()));
        let negative = write("neg.tif", AnyImage::F32(Image::from_fn(30, 20, |x, _| if x == 5 { -2.0 } else { 1.0 }).unwrap()));
        let good = write("good.png", AnyImage::U16(Image::filled(30, 20, 1000).unwrap()));
        let err = |f: Option<&FieldSource>, d: Option<&FieldSource>| format!("{:#}", prepare(f, d, &src, (30, 20)).unwrap_err());
        assert!(err(Some(&small), None).contains("it is 10x20, the tiles 30x20"));
        assert!(err(Some(&zero), None).contains("pixel (3, 0) is 0"));
        assert!(err(Some(&nan), None).contains("pixel (4, 0) is NaN"));
        assert!(err(Some(&negative), None).contains("pixel (5, 0) is -2"));
        assert!(err(Some(&good), Some(&negative)).contains("dark-field value"));
        assert!(err(None, Some(&good)).contains("needs --flatfield"));
        assert!(err(Some(&good), Some(&FieldSource::Estimate)).contains("needs --flatfield estimate"));
        assert!(err(Some(&FieldSource::Estimate), None).contains("1 usable tile(s)"));
        let p = prepare(Some(&good), None, &src, (30, 20)).unwrap().unwrap();
        assert_eq!(p.shading.flat().row(0)[0], 1.0);
        assert!(FieldSource::parse("", "--flatfield").is_err());
        assert!(format!("{:#}", FieldSource::parse("/no/such.tif", "--flatfield").unwrap_err()).contains("no such file"));
        assert_eq!(FieldSource::parse("estimate", "--flatfield").unwrap(), FieldSource::Estimate);
        assert!(write_flat(&p.shading, &dir.join("flat.png")).is_err());
        write_flat(&p.shading, &dir.join("flat.tif")).unwrap();
        assert!(matches!(crate::io::load(&dir.join("flat.tif")).unwrap(), AnyImage::F32(_)));
        std::fs::remove_dir_all(&dir).ok();
    }
}

//! `tessera stereo` (semi-global matching into a PFM disparity map, optionally a colour PNG)
//! and `tessera stereo-eval` (Middlebury scores against ground truth).

use super::common::{choice, BackendArgs};
use anyhow::{bail, Context, Result};
use clap::ArgAction;
use std::path::{Path, PathBuf};
use tessera::options::{census_window_default, mi_default, tiling_default, StereoOptions};
use tessera::stereo::{self, pfm, CostKind, StereoParams};
use tessera::{AnyImage, Choice, Image};

#[derive(clap::Args)]
pub struct StereoArgs {
    /// Left image of a rectified pair (8-bit gray or RGB)
    left: PathBuf,
    /// Right image, same size and type
    right: PathBuf,
    /// Output left disparity map, PFM (float32, invalid = +inf)
    #[arg(short, long)]
    output: PathBuf,
    /// Number of disparities D: candidates 0 .. D-1
    #[arg(long, default_value_t = StereoParams::default().max_disparity)]
    max_disp: usize,
    #[arg(long, value_parser = choice::<CostKind>(), default_value = StereoParams::default().cost.kind().name())]
    cost: CostKind,
    /// Census window WxH (odd sides, at most 9x7)
    #[arg(long, default_value = census_window_default())]
    census_window: String,
    /// MI iterations (from a zero disparity map) at the coarsest level
    #[arg(long, default_value_t = mi_default().0)]
    mi_iterations: usize,
    /// MI pyramid levels (0 = full resolution only)
    #[arg(long, default_value_t = mi_default().1)]
    mi_levels: usize,
    /// Aggregation paths: 4, 5, 8 or 16
    #[arg(long, default_value_t = StereoParams::default().paths.count())]
    paths: usize,
    /// Small-change penalty P1 (default: per cost)
    #[arg(long)]
    p1: Option<u16>,
    /// Large-change penalty P2 (default: per cost)
    #[arg(long)]
    p2: Option<u16>,
    /// Constant P2 instead of the intensity-adaptive one
    #[arg(long)]
    fixed_p2: bool,
    /// Uniqueness ratio in percent (0 = off)
    #[arg(long, default_value_t = StereoParams::default().uniqueness)]
    uniqueness: u8,
    /// Parabola subpixel refinement (--subpixel, --subpixel=false, --no-subpixel)
    #[arg(long, default_value_t = StereoParams::default().subpixel, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    subpixel: bool,
    #[arg(long, overrides_with = "subpixel", hide = true)]
    no_subpixel: bool,
    /// Left-right consistency check (--lr-check, --lr-check=false, --no-lr-check)
    #[arg(long, default_value_t = StereoParams::default().lr_check, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    lr_check: bool,
    #[arg(long, overrides_with = "lr_check", hide = true)]
    no_lr_check: bool,
    /// 3x3 median (--median, --median=false, --no-median)
    #[arg(long, default_value_t = StereoParams::default().median, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    median: bool,
    #[arg(long, overrides_with = "median", hide = true)]
    no_median: bool,
    /// Hole filling for a dense map (--fill, --fill=false, --no-fill)
    #[arg(long, default_value_t = StereoParams::default().fill, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    fill: bool,
    #[arg(long, overrides_with = "fill", hide = true)]
    no_fill: bool,
    /// Original tile mode: tiles of WxH pixels (default: automatic bands by --max-mem)
    #[arg(long)]
    tile: Option<String>,
    /// Tile / band overlap in pixels
    #[arg(long, default_value_t = tiling_default().1)]
    overlap: usize,
    /// Working-set budget in MiB for the automatic bands
    #[arg(long, default_value_t = tiling_default().0 >> 20)]
    max_mem: usize,
    /// Also write a colour-mapped PNG of the disparities
    #[arg(long)]
    color: Option<PathBuf>,
    #[command(flatten)]
    backend: BackendArgs,
}

impl StereoArgs {
    /// The library's stereo options (a switch and its `--no-` form folded into one).
    fn options(&self) -> StereoOptions {
        StereoOptions {
            max_disp: self.max_disp,
            cost: self.cost,
            census_window: self.census_window.clone(),
            mi_iterations: self.mi_iterations,
            mi_levels: self.mi_levels,
            paths: self.paths,
            p1: self.p1,
            p2: self.p2,
            fixed_p2: self.fixed_p2,
            uniqueness: self.uniqueness,
            subpixel: self.subpixel && !self.no_subpixel,
            lr_check: self.lr_check && !self.no_lr_check,
            median: self.median && !self.no_median,
            fill: self.fill && !self.no_fill,
            tile: self.tile.clone(),
            overlap: self.overlap,
            max_mem: self.max_mem,
        }
    }
}

/// Loads a stereo input as 8-bit gray or RGBA; other types are an error naming the file.
fn load_pair_image(path: &Path) -> Result<AnyImage> {
    let img = tessera::io::load(path)?;
    match img {
        AnyImage::U8(_) | AnyImage::Rgba8(_) => Ok(img),
        _ => bail!("{}: stereo needs 8-bit gray or RGB images", path.display()),
    }
}

pub fn run_stereo(a: StereoArgs) -> Result<()> {
    let p = a.options().params()?;
    let (ls, rs) = (tessera::io::dimensions(&a.left)?, tessera::io::dimensions(&a.right)?);
    if ls != rs {
        bail!("image sizes differ: the left image {} is {}x{} but the right {} is {}x{} (a rectified pair has one size)", a.left.display(), ls.0, ls.1, a.right.display(), rs.0, rs.1);
    }
    let left = load_pair_image(&a.left)?;
    let right = load_pair_image(&a.right)?;
    let backend = a.backend.open()?;
    let (w, h) = left.size();
    let mut disp = Image::<f32>::new(w, h)?;
    let lv = left.view().context("left image")?;
    let rv = right.view().context("right image")?;
    let t = std::time::Instant::now();
    let stats = backend.stereo_sgm(lv, rv, disp.view_mut(), &p)?;
    eprintln!(
        "{}x{} x {} disparities on {}: {:.1} ms, {} valid ({:.1} %), {} filled, {} tile(s), P1 {} P2 {}",
        w,
        h,
        p.max_disparity,
        backend.name(),
        t.elapsed().as_secs_f64() * 1e3,
        stats.valid,
        100.0 * stats.valid as f64 / (w * h) as f64,
        stats.filled,
        stats.tiles,
        stats.p1,
        stats.p2
    );
    tessera::io::write_bytes(&a.output, &pfm::encode_pfm(disp.view()))?;
    if let Some(c) = &a.color {
        let img = stereo::colormap::colorize(disp.view(), p.max_disparity as f32)?;
        tessera::io::save(&img.into(), c)?;
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct StereoEvalArgs {
    /// Disparity map: PFM (invalid = inf), or an 8/16-bit image divided by --disp-scale
    disp: PathBuf,
    /// Ground truth: an 8/16-bit image divided by --gt-scale (0 = unknown), or PFM
    gt: PathBuf,
    /// Ground-truth scale (Middlebury cones / teddy: 4)
    #[arg(long, default_value_t = 4.0)]
    gt_scale: f32,
    /// Scale of an integer disparity image (0 = invalid)
    #[arg(long, default_value_t = 1.0)]
    disp_scale: f32,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

/// Loads a disparity map in pixels: PFM as is; integer images divided by `scale` with
/// 0 read as `zero` (unknown ground truth: 0; invalid disparity: +inf).
fn load_disparity(path: &Path, scale: f32, zero: f32) -> Result<Image<f32>> {
    let is_pfm = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("pfm"));
    if is_pfm {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        return pfm::decode_pfm(&bytes).with_context(|| format!("{}", path.display()));
    }
    if !(scale.is_finite() && scale > 0.0) {
        bail!("scale {scale} must be a finite number > 0");
    }
    // Fallible allocation: the disparity maps follow the input's size.
    let scaled = |v: f32| if v == 0.0 { zero } else { v / scale };
    Ok(match tessera::io::load(path)? {
        AnyImage::U8(i) => i.try_map(|v| scaled(v as f32))?,
        AnyImage::U16(i) => i.try_map(|v| scaled(v as f32))?,
        AnyImage::F32(i) => return Ok(i),
        _ => bail!("{}: expected a gray disparity image or a PFM", path.display()),
    })
}

pub fn run_stereo_eval(a: StereoEvalArgs) -> Result<()> {
    // Sizes first, from the headers: a mismatch is reported before anything is decoded.
    let (ds, gs) = (tessera::io::dimensions(&a.disp)?, tessera::io::dimensions(&a.gt)?);
    if ds != gs {
        bail!("image sizes differ: the disparity map {} is {}x{} but the ground truth {} is {}x{}", a.disp.display(), ds.0, ds.1, a.gt.display(), gs.0, gs.1);
    }
    let disp = load_disparity(&a.disp, a.disp_scale, f32::INFINITY)?;
    let gt = load_disparity(&a.gt, a.gt_scale, 0.0)?;
    let s = stereo::evaluate(disp.view(), gt.view())?;
    if a.json {
        let v = serde_json::json!({
            "known": s.known, "valid": s.valid,
            "all": {"bad1": s.bad1_all, "bad2": s.bad2_all},
            "valid_only": {"bad1": s.bad1_valid, "bad2": s.bad2_valid, "mae": s.mae_valid},
            "density": s.density,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("pixels with known ground truth: {}, with a disparity: {}", s.known, s.valid);
        println!("                 bad 1.0   bad 2.0   MAE");
        println!("all known        {:7.2} % {:7.2} %   (invalid counted as bad)", s.bad1_all, s.bad2_all);
        println!("valid only       {:7.2} % {:7.2} %   {:.3} px", s.bad1_valid, s.bad2_valid, s.mae_valid);
        println!("density          {:7.2} %", s.density);
    }
    Ok(())
}

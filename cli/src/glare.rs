//! `tessera glare`: specular-highlight detection and correction; writes the corrected image
//! (`-o`) and the mask (`--mask`, 8-bit, 255 = glare).

use super::common::{comma_list, input_view, output_like, parse_border, BackendArgs};
use anyhow::{Context, Result};
use std::path::PathBuf;
use tessera::{AnyImage, Border, Choice, GlareMode, GlareParams, Image};

#[derive(clap::Args)]
pub struct GlareArgs {
    /// Input image (RGB or gray)
    input: PathBuf,
    /// Corrected image
    #[arg(short, long)]
    output: PathBuf,
    /// Mask image (255 = glare)
    #[arg(long)]
    mask: PathBuf,
    /// adaptive (thresholds from the image's statistics) or manual
    #[arg(long, value_parser = parse_mode, default_value = GlareParams::default().mode.name())]
    mode: GlareMode,
    /// Box radii of the local statistics, comma-separated
    #[arg(long, value_delimiter = ',', default_value = comma_list(&GlareParams::default().radii))]
    radii: Vec<usize>,
    /// A seed is at least this many local standard deviations above the local mean
    #[arg(long, default_value_t = GlareParams::default().k_sigma)]
    k_sigma: f32,
    /// Least brightness of a seed, fraction of full scale (manual mode)
    #[arg(long, default_value_t = GlareParams::default().brightness)]
    brightness: f32,
    /// Least excess over the local mean, fraction of full scale (manual mode)
    #[arg(long, default_value_t = GlareParams::default().min_contrast)]
    min_contrast: f32,
    /// Largest saturation (max - min) / max of a seed
    #[arg(long, default_value_t = GlareParams::default().max_saturation)]
    max_saturation: f32,
    /// Smallest spot area in pixels
    #[arg(long, default_value_t = GlareParams::default().min_area)]
    min_area: usize,
    /// Largest spot area in pixels
    #[arg(long, default_value_t = GlareParams::default().max_area)]
    max_area: usize,
    /// Largest ratio of a spot's principal axes (1 = round)
    #[arg(long, default_value_t = GlareParams::default().max_elongation)]
    max_elongation: f32,
    /// Dilation of the spots in pixels
    #[arg(long, default_value_t = GlareParams::default().grow)]
    grow: usize,
    /// The fill also replaces pixels within this distance of the mask (the highlight's faint tail)
    #[arg(long, default_value_t = GlareParams::default().fill_grow)]
    fill_grow: usize,
    /// Laplace sweeps of the fill
    #[arg(long, default_value_t = GlareParams::default().fill_iterations)]
    fill_iterations: usize,
    /// Border: reflect101, replicate, constant:V
    #[arg(long, value_parser = parse_border, default_value_t = GlareParams::default().border)]
    border: Border,
    #[command(flatten)]
    backend: BackendArgs,
}

/// `--mode` by the core's names, case-insensitive.
fn parse_mode(s: &str) -> Result<GlareMode, String> {
    GlareMode::from_name(s).map_err(|_| format!("unknown mode {s:?} ({})", tessera::choice::names::<GlareMode>().join(", ")))
}

pub fn run(a: GlareArgs) -> Result<()> {
    let backend = a.backend.open()?;
    let p = GlareParams {
        mode: a.mode,
        radii: a.radii,
        k_sigma: a.k_sigma,
        brightness: a.brightness,
        min_contrast: a.min_contrast,
        max_saturation: a.max_saturation,
        min_area: a.min_area,
        max_area: a.max_area,
        max_elongation: a.max_elongation,
        grow: a.grow,
        fill_grow: a.fill_grow,
        fill_iterations: a.fill_iterations,
        border: a.border,
    };
    let img = tessera::io::load(&a.input)?;
    let (w, h) = img.size();
    let mut mask = Image::<u8>::new(w, h)?;
    let mut out = output_like(&img)?;
    let report = backend
        .glare(input_view(&img)?, mask.view_mut(), out.view_mut(), &p)
        .with_context(|| format!("processing {}", a.input.display()))?;
    eprintln!(
        "{} spots, {} pixels; thresholds: brightness {:.3}, contrast {:.3} of full scale {}",
        report.spots, report.pixels, report.brightness, report.min_contrast, report.full_scale
    );
    tessera::io::save(&out, &a.output)?;
    tessera::io::save(&AnyImage::U8(mask), &a.mask)
}

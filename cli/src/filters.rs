//! `tessera box`, `tessera mean`, `tessera gauss`.

use super::common::{input_view, output_like, parse_border, process_files, BackendArgs, FilesArgs};
use anyhow::{bail, Result};
use tessera::filter::{BoxParams, GaussianMethod, GaussianParams};
use tessera::{AnyImage, Border, Image};

/// The window of a box or mean filter.
#[derive(clap::Args, Clone, Debug)]
pub struct WindowArgs {
    /// Square window side m (m x m pixels)
    #[arg(short = 'm', long, default_value_t = BoxParams::default().width)]
    pub size: usize,
    /// Window width (overrides --size)
    #[arg(long)]
    pub width: Option<usize>,
    /// Window height (overrides --size)
    #[arg(long)]
    pub height: Option<usize>,
    /// Border: reflect101, replicate, normalize, constant:V
    #[arg(long, value_parser = parse_border, default_value_t = BoxParams::default().border)]
    pub border: Border,
}

impl WindowArgs {
    fn params(&self) -> BoxParams {
        BoxParams {
            width: self.width.unwrap_or(self.size),
            height: self.height.unwrap_or(self.size),
            border: self.border,
        }
    }
}

/// Arguments of `tessera box` and `tessera mean`.
#[derive(clap::Args)]
pub struct WindowFilterArgs {
    #[command(flatten)]
    files: FilesArgs,
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    backend: BackendArgs,
}

#[derive(clap::Args)]
pub struct GaussArgs {
    #[command(flatten)]
    files: FilesArgs,
    /// Standard deviation in pixels (a negative value is passed on and reported as invalid)
    #[arg(short, long, default_value_t = GaussianParams::default().sigma, allow_negative_numbers = true)]
    sigma: f64,
    /// FIR kernel radius, 1..=4095 (default ceil(3 sigma)); with --method auto it selects the FIR
    #[arg(long)]
    radius: Option<usize>,
    /// fir (separable, exact sampled kernel), iir (recursive, cost independent of sigma),
    /// or auto (FIR below sigma 9, or 16 for RGBA; IIR above)
    #[arg(long, value_parser = parse_gauss_method, default_value_t = GaussianParams::default().method)]
    method: GaussianMethod,
    /// Border: reflect101, replicate, normalize, constant:V
    #[arg(long, value_parser = parse_border, default_value_t = GaussianParams::default().border)]
    border: Border,
    #[command(flatten)]
    backend: BackendArgs,
}

fn parse_gauss_method(s: &str) -> Result<GaussianMethod, String> {
    GaussianMethod::from_name(s).map_err(|e| e.to_string())
}

pub fn run_box(a: WindowFilterArgs) -> Result<()> {
    let backend = a.backend.open()?;
    let p = a.window.params();
    process_files(&a.files, |img| {
        let (w, h) = img.size();
        let mut out: AnyImage = match img {
            AnyImage::F32(_) => Image::<f32>::new(w, h)?.into(),
            AnyImage::U8(_) | AnyImage::U16(_) => Image::<u32>::new(w, h)?.into(),
            AnyImage::Rgba8(_) => bail!("box sums take gray images (8/16-bit or 32-bit float); this one is RGB: convert it to gray first, or use `tessera mean`"),
            AnyImage::U32(_) => bail!("32-bit integer images are not supported as input; convert to 32-bit float"),
        };
        backend.box_sum(input_view(img)?, out.view_mut(), &p)?;
        Ok(out)
    })
}

pub fn run_mean(a: WindowFilterArgs) -> Result<()> {
    let backend = a.backend.open()?;
    let p = a.window.params();
    process_files(&a.files, |img| {
        let mut out = output_like(img)?;
        backend.mean_filter(input_view(img)?, out.view_mut(), &p)?;
        Ok(out)
    })
}

pub fn run_gauss(a: GaussArgs) -> Result<()> {
    let backend = a.backend.open()?;
    let p = GaussianParams { sigma: a.sigma, radius: a.radius, method: a.method, border: a.border };
    process_files(&a.files, |img| {
        let mut out = output_like(img)?;
        backend.gaussian_blur(input_view(img)?, out.view_mut(), &p)?;
        Ok(out)
    })
}

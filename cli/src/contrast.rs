//! `tessera contrast`: multi-scale local contrast enhancement (same pixel type as the input).

use super::common::{comma_list, input_view, output_like, parse_border, process_files, BackendArgs, FilesArgs};
use anyhow::Result;
use tessera::{Border, ContrastParams};

#[derive(clap::Args)]
pub struct ContrastArgs {
    #[command(flatten)]
    files: FilesArgs,
    /// Tent radii of the scales, comma-separated, each 2^k - 1
    #[arg(long, value_delimiter = ',', default_value = comma_list(&ContrastParams::default().radii))]
    radii: Vec<usize>,
    /// Target local spread as a multiple of the global standard deviation
    #[arg(long, default_value_t = ContrastParams::default().alpha)]
    alpha: f32,
    /// Largest gain
    #[arg(long, default_value_t = ContrastParams::default().gain_max)]
    gain_max: f32,
    /// Smallest gain (1 never lowers contrast)
    #[arg(long, default_value_t = ContrastParams::default().gain_min)]
    gain_min: f32,
    /// Noise floor as a fraction of the global standard deviation (gain <= alpha / noise)
    #[arg(long, default_value_t = ContrastParams::default().noise)]
    noise: f32,
    /// Border: reflect101, replicate, constant:V
    #[arg(long, value_parser = parse_border, default_value_t = ContrastParams::default().border)]
    border: Border,
    #[command(flatten)]
    backend: BackendArgs,
}

pub fn run(a: ContrastArgs) -> Result<()> {
    let backend = a.backend.open()?;
    let p = ContrastParams { radii: a.radii, alpha: a.alpha, gain_max: a.gain_max, gain_min: a.gain_min, noise: a.noise, border: a.border };
    process_files(&a.files, |img| {
        let mut out = output_like(img)?;
        backend.contrast_enhance(input_view(img)?, out.view_mut(), &p)?;
        Ok(out)
    })
}

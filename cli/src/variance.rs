//! `tessera variance`: local variance (six methods, tent or box kernel) as a 32-bit float TIFF.

use super::common::{input_view, parse_border, process_files, BackendArgs, FilesArgs};
use anyhow::Result;
use tessera::{AnyImage, Border, Image, VarianceKernel, VarianceMethod, VarianceParams};

#[derive(clap::Args)]
pub struct VarianceArgs {
    #[command(flatten)]
    files: FilesArgs,
    /// usual, koenig, welford, pairwise, threewise, recursive (exact O(1))
    #[arg(long, value_parser = parse_method, default_value_t = VarianceParams::default().method)]
    method: VarianceMethod,
    /// tent (centre-weighted, radius 2^k - 1) or box (uniform, any radius)
    #[arg(long, value_parser = ["tent", "box"], default_value = kernel_name(VarianceParams::default().kernel))]
    kernel: String,
    /// Kernel radius R (tent: 1, 3, 7, 15, 31, 63, 127, 255)
    #[arg(short, long, default_value_t = VarianceParams::default().kernel.radius())]
    radius: usize,
    /// Border: reflect101, replicate, constant:V
    #[arg(long, value_parser = parse_border, default_value_t = VarianceParams::default().border)]
    border: Border,
    #[command(flatten)]
    backend: BackendArgs,
}

fn kernel_name(k: VarianceKernel) -> &'static str {
    match k {
        VarianceKernel::Tent { .. } => "tent",
        VarianceKernel::Box { .. } => "box",
    }
}

fn parse_method(s: &str) -> Result<VarianceMethod, String> {
    VarianceMethod::from_name(s).map_err(|e| e.to_string())
}

pub fn run(a: VarianceArgs) -> Result<()> {
    let backend = a.backend.open()?;
    let kernel = match a.kernel.as_str() {
        "box" => VarianceKernel::Box { radius: a.radius },
        _ => VarianceKernel::Tent { radius: a.radius },
    };
    let p = VarianceParams { method: a.method, kernel, border: a.border };
    process_files(&a.files, |img| {
        let (w, h) = img.size();
        let mut out = Image::<f32>::new(w, h)?;
        backend.local_variance(input_view(img)?, out.view_mut(), &p)?;
        Ok(AnyImage::F32(out))
    })
}

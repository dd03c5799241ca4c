//! The `tessera` command line: one module per group of subcommands, plus the arguments
//! they share ([`common`]); each parses its arguments and calls the `tessera` library.

mod bench;
mod common;
mod contrast;
mod filters;
mod follow;
mod glare;
mod grid;
mod stereo;
mod stitch;
mod variance;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "tessera", version, about = "Panorama stitching by NCC log search, O(1) filters, local variance, SGM stereo")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Largest image any input may decode to, in pixels (checked before decoding)
    #[arg(long, global = true, default_value_t = tessera::io::DEFAULT_MAX_PIXELS)]
    max_pixels: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Box sum over a rectangular window, O(1) per pixel (exact u32 sums for 8/16-bit input; written as 32-bit TIFF)
    Box(filters::WindowFilterArgs),
    /// Mean filter over a rectangular window, O(1) per pixel (same pixel type as the input)
    Mean(filters::WindowFilterArgs),
    /// Gaussian blur (separable FIR or recursive IIR)
    Gauss(filters::GaussArgs),
    /// Local variance (usual, koenig, welford, pairwise, threewise, recursive; tent or box kernel) as a 32-bit float TIFF
    Variance(variance::VarianceArgs),
    /// Multi-scale local contrast enhancement from local mean and variance (gray or RGB on luminance)
    Contrast(contrast::ContrastArgs),
    /// Specular-highlight (glare) detection and correction: corrected image and mask
    Glare(glare::GlareArgs),
    /// Stitch an image sequence into a panorama by NCC log search (no input: a demo sequence cut from the bundled photograph, with true positions)
    Stitch(stitch::StitchArgs),
    /// Write a synthetic sequence with ground truth (subpixel path, noise, gain drift, optional blur) cut from an image
    SynthSeq(stitch::SynthSeqArgs),
    /// Semi-global matching stereo of a rectified pair into a PFM disparity map
    Stereo(stereo::StereoArgs),
    /// Scores a disparity map against ground truth (bad 1.0 / 2.0, MAE, density)
    StereoEval(stereo::StereoEvalArgs),
    /// Run a benchmark suite and print medians (a table, or JSON with --json)
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tessera::io::set_max_pixels(cli.max_pixels);
    // The worker threads start before any input is read: under a memory limit, a large
    // input then fails with an out-of-memory error, not the threads later with a panic.
    if let Err(e) = tessera::Parallelism::AllThreads.start() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Box(a) => filters::run_box(a),
        Command::Mean(a) => filters::run_mean(a),
        Command::Gauss(a) => filters::run_gauss(a),
        Command::Variance(a) => variance::run(a),
        Command::Contrast(a) => contrast::run(a),
        Command::Glare(a) => glare::run(a),
        Command::Stitch(a) => stitch::run_stitch(a),
        Command::SynthSeq(a) => stitch::run_synth_seq(a),
        Command::Stereo(a) => stereo::run_stereo(a),
        Command::StereoEval(a) => stereo::run_stereo_eval(a),
        Command::Bench(a) => bench::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

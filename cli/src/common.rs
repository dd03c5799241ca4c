//! Arguments and helpers shared by the subcommands: backend choice, the value parsers of
//! the core's choices and of borders, processing one file or many (with a progress bar).

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use tessera::{open_backend, AnyImage, Backend, BackendChoice, Border, Choice, Opened, Parallelism};

/// The values of a choice of the core for clap: its names ([`Choice::name`]), each with its
/// help line where it has one, parsed by [`Choice::from_name`].
pub fn choice<C: Choice + Send + Sync>() -> impl TypedValueParser<Value = C> {
    let values = C::ALL.iter().map(|&c| match c.describe() {
        "" => PossibleValue::new(c.name()),
        help => PossibleValue::new(c.name()).help(help),
    });
    PossibleValuesParser::new(values).try_map(|name| C::from_name(&name))
}

/// The `--backend` values (`cpu`, `cuda`, `auto`, as [`BackendChoice`] names them), each
/// with its help line.
pub fn backend_value_parser() -> impl TypedValueParser<Value = BackendChoice> {
    choice::<BackendChoice>()
}

/// `--backend` and `--threads`, for every command that runs an operation.
#[derive(clap::Args, Clone, Debug)]
pub struct BackendArgs {
    /// Where to run: cpu, cuda, or auto (CUDA if a GPU is usable, else the CPU)
    #[arg(long, value_parser = backend_value_parser(), default_value = "auto")]
    pub backend: BackendChoice,
    /// Run the CPU backend on one thread instead of all
    #[arg(long)]
    pub single_thread: bool,
}

impl BackendArgs {
    /// Opens the backend; reports an `auto` fallback on stderr.
    pub fn open(&self) -> Result<Box<dyn Backend>> {
        let par = if self.single_thread { Parallelism::Sequential } else { Parallelism::AllThreads };
        let Opened { backend, fallback } = open_backend(self.backend, par)?;
        if let Some(note) = fallback {
            eprintln!("note: {note}");
        }
        Ok(backend)
    }
}

/// `7,31,127`: a list default as the user types it (clap would show it space-separated).
pub fn comma_list(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// Parses `reflect101`, `replicate`, `normalize` or `constant:V` (the core's `Border`
/// names).
pub fn parse_border(s: &str) -> Result<Border, String> {
    s.parse()
}

/// Inputs and output of a per-image command.
#[derive(clap::Args, Clone, Debug)]
pub struct FilesArgs {
    /// Input image(s): PNG, TIFF, JPEG, PGM/PPM
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output file (one input) or directory (several inputs)
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Runs `op` on every input and saves the result. One input: `output` is the file. Several:
/// `output` is a directory, each result keeps its input's name (with `.tif` where the result
/// is a 32-bit image), and a progress bar shows the files done. A multi-page TIFF is a stack:
/// every page is processed and the result is a multi-page TIFF. An input that fails does not
/// stop the others; the error lists every failure.
pub fn process_files(files: &FilesArgs, mut op: impl FnMut(&AnyImage) -> Result<AnyImage>) -> Result<()> {
    if files.inputs.len() == 1 {
        return process_one(&files.inputs[0], &files.output, &mut op);
    }
    if files.output.is_file() {
        bail!("{} is a file; with several inputs, -o must name a directory", files.output.display());
    }
    std::fs::create_dir_all(&files.output)?;
    let bar = progress_bar(files.inputs.len() as u64, "files");
    let mut failures = Vec::new();
    for input in &files.inputs {
        let out = |result: &AnyImage| output_name(input, &files.output, result);
        if let Err(e) = process_one_named(input, out, &mut op) {
            bar.suspend(|| eprintln!("error: {e:#}"));
            failures.push(format!("{}: {e:#}", input.display()));
        }
        bar.inc(1);
    }
    bar.finish();
    if !failures.is_empty() {
        bail!("{} of {} inputs failed:\n  {}", failures.len(), files.inputs.len(), failures.join("\n  "));
    }
    Ok(())
}

fn process_one(input: &Path, output: &Path, op: &mut impl FnMut(&AnyImage) -> Result<AnyImage>) -> Result<()> {
    process_one_named(input, |_| output.to_path_buf(), op)
}

/// Loads `input` (every page of a stack), runs `op` on each page and saves the result
/// where `output` names it.
fn process_one_named(
    input: &Path,
    output: impl Fn(&AnyImage) -> PathBuf,
    op: &mut impl FnMut(&AnyImage) -> Result<AnyImage>,
) -> Result<()> {
    let pages = tessera::io::load_stack(input)?;
    let results = pages
        .iter()
        .enumerate()
        .map(|(i, page)| {
            let what = if pages.len() > 1 { format!("{} page {}", input.display(), i + 1) } else { input.display().to_string() };
            op(page).with_context(|| format!("processing {what}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let path = output(&results[0]);
    match results.as_slice() {
        [one] => tessera::io::save(one, &path),
        stack if tessera::io::is_tiff(&path) => tessera::io::write_tiff(stack, &path),
        stack => bail!(
            "{} is a stack of {} pages: name a .tif output to get every processed page",
            input.display(),
            stack.len()
        ),
    }
}

fn output_name(input: &Path, dir: &Path, out: &AnyImage) -> PathBuf {
    let name = input.file_name().map(PathBuf::from).unwrap_or_else(|| "out.png".into());
    let needs_tiff = matches!(out, AnyImage::F32(_) | AnyImage::U32(_));
    if needs_tiff {
        dir.join(name.with_extension("tif"))
    } else {
        dir.join(name)
    }
}

/// A progress bar on stderr counting `unit`, with rate and ETA; hidden when stderr is
/// not a terminal.
pub fn progress_bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = format!("{{bar:40}} {{pos}}/{{len}} {unit} ({{per_sec}}, ETA {{eta}})");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}

/// A zeroed output of the same type and size as `img` (sums of integers are u32).
pub fn output_like(img: &AnyImage) -> Result<AnyImage> {
    Ok(AnyImage::like(&input_view(img)?)?)
}

/// The view of an input image, or a clear error for a u32 image (not an input type).
pub fn input_view(img: &AnyImage) -> Result<tessera::AnyView<'_>> {
    match img.view() {
        Some(v) => Ok(v),
        None => bail!("32-bit integer images are not supported as input; convert to 32-bit float"),
    }
}

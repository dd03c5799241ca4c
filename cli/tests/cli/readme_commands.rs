//! Every command line the documentation prints runs as printed: the README, `docs/*.md` and
//! the crates' READMEs (`python/`, `firmware/`, `accel-cuda/`, ...). Printed means the
//! `tessera ...` synopses of a table and the `tessera` / `cargo run --release --` lines of
//! a code block; a line printed in several places runs once.
//!
//! A synopsis is turned into real command lines: placeholders (`IN`, `OUT.tif`, `LEFT`, `W`,
//! ...) become real files and numbers, optional groups `[...]` are included, a trailing
//! `...` (more options) is dropped, and each alternative of a choice `a\|b\|c` is run in
//! turn with the other choices at their first alternative. Paths under `assets/` are the
//! repository's. A line this test cannot turn into a command (an unknown placeholder) fails
//! the test, so the documentation and the program cannot drift apart silently.
//!
//! A command that asks for `--backend cuda` needs a GPU: where the CUDA backend does not
//! open, it is reported as `cuda: SKIPPED (no CUDA device): ...` and must fail with that
//! reason on stderr (the documented clear error), never pass silently.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use tessera::{AnyImage, BackendChoice, Parallelism};

/// The repository's root, above this package (`cli/`).
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli/ is in the repository")
}

/// The documents whose printed commands must run, by path from the repository root: the
/// README, every `docs/*.md`, and the crates' READMEs.
fn documents() -> Vec<(String, String)> {
    const READMES: [&str; 6] =
        ["README.md", "python/README.md", "firmware/README.md", "accel-cuda/README.md", "fuzz/README.md", "assets/README.md"];
    let mut paths: Vec<String> = READMES.map(String::from).to_vec();
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root().join(&p)).unwrap_or_else(|e| panic!("{p}: {e}"));
            (p, text)
        })
        .collect()
}

/// Why the CUDA backend does not open here (`None`: it does), asked once.
fn cuda_absence() -> Option<&'static str> {
    static ABSENCE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ABSENCE
        .get_or_init(|| tessera::open_backend(BackendChoice::Cuda, Parallelism::AllThreads).err().map(|e| e.to_string()))
        .as_deref()
}

/// The command lines a document prints, in order, without the program name.
fn printed_commands(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            let cmd = line.split(" #").next().unwrap_or("").trim();
            if let Some(rest) = cmd.strip_prefix("tessera ").or_else(|| cmd.strip_prefix("cargo run --release -- ")) {
                out.push(rest.to_string());
            }
        } else if line.starts_with('|') {
            // Table cells: the backtick spans that start with the program's name.
            for (i, span) in line.split('`').enumerate() {
                if i % 2 == 1 {
                    if let Some(rest) = span.strip_prefix("tessera ") {
                        out.push(rest.to_string());
                    }
                }
            }
        }
    }
    out
}

/// The files and values the placeholders stand for.
struct Fixture {
    dir: PathBuf,
    data: PathBuf,
    frames: PathBuf,
    gray: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = std::env::temp_dir().join(format!("tessera-readme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = common::shared_data();
        // A short sequence for `stitch IN...`: frames cut from a real photograph (named apart
        // from the `frames` directory the documentation's own examples make).
        let frames = dir.join("fixture-frames");
        let st = tessera()
            .args(["synth-seq", "--frames", "8", "--width", "200", "--height", "160"])
            .arg(data.join("stereo/teddy/im2.png"))
            .arg("-o")
            .arg(&frames)
            .status()
            .unwrap();
        assert!(st.success(), "synth-seq for the stitching fixture failed");
        // The per-image commands' input: a real photograph as 8-bit gray, the type every
        // one of them takes (`box` sums gray images only).
        let gray = dir.join("cones-gray.png");
        let AnyImage::Rgba8(rgb) = tessera::io::load(&data.join("stereo/cones/im2.png")).unwrap() else {
            panic!("cones im2.png is RGB")
        };
        tessera::io::save(&AnyImage::U8(rgb.convert()), &gray).unwrap();
        Fixture { dir, data, frames, gray }
    }

    /// The argument a placeholder stands for in `command`, or `None` for a literal token.
    fn fill(&self, command: &str, token: &str) -> Option<String> {
        let cones = self.data.join("stereo/cones");
        let path = |p: PathBuf| Some(p.display().to_string());
        let temp = |name: &str| path(self.dir.join(name));
        match token {
            "IN" if command == "stitch" => path(self.frames.clone()),
            "IN" => path(self.gray.clone()),
            "LEFT" => path(cones.join("im2.png")),
            "RIGHT" => path(cones.join("im6.png")),
            "GT.png" => path(cones.join("disp2.png")),
            "IMG" => path(root().join("assets/retina.jpg")),
            // The repository's bundled images, named as from its root.
            t if t.starts_with("assets/") => path(root().join(t)),
            "OUT" | "FIXED" => temp(&format!("{command}-{token}.png")),
            "DIR" => temp(&format!("{command}-{token}")),
            // Outputs named with their format, shared between commands (`stereo` writes the
            // DISP.pfm that `stereo-eval` reads).
            "OUT.tif" | "PANO.png" | "R.json" | "MASK.png" | "DISP.pfm" | "DISP.png" => temp(token),
            "W" => Some("9".into()),
            "H" => Some("5".into()),
            "R" => Some("3".into()),
            "A" => Some("1.5".into()),
            "G" => Some("2".into()),
            "N" => Some("0.1".into()),
            "V" => Some("3".into()),
            t if t.chars().any(|c| c.is_ascii_uppercase()) && !t.starts_with('-') => {
                panic!("printed command `tessera {command} ...`: unknown placeholder {t:?}")
            }
            _ => None,
        }
    }
}

/// The concrete argument lists of one printed synopsis.
fn expand(synopsis: &str, fx: &Fixture) -> Vec<Vec<String>> {
    let command = synopsis.split_whitespace().next().unwrap_or_default().to_string();
    // Each token: its alternatives (one for a plain token).
    let tokens: Vec<Vec<String>> = synopsis
        .replace("\\|", "|")
        .split_whitespace()
        .map(|t| t.trim_matches(|c| c == '[' || c == ']'))
        .filter(|t| !t.is_empty() && *t != "...")
        .map(|t| {
            t.trim_end_matches("...")
                .split('|')
                .map(|alt| {
                    // `constant:V` and the like: a placeholder after a colon.
                    match alt.split_once(':') {
                        Some((k, v)) => format!("{k}:{}", fx.fill(&command, v).unwrap_or_else(|| v.to_string())),
                        None => fx.fill(&command, alt).unwrap_or_else(|| alt.to_string()),
                    }
                })
                .collect()
        })
        .collect();
    let first: Vec<String> = tokens.iter().map(|alts| alts[0].clone()).collect();
    let mut runs = vec![first.clone()];
    for (i, alts) in tokens.iter().enumerate() {
        for alt in &alts[1..] {
            let mut run = first.clone();
            run[i] = alt.clone();
            runs.push(run);
        }
    }
    runs
}

fn tessera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
}

#[test]
fn every_command_line_in_the_docs_runs() {
    // Each synopsis with the first document that prints it.
    let mut printed: Vec<(String, String)> = Vec::new();
    for (doc, text) in documents() {
        for synopsis in printed_commands(&text) {
            if !printed.iter().any(|(s, _)| *s == synopsis) {
                printed.push((synopsis, doc.clone()));
            }
        }
    }
    assert!(printed.len() >= 12, "expected the README's command table and the shell blocks, found {printed:?}");
    let fx = Fixture::new();
    // Every concrete command line, once (the same line printed twice, or expanded from two
    // synopses, runs once), with the synopsis and document it came from.
    let mut runs: Vec<(Vec<String>, &str, &str)> = Vec::new();
    for (synopsis, doc) in &printed {
        for mut args in expand(synopsis, &fx) {
            if args[0] == "bench" {
                // The benchmarks take minutes: the smoke-test mode, which runs every case
                // with the fewest repetitions, still parses the printed arguments.
                args.push("--quick".into());
            }
            if !runs.iter().any(|(a, _, _)| *a == args) {
                runs.push((args, synopsis, doc));
            }
        }
    }
    // The benchmarks read and write nothing the other commands do (their plots go to folders
    // of their own): they run beside the others, which keep their printed order (`stereo`
    // writes the DISP.pfm that `stereo-eval` reads).
    let run = |args: &[String]| tessera().current_dir(&fx.dir).args(args).output().unwrap();
    let (benches, others): (Vec<_>, Vec<_>) = runs.iter().partition(|(args, _, _)| args[0] == "bench");
    let outputs: Vec<_> = std::thread::scope(|scope| {
        let benches = scope.spawn(|| benches.iter().map(|r| (*r, run(&r.0))).collect::<Vec<_>>());
        let mut outputs: Vec<_> = others.iter().map(|r| (*r, run(&r.0))).collect();
        outputs.extend(benches.join().unwrap());
        outputs
    });
    let (mut ran, mut skipped) = (0, 0);
    for ((args, synopsis, doc), out) in outputs {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let needs_gpu = args.windows(2).any(|w| w[0] == "--backend" && w[1] == "cuda");
        if let (true, Some(absence)) = (needs_gpu, cuda_absence()) {
            eprintln!("cuda: SKIPPED (no CUDA device): `tessera {}` ({doc}): {absence}", args.join(" "));
            assert!(
                !out.status.success() && stderr.contains(absence),
                "{doc}: `tessera {}` without a GPU must fail saying why ({absence}); stderr:\n{stderr}",
                args.join(" ")
            );
            skipped += 1;
            continue;
        }
        assert!(out.status.success(), "{doc}: command `tessera {synopsis}` as `tessera {}` failed:\n{stderr}", args.join(" "));
        ran += 1;
    }
    eprintln!("{ran} command lines ran, {skipped} need a GPU, from {} printed synopses", printed.len());
    let _ = std::fs::remove_dir_all(&fx.dir);
}

#[test]
fn placeholders_and_choices_expand() {
    let fx = Fixture { dir: "/t".into(), data: "/d".into(), frames: "/f".into(), gray: "/g.png".into() };
    let runs = expand("mean IN... -o OUT [--border reflect101\\|constant:V]", &fx);
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0], ["mean", "/g.png", "-o", "/t/mean-OUT.png", "--border", "reflect101"]);
    assert_eq!(runs[1][5], "constant:3");
    let md = "| a | `tessera box IN -o OUT.tif -m 15` |\n```sh\ncargo run --release -- stitch -o p.png   # demo\n```\n";
    assert_eq!(printed_commands(md), ["box IN -o OUT.tif -m 15", "stitch -o p.png"]);
}

//! `tessera bench <suite>`: medians of repeated runs, printed as a table or as JSON
//! (`{"suite": ..., "results": [{"name", "params", "backend", "median_ms"}]}`), in the
//! shape of `../shared/bench/opencv_anchor.sh` so the two can be compared side by side.

mod filters;
mod gpu;
mod grid;
mod mist;
mod memory;
mod plot;
mod variance;
mod stitch;
mod stereo;

use anyhow::Result;
use serde_json::{json, Value};
use std::time::Instant;
use crate::common::backend_value_parser;
use tessera::{open_backend, Backend, BackendChoice, Opened, Parallelism};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// Box / mean (naive vs recursive, 1 vs all threads), Gaussian, matrix sum and product
    Filters,
    /// Local variance (the paper's Figure 7: six methods), radius sweeps, contrast, glare
    Variance,
    /// Stitching: frame pairs/s (PAL, half PAL, rsz 25/31, NPTS 6/8), NCC evaluations, template-size curve, exhaustive one-template search;
    /// a 10x10 grid of 1392x1040 16-bit tiles (registration and solve, composite to OME-TIFF, peak memory)
    Stitch,
    /// SGM stereo: cones / teddy (costs, path sets, bad 1.0), 1024x440 at 128 disparities,
    /// the original's table (384x288, 512x512, 1024x1024 at 100, AD, MI, hierarchical MI), peak memory
    Stereo,
    /// The GPU verification figures: copy and host link bandwidth, box / mean / Gaussian 4096x4096 f32,
    /// Figure 7, SGM 1024x440 and cones / teddy, matrix product 4096, a 1 000-frame PAL
    /// stitch and the template-size curve against the CPU; kernel time apart on a GPU
    Gpu,
}

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Which suite to run
    #[arg(value_enum)]
    suite: Suite,
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
    /// Backend for the measured operations (cpu, cuda, auto)
    #[arg(long, value_parser = backend_value_parser(), default_value = "cpu")]
    backend: BackendChoice,
    /// One timed call a case, at the smaller sizes (a smoke test, not a measurement)
    #[arg(long)]
    quick: bool,
    /// Run only the cases whose name contains this text (e.g. `cones_census_8path`)
    #[arg(long)]
    filter: Option<String>,
    /// Draw the run's figures as SVG into this folder: time against window size and the
    /// other swept parameters, pairs per second against template size, backends side by side
    #[arg(long, value_name = "DIR")]
    plot: Option<std::path::PathBuf>,
}

/// What a suite gets: the backends to time and how long to spend.
pub struct Bench {
    /// The chosen backend with all threads.
    pub backend: Box<dyn Backend>,
    /// The same backend on one thread (the CPU backend's `Sequential` mode).
    pub single: Box<dyn Backend>,
    /// Most repetitions of one measurement.
    pub reps: usize,
    pub quick: bool,
}

impl Bench {
    /// Repetitions for an operation of about `expected_ms`: enough for a stable median,
    /// few for slow ones.
    pub fn reps_for(&self, expected_ms: f64) -> usize {
        let budget = if self.quick { 200.0 } else { 1500.0 };
        ((budget / expected_ms.max(0.01)) as usize).clamp(if self.quick { 1 } else { 3 }, self.reps)
    }
}

/// The figures a suite records.
#[derive(Default)]
pub struct Recorder {
    results: Vec<Value>,
    filter: Option<String>,
    /// Time kernels apart (CUDA events around each launch) where the backend is a GPU.
    kernel_clock: bool,
    /// `--quick`: one timed call a case (and one interleaved round), after its warm-up.
    quick: bool,
}

/// Runs `f` once, with its kernels' device time where the clock is on and a GPU launched.
fn timed_call<R>(kernel_clock: bool, f: impl FnOnce() -> R) -> (R, f64, Option<f64>) {
    if kernel_clock {
        tessera_cuda::kernel_clock::start();
    }
    let a = Instant::now();
    let r = f();
    let ms = a.elapsed().as_secs_f64() * 1e3;
    let kernel = if kernel_clock { tessera_cuda::kernel_clock::stop() } else { None };
    (r, ms, kernel)
}

fn median(t: &mut [f64]) -> f64 {
    t.sort_by(|a, b| a.total_cmp(b));
    t[t.len() / 2]
}

/// The kernels' median time, where every repetition timed them.
fn kernel_median(kernel: &[Option<f64>]) -> Option<f64> {
    let mut k: Vec<f64> = kernel.iter().copied().collect::<Option<_>>()?;
    (!k.is_empty()).then(|| median(&mut k))
}

impl Recorder {
    /// Whether the case `name` is to run (`--filter`); [`Recorder::time`] skips the others.
    pub fn wants(&self, name: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| name.contains(f))
    }

    /// Whether `--filter` names the case `name`: for the cases too long to run unasked.
    pub fn asks_for(&self, name: &str) -> bool {
        self.filter.as_deref().is_some_and(|f| !f.is_empty() && name.contains(f))
    }

    /// Times `f` (one warm-up call, then `reps` calls) and records its median under `name`.
    /// An operation that fails is recorded with its error instead of a time.
    pub fn time<E: std::fmt::Display>(
        &mut self,
        name: &str,
        params: Value,
        backend: &str,
        reps: usize,
        mut f: impl FnMut() -> Result<(), E>,
    ) -> Option<f64> {
        if !self.wants(name) {
            return None;
        }
        let warm = Instant::now();
        if let Err(e) = f() {
            self.record(name, params, backend, json!({"error": e.to_string()}));
            return None;
        }
        // Fast operations get more repetitions (up to ~0.3 s worth): on a shared machine
        // a median of few millisecond-long runs is mostly noise.
        let warm_ms = warm.elapsed().as_secs_f64() * 1e3;
        let reps = if self.quick {
            1
        } else if reps > 1 {
            reps.max(((300.0 / warm_ms.max(0.01)) as usize).min(101))
        } else {
            reps
        };
        let mut t = Vec::with_capacity(reps.max(1));
        let mut kernel = Vec::with_capacity(reps.max(1));
        for _ in 0..reps.max(1) {
            let (_, ms, k) = timed_call(self.kernel_clock, &mut f);
            t.push(ms);
            kernel.push(k);
        }
        let median = median(&mut t);
        self.push_timing(name, params, backend, median, kernel_median(&kernel));
        Some(median)
    }

    /// Times the cases `f(0)`, `f(1)`, ... (one per entry of `params`) in rounds, one call
    /// of each case a round, and records each case's median over the rounds under `name`,
    /// then `{name}_flatness`: the slowest case's median over the fastest's. For figures
    /// compared with each other (the same operation over a parameter), since the calls of
    /// one round are made within milliseconds and a noisy machine's drift over the minutes
    /// of a case-after-case run falls on all cases alike. A case that fails is recorded
    /// with its error, and no flatness then.
    pub fn time_interleaved<E: std::fmt::Display>(
        &mut self,
        name: &str,
        params: &[Value],
        backend: &str,
        f: impl FnMut(usize) -> Result<(), E>,
    ) -> Option<Vec<f64>> {
        self.time_interleaved_tagged(name, params, &json!({}), backend, f)
    }

    /// [`Recorder::time_interleaved`] with `tag`'s fields (an object) added to the
    /// flatness records' parameters: for several series of one name (a design or shape
    /// each) in one run.
    pub fn time_interleaved_tagged<E: std::fmt::Display>(
        &mut self,
        name: &str,
        params: &[Value],
        tag: &Value,
        backend: &str,
        mut f: impl FnMut(usize) -> Result<(), E>,
    ) -> Option<Vec<f64>> {
        if !self.wants(name) || params.is_empty() {
            return None;
        }
        let warm = Instant::now();
        for (i, p) in params.iter().enumerate() {
            if let Err(e) = f(i) {
                self.record(name, p.clone(), backend, json!({"error": e.to_string()}));
                return None;
            }
        }
        // About 0.5 s of rounds, like `time`'s repetitions of fast operations.
        let round_ms = warm.elapsed().as_secs_f64() * 1e3;
        let rounds = if self.quick { 1 } else { ((500.0 / round_ms.max(0.01)) as usize).clamp(5, 101) };
        let mut t = vec![Vec::with_capacity(rounds); params.len()];
        let mut kernel = vec![Vec::with_capacity(rounds); params.len()];
        for _ in 0..rounds {
            for (i, (times, k)) in t.iter_mut().zip(&mut kernel).enumerate() {
                let (_, ms, kernel_ms) = timed_call(self.kernel_clock, || f(i));
                times.push(ms);
                k.push(kernel_ms);
            }
        }
        let medians: Vec<f64> = t.iter_mut().map(|times| median(times)).collect();
        let mut kernel_medians = Vec::new();
        for ((p, &m), k) in params.iter().zip(&medians).zip(&kernel) {
            let k = kernel_median(k);
            kernel_medians.extend(k);
            self.push_timing(name, p.clone(), backend, m, k);
        }
        let flatness = |m: &[f64]| {
            let (lo, hi) = m.iter().fold((f64::MAX, 0f64), |(lo, hi), &m| (lo.min(m), hi.max(m)));
            round4(hi / lo)
        };
        let mut flat_params = json!({"cases": params.len(), "rounds": rounds});
        if let (Some(p), Some(t)) = (flat_params.as_object_mut(), tag.as_object()) {
            p.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        self.record(&format!("{name}_flatness"), flat_params.clone(), backend, json!(flatness(&medians)));
        if kernel_medians.len() == params.len() {
            self.record(&format!("{name}_kernel_flatness"), flat_params, backend, json!(flatness(&kernel_medians)));
        }
        Some(medians)
    }

    /// Records a timed case: the whole call's median, and the kernels' where timed.
    fn push_timing(&mut self, name: &str, params: Value, backend: &str, median_ms: f64, kernel_ms: Option<f64>) {
        let mut entry = json!({"name": name, "params": params, "backend": backend, "median_ms": round4(median_ms)});
        if let Some(k) = kernel_ms {
            entry["kernel_ms"] = json!(round4(k));
        }
        self.results.push(entry);
    }

    /// The kernel time recorded for the case `name` with `params` (GPU runs only).
    pub fn kernel_ms(&self, name: &str, params: &Value) -> Option<f64> {
        self.results.iter().rev().find(|r| r["name"] == name && &r["params"] == params).and_then(|r| r["kernel_ms"].as_f64())
    }

    /// The median time recorded for the case `name` with `params`.
    pub fn median_ms(&self, name: &str, params: &Value) -> Option<f64> {
        self.results.iter().rev().find(|r| r["name"] == name && &r["params"] == params).and_then(|r| r["median_ms"].as_f64())
    }

    /// Records a figure that is not a time (a count, an error, a memory peak).
    pub fn record(&mut self, name: &str, params: Value, backend: &str, value: Value) {
        self.results.push(json!({"name": name, "params": params, "backend": backend, "value": value}));
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

pub fn run(a: BenchArgs) -> Result<()> {
    // Checked before the suite runs, not after minutes of it.
    if let Some(dir) = a.plot.as_ref().filter(|d| d.exists() && !d.is_dir()) {
        anyhow::bail!("--plot {}: not a folder", dir.display());
    }
    let Opened { backend, fallback } = open_backend(a.backend, Parallelism::AllThreads)?;
    if let Some(note) = fallback {
        eprintln!("note: {note}");
    }
    let single = open_backend(a.backend, Parallelism::Sequential)?.backend;
    let b = Bench { backend, single, reps: if a.quick { 3 } else { 15 }, quick: a.quick };
    let kernel_clock = b.backend.name() == "cuda";
    let mut r = Recorder { filter: a.filter, kernel_clock, quick: a.quick, ..Recorder::default() };
    let suite = match a.suite {
        Suite::Filters => {
            filters::run(&b, &mut r)?;
            "filters"
        }
        Suite::Variance => {
            variance::run(&b, &mut r)?;
            "variance"
        }
        Suite::Stitch => {
            stitch::run(&b, &mut r)?;
            grid::run(&b, &mut r)?;
            mist::run(&mut r)?;
            "stitch"
        }
        Suite::Stereo => {
            stereo::run(&b, &mut r)?;
            "stereo"
        }
        Suite::Gpu => {
            gpu::run(&b, &mut r)?;
            "gpu"
        }
    };
    let machine = machine_description();
    if let Some(dir) = &a.plot {
        for f in plot::write(dir, suite, &machine, &r.results)? {
            eprintln!("wrote {}", f.display());
        }
    }
    if a.json {
        let out = json!({"suite": suite, "machine": machine, "results": r.results});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("suite {suite} on {machine}");
        println!("{:<34} {:<8} {:>12}  params", "name", "backend", "median ms");
        for r in &r.results {
            let figure = match (r.get("median_ms"), r.get("value")) {
                (Some(ms), _) => match r.get("kernel_ms") {
                    Some(k) => format!("{ms} (kernels {k})"),
                    None => format!("{ms}"),
                },
                (None, Some(v)) => format!("{v}"),
                _ => String::new(),
            };
            println!("{:<34} {:<8} {:>12}  {}", r["name"].as_str().unwrap_or(""), r["backend"].as_str().unwrap_or(""), figure, r["params"]);
        }
    }
    Ok(())
}

/// CPU model and thread count, for the record.
pub fn machine_description() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{model}, {} threads", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

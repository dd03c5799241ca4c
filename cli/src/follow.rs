//! `tessera stitch --follow`: live stitching. Frames are registered as they arrive (files
//! appearing in a directory, or file names read from standard input), the panorama and the
//! report are rewritten as they register, and when the input ends (end of standard input,
//! the stop file, SIGINT or SIGTERM) the final panorama and report are written exactly as a
//! batch run on the same frames writes them.
//!
//! Three threads. The watcher lists the directory (or reads standard input) and appends the
//! frames that have arrived to [`Arrivals`]. The run, on this thread, is the core's, over
//! [`Live`]: a [`FrameSource`] that promises one frame more than has arrived while the input
//! lasts, waits for it in `frame` (the run reads ahead only what has arrived), and hands
//! every record to [`Updates`] after each frame.
//! The writer rewrites the intermediate panorama and report when an update is due, from
//! the latest records: a slow write never holds registration up, and updates that fall due
//! while it writes fold into one (only intermediate states are skipped, never a frame).
//!
//! The intermediate panorama ([`Preview`]) is not composited anew from the frames on disk,
//! which would cost a read of every frame so far per update: each frame is read once more
//! as it registers and pasted into a canvas planned with room to grow (twice the extent so
//! far). A frame outside it is the occasion to plan one twice as large and paste the frames
//! so far again, which a sweep does O(log n) times, so pasting costs O(1) reads per frame
//! in all; an update then costs the copy and encoding of the canvas and the report's O(n)
//! JSON. Its positions are the chained ones (the global solve of `close_loops` runs at the
//! end), which the report says: `run.live.final` is false. Memory: the canvas (and its copy
//! while written), the run's few frames, the frame cache, and a record and a file name per
//! frame.

use super::stitch::{self, StitchArgs};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tessera::stitch::{Blend, Canvas, Compositor, Frame, FrameRecord, FrameSource, Panorama, Plan, Similarity, StitchParams, MAX_CANVAS};
use tessera::frames::{self, natural_cmp, Cached};
use tessera::large::{self, Written};
use tessera::{AnyImage, AnyView, BackendChoice, Parallelism};

/// Listings a directory gets, once the input has ended, for the files still growing to stop.
const LAST_LISTINGS: usize = 10;

pub fn run_follow(a: &StitchArgs, p: StitchParams) -> Result<()> {
    let Some(input) = &a.follow else { bail!("internal: live mode without --follow") };
    if a.backend.backend == BackendChoice::Cuda {
        bail!("--follow runs on the CPU: leave out --backend cuda");
    }
    if a.update_every == Some(0) {
        bail!("--update-every must be at least 1");
    }
    if a.update_seconds.is_some_and(|s| !(0.0..=1e6).contains(&s)) {
        bail!("--update-seconds must be within [0, 1e6]");
    }
    if a.poll_ms == 0 {
        bail!("--poll-ms must be at least 1");
    }
    // Found out now, not after an hour of frames.
    for out in [Some(&a.output), a.report.as_ref()].into_iter().flatten() {
        if !folder(out).is_dir() {
            bail!("{}: no such directory to write {} in", folder(out).display(), out.display());
        }
    }
    let seconds = a.update_seconds.or(if a.update_every.is_none() { Some(2.0) } else { None });
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The first signal ends the input; a second, while the final panorama is written,
        // ends the process (registered first, it sees the flag the first one set).
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))?;
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let arrivals = Arc::new(Arrivals::default());
    let poll = Duration::from_millis(a.poll_ms);
    if input.as_os_str() == "-" {
        let reader = Arc::clone(&arrivals);
        std::thread::spawn(move || read_names(&reader));
        let watcher = Arc::clone(&arrivals);
        std::thread::spawn(move || end_on_signal(&stop, poll, &watcher));
        eprintln!("following the file names on standard input");
    } else {
        let watch = Watch::new(input, a)?;
        let watcher = Arc::clone(&arrivals);
        std::thread::spawn(move || watch.run(poll, &stop, &watcher));
        eprintln!("following {} (stop: SIGINT, SIGTERM or a file named {} there)", input.display(), a.stop_file);
    }

    let updates = Updates { every: a.update_every, seconds, latest: Mutex::default(), changed: Condvar::new() };
    let source = Cached::new(Live { arrivals: &arrivals, updates: &updates }, a.frame_cache.saturating_mul(1 << 20));
    let p = tessera::options::scale_min_variance(p, a.register.min_variance, &source);
    let par = if a.backend.single_thread { Parallelism::Sequential } else { Parallelism::AllThreads };
    let t0 = Instant::now();
    let bar = indicatif::ProgressBar::new_spinner();
    let registered = std::thread::scope(|s| {
        let mut writer = Writer { a, p: &p, arrivals: &arrivals, preview: Preview::new(a, p.blend), t0, bar: bar.clone() };
        let updates = &updates;
        let writing = s.spawn(move || writer.run(updates));
        let registered = tessera::stitch::register_frames(&source, &p, par, &mut |_| ControlFlow::Continue(()));
        updates.finish();
        let _ = writing.join();
        registered
    });
    bar.finish_and_clear();
    let (files, ended) = {
        let arrived = arrivals.lock();
        (arrived.files.clone(), arrived.ended.unwrap_or("end of input"))
    };
    if files.is_empty() {
        bail!("no frame arrived before the input ended ({ended})");
    }
    let labels: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let (records, reference) = registered.map_err(|e| stitch::name_frame(e, &labels))?;
    eprintln!("input ended ({ended}): {} frames; writing the final panorama", records.len());
    let (pano, written) = stitch::composite_registered(&source, records, reference, &p, a, &labels)?;
    let live = live_keys(Some(ended), &p, true);
    stitch::conclude(a, &p, &pano, &written, &labels, None, "cpu", t0.elapsed().as_secs_f64(), json!({ "live": live }))
}

/// The report's `run.live`: whether it is the final report (the input `ended`, and why),
/// which positions it holds (chained along the registrations, or solved with the loops
/// closed), and whether the panorama was written with it.
fn live_keys(ended: Option<&str>, p: &StitchParams, panorama: bool) -> Value {
    let solved = ended.is_some() && p.close_loops;
    json!({"final": ended.is_some(), "positions": if solved { "solved" } else { "chained" }, "ended_by": ended, "panorama_written": panorama})
}

/// The frames that have arrived, in order, and why the input ended (once it has): written
/// by the watcher, read by the run and the writer.
#[derive(Default)]
struct Arrivals {
    state: Mutex<Arrived>,
    changed: Condvar,
}

#[derive(Default)]
struct Arrived {
    files: Vec<PathBuf>,
    ended: Option<&'static str>,
}

impl Arrivals {
    fn lock(&self) -> MutexGuard<'_, Arrived> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn push(&self, files: impl IntoIterator<Item = PathBuf>) {
        self.lock().files.extend(files);
        self.changed.notify_all();
    }
    fn end(&self, why: &'static str) {
        self.lock().ended.get_or_insert(why);
        self.changed.notify_all();
    }
    /// File `i` once it has arrived, or `None` if the input ends first.
    fn wait(&self, i: usize) -> Option<PathBuf> {
        let mut arrived = self.lock();
        loop {
            if let Some(f) = arrived.files.get(i) {
                return Some(f.clone());
            }
            if arrived.ended.is_some() {
                return None;
            }
            arrived = self.changed.wait(arrived).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The arrived files as a live [`FrameSource`]: it grows, and waits for its next frame.
struct Live<'a> {
    arrivals: &'a Arrivals,
    updates: &'a Updates,
}

impl FrameSource for Live<'_> {
    fn len(&self) -> usize {
        let arrived = self.arrivals.lock();
        arrived.files.len() + usize::from(arrived.ended.is_none())
    }
    fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
        load_settled(&self.arrivals.wait(i).ok_or("the input ended")?)
    }
    fn recorded(&self, records: &[FrameRecord]) {
        self.updates.offer(records);
    }
    fn ready(&self) -> usize {
        self.arrivals.lock().files.len()
    }
}

/// How long a frame file that does not decode must stay unchanged (size and modification
/// time) before it counts as finished, and at most how long it is waited for.
const SETTLE: Duration = Duration::from_millis(1000);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The frame in the file at `path`. A file that does not decode may still be being written
/// (a writer that paused longer than the watcher's listings, or appends slowly): while it
/// changes, or changed less than [`SETTLE`] ago, it is read again as it grows, for up to
/// [`SETTLE_TIMEOUT`]; then the decoder's message stands and the frame is skipped with it.
fn load_settled(path: &Path) -> Result<Frame<'static>, String> {
    let started = Instant::now();
    let stamp = || std::fs::metadata(path).ok().map(|m| (m.len(), m.modified().ok()));
    loop {
        let before = stamp();
        let why = match frames::load(path) {
            Ok(f) => return Ok(f),
            Err(why) => why,
        };
        // Unchanged for SETTLE: as finished as it will be.
        let settled = loop {
            std::thread::sleep(Duration::from_millis(50));
            let now = stamp();
            let age = now.as_ref().and_then(|s| s.1).and_then(|t| t.elapsed().ok());
            if now != before {
                break false;
            }
            if age.is_none_or(|a| a >= SETTLE) || started.elapsed() >= SETTLE_TIMEOUT {
                break true;
            }
        };
        if settled {
            return Err(why);
        }
    }
}

/// Standard input's lines, each a frame file's name, until its end.
fn read_names(arrivals: &Arrivals) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let name = line.trim_end_matches('\r');
        if !name.trim().is_empty() {
            arrivals.push([PathBuf::from(name)]);
        }
    }
    arrivals.end("end of input");
}

/// Ends the input at the first signal (standard input's reader is blocked in a read).
fn end_on_signal(stop: &AtomicBool, poll: Duration, arrivals: &Arrivals) {
    while arrivals.lock().ended.is_none() {
        if stop.load(Ordering::Relaxed) {
            arrivals.end("signal");
        }
        std::thread::sleep(poll);
    }
}

/// A directory watched for frames: its image files but the hidden ones and the run's own
/// output and report.
struct Watch {
    dir: PathBuf,
    stop_file: PathBuf,
    own: Vec<PathBuf>,
}

impl Watch {
    fn new(dir: &Path, a: &StitchArgs) -> Result<Self> {
        if dir.exists() && !dir.is_dir() {
            bail!("--follow {}: not a directory (--follow takes the directory the frames arrive in, or - for their names on standard input)", dir.display());
        }
        if !dir.is_dir() {
            bail!("--follow {}: no such directory", dir.display());
        }
        let stop_file = dir.join(&a.stop_file);
        if stop_file.exists() {
            bail!("{} exists, and it ends a live run at once: remove it first", stop_file.display());
        }
        // Compared in canonical form: the output may be named relative to another directory.
        let canonical = |p: &Path| Some(folder(p).canonicalize().ok()?.join(p.file_name()?));
        let here = dir.canonicalize().with_context(|| format!("cannot open {}", dir.display()))?;
        // The run's own files, by their name in `dir`.
        let own = [Some(&a.output), a.report.as_ref()].into_iter().flatten().filter_map(|p| canonical(p)?.strip_prefix(&here).ok().map(|n| dir.join(n))).collect();
        Ok(Watch { dir: dir.to_path_buf(), stop_file, own })
    }

    /// The candidate files now, with their sizes, in natural order.
    fn list(&self) -> std::io::Result<Vec<(PathBuf, u64)>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let Ok(entry) = entry else { continue };
            let path = entry.path();
            let hidden = entry.file_name().to_string_lossy().starts_with('.');
            if hidden || !frames::is_image_name(&path) || self.own.contains(&path) {
                continue;
            }
            match entry.metadata() {
                Ok(m) if m.is_file() => files.push((path, m.len())),
                _ => {}
            }
        }
        files.sort_by(|a, b| natural_cmp(&a.0.to_string_lossy(), &b.0.to_string_lossy()));
        Ok(files)
    }

    /// Lists the directory every `poll` and passes on the files that have stopped growing
    /// (the same, non-zero size on two listings) in natural order: a file waits while one
    /// that sorts before it still grows. Once `stop` is set or the stop file appears, the
    /// files still growing get up to [`LAST_LISTINGS`] more listings to stop (then go as
    /// they are), and the input ends.
    fn run(&self, poll: Duration, stop: &AtomicBool, arrivals: &Arrivals) {
        let mut sizes: HashMap<PathBuf, u64> = HashMap::new();
        let mut taken: HashSet<PathBuf> = HashSet::new();
        let mut ending: Option<(&'static str, usize)> = None;
        loop {
            if ending.is_none() {
                if stop.load(Ordering::Relaxed) {
                    ending = Some(("signal", LAST_LISTINGS));
                } else if self.stop_file.exists() {
                    ending = Some(("stop file", LAST_LISTINGS));
                }
            }
            let listed = match self.list() {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("error: cannot list {}: {e}", self.dir.display());
                    return arrivals.end("the directory could not be listed");
                }
            };
            let (mut ready, mut growing) = (Vec::new(), Vec::new());
            for (path, size) in listed.into_iter().filter(|f| !taken.contains(&f.0)) {
                let still = size > 0 && sizes.get(&path) == Some(&size);
                if still && growing.is_empty() {
                    ready.push(path);
                } else {
                    growing.push((path, size));
                }
            }
            if let Some((why, left)) = ending {
                if growing.is_empty() || left == 0 {
                    arrivals.push(ready.into_iter().chain(growing.into_iter().map(|f| f.0)));
                    return arrivals.end(why);
                }
                ending = Some((why, left - 1));
            }
            taken.extend(ready.iter().cloned());
            arrivals.push(ready);
            sizes = growing.into_iter().collect();
            std::thread::sleep(poll);
        }
    }
}

/// The latest records, handed from the run to the writer, and the update rule.
struct Updates {
    /// An update after this many more frames.
    every: Option<usize>,
    /// An update when this many seconds have passed since the last one.
    seconds: Option<f64>,
    latest: Mutex<Latest>,
    changed: Condvar,
}

#[derive(Default)]
struct Latest {
    records: Vec<FrameRecord>,
    /// A frame registered since the writer last took the records.
    fresh: bool,
    done: bool,
}

impl Updates {
    fn lock(&self) -> MutexGuard<'_, Latest> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// After each frame: the run's records so far (an O(n) copy into the same buffer).
    fn offer(&self, records: &[FrameRecord]) {
        let mut latest = self.lock();
        latest.records.clear();
        latest.records.extend_from_slice(records);
        latest.fresh = true;
        self.changed.notify_all();
    }

    fn finish(&self) {
        self.lock().done = true;
        self.changed.notify_all();
    }

    /// Waits until an update is due after one of `written` frames at `since`: the records
    /// to write, or `None` once the run is over.
    fn next(&self, written: usize, since: Instant) -> Option<Vec<FrameRecord>> {
        let mut latest = self.lock();
        loop {
            if latest.done {
                return None;
            }
            let by_count = self.every.is_some_and(|n| latest.records.len() >= written + n);
            let wait = self.seconds.map(|s| Duration::from_secs_f64(s).saturating_sub(since.elapsed()));
            if latest.fresh && (by_count || wait == Some(Duration::ZERO)) {
                latest.fresh = false;
                return Some(std::mem::take(&mut latest.records));
            }
            latest = match wait.filter(|_| latest.fresh) {
                Some(w) => self.changed.wait_timeout(latest, w).unwrap_or_else(|e| e.into_inner()).0,
                None => self.changed.wait(latest).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}

/// The intermediate updates' writer (module doc).
struct Writer<'a> {
    a: &'a StitchArgs,
    p: &'a StitchParams,
    arrivals: &'a Arrivals,
    /// `None` once it is off: an OME-TIFF output, a canvas past the budget, an error.
    preview: Option<Preview>,
    t0: Instant,
    /// Says what the last update wrote.
    bar: indicatif::ProgressBar,
}

impl Writer<'_> {
    fn run(&mut self, updates: &Updates) {
        let (mut written, mut since) = (0, Instant::now());
        while let Some(records) = updates.next(written, since) {
            (written, since) = (records.len(), Instant::now());
            if let Err(e) = self.update(records) {
                self.bar.suspend(|| eprintln!("warning: intermediate update failed: {e:#}"));
            }
        }
    }

    fn update(&mut self, records: Vec<FrameRecord>) -> Result<()> {
        let files: Vec<PathBuf> = self.arrivals.lock().files[..records.len()].to_vec();
        let labels: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        let t = Instant::now();
        let canvas = match self.preview.as_mut().map(|pv| pv.update(&records, &files)) {
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                self.bar.suspend(|| eprintln!("note: no intermediate panorama ({e:#}); the panorama is written at the end"));
                self.preview = None;
                None
            }
            None => None,
        };
        let (canvas, drawn) = match canvas {
            Some(c) => {
                tessera::io::save(&c.image, &self.a.output)?;
                (c, true)
            }
            None => (Canvas { image: AnyImage::U8(tessera::Image::new(1, 1)?), origin: (0, 0) }, false),
        };
        let size = if drawn { canvas.image.size() } else { (0, 0) };
        let ok = records.iter().filter(|r| r.is_ok()).count();
        self.bar.set_message(format!("{} frames, {ok} registered{}", records.len(), if drawn { format!(" -> {}", self.a.output.display()) } else { String::new() }));
        self.bar.tick();
        let Some(path) = &self.a.report else { return Ok(()) };
        // Until a pair registers, the reference is the candidate at (0, 0).
        let reference = records.iter().find(|r| r.is_ok() && r.reference.is_none()).map_or(0, |r| r.index);
        let written = Written { path: self.a.output.clone(), size, origin: canvas.origin, strips: 1, ome: None, seconds: t.elapsed().as_secs_f64(), lost: Vec::new() };
        let mut run = stitch::run_keys("cpu", self.t0.elapsed().as_secs_f64(), &written);
        run["live"] = live_keys(None, self.p, drawn);
        let pano = Panorama { canvas, frames: records, reference };
        let report = tessera::report::report_sized(&pano, size, &labels, None, self.p, run);
        tessera::io::write_bytes(path, serde_json::to_string_pretty(&report)?.as_bytes())
    }
}

/// The intermediate panorama (module doc).
struct Preview {
    blend: Blend,
    /// Bytes the canvas may take (twice over while a copy is written).
    budget: usize,
    canvas: Option<Compositor>,
    /// The position each frame so far was pasted at (`None`: left out).
    pasted: Vec<Option<Similarity>>,
}

impl Preview {
    fn new(a: &StitchArgs, blend: Blend) -> Option<Self> {
        if tessera::large::is_tiled(&a.output) {
            eprintln!("note: an OME-TIFF or OME-Zarr panorama is written at the end only");
            return None;
        }
        let budget = stitch::output_options(a).max_mem_mib.saturating_mul(1 << 20);
        Some(Preview { blend, budget, canvas: None, pasted: Vec::new() })
    }

    /// Pastes the frames registered since the last update (`files` names every frame of
    /// `records`), and returns the canvas cropped to the frames pasted (`None` before any).
    fn update(&mut self, records: &[FrameRecord], files: &[PathBuf]) -> Result<Option<Canvas>> {
        let positions: Vec<_> = records.iter().map(|r| r.pose()).collect();
        if positions.get(..self.pasted.len()) != Some(&self.pasted[..]) {
            // A pasted frame moved or left (the reference passed to a later frame): anew.
            (self.canvas, self.pasted) = (None, Vec::new());
        }
        let mut like = None;
        for i in self.pasted.len()..positions.len() {
            let Some(pos) = positions[i] else { continue };
            let frame = read(&files[i])?;
            let v = frame.view().map_err(|e| anyhow::anyhow!(e))?;
            if !self.canvas.as_mut().is_some_and(|c| c.place(i, pos)) {
                self.canvas = Some(self.plan(&v, &positions[..=i], files)?);
            }
            if let Some(c) = &mut self.canvas {
                c.place(i, pos);
                c.paste(i, &v)?;
            }
            like = Some(frame);
        }
        self.pasted = positions;
        let (Some(canvas), Some(like)) = (&self.canvas, like.or_else(|| self.first(files))) else { return Ok(None) };
        let whole = canvas.clone().finish();
        let view = like.view().map_err(|e| anyhow::anyhow!(e))?;
        let bounds = Plan::with_poses(&view, &self.pasted, MAX_CANVAS)?;
        let at = ((bounds.origin.0 - whole.origin.0) as usize, (bounds.origin.1 - whole.origin.1) as usize);
        Ok(Some(Canvas { image: crop(&whole.image, at, bounds.size)?, origin: bounds.origin }))
    }

    /// A frame pasted, to stand for the frames' size and type.
    fn first(&self, files: &[PathBuf]) -> Option<Frame<'static>> {
        let i = self.pasted.iter().position(Option::is_some)?;
        frames::load(&files[i]).ok()
    }

    /// A canvas for frames like `like` at `positions` with room to grow (half the extent
    /// on each side, where the budget allows), the frames before the last pasted into it
    /// again.
    fn plan(&self, like: &AnyView<'_>, positions: &[Option<Similarity>], files: &[PathBuf]) -> Result<Compositor> {
        let tight = Plan::with_poses(like, positions, MAX_CANVAS)?;
        let (w, h) = tight.size;
        let roomy = Plan { origin: (tight.origin.0 - (w / 2) as i64, tight.origin.1 - (h / 2) as i64), size: (2 * w, 2 * h), at: Vec::new(), turned: Vec::new(), ..tight.clone() };
        let bytes = |plan: &Plan| plan.size.0 * plan.size.1 * large::bytes_per_pixel(like, self.blend) * 2;
        let plan = [roomy, Plan { at: Vec::new(), turned: Vec::new(), ..tight }]
            .into_iter()
            .find(|plan| plan.size.0 * plan.size.1 <= MAX_CANVAS && bytes(plan) <= self.budget)
            .ok_or_else(|| anyhow::anyhow!("a {w}x{h} canvas is over --max-mem"))?;
        let rows = plan.size.1;
        let mut canvas = Compositor::rows(plan, self.blend, 0, rows)?;
        let last = positions.len() - 1;
        for (i, pos) in positions[..last].iter().enumerate() {
            if let Some(pos) = *pos {
                let frame = read(&files[i])?;
                canvas.place(i, pos);
                canvas.paste(i, &frame.view().map_err(|e| anyhow::anyhow!(e))?)?;
            }
        }
        Ok(canvas)
    }
}

/// The directory a file is in (`.` for a bare name).
fn folder(file: &Path) -> &Path {
    file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

fn read(path: &Path) -> Result<Frame<'static>> {
    frames::load(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The `size` pixels of `img` from `at`.
fn crop(img: &AnyImage, (x, y): (usize, usize), (w, h): (usize, usize)) -> Result<AnyImage> {
    Ok(match img {
        AnyImage::U8(i) => AnyImage::U8(i.view().crop(x, y, w, h)?.to_image()),
        AnyImage::U16(i) => AnyImage::U16(i.view().crop(x, y, w, h)?.to_image()),
        AnyImage::F32(i) => AnyImage::F32(i.view().crop(x, y, w, h)?.to_image()),
        AnyImage::Rgba8(i) => AnyImage::Rgba8(i.view().crop(x, y, w, h)?.to_image()),
        AnyImage::U32(_) => bail!("internal: a 32-bit integer canvas"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::stitch::{composite, SkipReason};
    use tessera::Image;

    fn record(index: usize, position: Option<(f64, f64)>) -> FrameRecord {
        let skip = position.is_none().then_some(SkipReason::NoOverlap);
        FrameRecord { index, position, angle: 0.0, scale: 1.0, reference: None, skip, ncc: 1.0, vectors_used: 0, confidence: 1.0, margin: 0.0, evaluations: 0, quality: None, quality_grid: None, residual: None, loop_closure: None, phase_significance: None, island: None, joined: None, island_position: None }
    }

    #[test]
    fn the_preview_is_the_composite_of_the_frames_so_far_as_it_grows() {
        let dir = std::env::temp_dir().join(format!("tessera-preview-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A sweep that leaves the canvas planned around the first frame, and more than once
        // the canvases after it; a skipped frame.
        let sweep = [Some((0.0, 0.0)), Some((7.3, 2.1)), None, Some((19.6, 5.5)), Some((41.2, -3.4)), Some((88.9, 30.2)), Some((-60.5, 12.0))];
        let frames: Vec<Image<u8>> = (0..sweep.len()).map(|i| Image::from_fn(16, 12, |x, y| ((x * 7 + y * 13 + i * 41) % 256) as u8).unwrap()).collect();
        let files: Vec<PathBuf> = frames
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let path = dir.join(format!("f{i}.png"));
                tessera::io::save(&AnyImage::U8(f.clone()), &path).unwrap();
                path
            })
            .collect();
        // Then the reference passes to frame 1: every position changes, the canvas is made anew.
        let moved: Vec<_> = sweep.iter().enumerate().map(|(i, p)| p.filter(|_| i > 0).map(|(x, y)| (x - 7.3, y - 2.1))).collect();
        for blend in [Blend::Overwrite, Blend::Feather] {
            let mut preview = Preview { blend, budget: usize::MAX, canvas: None, pasted: Vec::new() };
            let steps = (1..=sweep.len()).map(|n| &sweep[..n]).chain([&moved[..]]);
            for positions in steps {
                let records: Vec<_> = positions.iter().enumerate().map(|(i, p)| record(i, *p)).collect();
                let got = preview.update(&records, &files).unwrap().unwrap();
                let views: Vec<AnyView<'_>> = frames[..positions.len()].iter().map(|f| AnyView::U8(f.view())).collect();
                assert_eq!(got, composite(&views, positions, blend).unwrap(), "{blend:?}, {positions:?}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

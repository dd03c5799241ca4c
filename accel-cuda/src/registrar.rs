//! A stitching run on the device: the core's run ([`stitch_frames_into`]) with a
//! [`DeviceRegistrar`] that keeps each frame on the device by index (uploaded once while
//! the run may register against it), registers the pairs the run will probably ask for
//! next in one launch ([`PairRegistrar::speculate`], through `ncc.rs`), sums the quality
//! measures of a batch in another (`quality.rs`), and pastes the composite on the device
//! (`stitch.rs`). Where each pair's host work runs is a tuning family ([`HostWork`]).

use crate::device::{DevImage, Gpu};
use crate::ncc::{register_jobs, DeviceSample, Job, NullTables, OnDevice};
use crate::tuning::{self, Design};
use core::ops::ControlFlow;
use std::sync::Mutex;
use tessera_core::choice::Choice;
use tessera_core::image::ImageView;
use tessera_core::stitch::{
    stitch_frames_into, Blend, FrameSource, Gray, PairRegistrar, PairRegistration, PairRequest, Panorama, Pasting, QualityRequest, RegisterParams, StitchParams, WINDOW_MAX,
};
use tessera_core::{AnyView, Error, Parallelism, Result};

/// A grey sample type of a run: its frames among the run's and its slot of the cache.
trait RunSample: DeviceSample {
    /// A grey frame of this type, or `None`.
    fn typed<'a>(g: &Gray<'a>) -> Option<ImageView<'a, Self>>;
    /// This type's slot of a registrar's cache.
    fn cache<'s, 'g>(c: &'s mut Caches<'g>) -> &'s mut Vec<Resident<'g, Self>>;
}

impl RunSample for u8 {
    fn typed<'a>(g: &Gray<'a>) -> Option<ImageView<'a, Self>> {
        if let Gray::U8(v) = g { Some(*v) } else { None }
    }
    fn cache<'s, 'g>(c: &'s mut Caches<'g>) -> &'s mut Vec<Resident<'g, Self>> {
        &mut c.u8
    }
}
impl RunSample for u16 {
    fn typed<'a>(g: &Gray<'a>) -> Option<ImageView<'a, Self>> {
        if let Gray::U16(v) = g { Some(*v) } else { None }
    }
    fn cache<'s, 'g>(c: &'s mut Caches<'g>) -> &'s mut Vec<Resident<'g, Self>> {
        &mut c.u16
    }
}
impl RunSample for f32 {
    fn typed<'a>(g: &Gray<'a>) -> Option<ImageView<'a, Self>> {
        if let Gray::F32(v) = g { Some(*v) } else { None }
    }
    fn cache<'s, 'g>(c: &'s mut Caches<'g>) -> &'s mut Vec<Resident<'g, Self>> {
        &mut c.f32
    }
}

/// Frames kept on the device by a run: a window's (at most `WINDOW_MAX + 2` distinct ones:
/// its frames, the keyframe and the last good frame) and two the run may go back to.
const RESIDENT: usize = WINDOW_MAX + 4;
/// Search scratch (cached coefficients) a speculative launch may take; the pair asked for
/// is registered whatever its own scratch.
const SPECULATION_SCRATCH: usize = 256 << 20;

/// A frame of the run kept on the device, by its index in the source.
struct Resident<'g, T> {
    index: usize,
    image: DevImage<'g, T>,
    terms: (f64, f64),
    used: u64,
}

/// The resident frames of each grey type (a run has one).
#[derive(Default)]
struct Caches<'g> {
    u8: Vec<Resident<'g, u8>>,
    u16: Vec<Resident<'g, u16>>,
    f32: Vec<Resident<'g, f32>>,
}

/// What a pair's registration depends on (the core's `plan_pair` reads the prediction only
/// rounded): a speculative result answers a request with the same key.
#[derive(Clone, Copy, PartialEq)]
struct Key {
    reference: usize,
    moving: usize,
    prediction: (i64, i64),
    params: RegisterParams,
}

impl Key {
    /// `None` for a non-finite prediction (an error, which the pair registered afresh gives).
    fn of(pair: &PairRequest<'_>, p: &RegisterParams) -> Option<Key> {
        let (x, y) = pair.prediction;
        (x.is_finite() && y.is_finite()).then(|| Key { reference: pair.reference.0, moving: pair.moving.0, prediction: (x.round() as i64, y.round() as i64), params: *p })
    }
}

/// What a device stitching run did, for the tests that it uploads each frame once and
/// batches pairs.
#[doc(hidden)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StitchCounts {
    /// Registration uploads of each frame index.
    pub uploads: Vec<usize>,
    /// Search launches.
    pub launches: usize,
    /// Launches of the similarity consensuses' sets (at most one a search launch), and the
    /// pairs whose sets they counted.
    pub consensus_launches: usize,
    pub consensus_pairs: usize,
    /// Pairs the run asked for, and how many of them a speculative launch had registered.
    pub pairs: usize,
    pub speculated: usize,
    /// Pairs registered on the device, a window's pairs the run did not ask for included.
    pub registered: usize,
    /// Launches of the quality sums, and the pairs whose quality measures they summed (a
    /// window's batch in one launch).
    pub quality_launches: usize,
    pub quality_pairs: usize,
    /// Frames uploaded for the composite, and downloads of the canvas.
    pub paste_uploads: usize,
    pub canvas_downloads: usize,
    /// Seconds the run spent inside device calls (on the shim: the kernels' emulation
    /// included); the rest of its time is host work ([`StitchCounts::host_seconds`]).
    pub device_seconds: f64,
    /// The run's wall time, from its first frame to its panorama (the device's start and
    /// teardown left out).
    pub run_seconds: f64,
    /// Device allocations of the whole run (requests its buffer pool could not serve).
    pub allocations: usize,
    /// The host's share of the registrar's calls, by step ([`StitchCounts::core_seconds`]:
    /// the rest of it).
    pub host_steps: HostSteps,
}

impl StitchCounts {
    /// Seconds of the run with no device call in flight: the host's own work, which a
    /// faster device does not shorten.
    pub fn host_seconds(&self) -> f64 {
        (self.run_seconds - self.device_seconds).max(0.0)
    }

    /// The part of [`host_seconds`](Self::host_seconds) outside the [`host_steps`](Self::host_steps):
    /// the core's own work (settling and deciding each frame, its zoom tests and quality
    /// plans, planning the windows, the global solve; a turned sequence's composite, made
    /// on the host), and the registrar's lookups of the pairs it registered ahead.
    pub fn core_seconds(&self) -> f64 {
        (self.host_seconds() - self.host_steps.total()).max(0.0)
    }
}

/// Where the host's time inside a device stitching run's registrar calls goes, in seconds
/// summed over the run: each step's wall time less the device calls in flight during it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostSteps {
    /// The frames of a launch made resident: their checks, and the bookkeeping of their
    /// upload.
    pub uploads: f64,
    /// The pairs' grids, their templates' statistics and texture tests, their null probes
    /// and the search records of their launch.
    pub plans: f64,
    /// The pairs' conclusions from their searches: the consensus of their vectors and its
    /// checks.
    pub conclusions: f64,
    /// The similarity consensuses counted on the device, and their pairs' conclusions
    /// resumed from the counts.
    pub consensus_counts: f64,
    /// The refinement's records, and the registrations made from its shifts.
    pub refinements: f64,
    /// The quality calls: their frames made resident, their plans' records, their answers.
    pub quality: f64,
    /// The composite on the device's canvas, from the canvas's making to the panorama:
    /// reading the frames again, pasting them, the canvas's download.
    pub composite: f64,
}

impl HostSteps {
    /// Each step by name, in the run's order.
    pub fn parts(&self) -> [(&'static str, f64); 7] {
        [
            ("uploads", self.uploads),
            ("plans", self.plans),
            ("conclusions", self.conclusions),
            ("consensus_counts", self.consensus_counts),
            ("refinements", self.refinements),
            ("quality", self.quality),
            ("composite", self.composite),
        ]
    }

    /// Their sum.
    pub fn total(&self) -> f64 {
        self.parts().iter().map(|&(_, t)| t).sum()
    }

    fn add(&mut self, other: &HostSteps) {
        self.uploads += other.uploads;
        self.plans += other.plans;
        self.conclusions += other.conclusions;
        self.consensus_counts += other.consensus_counts;
        self.refinements += other.refinements;
        self.quality += other.quality;
        self.composite += other.composite;
    }
}

struct State<'g> {
    frames: Caches<'g>,
    /// A window's pairs registered in one launch, waiting for their request.
    ahead: Vec<(Key, PairRegistration)>,
    clock: u64,
    counts: StitchCounts,
    /// The run's spaced null records, made once for all its launches.
    null_tables: NullTables,
}

impl Default for State<'_> {
    fn default() -> Self {
        State { frames: Caches::default(), ahead: Vec::new(), clock: 0, counts: StitchCounts::default(), null_tables: NullTables::default() }
    }
}

/// The device's pair registration as the core's stitching run asks for it: frames kept on
/// the device by index (each uploaded once while the run needs it), and the pairs the run
/// will probably ask for next registered in one launch.
struct DeviceRegistrar<'g> {
    gpu: &'g Gpu,
    /// The threads each pair's host work runs on ([`HostWork`]).
    par: Parallelism,
    state: Mutex<State<'g>>,
}

/// The tuning family of where a device stitch does each pair's host work (`tuning.rs`).
const HOST_WORK: &str = "stitch_host_work";
/// The environment variable that overrides the device's choice of `HOST_WORK`.
pub const HOST_WORK_ENV: &str = "TESSERA_STITCH_HOST_WORK";

/// Where a device stitch plans and concludes a window's pairs: the host work between its
/// launches, tens of microseconds a pair (a PAL pair's 64 templates). The same results
/// either way; which is faster depends on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostWork {
    /// On the run's thread, one pair after another (the built-in default): on the shim
    /// on the 2-core VM, 0.087 to 0.099 ms a pair in the run, where the pool's design took
    /// 0.112 to 0.125 (a pair's host work, some tens of microseconds, is about what it
    /// costs to wake a sleeping worker there).
    RunThread,
    /// A pair to a thread, for a host with cores to spare: the run's thread and the pool's
    /// take a launch's pairs in turn as each becomes free (`parallel::map_slots`), for its
    /// plans and for its conclusions.
    Pool,
}

impl Choice for HostWork {
    const WHAT: &'static str = "stitch host work design";
    const ALL: &'static [Self] = &[HostWork::RunThread, HostWork::Pool];
    fn name(self) -> &'static str {
        match self {
            HostWork::RunThread => "run-thread",
            HostWork::Pool => "pool",
        }
    }
}

impl Design for HostWork {
    const FAMILY: &'static str = HOST_WORK;
}

impl<'g> DeviceRegistrar<'g> {
    fn state(&self) -> Result<std::sync::MutexGuard<'_, State<'g>>> {
        self.state.lock().map_err(|_| Error::Backend("stitch registrar poisoned by an earlier panic".into()))
    }

    /// Frame `index` on the device, uploaded unless resident ([`make_resident`](Self::make_resident)).
    fn resident<T: RunSample>(&self, st: &mut State<'g>, batch: u64, index: usize, view: ImageView<'_, T>) -> Result<OnDevice> {
        self.make_resident(st, batch, &[(index, view)])?;
        st.clock += 1;
        let clock = st.clock;
        let r = T::cache(&mut st.frames).iter_mut().find(|r| r.index == index).ok_or_else(|| Error::Backend("internal: a frame made resident is not".into()))?;
        r.used = clock;
        Ok(OnDevice { ptr: r.image.buf.ptr(), terms: r.terms })
    }

    /// Uploads those of `frames` (index, view) not on the device, all in one transfer
    /// ([`Gpu::upload_views`]); for each, the least recently used frame not used since
    /// `batch` (the clock when the current launch began) makes room, while there are more
    /// than [`RESIDENT`].
    fn make_resident<T: RunSample>(&self, st: &mut State<'g>, batch: u64, frames: &[(usize, ImageView<'_, T>)]) -> Result<()> {
        let cache = T::cache(&mut st.frames);
        let mut missing: Vec<(usize, ImageView<'_, T>)> = Vec::new();
        for &(index, view) in frames {
            if !cache.iter().any(|r| r.index == index) && !missing.iter().any(|(m, _)| *m == index) {
                missing.push((index, view));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        // The CPU's first check of a frame: its f32 terms, before anything is uploaded.
        let terms = missing.iter().map(|&(_, view)| T::f32_terms(view)).collect::<Result<Vec<_>>>()?;
        // Room first, so that the new frames can take the buffers of those they replace.
        while cache.len() + missing.len() > RESIDENT {
            let Some(old) = cache.iter().enumerate().filter(|(_, r)| r.used < batch).min_by_key(|(_, r)| r.used).map(|(k, _)| k) else { break };
            cache.swap_remove(old);
        }
        let views: Vec<ImageView<'_, T>> = missing.iter().map(|&(_, view)| view).collect();
        let images = self.gpu.upload_views(&views)?;
        for ((index, _), (image, terms)) in missing.into_iter().zip(images.into_iter().zip(terms)) {
            st.clock += 1;
            let clock = st.clock;
            T::cache(&mut st.frames).push(Resident { index, image, terms, used: clock });
            let uploads = &mut st.counts.uploads;
            if uploads.len() <= index {
                uploads.resize(index + 1, 0);
            }
            uploads[index] += 1;
        }
        Ok(())
    }

    /// Registers `pairs` together ([`register_jobs`]; their frames made resident first).
    fn launch<T: RunSample>(&self, st: &mut State<'g>, pairs: &[PairRequest<'_>], p: &RegisterParams) -> Result<Vec<Result<PairRegistration>>> {
        let batch = st.clock + 1;
        let mut watch = self.gpu.host_watch();
        let typed = pairs.iter().map(typed_pair::<T>).collect::<Result<Vec<_>>>()?;
        let grids = crate::ncc::grids::<T>(pairs.len(), |k| (typed[k].0, typed[k].1, pairs[k].prediction), p, self.par);
        st.counts.host_steps.plans += watch.lap();
        // The moving frame first: its f32 terms are the CPU's first check.
        let frames: Vec<_> = pairs.iter().zip(&typed).flat_map(|(pair, &(reference, moving))| [(pair.moving.0, moving), (pair.reference.0, reference)]).collect();
        self.make_resident(st, batch, &frames)?;
        let mut jobs = Vec::with_capacity(pairs.len());
        for (pair, &(reference, moving)) in pairs.iter().zip(&typed) {
            let m = self.resident(st, batch, pair.moving.0, moving)?;
            let r = self.resident(st, batch, pair.reference.0, reference)?;
            jobs.push(Job { reference, moving, devices: (r, m), prediction: pair.prediction });
        }
        st.counts.host_steps.uploads += watch.lap();
        let (registered, launched) = register_jobs(self.gpu, &jobs, grids, p, self.par, &mut st.null_tables)?;
        st.counts.host_steps.add(&launched.steps);
        st.counts.launches += usize::from(launched.searches);
        st.counts.consensus_launches += usize::from(launched.consensus_pairs > 0);
        st.counts.consensus_pairs += launched.consensus_pairs;
        st.counts.registered += jobs.len();
        Ok(registered)
    }

    fn register_typed<T: RunSample>(&self, pair: &PairRequest<'_>, p: &RegisterParams) -> Result<PairRegistration> {
        let mut st = self.state()?;
        st.counts.pairs += 1;
        if let Some(key) = Key::of(pair, p) {
            if let Some(k) = st.ahead.iter().position(|(a, _)| *a == key) {
                st.counts.speculated += 1;
                return Ok(st.ahead.swap_remove(k).1);
            }
        }
        let state = &mut *st;
        let registered = self.launch::<T>(state, std::slice::from_ref(pair), p)?.pop();
        registered.unwrap_or_else(|| Err(Error::Backend("internal: a launch answered no pair".into())))
    }

    /// Registers a window's planned pairs not yet done in one launch, keeping their results
    /// for the run's requests (the run offers exactly the requests it will make if its
    /// frames stay on the plan). A failure costs only the work: each pair is then
    /// registered afresh when asked (and its error, if any, reported then).
    fn speculate_typed<T: RunSample>(&self, pairs: &[PairRequest<'_>], p: &RegisterParams) -> Result<()> {
        let Some(first) = pairs.first() else { return Ok(()) };
        let mut st = self.state()?;
        // Results for frames the run has passed will never be asked for.
        st.ahead.retain(|(k, _)| k.moving >= first.moving.0);
        // A pair's scratch is at most npts^2 searches of (2 r + 3)^2 coefficients (f64 and
        // a bit each).
        let side = 2 * p.search_radius + 3;
        let per_pair = (p.npts * p.npts * side * side * 9).max(1);
        let most = (SPECULATION_SCRATCH / per_pair).clamp(1, WINDOW_MAX);
        let known = |st: &State<'_>, pair: &PairRequest<'_>| Key::of(pair, p).is_none_or(|key| st.ahead.iter().any(|(a, _)| *a == key));
        let todo: Vec<PairRequest<'_>> = pairs.iter().filter(|pair| !known(&st, pair)).take(most).cloned().collect();
        if todo.is_empty() {
            return Ok(());
        }
        let state = &mut *st;
        let Ok(found) = self.launch::<T>(state, &todo, p) else { return Ok(()) };
        for (pair, registered) in todo.iter().zip(found) {
            // A pair that failed is registered afresh when asked (its error reported then).
            if let (Some(key), Ok(registered)) = (Key::of(pair, p), registered) {
                st.ahead.push((key, registered));
            }
        }
        Ok(())
    }
}

impl DeviceRegistrar<'_> {
    /// The quality measures of registered pairs: their frames made resident, their sums
    /// and measures on the device in one launch ([`crate::quality::quality_measures`]).
    fn quality_typed<T: RunSample>(&self, requests: &[QualityRequest<'_>]) -> Option<Result<Vec<(Option<f64>, Option<f64>)>>> {
        let kernel = T::QUALITY?;
        let mut watch = self.gpu.host_watch();
        let measured = (|| {
            let mut st = self.state()?;
            let batch = st.clock + 1;
            let mut typed = Vec::with_capacity(requests.len());
            let mut size = None;
            for q in requests {
                let (r, m) = (typed_frame::<T>(&q.reference.1)?, typed_frame::<T>(&q.moving.1)?);
                if size.is_some_and(|s| s != r.size()) || r.size() != m.size() {
                    return Err(Error::Backend("internal: quality sums of frames of different sizes".into()));
                }
                size = Some(r.size());
                typed.push((r, m));
            }
            let wanted: Vec<_> = requests.iter().zip(&typed).flat_map(|(q, &(r, m))| [(q.moving.0, m), (q.reference.0, r)]).collect();
            self.make_resident(&mut st, batch, &wanted)?;
            let mut frames = Vec::with_capacity(requests.len());
            for (q, &(r, m)) in requests.iter().zip(&typed) {
                let dm = self.resident(&mut st, batch, q.moving.0, m)?;
                let dr = self.resident(&mut st, batch, q.reference.0, r)?;
                frames.push((dr.ptr, dm.ptr));
            }
            let Some(size) = size else { return Ok(Vec::new()) };
            let pairs: Vec<_> = frames.into_iter().zip(requests.iter().map(|q| &q.plan)).collect();
            let measures = crate::quality::quality_measures(self.gpu, kernel, size, &pairs)?;
            st.counts.quality_launches += 1;
            st.counts.quality_pairs += requests.len();
            if measures.len() != requests.len() {
                return Err(Error::Backend(format!("quality measures of {} pairs for {}", measures.len(), requests.len())));
            }
            st.counts.host_steps.quality += watch.lap();
            Ok(measures)
        })();
        Some(measured)
    }
}

/// The pair's two frames as views of `T` (a run's frames share one type).
fn typed_pair<'a, T: RunSample>(pair: &'a PairRequest<'_>) -> Result<(ImageView<'a, T>, ImageView<'a, T>)> {
    Ok((typed_frame::<T>(&pair.reference.1)?, typed_frame::<T>(&pair.moving.1)?))
}

/// A run's frame as a view of `T`, or the error of a run whose frames differ in type.
fn typed_frame<'a, T: RunSample>(g: &Gray<'a>) -> Result<ImageView<'a, T>> {
    T::typed(g).ok_or(Error::UnsupportedType { op: "stitch", types: "frames of differing pixel types" })
}

/// `by_type!(self.f(gray, args..))`: `self.f::<T>(args..)` for the grey type `T` of `gray`.
macro_rules! by_type {
    ($self:ident . $f:ident ($g:expr, $($a:expr),*)) => {
        match $g {
            Gray::U8(_) => $self.$f::<u8>($($a),*),
            Gray::U16(_) => $self.$f::<u16>($($a),*),
            Gray::F32(_) => $self.$f::<f32>($($a),*),
        }
    };
}

impl PairRegistrar for DeviceRegistrar<'_> {
    fn register(&self, pair: &PairRequest<'_>, p: &RegisterParams) -> Result<PairRegistration> {
        by_type!(self.register_typed(&pair.moving.1, pair, p))
    }
    fn speculate(&self, pairs: &[PairRequest<'_>], p: &RegisterParams) -> Result<()> {
        let Some(first) = pairs.first() else { return Ok(()) };
        by_type!(self.speculate_typed(&first.moving.1, pairs, p))
    }
    fn quality_measures(&self, requests: &[QualityRequest<'_>]) -> Option<Result<Vec<(Option<f64>, Option<f64>)>>> {
        let first = requests.first()?;
        by_type!(self.quality_typed(&first.moving.1, requests))
    }
}

/// Stitches a sequence ([`tessera_core::stitch::stitch_frames`]): the core's run (frame
/// reading, attempts, keyframes, skips, progress and cancellation) with every pair
/// registered on the device and the composite pasted on the device. The same panorama
/// and records as the CPU for integer frames; f32 positions within 1e-3 px.
///
/// Each frame is uploaded once for registration (kept on the device by index while the
/// run may register against it) and once more to be pasted. Each window of the run's
/// planned pairs ([`tessera_core::stitch::WINDOW`] to [`tessera_core::stitch::WINDOW_MAX`] of
/// them) registers in one launch, all their templates in one grid; a request with the same
/// frames, parameters and prediction is answered from that launch, anything else registered
/// afresh, so the result is the CPU run's. Each launch downloads one packed result buffer,
/// and the canvas is downloaded once. The quality measures (`p.quality`) of integer frames are summed on the
/// device (a launch per batch of registered pairs, their frames already resident), those of
/// f32 frames and of turned pairs on the host.
pub(crate) fn stitch(gpu: &Gpu, frames: &dyn FrameSource, p: &StitchParams, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<Panorama> {
    stitch_counted(gpu, frames, p, progress).map(|(pano, _)| pano)
}

/// [`stitch`], with what it did.
pub(crate) fn stitch_counted(gpu: &Gpu, frames: &dyn FrameSource, p: &StitchParams, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<(Panorama, StitchCounts)> {
    let par = Parallelism::AllThreads;
    let host_work = match tuning::chosen::<HostWork>(gpu)? {
        HostWork::RunThread => Parallelism::Sequential,
        HostWork::Pool => par,
    };
    let registrar = DeviceRegistrar { gpu, par: host_work, state: Mutex::new(State::default()) };
    let pasted = crate::stitch::PasteCounts::default();
    // The composite begins when its canvas is made, the registrations all done.
    let composite = std::cell::Cell::new(None);
    let mut canvas = |like: &AnyView<'_>, positions: &[Option<(f64, f64)>], blend: Blend| -> Result<Box<dyn Pasting + '_>> {
        composite.set(Some(gpu.host_watch()));
        crate::stitch::device_canvas(gpu, like, positions, blend, &pasted)
    };
    let (start, device_before) = (std::time::Instant::now(), gpu.device_seconds());
    crate::host_count::resume();
    let pano = stitch_frames_into(frames, p, par, progress, Some(&registrar), &mut canvas);
    crate::host_count::pause();
    let pano = pano?;
    let run_seconds = start.elapsed().as_secs_f64();
    let mut counts = registrar.state()?.counts.clone();
    counts.host_steps.composite = composite.take().map_or(0.0, |mut watch| watch.lap());
    (counts.paste_uploads, counts.canvas_downloads) = (pasted.uploads.get(), pasted.downloads.get());
    (counts.device_seconds, counts.run_seconds, counts.allocations) = (gpu.device_seconds() - device_before, run_seconds, gpu.allocations());
    Ok((pano, counts))
}

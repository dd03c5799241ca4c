//! Where a sequence run's wall time goes: its whole run, and the part spent in its
//! parallel stage (registering a window's planned pairs, module `window`, and a batch of
//! returns over earlier keyframes, module `loops`). On one thread,
//! the rest is the serial fraction that bounds the run's speed-up on many cores (Amdahl:
//! `1 / (s + (1 - s) / n)` on `n` cores), read without a many-core machine.
//!
//! Within the stage, each pair's task is timed too, on whichever thread ran it. On
//! `n` threads, the tasks' summed time over `n` times the stage's wall time is the stage's
//! efficiency (below 1: threads waiting, for a batch's slowest pair or for work), and a
//! task's mean time against one thread's says how much the threads slow one another (shared
//! caches, memory bandwidth, a host's hyper-threads): the speed-up is `n` times the
//! efficiency over that slowdown. A lone pair whose templates spread over the threads counts
//! once, at its wall time.
//!
//! The windows the run planned are counted too, with their frames: how many pairs the
//! parallel stage had at once (module `window`: more where the path is smooth). So are the
//! keyframes' links refined on the whole overlap: made ahead in the stage where the window's
//! plan made the frame a keyframe, or on the run's thread, serial, where it did not; and of
//! those made ahead, how many found their frames smoothed already (a registrar's run
//! smooths them while its launch keeps the run's thread waiting on the device), and how
//! many were refined while the window's quality call kept it waiting.
//!
//! Time is read from the standard library's monotonic clock; a `no_std` build, or a target
//! without 64-bit atomics, records nothing.

use core::sync::atomic::Ordering;
#[cfg(target_has_atomic = "64")]
use core::sync::atomic::AtomicU64 as Nanos;

/// Nanoseconds a run spent in total and in its parallel stage, summed over the runs given
/// the same `StageTimes` ([`super::register_frames_timed`]).
#[derive(Debug, Default)]
pub struct StageTimes {
    total_ns: Nanos,
    parallel_ns: Nanos,
    pair_ns: Nanos,
    pairs: Nanos,
    windows: Nanos,
    window_frames: Nanos,
    links_ahead: Nanos,
    links_on_run: Nanos,
    links_found_smoothed: Nanos,
    links_beside_quality: Nanos,
}

impl StageTimes {
    /// Wall time of the runs, in nanoseconds.
    pub fn total_ns(&self) -> u64 {
        self.total_ns.load(Ordering::Relaxed)
    }

    /// Wall time spent registering windows of planned pairs and batches of returns, in nanoseconds.
    pub fn parallel_ns(&self) -> u64 {
        self.parallel_ns.load(Ordering::Relaxed)
    }

    /// The share of the wall time spent outside the parallel stage: the serial fraction
    /// when the runs were made on one thread. `None` before any time was recorded.
    pub fn serial_fraction(&self) -> Option<f64> {
        let total = self.total_ns();
        (total > 0).then(|| 1.0 - self.parallel_ns().min(total) as f64 / total as f64)
    }

    /// The pairs' registration tasks timed in the stage, and their summed wall time in
    /// nanoseconds.
    pub fn pair_tasks(&self) -> (u64, u64) {
        (self.pairs.load(Ordering::Relaxed), self.pair_ns.load(Ordering::Relaxed))
    }

    /// A pair's mean registration time in the stage, in nanoseconds. `None` before any pair.
    pub fn mean_pair_ns(&self) -> Option<f64> {
        let (pairs, ns) = self.pair_tasks();
        (pairs > 0).then(|| ns as f64 / pairs as f64)
    }

    /// The parallel stage's efficiency on `threads` threads: the pairs' summed time over
    /// `threads` times the stage's wall time. `None` before any time was recorded.
    pub fn stage_efficiency(&self, threads: usize) -> Option<f64> {
        let stage = self.parallel_ns() as f64 * threads as f64;
        (stage > 0.0).then(|| self.pair_tasks().1 as f64 / stage)
    }

    /// The windows planned, and their frames in all.
    pub fn windows(&self) -> (u64, u64) {
        (self.windows.load(Ordering::Relaxed), self.window_frames.load(Ordering::Relaxed))
    }

    /// A window's mean number of frames. `None` before any window.
    pub fn mean_window(&self) -> Option<f64> {
        let (windows, frames) = self.windows();
        (windows > 0).then(|| frames as f64 / windows as f64)
    }

    /// The keyframes' links refined on the whole overlap: made ahead in the parallel stage,
    /// and made on the run's thread.
    pub fn keyframe_links(&self) -> (u64, u64) {
        (self.links_ahead.load(Ordering::Relaxed), self.links_on_run.load(Ordering::Relaxed))
    }

    /// Of the links made ahead, those whose two frames were smoothed already when the link
    /// began: with a registrar, the run smooths a window's link frames on the pool while
    /// the registrar's launch keeps its own thread waiting (module `chain`).
    pub fn keyframe_links_found_smoothed(&self) -> u64 {
        self.links_found_smoothed.load(Ordering::Relaxed)
    }

    /// Of the links made ahead, those refined on the pool while the batch's quality call
    /// ran on the run's thread: with a registrar, whose call waits on its device (module
    /// `window`).
    pub fn keyframe_links_beside_quality(&self) -> u64 {
        self.links_beside_quality.load(Ordering::Relaxed)
    }

    /// `links` links made ahead were refined beside the batch's quality call.
    pub(super) fn links_beside_quality(&self, links: usize) {
        self.links_beside_quality.fetch_add(links as u64, Ordering::Relaxed);
    }

    /// A link made ahead began, its two frames smoothed already (`smoothed`) or not.
    pub(super) fn link_found_smoothed(&self, smoothed: bool) {
        self.links_found_smoothed.fetch_add(smoothed as u64, Ordering::Relaxed);
    }

    /// A keyframe's link refined: `ahead` in the parallel stage, or on the run's thread.
    pub(super) fn keyframe_link(&self, ahead: bool) {
        let slot = if ahead { &self.links_ahead } else { &self.links_on_run };
        slot.fetch_add(1, Ordering::Relaxed);
    }

    /// A window of `frames` frames planned.
    pub(super) fn window(&self, frames: usize) {
        self.windows.fetch_add(1, Ordering::Relaxed);
        self.window_frames.fetch_add(frames as u64, Ordering::Relaxed);
    }

    /// `f()`, its wall time added to the total.
    pub(super) fn whole<R>(&self, f: impl FnOnce() -> R) -> R {
        timed(&self.total_ns, f)
    }

    /// `f()`, its wall time added to the parallel stage's.
    pub(super) fn parallel<R>(&self, f: impl FnOnce() -> R) -> R {
        timed(&self.parallel_ns, f)
    }

    /// `f()`, one pair's registration task in the stage: counted, its wall time added to the
    /// pairs'.
    pub(super) fn pair<R>(&self, f: impl FnOnce() -> R) -> R {
        self.pairs.fetch_add(1, Ordering::Relaxed);
        timed(&self.pair_ns, f)
    }
}

#[cfg(feature = "std")]
fn timed<R>(slot: &Nanos, f: impl FnOnce() -> R) -> R {
    let start = std::time::Instant::now();
    let r = f();
    slot.fetch_add(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    r
}

#[cfg(not(feature = "std"))]
fn timed<R>(_slot: &Nanos, f: impl FnOnce() -> R) -> R {
    f()
}

/// Where a target has no 64-bit atomics (a Cortex-M), nothing is recorded.
#[cfg(not(target_has_atomic = "64"))]
#[derive(Debug, Default)]
struct Nanos;

#[cfg(not(target_has_atomic = "64"))]
impl Nanos {
    fn load(&self, _: Ordering) -> u64 {
        0
    }

    #[allow(dead_code)]
    fn fetch_add(&self, _: u64, _: Ordering) -> u64 {
        0
    }
}

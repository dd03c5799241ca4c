//! Where the CPU backend's work runs: one thread, or rayon's pool. Filters split their
//! output into row bands ([`for_each_band`]); independent jobs map over indices
//! ([`map_indices`], rayon's splitting, for many jobs) or over slots taken in order by
//! whichever thread is free, the caller among them ([`map_slots`], [`map_claimed`], for a
//! few jobs such as a stitching window's pairs); [`alongside`] runs one job on the pool
//! while the caller does another; [`KeepAwake`] keeps the pool's workers polling between
//! a run's parallel stages.

use crate::image::{ImageViewMut, Pixel};
use alloc::vec::Vec;

/// How many threads a CPU operation may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Parallelism {
    /// Everything on the calling thread (the only mode of a `no_std` build).
    Sequential,
    /// Rayon's global pool, work split into row bands.
    #[default]
    AllThreads,
}

impl Parallelism {
    /// Number of workers this setting stands for right now.
    pub fn threads(self) -> usize {
        match self {
            Parallelism::Sequential => 1,
            #[cfg(feature = "parallel")]
            Parallelism::AllThreads => rayon::current_num_threads(),
            #[cfg(not(feature = "parallel"))]
            Parallelism::AllThreads => 1,
        }
    }

    /// Starts the threads this setting runs on, if they are not running yet: rayon's global
    /// pool for `AllThreads` (nothing otherwise). Started lazily, the pool would start at the
    /// first parallel call, when a large image may have taken the memory its threads' stacks
    /// need, and rayon panics when it cannot start; started here, before any image is
    /// read, that is [`Error::Backend`](crate::Error::Backend) instead.
    pub fn start(self) -> crate::Result<()> {
        #[cfg(feature = "parallel")]
        if self == Parallelism::AllThreads {
            static STARTED: std::sync::OnceLock<core::result::Result<(), alloc::string::String>> = std::sync::OnceLock::new();
            // A pool that another caller started first is as good as ours.
            let started = STARTED.get_or_init(|| match rayon::ThreadPoolBuilder::new().build_global() {
                Ok(()) => Ok(()),
                Err(e) if alloc::format!("{e}").contains("already") => Ok(()),
                Err(e) => Err(alloc::format!("the worker threads could not start: {e}")),
            });
            return started.clone().map_err(crate::Error::Backend);
        }
        Ok(())
    }
}

/// Calls `f(first_row, band)` for consecutive row bands of `dst` covering it once.
/// With `AllThreads`, bands run on rayon's pool: `threads * 2` bands (for balance) of at
/// least `min_rows` rows, since every band pays a start-up cost (e.g. filling a window).
pub fn for_each_band<T: Pixel>(
    dst: ImageViewMut<'_, T>,
    par: Parallelism,
    min_rows: usize,
    f: impl Fn(usize, ImageViewMut<'_, T>) + Send + Sync,
) {
    // Bands that cannot fail give an `Ok` result.
    let _ = try_for_each_band(dst, par, min_rows, |y, band| {
        f(y, band);
        Ok(())
    });
}

/// [`for_each_band`] for bands that can fail (a band allocating its own rows of state,
/// which the parallel loop could otherwise only abort on): the first error of a band is
/// the result. Bands already running finish; the output is then incomplete.
pub fn try_for_each_band<T: Pixel>(
    dst: ImageViewMut<'_, T>,
    par: Parallelism,
    min_rows: usize,
    f: impl Fn(usize, ImageViewMut<'_, T>) -> crate::Result<()> + Send + Sync,
) -> crate::Result<()> {
    let h = dst.height();
    let workers = par.threads();
    if workers <= 1 || h <= min_rows {
        return f(0, dst);
    }
    let bands = (workers * 2).min(h.div_ceil(min_rows.max(1))).max(1);
    run_bands(dst, bands, f)
}

/// [`try_for_each_band`] for work whose every band first pays `restart` rows' worth of
/// start-up (a sliding window refilling its running sums over the window's height):
/// bands of at least 4 `restart` rows, so that the restart stays a small share, but up to
/// 8 per worker when that allows (small bands balance better on a busy machine), and a
/// multiple of the worker count (so no worker waits on a last odd band).
pub fn try_for_each_band_restarting<T: Pixel>(
    dst: ImageViewMut<'_, T>,
    par: Parallelism,
    restart: usize,
    f: impl Fn(usize, ImageViewMut<'_, T>) -> crate::Result<()> + Send + Sync,
) -> crate::Result<()> {
    let h = dst.height();
    let workers = par.threads();
    let bands = (h / (4 * restart.max(1))).clamp(workers, 8 * workers) / workers * workers;
    if workers <= 1 || h < 2 * bands {
        return f(0, dst);
    }
    run_bands(dst, bands, f)
}

fn run_bands<T: Pixel>(
    dst: ImageViewMut<'_, T>,
    bands: usize,
    f: impl Fn(usize, ImageViewMut<'_, T>) -> crate::Result<()> + Send + Sync,
) -> crate::Result<()> {
    let rows = dst.height().div_ceil(bands.max(1));
    let parts: Vec<_> = dst.into_row_bands(rows);
    run_parts(parts, &f)
}

#[cfg(feature = "parallel")]
fn run_parts<T: Pixel>(
    parts: Vec<(usize, ImageViewMut<'_, T>)>,
    f: &(impl Fn(usize, ImageViewMut<'_, T>) -> crate::Result<()> + Send + Sync),
) -> crate::Result<()> {
    use rayon::prelude::*;
    parts.into_par_iter().try_for_each(|(y, band)| f(y, band))
}

#[cfg(not(feature = "parallel"))]
fn run_parts<T: Pixel>(
    parts: Vec<(usize, ImageViewMut<'_, T>)>,
    f: &(impl Fn(usize, ImageViewMut<'_, T>) -> crate::Result<()> + Send + Sync),
) -> crate::Result<()> {
    parts.into_iter().try_for_each(|(y, band)| f(y, band))
}

/// Runs `f(i)` for `i in 0..n`, in parallel when allowed. For independent jobs that do
/// not write into one image (templates, frame pairs, path directions).
pub fn for_each_index(n: usize, par: Parallelism, f: impl Fn(usize) + Send + Sync) {
    #[cfg(feature = "parallel")]
    if par.threads() > 1 {
        use rayon::prelude::*;
        (0..n).into_par_iter().for_each(f);
        return;
    }
    let _ = par;
    (0..n).for_each(f);
}

/// Maps `f` over `0..n` into a vector, in parallel when allowed; order is kept.
pub fn map_indices<R: Send>(n: usize, par: Parallelism, f: impl Fn(usize) -> R + Send + Sync) -> Vec<R> {
    #[cfg(feature = "parallel")]
    if par.threads() > 1 {
        use rayon::prelude::*;
        return (0..n).into_par_iter().map(f).collect();
    }
    let _ = par;
    (0..n).map(f).collect()
}

/// Runs `background` on the thread pool while `here` runs on this thread, and returns both
/// results (`background`'s `None` only if it never ran, which a pool that runs every job
/// it is given does not do). For work that must stay on this thread, such as reading from
/// a source that is not shared between threads, done while the pool computes. Without
/// threads, one after the other.
pub fn alongside<A: Send, B>(par: Parallelism, background: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (Option<A>, B) {
    #[cfg(feature = "parallel")]
    if par.threads() > 1 {
        let mut done = None;
        let b = rayon::in_place_scope(|s| {
            s.spawn(|_| done = Some(background()));
            here()
        });
        return (done, b);
    }
    let _ = par;
    (Some(background()), here())
}

/// Maps `f(i, &mut slots[i])` over the slots into a vector, in parallel when allowed; order
/// is kept. For independent jobs that each reuse a buffer of their own.
///
/// Each thread takes the next slot in order as it becomes free, so a slow thread (a vCPU
/// its host serves late) takes fewer; and the calling thread, once no slot is left to
/// take, waits for the ones still running awake (they are already under way, one job each
/// at most), taking up other work queued on the pool meanwhile, instead of going to sleep:
/// woken, it came back up to 0.3 ms late on a shared 2-core VM, on a stitching window of
/// four 0.35 ms pairs.
pub fn map_slots<S: Send, R: Send>(slots: &mut [S], par: Parallelism, f: impl Fn(usize, &mut S) -> R + Send + Sync) -> Vec<R> {
    #[cfg(feature = "parallel")]
    if par.threads() > 1 && slots.len() > 1 {
        return map_slots_claimed(slots, par.threads(), &f);
    }
    let _ = par;
    slots.iter_mut().enumerate().map(|(i, s)| f(i, s)).collect()
}

/// `f(i)` for `i < n` into a vector in order, [`map_slots`]'s way: each thread takes the
/// next index as it becomes free, the caller among them. For a few jobs of some tens of
/// microseconds from a caller outside the pool, which [`map_indices`] would hand whole to
/// the pool's workers, waiting asleep until they are done.
pub fn map_claimed<R: Send>(n: usize, par: Parallelism, f: impl Fn(usize) -> R + Send + Sync) -> Vec<R> {
    let mut units = alloc::vec![(); n];
    map_slots(&mut units, par, |i, _| f(i))
}

/// [`map_slots`] from a caller outside the pool; from one of its workers, every slot on
/// the caller's thread. For jobs run under a lock that other jobs on the pool may take (a
/// device transfer holding its staging chunks): a worker waiting for its helpers runs
/// other queued jobs meanwhile, and one of those taking the same lock would never return.
pub fn map_slots_outside_pool<S: Send, R: Send>(slots: &mut [S], par: Parallelism, f: impl Fn(usize, &mut S) -> R + Send + Sync) -> Vec<R> {
    if !on_pool_thread() {
        return map_slots(slots, par, f);
    }
    slots.iter_mut().enumerate().map(|(i, s)| f(i, s)).collect()
}

/// Whether the calling thread is a worker of a rayon pool (whose idle workers steal what
/// it splits off), rather than a caller outside every pool.
pub fn on_pool_thread() -> bool {
    #[cfg(feature = "parallel")]
    return rayon::current_thread_index().is_some();
    #[cfg(not(feature = "parallel"))]
    false
}

/// `f(i)` for `i < n` into a vector in order, for a few short jobs (a pair's chunks of
/// template searches): [`map_claimed`] from a caller outside the pool, which would otherwise
/// sleep while the workers wake, and from one of its workers while another polls for work
/// ([`KeepAwake`]): that one takes a helper at once, and the caller, done first, waits for
/// the last job without sleeping (rayon's splitting left it asleep until woken, tens of
/// microseconds on the 2-core VM, for a job of some). Otherwise [`map_indices`], where
/// rayon's splitting leaves the jobs to the caller while the other workers are busy with
/// jobs of their own (a tile grid's pairs), and each of `map_claimed`'s helpers would be
/// one more job to queue only to find the call over (a 10 x 10 grid of 16-bit tiles
/// registered 8 % slower so).
pub fn map_few<R: Send>(n: usize, par: Parallelism, f: impl Fn(usize) -> R + Send + Sync) -> Vec<R> {
    if !on_pool_thread() || a_poller_is_idle() {
        return map_claimed(n, par, f);
    }
    map_indices(n, par, f)
}

/// [`map_slots`] on `threads` threads of rayon's current pool: the caller and up to
/// `threads - 1` helpers take slots in order from a shared counter.
///
/// The helpers are jobs the caller does not wait for unless they started: a helper enters
/// through a [`Gate`] before it touches the slots, and the caller, once no slot is left to
/// take, closes the gate and waits only for the helpers inside. A caller outside the pool
/// (the command line's and a library's callers run on their own thread) otherwise waited,
/// at the end of every call, for a sleeping or busy worker to run a helper with nothing
/// left to do: on the 2-core VM, the CUDA stitch's host work spread this way (jobs of some
/// tens of microseconds) took 0.16 to 0.18 ms a pair handed whole to a worker, and 0.11
/// to 0.13 ms through the gate.
#[cfg(feature = "parallel")]
fn map_slots_claimed<S: Send, R: Send>(slots: &mut [S], threads: usize, f: &(impl Fn(usize, &mut S) -> R + Sync)) -> Vec<R> {
    use core::sync::atomic::{AtomicUsize, Ordering};
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    use std::sync::{Arc, Mutex};
    let n = slots.len();
    // Each cell is locked once, by the thread that took its slot.
    let cells: Vec<Mutex<(&mut S, Option<R>)>> = slots.iter_mut().map(|s| Mutex::new((s, None))).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        if k >= n {
            break;
        }
        let mut cell = cells[k].lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (slot, out) = &mut *cell;
        *out = Some(f(k, slot));
    };
    let gate = Arc::new(Gate::default());
    {
        let work: &(dyn Fn() + Sync) = &work;
        // SAFETY: a helper calls `work` only between a successful `Gate::enter` and its
        // `Gate::leave`, and this function returns (or unwinds) only after closing the gate
        // and waiting until no helper is inside, so `work` and what it borrows outlive every
        // call a helper makes; a helper that runs later finds the gate closed.
        let work: &'static (dyn Fn() + Sync) = unsafe { core::mem::transmute::<&(dyn Fn() + Sync), &'static (dyn Fn() + Sync)>(work) };
        for _ in 1..threads.min(n) {
            let gate = Arc::clone(&gate);
            rayon::spawn(move || {
                if gate.enter() {
                    if let Err(panic) = catch_unwind(AssertUnwindSafe(work)) {
                        gate.keep_panic(panic);
                    }
                    gate.leave();
                }
            });
        }
    }
    let mine = catch_unwind(AssertUnwindSafe(work));
    // Every slot is taken, and those still running are on helpers already awake (one job
    // each at most). Other work queued on the pool (the next frames' decoding) is done
    // meanwhile.
    gate.close();
    while !gate.empty() {
        if rayon::yield_now() != Some(rayon::Yield::Executed) {
            for _ in 0..64 {
                core::hint::spin_loop();
            }
            std::thread::yield_now();
        }
    }
    if let Err(panic) = mine {
        resume_unwind(panic);
    }
    if let Some(panic) = gate.take_panic() {
        resume_unwind(panic);
    }
    cells
        .into_iter()
        .map(|cell| cell.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()).1)
        .collect::<Option<Vec<R>>>()
        .unwrap_or_else(|| unreachable!("every slot's job ran: a job's panic is the caller's"))
}

/// Keeps the pool's other workers awake between a run's parallel stages, as an OpenMP
/// runtime keeps its threads spinning for a while after a parallel region: a rayon worker
/// with nothing to do sleeps within some microseconds, and waking it again takes tens of
/// microseconds (a halted vCPU woken by an interrupt on the 2-core VM: some 30 us), paid at
/// the start of each stage that needs it and in its balance at the end. While a
/// `KeepAwake` lives, `threads - 1` workers run a job that polls the pool for work
/// (`rayon::yield_now`, which runs the next job it finds: a stage's helpers, a stolen half)
/// and yields the CPU between polls; each leaves after [`KeepAwake::LINGER`] without work, and
/// [`KeepAwake::rearm`] starts them again. Nothing is kept awake on one thread.
pub struct KeepAwake {
    #[cfg(feature = "parallel")]
    shared: Option<std::sync::Arc<Awake>>,
}

#[cfg(feature = "parallel")]
#[derive(Default)]
struct Awake {
    /// Set when the `KeepAwake` is dropped: the pollers leave.
    stop: core::sync::atomic::AtomicBool,
    /// Pollers running.
    polling: core::sync::atomic::AtomicUsize,
    /// Pollers wanted: the threads but the caller's.
    wanted: usize,
}

impl KeepAwake {
    /// How long a poller stays without finding work: longer than a run's decisions between
    /// two windows, short enough that a run waiting for frames leaves the CPU idle.
    pub const LINGER: core::time::Duration = core::time::Duration::from_millis(1);

    /// Keeps `par`'s other workers awake until dropped (none on one thread).
    pub fn new(par: Parallelism) -> Self {
        #[cfg(feature = "parallel")]
        {
            // No more pollers than the cores beside the caller's: on a pool larger than the
            // machine, a poller would take a core from a thread with work.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let wanted = par.threads().min(cores).saturating_sub(1);
            let awake = KeepAwake { shared: (wanted > 0).then(|| std::sync::Arc::new(Awake { wanted, ..Awake::default() })) };
            awake.rearm();
            awake
        }
        #[cfg(not(feature = "parallel"))]
        {
            let _ = par;
            KeepAwake {}
        }
    }

    /// Starts pollers again where some have left (after a stretch without work), so that
    /// the workers are awake when the next stage starts.
    pub fn rearm(&self) {
        #[cfg(feature = "parallel")]
        if let Some(shared) = &self.shared {
            use core::sync::atomic::Ordering;
            // A place taken before its poller starts, so that two calls at once start no more
            // than are wanted.
            let take = |n: usize| (n < shared.wanted).then_some(n + 1);
            while shared.polling.fetch_update(Ordering::AcqRel, Ordering::Acquire, take).is_ok() {
                let shared = std::sync::Arc::clone(shared);
                rayon::spawn(move || poll(&shared));
            }
        }
    }
}

/// Pollers ([`KeepAwake`]) that found no work at their last poll, in any pool: a hint for
/// [`map_few`] (in a process running two pools at once, one pool's idle poller may send
/// the other's jobs the claimed way; the results are the same either way).
#[cfg(feature = "parallel")]
static IDLE_POLLERS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Whether a worker is polling for work ([`KeepAwake`]): a job queued now starts at once.
fn a_poller_is_idle() -> bool {
    #[cfg(feature = "parallel")]
    return IDLE_POLLERS.load(core::sync::atomic::Ordering::Relaxed) > 0;
    #[cfg(not(feature = "parallel"))]
    false
}

#[cfg(feature = "parallel")]
fn poll(awake: &Awake) {
    use core::sync::atomic::Ordering;
    let mut since = std::time::Instant::now();
    let mut idle = false;
    let mut set_idle = |now: bool| {
        if now != idle {
            idle = now;
            match now {
                true => IDLE_POLLERS.fetch_add(1, Ordering::Relaxed),
                false => IDLE_POLLERS.fetch_sub(1, Ordering::Relaxed),
            };
        }
    };
    while !awake.stop.load(Ordering::Acquire) {
        if rayon::yield_now() == Some(rayon::Yield::Executed) {
            set_idle(false);
            since = std::time::Instant::now();
            continue;
        }
        set_idle(true);
        if since.elapsed() > KeepAwake::LINGER {
            break;
        }
        for _ in 0..64 {
            core::hint::spin_loop();
        }
        std::thread::yield_now();
    }
    set_idle(false);
    awake.polling.fetch_sub(1, Ordering::AcqRel);
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        #[cfg(feature = "parallel")]
        if let Some(shared) = &self.shared {
            shared.stop.store(true, core::sync::atomic::Ordering::Release);
        }
    }
}

/// The way in to a call's slots for its helpers ([`map_slots_claimed`]): the helpers inside,
/// and whether the caller has closed it.
#[cfg(feature = "parallel")]
#[derive(Default)]
struct Gate {
    /// [`Gate::CLOSED`] once closed, plus one for each helper inside.
    state: core::sync::atomic::AtomicUsize,
    /// A helper's panic, for the caller to pass on.
    panic: std::sync::Mutex<Option<std::boxed::Box<dyn core::any::Any + Send>>>,
}

#[cfg(feature = "parallel")]
impl Gate {
    const CLOSED: usize = 1 << (usize::BITS - 1);

    /// Whether a helper may go in (then it must [`Gate::leave`]).
    fn enter(&self) -> bool {
        use core::sync::atomic::Ordering;
        if self.state.fetch_add(1, Ordering::AcqRel) & Self::CLOSED == 0 {
            return true;
        }
        self.state.fetch_sub(1, Ordering::AcqRel);
        false
    }

    fn leave(&self) {
        self.state.fetch_sub(1, core::sync::atomic::Ordering::AcqRel);
    }

    /// No helper enters from now on.
    fn close(&self) {
        self.state.fetch_or(Self::CLOSED, core::sync::atomic::Ordering::AcqRel);
    }

    /// Whether no helper is inside (a helper turned away may pass through a moment).
    fn empty(&self) -> bool {
        self.state.load(core::sync::atomic::Ordering::Acquire) & !Self::CLOSED == 0
    }

    /// Keeps the first helper's panic.
    fn keep_panic(&self, panic: std::boxed::Box<dyn core::any::Any + Send>) {
        let mut kept = self.panic.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.get_or_insert(panic);
    }

    fn take_panic(&self) -> Option<std::boxed::Box<dyn core::any::Any + Send>> {
        self.panic.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;

    #[test]
    fn alongside_returns_both_results() {
        for par in [Parallelism::Sequential, Parallelism::AllThreads] {
            let here = core::cell::Cell::new(0);
            let (pool, mine) = alongside(par, || map_indices(100, par, |i| i * i).iter().sum::<usize>(), || {
                here.set(here.get() + 1);
                7
            });
            assert_eq!((pool, mine, here.get()), (Some(328_350), 7, 1), "{par:?}");
        }
    }

    #[test]
    fn a_failing_band_is_the_result_and_bands_cover_the_image_once() {
        for par in [Parallelism::Sequential, Parallelism::AllThreads] {
            let mut img = Image::<u8>::new(3, 100).unwrap();
            try_for_each_band(img.view_mut(), par, 4, |y0, mut band| {
                for i in 0..band.height() {
                    band.row_mut(i).iter_mut().for_each(|v| *v += 1 + (y0 + i) as u8 % 2);
                }
                Ok(())
            })
            .unwrap();
            assert!((0..100).all(|y| img.row(y).iter().all(|&v| v == 1 + y as u8 % 2)));
            // Whichever band fails (the one holding row 60, or the first), its error is the result.
            for bad_row in [60, 0] {
                let r = try_for_each_band_restarting(img.view_mut(), par, 3, |y0, band| {
                    if (y0..y0 + band.height()).contains(&bad_row) {
                        Err(crate::Error::OutOfMemory { bytes: 7 })
                    } else {
                        Ok(())
                    }
                });
                assert!(matches!(r, Err(crate::Error::OutOfMemory { bytes: 7 })), "{par:?}: {r:?}");
            }
        }
    }

    #[test]
    fn map_slots_gives_each_job_its_own_slot_in_order_on_one_thread_and_many() {
        for par in [Parallelism::Sequential, Parallelism::AllThreads] {
            let mut slots: Vec<Vec<u64>> = (0..8).map(|_| Vec::new()).collect();
            let sums = map_slots(&mut slots, par, |i, s| {
                s.extend((0..100).map(|k| k * i as u64));
                s.iter().sum::<u64>()
            });
            assert_eq!(sums, (0..8).map(|i| 4950 * i).collect::<Vec<u64>>());
            assert!(slots.iter().enumerate().all(|(i, s)| s.len() == 100 && s[1] == i as u64));
            assert_eq!(map_claimed(50, par, |i| i * i), (0..50).map(|i| i * i).collect::<Vec<_>>());
        }
    }

    /// `map_few` gives its results in order from outside the pool and from a worker of it.
    #[cfg(feature = "parallel")]
    #[test]
    fn map_few_keeps_order_outside_the_pool_and_inside() {
        let want: Vec<usize> = (0..37).map(|i| i * 3 + 1).collect();
        for par in [Parallelism::Sequential, Parallelism::AllThreads] {
            assert_eq!(map_few(37, par, |i| i * 3 + 1), want);
            let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
            assert_eq!(pool.install(|| map_few(37, par, |i| i * 3 + 1)), want);
            assert!(pool.install(|| map_few(0, par, |i| i)).is_empty());
        }
    }

    /// While a `KeepAwake` lives, the pool's other workers poll for work (none on one
    /// thread); they leave when it is dropped, or after a stretch without work, and
    /// `rearm` starts them again. Jobs handed out meanwhile, from a worker, keep their
    /// order.
    #[cfg(feature = "parallel")]
    #[test]
    fn keep_awake_polls_on_the_other_workers_until_dropped_or_idle() {
        use core::sync::atomic::Ordering;
        let polling = |a: &KeepAwake| a.shared.as_ref().map_or(0, |s| s.polling.load(Ordering::Acquire));
        let settles = |a: &KeepAwake, want: usize| {
            let start = std::time::Instant::now();
            while polling(a) != want {
                assert!(start.elapsed() < std::time::Duration::from_secs(20), "{} pollers, not {want}", polling(a));
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        };
        assert!(KeepAwake::new(Parallelism::Sequential).shared.is_none());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        pool.install(|| {
            let awake = KeepAwake::new(Parallelism::AllThreads);
            // Two beside the caller, unless the machine has fewer cores than the pool threads.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let wanted = 3usize.min(cores) - 1;
            assert_eq!(awake.shared.as_ref().map_or(0, |s| s.wanted), wanted);
            let want: Vec<usize> = (0..37).map(|i| i * 3 + 1).collect();
            assert_eq!(map_few(37, Parallelism::AllThreads, |i| i * 3 + 1), want);
            let mut slots = [0usize; 5];
            let nested = map_slots(&mut slots, Parallelism::AllThreads, |i, s| {
                *s = map_few(7, Parallelism::AllThreads, |j| i + j).iter().sum();
                *s
            });
            assert_eq!(nested, (0..5).map(|i| 7 * i + 21).collect::<Vec<_>>());
            // Without work for longer than they linger, the pollers leave; re-armed, they poll again.
            settles(&awake, 0);
            awake.rearm();
            assert_eq!(polling(&awake), wanted);
            let Some(shared) = awake.shared.clone() else { return };
            drop(awake);
            let start = std::time::Instant::now();
            while shared.polling.load(Ordering::Acquire) != 0 {
                assert!(start.elapsed() < std::time::Duration::from_secs(20), "pollers still running after the drop");
                std::thread::yield_now();
            }
        });
    }

    /// A job that panics, on whichever thread takes it, is the caller's panic: the wait for
    /// the jobs still running ends, and nothing hangs.
    #[cfg(feature = "parallel")]
    #[test]
    fn a_panicking_slot_job_panics_the_caller_and_does_not_hang() {
        for bad in [0, 3, 7] {
            let mut slots = [0u64; 8];
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                map_slots(&mut slots, Parallelism::AllThreads, |i, s| {
                    // Long enough that the other threads take slots too.
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    assert!(i != bad, "job {i} fails");
                    *s = i as u64;
                })
            }));
            assert!(caught.is_err(), "job {bad}");
        }
    }

    /// From outside the pool, with every worker busy: the caller takes every slot itself
    /// and returns without waiting for a helper to start; the helpers, run later, find the
    /// call over.
    #[cfg(feature = "parallel")]
    #[test]
    fn map_slots_from_outside_the_pool_does_not_wait_for_busy_workers() {
        use std::sync::{atomic::{AtomicUsize, Ordering}, mpsc, Arc, Barrier};
        let workers = rayon::current_num_threads();
        let (busy, release) = (Arc::new(AtomicUsize::new(0)), Arc::new(Barrier::new(workers + 1)));
        for _ in 0..workers {
            let (busy, release) = (Arc::clone(&busy), Arc::clone(&release));
            rayon::spawn(move || {
                busy.fetch_add(1, Ordering::SeqCst);
                release.wait();
            });
        }
        while busy.load(Ordering::SeqCst) < workers {
            std::thread::yield_now();
        }
        let (done, answer) = mpsc::channel();
        let caller = std::thread::spawn(move || {
            let mut slots = [0usize; 4];
            let got = map_slots(&mut slots, Parallelism::AllThreads, |i, s| {
                *s = i + 1;
                10 * i
            });
            let _ = done.send((got, slots));
        });
        let answered = answer.recv_timeout(std::time::Duration::from_secs(20));
        release.wait();
        caller.join().unwrap();
        assert_eq!(answered.unwrap(), (alloc::vec![0, 10, 20, 30], [1, 2, 3, 4]));
    }

    /// Nested inside a job of another `map_slots`, as a window's pair may spread its own
    /// work: every level's results, in order.
    #[cfg(feature = "parallel")]
    #[test]
    fn map_slots_nests() {
        let mut outer = [0usize; 6];
        let got = map_slots(&mut outer, Parallelism::AllThreads, |i, o| {
            let mut inner = [0usize; 5];
            let sums = map_slots(&mut inner, Parallelism::AllThreads, |j, s| {
                *s = i * 10 + j;
                *s
            });
            *o = sums.iter().sum();
            *o
        });
        assert_eq!(got, (0..6).map(|i| 50 * i + 10).collect::<Vec<_>>());
    }
}

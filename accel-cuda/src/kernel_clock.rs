//! Kernel time, apart from end-to-end time: while the clock runs, each launch on the real
//! GPU is bracketed by two CUDA events on the launch's (default) stream, and
//! [`stop`] sums the launches' device times. Uploads, downloads, host work and the gaps
//! between launches are left out, which is what a benchmark reports as "kernel time"
//! beside the whole call's time. The shim has no device clock: it records nothing.
//!
//! The clock is process-wide (one GPU context per process) and meant for benchmarks,
//! which time one operation at a time.

use cudarc::driver::{result, sys};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static RUNNING: AtomicBool = AtomicBool::new(false);
static EVENTS: Mutex<Events> = Mutex::new(Events { spare: Vec::new(), pending: Vec::new() });

struct Events {
    /// Events created earlier, free for reuse (creating one costs a driver call).
    spare: Vec<usize>,
    /// (start, end) of each launch since [`start`].
    pending: Vec<(usize, usize)>,
}

fn event(events: &mut Events) -> Option<sys::CUevent> {
    match events.spare.pop() {
        Some(e) => Some(e as sys::CUevent),
        None => result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).ok(),
    }
}

/// Runs `launch` (a kernel launch in the current context), timed if the clock runs. A
/// failure to make events only leaves the launch untimed.
pub(crate) fn timed<R>(launch: impl FnOnce() -> R) -> R {
    if !RUNNING.load(Ordering::Relaxed) {
        return launch();
    }
    let Ok(mut events) = EVENTS.lock() else { return launch() };
    let (Some(start), Some(end)) = (event(&mut events), event(&mut events)) else { return launch() };
    // SAFETY: events just created (or reused) in this context, recorded on the legacy
    // default stream the launches use.
    let recorded = unsafe { result::event::record(start, std::ptr::null_mut()) }.is_ok();
    let r = launch();
    // SAFETY: as above.
    if recorded && unsafe { result::event::record(end, std::ptr::null_mut()) }.is_ok() {
        events.pending.push((start as usize, end as usize));
    } else {
        events.spare.extend([start as usize, end as usize]);
    }
    r
}

/// Starts the clock at zero (launches before it are forgotten).
pub fn start() {
    RUNNING.store(true, Ordering::Relaxed);
    if let Ok(mut events) = EVENTS.lock() {
        let done: Vec<(usize, usize)> = events.pending.drain(..).collect();
        for (a, b) in done {
            events.spare.extend([a, b]);
        }
    }
}

/// Stops the clock: the summed device time in milliseconds of the kernels launched since
/// [`start`] (waiting for them to finish), or `None` where none was timed (no GPU, the
/// shim, or the clock was not started). Call it from the thread that launched, which
/// holds the GPU's context.
pub fn stop() -> Option<f64> {
    RUNNING.store(false, Ordering::Relaxed);
    let mut events = EVENTS.lock().ok()?;
    if events.pending.is_empty() {
        return None;
    }
    let pending: Vec<(usize, usize)> = events.pending.drain(..).collect();
    let mut total = 0.0f64;
    let mut ok = true;
    for &(a, b) in &pending {
        // SAFETY: both events were recorded by `timed` and are not destroyed (kept in the pool).
        let ms = unsafe { result::event::synchronize(b as sys::CUevent).and_then(|_| result::event::elapsed(a as sys::CUevent, b as sys::CUevent)) };
        match ms {
            Ok(ms) => total += ms as f64,
            Err(_) => ok = false,
        }
        events.spare.extend([a, b]);
    }
    ok.then_some(total)
}

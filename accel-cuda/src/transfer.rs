//! Host <-> device transfers through page-locked ("pinned") staging chunks.
//!
//! A copy from pageable memory runs at a fraction of the host link's bandwidth (the driver
//! stages it through its own small pinned buffer, one piece after another, on the calling
//! thread: about 8 GB/s measured on an H200). Here a transfer is cut into chunks; each
//! chunk is copied by the host between the caller's memory and a pinned staging chunk
//! while the DMA of the previous chunks runs, the DMA itself an asynchronous copy on a
//! stream of its own, and a few of the host's pool threads share the chunks, each part with
//! two staging chunks (one being copied by the host while the other is in flight), no
//! thread started for a transfer. Several transfers
//! can share the threads in one call (`upload_many`: a stitch window's frames), and
//! consecutive transfers start on alternate chunks, so that a small upload does not wait
//! for the DMA of the one just before it.
//!
//! The staging chunks come from a bounded pool, allocated on first use and reused by every
//! later transfer; each carries an event recorded after the last DMA that used it, waited
//! for before the chunk is written again. Pinning is fallible: where the pool cannot get a
//! single chunk (pinning failed, or its cap is zero), transfers take the device's pageable
//! path and keep working; a failed pinning is not retried.
//!
//! Ordering with the legacy default stream, which every launch, memset and pageable copy
//! uses: an upload's stream first waits for an event recorded on the legacy stream (a
//! pooled buffer may still be read by an earlier kernel), and the legacy stream waits for
//! the upload's last copy, so the next launch sees the data. An upload returns once the
//! caller's memory has been copied into staging, with its DMA possibly still running. A
//! download's stream waits for the legacy stream likewise, and a download returns once
//! every chunk has landed in the caller's memory.
//!
//! The logic is written once over the [`Device`] primitives (pinned allocations, streams,
//! events, asynchronous copies). The CPU shim implements them with queues that run a
//! stream's copies only when an event of it is waited for, so an ordering mistake here
//! (a chunk written before its DMA read it, a launch before the data arrived) changes the
//! shim tests' results.
//!
//! Where a kernel could start on the first chunks: a band of rows is a transfer of its own
//! into part of an image ([`crate::device::Gpu::upload_into`]), and each transfer makes the
//! legacy stream wait for its own copies only.

use crate::device::{Device, DevicePtr};
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tessera_core::parallel::{map_slots_outside_pool, Parallelism};
use tessera_core::Error;

/// A stream of the device (a `CUstream`; an index in the shim). [`LEGACY`] is the legacy
/// default stream.
pub(crate) type Stream = u64;
/// An event of the device (a `CUevent`; an index in the shim).
pub(crate) type Event = u64;
/// The legacy default stream: launches, memsets and pageable copies.
pub(crate) const LEGACY: Stream = 0;

/// How transfers are staged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StagingConfig {
    /// Bytes of one staging chunk: one DMA.
    pub chunk: usize,
    /// Parts a transfer's chunks are shared in, each with up to two staging chunks, copied at
    /// once by as many of rayon's threads as are free.
    pub workers: usize,
    /// Most bytes of pinned memory the pool holds (whole chunks).
    pub cap: usize,
    /// Transfers shorter than this take the pageable path: the staged path's fixed cost
    /// (a few events and stream waits, tens of microseconds) outweighs its speed there.
    pub min_bytes: usize,
}

/// Environment variable: `off` makes every transfer pageable (for comparisons).
pub(crate) const STAGING_ENV: &str = "TESSERA_CUDA_STAGING";

impl StagingConfig {
    /// For the GPU: 4 MiB chunks (DMAs that size run at the link's rate), up to 4 threads
    /// (a host thread copies pageable to pinned memory at about 10 GB/s, below a PCIe 5
    /// link), 64 MiB of pinned memory at most, transfers from 256 KiB. `TESSERA_CUDA_STAGING=off`
    /// gives a cap of zero.
    pub(crate) fn for_gpu() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let off = std::env::var(STAGING_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("off"));
        StagingConfig { chunk: 4 << 20, workers: threads.clamp(1, 4), cap: if off { 0 } else { 64 << 20 }, min_bytes: 256 << 10 }
    }

    /// For the CPU shim, so that every shim test's transfers take the staged path through
    /// many chunks: chunks of a prime number of bytes (elements cut across chunks), three
    /// threads sharing them (one under ThreadSanitizer, which does not see the standard
    /// library's locks order the threads' copies), a pool of six chunks reused by every
    /// transfer longer than that, no minimum size.
    #[cfg(feature = "shim")]
    pub(crate) fn for_shim() -> Self {
        let workers = if cfg!(shim_sanitizer = "thread") { 1 } else { 3 };
        StagingConfig { chunk: 65521, workers, cap: 6 * 65521, min_bytes: 1 }
    }

    /// Slots the pool may hold.
    fn max_slots(&self) -> usize {
        self.cap.checked_div(self.chunk).unwrap_or(0).min(2 * self.workers.max(1))
    }
}

/// One pinned staging chunk and the event recorded after the last DMA that used it.
struct Slot {
    ptr: usize,
    event: Event,
}

/// The streams, events and staging chunks, created on the first staged transfer.
struct Resources {
    up: Stream,
    down: Stream,
    /// Recorded on the legacy stream before a transfer; its stream waits for it.
    enter: Event,
    /// Recorded after an upload's last copy; the legacy stream waits for it.
    done: Event,
    slots: Vec<Slot>,
}

#[derive(Default)]
struct State {
    resources: Option<Resources>,
    /// Creating streams or events, or pinning a first chunk, failed: pageable from then on.
    failed: bool,
    /// Pinning a further chunk failed: the pool stays at its size.
    full: bool,
    /// Where the next upload's chunks start among each worker's slots: consecutive small
    /// uploads alternate slots, so each finds its slot's last DMA long done instead of
    /// waiting for the one just issued.
    turn: usize,
}

/// The staged transfers of one device: the pool of pinned chunks and its streams.
pub(crate) struct Staging {
    config: StagingConfig,
    state: Mutex<State>,
    staged: AtomicU64,
    pageable: AtomicU64,
}

/// Transfers made so far by each path (for the tests that a path was taken).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TransferCounts {
    pub staged: u64,
    pub pageable: u64,
}

impl Staging {
    pub(crate) fn new(config: StagingConfig) -> Self {
        Staging { config, state: Mutex::new(State::default()), staged: AtomicU64::new(0), pageable: AtomicU64::new(0) }
    }

    #[cfg(test)]
    pub(crate) fn counts(&self) -> TransferCounts {
        TransferCounts { staged: self.staged.load(Ordering::Relaxed), pageable: self.pageable.load(Ordering::Relaxed) }
    }

    fn chunks(&self, bytes: usize) -> usize {
        bytes.div_ceil(self.config.chunk.max(1))
    }

    /// Copies `src` to `dst` (an allocation at least as long); see the module's ordering.
    pub(crate) fn upload(&self, dev: &dyn Device, dst: DevicePtr, src: &[u8]) -> Result<(), Error> {
        self.upload_many(dev, &[(dst, src)])
    }

    /// Copies each `(dst, src)` of `transfers` as [`upload`](Self::upload) does, the chunks
    /// of all of them shared among the workers at once: a window's frames are copied into
    /// staging on several threads rather than one after another.
    pub(crate) fn upload_many(&self, dev: &dyn Device, transfers: &[(DevicePtr, &[u8])]) -> Result<(), Error> {
        let transfers: Vec<(DevicePtr, &[u8])> = transfers.iter().copied().filter(|(_, src)| !src.is_empty()).collect();
        // Small transfers take the pageable path (one driver call each), the rest share the
        // staging.
        let (staged, small): (Vec<_>, Vec<_>) = transfers.into_iter().partition(|(_, src)| src.len() >= self.config.min_bytes);
        for (dst, src) in small {
            self.pageable.fetch_add(1, Ordering::Relaxed);
            dev.upload(dst, src)?;
        }
        let chunks: usize = staged.iter().map(|(_, src)| self.chunks(src.len())).sum();
        if chunks == 0 {
            return Ok(());
        }
        let Some(state) = self.lock_for(dev, chunks) else {
            self.pageable.fetch_add(staged.len() as u64, Ordering::Relaxed);
            return staged.into_iter().try_for_each(|(dst, src)| dev.upload(dst, src));
        };
        self.staged.fetch_add(staged.len() as u64, Ordering::Relaxed);
        let pieces = staged.iter().flat_map(|&(dst, src)| src.chunks(self.config.chunk).enumerate().map(move |(k, c)| (dst + (k * self.config.chunk) as u64, Chunk::Bytes(c))));
        self.staged_upload(dev, state, pieces.collect())
    }

    /// Copies `len` bytes to `dst` laid out as `pieces` (each `(offset, bytes)`, in order and
    /// apart; the bytes between them zero) in one staged transfer, each pinned chunk filled
    /// from the pieces it covers: records that lie apart (a launch's, one set a pair) are
    /// gathered where the transfer copies them anyway, not packed into one host buffer first.
    /// Without staging, packed and copied on the pageable path.
    pub(crate) fn upload_gathered(&self, dev: &dyn Device, dst: DevicePtr, len: usize, pieces: &[(usize, &[u8])]) -> Result<(), Error> {
        if pieces.iter().any(|&(at, bytes)| at.checked_add(bytes.len()).is_none_or(|end| end > len)) || pieces.windows(2).any(|w| w[0].0 + w[0].1.len() > w[1].0) {
            return Err(Error::Backend("internal: gathered pieces out of order or beyond their transfer".into()));
        }
        if len == 0 {
            return Ok(());
        }
        let chunks = self.chunks(len);
        let Some(state) = self.lock_for(dev, chunks) else {
            self.pageable.fetch_add(1, Ordering::Relaxed);
            let mut packed = Vec::new();
            packed.try_reserve_exact(len).map_err(|_| Error::OutOfMemory { bytes: len })?;
            packed.resize(len, 0);
            // SAFETY: `packed` holds `len` bytes, the span of the one chunk.
            unsafe { Chunk::Gathered { from: 0, len, pieces }.copy_into(packed.as_mut_ptr()) };
            return dev.upload(dst, &packed);
        };
        self.staged.fetch_add(1, Ordering::Relaxed);
        let chunk = self.config.chunk;
        let spans = (0..chunks).map(|k| (dst + (k * chunk) as u64, Chunk::Gathered { from: k * chunk, len: chunk.min(len - k * chunk), pieces }));
        self.staged_upload(dev, state, spans.collect())
    }

    /// The staged copies of `chunks` (each a destination and its chunk's bytes), shared
    /// among the workers, `state` locked with enough slots ([`lock_for`](Self::lock_for)).
    fn staged_upload(&self, dev: &dyn Device, mut state: std::sync::MutexGuard<'_, State>, chunks: Vec<(DevicePtr, Chunk<'_>)>) -> Result<(), Error> {
        let turn = state.turn;
        state.turn = state.turn.wrapping_add(1);
        let Some(res) = state.resources.as_ref() else { return Err(Error::Backend("internal: staging locked without its resources".into())) };
        let jobs = Jobs::new(res.slots.len(), chunks.len(), self.config.workers);
        // The buffers may still be read by kernels launched before: wait for those.
        dev.record(res.enter, LEGACY)?;
        dev.stream_wait(res.up, res.enter)?;
        let mut parts: Vec<Vec<(DevicePtr, Chunk<'_>)>> = (0..jobs.workers).map(|_| Vec::new()).collect();
        for (k, piece) in chunks.into_iter().enumerate() {
            parts[k % jobs.workers].push(piece);
        }
        let abort = AtomicBool::new(false);
        let work = |w: usize, part: Vec<(DevicePtr, Chunk<'_>)>| upload_worker(dev, &res.slots[jobs.slots(w)], turn, res.up, part, &abort);
        let copied = jobs.run(parts, &abort, work);
        // Even after a failure, the legacy stream (and `quiesce`) must wait for the copies
        // issued: they read staging chunks and write device memory.
        let ordered = dev.record(res.done, res.up).and_then(|_| dev.stream_wait(LEGACY, res.done));
        copied.and(ordered)
    }

    /// Copies from `src` into `dst` after every launch before it has finished.
    pub(crate) fn download(&self, dev: &dyn Device, dst: &mut [MaybeUninit<u8>], src: DevicePtr) -> Result<(), Error> {
        if dst.is_empty() {
            return Ok(());
        }
        let staging = if dst.len() < self.config.min_bytes { None } else { self.lock_for(dev, self.chunks(dst.len())) };
        let Some(state) = staging else {
            self.pageable.fetch_add(1, Ordering::Relaxed);
            return dev.download(dst, src);
        };
        self.staged.fetch_add(1, Ordering::Relaxed);
        let Some(res) = state.resources.as_ref() else { return dev.download(dst, src) };
        let chunk = self.config.chunk;
        let jobs = Jobs::new(res.slots.len(), self.chunks(dst.len()), self.config.workers);
        dev.record(res.enter, LEGACY)?;
        dev.stream_wait(res.down, res.enter)?;
        let mut parts: Vec<Vec<(usize, &mut [MaybeUninit<u8>])>> = (0..jobs.workers).map(|_| Vec::new()).collect();
        for (k, c) in dst.chunks_mut(chunk).enumerate() {
            parts[k % jobs.workers].push((k * chunk, c));
        }
        let abort = AtomicBool::new(false);
        let work = |w: usize, part: Vec<(usize, &mut [MaybeUninit<u8>])>| download_worker(dev, &res.slots[jobs.slots(w)], res.down, src, part, &abort);
        let r = jobs.run(parts, &abort, work);
        if r.is_err() {
            // Chunks still in flight write staging memory: let them land before the pool is
            // used again.
            for s in &res.slots {
                let _ = dev.event_wait(s.event);
            }
        }
        r
    }

    /// The state, locked, with resources and enough slots for `chunks` chunks (two at
    /// least, for [`State::turn`]); `None` where the transfer takes the pageable path.
    fn lock_for(&self, dev: &dyn Device, chunks: usize) -> Option<std::sync::MutexGuard<'_, State>> {
        if self.config.max_slots() == 0 {
            return None;
        }
        let mut state = self.state.lock().ok()?;
        if state.failed {
            return None;
        }
        if state.resources.is_none() {
            match create_resources(dev) {
                Ok(r) => state.resources = Some(r),
                Err(_) => {
                    state.failed = true;
                    return None;
                }
            }
        }
        let wanted = self.config.max_slots().min(chunks.max(2));
        while !state.full && state.resources.as_ref().is_some_and(|r| r.slots.len() < wanted) {
            match (new_slot(dev, self.config.chunk), state.resources.as_mut()) {
                (Ok(s), Some(r)) => r.slots.push(s),
                (Ok(s), None) => free_slot(dev, s, self.config.chunk),
                (Err(_), _) => state.full = true,
            }
        }
        if state.resources.as_ref().is_none_or(|r| r.slots.is_empty()) {
            return None; // not one chunk could be pinned
        }
        Some(state)
    }

    /// Waits until no staged copy is in flight (before device memory is freed).
    pub(crate) fn quiesce(&self, dev: &dyn Device) {
        if let Ok(state) = self.state.lock() {
            if let Some(r) = &state.resources {
                let _ = dev.event_wait(r.done);
            }
        }
    }

    /// Waits for every copy, then frees the pinned chunks, events and streams.
    pub(crate) fn release(&self, dev: &dyn Device) {
        let Ok(mut state) = self.state.lock() else { return };
        if let Some(r) = state.resources.take() {
            let _ = dev.event_wait(r.done);
            for s in r.slots {
                let _ = dev.event_wait(s.event);
                free_slot(dev, s, self.config.chunk);
            }
            dev.event_destroy(r.enter);
            dev.event_destroy(r.done);
            dev.stream_destroy(r.up);
            dev.stream_destroy(r.down);
        }
    }
}

fn create_resources(dev: &dyn Device) -> Result<Resources, Error> {
    let up = dev.stream_create()?;
    let made = (|| {
        let down = dev.stream_create()?;
        let events = (|| {
            let enter = dev.event_create()?;
            match dev.event_create() {
                Ok(done) => Ok((enter, done)),
                Err(e) => {
                    dev.event_destroy(enter);
                    Err(e)
                }
            }
        })();
        match events {
            Ok((enter, done)) => Ok((down, enter, done)),
            Err(e) => {
                dev.stream_destroy(down);
                Err(e)
            }
        }
    })();
    match made {
        Ok((down, enter, done)) => Ok(Resources { up, down, enter, done, slots: Vec::new() }),
        Err(e) => {
            dev.stream_destroy(up);
            Err(e)
        }
    }
}

fn new_slot(dev: &dyn Device, chunk: usize) -> Result<Slot, Error> {
    let ptr = dev.host_alloc(chunk)?;
    match dev.event_create() {
        Ok(event) => Ok(Slot { ptr: ptr as usize, event }),
        Err(e) => {
            dev.host_free(ptr, chunk);
            Err(e)
        }
    }
}

fn free_slot(dev: &dyn Device, s: Slot, chunk: usize) {
    dev.host_free(s.ptr as *mut u8, chunk);
    dev.event_destroy(s.event);
}

/// How one transfer's chunks and slots are shared among host threads.
struct Jobs {
    workers: usize,
    per_worker: usize,
}

impl Jobs {
    fn new(slots: usize, chunks: usize, workers: usize) -> Self {
        let workers = (slots / 2).clamp(1, workers.max(1)).min(chunks.max(1));
        Jobs { workers, per_worker: (slots / workers).clamp(1, 2) }
    }

    fn slots(&self, w: usize) -> std::ops::Range<usize> {
        w * self.per_worker..(w + 1) * self.per_worker
    }

    /// Runs `work(w, part)` for each worker's part: on this thread for one worker, else
    /// taken in order by whichever of rayon's threads is free, this one among them (no
    /// thread is started for a transfer: a stitching window's frames are one transfer, and
    /// starting threads for each cost more than the copies they shared). The caller holds
    /// the staging's lock, so from a pool worker every part runs here. The first error,
    /// after every part has stopped.
    fn run<P: Send>(&self, parts: Vec<P>, abort: &AtomicBool, work: impl Fn(usize, P) -> Result<(), Error> + Sync) -> Result<(), Error> {
        let guarded = |w: usize, p: P| {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(w, p))).unwrap_or_else(|_| Err(Error::Backend("a transfer thread panicked".into())));
            if r.is_err() {
                abort.store(true, Ordering::Relaxed);
            }
            r
        };
        if parts.len() <= 1 {
            return parts.into_iter().try_for_each(|p| guarded(0, p));
        }
        let mut parts: Vec<Option<P>> = parts.into_iter().map(Some).collect();
        map_slots_outside_pool(&mut parts, Parallelism::AllThreads, |w, p| p.take().map_or(Ok(()), |p| guarded(w, p))).into_iter().collect()
    }
}

/// The bytes of one staged chunk of an upload: a slice of the caller's, or a span of a
/// gathered transfer ([`Staging::upload_gathered`]).
#[derive(Clone, Copy)]
enum Chunk<'a> {
    Bytes(&'a [u8]),
    /// Bytes `from .. from + len` of a transfer laid out as `pieces` (each at its offset,
    /// zeros between them).
    Gathered { from: usize, len: usize, pieces: &'a [(usize, &'a [u8])] },
}

impl Chunk<'_> {
    fn len(&self) -> usize {
        match self {
            Chunk::Bytes(bytes) => bytes.len(),
            Chunk::Gathered { len, .. } => *len,
        }
    }

    /// Writes the chunk's bytes to `out`.
    ///
    /// # Safety
    /// `out` is valid for writes of [`len`](Self::len) bytes and overlaps no piece.
    unsafe fn copy_into(&self, out: *mut u8) {
        match *self {
            // SAFETY: the caller's contract.
            Chunk::Bytes(bytes) => unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len()) },
            Chunk::Gathered { from, len, pieces } => {
                let end = from + len;
                let mut at = from;
                for &(offset, bytes) in pieces.iter().skip_while(|(offset, bytes)| offset + bytes.len() <= from) {
                    if offset >= end {
                        break;
                    }
                    let (start, stop) = (offset.max(from), (offset + bytes.len()).min(end));
                    // SAFETY: `at .. stop` lies within `from .. end`, `out`'s span (pieces
                    // are in order and apart, so `at <= start`).
                    unsafe {
                        out.add(at - from).write_bytes(0, start - at);
                        std::ptr::copy_nonoverlapping(bytes.as_ptr().add(start - offset), out.add(start - from), stop - start);
                    }
                    at = stop;
                }
                // SAFETY: `at .. end` lies within the span.
                unsafe { out.add(at - from).write_bytes(0, end - at) };
            }
        }
    }
}

/// One thread's share of an upload: for each chunk, wait until its slot's last DMA has
/// read it, copy the caller's bytes in, start the DMA and record the slot's event.
fn upload_worker(dev: &dyn Device, slots: &[Slot], turn: usize, stream: Stream, part: Vec<(DevicePtr, Chunk<'_>)>, abort: &AtomicBool) -> Result<(), Error> {
    for (i, (dst, bytes)) in part.into_iter().enumerate() {
        if abort.load(Ordering::Relaxed) {
            return Ok(());
        }
        let slot = &slots[turn.wrapping_add(i) % slots.len()];
        dev.event_wait(slot.event)?;
        // SAFETY: the slot holds a whole chunk (`bytes` is at most one); no DMA reads it
        // (its event was waited for) and only this thread uses it during the transfer.
        unsafe { bytes.copy_into(slot.ptr as *mut u8) };
        // SAFETY: `dst` holds `bytes.len()` bytes (the chunk lies within its transfer's
        // allocation); the slot is not written again before its event, recorded next, completes.
        unsafe { dev.upload_async(dst, slot.ptr as *const u8, bytes.len(), stream) }?;
        dev.record(slot.event, stream)?;
    }
    Ok(())
}

/// One thread's share of a download: the DMAs of up to as many chunks as it has slots in
/// flight; the oldest, once its event completes, copied from its slot into the caller's
/// memory while the next ones run.
fn download_worker(dev: &dyn Device, slots: &[Slot], stream: Stream, src: DevicePtr, part: Vec<(usize, &mut [MaybeUninit<u8>])>, abort: &AtomicBool) -> Result<(), Error> {
    let mut in_flight: VecDeque<(usize, &mut [MaybeUninit<u8>])> = VecDeque::with_capacity(slots.len());
    let land = |slot: &Slot, out: &mut [MaybeUninit<u8>]| -> Result<(), Error> {
        dev.event_wait(slot.event)?;
        // SAFETY: the slot's DMA of `out.len()` bytes has completed; nothing writes it now.
        unsafe { std::ptr::copy_nonoverlapping(slot.ptr as *const u8, out.as_mut_ptr().cast::<u8>(), out.len()) };
        Ok(())
    };
    for (i, (offset, out)) in part.into_iter().enumerate() {
        if abort.load(Ordering::Relaxed) {
            return Ok(());
        }
        let s = i % slots.len();
        if in_flight.len() == slots.len() {
            if let Some((oldest, out)) = in_flight.pop_front() {
                land(&slots[oldest], out)?;
            }
        }
        let slot = &slots[s];
        // The slot may still be read by an upload's DMA from an earlier transfer.
        dev.event_wait(slot.event)?;
        // SAFETY: `src + offset` holds `out.len()` bytes; the slot holds a whole chunk and
        // is read by the host only after its event, recorded next, completes.
        unsafe { dev.download_async(slot.ptr as *mut u8, src + offset as u64, out.len(), stream) }?;
        dev.record(slot.event, stream)?;
        in_flight.push_back((s, out));
    }
    while let Some((s, out)) = in_flight.pop_front() {
        land(&slots[s], out)?;
    }
    Ok(())
}

#[cfg(all(test, feature = "shim"))]
mod tests {
    use super::*;
    use crate::device::{args, as_bytes, Gpu};
    use crate::kernels::{Kernel, Module};
    use crate::shim::ShimDevice;

    /// Threads per transfer: one under ThreadSanitizer (see `StagingConfig::for_shim`).
    const WORKERS: usize = if cfg!(shim_sanitizer = "thread") { 1 } else { 3 };

    fn config(chunk: usize, slots: usize) -> StagingConfig {
        StagingConfig { chunk, workers: WORKERS, cap: chunk * slots, min_bytes: 1 }
    }

    fn gpu(chunk: usize, slots: usize) -> Gpu {
        Gpu::with_staging(Box::new(ShimDevice::new()), config(chunk, slots))
    }

    fn pattern(n: usize, seed: usize) -> Vec<u8> {
        (0..n).map(|i| ((i * 131 + seed * 17 + 7) % 251) as u8).collect()
    }

    fn round_trip(gpu: &Gpu, data: &[u8]) -> Vec<u8> {
        let buf = gpu.buffer::<u8>(data.len()).unwrap();
        gpu.upload_into(&buf, 0, data).unwrap();
        let mut back = vec![0u8; data.len()];
        gpu.download(&buf, &mut back).unwrap();
        back
    }

    #[test]
    fn sizes_from_nothing_to_many_chunks_beyond_the_pool_come_back_identical() {
        let chunk = 64;
        let g = gpu(chunk, 6);
        let sizes = [0, 1, 2, 63, 64, 65, 127, 128, 129, 6 * 64, 6 * 64 + 1, 37 * 64 + 5, 100 * 64, 1001 * 64 + 63];
        let mut staged = 0;
        for (i, &n) in sizes.iter().enumerate() {
            let data = pattern(n, i);
            assert_eq!(round_trip(&g, &data), data, "{n} bytes");
            staged += if n > 0 { 2 } else { 0 };
        }
        assert_eq!(g.transfer_counts(), TransferCounts { staged, pageable: 0 });
    }

    #[test]
    fn elements_cut_across_chunks_and_bands_at_offsets() {
        let g = gpu(10, 4); // 10-byte chunks: every f32 and f64 boundary cut somewhere
        let values: Vec<f32> = (0..1237).map(|i| i as f32 * 0.37 - 100.0).collect();
        let buf = g.upload(&values).unwrap();
        let mut back = vec![0f32; values.len()];
        g.download(&buf, &mut back).unwrap();
        assert_eq!(back, values);
        // Bands of rows uploaded one by one into one image, as a banded pipeline would.
        let (w, h) = (37usize, 29usize);
        let img: Vec<f64> = (0..w * h).map(|i| (i * i) as f64 / 3.0).collect();
        let dimg = g.buffer::<f64>(w * h).unwrap();
        for band in (0..h).step_by(7) {
            let rows = band..(band + 7).min(h);
            g.upload_into(&dimg, rows.start * w, &img[rows.start * w..rows.end * w]).unwrap();
        }
        let mut back = vec![0f64; w * h];
        g.download(&dimg, &mut back).unwrap();
        assert_eq!(back, img);
        assert!(g.upload_into(&dimg, w * h - 3, &img[..4]).is_err());
        assert!(g.download(&dimg, &mut vec![0f64; w * h + 1]).is_err());
    }

    #[test]
    fn kernels_see_uploads_and_downloads_see_kernels() {
        let g = gpu(100, 4);
        for round in 0..3usize {
            let n = 1000 + 333 * round;
            let input: Vec<i32> = (0..n as i32).map(|i| (i * 7 + round as i32) % 13 - 6).collect();
            let din = g.upload(&input).unwrap();
            let dout = g.buffer::<i32>(n.div_ceil(128)).unwrap();
            let sum = Kernel::new(Module::Linalg, "selftest_block_sum");
            g.launch(sum, [n.div_ceil(128) as u32, 1, 1], [128, 1, 1], 0, args![&din, &dout, n as i32]).unwrap();
            let mut sums = vec![0i32; n.div_ceil(128)];
            g.download(&dout, &mut sums).unwrap();
            let want: Vec<i32> = input.chunks(128).map(|c| c.iter().sum()).collect();
            assert_eq!(sums, want, "round {round}");
        }
    }

    /// Image views uploaded together (their chunks shared among the workers, a pool
    /// smaller than the chunks, strided views and views too small for staging among them)
    /// each come back as uploaded one by one.
    #[test]
    fn views_uploaded_together_come_back_identical() {
        let g = Gpu::with_staging(Box::new(ShimDevice::new()), StagingConfig { min_bytes: 600, ..config(64, 4) });
        let sizes = [(37usize, 29usize), (1, 1), (64, 3), (5, 40), (20, 20), (3, 7)];
        let images: Vec<tessera_core::Image<u16>> = sizes
            .iter()
            .enumerate()
            .map(|(k, &(w, h))| tessera_core::Image::from_vec(w, h, (0..w * h).map(|i| ((i * 31 + k * 977) % 65521) as u16).collect()).unwrap())
            .collect();
        let mut views: Vec<_> = images.iter().map(|i| i.view()).collect();
        views.push(images[0].view().crop(3, 2, 11, 9).unwrap()); // rows not packed
        let uploaded = g.upload_views(&views).unwrap();
        assert_eq!(uploaded.len(), views.len());
        for (v, d) in views.iter().zip(&uploaded) {
            let (w, h) = v.size();
            assert_eq!((d.width, d.height), (w, h));
            let mut back = vec![0u16; w * h];
            g.download(&d.buf, &mut back).unwrap();
            let want: Vec<u16> = v.rows().flatten().copied().collect();
            assert_eq!(back, want, "{w} x {h}");
        }
        assert!(g.transfer_counts().staged >= 2, "{:?}", g.transfer_counts());
        assert!(g.upload_views::<u16>(&[]).unwrap().is_empty());
    }

    /// Records packed into one upload each land at their address, 16-byte aligned, an
    /// empty one among them.
    #[test]
    fn packed_records_land_at_their_addresses() {
        let g = gpu(64, 4);
        let (a, b, c) = ([1u64, 2, u64::MAX], [-5i32, 6, 7, 8, 9], [0.25f64, -1e300]);
        let parts = [as_bytes(&a[..]), as_bytes(&b[..]), &[][..], as_bytes(&c[..])];
        let (buf, at) = g.upload_packed(&parts).unwrap();
        assert_eq!(at.len(), 4);
        let mut back = vec![0u8; buf.len()];
        g.download(&buf, &mut back).unwrap();
        for (part, &ptr) in parts.iter().zip(&at) {
            assert_eq!(ptr % 16, buf.ptr() % 16);
            let from = (ptr - buf.ptr()) as usize;
            assert_eq!(&back[from..from + part.len()], *part);
        }
        // Parts gathered from pieces: each part its pieces back to back, the next at 16 bytes.
        let pieces: [Vec<&[u8]>; 3] = [vec![as_bytes(&b[..1]), &[][..], as_bytes(&b[1..])], vec![], vec![as_bytes(&a[..2]), as_bytes(&c[..])]];
        let (buf, at) = g.upload_gathered(&pieces).unwrap();
        let mut back = vec![0u8; buf.len()];
        g.download(&buf, &mut back).unwrap();
        for (part, &ptr) in pieces.iter().zip(&at) {
            assert_eq!(ptr % 16, buf.ptr() % 16);
            let whole: Vec<u8> = part.concat();
            let from = (ptr - buf.ptr()) as usize;
            assert_eq!(&back[from..from + whole.len()], &whole[..]);
        }
    }

    /// A gathered upload lays each piece at its offset and zeros between them, across chunk
    /// boundaries, staged or (with no pinned memory) packed on the pageable path; pieces out
    /// of order, overlapping or beyond the transfer are an error.
    #[test]
    fn gathered_uploads_lay_their_pieces_out_with_zeros_between() {
        let data: Vec<Vec<u8>> = (0..9).map(|i| pattern([0, 1, 63, 64, 65, 200, 7, 130, 3][i], i)).collect();
        let mut pieces: Vec<(usize, &[u8])> = Vec::new();
        let mut at = 5;
        for (i, d) in data.iter().enumerate() {
            pieces.push((at, d));
            at += d.len() + [0, 3, 0, 1, 64, 17, 0, 2, 9][i];
        }
        let len = at + 11;
        let mut want = vec![0u8; len];
        for &(at, d) in &pieces {
            want[at..at + d.len()].copy_from_slice(d);
        }
        let dev = ShimDevice::new();
        for (staging, counts) in [(Staging::new(config(64, 4)), TransferCounts { staged: 1, pageable: 0 }), (Staging::new(StagingConfig { cap: 0, ..config(64, 6) }), TransferCounts { staged: 0, pageable: 1 })] {
            let d = dev.alloc(len).unwrap();
            // Stale bytes where the gaps go: the transfer writes its zeros over them.
            dev.upload(d, &vec![0xEEu8; len]).unwrap();
            staging.upload_gathered(&dev, d, len, &pieces).unwrap();
            assert_eq!(staging.counts(), counts);
            let mut back = vec![0u8; len];
            dev.download(crate::device::as_bytes_mut(&mut back), d).unwrap();
            assert_eq!(back, want);
            let bad = |pieces: &[(usize, &[u8])]| matches!(staging.upload_gathered(&dev, d, len, pieces), Err(Error::Backend(_)));
            assert!(bad(&[(10, &data[3][..]), (0, &data[3][..])]));
            assert!(bad(&[(0, &data[3][..]), (10, &data[3][..])]));
            assert!(bad(&[(len - 3, &data[3][..])]));
            staging.release(&dev);
            dev.free(d, len);
        }
    }

    /// A download into fresh memory gives the buffer's first elements, across chunks and
    /// from a short prefix; more than the buffer holds is an error.
    #[test]
    fn downloads_into_fresh_memory_give_the_buffers_elements() {
        let g = gpu(64, 4);
        let values: Vec<u64> = (0..100u64).map(|k| k.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let buf = g.upload(&values).unwrap();
        assert_eq!(g.launch_all_and_download(&[], &buf, 100).unwrap(), values);
        assert_eq!(g.launch_all_and_download(&[], &buf, 3).unwrap(), values[..3]);
        assert!(g.launch_all_and_download(&[], &buf, 0).unwrap().is_empty());
        assert!(matches!(g.launch_all_and_download(&[], &buf, 101), Err(Error::Backend(_))));
    }

    #[test]
    fn many_uploads_in_flight_reuse_the_pool_safely() {
        let g = gpu(50, 2);
        let data: Vec<Vec<u8>> = (0..20).map(|i| pattern(50 * (i % 7) + i * 13 + 1, i)).collect();
        let bufs: Vec<_> = data.iter().map(|d| g.upload(d).unwrap()).collect();
        for (d, b) in data.iter().zip(&bufs) {
            let mut back = vec![0u8; d.len()];
            g.download(b, &mut back).unwrap();
            assert_eq!(&back, d);
        }
    }

    #[test]
    fn without_pinned_memory_transfers_take_the_pageable_path() {
        let data = pattern(10_000, 3);
        // No pool at all.
        let g = Gpu::with_staging(Box::new(ShimDevice::new()), StagingConfig { cap: 0, ..config(64, 6) });
        assert_eq!(round_trip(&g, &data), data);
        assert_eq!(g.transfer_counts(), TransferCounts { staged: 0, pageable: 2 });
        // Pinning fails at once.
        let g = Gpu::with_staging(Box::new(ShimDevice::pinning_at_most(0)), config(64, 6));
        assert_eq!(round_trip(&g, &data), data);
        assert_eq!(g.transfer_counts(), TransferCounts { staged: 0, pageable: 2 });
        // Pinning fails after one chunk: staged through that one chunk.
        let g = Gpu::with_staging(Box::new(ShimDevice::pinning_at_most(64)), config(64, 6));
        assert_eq!(round_trip(&g, &data), data);
        assert_eq!(round_trip(&g, &data[..777]), data[..777]);
        assert_eq!(g.transfer_counts(), TransferCounts { staged: 4, pageable: 0 });
        // Below the minimum size.
        let g = Gpu::with_staging(Box::new(ShimDevice::new()), StagingConfig { min_bytes: 5000, ..config(64, 6) });
        assert_eq!(round_trip(&g, &data[..4999]), data[..4999]);
        assert_eq!(round_trip(&g, &data), data);
        assert_eq!(g.transfer_counts(), TransferCounts { staged: 2, pageable: 2 });
    }

    /// The shim's streams run a copy when its event is waited for, reading the host chunk
    /// then: writing a chunk before its event is seen in the result (what the staged
    /// transfers' waits prevent).
    #[test]
    fn the_shim_runs_queued_copies_late() {
        let dev = ShimDevice::new();
        let d = dev.alloc(4).unwrap();
        let h = dev.host_alloc(4).unwrap();
        let s = dev.stream_create().unwrap();
        let e = dev.event_create().unwrap();
        // SAFETY: `h` and `d` hold 4 bytes and outlive the copy (waited for below).
        unsafe {
            h.copy_from_nonoverlapping([1u8, 2, 3, 4].as_ptr(), 4);
            dev.upload_async(d, h, 4, s).unwrap();
            dev.record(e, s).unwrap();
            h.write_bytes(9, 4); // too early: the copy has not run
        }
        let mut out = [0u8; 4];
        dev.download(crate::device::as_bytes_mut(&mut out), d).unwrap();
        assert_eq!(out, [0xA5; 4], "the copy ran before anything waited for it");
        dev.stream_wait(LEGACY, e).unwrap();
        dev.download(crate::device::as_bytes_mut(&mut out), d).unwrap();
        assert_eq!(out, [9; 4]);
        dev.event_destroy(e);
        dev.stream_destroy(s);
        dev.host_free(h, 4);
        dev.free(d, 4);
    }
}

//! The CPU shim as a [`Device`]: host memory stands for device memory, and a launch runs the
//! kernel's C++ build (`shim/`, compiled by `build.rs` with the `shim` feature) on CPU
//! threads. For tests only: results are the kernels', timings mean nothing.
//!
//! Streams and events as the staged transfers (`transfer.rs`) use them: the legacy stream
//! runs everything at once; any other stream queues its copies, records and waits, and runs
//! them only when the host waits for one of its events (or the legacy stream waits for it,
//! or the device is synchronized), as late as CUDA may. A copy therefore reads its host
//! chunk when it runs, not when it was queued: a transfer that writes a chunk again before
//! its event, or launches before the legacy stream waited for the copies, gets wrong data.

use crate::device::{Device, DevicePtr};
use crate::kernels::Kernel;
use crate::transfer::{Event, Stream, LEGACY};
use std::alloc::{alloc, dealloc, Layout};
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tessera_core::Error;

extern "C" {
    fn tessera_shim_launch(name: *const c_char, grid: *const u32, block: *const u32, shared_bytes: u32, args: *mut *mut c_void) -> c_int;
    fn tessera_shim_has(name: *const c_char) -> c_int;
}

/// Device memory's alignment (cudaMalloc gives at least 256 bytes).
const ALIGN: usize = 256;

pub(crate) struct ShimDevice {
    queues: Mutex<Queues>,
    /// Bytes `host_alloc` may still pin (beyond, it fails as pinning can).
    pinnable: AtomicUsize,
    /// Where the shim only records launches, posing as a GPU model.
    dry_run: Option<DryRun>,
}

/// A kernel launch as the drivers asked for it: kernel, grid and block shape, dynamic
/// shared memory in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Launch {
    pub kernel: Kernel,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

/// The launches a dry run recorded, in order.
pub type LaunchLog = Arc<Mutex<Vec<Launch>>>;

struct DryRun {
    model: String,
    launches: LaunchLog,
}

/// An operation queued on a stream other than the legacy one.
enum Op {
    Copy { dst: usize, src: usize, bytes: usize },
    /// The record of an event, numbered by a ticket.
    Record { ticket: u64 },
    /// Wait until the record `ticket` of `stream` has run.
    Wait { stream: Stream, ticket: u64 },
}

#[derive(Default)]
struct Queues {
    /// The last id given to a stream or event (0 is the legacy stream).
    last_id: u64,
    last_ticket: u64,
    streams: HashMap<Stream, VecDeque<Op>>,
    /// Each event's last record: its stream and ticket, `None` where it has run (or there
    /// was none).
    events: HashMap<Event, Option<(Stream, u64)>>,
}

impl Queues {
    /// Runs `stream`'s operations up to its record `ticket`, if that is still queued.
    fn run_through(&mut self, stream: Stream, ticket: u64) {
        let queued = self.streams.get(&stream).is_some_and(|q| q.iter().any(|op| matches!(op, Op::Record { ticket: t } if *t == ticket)));
        if !queued {
            return;
        }
        while let Some(op) = self.streams.get_mut(&stream).and_then(VecDeque::pop_front) {
            match op {
                Op::Copy { dst, src, bytes } => {
                    // SAFETY: the `upload_async` / `download_async` contracts: both ends hold
                    // `bytes` and are alive until an event after the copy has run (now).
                    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) }
                }
                Op::Record { ticket: t } => {
                    for e in self.events.values_mut() {
                        if *e == Some((stream, t)) {
                            *e = None;
                        }
                    }
                    if t == ticket {
                        return;
                    }
                }
                Op::Wait { stream: other, ticket: t } => self.run_through(other, t),
            }
        }
    }

    /// Runs the last record of `event`, and what its stream queued before it.
    fn complete(&mut self, event: Event) -> Result<(), Error> {
        match self.events.get(&event) {
            None => Err(Error::Backend(format!("shim: no event {event}"))),
            Some(None) => Ok(()),
            Some(&Some((stream, ticket))) => {
                self.run_through(stream, ticket);
                Ok(())
            }
        }
    }

    fn queue(&mut self, stream: Stream) -> Result<&mut VecDeque<Op>, Error> {
        self.streams.get_mut(&stream).ok_or_else(|| Error::Backend(format!("shim: no stream {stream}")))
    }

    fn run_all(&mut self) {
        let streams: Vec<Stream> = self.streams.keys().copied().collect();
        for s in streams {
            self.last_ticket += 1;
            let ticket = self.last_ticket;
            if let Some(q) = self.streams.get_mut(&s) {
                q.push_back(Op::Record { ticket });
            }
            self.run_through(s, ticket);
        }
    }
}

impl Default for ShimDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl ShimDevice {
    pub(crate) fn new() -> Self {
        ShimDevice { queues: Mutex::default(), pinnable: AtomicUsize::new(usize::MAX), dry_run: None }
    }

    /// A shim that poses as the GPU `model` (so its tuning table's kernel designs apply) and
    /// records each launch into `launches` instead of running it.
    pub(crate) fn dry_run(model: &str, launches: LaunchLog) -> Self {
        ShimDevice { dry_run: Some(DryRun { model: model.to_string(), launches }), ..Self::new() }
    }

    /// A shim on which pinning host memory fails beyond `bytes` in all (the pageable
    /// fallback of transfers).
    #[cfg(test)]
    pub(crate) fn pinning_at_most(bytes: usize) -> Self {
        ShimDevice { pinnable: AtomicUsize::new(bytes), ..Self::new() }
    }

    fn queues(&self) -> Result<std::sync::MutexGuard<'_, Queues>, Error> {
        self.queues.lock().map_err(|_| Error::Backend("shim: stream queues poisoned".into()))
    }

    fn enqueue_copy(&self, dst: usize, src: usize, bytes: usize, stream: Stream) -> Result<(), Error> {
        if stream == LEGACY {
            // SAFETY: the callers' contracts: both ends hold `bytes`.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) };
            return Ok(());
        }
        self.queues()?.queue(stream)?.push_back(Op::Copy { dst, src, bytes });
        Ok(())
    }

    /// Whether the shim build holds a kernel of that name.
    pub(crate) fn has(name: &str) -> bool {
        let Ok(c) = CString::new(name) else { return false };
        // SAFETY: a NUL-terminated name; the registry is read-only after start-up.
        unsafe { tessera_shim_has(c.as_ptr()) != 0 }
    }
}

impl Device for ShimDevice {
    fn name(&self) -> &'static str {
        "cuda-shim"
    }

    fn model(&self) -> &str {
        self.dry_run.as_ref().map_or("CPU shim", |d| &d.model)
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr, Error> {
        let layout = Layout::from_size_align(bytes.max(1), ALIGN).map_err(|_| Error::OutOfMemory { bytes })?;
        // SAFETY: a layout of non-zero size.
        let p = unsafe { alloc(layout) };
        if p.is_null() {
            return Err(Error::OutOfMemory { bytes });
        }
        // Uninitialised device memory is garbage: make it so, to catch kernels that read it.
        // SAFETY: `p` holds `bytes` bytes.
        unsafe { p.write_bytes(0xA5, bytes) };
        Ok(p as DevicePtr)
    }

    fn free(&self, ptr: DevicePtr, bytes: usize) {
        if let Ok(layout) = Layout::from_size_align(bytes.max(1), ALIGN) {
            // SAFETY: `ptr` came from `alloc` with this layout.
            unsafe { dealloc(ptr as *mut u8, layout) };
        }
    }

    fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<(), Error> {
        // SAFETY: `dst` is an allocation at least `src.len()` bytes long (the Device contract).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    fn download(&self, dst: &mut [std::mem::MaybeUninit<u8>], src: DevicePtr) -> Result<(), Error> {
        // SAFETY: `src` is an allocation at least `dst.len()` bytes long.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr().cast::<u8>(), dst.len()) };
        Ok(())
    }

    fn memset(&self, dst: DevicePtr, value: u8, bytes: usize) -> Result<(), Error> {
        // SAFETY: `dst` holds at least `bytes` bytes.
        unsafe { (dst as *mut u8).write_bytes(value, bytes) };
        Ok(())
    }

    fn copy(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> Result<(), Error> {
        // SAFETY: both hold at least `bytes` bytes and do not overlap (the Device contract).
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) };
        Ok(())
    }

    fn launch(&self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared_bytes: u32, args: &mut [*mut c_void]) -> Result<(), Error> {
        if let Some(d) = &self.dry_run {
            d.launches.lock().map_err(|_| Error::Backend("shim: launch log poisoned".into()))?.push(Launch { kernel, grid, block, shared_bytes });
            return Ok(());
        }
        let name = CString::new(kernel.name).map_err(|_| Error::Backend(format!("kernel name {:?}", kernel.name)))?;
        // SAFETY: `args` points at one value per kernel parameter, of its type (the launch
        // contract every kernel driver keeps, checked by the shim tests).
        let rc = unsafe { tessera_shim_launch(name.as_ptr(), grid.as_ptr(), block.as_ptr(), shared_bytes, args.as_mut_ptr()) };
        match rc {
            0 => Ok(()),
            1 => Err(Error::Backend(format!("shim: no kernel {} (in {})", kernel.name, kernel.module.file()))),
            2 => Err(Error::Backend(format!("shim: launch shape {grid:?} x {block:?} refused for {}", kernel.name))),
            4 => Err(Error::Backend(format!("shim: {}'s threads wait on barriers that not all of them reach (the kernel would hang)", kernel.name))),
            _ => Err(Error::Backend(format!("shim: could not start the threads of one block of {}", kernel.name))),
        }
    }

    fn host_alloc(&self, bytes: usize) -> Result<*mut u8, Error> {
        self.pinnable.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(bytes)).map_err(|_| Error::OutOfMemory { bytes })?;
        match self.alloc(bytes) {
            Ok(p) => Ok(p as *mut u8),
            Err(e) => {
                self.pinnable.fetch_add(bytes, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    fn host_free(&self, ptr: *mut u8, bytes: usize) {
        self.free(ptr as DevicePtr, bytes);
        let _ = self.pinnable.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| Some(left.saturating_add(bytes)));
    }

    fn stream_create(&self) -> Result<Stream, Error> {
        let mut q = self.queues()?;
        q.last_id += 1;
        let id = q.last_id;
        q.streams.insert(id, VecDeque::new());
        Ok(id)
    }

    fn stream_destroy(&self, stream: Stream) {
        if let Ok(mut q) = self.queues() {
            q.last_ticket += 1;
            let ticket = q.last_ticket;
            if let Some(ops) = q.streams.get_mut(&stream) {
                ops.push_back(Op::Record { ticket });
                q.run_through(stream, ticket);
            }
            q.streams.remove(&stream);
        }
    }

    fn event_create(&self) -> Result<Event, Error> {
        let mut q = self.queues()?;
        q.last_id += 1;
        let id = q.last_id;
        q.events.insert(id, None);
        Ok(id)
    }

    fn event_destroy(&self, event: Event) {
        if let Ok(mut q) = self.queues() {
            q.events.remove(&event);
        }
    }

    fn record(&self, event: Event, stream: Stream) -> Result<(), Error> {
        let mut q = self.queues()?;
        if !q.events.contains_key(&event) {
            return Err(Error::Backend(format!("shim: no event {event}")));
        }
        if stream == LEGACY {
            q.events.insert(event, None); // the legacy stream has run everything before
            return Ok(());
        }
        q.last_ticket += 1;
        let ticket = q.last_ticket;
        q.queue(stream)?.push_back(Op::Record { ticket });
        q.events.insert(event, Some((stream, ticket)));
        Ok(())
    }

    fn stream_wait(&self, stream: Stream, event: Event) -> Result<(), Error> {
        let mut q = self.queues()?;
        if stream == LEGACY {
            return q.complete(event);
        }
        match q.events.get(&event) {
            None => Err(Error::Backend(format!("shim: no event {event}"))),
            Some(None) => q.queue(stream).map(|_| ()),
            Some(&Some((other, ticket))) => {
                q.queue(stream)?.push_back(Op::Wait { stream: other, ticket });
                Ok(())
            }
        }
    }

    fn event_wait(&self, event: Event) -> Result<(), Error> {
        self.queues()?.complete(event)
    }

    unsafe fn upload_async(&self, dst: DevicePtr, src: *const u8, bytes: usize, stream: Stream) -> Result<(), Error> {
        self.enqueue_copy(dst as usize, src as usize, bytes, stream)
    }

    unsafe fn download_async(&self, dst: *mut u8, src: DevicePtr, bytes: usize, stream: Stream) -> Result<(), Error> {
        self.enqueue_copy(dst as usize, src as usize, bytes, stream)
    }

    fn synchronize(&self) -> Result<(), Error> {
        self.queues()?.run_all();
        Ok(())
    }
}

/// The shim's own tests, on the kernels of `shim/selftest.cu` (built into the shim only).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{args, Gpu};
    use crate::kernels::Module;

    /// A self-test kernel. The module only matters to NVRTC; the shim finds kernels by name.
    fn kernel(name: &'static str) -> Kernel {
        Kernel::new(Module::Linalg, name)
    }

    fn gpu() -> Gpu {
        Gpu::new(Box::new(ShimDevice::new()))
    }

    #[test]
    fn block_barriers_and_static_shared_memory_over_many_blocks() {
        let gpu = gpu();
        let n = 1000usize;
        let input: Vec<i32> = (0..n as i32).map(|i| i * 7 % 13 - 6).collect();
        let din = gpu.upload(&input).unwrap();
        let dout = gpu.buffer::<i32>(8).unwrap();
        gpu.launch(kernel("selftest_block_sum"), [8, 1, 1], [128, 1, 1], 0, args![&din, &dout, n as i32]).unwrap();
        let mut sums = vec![0i32; 8];
        gpu.download(&dout, &mut sums).unwrap();
        let want: Vec<i32> = input.chunks(128).map(|c| c.iter().sum()).collect();
        assert_eq!(sums, want);
    }

    #[test]
    fn warp_shuffles_and_votes_behave_as_on_the_gpu() {
        let gpu = gpu();
        let input: Vec<i32> = (0..32).map(|l| (l * 5 + 3) % 11).collect();
        let din = gpu.upload(&input).unwrap();
        let dout = gpu.buffer::<i32>(7 * 32).unwrap();
        gpu.launch(kernel("selftest_warp"), [1, 1, 1], [32, 1, 1], 0, args![&din, &dout]).unwrap();
        let mut out = vec![0i32; 7 * 32];
        gpu.download(&dout, &mut out).unwrap();
        let total: i32 = input.iter().sum();
        let ballot = input.iter().enumerate().fold(0u32, |b, (l, v)| b | ((v & 1) as u32) << l) as i32;
        let any7 = input.contains(&7) as i32;
        for lane in 0..32 {
            let o = &out[7 * lane..7 * lane + 7];
            let scan: i32 = input[..=lane].iter().sum();
            assert_eq!(o, [total, total, scan, input[3], ballot, any7, 1], "lane {lane}");
        }
    }

    #[test]
    fn threads_that_return_early_leave_the_barriers() {
        let gpu = gpu();
        let n = 45;
        let dout = gpu.zeroed::<i32>(3 * 64).unwrap();
        gpu.launch(kernel("selftest_early_exit"), [3, 1, 1], [64, 1, 1], 0, args![&dout, n as i32]).unwrap();
        let mut out = vec![0i32; 3 * 64];
        gpu.download(&dout, &mut out).unwrap();
        for b in 0..3 {
            for t in 0..64 {
                let want = if t < n { ((t + n - 1) % n) as i32 * 10 + b as i32 } else { 0 };
                assert_eq!(out[b * 64 + t], want, "block {b} thread {t}");
            }
        }
    }

    #[test]
    fn atomics_count_every_thread() {
        let gpu = gpu();
        let count = gpu.zeroed::<i32>(1).unwrap();
        let total = gpu.zeroed::<f32>(1).unwrap();
        let biggest = gpu.zeroed::<u32>(1).unwrap();
        let cas = gpu.zeroed::<i32>(1).unwrap();
        gpu.launch(kernel("selftest_atomics"), [5, 1, 1], [96, 1, 1], 0, args![&count, &total, &biggest, &cas]).unwrap();
        let (mut c, mut t, mut b, mut k) = ([0i32], [0f32], [0u32], [0i32]);
        gpu.download(&count, &mut c).unwrap();
        gpu.download(&total, &mut t).unwrap();
        gpu.download(&biggest, &mut b).unwrap();
        gpu.download(&cas, &mut k).unwrap();
        assert_eq!((c[0], t[0], b[0], k[0]), (480, 240.0, 479, 960));
    }

    #[test]
    fn dynamic_shared_memory_and_three_dimensional_blocks() {
        let gpu = gpu();
        let per_block = 4 * 4 * 2;
        let blocks = 2 * 3;
        let input: Vec<f32> = (0..per_block * blocks).map(|i| i as f32).collect();
        let din = gpu.upload(&input).unwrap();
        let dout = gpu.buffer::<f32>(input.len()).unwrap();
        gpu.launch(kernel("selftest_reverse"), [2, 3, 1], [4, 4, 2], (per_block * 4) as u32, args![&din, &dout]).unwrap();
        let mut out = vec![0f32; input.len()];
        gpu.download(&dout, &mut out).unwrap();
        let want: Vec<f32> = input.chunks(per_block).flat_map(|c| c.iter().rev().copied()).collect();
        assert_eq!(out, want);
    }

    #[test]
    fn bad_launches_are_errors() {
        let gpu = gpu();
        let dout = gpu.buffer::<i32>(64).unwrap();
        let e = gpu.launch(kernel("no_such_kernel"), [1, 1, 1], [32, 1, 1], 0, args![&dout]).unwrap_err();
        assert!(e.to_string().contains("no kernel no_such_kernel"), "{e}");
        let e = gpu.launch(kernel("selftest_race"), [1, 1, 1], [2048, 1, 1], 0, args![&dout]).unwrap_err();
        assert!(e.to_string().contains("launch shape"), "{e}");
    }

    /// Threads left waiting on barriers that never open end the launch with an error, where
    /// the block runs as fibers (an OS thread per CUDA thread would wait forever, as a GPU).
    #[test]
    fn barriers_that_never_open_are_an_error() {
        if !cfg!(target_arch = "x86_64") {
            eprintln!("shim divergent barriers: SKIPPED (the block runs on OS threads here)");
            return;
        }
        let gpu = gpu();
        let dout = gpu.buffer::<i32>(64).unwrap();
        let e = gpu.launch(kernel("selftest_divergent_barriers"), [2, 1, 1], [64, 1, 1], 0, args![&dout]).unwrap_err();
        assert!(e.to_string().contains("barriers that not all of them reach"), "{e}");
        // The shim is whole after it: the next launch runs.
        let din = gpu.upload(&[1i32; 64]).unwrap();
        gpu.launch(kernel("selftest_block_sum"), [1, 1, 1], [128, 1, 1], 0, args![&din, &dout, 64i32]).unwrap();
        let mut sum = [0i32; 1];
        gpu.download(&dout, &mut sum).unwrap();
        assert_eq!(sum[0], 64);
    }

    /// Under ThreadSanitizer, the kernel with a missing barrier must be reported. The race
    /// runs in a child process (TSan reports, then exits non-zero, at the end of a process).
    #[test]
    fn thread_sanitizer_finds_a_missing_barrier() {
        if std::env::var_os("TESSERA_SHIM_RACE_CHILD").is_some() {
            let gpu = gpu();
            let dout = gpu.buffer::<i32>(64).unwrap();
            gpu.launch(kernel("selftest_race"), [1, 1, 1], [64, 1, 1], 0, args![&dout]).unwrap();
            return;
        }
        if !cfg!(shim_sanitizer = "thread") {
            eprintln!("shim race check: SKIPPED (the shim is not built with TESSERA_SHIM_SANITIZE=thread)");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "shim::tests::thread_sanitizer_finds_a_missing_barrier", "--nocapture"])
            .env("TESSERA_SHIM_RACE_CHILD", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("ThreadSanitizer: data race"), "no race reported:\n{stderr}");
        assert!(stderr.contains("selftest_race"), "the race is not placed in the kernel:\n{stderr}");
    }

    /// Under AddressSanitizer, a kernel reading past its buffer must be reported (in a
    /// child process: ASan stops the process at the first error).
    #[test]
    fn address_sanitizer_finds_a_read_past_the_buffer() {
        if std::env::var_os("TESSERA_SHIM_OVERRUN_CHILD").is_some() {
            let gpu = gpu();
            let din = gpu.upload(&[1i32; 64]).unwrap();
            let dout = gpu.buffer::<i32>(1).unwrap();
            gpu.launch(kernel("selftest_overrun"), [1, 1, 1], [96, 1, 1], 0, args![&din, &dout, 64]).unwrap();
            return;
        }
        if !cfg!(shim_sanitizer = "address") {
            eprintln!("shim overrun check: SKIPPED (the shim is not built with TESSERA_SHIM_SANITIZE=address)");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "shim::tests::address_sanitizer_finds_a_read_past_the_buffer", "--nocapture"])
            .env("TESSERA_SHIM_OVERRUN_CHILD", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("AddressSanitizer: heap-buffer-overflow"), "no overflow reported:\n{stderr}");
        assert!(stderr.contains("selftest_overrun"), "the overflow is not placed in the kernel:\n{stderr}");
    }
}

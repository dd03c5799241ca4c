//! What the kernel drivers (one Rust module per kernel file) see of a device: [`Gpu`], with
//! typed device buffers reused between calls, uploads and downloads of image views, and
//! launches by kernel name with driver-style arguments. Two devices stand behind it: the
//! real GPU through the CUDA driver (`driver.rs`) and, in tests, the CPU shim (`shim.rs`),
//! so every line of launch logic runs in CI too.

use crate::kernels::Kernel;
use crate::tuning::Tuning;
use crate::transfer::{Event, Staging, StagingConfig, Stream};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::Mutex;
use std::time::Instant;
use tessera_core::image::Pixel;
use tessera_core::{Error, ImageView, ImageViewMut, Rgba8};

/// A device address (`CUdeviceptr`; a host address in the shim).
pub(crate) type DevicePtr = u64;

/// The raw operations of one device. Every method is called with valid, owned pointers
/// from [`Gpu`]; errors are [`Error`]s, never panics.
pub(crate) trait Device: Send + Sync {
    /// "cuda" or "cuda-shim": the backend's name.
    fn name(&self) -> &'static str;
    /// The device's model as its driver names it (`NVIDIA H200`), which picks its tuning
    /// table.
    fn model(&self) -> &str;
    /// Streaming multiprocessors, for launch shapes sized to fill the device. The shim
    /// answers an H100's / H200's 132, so that it runs the shapes those GPUs get.
    fn multiprocessors(&self) -> usize {
        132
    }
    /// Allocates `bytes` (> 0) of device memory.
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, Error>;
    /// Frees an allocation of [`Device::alloc`].
    fn free(&self, ptr: DevicePtr, bytes: usize);
    /// Copies `src` to `dst` (an allocation at least as long).
    fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<(), Error>;
    /// Copies from `src` into `dst` (memory the copy initializes: it need not be), after
    /// every launch before it has finished.
    fn download(&self, dst: &mut [MaybeUninit<u8>], src: DevicePtr) -> Result<(), Error>;
    /// Sets `bytes` bytes at `dst` to `value`.
    fn memset(&self, dst: DevicePtr, value: u8, bytes: usize) -> Result<(), Error>;
    /// Copies `bytes` bytes from `src` to `dst` (two allocations of this device, not
    /// overlapping), after every launch before it.
    fn copy(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> Result<(), Error>;
    /// Launches `kernel`; `args` points at each argument's value, as `cuLaunchKernel` takes
    /// them. A launch may run after it returns; the next download waits for it.
    fn launch(&self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared_bytes: u32, args: &mut [*mut c_void]) -> Result<(), Error>;

    // The primitives of staged transfers (`transfer.rs`). Stream 0 is the legacy default
    // stream that launches, memsets and the pageable copies above use.

    /// Allocates `bytes` (> 0) of page-locked host memory (a staging chunk).
    fn host_alloc(&self, bytes: usize) -> Result<*mut u8, Error>;
    /// Frees an allocation of [`Device::host_alloc`].
    fn host_free(&self, ptr: *mut u8, bytes: usize);
    /// A stream that does not synchronize implicitly with the legacy stream.
    fn stream_create(&self) -> Result<Stream, Error>;
    /// Destroys a stream of [`Device::stream_create`] (its queued work still runs).
    fn stream_destroy(&self, stream: Stream);
    /// An event (without timing).
    fn event_create(&self) -> Result<Event, Error>;
    fn event_destroy(&self, event: Event);
    /// Records `event` on `stream`: it completes when the work queued before it has.
    fn record(&self, event: Event, stream: Stream) -> Result<(), Error>;
    /// Makes the work queued on `stream` from now on wait for `event`'s last record.
    fn stream_wait(&self, stream: Stream, event: Event) -> Result<(), Error>;
    /// Blocks the calling thread until `event`'s last record has completed (at once for
    /// an event never recorded).
    fn event_wait(&self, event: Event) -> Result<(), Error>;
    /// Queues a copy of `bytes` from host memory at `src` to `dst` on `stream`.
    ///
    /// # Safety
    /// `dst` holds `bytes`; `src` (page-locked memory of `host_alloc` on the GPU) stays
    /// allocated and unchanged until an event recorded after the copy on `stream` completes.
    unsafe fn upload_async(&self, dst: DevicePtr, src: *const u8, bytes: usize, stream: Stream) -> Result<(), Error>;
    /// Queues a copy of `bytes` from `src` to host memory at `dst` on `stream`.
    ///
    /// # Safety
    /// `src` holds `bytes`; `dst` (page-locked memory of `host_alloc` on the GPU) stays
    /// allocated and is neither read nor written until an event recorded after the copy on
    /// `stream` completes.
    unsafe fn download_async(&self, dst: *mut u8, src: DevicePtr, bytes: usize, stream: Stream) -> Result<(), Error>;
    /// Blocks until every stream's queued work has completed.
    fn synchronize(&self) -> Result<(), Error>;
}

/// A plain-old-data element type of device buffers (`pub` only to bound the sealed
/// [`DevicePixel`](crate::DevicePixel); the module is private).
///
/// # Safety
/// Any bit pattern is a valid value and the type has no padding.
pub unsafe trait Pod: Copy + Send + Sync + Default + 'static {}
unsafe impl Pod for u8 {}
unsafe impl Pod for u16 {}
unsafe impl Pod for u32 {}
unsafe impl Pod for i32 {}
unsafe impl Pod for u64 {}
unsafe impl Pod for i64 {}
unsafe impl Pod for f32 {}
unsafe impl Pod for f64 {}
unsafe impl Pod for Rgba8 {}

pub(crate) fn as_bytes<T: Pod>(s: &[T]) -> &[u8] {
    // SAFETY: Pod has no padding; the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// `s`'s bytes as memory a download writes: it writes initialized bytes only (copies of
/// device memory), so `s` stays initialized.
pub(crate) fn as_bytes_mut<T: Pod>(s: &mut [T]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: Pod accepts any bit pattern; the length is the slice's size in bytes; the
    // only writers of the view are the downloads, which write whole initialized bytes.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), std::mem::size_of_val(s)) }
}

/// The table of device frames a launch reads, each distinct address once: records name
/// frames by slot.
#[derive(Default)]
pub(crate) struct FrameTable {
    frames: Vec<u64>,
}

impl FrameTable {
    /// The slot of the frame at `ptr`, added if new.
    pub(crate) fn slot(&mut self, ptr: DevicePtr) -> i32 {
        let at = self.frames.iter().position(|&f| f == ptr).unwrap_or_else(|| {
            self.frames.push(ptr);
            self.frames.len() - 1
        });
        at as i32
    }

    /// The frames' addresses, by slot.
    pub(crate) fn addresses(&self) -> &[u64] {
        &self.frames
    }
}

/// Bytes of freed buffers kept for reuse (beyond it, buffers are freed).
const POOL_LIMIT_BYTES: usize = 1 << 30;

/// A device, with a pool of freed allocations by size so that repeated calls of the same
/// size allocate nothing, and the staging of its transfers through pinned memory.
pub(crate) struct Gpu {
    device: Box<dyn Device>,
    pool: Mutex<Pool>,
    staging: Staging,
    /// Wall time during which a device call was in flight (see [`Gpu::device_seconds`]).
    device_clock: Mutex<DeviceClock>,
    /// The kernel designs chosen for this device.
    tuning: Tuning,
}

/// The host's own time between laps: the wall time less the time a device call was in
/// flight ([`Gpu::device_seconds`]), for telling where a run's host share goes.
pub(crate) struct HostWatch<'g> {
    gpu: &'g Gpu,
    wall: std::time::Instant,
    device: f64,
}

impl HostWatch<'_> {
    /// Seconds of host time since the last lap (or the watch's start).
    pub(crate) fn lap(&mut self) -> f64 {
        let (wall, device) = (std::time::Instant::now(), self.gpu.device_seconds());
        let host = (wall - self.wall).as_secs_f64() - (device - self.device);
        (self.wall, self.device) = (wall, device);
        host.max(0.0)
    }
}

/// The wall time covered by device calls: a call that begins while another thread's is in
/// flight adds only what it outlasts it by, so host threads calling at once are not
/// counted twice.
#[derive(Default)]
struct DeviceClock {
    in_flight: usize,
    since: Option<Instant>,
    nanos: u64,
}

#[derive(Default)]
struct Pool {
    /// Free buffers by size class: a few classes, looked up on every call, so ordered
    /// rather than hashed.
    free: BTreeMap<usize, Vec<DevicePtr>>,
    bytes: usize,
    /// Allocations made on the device (the pool's misses).
    allocations: usize,
}

/// The size of the allocation a request of `bytes` takes: the next of four steps per power
/// of two (at most a quarter more than asked), so that buffers whose size changes a little
/// from call to call (a window's searches, whose count follows its textured templates)
/// reuse the pool's instead of allocating: a device allocation is slow and a free
/// synchronises.
fn size_class(bytes: usize) -> usize {
    const SMALLEST: usize = 256;
    match bytes.checked_next_power_of_two() {
        Some(p) if bytes > SMALLEST => bytes.div_ceil(p / 8) * (p / 8),
        Some(_) => SMALLEST,
        None => bytes,
    }
}

impl Gpu {
    /// The device with the GPU's staging of transfers ([`StagingConfig::for_gpu`]).
    pub(crate) fn new(device: Box<dyn Device>) -> Self {
        Self::with_staging(device, StagingConfig::for_gpu())
    }

    pub(crate) fn with_staging(device: Box<dyn Device>, staging: StagingConfig) -> Self {
        let tuning = Tuning::for_device(device.model());
        Gpu { device, pool: Mutex::new(Pool::default()), staging: Staging::new(staging), device_clock: Mutex::new(DeviceClock::default()), tuning }
    }

    /// The kernel designs chosen for this device (`tuning.rs`).
    pub(crate) fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// This GPU with the design of `family` fixed to `design` (for the tests of each
    /// design).
    #[cfg(feature = "shim")]
    pub(crate) fn with_design(mut self, family: &str, design: &str) -> Self {
        self.tuning.fix(family, design);
        self
    }

    /// Transfers made so far through pinned staging and through the pageable path.
    #[cfg(test)]
    pub(crate) fn transfer_counts(&self) -> crate::transfer::TransferCounts {
        self.staging.counts()
    }

    /// Waits until everything queued on the device has completed.
    pub(crate) fn synchronize(&self) -> Result<(), Error> {
        self.on_device(|d| d.synchronize())
    }

    /// Wall time so far during which at least one device call was in flight
    /// (allocations, transfers, launches and the waits of downloads; on the shim, the
    /// kernels' emulation too), however many threads called: what a run spends beyond it
    /// is host work with the device idle. For the tests and benchmarks of where time goes.
    pub(crate) fn device_seconds(&self) -> f64 {
        self.device_clock.lock().map_or(0.0, |c| c.nanos as f64 * 1e-9)
    }

    /// A watch of the host's own time from now ([`HostWatch::lap`]).
    pub(crate) fn host_watch(&self) -> HostWatch<'_> {
        HostWatch { gpu: self, wall: std::time::Instant::now(), device: self.device_seconds() }
    }

    /// Allocations made on the device so far (requests the pool could not serve).
    pub(crate) fn allocations(&self) -> usize {
        self.pool.lock().map_or(0, |p| p.allocations)
    }

    fn on_device<R>(&self, call: impl FnOnce(&dyn Device) -> R) -> R {
        crate::host_count::pause();
        if let Ok(mut c) = self.device_clock.lock() {
            if c.in_flight == 0 {
                c.since = Some(Instant::now());
            }
            c.in_flight += 1;
        }
        let r = call(self.device.as_ref());
        if let Ok(mut c) = self.device_clock.lock() {
            c.in_flight = c.in_flight.saturating_sub(1);
            if c.in_flight == 0 {
                if let Some(since) = c.since.take() {
                    c.nanos += since.elapsed().as_nanos() as u64;
                }
            }
        }
        crate::host_count::resume();
        r
    }

    pub(crate) fn name(&self) -> &'static str {
        self.device.name()
    }

    /// The device's streaming multiprocessors (see [`Device::multiprocessors`]).
    pub(crate) fn multiprocessors(&self) -> usize {
        self.device.multiprocessors()
    }

    /// A buffer of `len` elements, contents undefined.
    pub(crate) fn buffer<T: Pod>(&self, len: usize) -> Result<DevBuf<'_, T>, Error> {
        let asked = len.checked_mul(std::mem::size_of::<T>()).ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        let bytes = size_class(asked.max(1));
        let reused = self.pool.lock().ok().and_then(|mut p| {
            let ptr = p.free.get_mut(&bytes)?.pop()?;
            p.bytes -= bytes;
            Some(ptr)
        });
        let ptr = match reused {
            Some(p) => p,
            None => {
                if let Ok(mut p) = self.pool.lock() {
                    p.allocations += 1;
                }
                match self.on_device(|d| d.alloc(bytes)) {
                    Ok(p) => p,
                    Err(_) => {
                        // Memory held for reuse may be what is missing: give it back and retry.
                        self.release_pool();
                        self.on_device(|d| d.alloc(bytes))?
                    }
                }
            }
        };
        Ok(DevBuf { gpu: self, ptr, len, bytes, owned: true, _t: PhantomData })
    }

    /// `len` elements of `T` at `ptr` in memory this `Gpu` does not own: never freed or
    /// pooled by it.
    ///
    /// # Safety
    /// `ptr` is an allocation of this device holding at least `len` elements of `T`
    /// (aligned for `T`), valid for as long as the buffer is used.
    pub(crate) unsafe fn borrowed<T: Pod>(&self, ptr: DevicePtr, len: usize) -> DevBuf<'_, T> {
        DevBuf { gpu: self, ptr, len, bytes: len * std::mem::size_of::<T>(), owned: false, _t: PhantomData }
    }

    /// A buffer of `len` elements, every byte zero.
    pub(crate) fn zeroed<T: Pod>(&self, len: usize) -> Result<DevBuf<'_, T>, Error> {
        let b = self.buffer(len)?;
        self.on_device(|d| d.memset(b.ptr, 0, len * std::mem::size_of::<T>()))?;
        Ok(b)
    }

    /// A buffer holding a copy of `data`.
    pub(crate) fn upload<T: Pod>(&self, data: &[T]) -> Result<DevBuf<'_, T>, Error> {
        let b = self.buffer(data.len())?;
        self.upload_into(&b, 0, data)?;
        Ok(b)
    }

    /// Copies `data` into `buf` from element `at` on (`at + data.len()` at most `buf`'s
    /// length, else an error). Later launches see the data; the copy may still be in
    /// flight when this returns, `data` is no longer needed.
    pub(crate) fn upload_into<T: Pod>(&self, buf: &DevBuf<'_, T>, at: usize, data: &[T]) -> Result<(), Error> {
        if at.checked_add(data.len()).is_none_or(|end| end > buf.len) {
            return Err(Error::Backend(format!("upload of {} elements at {at} into a buffer of {}", data.len(), buf.len)));
        }
        let dst = buf.ptr + (at * std::mem::size_of::<T>()) as u64;
        self.on_device(|d| self.staging.upload(d, dst, as_bytes(data)))
    }

    /// An image view copied to the device, rows packed (`stride == width`).
    pub(crate) fn upload_view<T: Pod + Pixel>(&self, v: ImageView<'_, T>) -> Result<DevImage<'_, T>, Error> {
        let (w, h) = v.size();
        let buf = if v.stride() == w {
            self.upload(&v.span()[..w * h])?
        } else {
            let mut packed = Vec::new();
            packed.try_reserve_exact(w * h).map_err(|_| Error::OutOfMemory { bytes: w * h * std::mem::size_of::<T>() })?;
            for row in v.rows() {
                packed.extend_from_slice(row);
            }
            self.upload(&packed)?
        };
        Ok(DevImage { buf, width: w, height: h })
    }

    /// Several records copied to the device in one transfer where each would be one (small
    /// uploads cost a driver call and a wait each): one buffer holding `parts` in order,
    /// each at a multiple of 16 bytes, and the device address of each.
    pub(crate) fn upload_packed(&self, parts: &[&[u8]]) -> Result<(DevBuf<'_, u8>, Vec<DevicePtr>), Error> {
        let gathered: Vec<[&[u8]; 1]> = parts.iter().map(|&part| [part]).collect();
        self.upload_gathered(&gathered)
    }

    /// [`upload_packed`](Self::upload_packed) of parts each gathered from its pieces in
    /// order (each pair's records of a launch): the transfer copies every piece from where
    /// it lies ([`Staging::upload_gathered`]), with no packed copy on the host first.
    pub(crate) fn upload_gathered<'p>(&self, parts: &[impl AsRef<[&'p [u8]]>]) -> Result<(DevBuf<'_, u8>, Vec<DevicePtr>), Error> {
        let mut offsets = Vec::with_capacity(parts.len());
        let mut pieces: Vec<(usize, &[u8])> = Vec::new();
        let mut end = 0usize;
        for part in parts {
            offsets.push(end);
            for &piece in part.as_ref() {
                pieces.push((end, piece));
                end = end.checked_add(piece.len()).ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
            }
            end = end.checked_next_multiple_of(16).ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        }
        let buf = self.buffer::<u8>(end.max(1))?;
        self.on_device(|d| self.staging.upload_gathered(d, buf.ptr, end, &pieces))?;
        let ptrs = offsets.iter().map(|&at| buf.ptr + at as u64).collect();
        Ok((buf, ptrs))
    }

    /// Image views copied to the device as [`upload_view`](Self::upload_view) copies one,
    /// in order; the packed views' copies into staging shared among the transfer threads
    /// (a window's frames at once, not one after another).
    pub(crate) fn upload_views<T: Pod + Pixel>(&self, views: &[ImageView<'_, T>]) -> Result<Vec<DevImage<'_, T>>, Error> {
        let mut images = Vec::with_capacity(views.len());
        let mut transfers = Vec::with_capacity(views.len());
        for v in views {
            let (w, h) = v.size();
            if v.stride() == w {
                let buf = self.buffer::<T>(w * h)?;
                transfers.push((buf.ptr, as_bytes(&v.span()[..w * h])));
                images.push(DevImage { buf, width: w, height: h });
            } else {
                images.push(self.upload_view(*v)?);
            }
        }
        self.on_device(|d| self.staging.upload_many(d, &transfers))?;
        Ok(images)
    }

    /// Copies the packed image `src` into `dst` (the same size), on the device.
    pub(crate) fn copy_image<T: Pod>(&self, dst: &DevImage<'_, T>, src: &DevImage<'_, T>) -> Result<(), Error> {
        if (dst.width, dst.height) != (src.width, src.height) {
            return Err(Error::SizeMismatch { expected: (dst.width, dst.height), got: (src.width, src.height) });
        }
        let bytes = dst.width * dst.height * std::mem::size_of::<T>();
        self.on_device(|d| d.copy(dst.buf.ptr, src.buf.ptr, bytes))
    }

    /// Copies the host view `src` into the packed device image `dst` (the same size).
    pub(crate) fn upload_view_into<T: Pod + Pixel>(&self, dst: &DevImage<'_, T>, src: ImageView<'_, T>) -> Result<(), Error> {
        let (w, h) = src.size();
        if (dst.width, dst.height) != (w, h) {
            return Err(Error::SizeMismatch { expected: (dst.width, dst.height), got: (w, h) });
        }
        if src.stride() == w || h <= 1 {
            return self.upload_into(&dst.buf, 0, &src.span()[..w * h]);
        }
        for (y, row) in src.rows().enumerate() {
            self.upload_into(&dst.buf, y * w, row)?;
        }
        Ok(())
    }

    /// A packed `width x height` image on the device, contents undefined.
    pub(crate) fn image<T: Pod>(&self, width: usize, height: usize) -> Result<DevImage<'_, T>, Error> {
        let len = width.checked_mul(height).ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        Ok(DevImage { buf: self.buffer(len)?, width, height })
    }

    /// Copies `buf` (at least `dst.len()` elements) into `dst`.
    pub(crate) fn download<T: Pod>(&self, buf: &DevBuf<'_, T>, dst: &mut [T]) -> Result<(), Error> {
        if dst.len() > buf.len {
            return Err(Error::Backend(format!("download of {} elements from a buffer of {}", dst.len(), buf.len)));
        }
        self.on_device(|d| self.staging.download(d, as_bytes_mut(dst), buf.ptr))
    }

    /// Each of `calls` launched in order, then the first `n` elements of their output `buf`
    /// downloaded into fresh memory (not zeroed first: the download writes every byte), all
    /// in one device call: nothing of the host's runs between the launches and the download
    /// that waits for them. With no calls, a download alone.
    pub(crate) fn launch_all_and_download<T: Pod>(&self, calls: &[KernelCall<'_>], buf: &DevBuf<'_, T>, n: usize) -> Result<Vec<T>, Error> {
        if n > buf.len {
            return Err(Error::Backend(format!("download of {n} elements from a buffer of {}", buf.len)));
        }
        let mut values: Vec<Vec<u64>> = calls.iter().map(KernelCall::values).collect();
        let mut pointers: Vec<Vec<*mut c_void>> = values.iter_mut().map(|v| pointers_to(v)).collect();
        let mut out: Vec<T> = Vec::new();
        out.try_reserve_exact(n).map_err(|_| Error::OutOfMemory { bytes: n.saturating_mul(std::mem::size_of::<T>()) })?;
        let spare = &mut out.spare_capacity_mut()[..n];
        // SAFETY: the spare capacity holds `n` elements, as bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<MaybeUninit<u8>>(), std::mem::size_of_val(spare)) };
        self.on_device(|d| {
            for (c, p) in calls.iter().zip(&mut pointers) {
                c.launch_on(d, p)?;
            }
            self.staging.download(d, bytes, buf.ptr)
        })?;
        // SAFETY: the download initialized every byte of the first `n` elements, and Pod
        // accepts any bit pattern.
        unsafe { out.set_len(n) };
        Ok(out)
    }

    /// Copies a device image into a view of the same size (any stride).
    pub(crate) fn download_view<T: Pod + Pixel>(&self, img: &DevImage<'_, T>, mut dst: ImageViewMut<'_, T>) -> Result<(), Error> {
        let (w, h) = (img.width, img.height);
        debug_assert_eq!(dst.size(), (w, h));
        if dst.stride() == w {
            let n = w * h;
            // SAFETY: a view with stride == width holds its w*h elements contiguously.
            let all = unsafe { std::slice::from_raw_parts_mut(dst.row_mut(0).as_mut_ptr(), n) };
            return self.download(&img.buf, all);
        }
        let mut packed = zeroed_vec::<T>(w * h)?;
        self.download(&img.buf, &mut packed)?;
        for (y, row) in packed.chunks_exact(w).enumerate() {
            dst.row_mut(y).copy_from_slice(row);
        }
        Ok(())
    }

    /// Launches `kernel` over `grid` blocks of `block` threads with `args` (see [`Arg`]).
    pub(crate) fn launch(&self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared_bytes: u32, args: &[Arg]) -> Result<(), Error> {
        let call = KernelCall { kernel, grid, block, shared_bytes, args };
        if call.is_empty() {
            return Ok(());
        }
        let mut values = call.values();
        let mut pointers = pointers_to(&mut values);
        self.on_device(|d| call.launch_on(d, &mut pointers))
    }

    fn release_pool(&self) {
        // A staged upload's copies may still be writing a pooled buffer.
        self.staging.quiesce(self.device.as_ref());
        if let Ok(mut p) = self.pool.lock() {
            for (bytes, ptrs) in core::mem::take(&mut p.free) {
                for ptr in ptrs {
                    self.device.free(ptr, bytes);
                }
            }
            p.bytes = 0;
        }
    }

    fn give_back(&self, ptr: DevicePtr, bytes: usize) {
        if let Ok(mut p) = self.pool.lock() {
            if p.bytes + bytes <= POOL_LIMIT_BYTES {
                p.free.entry(bytes).or_default().push(ptr);
                p.bytes += bytes;
                return;
            }
        }
        self.staging.quiesce(self.device.as_ref());
        self.device.free(ptr, bytes);
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        self.staging.release(self.device.as_ref());
        self.release_pool();
    }
}

/// `n` zero elements of `T` for a download to fill, from the allocator's zeroed memory: a
/// large buffer is fresh pages, zero without a pass that writes them first.
/// [`Error::OutOfMemory`] where the allocator refuses.
pub(crate) fn zeroed_vec<T: Pod>(n: usize) -> Result<Vec<T>, Error> {
    let refused = || Error::OutOfMemory { bytes: n.saturating_mul(std::mem::size_of::<T>()) };
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| refused())?;
    if layout.size() == 0 {
        return Ok(vec![T::default(); n]);
    }
    // SAFETY: the layout's size is not zero; the allocation is T's layout for n elements,
    // from the global allocator, and every element is all zero bits, a valid `T` (`Pod`).
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            return Err(refused());
        }
        Ok(Vec::from_raw_parts(ptr, n, n))
    }
}

/// A device buffer of `len` elements of `T`, returned to the pool when dropped.
pub(crate) struct DevBuf<'g, T> {
    gpu: &'g Gpu,
    ptr: DevicePtr,
    len: usize,
    /// The allocation's size (its pool's size class; at least `len` elements).
    bytes: usize,
    /// Allocated by the `Gpu` (returned to its pool when dropped), or borrowed memory.
    owned: bool,
    _t: PhantomData<T>,
}

impl<T> DevBuf<'_, T> {
    pub(crate) fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Elements of `T`.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Allocated by its `Gpu` (not [`Gpu::borrowed`]).
    pub(crate) fn is_owned(&self) -> bool {
        self.owned
    }

    /// The `Gpu` whose device holds the buffer.
    pub(crate) fn gpu(&self) -> *const Gpu {
        self.gpu
    }
}

impl<T> Drop for DevBuf<'_, T> {
    fn drop(&mut self) {
        if self.owned {
            self.gpu.give_back(self.ptr, self.bytes);
        }
    }
}

/// A packed image on the device.
pub(crate) struct DevImage<'g, T> {
    pub(crate) buf: DevBuf<'g, T>,
    pub(crate) width: usize,
    pub(crate) height: usize,
}

/// A kernel launch as [`Gpu::launch`] takes it: `kernel` over `grid` blocks of `block`
/// threads, with `shared_bytes` of dynamic shared memory and `args`.
#[derive(Clone, Copy)]
pub(crate) struct KernelCall<'a> {
    pub(crate) kernel: Kernel,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared_bytes: u32,
    pub(crate) args: &'a [Arg],
}

impl<'a> KernelCall<'a> {
    /// A launch with no dynamic shared memory.
    pub(crate) fn new(kernel: Kernel, grid: [u32; 3], block: [u32; 3], args: &'a [Arg]) -> Self {
        KernelCall { kernel, grid, block, shared_bytes: 0, args }
    }

    /// Whether the grid has an empty dimension: no thread would run, nothing is launched.
    fn is_empty(&self) -> bool {
        self.grid.contains(&0)
    }

    /// The argument values as the kernel reads them ([`Arg::bits`]), marshalled on the host
    /// before the device call.
    fn values(&self) -> Vec<u64> {
        self.args.iter().map(Arg::bits).collect()
    }

    /// Launches the call on `d` with `pointers` to its [`values`](Self::values) (nothing
    /// where it [`is_empty`](Self::is_empty)).
    fn launch_on(&self, d: &dyn Device, pointers: &mut [*mut c_void]) -> Result<(), Error> {
        if self.is_empty() {
            return Ok(());
        }
        d.launch(self.kernel, self.grid, self.block, self.shared_bytes, pointers)
    }
}

/// A pointer to each of a launch's argument `values`, as the driver takes them.
fn pointers_to(values: &mut [u64]) -> Vec<*mut c_void> {
    values.iter_mut().map(|v| (v as *mut u64).cast()).collect()
}

/// One kernel argument, by value as the kernel declares it.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // every variant is a kernel parameter type; not all are used yet
pub(crate) enum Arg {
    Ptr(DevicePtr),
    I32(i32),
    U32(u32),
    F32(f32),
    F64(f64),
    U64(u64),
}

impl Arg {
    /// The value in the low bytes of a u64 (little-endian: a pointer to it points at the
    /// argument as the kernel reads it).
    fn bits(&self) -> u64 {
        match *self {
            Arg::Ptr(p) | Arg::U64(p) => p,
            Arg::I32(v) => v as u32 as u64,
            Arg::U32(v) => v as u64,
            Arg::F32(v) => v.to_bits() as u64,
            Arg::F64(v) => v.to_bits(),
        }
    }
}

impl<T> From<&DevBuf<'_, T>> for Arg {
    fn from(b: &DevBuf<'_, T>) -> Arg {
        Arg::Ptr(b.ptr)
    }
}
impl<T> From<&DevImage<'_, T>> for Arg {
    fn from(b: &DevImage<'_, T>) -> Arg {
        Arg::Ptr(b.buf.ptr)
    }
}
impl From<i32> for Arg {
    fn from(v: i32) -> Arg {
        Arg::I32(v)
    }
}
impl From<u32> for Arg {
    fn from(v: u32) -> Arg {
        Arg::U32(v)
    }
}
impl From<f32> for Arg {
    fn from(v: f32) -> Arg {
        Arg::F32(v)
    }
}
impl From<u64> for Arg {
    fn from(v: u64) -> Arg {
        Arg::U64(v)
    }
}
impl From<f64> for Arg {
    fn from(v: f64) -> Arg {
        Arg::F64(v)
    }
}

/// `args![a, b, w]`: a kernel's argument list, each converted by `Arg::from`.
macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$($crate::device::Arg::from($a)),*] };
}
pub(crate) use args;

/// `n` as a kernel's `int` argument, or an error naming `what` (images and counts past
/// i32::MAX are beyond the kernels' indexing).
pub(crate) fn int(n: usize, what: &'static str) -> Result<i32, Error> {
    i32::try_from(n).map_err(|_| Error::OutOfRange { name: what, value: n.min(i64::MAX as usize) as i64, min: 0, max: i32::MAX as i64 })
}

/// Length of the segments a sliding-window pass splits each line of `len` into (a thread
/// per line and segment, the segments along the grid's y): at least 256, at least twice
/// the `window` whose sum each segment starts from, and few enough for the grid's y
/// dimension. One thread per whole line starves the GPU (3 to 6 % occupancy measured on
/// an H200 for 1920 x 1080 and 4096 x 4096).
pub(crate) fn line_segment(len: usize, window: usize) -> usize {
    256usize.max(2 * window).max(len.div_ceil(65_535))
}

/// Blocks of `block` threads covering `n` items.
pub(crate) fn blocks(n: usize, block: u32) -> u32 {
    n.div_ceil(block as usize).min(u32::MAX as usize) as u32
}

#[cfg(test)]
mod tests {
    use super::{size_class, zeroed_vec};
    use tessera_core::{Error, Rgba8};

    #[test]
    fn zeroed_vectors_are_zero_or_out_of_memory() {
        assert!(zeroed_vec::<u8>(0).unwrap().is_empty());
        assert!(zeroed_vec::<f64>(3).unwrap().iter().all(|v| v.to_bits() == 0));
        let mut big = zeroed_vec::<Rgba8>(1 << 20).unwrap();
        assert_eq!((big.len(), big.capacity()), (1 << 20, 1 << 20));
        assert!(big.iter().all(|p| *p == Rgba8::default()));
        // Dropped and grown as any vector.
        big.push(Rgba8::default());
        // More bytes than an allocation may hold: refused before the allocator is asked (a
        // request it refuses would abort under ThreadSanitizer, whose allocator does not
        // return null).
        assert!(matches!(zeroed_vec::<u64>(usize::MAX / 4), Err(Error::OutOfMemory { .. })));
    }

    #[test]
    fn size_classes_hold_the_request_and_waste_at_most_a_quarter() {
        let mut last = 0;
        for bytes in (1..70_000).chain([1 << 20, (1 << 20) + 1, 9_216_000, usize::MAX / 2 + 3]) {
            let c = size_class(bytes);
            assert!(c >= bytes && c >= last, "{bytes} -> {c}");
            assert!(bytes <= 256 || c - bytes <= bytes / 4, "{bytes} -> {c}");
            assert_eq!(size_class(c), c, "a class is its own class: {bytes} -> {c}");
            last = c;
        }
        // Sizes that differ a little share a class: a window's searches reuse the last one's.
        assert_eq!(size_class(240 * 4489 * 8), size_class(246 * 4489 * 8));
        assert_eq!(size_class(usize::MAX), usize::MAX);
    }
}

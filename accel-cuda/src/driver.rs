//! The real GPU as a [`Device`], through the CUDA driver API (cudarc's thin `result` layer):
//! device 0's primary context, kernels compiled by NVRTC for the device's architecture on
//! first use (`nvrtc.rs`), plain `cuMemAlloc` allocations (never managed memory), launches
//! on the legacy default stream; staged transfers (`transfer.rs`) through `cuMemHostAlloc`
//! chunks and asynchronous copies on non-blocking streams ordered by events. cudarc panics where a library is missing, so [`CudaDevice::open`]
//! checks for `libcuda` and NVRTC first and contains the start-up in `catch_unwind`.

use crate::device::{Device, DevicePtr};
use crate::kernels::{Kernel, Module};
use crate::nvrtc;
use crate::transfer::{Event, Stream};
use cudarc::driver::{result, sys};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::mem::MaybeUninit;
use std::sync::Mutex;
use tessera_core::Error;

/// The CUDA driver version this build's kernels need at least (13.0: NVRTC 13.0's PTX).
const MIN_DRIVER: i32 = 13000;

pub(crate) struct CudaDevice {
    ctx: sys::CUcontext,
    arch: String,
    model: String,
    description: String,
    /// Streaming multiprocessors (for launch shapes that fill the device).
    multiprocessors: usize,
    modules: Mutex<HashMap<Module, sys::CUmodule>>,
    functions: Mutex<HashMap<&'static str, usize>>,
}

// SAFETY: a CUcontext and the module and function handles are usable from any thread once
// the context is made current there, which every method does first.
unsafe impl Send for CudaDevice {}
unsafe impl Sync for CudaDevice {}

fn driver_error(what: &str, e: result::DriverError) -> Error {
    let name = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    Error::Backend(format!("CUDA {what}: {name}"))
}

impl CudaDevice {
    /// Opens device 0: the driver library, its version, the device and its primary context.
    /// Every failure is [`Error::BackendUnavailable`] with the reason.
    pub(crate) fn open() -> Result<Self, Error> {
        match std::panic::catch_unwind(Self::open_unguarded) {
            Ok(r) => r,
            Err(_) => Err(Error::BackendUnavailable("the CUDA driver library failed while starting".into())),
        }
    }

    fn open_unguarded() -> Result<Self, Error> {
        let unavailable = |why: String| Error::BackendUnavailable(why);
        // SAFETY: only tries to open the library by its names.
        if !unsafe { sys::is_culib_present() } {
            return Err(unavailable("no CUDA device: the CUDA driver (libcuda.so) is not installed".into()));
        }
        let mut version = 0;
        // SAFETY: an out-pointer to an int; callable before cuInit.
        unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(|e| unavailable(format!("no CUDA device: cuDriverGetVersion: {e:?}")))?;
        if version < MIN_DRIVER {
            return Err(unavailable(format!(
                "no usable CUDA device: driver supports CUDA {}.{}, tessera's kernels need {}.{} or later",
                version / 1000,
                version % 1000 / 10,
                MIN_DRIVER / 1000,
                MIN_DRIVER % 1000 / 10
            )));
        }
        result::init().map_err(|e| unavailable(format!("no CUDA device: cuInit: {e:?}")))?;
        let count = result::device::get_count().map_err(|e| unavailable(format!("no CUDA device: {e:?}")))?;
        if count < 1 {
            return Err(unavailable("no CUDA device: the driver lists none".into()));
        }
        nvrtc::load().map_err(|e| unavailable(format!("CUDA device present but {e}")))?;
        let dev = result::device::get(0).map_err(|e| unavailable(format!("cuDeviceGet: {e:?}")))?;
        let attr = |a| {
            // SAFETY: `dev` came from cuDeviceGet.
            unsafe { result::device::get_attribute(dev, a) }.map_err(|e| unavailable(format!("cuDeviceGetAttribute: {e:?}")))
        };
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let multiprocessors = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as usize;
        let name = result::device::get_name(dev).unwrap_or_else(|_| "unknown GPU".into());
        // SAFETY: `dev` came from cuDeviceGet; the context is released never (process-long).
        let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(|e| unavailable(format!("cuDevicePrimaryCtxRetain: {e:?}")))?;
        let arch = nvrtc::target_for(major, minor).map_err(|e| unavailable(format!("sm_{major}{minor}: {e}")))?;
        let description = format!("{name} (sm_{major}{minor}, kernels as {arch}, driver {}.{})", version / 1000, version % 1000 / 10);
        Ok(CudaDevice { ctx, arch, model: name, description, multiprocessors, modules: Mutex::default(), functions: Mutex::default() })
    }

    /// The device's name, architecture and driver version, for reports.
    pub(crate) fn description(&self) -> &str {
        &self.description
    }

    fn current(&self) -> Result<(), Error> {
        // SAFETY: `ctx` is the retained primary context.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| driver_error("cuCtxSetCurrent", e))
    }

    /// The function handle of `kernel`, compiling and loading its module on first use.
    fn function(&self, kernel: Kernel) -> Result<sys::CUfunction, Error> {
        if let Some(&f) = self.functions.lock().map_err(|_| Error::Backend("CUDA function table poisoned".into()))?.get(kernel.name) {
            return Ok(f as sys::CUfunction);
        }
        let module = {
            let mut modules = self.modules.lock().map_err(|_| Error::Backend("CUDA module table poisoned".into()))?;
            match modules.get(&kernel.module) {
                Some(&m) => m,
                None => {
                    let compiled = nvrtc::compile(kernel.module, &self.arch).map_err(Error::Backend)?;
                    // SAFETY: a CUBIN NVRTC produced for this device's architecture, or
                    // NUL-terminated PTX for an older one.
                    let m = unsafe { result::module::load_data(compiled.image.as_ptr().cast()) }.map_err(|e| driver_error("cuModuleLoadData", e))?;
                    modules.insert(kernel.module, m);
                    m
                }
            }
        };
        let cname = CString::new(kernel.name).map_err(|_| Error::Backend(format!("kernel name {:?}", kernel.name)))?;
        // SAFETY: `module` is loaded and never unloaded.
        let f = unsafe { result::module::get_function(module, cname) }.map_err(|e| driver_error(&format!("cuModuleGetFunction({})", kernel.name), e))?;
        if let Ok(mut t) = self.functions.lock() {
            t.insert(kernel.name, f as usize);
        }
        Ok(f)
    }
}

impl CudaDevice {
    /// The device's copy bandwidth in GB/s, bytes read plus bytes written: the median of
    /// `reps` device-to-device copies of `bytes`, each timed by events after one warm-up.
    /// The ceiling a memory-bound kernel is measured against.
    pub(crate) fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64, Error> {
        let (src, dst) = (self.alloc(bytes)?, self.alloc(bytes));
        let dst = match dst {
            Ok(d) => d,
            Err(e) => {
                self.free(src, bytes);
                return Err(e);
            }
        };
        let measured = (|| {
            self.memset(src, 0x5a, bytes)?;
            let event = || result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(|e| driver_error("cuEventCreate", e));
            let start = event()?;
            let end = match event() {
                Ok(e) => e,
                Err(e) => {
                    // SAFETY: created above, not recorded.
                    let _ = unsafe { result::event::destroy(start) };
                    return Err(e);
                }
            };
            let mut times = Vec::with_capacity(reps.max(1));
            let timed = (0..=reps.max(1)).try_for_each(|i| {
                // SAFETY: both allocations hold `bytes`; events of this context on the default stream.
                let ms = unsafe {
                    result::event::record(start, std::ptr::null_mut())
                        .and_then(|_| result::memcpy_dtod_async(dst, src, bytes, std::ptr::null_mut()))
                        .and_then(|_| result::event::record(end, std::ptr::null_mut()))
                        .and_then(|_| result::event::synchronize(end))
                        .and_then(|_| result::event::elapsed(start, end))
                }
                .map_err(|e| driver_error("timed device-to-device copy", e))?;
                if i > 0 {
                    times.push(ms as f64); // the first copy warms up
                }
                Ok(())
            });
            // SAFETY: events created above, no longer used (destroyed on every path).
            unsafe {
                let _ = result::event::destroy(start);
                let _ = result::event::destroy(end);
            }
            timed?;
            times.sort_by(f64::total_cmp);
            Ok(2.0 * bytes as f64 / (times[times.len() / 2] * 1e-3) / 1e9)
        })();
        self.free(src, bytes);
        self.free(dst, bytes);
        measured
    }
}

/// Where the host side of a measured transfer lives (see `CudaDevice::link_bandwidth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostMemory {
    /// An ordinary (pageable) allocation, copied by `cuMemcpyHtoD` / `cuMemcpyDtoH`.
    Pageable,
    /// One page-locked allocation copied by a single asynchronous copy: the link itself.
    Pinned,
    /// An ordinary allocation copied by the backend's transfers (staged through pinned
    /// chunks): what an operation's upload and download reach.
    Staged,
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

impl CudaDevice {
    /// Host-to-device and device-to-host bandwidth in GB/s of copies of `bytes` with the
    /// host side in `memory`: medians of `reps` copies each way after one warm-up. Pinned
    /// copies are timed by events on their stream, the others by the host's clock around
    /// the whole call (as an operation sees them).
    pub(crate) fn link_bandwidth(self, memory: HostMemory, bytes: usize, reps: usize) -> Result<(f64, f64), Error> {
        let reps = reps.max(1);
        let gb_s = |ms: f64| bytes as f64 / (ms * 1e-3) / 1e9;
        match memory {
            HostMemory::Pageable => {
                let dev = self.alloc(bytes)?;
                let mut host = Vec::new();
                let r = (|| {
                    host.try_reserve_exact(bytes).map_err(|_| Error::OutOfMemory { bytes })?;
                    host.resize(bytes, 0x5au8);
                    let (mut up, mut down) = (Vec::new(), Vec::new());
                    for i in 0..=reps {
                        let t = std::time::Instant::now();
                        self.upload(dev, &host)?;
                        let u = t.elapsed().as_secs_f64() * 1e3;
                        let t = std::time::Instant::now();
                        self.download(crate::device::as_bytes_mut(&mut host), dev)?;
                        let d = t.elapsed().as_secs_f64() * 1e3;
                        if i > 0 {
                            up.push(u);
                            down.push(d);
                        }
                    }
                    Ok((gb_s(median(up)), gb_s(median(down))))
                })();
                self.free(dev, bytes);
                r
            }
            HostMemory::Pinned => {
                let dev = self.alloc(bytes)?;
                let r = match self.host_alloc(bytes) {
                    Ok(host) => {
                        let r = self.pinned_rates(dev, host, bytes, reps).map(|(u, d)| (gb_s(u), gb_s(d)));
                        self.host_free(host, bytes);
                        r
                    }
                    Err(e) => Err(e),
                };
                self.free(dev, bytes);
                r
            }
            HostMemory::Staged => {
                let gpu = crate::device::Gpu::new(Box::new(self));
                let buf = gpu.buffer::<u8>(bytes)?;
                let mut host = Vec::new();
                host.try_reserve_exact(bytes).map_err(|_| Error::OutOfMemory { bytes })?;
                host.resize(bytes, 0x5au8);
                let (mut up, mut down) = (Vec::new(), Vec::new());
                for i in 0..=reps {
                    let t = std::time::Instant::now();
                    gpu.upload_into(&buf, 0, &host)?;
                    gpu.synchronize()?;
                    let u = t.elapsed().as_secs_f64() * 1e3;
                    let t = std::time::Instant::now();
                    gpu.download(&buf, &mut host)?;
                    let d = t.elapsed().as_secs_f64() * 1e3;
                    if i > 0 {
                        up.push(u);
                        down.push(d);
                    }
                }
                Ok((gb_s(median(up)), gb_s(median(down))))
            }
        }
    }

    /// Median milliseconds of `reps` asynchronous copies each way between the pinned `host`
    /// and `dev` (both of `bytes`), timed by events on a stream of their own.
    fn pinned_rates(&self, dev: DevicePtr, host: *mut u8, bytes: usize, reps: usize) -> Result<(f64, f64), Error> {
        // SAFETY: `host` is a fresh page-locked allocation of `bytes`.
        unsafe { host.write_bytes(0x5a, bytes) };
        let stream = self.stream_create()?;
        let event = || result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(|e| driver_error("cuEventCreate", e));
        let events = event().and_then(|a| match event() {
            Ok(b) => Ok((a, b)),
            Err(e) => {
                // SAFETY: created above, never recorded.
                let _ = unsafe { result::event::destroy(a) };
                Err(e)
            }
        });
        let r = events.and_then(|(start, end)| {
            let s = stream as usize as sys::CUstream;
            let (mut up, mut down) = (Vec::new(), Vec::new());
            let timed = (0..=reps).try_for_each(|i| {
                // SAFETY: `dev` and `host` hold `bytes` each and outlive the copies (each is
                // waited for by its end event); events and stream of this context.
                let (u, d) = unsafe {
                    let time = |copy: &dyn Fn() -> sys::CUresult| {
                        result::event::record(start, s)
                            .and_then(|_| copy().result())
                            .and_then(|_| result::event::record(end, s))
                            .and_then(|_| result::event::synchronize(end))
                            .and_then(|_| result::event::elapsed(start, end))
                    };
                    (time(&|| sys::cuMemcpyHtoDAsync_v2(dev, host.cast_const().cast(), bytes, s)), time(&|| sys::cuMemcpyDtoHAsync_v2(host.cast(), dev, bytes, s)))
                };
                let (u, d) = (u.map_err(|e| driver_error("timed pinned upload", e))?, d.map_err(|e| driver_error("timed pinned download", e))?);
                if i > 0 {
                    up.push(u as f64);
                    down.push(d as f64);
                }
                Ok(())
            });
            // SAFETY: both events were created above and are no longer used.
            unsafe {
                let _ = result::event::destroy(start);
                let _ = result::event::destroy(end);
            }
            timed.map(|_| (median(up), median(down)))
        });
        self.stream_destroy(stream);
        r
    }
}

impl Device for CudaDevice {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn multiprocessors(&self) -> usize {
        self.multiprocessors
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr, Error> {
        self.current()?;
        // SAFETY: a plain device allocation in the current context.
        unsafe { result::malloc_sync(bytes) }.map_err(|e| {
            let (free, total) = result::mem_get_info().unwrap_or((0, 0));
            if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                Error::Backend(format!(
                    "GPU out of memory: {} MiB needed for one buffer, {} MiB free of {} MiB on {}",
                    bytes >> 20,
                    free >> 20,
                    total >> 20,
                    self.description
                ))
            } else {
                driver_error("cuMemAlloc", e)
            }
        })
    }

    fn free(&self, ptr: DevicePtr, _bytes: usize) {
        if self.current().is_ok() {
            // SAFETY: `ptr` came from `alloc` and is freed once.
            let _ = unsafe { result::free_sync(ptr) };
        }
    }

    fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<(), Error> {
        self.current()?;
        // SAFETY: `dst` holds at least `src.len()` bytes (the Device contract).
        unsafe { result::memcpy_htod_sync(dst, src) }.map_err(|e| driver_error("cuMemcpyHtoD", e))
    }

    fn download(&self, dst: &mut [MaybeUninit<u8>], src: DevicePtr) -> Result<(), Error> {
        self.current()?;
        // SAFETY: `src` holds at least `dst.len()` bytes, which `dst` holds; the copy waits
        // for prior launches.
        unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), src, dst.len()) }.result().map_err(|e| driver_error("cuMemcpyDtoH (or a kernel before it)", e))
    }

    fn memset(&self, dst: DevicePtr, value: u8, bytes: usize) -> Result<(), Error> {
        self.current()?;
        // SAFETY: `dst` holds at least `bytes` bytes.
        unsafe { result::memset_d8_sync(dst, value, bytes) }.map_err(|e| driver_error("cuMemsetD8", e))
    }

    fn copy(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> Result<(), Error> {
        self.current()?;
        // SAFETY: both are allocations of this context holding at least `bytes` bytes.
        unsafe { result::memcpy_dtod_sync(dst, src, bytes) }.map_err(|e| driver_error("cuMemcpyDtoD", e))
    }

    fn launch(&self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared_bytes: u32, args: &mut [*mut c_void]) -> Result<(), Error> {
        self.current()?;
        let f = self.function(kernel)?;
        // SAFETY: `f` is a loaded kernel; `args` points at one value per parameter of the
        // kernel's type (each kernel driver's contract, checked through the shim in CI).
        crate::kernel_clock::timed(|| unsafe {
            result::launch_kernel(f, (grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), shared_bytes, std::ptr::null_mut(), args)
        })
        .map_err(|e| driver_error(&format!("launch of {} ({grid:?} x {block:?}, {shared_bytes} B shared)", kernel.name), e))
    }

    fn host_alloc(&self, bytes: usize) -> Result<*mut u8, Error> {
        self.current()?;
        // SAFETY: a page-locked allocation in the current context; bytes have no invalid values.
        unsafe { result::malloc_host(bytes, 0) }.map(|p| p.cast()).map_err(|e| driver_error("cuMemHostAlloc", e))
    }

    fn host_free(&self, ptr: *mut u8, _bytes: usize) {
        if self.current().is_ok() {
            // SAFETY: `ptr` came from `host_alloc`, no copy uses it any more, freed once.
            let _ = unsafe { result::free_host(ptr.cast()) };
        }
    }

    fn stream_create(&self) -> Result<Stream, Error> {
        self.current()?;
        result::stream::create(result::stream::StreamKind::NonBlocking).map(|s| s as usize as Stream).map_err(|e| driver_error("cuStreamCreate", e))
    }

    fn stream_destroy(&self, stream: Stream) {
        if self.current().is_ok() {
            // SAFETY: a stream of `stream_create`, destroyed once (queued work still completes).
            let _ = unsafe { result::stream::destroy(stream as usize as sys::CUstream) };
        }
    }

    fn event_create(&self) -> Result<Event, Error> {
        self.current()?;
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map(|e| e as usize as Event).map_err(|e| driver_error("cuEventCreate", e))
    }

    fn event_destroy(&self, event: Event) {
        if self.current().is_ok() {
            // SAFETY: an event of `event_create`, destroyed once.
            let _ = unsafe { result::event::destroy(event as usize as sys::CUevent) };
        }
    }

    fn record(&self, event: Event, stream: Stream) -> Result<(), Error> {
        self.current()?;
        // SAFETY: an event of `event_create` and a stream of `stream_create` (or the legacy
        // stream, 0), both of this context and alive.
        unsafe { result::event::record(event as usize as sys::CUevent, stream as usize as sys::CUstream) }.map_err(|e| driver_error("cuEventRecord", e))
    }

    fn stream_wait(&self, stream: Stream, event: Event) -> Result<(), Error> {
        self.current()?;
        // SAFETY: as in `record`.
        unsafe { result::stream::wait_event(stream as usize as sys::CUstream, event as usize as sys::CUevent, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .map_err(|e| driver_error("cuStreamWaitEvent", e))
    }

    fn event_wait(&self, event: Event) -> Result<(), Error> {
        self.current()?;
        // SAFETY: an event of `event_create`, alive.
        unsafe { result::event::synchronize(event as usize as sys::CUevent) }.map_err(|e| driver_error("cuEventSynchronize (or a copy before it)", e))
    }

    unsafe fn upload_async(&self, dst: DevicePtr, src: *const u8, bytes: usize, stream: Stream) -> Result<(), Error> {
        self.current()?;
        // SAFETY: the caller's contract: `dst` holds `bytes`, `src` stays valid until the
        // copy completes; a stream of this context.
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), bytes, stream as usize as sys::CUstream) }.result().map_err(|e| driver_error("cuMemcpyHtoDAsync", e))
    }

    unsafe fn download_async(&self, dst: *mut u8, src: DevicePtr, bytes: usize, stream: Stream) -> Result<(), Error> {
        self.current()?;
        // SAFETY: the caller's contract: `src` holds `bytes`, `dst` stays valid and untouched
        // until the copy completes; a stream of this context.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, stream as usize as sys::CUstream) }.result().map_err(|e| driver_error("cuMemcpyDtoHAsync", e))
    }

    fn synchronize(&self) -> Result<(), Error> {
        self.current()?;
        result::ctx::synchronize().map_err(|e| driver_error("cuCtxSynchronize (or work before it)", e))
    }
}

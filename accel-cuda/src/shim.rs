//! The CPU shim as a [`Device`]: host memory stands for device memory, and a launch runs the
//! kernel's C++ build (`shim/`, compiled by `build.rs` with the `shim` feature) on CPU
//! threads. For tests only: results are the kernels', timings mean nothing.

use crate::device::{Device, DevicePtr};
use crate::kernels::Kernel;
use std::alloc::{alloc, dealloc, Layout};
use std::ffi::{c_char, c_int, c_void, CString};
use tessera_core::Error;

extern "C" {
    fn tessera_shim_launch(name: *const c_char, grid: *const u32, block: *const u32, shared_bytes: u32, args: *mut *mut c_void) -> c_int;
    fn tessera_shim_has(name: *const c_char) -> c_int;
}

/// Device memory's alignment (cudaMalloc gives at least 256 bytes).
const ALIGN: usize = 256;

pub(crate) struct ShimDevice;

impl ShimDevice {
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

    fn download(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), Error> {
        // SAFETY: `src` is an allocation at least `dst.len()` bytes long.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn memset(&self, dst: DevicePtr, value: u8, bytes: usize) -> Result<(), Error> {
        // SAFETY: `dst` holds at least `bytes` bytes.
        unsafe { (dst as *mut u8).write_bytes(value, bytes) };
        Ok(())
    }

    fn launch(&self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared_bytes: u32, args: &mut [*mut c_void]) -> Result<(), Error> {
        let name = CString::new(kernel.name).map_err(|_| Error::Backend(format!("kernel name {:?}", kernel.name)))?;
        // SAFETY: `args` points at one value per kernel parameter, of its type (the launch
        // contract every kernel driver keeps, checked by the shim tests).
        let rc = unsafe { tessera_shim_launch(name.as_ptr(), grid.as_ptr(), block.as_ptr(), shared_bytes, args.as_mut_ptr()) };
        match rc {
            0 => Ok(()),
            1 => Err(Error::Backend(format!("shim: no kernel {} (in {})", kernel.name, kernel.module.file()))),
            2 => Err(Error::Backend(format!("shim: launch shape {grid:?} x {block:?} refused for {}", kernel.name))),
            _ => Err(Error::Backend(format!("shim: could not start the threads of one block of {}", kernel.name))),
        }
    }

    fn synchronize(&self) -> Result<(), Error> {
        Ok(())
    }
}

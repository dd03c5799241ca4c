//! A `#![no_std]` `#![no_main]` program that links `tessera-core` with no standard library:
//! its own bump allocator over a static arena, its own panic handler, and a C `main` that
//! the platform's C runtime calls. It runs a 5x5 mean filter on a 64x48 image, checks one
//! pixel against the value computed by hand, and returns 0 on success (CI runs it).

#![no_std]
#![no_main]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};
use tessera_core::filter::{mean_filter, BoxParams};
use tessera_core::{Border, Image, Parallelism};

const ARENA_BYTES: usize = 1 << 20;

/// Hands out memory from a static arena and never frees it: enough for one filter call.
struct BumpAllocator {
    arena: UnsafeCell<[u8; ARENA_BYTES]>,
    next: AtomicUsize,
}

// SAFETY: `alloc` hands out disjoint ranges (one atomic cursor), so sharing is sound.
unsafe impl Sync for BumpAllocator {}

unsafe impl GlobalAlloc for BumpAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.arena.get() as usize;
        let mut cur = self.next.load(Ordering::Relaxed);
        loop {
            let start = (base + cur).next_multiple_of(layout.align()) - base;
            let end = start + layout.size();
            if end > ARENA_BYTES {
                return core::ptr::null_mut();
            }
            match self.next.compare_exchange(cur, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return (base + start) as *mut u8,
                Err(seen) => cur = seen,
            }
        }
    }
    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static ALLOCATOR: BumpAllocator = BumpAllocator { arena: UnsafeCell::new([0; ARENA_BYTES]), next: AtomicUsize::new(0) };

// The C library: its start-up code calls `main`, and it provides `abort`, `memcpy` and
// `memset`. No Rust standard library is linked.
#[link(name = "c")]
extern "C" {
    fn abort() -> !;
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: the C library's abort never returns.
    unsafe { abort() }
}

/// The prebuilt `alloc` of the std target was compiled with unwinding and names this
/// symbol; with `panic = "abort"` nothing unwinds, so it is never called.
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}

#[no_mangle]
pub extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    let (w, h) = (64, 48);
    let Ok(src) = Image::from_fn(w, h, |x, y| ((x * 3 + y * 5) % 256) as u8) else { return 1 };
    let Ok(mut dst) = Image::<u8>::new(w, h) else { return 2 };
    let p = BoxParams::square(5, Border::Reflect101);
    if mean_filter(src.view(), dst.view_mut(), &p, Parallelism::Sequential).is_err() {
        return 3;
    }
    // Interior pixel (10, 10): the window is x 8..=12, y 8..=12, value 3x + 5y, whose mean
    // is 3 * 10 + 5 * 10 = 80.
    if dst.at(10, 10) != 80 {
        return 4;
    }
    // Bad input is an error in no_std builds too.
    if mean_filter(src.view(), dst.view_mut(), &BoxParams::square(0, Border::Reflect101), Parallelism::Sequential).is_ok() {
        return 5;
    }
    0
}

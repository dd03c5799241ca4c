//! The global allocator: `linked_list_allocator`'s heap over the board's RAM region,
//! counting the bytes in use so that the firmware can report its peak.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};
use linked_list_allocator::LockedHeap;

pub struct CountingHeap {
    heap: LockedHeap,
    in_use: AtomicUsize,
    peak: AtomicUsize,
}

impl CountingHeap {
    pub const fn empty() -> Self {
        CountingHeap { heap: LockedHeap::empty(), in_use: AtomicUsize::new(0), peak: AtomicUsize::new(0) }
    }

    /// Hands `[start, start + size)` to the heap.
    ///
    /// # Safety
    /// The region is RAM that nothing else uses, for the rest of the program; call once.
    pub unsafe fn init(&self, start: usize, size: usize) {
        // SAFETY: as the caller guarantees.
        unsafe { self.heap.lock().init(start as *mut u8, size) }
    }

    /// The most bytes (as requested by the callers) that were allocated at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Bytes allocated now.
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Relaxed)
    }

    /// Starts a new peak from what is allocated now (to measure one operation).
    pub fn reset_peak(&self) {
        self.peak.store(self.in_use(), Ordering::Relaxed);
    }

    /// Bytes the heap was given.
    pub fn size(&self) -> usize {
        self.heap.lock().size()
    }
}

// SAFETY: every call goes to `LockedHeap`, a correct allocator; the counters only watch.
unsafe impl GlobalAlloc for CountingHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { self.heap.alloc(layout) };
        if !p.is_null() {
            let now = self.in_use.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.in_use.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout (the caller's promise).
        unsafe { self.heap.dealloc(ptr, layout) }
    }
}

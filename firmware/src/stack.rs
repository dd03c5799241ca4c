//! Stack high-water mark by painting: the free part of the stack is filled with a pattern
//! at start-up, and the lowest word no longer holding it marks the deepest use.

const PAINT: u32 = 0xcccc_cccc;

/// The current stack pointer.
#[inline(always)]
fn sp() -> usize {
    let sp: usize;
    // SAFETY: reads a register, touches nothing.
    unsafe { core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// Paints `[bottom, sp - 256)`: the stack below the caller's frame, keeping a margin for
/// this function's own frame.
///
/// # Safety
/// `bottom` is the lowest address of the stack the caller runs on, 4-byte aligned.
#[inline(never)]
pub unsafe fn paint(bottom: usize) {
    let end = (sp() - 256) & !3;
    let mut p = bottom;
    while p < end {
        // SAFETY: below the live stack, inside the stack region (the caller's promise).
        unsafe { core::ptr::write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
}

/// Bytes of `[bottom, top)` used at the deepest point so far: from the first word above
/// `bottom` that lost its paint up to `top`.
///
/// # Safety
/// `paint(bottom)` ran first on this stack, whose top is `top`.
pub unsafe fn high_water(bottom: usize, top: usize) -> usize {
    let mut p = bottom;
    // SAFETY: reads inside the stack region, below the live frames or in them.
    while p < top && unsafe { core::ptr::read_volatile(p as *const u32) } == PAINT {
        p += 4;
    }
    top - p
}

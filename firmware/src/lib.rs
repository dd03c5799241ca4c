//! tessera-core on two embedded targets under QEMU: a Cortex-M4F (`mps2-an386`) and a
//! bare-metal AArch64 core (`virt`). Each binary runs the checks of [`suite`] on images
//! built into it, prints their digests and timings through semihosting, compares them
//! with the host's (`expected.rs`), reports its memory use, and exits with a non-zero
//! status on any mismatch (or on a panic).
//!
//! Binaries: `full` (every check) and `mean` (the mean filter alone, for the footprint).

#![no_std]

extern crate alloc;

#[cfg_attr(target_arch = "aarch64", path = "board/aarch64.rs")]
#[cfg_attr(target_arch = "arm", path = "board/cortex_m.rs")]
pub mod board;
mod expected;
pub mod heap;
pub mod stack;
pub mod suite;

use semihosting::println;
use suite::Check;

#[cfg(target_arch = "arm")]
pub use cortex_m_rt;
#[cfg(target_arch = "aarch64")]
pub use aarch64_rt;

#[global_allocator]
pub static HEAP: heap::CountingHeap = heap::CountingHeap::empty();

/// Defines the board's entry point, which runs `run(checks, label)`.
#[macro_export]
macro_rules! firmware_main {
    ($checks:expr, $label:expr) => {
        #[cfg(target_arch = "arm")]
        #[$crate::cortex_m_rt::entry]
        fn main() -> ! {
            $crate::run($checks, $label)
        }
        #[cfg(target_arch = "aarch64")]
        $crate::aarch64_rt::entry!(main, 32);
        #[cfg(target_arch = "aarch64")]
        fn main(_: u64, _: u64, _: u64, _: u64) -> ! {
            $crate::run($checks, $label)
        }
    };
}

/// Runs `checks`, reports, and exits: status 0 when every digest agrees with the host's
/// and every bad input gave its error, 1 otherwise.
pub fn run(checks: &[Check], label: &str) -> ! {
    let (stack_bottom, stack_top) = board::stack_region();
    // SAFETY: the board's stack region, which this code runs on.
    unsafe { stack::paint(stack_bottom) };
    let (heap_start, heap_end) = board::heap_region();
    // SAFETY: the region between the static data and the stack is used by nothing else.
    unsafe { HEAP.init(heap_start, heap_end - heap_start) };

    let counter = board::Counter::start();
    println!("tessera firmware `{label}` on {}", board::NAME);
    println!("result: exact = bit-identical to x86-64, bound = within the stated bound, FAIL");
    println!("count: {}; qemu-ms: the host's wall time under emulation", counter.describe());
    println!("{:<28} {:<6} {:<18} {:>16} {:>12} {:>9} {:>9}", "check", "result", "hash", "sum", "count", "qemu-ms", "heap-peak");
    let (mut passed, mut failed, mut heap_peak) = (0usize, 0usize, 0usize);
    for &check in checks {
        HEAP.reset_peak();
        let (t0, w0) = (counter.now(), wall_us());
        let got = check.run();
        let (count, wall) = (counter.since(t0), wall_us().saturating_sub(w0));
        heap_peak = heap_peak.max(HEAP.peak());
        let want = expected::EXPECTED.iter().find(|(name, _)| *name == check.name()).map(|(_, d)| d);
        let (ok, verdict) = match (&got, want) {
            (Ok(d), Some(w)) if d == w => (true, "exact"),
            (Ok(d), Some(w)) if d.agrees(w, check) => (true, "bound"),
            _ => (false, "FAIL"),
        };
        match got {
            Ok(d) => println!(
                "{:<28} {:<6} {:#018x} {:>16.6} {:>12} {:>9} {:>9}",
                check.name(),
                verdict,
                d.hash,
                d.sum,
                count,
                wall / 1000,
                HEAP.peak()
            ),
            Err(e) => println!("{:<28} {:<6} error: {e}", check.name(), verdict),
        }
        if let (false, Some(w)) = (ok, want) {
            println!("{:<28} {:<6} {:#018x} {:>16.6}   (the host's)", "", "want", w.hash, w.sum);
        }
        if ok { passed += 1 } else { failed += 1 }
    }
    let full = checks.len() > 1;
    HEAP.reset_peak();
    for (name, ok) in suite::bad_input(full) {
        println!("bad input: {name}: {}", if ok { "the expected error" } else { "FAIL" });
        if ok { passed += 1 } else { failed += 1 }
    }
    heap_peak = heap_peak.max(HEAP.peak());
    // SAFETY: painted at the start of `run`, on this stack.
    let stack_used = unsafe { stack::high_water(stack_bottom, stack_top) };
    println!(
        "memory: heap {} B available, peak over the run {} B; stack {} B of {} B used",
        heap_end - heap_start,
        heap_peak,
        stack_used,
        stack_top - stack_bottom
    );
    println!("firmware {label}: {passed} passed, {failed} failed");
    semihosting::process::exit(if failed == 0 { 0 } else { 1 })
}

/// The host's wall clock in microseconds (semihosting SYS_ELAPSED), 0 where unsupported.
fn wall_us() -> u64 {
    use semihosting::sys::arm_compat::{sys_elapsed, sys_tickfreq};
    match (sys_elapsed(), sys_tickfreq()) {
        (Ok(t), Ok(f)) if f > 0 => (t as u128 * 1_000_000 / f as u128) as u64,
        _ => 0,
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("PANIC: {info}");
    semihosting::process::exit(101)
}

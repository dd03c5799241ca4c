//! Counting a device stitching run's host instructions: with the `host-count` feature, the
//! run and each device call switch callgrind's collection, so that
//! `valgrind --tool=callgrind --collect-atstart=no` counts the run's host work alone (the
//! shim's kernel emulation and every other device call left out). Wall time on the shim
//! cannot separate the two as finely: the emulation between host steps evicts the host's
//! data from the caches. `scripts/host-instructions` runs it with the host work on the
//! run's thread (collection is one switch for the process: two threads calling devices at
//! once would garble it). Without the feature (and off x86-64) nothing is switched.
//!
//! With `TESSERA_HOST_COUNT=serial` as well, each pair's own host work (its plan, its
//! conclusion, its quality measures: what [`pair_work`] wraps, a pair to a thread in the
//! pool's design) is left out too, so the count is what stays on the run's thread however
//! many cores share the pairs: the host's serial part, read on any machine.

use std::sync::atomic::{AtomicU32, Ordering};

/// Why collection is off, counted: outside the run, inside a device call, inside a pair's
/// own work (serial counts). Collection is on exactly while the count is zero.
static OFF: AtomicU32 = AtomicU32::new(1);

/// One more reason for collection to be off.
pub(crate) fn pause() {
    if OFF.fetch_add(1, Ordering::Relaxed) == 0 {
        toggle();
    }
}

/// One reason fewer ([`pause`]'s end).
pub(crate) fn resume() {
    if OFF.fetch_sub(1, Ordering::Relaxed) == 1 {
        toggle();
    }
}

/// `work()`, a pair's own host work: left out of serial counts.
#[inline(always)]
pub(crate) fn pair_work<R>(work: impl FnOnce() -> R) -> R {
    if !counts_serial() {
        return work();
    }
    pause();
    let r = work();
    resume();
    r
}

/// Whether this is a serial count (`TESSERA_HOST_COUNT=serial` with the feature).
fn counts_serial() -> bool {
    static SERIAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    cfg!(feature = "host-count") && *SERIAL.get_or_init(|| std::env::var("TESSERA_HOST_COUNT").is_ok_and(|v| v == "serial"))
}

/// Flips callgrind's collection on or off (`CALLGRIND_TOGGLE_COLLECT`); outside valgrind
/// the request is a no-op sequence of rotations.
#[inline(always)]
fn toggle() {
    // Assembled in every x86-64 build (so that it cannot rot unseen), run only with the
    // feature.
    #[cfg(target_arch = "x86_64")]
    if cfg!(feature = "host-count") {
        // valgrind.h's client request: the request and its five arguments addressed by
        // rax, the result in rdx; the four rotations of rdi add up to 128 bits (no change)
        // and, followed by `xchg rbx, rbx`, are what valgrind recognizes.
        const TOGGLE_COLLECT: u64 = ((b'C' as u64) << 24 | (b'T' as u64) << 16) + 2;
        let request: [u64; 6] = [TOGGLE_COLLECT, 0, 0, 0, 0, 0];
        // SAFETY: rotations of rdi by a whole turn and an exchange of rbx with itself
        // change no register; rdx (the request's result) is declared clobbered.
        unsafe {
            core::arch::asm!(
                "rol rdi, 3", "rol rdi, 13", "rol rdi, 61", "rol rdi, 51", "xchg rbx, rbx",
                in("rax") request.as_ptr(), inout("rdx") 0u64 => _, out("rdi") _,
                options(nostack, preserves_flags)
            );
        }
    }
}

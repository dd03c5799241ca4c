//! Counting a device stitching run's host instructions: with the `host-count` feature, the
//! run and each device call toggle callgrind's collection, so that
//! `valgrind --tool=callgrind --collect-atstart=no` counts the run's host work alone (the
//! shim's kernel emulation and every other device call left out). Wall time on the shim
//! cannot separate the two as finely: the emulation between host steps evicts the host's
//! data from the caches. `scripts/host-instructions` runs it with the host work on the
//! run's thread (the toggles are global: two threads calling devices at once would garble
//! them). Without the feature (and off x86-64) [`toggle`] does nothing.

/// Flips callgrind's collection on or off (`CALLGRIND_TOGGLE_COLLECT`); outside valgrind
/// the request is a no-op sequence of rotations.
#[inline(always)]
pub(crate) fn toggle() {
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

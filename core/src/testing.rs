//! Helpers shared by the core's unit tests.

/// A small deterministic generator (xorshift64), so tests need no external RNG. The seed
/// must be non-zero.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in `0..1` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `0..1` with 24 random bits.
    pub fn unit_f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Runs `check` once per instruction-set level this CPU runs, with the kernels' dispatch
/// capped at that level on this thread: every variant, not only the best, is checked
/// against the same reference. Work inside must stay on this thread
/// (`Parallelism::Sequential`): rayon's workers do not see the cap.
/// A failing check names its level.
pub(crate) fn at_every_level(mut check: impl FnMut(crate::cpu::Level)) {
    extern crate std;
    struct Name(crate::cpu::Level);
    impl Drop for Name {
        fn drop(&mut self) {
            if std::thread::panicking() {
                std::eprintln!("(the check failed at level {:?})", self.0);
            }
        }
    }
    for level in crate::cpu::Level::available() {
        let _name = Name(level);
        crate::cpu::with_level(level, || check(level));
    }
}

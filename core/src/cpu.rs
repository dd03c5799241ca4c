//! CPU feature detection, once, for everyone; and the one way kernels dispatch on it.
//!
//! Detection: the features are asked once (with `std`, `is_x86_feature_detected!`, cached
//! in one atomic; without it, what the build's target features allow) and summed up as a
//! [`Level`], plus the extra AVX-512 features of the census kernel ([`census`]).
//!
//! Dispatch: a kernel is written once, as plain Rust or generic over a vector type, and
//! `multiversion!` compiles it three times, for AVX-512, for AVX2 + FMA (each with
//! `#[target_feature]`) and for the build's baseline, calling the clone of [`level`]. The
//! two target-feature lists are written in that macro alone; `fma`'s generic kernels and
//! `prefix`'s scans go through it too, naming their per-level vector type. Only the
//! hand-written AVX-512 intrinsic kernels (stereo WTA, aggregation, census) carry their
//! own `#[target_feature]`: one function each, behind a check of [`level`] or [`census`].
//!
//! Why a macro of our own rather than the `multiversion` crate, which did this before: that
//! crate detects features in each dispatcher itself (a second detection), cannot be told to
//! run a lower level, so tests could only check the best variant, and needs `std`. Why not
//! closures passed to one `#[target_feature]` trampoline: the clone would see the kernel's
//! slices through the closure's captures, without the `noalias` of function parameters
//! that lets LLVM vectorize without run-time overlap checks. Why not `wide` for kernels: it
//! picks instructions by compile-time `cfg(target_feature)`, so a library built for
//! baseline x86-64 gets no FMA and no 16 lanes from it. `wide` stays in the two places
//! where explicit 8-lane f32 arithmetic reads best (the NCC dot product, contrast's
//! accumulation): there its fixed, unfused arithmetic gives the same bits at every level.
//!
//! Soundness: the instruction-set-specific vector types (`fma::Avx2`, `prefix`'s scans)
//! are crate-private and only built inside the clones this macro calls after detection.
//!
//! ```compile_fail,E0603
//! // Safe code cannot build an AVX2 vector (and run AVX2 instructions) on a CPU that may
//! // lack AVX2: this compiled before the vector modules became private.
//! use tessera_core::fma::F32Vec;
//! let _ = tessera_core::fma::Avx2::splat(1.0);
//! ```

/// The instruction-set level a kernel runs at, in increasing order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The build's baseline (SSE2 on x86-64; any other target).
    Portable,
    /// AVX2, FMA and POPCNT (every AVX2 CPU has the last two).
    Avx2,
    /// AVX-512 F, BW, VL and DQ (Skylake-SP and later).
    Avx512,
}

impl Level {
    /// Whether code compiled for this level has a fused multiply-add instruction.
    pub fn has_fma(self) -> bool {
        self > Level::Portable || cfg!(target_feature = "fma")
    }

    /// Every level this CPU can run, lowest first: what tests check each variant at.
    #[cfg(test)]
    pub(crate) fn available() -> alloc::vec::Vec<Level> {
        let best = detected().level;
        [Level::Portable, Level::Avx2, Level::Avx512].into_iter().filter(|&l| l <= best).collect()
    }
}

/// What detection found.
#[derive(Clone, Copy)]
struct Features {
    level: Level,
    /// AVX-512 VPOPCNTDQ and VBMI, on top of the AVX-512 level.
    census: bool,
}

/// The one list of features asked: `$has!("name")` tells whether the CPU has one.
#[cfg(target_arch = "x86_64")]
macro_rules! features {
    ($($has:ident)::+) => {{
        let avx512 = $($has)::+!("avx512f")
            && $($has)::+!("avx512bw")
            && $($has)::+!("avx512vl")
            && $($has)::+!("avx512dq");
        let avx2 = $($has)::+!("avx2") && $($has)::+!("fma") && $($has)::+!("popcnt");
        let level = if avx512 && avx2 {
            Level::Avx512
        } else if avx2 {
            Level::Avx2
        } else {
            Level::Portable
        };
        let census = level == Level::Avx512 && $($has)::+!("avx512vpopcntdq") && $($has)::+!("avx512vbmi");
        Features { level, census }
    }};
}

/// `cfg!(target_feature)` in the shape of `is_x86_feature_detected!`.
#[cfg(all(target_arch = "x86_64", not(feature = "std")))]
macro_rules! compiled_with {
    ($f:tt) => {
        cfg!(target_feature = $f)
    };
}

#[inline]
fn detected() -> Features {
    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        /// 0: not asked yet; else 1 + level + 4 census.
        static CACHE: AtomicU8 = AtomicU8::new(0);
        // Kept out of line, so that the cached answer inlines into every dispatch.
        #[cold]
        #[inline(never)]
        fn ask() -> u8 {
            let f = features!(std::is_x86_feature_detected);
            let c = 1 + f.level as u8 + 4 * f.census as u8;
            CACHE.store(c, Ordering::Relaxed);
            c
        }
        let c = match CACHE.load(Ordering::Relaxed) {
            0 => ask(),
            c => c,
        };
        let level = match (c - 1) & 3 {
            2 => Level::Avx512,
            1 => Level::Avx2,
            _ => Level::Portable,
        };
        Features { level, census: (c - 1) & 4 != 0 }
    }
    #[cfg(all(target_arch = "x86_64", not(feature = "std")))]
    {
        features!(compiled_with)
    }
    #[cfg(not(target_arch = "x86_64"))]
    Features { level: Level::Portable, census: false }
}

/// The level kernels run at: the best this CPU has (below a test's `with_level` cap).
#[inline]
pub fn level() -> Level {
    let best = detected().level;
    #[cfg(test)]
    let best = best.min(cap::CAP.with(|c| c.get()));
    best
}

/// Whether the census kernel's AVX-512 features are there (VPOPCNTDQ and VBMI on top of
/// [`Level::Avx512`]).
#[inline]
pub fn census() -> bool {
    level() == Level::Avx512 && detected().census
}

/// `level` lowered to what this CPU runs.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // (only x86 has levels to pick)
#[inline]
pub(crate) fn capped(level: Level) -> Level {
    level.min(self::level())
}

#[cfg(test)]
mod cap {
    extern crate std;
    std::thread_local! {
        pub static CAP: core::cell::Cell<super::Level> = const { core::cell::Cell::new(super::Level::Avx512) };
    }
}

/// Runs `f` with [`level`] capped at `cap` on this thread, for tests that check every
/// variant. Other threads (rayon's workers) keep the best level: run `f` on one thread.
#[cfg(test)]
pub(crate) fn with_level<R>(cap: Level, f: impl FnOnce() -> R) -> R {
    struct Restore(Level);
    impl Drop for Restore {
        fn drop(&mut self) {
            cap::CAP.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(cap::CAP.with(|c| c.replace(cap)));
    f()
}

/// Compiles a function for each [`Level`] and calls the clone of [`level`] (or of
/// `on $level;`, capped at what the CPU has). Optionally `type V = Avx512Type, Avx2Type,
/// PortableType;` names a per-level type inside the body. The function's arguments are
/// plain `name: Type`; generics are lifetimes, or types with simple bounds, or one type
/// and one const, or one const.
/// The clones are plain functions with the kernel's parameters, so LLVM sees the same
/// `noalias` slices and vectorizes each body at its level's width.
macro_rules! multiversion {
    (@q [$($h:tt)*] $(#[$m:meta])* $vis:vis unsafe fn $($rest:tt)*) => {
        $crate::cpu::multiversion!(@sig [$($h)*] [$(#[$m])*] [$vis] [unsafe] $($rest)*);
    };
    (@q [$($h:tt)*] $(#[$m:meta])* $vis:vis fn $($rest:tt)*) => {
        $crate::cpu::multiversion!(@sig [$($h)*] [$(#[$m])*] [$vis] [] $($rest)*);
    };
    (@sig $h:tt $m:tt $v:tt $u:tt $name:ident $args:tt $(-> $r:ty)? $body:block) => {
        $crate::cpu::multiversion!(@emit $h $m $v $u $name [] [] $args [$($r)?] $body);
    };
    (@sig $h:tt $m:tt $v:tt $u:tt $name:ident <$($lt:lifetime),+> $args:tt $(-> $r:ty)? $body:block) => {
        $crate::cpu::multiversion!(@emit $h $m $v $u $name [$($lt),+] [] $args [$($r)?] $body);
    };
    (@sig $h:tt $m:tt $v:tt $u:tt $name:ident <const $g:ident: $gt:ty> $args:tt $(-> $r:ty)? $body:block) => {
        $crate::cpu::multiversion!(@emit $h $m $v $u $name [const $g: $gt] [$g] $args [$($r)?] $body);
    };
    (@sig $h:tt $m:tt $v:tt $u:tt $name:ident
        <$g:ident: $b:ident $(<$bg:ty>)? $(+ $bn:ident $(<$bng:ty>)?)*, const $c:ident: $ct:ty> $args:tt $(-> $r:ty)? $body:block) => {
        $crate::cpu::multiversion!(@emit $h $m $v $u $name
            [$g: $b $(<$bg>)? $(+ $bn $(<$bng>)?)*, const $c: $ct] [$g, $c] $args [$($r)?] $body);
    };
    (@sig $h:tt $m:tt $v:tt $u:tt $name:ident
        <$($g:ident: $b:ident $(<$bg:ty>)? $(+ $bn:ident $(<$bng:ty>)?)*),+> $args:tt $(-> $r:ty)? $body:block) => {
        $crate::cpu::multiversion!(@emit $h $m $v $u $name
            [$($g: $b $(<$bg>)? $(+ $bn $(<$bng>)?)*),+] [$($g),+] $args [$($r)?] $body);
    };
    (@emit [$level:expr; $($t:ident = $t512:ty, $t256:ty, $tp:ty)?] [$(#[$m:meta])*] [$vis:vis] [$($u:tt)?]
        $name:ident [$($decl:tt)*] [$($call:tt)*] ($($a:ident: $at:ty),* $(,)?) [$($r:ty)?] $body:block) => {
        $(#[$m])*
        $vis $($u)? fn $name<$($decl)*>($($a: $at),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                $(#[$m])*
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,popcnt")]
                $($u)? fn avx512<$($decl)*>($($a: $at),*) $(-> $r)? {
                    $(type $t = $t512;)?
                    $body
                }
                $(#[$m])*
                #[target_feature(enable = "avx2,fma,popcnt")]
                $($u)? fn avx2<$($decl)*>($($a: $at),*) $(-> $r)? {
                    $(type $t = $t256;)?
                    $body
                }
                match $level {
                    // SAFETY: the level is one this CPU has (`level` detected it); the
                    // arguments are the caller's, under the function's own contract.
                    $crate::cpu::Level::Avx512 => return unsafe { avx512::<$($call)*>($($a),*) },
                    // SAFETY: as above.
                    $crate::cpu::Level::Avx2 => return unsafe { avx2::<$($call)*>($($a),*) },
                    $crate::cpu::Level::Portable => {}
                }
            }
            // The portable body out of line too: inlined here, its register pressure made
            // every call (the vector ones included) save and restore five registers.
            $(#[$m])*
            #[inline(never)]
            $($u)? fn portable<$($decl)*>($($a: $at),*) $(-> $r)? {
                $(type $t = $tp;)?
                $body
            }
            #[allow(unused_unsafe)]
            // SAFETY: the function's own contract, which the caller keeps.
            let result = unsafe { portable::<$($call)*>($($a),*) };
            result
        }
    };
    (@ $($x:tt)*) => {
        compile_error!("multiversion!: a signature this macro does not parse");
    };
    (on $level:expr; type $t:ident = $t512:ty, $t256:ty, $tp:ty; $($f:tt)*) => {
        $crate::cpu::multiversion!(@q [$crate::cpu::capped($level); $t = $t512, $t256, $tp] $($f)*);
    };
    (on $level:expr; $($f:tt)*) => {
        $crate::cpu::multiversion!(@q [$crate::cpu::capped($level);] $($f)*);
    };
    ($($f:tt)*) => {
        $crate::cpu::multiversion!(@q [$crate::cpu::level();] $($f)*);
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_lowers_the_level_on_this_thread_only() {
        let best = level();
        for l in Level::available() {
            with_level(l, || {
                assert_eq!(level(), l);
                assert_eq!(capped(Level::Avx512), l);
                assert_eq!(census(), l == Level::Avx512 && detected().census);
            });
        }
        assert_eq!(level(), best);
    }

    #[test]
    fn detection_is_cached_consistently() {
        let (a, b) = (detected(), detected());
        assert_eq!((a.level, a.census), (b.level, b.census));
        assert!(!a.census || a.level == Level::Avx512);
    }
}

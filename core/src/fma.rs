//! f32 vectors with fused multiply-add for the FIR and matrix-product kernels, in three
//! widths chosen at run time: AVX-512 (16 lanes), AVX2 + FMA (8 lanes), and a portable
//! 8-lane version (plain arrays, multiply then add) for every other CPU.
//!
//! Why not `wide` or plain loops: Rust does not contract `a * b + c` into an FMA, and
//! `wide` picks its instructions by compile-time `cfg(target_feature)`, so neither gives
//! FMA (or 16 lanes) in a library built for baseline x86-64. Kernels are written once,
//! generic over [`F32Vec`], `#[inline(always)]`, and instantiated inside
//! `#[target_feature]` functions by the crate-private `dispatch!` macro, so every intrinsic
//! inlines into a body compiled for its instruction set.

/// A vector of f32 lanes. `load*` / `store` take raw pointers to at least `LANES`
/// readable / writable elements (the caller's invariant, stated at each use).
pub trait F32Vec: Copy {
    const LANES: usize;
    /// Vector registers of the level (register-blocked kernels size their tiles by it).
    const REGISTERS: usize;
    fn splat(v: f32) -> Self;
    /// # Safety
    /// `p` points to `LANES` readable f32.
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// `p` points to `LANES` readable u8.
    unsafe fn load_u8(p: *const u8) -> Self;
    /// # Safety
    /// `p` points to `LANES` readable u16.
    unsafe fn load_u16(p: *const u16) -> Self;
    /// # Safety
    /// `p` points to `LANES` writable f32.
    unsafe fn store(self, p: *mut f32);
    /// `self * b + c`, fused where the level has FMA.
    fn mul_add(self, b: Self, c: Self) -> Self;
    fn add(self, b: Self) -> Self;
    /// Transposes a `LANES x LANES` block: `dst[j * ds + i] = src[i * ss + j]`.
    ///
    /// # Safety
    /// `src` / `dst` point to `LANES` rows of `LANES` readable / writable f32, `ss` / `ds`
    /// apart, not overlapping.
    #[inline(always)]
    unsafe fn transpose(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
        for i in 0..Self::LANES {
            for j in 0..Self::LANES {
                // SAFETY: i, j < LANES; the caller's contract.
                unsafe { *dst.add(j * ds + i) = *src.add(i * ss + j) };
            }
        }
    }
}

/// A pixel lane type a kernel can load as f32 vectors.
pub trait LoadF32: Copy {
    fn to_f32(self) -> f32;
    /// # Safety
    /// `p` points to `V::LANES` readable elements.
    unsafe fn load<V: F32Vec>(p: *const Self) -> V;
}

impl LoadF32 for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    unsafe fn load<V: F32Vec>(p: *const f32) -> V {
        // SAFETY: forwarded caller contract.
        unsafe { V::load(p) }
    }
}
impl LoadF32 for u8 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    unsafe fn load<V: F32Vec>(p: *const u8) -> V {
        // SAFETY: forwarded caller contract.
        unsafe { V::load_u8(p) }
    }
}
impl LoadF32 for u16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    unsafe fn load<V: F32Vec>(p: *const u16) -> V {
        // SAFETY: forwarded caller contract.
        unsafe { V::load_u16(p) }
    }
}

/// The portable vector: 8 lanes in an array, multiply then add.
#[derive(Clone, Copy)]
pub struct Portable([f32; 8]);

impl F32Vec for Portable {
    const LANES: usize = 8;
    const REGISTERS: usize = 16;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        Portable([v; 8])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: caller guarantees 8 readable f32.
        Portable(core::array::from_fn(|i| unsafe { *p.add(i) }))
    }
    #[inline(always)]
    unsafe fn load_u8(p: *const u8) -> Self {
        // SAFETY: caller guarantees 8 readable u8.
        Portable(core::array::from_fn(|i| unsafe { *p.add(i) } as f32))
    }
    #[inline(always)]
    unsafe fn load_u16(p: *const u16) -> Self {
        // SAFETY: caller guarantees 8 readable u16.
        Portable(core::array::from_fn(|i| unsafe { *p.add(i) } as f32))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        for (i, v) in self.0.into_iter().enumerate() {
            // SAFETY: caller guarantees 8 writable f32.
            unsafe { *p.add(i) = v };
        }
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        Portable(core::array::from_fn(|i| self.0[i] * b.0[i] + c.0[i]))
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        Portable(core::array::from_fn(|i| self.0[i] + b.0[i]))
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::F32Vec;
    use core::arch::x86_64::*;

    /// `vpermt2ps` indices of one transpose round with block size `S`: `lo[c]` takes `a[c]`
    /// in an even `S`-block and `b[c - S]` in an odd one; `hi[c]` takes `a[c + S]` / `b[c]`.
    const fn exchange_indices(s: usize) -> ([i32; 16], [i32; 16]) {
        let (mut lo, mut hi) = ([0i32; 16], [0i32; 16]);
        let mut c = 0;
        while c < 16 {
            let even = (c / s) & 1 == 0;
            lo[c] = if even { c } else { 16 + c - s } as i32;
            hi[c] = if even { c + s } else { 16 + c } as i32;
            c += 1;
        }
        (lo, hi)
    }

    /// One round of the 16 x 16 transpose: rows `i` and `i + S` (`i` in an even `S`-block)
    /// swap their off-diagonal `S`-blocks.
    #[inline(always)]
    fn exchange<const S: usize>(r: &mut [__m512; 16]) {
        let (lo, hi) = const { exchange_indices(S) };
        // SAFETY: plain loads of two 64-byte arrays; the permutes need AVX-512F, which the
        // callers (`transpose` inside a dispatched avx512f function) have.
        let (lo, hi) = unsafe { (_mm512_loadu_si512(lo.as_ptr().cast()), _mm512_loadu_si512(hi.as_ptr().cast())) };
        for i in 0..16 {
            if (i / S) & 1 == 0 {
                let (a, b) = (r[i], r[i + S]);
                r[i] = unsafe { _mm512_permutex2var_ps(a, lo, b) };
                r[i + S] = unsafe { _mm512_permutex2var_ps(a, hi, b) };
            }
        }
    }

    /// 8 lanes of AVX2 with FMA. Crate-private, and only constructed inside functions
    /// compiled for AVX2 + FMA that `dispatch!` calls after detection.
    #[derive(Clone, Copy)]
    pub struct Avx2(__m256);

    /// 16 lanes of AVX-512F. Crate-private, and only constructed inside functions compiled
    /// for AVX-512 that `dispatch!` calls after detection.
    #[derive(Clone, Copy)]
    pub struct Avx512(__m512);

    // SAFETY (all methods below): the intrinsics need the level's target features, which
    // the `dispatch!`-generated callers enable and check at run time before calling; the
    // pointer contracts are the trait's.
    impl F32Vec for Avx2 {
        const LANES: usize = 8;
        const REGISTERS: usize = 16;
        #[inline(always)]
        fn splat(v: f32) -> Self {
            Avx2(unsafe { _mm256_set1_ps(v) })
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Avx2(unsafe { _mm256_loadu_ps(p) })
        }
        #[inline(always)]
        unsafe fn load_u8(p: *const u8) -> Self {
            Avx2(unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast()))) })
        }
        #[inline(always)]
        unsafe fn load_u16(p: *const u16) -> Self {
            Avx2(unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()))) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            unsafe { _mm256_storeu_ps(p, self.0) }
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            Avx2(unsafe { _mm256_fmadd_ps(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn add(self, b: Self) -> Self {
            Avx2(unsafe { _mm256_add_ps(self.0, b.0) })
        }
    }

    impl F32Vec for Avx512 {
        const LANES: usize = 16;
        const REGISTERS: usize = 32;
        #[inline(always)]
        fn splat(v: f32) -> Self {
            Avx512(unsafe { _mm512_set1_ps(v) })
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Avx512(unsafe { _mm512_loadu_ps(p) })
        }
        #[inline(always)]
        unsafe fn load_u8(p: *const u8) -> Self {
            Avx512(unsafe { _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast()))) })
        }
        #[inline(always)]
        unsafe fn load_u16(p: *const u16) -> Self {
            Avx512(unsafe { _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()))) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            unsafe { _mm512_storeu_ps(p, self.0) }
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            Avx512(unsafe { _mm512_fmadd_ps(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn add(self, b: Self) -> Self {
            Avx512(unsafe { _mm512_add_ps(self.0, b.0) })
        }
        /// Block-recursive transpose: for block sizes 8, 4, 2, 1, rows `i` and `i + s`
        /// exchange their off-diagonal `s`-blocks (two `vpermt2ps` per row pair), 64
        /// permutes instead of 256 scalar moves.
        #[inline(always)]
        unsafe fn transpose(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
            let mut r: [__m512; 16] = core::array::from_fn(|i| unsafe { _mm512_loadu_ps(src.add(i * ss)) });
            exchange::<8>(&mut r);
            exchange::<4>(&mut r);
            exchange::<2>(&mut r);
            exchange::<1>(&mut r);
            for (i, v) in r.iter().enumerate() {
                unsafe { _mm512_storeu_ps(dst.add(i * ds), *v) };
            }
        }
    }
}
#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2, Avx512};

/// Defines `fn $name(level: Level, args...)` that runs the generic kernel `$kernel::<V, ..>`
/// with the vector type of `level`, inside a function compiled for that level's features
/// ([`crate::cpu::multiversion!`]). A level above what the CPU supports falls back to the
/// best supported one.
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident $(<$($g:ident: $b:ident),*>)? ($($a:ident: $t:ty),* $(,)?) => $kernel:ident) => {
        $crate::cpu::multiversion! {
            on level;
            type V = $crate::fma::Avx512, $crate::fma::Avx2, $crate::fma::Portable;
            $(#[$m])*
            $vis fn $name $(<$($g: $b),*>)? (level: $crate::cpu::Level, $($a: $t),*) {
                let _ = level;
                $kernel::<V $(, $($g),*)?>($($a),*)
            }
        }
    };
}
pub(crate) use dispatch;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::Level;

    #[inline(always)]
    fn transpose_kernel<V: F32Vec>(src: &[f32], dst: &mut [f32]) {
        let n = V::LANES;
        assert!(src.len() >= n * 20 && dst.len() >= n * 24);
        // SAFETY: n rows of n elements, 20 / 24 apart, inside the slices checked above.
        unsafe { V::transpose(src.as_ptr(), 20, dst.as_mut_ptr(), 24) };
    }
    dispatch!(fn transpose_at(src: &[f32], dst: &mut [f32]) => transpose_kernel);

    #[test]
    fn every_level_transposes() {
        for level in Level::available() {
            let lanes = match level {
                Level::Avx512 => 16,
                _ => 8,
            };
            let src: alloc::vec::Vec<f32> = (0..lanes * 20).map(|i| i as f32).collect();
            let mut dst = alloc::vec![-1.0f32; lanes * 24];
            transpose_at(level, &src, &mut dst);
            for i in 0..lanes {
                for j in 0..lanes {
                    assert_eq!(dst[j * 24 + i], src[i * 20 + j], "{level:?} ({i}, {j})");
                }
            }
        }
    }
}

//! The AVX-512BW kernel of the aggregation sweeps ([`super::aggregate`]): one row of a
//! sweep, every direction of it, with the same arithmetic as the portable kernel (so the
//! same exact results) and a layout built for registers:
//!
//! - a pixel's `D` path costs are `NB` whole registers of 32 u16 lanes (`NB` a constant,
//!   1 to [`MAX_BLOCKS`]), kept in registers across the pixel: its costs are widened to
//!   u16 once for all directions, and the sum over the directions is accumulated in
//!   registers and written once: no zeroing pass before the first sweep, and the
//!   second reads the first one's half-volume but writes the final row to a small buffer
//!   (the half-volume is never written back); the first sweep's rows, read again only
//!   half a frame later, are stored non-temporally (no read for ownership);
//! - the neighbours `L(p - r, d -+ 1)` come from the previous pixel's registers by one
//!   two-source permute each (`vpermt2w`), so the loads are whole aligned blocks (the
//!   ring buffers hold `dp` lanes per pixel, no sentinels; row starts 64-byte aligned);
//! - the horizontal path's previous pixel never leaves the registers: its step-to-step
//!   chain is the permutes, the minima and the horizontal reduction, not a round trip
//!   through a store that the next unaligned load cannot forward from.

#![cfg(target_arch = "x86_64")]

use super::aggregate::{SweepRow, LANES};
use core::arch::x86_64::*;

/// Largest number of 32-lane blocks (256 disparities) the kernel keeps in registers; wider
/// ranges run the portable kernel.
pub(crate) const MAX_BLOCKS: usize = 8;

/// One row of a sweep, as the portable `sweep_row` but in the aligned layout: `input.crow`
/// holds `w` pixels of `dp = 32 * nb` costs; `input.dirs`' rows hold `dp` lanes per pixel;
/// `srow` (`w * dp` lanes) receives the sum of this sweep's path costs plus `partial`'s
/// (the same extent; it may be `srow` itself), or of the path costs alone without it.
/// `stream`: write `srow` with non-temporal stores (it must be 64-byte aligned).
/// `horizontal`: also run the horizontal path in the order of `input.forward`.
///
/// # Safety
/// The CPU supports AVX-512F and BW ([`crate::cpu::Level::Avx512`]); `1 <= nb <= MAX_BLOCKS`; `srow` is
/// valid for `w * dp` writes and `partial` for as many reads; the slices of `dirs` are as
/// `DirRow` documents with a pixel stride of `dp`.
pub(crate) unsafe fn sweep_row(
    nb: usize,
    input: SweepRow<'_, '_>,
    horizontal: bool,
    partial: Option<*const u16>,
    srow: *mut u16,
    stream: bool,
) {
    macro_rules! by_blocks {
        ($($n:literal)*) => {
            match nb {
                // SAFETY: forwarded; nb matches the const parameter.
                $($n => unsafe { row::<$n>(input, horizontal, partial, srow, stream) },)*
                _ => unreachable!("nb is checked by the caller"),
            }
        };
    }
    by_blocks!(1 2 3 4 5 6 7 8)
}

/// Lane `i` of `lower` is lane `i - 1` of the two-register concatenation (`prev`, `cur`):
/// `L(d - 1)`. Lane `i` of `upper` picks lane `i + 1` of (`cur`, `next`): `L(d + 1)`.
const fn shift_indices(up: bool) -> [i16; 32] {
    let mut idx = [0i16; 32];
    let mut i = 0;
    while i < 32 {
        idx[i] = if up { i as i16 + 1 } else { i as i16 + 31 };
        i += 1;
    }
    idx
}
const LOWER: [i16; 32] = shift_indices(false);
const UPPER: [i16; 32] = shift_indices(true);

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn row<const NB: usize>(
    input: SweepRow<'_, '_>,
    horizontal: bool,
    partial: Option<*const u16>,
    srow: *mut u16,
    stream: bool,
) {
    let SweepRow { crow, nd, forward, hguide, dirs, pen } = input;
    // SAFETY: the caller's contract (CPU features, slice layouts, srow's extent); x < w
    // and px < w index pixels inside the rows.
    unsafe {
        debug_assert!(LANES == 32 && NB >= 1);
        let dp = NB * LANES;
        let w = crow.len() / dp;
        // Lanes at or past nd: forced to MAX in every path cost.
        let pad = {
            let real = nd.saturating_sub((NB - 1) * LANES).min(LANES) as u32;
            let keep: u32 = if real >= 32 { u32::MAX } else { (1u32 << real) - 1 };
            _mm512_maskz_set1_epi16(!keep, -1)
        };
        let lower_idx = _mm512_loadu_si512(LOWER.as_ptr().cast());
        let upper_idx = _mm512_loadu_si512(UPPER.as_ptr().cast());
        let p1 = _mm512_set1_epi16(pen.p1 as i16);
        let mut h = [_mm512_setzero_si512(); NB];
        let mut hmin = 0u16;
        for i in 0..w {
            let x = if forward { i } else { w - 1 - i };
            let cp = crow.as_ptr().add(x * dp);
            let sp = srow.add(x * dp);
            let part = partial.map(|p| p.add(x * dp));
            // (Loops, not closures: a closure would not inherit the target features.)
            let mut c = [_mm512_setzero_si512(); NB];
            let mut acc = [_mm512_setzero_si512(); NB];
            for k in 0..NB {
                c[k] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(cp.add(k * LANES).cast()));
                if let Some(part) = part {
                    acc[k] = _mm512_loadu_si512(part.add(k * LANES).cast());
                }
            }
            if horizontal {
                h = if i == 0 {
                    start::<NB>(&c, pad)
                } else {
                    let px = if forward { x - 1 } else { x + 1 };
                    let p2 = hguide.map_or(pen.p2[0], |g| pen.p2(g[px], g[x]));
                    step::<NB>(&h, None, hmin, &c, p1, p2, pad, lower_idx, upper_idx)
                };
                hmin = minimum::<NB>(&h);
                add_into::<NB>(&mut acc, &h);
            }
            for dr in dirs.iter_mut() {
                let px = x as isize - dr.dx;
                let l = match dr.prev {
                    Some((prow, pmin)) if px >= 0 && px < w as isize => {
                        let px = px as usize;
                        let pp = prow.as_ptr().add(px * dp);
                        let mut prev = [_mm512_setzero_si512(); NB];
                        for (k, v) in prev.iter_mut().enumerate() {
                            *v = _mm512_loadu_si512(pp.add(k * LANES).cast());
                        }
                        let p2 = dr.grow.map_or(pen.p2[0], |(g, gp)| pen.p2(gp[px], g[x]));
                        step::<NB>(&prev, Some(pp), *pmin.get_unchecked(px), &c, p1, p2, pad, lower_idx, upper_idx)
                    }
                    _ => start::<NB>(&c, pad),
                };
                let op = dr.out_row.as_mut_ptr().add(x * dp);
                for (k, v) in l.iter().enumerate() {
                    _mm512_storeu_si512(op.add(k * LANES).cast(), *v);
                }
                *dr.out_min.get_unchecked_mut(x) = minimum::<NB>(&l);
                add_into::<NB>(&mut acc, &l);
            }
            for (k, v) in acc.iter().enumerate() {
                if stream {
                    _mm512_stream_si512(sp.add(k * LANES).cast(), *v);
                } else {
                    _mm512_storeu_si512(sp.add(k * LANES).cast(), *v);
                }
            }
        }
        if stream {
            // Orders the non-temporal stores before whatever hands the row to another thread.
            _mm_sfence();
        }
    }
}

/// Path start: `L = C`, padding lanes MAX.
#[inline(always)]
unsafe fn start<const NB: usize>(c: &[__m512i; NB], pad: __m512i) -> [__m512i; NB] {
    unsafe {
        let mut l = *c;
        l[NB - 1] = _mm512_or_si512(l[NB - 1], pad);
        l
    }
}

/// Eq. 13 for one pixel: `prev` the previous pixel's path costs, `m` their minimum. When
/// they are also in memory at `at` (a vertical path's previous row), the neighbours inside
/// the pixel come from unaligned loads instead of permutes (load ports are idle, the
/// permute port is the busiest); only the two at the ends need the MAX sentinel.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn step<const NB: usize>(
    prev: &[__m512i; NB],
    at: Option<*const u16>,
    m: u16,
    c: &[__m512i; NB],
    p1: __m512i,
    p2: u16,
    pad: __m512i,
    lower_idx: __m512i,
    upper_idx: __m512i,
) -> [__m512i; NB] {
    unsafe {
        let max = _mm512_set1_epi16(-1);
        let mv = _mm512_set1_epi16(m as i16);
        let jump = _mm512_set1_epi16(m.saturating_add(p2) as i16);
        let mut l = [max; NB];
        for k in 0..NB {
            let before = if k == 0 { max } else { prev[k - 1] };
            let after = if k + 1 == NB { max } else { prev[k + 1] };
            let lower = match at {
                Some(p) if k > 0 => _mm512_loadu_si512(p.add(k * LANES - 1).cast()),
                _ => _mm512_permutex2var_epi16(before, lower_idx, prev[k]),
            };
            let upper = match at {
                Some(p) if k + 1 < NB => _mm512_loadu_si512(p.add(k * LANES + 1).cast()),
                _ => _mm512_permutex2var_epi16(prev[k], upper_idx, after),
            };
            // min(a + P1, b + P1) = min(a, b) + P1, also saturating.
            let near = _mm512_adds_epu16(_mm512_min_epu16(lower, upper), p1);
            let best = _mm512_min_epu16(_mm512_min_epu16(prev[k], near), jump);
            // best >= m (every candidate is), so the subtraction never wraps.
            l[k] = _mm512_add_epi16(c[k], _mm512_sub_epi16(best, mv));
        }
        l[NB - 1] = _mm512_or_si512(l[NB - 1], pad);
        l
    }
}

#[inline(always)]
unsafe fn add_into<const NB: usize>(acc: &mut [__m512i; NB], l: &[__m512i; NB]) {
    unsafe {
        for k in 0..NB {
            acc[k] = _mm512_adds_epu16(acc[k], l[k]);
        }
    }
}

/// The smallest lane of the blocks.
#[inline(always)]
unsafe fn minimum<const NB: usize>(l: &[__m512i; NB]) -> u16 {
    unsafe {
        let mut v = l[0];
        for b in &l[1..] {
            v = _mm512_min_epu16(v, *b);
        }
        let v = _mm256_min_epu16(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
        let v = _mm_min_epu16(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        _mm_cvtsi128_si32(_mm_minpos_epu16(v)) as u16
    }
}

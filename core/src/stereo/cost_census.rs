//! Census transform and Hamming-distance matching cost (R. Zabih and J. Woodfill,
//! "Non-parametric local transforms for computing visual correspondence", ECCV 1994), the
//! cost libSGM and most GPU SGM implementations use: robust to gain and bias changes
//! between the two cameras.
//!
//! The code of a pixel `p` has one bit per other pixel `q` of a `w x h` window centred on
//! `p`, in row-major order, the first window pixel in the most significant used bit:
//! `bit = I(q) < I(p)`. Outside the image `q` is clamped to the nearest pixel (replicate
//! border). The cost of disparity `d` at `(x, y)` is `popcount(cL(x, y) ^ cR(x - d, y))`,
//! with `x - d` clamped to column 0 (the modified-AD clamp, used by every cost here).

use super::{reversed_clamped, RowCost};
#[cfg(test)]
use super::{cost_volume_of, CostVolume};
use crate::error::{Error, Result};
use crate::image::ImageView;
use crate::parallel::Parallelism;
use alloc::format;
use alloc::vec::Vec;
use crate::cpu::multiversion;

/// Largest census window: 9 x 7 = 63 pixels, 62 bits beside the centre, one u64.
pub const MAX_CENSUS_WIDTH: usize = 9;
pub const MAX_CENSUS_HEIGHT: usize = 7;

/// A census window with odd sides of at most 9 x 7.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CensusWindow {
    width: usize,
    height: usize,
}

impl CensusWindow {
    /// Odd `width <= 9` and odd `height <= 7`, not both 1.
    pub fn new(width: usize, height: usize) -> Result<Self> {
        let ok = width % 2 == 1
            && height % 2 == 1
            && width <= MAX_CENSUS_WIDTH
            && height <= MAX_CENSUS_HEIGHT
            && width * height > 1;
        if !ok {
            return Err(Error::InvalidParameter {
                name: "census window",
                reason: format!("{width}x{height}: sides must be odd, at most 9x7 (62 bits), and not 1x1"),
            });
        }
        Ok(CensusWindow { width, height })
    }
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn height(&self) -> usize {
        self.height
    }
    /// Bits per code: every window pixel but the centre.
    pub fn bits(&self) -> usize {
        self.width * self.height - 1
    }
}

/// Census codes of a whole image, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct CensusCodes {
    pub width: usize,
    pub height: usize,
    pub codes: Vec<u64>,
}

impl CensusCodes {
    #[inline]
    pub fn row(&self, y: usize) -> &[u64] {
        &self.codes[y * self.width..(y + 1) * self.width]
    }
}

/// Census transform of `img` (see the module doc for the bit order and the border rule).
pub fn census_transform(img: ImageView<'_, u8>, win: CensusWindow) -> Result<CensusCodes> {
    let (w, h) = img.size();
    let (rx, ry) = (win.width / 2, win.height / 2);
    // Replicate-padded copy, so every window read is in bounds and the inner loop runs
    // over whole rows (vectorized across x).
    let pw = w + 2 * rx;
    let ph = h + 2 * ry;
    let mut pad = crate::error::try_filled(pw * ph, 0u8)?;
    for py in 0..ph {
        let sy = (py as isize - ry as isize).clamp(0, h as isize - 1) as usize;
        let src = img.row(sy);
        let dst = &mut pad[py * pw..(py + 1) * pw];
        dst[..rx].fill(src[0]);
        dst[rx..rx + w].copy_from_slice(src);
        dst[rx + w..].fill(src[w - 1]);
    }
    // Window offsets into the padded image, in bit order, the centre left out.
    let offsets: Vec<usize> = (0..win.height)
        .flat_map(|j| (0..win.width).map(move |i| (i, j)))
        .filter(|&(i, j)| (i, j) != (rx, ry))
        .map(|(i, j)| j * pw + i)
        .collect();
    let mut codes = crate::error::try_filled(w * h, 0u64)?;
    for y in 0..h {
        let out = &mut codes[y * w..(y + 1) * w];
        census_row(&pad[y * pw..], rx + ry * pw, &offsets, out);
    }
    Ok(CensusCodes { width: w, height: h, codes })
}

/// Pixels per chunk of [`census_row`]: their codes stay in registers for the whole window.
const CHUNK: usize = 16;

multiversion! {
    /// The codes of one row: `top` starts at the window's top-left pixel of the row's first
    /// pixel, `centre` is the centre's offset from it, `offsets` those of the other window
    /// pixels in bit order. Chunks of [`CHUNK`] pixels keep their codes in registers across
    /// the window (a compare, a shift and an or per bit and chunk).
    fn census_row(top: &[u8], centre: usize, offsets: &[usize], out: &mut [u64]) {
        let w = out.len();
        let whole = w / CHUNK * CHUNK;
        for x0 in (0..whole).step_by(CHUNK) {
            let code = census_chunk(|o| top[o + x0..o + x0 + CHUNK].try_into().unwrap(), centre, offsets);
            out[x0..x0 + CHUNK].copy_from_slice(&code);
        }
        if whole < w {
            let n = w - whole;
            let load = |o: usize| {
                let mut v = [0u8; CHUNK];
                v[..n].copy_from_slice(&top[o + whole..o + whole + n]);
                v
            };
            out[whole..].copy_from_slice(&census_chunk(load, centre, offsets)[..n]);
        }
    }
}

/// The codes of [`CHUNK`] pixels whose window pixels at offset `o` are `load(o)`.
#[inline(always)]
fn census_chunk(load: impl Fn(usize) -> [u8; CHUNK], centre: usize, offsets: &[usize]) -> [u64; CHUNK] {
    let c = load(centre);
    let mut code = [0u64; CHUNK];
    for &o in offsets {
        let q = load(o);
        for k in 0..CHUNK {
            code[k] = (code[k] << 1) | (q[k] < c[k]) as u64;
        }
    }
    code
}

/// `out[i * stride + d] = popcount(left[i] ^ rev[w - 1 - (x0 + i) + d])` for `d < nd`: the
/// costs of a run of left pixels. Where the CPU has the census features, whole groups of
/// 64 disparities run the AVX-512 kernel and the rest vectorizes to vpopcntq
/// ([`avx512::hamming_row`]); elsewhere to the pshufb nibble count of the AVX2 and
/// AVX-512 levels. One dispatch per row, not per pixel.
fn hamming_row(left: &[u64], rev: &[u64], w: usize, x0: usize, nd: usize, stride: usize, out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::census() {
        // SAFETY: the CPU has the kernel's features; slices as documented above.
        unsafe { avx512::hamming_row(left, rev, w, x0, nd, stride, out) };
        return;
    }
    hamming_from(left, rev, w, x0, 0, nd, stride, out);
}

multiversion! {
    /// [`hamming_counts`] at the CPU's level.
    #[allow(clippy::too_many_arguments)]
    fn hamming_from(left: &[u64], rev: &[u64], w: usize, x0: usize, from: usize, nd: usize, stride: usize, out: &mut [u8]) {
        hamming_counts(left, rev, w, x0, from, nd, stride, out)
    }
}

/// [`hamming_row`] for the disparities `from..nd`, inlined into each compiled version.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn hamming_counts(left: &[u64], rev: &[u64], w: usize, x0: usize, from: usize, nd: usize, stride: usize, out: &mut [u8]) {
    for (i, (o, &code)) in out.chunks_exact_mut(stride).zip(left).enumerate() {
        let r = w - 1 - (x0 + i);
        for (c, &v) in o[from..nd].iter_mut().zip(&rev[r + from..r + nd]) {
            *c = (code ^ v).count_ones() as u8;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use core::arch::x86_64::*;

    /// `perm[d] = 8 (d % 8) + d / 8`: the byte of disparity `d` after the eight counts
    /// were merged by shifts (see [`hamming_row`]).
    const fn transpose_indices() -> [u8; 64] {
        let mut p = [0u8; 64];
        let mut d = 0;
        while d < 64 {
            p[d] = (8 * (d % 8) + d / 8) as u8;
            d += 1;
        }
        p
    }
    const TRANSPOSE: [u8; 64] = transpose_indices();

    /// `hamming_row` with the census features: whole groups of 64 disparities, then the
    /// rest ([`super::hamming_counts`], vectorized here to vpopcntq). Each group is eight
    /// vectors of eight u64 counts (vpxorq, vpopcntq); count `j` of lane `i` (disparity
    /// `8 j + i`) is shifted to byte `j` of its lane and the vectors or-ed together, so one
    /// byte permute (vpermb) puts the 64 bytes in disparity order: no narrowing per vector.
    ///
    /// # Safety
    /// [`crate::cpu::census`]; `rev` holds `w - 1 - x0 - i + nd` values for every pixel `i` of
    /// `left`, `out` a stride of at least `nd` bytes per pixel.
    #[target_feature(enable = "avx512f,avx512bw,avx512vpopcntdq,avx512vbmi")]
    pub(super) unsafe fn hamming_row(left: &[u64], rev: &[u64], w: usize, x0: usize, nd: usize, stride: usize, out: &mut [u8]) {
        let groups = nd / 64;
        // SAFETY: reads of rev[r + 64 g .. + 64] and writes of out[i * stride + 64 g .. + 64]
        // stay within the extents the caller guarantees (64 g + 64 <= nd).
        unsafe {
            let perm = _mm512_loadu_si512(TRANSPOSE.as_ptr().cast());
            for (i, (o, &code)) in out.chunks_exact_mut(stride).zip(left).enumerate() {
                let r = w - 1 - (x0 + i);
                let c = _mm512_set1_epi64(code as i64);
                for g in 0..groups {
                    let src = rev.as_ptr().add(r + 64 * g);
                    let mut merged = _mm512_setzero_si512();
                    for j in 0..8 {
                        let n = _mm512_popcnt_epi64(_mm512_xor_si512(c, _mm512_loadu_si512(src.add(8 * j).cast())));
                        merged = _mm512_or_si512(merged, _mm512_sllv_epi64(n, _mm512_set1_epi64(8 * j as i64)));
                    }
                    _mm512_storeu_si512(o.as_mut_ptr().add(64 * g).cast(), _mm512_permutexvar_epi8(perm, merged));
                }
            }
        }
        super::hamming_counts(left, rev, w, x0, groups * 64, nd, stride, out);
    }
}

/// The census cost as rows (see [`super::RowCost`]).
pub(crate) struct CensusCost<'a> {
    left: &'a CensusCodes,
    right: &'a CensusCodes,
}

impl<'a> CensusCost<'a> {
    pub(crate) fn new(left: &'a CensusCodes, right: &'a CensusCodes) -> Result<Self> {
        crate::image::check_same_size((left.width, left.height), (right.width, right.height))?;
        Ok(CensusCost { left, right })
    }
}

impl RowCost for CensusCost<'_> {
    fn cost_row(&self, y: usize, x0: usize, n: usize, d: usize, stride: usize, out: &mut [u8]) {
        let w = self.left.width;
        let mut rev = Vec::with_capacity(w + d);
        reversed_clamped(self.right.row(y), d, &mut rev);
        hamming_row(&self.left.row(y)[x0..x0 + n], &rev, w, x0, d, stride, out);
    }
}

/// Census cost volume of a pair of code images: `C(x, y, d) = popcount(cL ^ cR(x - d))`,
/// `x - d` clamped to 0. `disparities` must be 1 ..= width.
#[cfg(test)]
pub fn census_cost_volume(
    left: &CensusCodes,
    right: &CensusCodes,
    disparities: usize,
    par: Parallelism,
) -> Result<CostVolume> {
    let src = CensusCost::new(left, right)?;
    crate::error::require_range("disparities", disparities, 1, left.width as i64)?;
    let r = super::Rect { x: 0, y: 0, width: left.width, height: left.height };
    cost_volume_of(&src, r, disparities, par)
}

/// Census transforms of both images of a pair (same size), one per thread: they are
/// independent.
pub fn census_pair(left: ImageView<'_, u8>, right: ImageView<'_, u8>, win: CensusWindow, par: Parallelism) -> Result<(CensusCodes, CensusCodes)> {
    crate::image::check_same_size(left.size(), right.size())?;
    let views = [left, right];
    let mut codes = crate::parallel::map_indices(2, par, |i| census_transform(views[i], win)).into_iter();
    match (codes.next(), codes.next()) {
        (Some(l), Some(r)) => Ok((l?, r?)),
        // map_indices gives one result per index; never taken.
        _ => Err(Error::ZeroSize { width: left.width(), height: left.height() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use crate::image::Image;
    use proptest::prelude::*;

    /// Direct definition: loops over the window with clamped coordinates.
    fn census_ref(img: &Image<u8>, win: CensusWindow, x: usize, y: usize) -> u64 {
        let (w, h) = img.size();
        let (rx, ry) = (win.width() as isize / 2, win.height() as isize / 2);
        let c = img.at(x, y);
        let mut code = 0u64;
        for j in -ry..=ry {
            for i in -rx..=rx {
                if i == 0 && j == 0 {
                    continue;
                }
                let qx = (x as isize + i).clamp(0, w as isize - 1) as usize;
                let qy = (y as isize + j).clamp(0, h as isize - 1) as usize;
                code = (code << 1) | (img.at(qx, qy) < c) as u64;
            }
        }
        code
    }

    fn random_image(w: usize, h: usize, seed: u64) -> Image<u8> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        Image::from_fn(w, h, |_, _| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn transform_and_cost_match_reference(w in 2usize..24, h in 1usize..12, seed in any::<u64>(),
                                              wi in 0usize..5, hi in 0usize..4, dsel in 0usize..100) {
            let (ww, wh) = (2 * wi + 1, 2 * hi + 1);
            prop_assume!(ww * wh > 1);
            let win = CensusWindow::new(ww, wh).unwrap();
            let l = random_image(w, h, seed);
            let r = random_image(w, h, seed ^ 0xabcdef);
            let cl = census_transform(l.view(), win).unwrap();
            let cr = census_transform(r.view(), win).unwrap();
            for y in 0..h { for x in 0..w {
                prop_assert_eq!(cl.codes[y * w + x], census_ref(&l, win, x, y));
            }}
            let d = 1 + dsel % w;
            let vol = census_cost_volume(&cl, &cr, d, Parallelism::AllThreads).unwrap();
            for y in 0..h { for x in 0..w { for k in 0..d {
                let xr = x.saturating_sub(k);
                let want = (census_ref(&l, win, x, y) ^ census_ref(&r, win, xr, y)).count_ones() as u8;
                prop_assert_eq!(vol.pixel(x, y)[k], want);
            }}}
        }
    }

    #[test]
    fn wide_disparity_ranges_match_reference() {
        crate::testing::at_every_level(|_| {
            // Below 64 disparities, and 64 and more: whole groups of 64 (the AVX-512 kernel at its level)
            // and the remainder after them; strides as the pipeline pads them. Every level.
            let (w, h) = (200, 3);
            let win = CensusWindow::new(9, 7).unwrap();
            let (l, r) = (random_image(w, h, 3), random_image(w, h, 4));
            let (cl, cr) = (census_transform(l.view(), win).unwrap(), census_transform(r.view(), win).unwrap());
            let src = CensusCost::new(&cl, &cr).unwrap();
            for (d, stride) in [(20, 32), (64, 64), (100, 128), (128, 128), (150, 160), (199, 224)] {
                for (x0, n) in [(0, w), (37, 80)] {
                    let mut out = vec![0u8; n * stride];
                    for y in 0..h {
                        src.cost_row(y, x0, n, d, stride, &mut out);
                        for i in 0..n {
                            for k in 0..d {
                                let (x, xr) = (x0 + i, (x0 + i).saturating_sub(k));
                                let want = (census_ref(&l, win, x, y) ^ census_ref(&r, win, xr, y)).count_ones() as u8;
                                assert_eq!(out[i * stride + k], want, "d {d} x {x} k {k}");
                            }
                        }
                    }
                }
            }
        });
    }

    #[test]
    fn window_limits() {
        assert!(CensusWindow::new(9, 7).is_ok());
        assert_eq!(CensusWindow::new(9, 7).unwrap().bits(), 62);
        for (w, h) in [(11, 7), (9, 9), (4, 3), (3, 4), (1, 1), (0, 3)] {
            assert!(matches!(CensusWindow::new(w, h), Err(Error::InvalidParameter { .. })), "{w}x{h}");
        }
    }

    #[test]
    fn cost_volume_rejects_bad_disparities() {
        let l = random_image(5, 3, 1);
        let c = census_transform(l.view(), CensusWindow::new(3, 3).unwrap()).unwrap();
        assert!(census_cost_volume(&c, &c, 0, Parallelism::Sequential).is_err());
        assert!(census_cost_volume(&c, &c, 6, Parallelism::Sequential).is_err());
        let other = census_transform(random_image(4, 3, 1).view(), CensusWindow::new(3, 3).unwrap()).unwrap();
        assert!(matches!(census_cost_volume(&c, &other, 2, Parallelism::Sequential), Err(Error::SizeMismatch { .. })));
    }
}

//! A small in-place radix-2 FFT (Cooley and Tukey 1965, iterative, bit-reversed input
//! order) on power-of-two lengths, and its 2-D form over rows then columns. Written here
//! because the core is `no_std`: the well-kept FFT crates need `std` or fixed sizes, and
//! the one user, the coarse phase correlation of stitching, needs only 64 to 256 points.
//!
//! The 2-D form transforms whole columns at once: each butterfly combines two rows of the
//! grid element by element, a loop over contiguous memory that vectorizes at every
//! [`Level`](crate::cpu::Level), where a column copied out and transformed alone is a chain
//! of scalar butterflies. The rows are transformed as the columns of the transposed grid.
//! Every element goes through the same operations in the same order as in the 1-D
//! transform (no fused multiply-adds at any level), so the result is the same to the bit.

use crate::cpu::multiversion;

/// A complex number, `(re, im)`.
pub type Complex = (f32, f32);

#[inline(always)]
fn mul(a: Complex, b: Complex) -> Complex {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

multiversion! {
    /// The butterflies of one twiddle factor `w` between the rows `a` (upper) and `b`
    /// (lower) of a column transform ([`Twiddles::apply_columns`]), a column per element.
    fn butterflies(a: &mut [Complex], b: &mut [Complex], w: Complex) {
        for (a, b) in a.iter_mut().zip(b.iter_mut()) {
            let t = mul(*b, w);
            *b = (a.0 - t.0, a.1 - t.1);
            *a = (a.0 + t.0, a.1 + t.1);
        }
    }
}

/// Transforms `x` (length a power of two) in place: forward `X_k = sum_n x_n e^{-2 pi i
/// k n / N}`, or the inverse without the `1 / N` factor.
pub fn fft(x: &mut [Complex], inverse: bool) {
    // A column of length n, one element wide.
    Twiddles::new(x.len(), inverse).apply_columns(x, 1, 1);
}

/// The twiddle factors of every stage of a transform of one length and direction, each
/// stage's by the recurrence `w_{k+1} = w_k e^{+-2 pi i / len}` in f64 (one sin and cos per
/// stage), rounded to f32 once: the many rows and columns of a 2-D transform share them.
struct Twiddles {
    /// Stage `len` (2, 4, .., n) holds its `len / 2` factors at `len / 2 - 1 ..`.
    w: alloc::vec::Vec<Complex>,
}

impl Twiddles {
    fn new(n: usize, inverse: bool) -> Twiddles {
        debug_assert!(n.is_power_of_two());
        let sign = if inverse { 1.0 } else { -1.0 };
        let mut w = alloc::vec::Vec::with_capacity(n.saturating_sub(1));
        let mut len = 2;
        while len <= n {
            let angle = sign * 2.0 * core::f64::consts::PI / len as f64;
            let step = (libm::cos(angle), libm::sin(angle));
            let mut t = (1.0f64, 0.0f64);
            for _ in 0..len / 2 {
                w.push((t.0 as f32, t.1 as f32));
                t = (t.0 * step.0 - t.1 * step.1, t.0 * step.1 + t.1 * step.0);
            }
            len *= 2;
        }
        Twiddles { w }
    }

    /// The transform of each of the first `width` columns of the row-major grid `x` (rows of
    /// `stride` elements; as many rows as the twiddles' length), in place: the iterative
    /// radix-2 transform of every column (bit-reversed order, then the stages), a pair of
    /// rows at a time.
    fn apply_columns(&self, x: &mut [Complex], stride: usize, width: usize) {
        let n = x.len() / stride.max(1);
        debug_assert_eq!(n.max(1), self.w.len() + 1);
        let width = width.min(stride);
        if n < 2 || width == 0 {
            return;
        }
        let bits = n.trailing_zeros();
        for i in 0..n {
            let j = i.reverse_bits() >> (usize::BITS - bits);
            if j > i {
                let (upper, lower) = x.split_at_mut(j * stride);
                upper[i * stride..i * stride + width].swap_with_slice(&mut lower[..width]);
            }
        }
        let mut len = 2;
        while len <= n {
            let half = len / 2;
            let w = &self.w[half - 1..len - 1];
            for block in x.chunks_exact_mut(len * stride) {
                let (upper, lower) = block.split_at_mut(half * stride);
                for (k, &w) in w.iter().enumerate() {
                    let row = k * stride..k * stride + width;
                    butterflies(&mut upper[row.clone()], &mut lower[row], w);
                }
            }
            len *= 2;
        }
    }
}

/// Transposes the `n x n` row-major grid `x` in place.
fn transpose(x: &mut [Complex], n: usize) {
    for r in 0..n {
        for c in r + 1..n {
            x.swap(r * n + c, c * n + r);
        }
    }
}

/// The 2-D transform of an `n x n` row-major grid (`n` a power of two), in place.
pub fn fft2(x: &mut [Complex], n: usize, inverse: bool) {
    fft2_rows(x, n, n, inverse)
}

/// [`fft2`] of a grid whose rows from `rows` on are zero (a frame smaller than the grid):
/// their transforms, zero, are not computed.
pub fn fft2_rows(x: &mut [Complex], n: usize, rows: usize, inverse: bool) {
    debug_assert_eq!(x.len(), n * n);
    let twiddles = Twiddles::new(n, inverse);
    // The rows' transforms, as the columns' of the transposed grid (the zero rows are its
    // last columns, left as they are), then the columns'.
    transpose(x, n);
    twiddles.apply_columns(x, n, rows);
    transpose(x, n);
    twiddles.apply_columns(x, n, n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// The transform by its definition, in f64.
    fn dft(x: &[Complex], inverse: bool) -> Vec<(f64, f64)> {
        let n = x.len();
        let sign = if inverse { 1.0 } else { -1.0 };
        (0..n)
            .map(|k| {
                x.iter().enumerate().fold((0.0, 0.0), |acc, (j, v)| {
                    let a = sign * 2.0 * core::f64::consts::PI * (k * j % n) as f64 / n as f64;
                    let (c, s) = (libm::cos(a), libm::sin(a));
                    (acc.0 + v.0 as f64 * c - v.1 as f64 * s, acc.1 + v.0 as f64 * s + v.1 as f64 * c)
                })
            })
            .collect()
    }

    #[test]
    fn matches_the_definition() {
        let mut rng = crate::stitch::SplitMix64::new(3);
        for n in [1usize, 2, 4, 8, 64, 256] {
            for inverse in [false, true] {
                let x: Vec<Complex> = (0..n).map(|_| (rng.normal() as f32, rng.normal() as f32)).collect();
                let want = dft(&x, inverse);
                let mut got = x.clone();
                fft(&mut got, inverse);
                let scale = libm::sqrt(n as f64);
                for (g, w) in got.iter().zip(&want) {
                    assert!((g.0 as f64 - w.0).abs() < 2e-5 * scale * 4.0 && (g.1 as f64 - w.1).abs() < 2e-5 * scale * 4.0, "n {n}: {g:?} vs {w:?}");
                }
            }
        }
    }

    #[test]
    fn zero_rows_skipped_give_the_whole_transform() {
        let mut rng = crate::stitch::SplitMix64::new(5);
        let n = 64;
        let x: Vec<Complex> = (0..n * n).map(|i| if i / n < 23 { (rng.normal() as f32, 0.0) } else { (0.0, 0.0) }).collect();
        let (mut all, mut some) = (x.clone(), x);
        fft2(&mut all, n, false);
        fft2_rows(&mut some, n, 23, false);
        assert_eq!(all, some);
    }

    /// The 2-D transform a row and then a column at a time, each by the 1-D [`fft`].
    fn by_rows_then_columns(x: &[Complex], n: usize, rows: usize, inverse: bool) -> Vec<Complex> {
        let mut y = x.to_vec();
        for row in y.chunks_exact_mut(n).take(rows) {
            fft(row, inverse);
        }
        for c in 0..n {
            let mut column: Vec<Complex> = (0..n).map(|r| y[r * n + c]).collect();
            fft(&mut column, inverse);
            for (r, v) in column.into_iter().enumerate() {
                y[r * n + c] = v;
            }
        }
        y
    }

    #[test]
    fn whole_columns_at_once_give_the_one_dimensional_transforms_bits_at_every_level() {
        let mut rng = crate::stitch::SplitMix64::new(11);
        for n in [1usize, 2, 4, 8, 32, 128] {
            for rows in [n, n / 2 + 1, 1] {
                let x: Vec<Complex> = (0..n * n).map(|i| if i / n < rows { (rng.normal() as f32, rng.normal() as f32) } else { (0.0, 0.0) }).collect();
                for inverse in [false, true] {
                    let want = by_rows_then_columns(&x, n, rows, inverse);
                    for level in crate::cpu::Level::available() {
                        let mut got = x.clone();
                        crate::cpu::with_level(level, || fft2_rows(&mut got, n, rows, inverse));
                        let bits = |v: &[Complex]| v.iter().map(|c| (c.0.to_bits(), c.1.to_bits())).collect::<Vec<_>>();
                        assert!(bits(&got) == bits(&want), "n {n}, rows {rows}, inverse {inverse}, {level:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn two_dimensional_round_trip() {
        let mut rng = crate::stitch::SplitMix64::new(9);
        let n = 32;
        let x: Vec<Complex> = (0..n * n).map(|_| (rng.normal() as f32, 0.0)).collect();
        let mut y = x.clone();
        fft2(&mut y, n, false);
        // The DC term is the sum.
        let sum: f32 = x.iter().map(|v| v.0).sum();
        assert!((y[0].0 - sum).abs() < 1e-3 && y[0].1.abs() < 1e-3);
        fft2(&mut y, n, true);
        for (a, b) in x.iter().zip(&y) {
            assert!((a.0 - b.0 / (n * n) as f32).abs() < 1e-4 && (b.1 / (n * n) as f32).abs() < 1e-4);
        }
    }
}

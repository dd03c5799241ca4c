//! A small in-place radix-2 FFT (Cooley and Tukey 1965, iterative, bit-reversed input
//! order) on power-of-two lengths, and its 2-D form over rows then columns. Written here
//! because the core is `no_std`: the well-kept FFT crates need `std` or fixed sizes, and
//! the one user, the coarse phase correlation of stitching, needs only 64 to 256 points.

/// A complex number, `(re, im)`.
pub type Complex = (f32, f32);

fn mul(a: Complex, b: Complex) -> Complex {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// Transforms `x` (length a power of two) in place: forward `X_k = sum_n x_n e^{-2 pi i
/// k n / N}`, or the inverse without the `1 / N` factor.
pub fn fft(x: &mut [Complex], inverse: bool) {
    let twiddles = Twiddles::new(x.len(), inverse);
    twiddles.apply(x);
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

    /// The transform of `x` (the length the twiddles are for), in place.
    fn apply(&self, x: &mut [Complex]) {
        let n = x.len();
        debug_assert_eq!(n.max(1), self.w.len() + 1);
        if n < 2 {
            return;
        }
        let bits = n.trailing_zeros();
        for i in 0..n {
            let j = i.reverse_bits() >> (usize::BITS - bits);
            if j > i {
                x.swap(i, j);
            }
        }
        let mut len = 2;
        while len <= n {
            let w = &self.w[len / 2 - 1..len - 1];
            for chunk in x.chunks_exact_mut(len) {
                let (lo, hi) = chunk.split_at_mut(len / 2);
                for ((a, b), &w) in lo.iter_mut().zip(hi.iter_mut()).zip(w) {
                    let t = mul(*b, w);
                    *b = (a.0 - t.0, a.1 - t.1);
                    *a = (a.0 + t.0, a.1 + t.1);
                }
            }
            len *= 2;
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
    for row in x.chunks_exact_mut(n).take(rows) {
        twiddles.apply(row);
    }
    let mut column = alloc::vec![(0.0, 0.0); n];
    for c in 0..n {
        for (r, v) in column.iter_mut().enumerate() {
            *v = x[r * n + c];
        }
        twiddles.apply(&mut column);
        for (r, v) in column.iter().enumerate() {
            x[r * n + c] = *v;
        }
    }
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

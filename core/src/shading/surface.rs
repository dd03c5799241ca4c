//! Smooth surfaces for shading fields: a bivariate polynomial of total degree `d`,
//! `P(u, v) = sum over i + j <= d of c_ij u^i v^j` with `u, v` in [-1, 1] across the tile,
//! fitted to scattered samples by weighted least squares made robust by iteratively
//! reweighted least squares with Huber's weights (Huber, "Robust Statistics", 1981): a
//! sample far from the surface (scene structure the stack statistics did not average out)
//! loses weight in proportion to its distance.

use crate::error::{Error, Result};
use alloc::vec;
use alloc::vec::Vec;

/// Huber's tuning constant in units of the residuals' robust spread (95 % efficiency under
/// Gaussian noise).
const HUBER: f64 = 1.345;
/// Reweighting passes after the first least-squares fit.
const PASSES: usize = 4;

/// A fitted polynomial surface (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Surface {
    degree: usize,
    /// `c_ij` in the order of [`terms`].
    coef: Vec<f64>,
}

/// The exponents `(i, j)` of the terms of total degree at most `degree`.
pub(crate) fn terms(degree: usize) -> Vec<(usize, usize)> {
    (0..=degree).flat_map(|t| (0..=t).map(move |j| (t - j, j))).collect()
}

/// A sample of the field: position `(u, v)` in [-1, 1], value, weight (> 0).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    pub u: f64,
    pub v: f64,
    pub value: f64,
    pub weight: f64,
}

impl Surface {
    /// The surface of total degree `degree` fitted to `samples` (see the module doc).
    /// Errors: fewer samples than terms, or samples that do not determine the surface (all
    /// on a line, say).
    pub fn fit(samples: &[Sample], degree: usize) -> Result<Surface> {
        let t = terms(degree);
        if samples.len() < 2 * t.len() {
            return Err(Error::InvalidParameter { name: "shading samples", reason: alloc::format!("{} samples for a surface of {} terms", samples.len(), t.len()) });
        }
        let rows: Vec<f64> = samples.iter().flat_map(|s| t.iter().map(move |&(i, j)| libm::pow(s.u, i as f64) * libm::pow(s.v, j as f64))).collect();
        let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
        let weights: Vec<f64> = samples.iter().map(|s| s.weight).collect();
        Ok(Surface { degree, coef: robust_fit(&rows, &values, &weights, t.len(), 0.0)? })
    }

    /// The surface at `(u, v)`.
    pub fn at(&self, u: f64, v: f64) -> f64 {
        terms(self.degree).iter().zip(&self.coef).map(|(&(i, j), c)| c * libm::pow(u, i as f64) * libm::pow(v, j as f64)).sum()
    }

    /// The polynomial in `u` along the line at `v`: coefficients of `u^0 ..= u^degree`,
    /// so a row of pixels costs one Horner evaluation per pixel.
    pub fn along(&self, v: f64) -> Vec<f64> {
        let mut out = vec![0.0; self.degree + 1];
        for (&(i, j), c) in terms(self.degree).iter().zip(&self.coef) {
            out[i] += c * libm::pow(v, j as f64);
        }
        out
    }
}

/// Weighted least squares made robust by Huber's reweighting (module doc): the
/// coefficients of the `n` terms that fit `values` through `rows` (one row of `n` terms per
/// value, row after row). `ridge`, a fraction of the normal equations' largest diagonal
/// term added to each, keeps a term the rows do not determine at zero; with 0 such rows
/// are an error.
pub(crate) fn robust_fit(rows: &[f64], values: &[f64], weights: &[f64], n: usize, ridge: f64) -> Result<Vec<f64>> {
    let mut w: Vec<f64> = weights.to_vec();
    let mut coef = solve(rows, values, &w, n, ridge)?;
    for _ in 0..PASSES {
        let residuals: Vec<f64> = rows.chunks_exact(n).zip(values).map(|(r, v)| v - r.iter().zip(&coef).map(|(a, c)| a * c).sum::<f64>()).collect();
        // The residuals' spread: 1.4826 x their median absolute value (consistent with
        // the standard deviation under Gaussian noise).
        let mut abs: Vec<f64> = residuals.iter().map(|r| libm::fabs(*r)).collect();
        abs.sort_by(f64::total_cmp);
        let spread = 1.4826 * abs[abs.len() / 2];
        if spread.is_nan() || spread <= 0.0 {
            break;
        }
        let k = HUBER * spread;
        for ((w, base), r) in w.iter_mut().zip(weights).zip(&residuals) {
            *w = base * if libm::fabs(*r) <= k { 1.0 } else { k / libm::fabs(*r) };
        }
        coef = solve(rows, values, &w, n, ridge)?;
    }
    Ok(coef)
}

/// The weighted least-squares coefficients: the normal equations (with `ridge`, see
/// [`robust_fit`]) solved by Cholesky's factorisation.
fn solve(rows: &[f64], values: &[f64], weights: &[f64], n: usize, ridge: f64) -> Result<Vec<f64>> {
    let mut a = vec![0.0f64; n * n];
    let mut b = vec![0.0f64; n];
    for ((row, &value), &w) in rows.chunks_exact(n).zip(values).zip(weights) {
        for p in 0..n {
            let wr = w * row[p];
            b[p] += wr * value;
            for q in 0..=p {
                a[p * n + q] += wr * row[q];
            }
        }
    }
    let scale = (0..n).map(|i| a[i * n + i]).fold(0.0, f64::max);
    for i in 0..n {
        a[i * n + i] += ridge * scale;
    }
    // Cholesky: a = L L^T, L stored in the lower triangle of a.
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if d.is_nan() || d <= 1e-12 * scale {
            return Err(Error::InvalidParameter { name: "shading samples", reason: "they do not determine a smooth surface (too few, or all on a line)".into() });
        }
        let d = libm::sqrt(d);
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
    }
    // L y = b, then L^T c = y.
    let mut c = b;
    for i in 0..n {
        for k in 0..i {
            c[i] -= a[i * n + k] * c[k];
        }
        c[i] /= a[i * n + i];
    }
    for i in (0..n).rev() {
        for k in i + 1..n {
            c[i] -= a[k * n + i] * c[k];
        }
        c[i] /= a[i * n + i];
    }
    Ok(c)
}

/// `sum of poly[i] u^i` by Horner's rule.
pub(crate) fn horner(poly: &[f64], u: f64) -> f64 {
    poly.iter().rev().fold(0.0, |acc, c| acc * u + c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::SplitMix64;

    #[test]
    fn a_polynomial_is_recovered_and_outliers_lose_their_pull() {
        let truth = |u: f64, v: f64| 1.0 - 0.3 * (u * u + v * v) + 0.05 * u - 0.02 * u * v * v * u;
        let mut rng = SplitMix64::new(3);
        let mut samples: Vec<Sample> = (0..40 * 30)
            .map(|k| {
                let (u, v) = ((k % 40) as f64 / 19.5 - 1.0, (k / 40) as f64 / 14.5 - 1.0);
                Sample { u, v, value: truth(u, v) + 0.002 * rng.normal(), weight: 1.0 }
            })
            .collect();
        // A tenth of the samples far off (a bright object).
        for s in samples.iter_mut().step_by(10) {
            s.value += 0.5;
        }
        let f = Surface::fit(&samples, 4).unwrap();
        for (u, v) in [(-1.0, -1.0), (0.0, 0.0), (0.7, -0.3), (1.0, 1.0)] {
            assert!((f.at(u, v) - truth(u, v)).abs() < 0.015, "({u}, {v}): {} vs {}", f.at(u, v), truth(u, v));
            assert!((horner(&f.along(v), u) - f.at(u, v)).abs() < 1e-12);
        }
        assert!(Surface::fit(&samples[..20], 4).is_err());
        let line: Vec<Sample> = (0..100).map(|k| Sample { u: k as f64 / 50.0 - 1.0, v: 0.0, value: 1.0, weight: 1.0 }).collect();
        assert!(Surface::fit(&line, 2).is_err());
    }
}

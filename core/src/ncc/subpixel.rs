//! Subpixel refinement of a correlation peak: the least-squares 2-D quadratic
//! `f(x, y) = a + b x + c y + d x^2 + e x y + g y^2` through the 3 x 3 coefficients around
//! the integer peak, and the position of its maximum (the usual refinement of block
//! matching and template matching; e.g. Tian and Huhns, "Algorithms for subpixel
//! registration", CVGIP 1986, section 3).
//!
//! On the 3 x 3 grid `x, y in {-1, 0, 1}` the least-squares coefficients have a closed
//! form, because the basis `1, x, y, x^2 - 2/3, x y, y^2 - 2/3` is orthogonal there:
//! `b = sum(x f) / 6`, `c = sum(y f) / 6`, `e = sum(x y f) / 4`,
//! `d = sum((x^2 - 2/3) f) / 2`, `g = sum((y^2 - 2/3) f) / 2`. The maximum solves
//! `[2d e; e 2g] [x y]^T = -[b c]^T`.

/// The subpixel offset `(dx, dy)` of the maximum of the quadratic fitted to `v`, where
/// `v[j][i]` is the coefficient at offset `(i - 1, j - 1)` from the integer peak `v[1][1]`.
///
/// When all nine values are finite and the fit is a proper maximum (negative definite,
/// offset within one pixel), that maximum. Otherwise each axis is refined on its own by the
/// 1-D parabola through the centre row / column (`dx = (l - r) / (2 (l - 2 c + r))`), kept
/// only when the centre is its maximum, and an axis whose two neighbours are not both
/// finite stays at 0. The result always lies in `[-1, 1]^2`; a non-finite centre gives
/// `(0, 0)`.
pub fn quadratic_peak(v: &[[f64; 3]; 3]) -> (f64, f64) {
    if !v[1][1].is_finite() {
        return (0.0, 0.0);
    }
    if v.iter().flatten().all(|x| x.is_finite()) {
        let (mut b, mut c, mut e, mut d, mut g) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (j, row) in v.iter().enumerate() {
            for (i, &f) in row.iter().enumerate() {
                let (x, y) = (i as f64 - 1.0, j as f64 - 1.0);
                b += x * f;
                c += y * f;
                e += x * y * f;
                d += (x * x - 2.0 / 3.0) * f;
                g += (y * y - 2.0 / 3.0) * f;
            }
        }
        let (b, c, e, d, g) = (b / 6.0, c / 6.0, e / 4.0, d / 2.0, g / 2.0);
        let det = 4.0 * d * g - e * e;
        if d < 0.0 && g < 0.0 && det > 0.0 {
            let x = (-2.0 * g * b + e * c) / det;
            let y = (-2.0 * d * c + e * b) / det;
            if libm::fabs(x) <= 1.0 && libm::fabs(y) <= 1.0 {
                return (x, y);
            }
        }
    }
    (parabola(v[1][0], v[1][1], v[1][2]), parabola(v[0][1], v[1][1], v[2][1]))
}

/// Vertex of the parabola through (-1, l), (0, c), (1, r), when c is the largest of the
/// three; 0 otherwise. In [-0.5, 0.5] by construction.
fn parabola(l: f64, c: f64, r: f64) -> f64 {
    let den = l - 2.0 * c + r;
    if l.is_finite() && r.is_finite() && c >= l && c >= r && den < 0.0 {
        ((l - r) / (2.0 * den)).clamp(-0.5, 0.5)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn grid(f: impl Fn(f64, f64) -> f64) -> [[f64; 3]; 3] {
        core::array::from_fn(|j| core::array::from_fn(|i| f(i as f64 - 1.0, j as f64 - 1.0)))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// An exact quadratic with its maximum anywhere in the unit square is recovered.
        #[test]
        fn recovers_quadratic_maximum(px in -0.9f64..0.9, py in -0.9f64..0.9, a in 0.2f64..3.0, bq in 0.2f64..3.0, k in -0.5f64..0.5) {
            let e = k * 2.0 * (a * bq).sqrt(); // keeps the form negative definite
            let v = grid(|x, y| { let (u, w) = (x - px, y - py); 1.0 - a * u * u - bq * w * w - e * u * w });
            let (dx, dy) = quadratic_peak(&v);
            prop_assert!((dx - px).abs() < 1e-9 && (dy - py).abs() < 1e-9, "{dx} {dy} vs {px} {py}");
        }
    }

    #[test]
    fn missing_neighbours_fall_back_per_axis() {
        let mut v = grid(|x, y| 1.0 - (x - 0.25) * (x - 0.25) - 2.0 * (y + 0.1) * (y + 0.1));
        v[0][0] = f64::NEG_INFINITY;
        let (dx, dy) = quadratic_peak(&v);
        assert!((dx - 0.25).abs() < 1e-12 && (dy + 0.1).abs() < 1e-12);
        v[1][2] = f64::NAN;
        let (dx, dy) = quadratic_peak(&v);
        assert_eq!(dx, 0.0);
        assert!((dy + 0.1).abs() < 1e-12);
        v[1][1] = f64::NEG_INFINITY;
        assert_eq!(quadratic_peak(&v), (0.0, 0.0));
    }

    #[test]
    fn flat_or_saddle_stays_in_range() {
        assert_eq!(quadratic_peak(&[[0.5; 3]; 3]), (0.0, 0.0));
        let saddle = grid(|x, y| x * x - y * y);
        let (dx, dy) = quadratic_peak(&saddle);
        assert!(dx.abs() <= 1.0 && dy.abs() <= 1.0);
    }
}

//! Subpixel refinement of a pair's shift on the pixels of its agreeing templates.
//!
//! The quadratic fit to each template's 3 x 3 NCC neighbourhood is biased towards whole
//! pixels ("pixel locking"), and the bias depends on the fractional shift, which every
//! template of a pair shares: averaging the vectors does not remove it, and on smooth
//! images, whose correlation peaks are broad, it reaches 0.2 px per pair. So the consensus
//! shift is refined by Gauss-Newton on the sum of squared differences of the agreeing
//! templates (Lucas and Kanade, "An iterative image registration technique with an
//! application to stereo vision", IJCAI 1981), each template with its own gain and offset
//! (the quantity NCC is invariant to), in the inverse-compositional form (Baker and
//! Matthews, "Lucas-Kanade 20 years on", IJCV 2004): the Jacobian is the reference
//! template's gradient, computed once; only the moving frame is resampled (bilinear) per
//! iteration.

use crate::image::{ImageView, Pixel};
use crate::stitch::MotionVector;
use alloc::vec::Vec;

/// Iterations at most; the update is usually below 0.005 px after two.
const ITERATIONS: usize = 3;
/// Templates the refinement uses at most.
const MAX_TEMPLATES: usize = 12;

/// The shift (moving `(u, v)` shows the reference at `(u + x, v + y)`) refined from
/// `shift` on the templates of side `rsz` at the sites of the `inlier` vectors. Returns
/// `shift` unchanged when the templates carry too little gradient to solve for both axes,
/// or when the refinement wanders more than 1 px (a sign that the linearisation does not
/// hold; the consensus stands then).
pub fn refine_shift<T: Pixel + Into<f64>>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, rsz: usize, vectors: &[MotionVector], shift: (f64, f64)) -> (f64, f64) {
    let (w, h) = moving.size();
    // Interior pixels of each template (central differences need both neighbours).
    let n = rsz.saturating_sub(2);
    if n < 2 {
        return shift;
    }
    /// A template's interior: its top-left pixel in the reference, and per pixel (row
    /// major) the value and gradient, each of zero mean.
    struct Patch {
        corner: (usize, usize),
        value: Vec<f64>,
        gx: Vec<f64>,
        gy: Vec<f64>,
    }
    // A dozen templates spread over the agreeing ones carry plenty of pixels for two
    // unknowns; more only cost time.
    let inliers: Vec<&MotionVector> = vectors.iter().filter(|v| v.inlier).collect();
    let step = inliers.len().div_ceil(MAX_TEMPLATES).max(1);
    let patches: Vec<Patch> = inliers
        .iter()
        .step_by(step)
        .map(|v| {
            let (tx, ty) = v.template;
            let mut p = Patch { corner: (tx + 1, ty + 1), value: Vec::with_capacity(n * n), gx: Vec::with_capacity(n * n), gy: Vec::with_capacity(n * n) };
            for y in ty + 1..ty + 1 + n {
                let (above, here, below) = (&reference.row(y - 1)[tx + 1..], &reference.row(y)[tx..], &reference.row(y + 1)[tx + 1..]);
                let f = |v: &T| -> f64 { (*v).into() };
                for ((h, a), b) in here.windows(3).take(n).zip(above).zip(below) {
                    p.value.push(f(&h[1]));
                    p.gx.push(0.5 * (f(&h[2]) - f(&h[0])));
                    p.gy.push(0.5 * (f(b) - f(a)));
                }
            }
            zero_mean(&mut p.value);
            zero_mean(&mut p.gx);
            zero_mean(&mut p.gy);
            p
        })
        .collect();
    // The Gauss-Newton matrix, and each template's sums of gradient times value, are the
    // same every iteration.
    let dot = |a: &[f64], b: &[f64]| -> f64 { a.iter().zip(b).map(|(x, y)| x * y).sum() };
    let (mut hxx, mut hxy, mut hyy) = (0.0, 0.0, 0.0);
    let gv: Vec<(f64, f64)> = patches
        .iter()
        .map(|p| {
            hxx += dot(&p.gx, &p.gx);
            hxy += dot(&p.gx, &p.gy);
            hyy += dot(&p.gy, &p.gy);
            (dot(&p.gx, &p.value), dot(&p.gy, &p.value))
        })
        .collect();
    let det = hxx * hyy - hxy * hxy;
    // Both axes must be constrained (no pure edge); relative to the gradient energy.
    if !(det > 1e-6 * (hxx + hyy) * (hxx + hyy)) {
        return shift;
    }
    let mut s = shift;
    for _ in 0..ITERATIONS {
        // The reference pixel (x, y) is at (x - sx, y - sy) in the moving frame: every
        // pixel shares the fractional part, so the bilinear weights are the pair's.
        let (fx, fy) = (libm::floor(-s.0), libm::floor(-s.1));
        let (ax, ay) = (-s.0 - fx, -s.1 - fy);
        let (fx, fy) = (fx as isize, fy as isize);
        let (mut bx, mut by) = (0.0, 0.0);
        for (p, &(gxv, gyv)) in patches.iter().zip(&gv) {
            let (x0, y0) = (p.corner.0 as isize + fx, p.corner.1 as isize + fy);
            if x0 < 0 || y0 < 0 || x0 + n as isize >= w as isize || y0 + n as isize >= h as isize {
                return shift;
            }
            let (x0, y0) = (x0 as usize, y0 as usize);
            // With e = gain (w - mean w) - value, and gradients and values of zero mean:
            // sum g e = gain sum g w - sum g value, gain = sum value w / sum (w - mean w)^2.
            let (mut sw, mut sww, mut svw, mut sgxw, mut sgyw) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for j in 0..n {
                let (r0, r1) = (&moving.row(y0 + j)[x0..x0 + n + 1], &moving.row(y0 + j + 1)[x0..x0 + n + 1]);
                let k = j * n;
                let (value, gx, gy) = (&p.value[k..k + n], &p.gx[k..k + n], &p.gy[k..k + n]);
                for ((((t, b), value), gx), gy) in r0.windows(2).zip(r1.windows(2)).zip(value).zip(gx).zip(gy) {
                    let (t0, t1, b0, b1): (f64, f64, f64, f64) = (t[0].into(), t[1].into(), b[0].into(), b[1].into());
                    let top = t0 + ax * (t1 - t0);
                    let v = top + ay * (b0 + ax * (b1 - b0) - top);
                    sw += v;
                    sww += v * v;
                    svw += value * v;
                    sgxw += gx * v;
                    sgyw += gy * v;
                }
            }
            let var = sww - sw * sw / (n * n) as f64;
            if !(var > 0.0) {
                return shift;
            }
            let gain = svw / var;
            bx += gain * sgxw - gxv;
            by += gain * sgyw - gyv;
        }
        let dx = (hyy * bx - hxy * by) / det;
        let dy = (hxx * by - hxy * bx) / det;
        s = (s.0 + dx, s.1 + dy);
        if libm::fabs(s.0 - shift.0) > 1.0 || libm::fabs(s.1 - shift.1) > 1.0 || !s.0.is_finite() || !s.1.is_finite() {
            return shift;
        }
        if dx * dx + dy * dy < 2.5e-5 {
            break;
        }
    }
    s
}

fn zero_mean(v: &mut [f64]) {
    let m = v.iter().sum::<f64>() / v.len().max(1) as f64;
    v.iter_mut().for_each(|x| *x -= m);
}

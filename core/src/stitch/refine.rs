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

/// The shift (moving `(u, v)` shows the reference at `(u + x, v + y)`) refined from
/// `shift` on the templates of side `rsz` at the sites of the `inlier` vectors. Returns
/// `shift` unchanged when the templates carry too little gradient to solve for both axes,
/// or when the refinement wanders more than 1 px (a sign that the linearisation does not
/// hold; the consensus stands then).
pub fn refine_shift<T: Pixel + Into<f64>>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, rsz: usize, vectors: &[MotionVector], shift: (f64, f64)) -> (f64, f64) {
    let (w, h) = moving.size();
    // Interior pixels of each template (central differences need both neighbours).
    let inner = rsz.saturating_sub(2);
    if inner < 2 {
        return shift;
    }
    struct Patch {
        site: (usize, usize),
        values: Vec<f64>,
        gradient: Vec<(f64, f64)>,
    }
    let patches: Vec<Patch> = vectors
        .iter()
        .filter(|v| v.inlier)
        .map(|v| {
            let (tx, ty) = v.template;
            let mut values = Vec::with_capacity(inner * inner);
            let mut gradient = Vec::with_capacity(inner * inner);
            for y in ty + 1..ty + 1 + inner {
                let (above, row, below) = (&reference.row(y - 1)[tx..], &reference.row(y)[tx..], &reference.row(y + 1)[tx..]);
                for x in 1..1 + inner {
                    let at = |r: &[T], x: usize| -> f64 { r[x].into() };
                    values.push(at(row, x));
                    gradient.push((0.5 * (at(row, x + 1) - at(row, x - 1)), 0.5 * (at(below, x) - at(above, x))));
                }
            }
            zero_mean(&mut values);
            let n = gradient.len() as f64;
            let mean = gradient.iter().fold((0.0, 0.0), |a, g| (a.0 + g.0 / n, a.1 + g.1 / n));
            gradient.iter_mut().for_each(|g| *g = (g.0 - mean.0, g.1 - mean.1));
            Patch { site: (tx + 1, ty + 1), values, gradient }
        })
        .collect();
    // The Gauss-Newton matrix is the same every iteration.
    let (mut hxx, mut hxy, mut hyy) = (0.0, 0.0, 0.0);
    for g in patches.iter().flat_map(|p| &p.gradient) {
        hxx += g.0 * g.0;
        hxy += g.0 * g.1;
        hyy += g.1 * g.1;
    }
    let det = hxx * hyy - hxy * hxy;
    // Both axes must be constrained (no pure edge); relative to the gradient energy.
    if !(det > 1e-6 * (hxx + hyy) * (hxx + hyy)) {
        return shift;
    }
    let mut s = shift;
    let mut window = Vec::with_capacity(inner * inner);
    for _ in 0..ITERATIONS {
        let (mut bx, mut by) = (0.0, 0.0);
        for p in &patches {
            // The template's pixel (x, y) of the reference is at (x - sx, y - sy) in moving.
            let (ox, oy) = (p.site.0 as f64 - s.0, p.site.1 as f64 - s.1);
            if ox < 0.0 || oy < 0.0 || ox + inner as f64 > (w - 1) as f64 || oy + inner as f64 > (h - 1) as f64 {
                return shift;
            }
            let (fx, fy) = (libm::floor(ox), libm::floor(oy));
            let (ax, ay) = (ox - fx, oy - fy);
            window.clear();
            let x0 = fx as usize;
            for j in 0..inner {
                let y0 = fy as usize + j;
                let (r0, r1) = (&moving.row(y0)[x0..x0 + inner + 1], &moving.row(y0 + 1)[x0..x0 + inner + 1]);
                let mut top_left: f64 = r0[0].into();
                let mut bottom_left: f64 = r1[0].into();
                for i in 0..inner {
                    let (top_right, bottom_right): (f64, f64) = (r0[i + 1].into(), r1[i + 1].into());
                    let top = top_left + ax * (top_right - top_left);
                    let bottom = bottom_left + ax * (bottom_right - bottom_left);
                    window.push(top + ay * (bottom - top));
                    (top_left, bottom_left) = (top_right, bottom_right);
                }
            }
            zero_mean(&mut window);
            // The gain that maps the moving window onto the template.
            let ww: f64 = window.iter().map(|v| v * v).sum();
            let rw: f64 = window.iter().zip(&p.values).map(|(a, b)| a * b).sum();
            if ww <= 0.0 {
                return shift;
            }
            let gain = rw / ww;
            for ((m, r), g) in window.iter().zip(&p.values).zip(&p.gradient) {
                let e = gain * m - r;
                bx += g.0 * e;
                by += g.1 * e;
            }
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

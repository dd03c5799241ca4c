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
use crate::stitch::similarity::Similarity;
use crate::stitch::MotionVector;
use alloc::vec::Vec;

/// Iterations at most; the update is usually below 0.005 px after two.
const ITERATIONS: usize = 3;
/// Templates the refinement uses at most.
const MAX_TEMPLATES: usize = 12;
/// Iterations at most of [`refine_motion`].
const TURN_ITERATIONS: usize = 10;

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
    let patches = patches(reference, rsz, vectors);
    // The Gauss-Newton matrix, and each template's sums of gradient times value, are the
    // same every iteration.
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

/// A template's interior (central differences need both neighbours): its top-left pixel in
/// the reference, and per pixel (row major) the value and gradient, each of zero mean, with
/// the gradient's means (the rotation's Jacobian needs the gradient itself).
struct Patch {
    corner: (usize, usize),
    value: Vec<f64>,
    gx: Vec<f64>,
    gy: Vec<f64>,
    mean_gradient: (f64, f64),
}

/// The patches of a dozen templates spread over the agreeing (`inlier`) ones: plenty of
/// pixels for a few unknowns; more only cost time.
fn patches<T: Pixel + Into<f64>>(reference: ImageView<'_, T>, rsz: usize, vectors: &[MotionVector]) -> Vec<Patch> {
    let n = rsz.saturating_sub(2);
    let inliers: Vec<&MotionVector> = vectors.iter().filter(|v| v.inlier).collect();
    let step = inliers.len().div_ceil(MAX_TEMPLATES).max(1);
    inliers
        .iter()
        .step_by(step)
        .map(|v| {
            let (tx, ty) = v.template;
            let mut p = Patch { corner: (tx + 1, ty + 1), value: Vec::with_capacity(n * n), gx: Vec::with_capacity(n * n), gy: Vec::with_capacity(n * n), mean_gradient: (0.0, 0.0) };
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
            p.mean_gradient = (zero_mean(&mut p.gx), zero_mean(&mut p.gy));
            p
        })
        .collect()
}

/// Subtracts the mean; returns it.
fn zero_mean(v: &mut [f64]) -> f64 {
    let m = v.iter().sum::<f64>() / v.len().max(1) as f64;
    v.iter_mut().for_each(|x| *x -= m);
    m
}

/// Unknowns of [`refine_motion`] at most: translation, angle, scale.
const UNKNOWNS: usize = 4;

/// The similarity motion `motion` (moving `(u, v)` lands on the reference at
/// `motion(u, v)`) refined on the templates of side `rsz` at the sites of the `inlier`
/// vectors, as [`refine_shift`] refines a shift: Gauss-Newton with a gain and offset per
/// template, the Jacobian the reference's gradient (the update is composed on the reference
/// side, `new = update . motion`, so it stays fixed), and the moving frame resampled per
/// pixel (bilinear) where `motion` sends each template pixel. Unknowns: the translation,
/// the angle, and the scale when `with_scale`. Returns the refined motion and the standard
/// error of its angle (radians, from the residuals and the Gauss-Newton matrix; pixels
/// taken as independent, so it is a lower bound on smooth images). Returns `motion`
/// unchanged, with an infinite error, when the templates do not determine every unknown, a
/// template leaves the moving frame, or the refinement moves a template corner more than
/// 1 px.
pub fn refine_motion<T: Pixel + Into<f64>>(reference: ImageView<'_, T>, moving: ImageView<'_, T>, rsz: usize, vectors: &[MotionVector], motion: Similarity, with_scale: bool) -> (Similarity, f64) {
    let unrefined = (motion, f64::INFINITY);
    let (w, h) = moving.size();
    let n = rsz.saturating_sub(2);
    if n < 2 {
        return unrefined;
    }
    let patches = patches(reference, rsz, vectors);
    let k = if with_scale { 4 } else { 3 };
    // The update turns and scales about the templates' centroid, which decouples it from
    // the translation.
    let count = patches.len().max(1) as f64;
    let centre = patches.iter().fold((0.0, 0.0), |c, p| (c.0 + (p.corner.0 as f64 + (n - 1) as f64 / 2.0) / count, c.1 + (p.corner.1 as f64 + (n - 1) as f64 / 2.0) / count));
    // Per patch: the Jacobian columns (zero mean), and their sums with the values.
    let mut hess = [[0.0; UNKNOWNS]; UNKNOWNS];
    let jacobians: Vec<([Vec<f64>; UNKNOWNS], [f64; UNKNOWNS])> = patches
        .iter()
        .map(|p| {
            let mut cols: [Vec<f64>; UNKNOWNS] = [p.gx.clone(), p.gy.clone(), Vec::with_capacity(n * n), Vec::with_capacity(n * n)];
            for j in 0..n {
                let dy = (p.corner.1 + j) as f64 - centre.1;
                for i in 0..n {
                    let dx = (p.corner.0 + i) as f64 - centre.0;
                    let (gx, gy) = (p.gx[j * n + i] + p.mean_gradient.0, p.gy[j * n + i] + p.mean_gradient.1);
                    cols[2].push(gy * dx - gx * dy);
                    cols[3].push(gx * dx + gy * dy);
                }
            }
            zero_mean(&mut cols[2]);
            zero_mean(&mut cols[3]);
            let mut with_value = [0.0; UNKNOWNS];
            for a in 0..k {
                with_value[a] = dot(&cols[a], &p.value);
                for b in 0..k {
                    hess[a][b] += dot(&cols[a], &cols[b]);
                }
            }
            (cols, with_value)
        })
        .collect();
    let Some(inverse) = invert(&hess, k) else { return unrefined };
    let mut m = motion;
    let reach = (n as f64) * 2.0;
    // Where the refinement's move is measured: two template sides from the moving frame's
    // origin; with a scale, at the templates' corners themselves (where they sample the
    // moving frame at the start). A zoom (or turn) corrected about the templates' centroid
    // moves the frame's corner, a frame's half-diagonal away, by more than any template:
    // a loop pair zoomed 12 % whose start was 0.7 % off kept that start, the move being
    // over 1 px at the corner and under it at the templates. Without a scale the probes
    // stay as they were, so that results without `fit_scale` are unchanged to the bit.
    let probes: Vec<(f64, f64)> = if with_scale {
        let start = motion.inverse();
        let last = (n - 1) as f64;
        patches
            .iter()
            .flat_map(|p| {
                let c = (p.corner.0 as f64, p.corner.1 as f64);
                [c, (c.0 + last, c.1), (c.0, c.1 + last), (c.0 + last, c.1 + last)]
            })
            .map(|c| start.apply(c))
            .collect()
    } else {
        alloc::vec![(0.0, 0.0), (reach, 0.0), (0.0, reach)]
    };
    // The residual sum of squares at the last iterate.
    let mut sse = 0.0;
    for _ in 0..TURN_ITERATIONS {
        let back = m.inverse();
        let mut rhs = [0.0; UNKNOWNS];
        sse = 0.0;
        for (p, (cols, with_value)) in patches.iter().zip(&jacobians) {
            // Where the template's pixels are in the moving frame: a row steps by a constant.
            let corner = back.apply((p.corner.0 as f64, p.corner.1 as f64));
            let (ex, ey) = (back.apply((p.corner.0 as f64 + 1.0, p.corner.1 as f64)), back.apply((p.corner.0 as f64, p.corner.1 as f64 + 1.0)));
            let (sx, sy) = ((ex.0 - corner.0, ex.1 - corner.1), (ey.0 - corner.0, ey.1 - corner.1));
            let far = (corner.0 + sx.0 * n as f64 + sy.0 * n as f64, corner.1 + sx.1 * n as f64 + sy.1 * n as f64);
            let inside = |q: (f64, f64)| q.0 >= 0.0 && q.1 >= 0.0 && q.0 + 1.0 < w as f64 && q.1 + 1.0 < h as f64;
            let corners = [corner, far, (corner.0 + sx.0 * n as f64, corner.1 + sx.1 * n as f64), (corner.0 + sy.0 * n as f64, corner.1 + sy.1 * n as f64)];
            if !corners.iter().all(|&q| inside(q)) {
                return unrefined;
            }
            let mut sampled = Vec::with_capacity(n * n);
            for j in 0..n {
                for i in 0..n {
                    let (x, y) = (corner.0 + sx.0 * i as f64 + sy.0 * j as f64, corner.1 + sx.1 * i as f64 + sy.1 * j as f64);
                    let (x0, y0) = (libm::floor(x), libm::floor(y));
                    let (ax, ay) = (x - x0, y - y0);
                    let (x0, y0) = (x0 as usize, y0 as usize);
                    let (t, b) = (&moving.row(y0)[x0..x0 + 2], &moving.row(y0 + 1)[x0..x0 + 2]);
                    let (t0, t1, b0, b1): (f64, f64, f64, f64) = (t[0].into(), t[1].into(), b[0].into(), b[1].into());
                    let top = t0 + ax * (t1 - t0);
                    sampled.push(top + ay * (b0 + ax * (b1 - b0) - top));
                }
            }
            let mean = sampled.iter().sum::<f64>() / sampled.len() as f64;
            let var = sampled.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>();
            if !(var > 0.0) {
                return unrefined;
            }
            // With e = gain (w - mean w) - value, and columns and values of zero mean:
            // sum g e = gain sum g w - sum g value, gain = sum value w / sum (w - mean w)^2,
            // and sum e^2 = sum value^2 - (sum value w)^2 / sum (w - mean w)^2.
            let value_w = dot(&p.value, &sampled);
            let gain = value_w / var;
            sse += dot(&p.value, &p.value) - value_w * value_w / var;
            for a in 0..k {
                rhs[a] += gain * dot(&cols[a], &sampled) - with_value[a];
            }
        }
        let mut step = [0.0; UNKNOWNS];
        for a in 0..k {
            step[a] = (0..k).map(|b| inverse[a][b] * rhs[b]).sum();
        }
        let update = Similarity::about(centre, (step[0], step[1]), step[2], 1.0 + step[3]);
        m = update.then(&m);
        let moved = probes.iter().map(|&q| {
            let (a, b) = (m.apply(q), motion.apply(q));
            libm::hypot(a.0 - b.0, a.1 - b.1)
        });
        let worst = moved.fold(0.0, f64::max);
        if !(worst <= 1.0) || !m.x.is_finite() || !m.y.is_finite() {
            return unrefined;
        }
        if step[0] * step[0] + step[1] * step[1] + (step[2] * step[2] + step[3] * step[3]) * reach * reach < 2.5e-5 {
            break;
        }
    }
    // Unknowns: the motion's, and a gain and offset per template.
    let dof = (patches.len() * n * n).saturating_sub(k + 2 * patches.len()).max(1) as f64;
    (m, libm::sqrt(sse.max(0.0) / dof * inverse[2][2].max(0.0)))
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The inverse of the leading `k x k` block of `m` (Gauss-Jordan with partial pivoting), or
/// `None` when it is singular relative to its diagonal.
fn invert(m: &[[f64; UNKNOWNS]; UNKNOWNS], k: usize) -> Option<[[f64; UNKNOWNS]; UNKNOWNS]> {
    let mut a = *m;
    let mut inv = [[0.0; UNKNOWNS]; UNKNOWNS];
    for (i, row) in inv.iter_mut().enumerate().take(k) {
        row[i] = 1.0;
    }
    let scale = (0..k).map(|i| libm::fabs(m[i][i])).fold(0.0, f64::max);
    for c in 0..k {
        let p = (c..k).max_by(|&x, &y| libm::fabs(a[x][c]).total_cmp(&libm::fabs(a[y][c])))?;
        if !(libm::fabs(a[p][c]) > 1e-9 * scale) {
            return None;
        }
        a.swap(c, p);
        inv.swap(c, p);
        let d = a[c][c];
        for j in 0..k {
            a[c][j] /= d;
            inv[c][j] /= d;
        }
        for r in 0..k {
            if r != c {
                let f = a[r][c];
                for j in 0..k {
                    a[r][j] -= f * a[c][j];
                    inv[r][j] -= f * inv[c][j];
                }
            }
        }
    }
    Some(inv)
}

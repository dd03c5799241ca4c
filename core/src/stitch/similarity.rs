//! The similarity motion model (rotation, optional scale, translation) and its robust fit
//! to a pair's template vectors.
//!
//! A [`Similarity`] maps a frame's pixel `(u, v)` to `(x, y) + s R(angle) (u, v)` with
//! `R(a) = [[cos a, -sin a], [sin a, cos a]]`, in pixel coordinates (x to the right, y
//! down). As a frame's pose it says where its pixels land in the reference frame's
//! coordinates; as a pair's motion, where the moving frame's pixels land in the reference
//! frame. With angle 0 and scale 1 it is the translation of [`super::register`]'s shift
//! convention, so a pure translation keeps every result of the translation model to the bit.
//!
//! The fit is least squares over point correspondences (template centre in the reference,
//! where it was found in the moving frame), in closed form: the 2-D case of Procrustes
//! analysis (Umeyama, "Least-squares estimation of transformation parameters between two
//! point patterns", PAMI 1991). Outliers are removed by consensus as for translations
//! (RANSAC, Fischler and Bolles 1981): every pair of vectors far enough apart is a
//! hypothesis, and the one most vectors agree with (within the pair's agreement tolerance)
//! wins; the model is then refitted on its inliers.

use super::vote;
use crate::cpu::multiversion;
use crate::simd::sqrt;
use alloc::vec::Vec;

/// A rotation with optional scale, then a translation (module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Similarity {
    pub x: f64,
    pub y: f64,
    /// Radians, counter-clockwise on screen axes (x right, y down: clockwise as seen).
    pub angle: f64,
    pub scale: f64,
}

impl Default for Similarity {
    fn default() -> Self {
        Similarity::IDENTITY
    }
}

impl Similarity {
    pub const IDENTITY: Similarity = Similarity { x: 0.0, y: 0.0, angle: 0.0, scale: 1.0 };

    /// The pure translation by `(x, y)`.
    pub fn translation((x, y): (f64, f64)) -> Self {
        Similarity { x, y, ..Similarity::IDENTITY }
    }

    /// The motion that turns by `angle` and scales by `scale` about `centre` and then
    /// moves the centre by `shift`: `p -> centre + shift + s R(angle) (p - centre)`.
    pub fn about(centre: (f64, f64), shift: (f64, f64), angle: f64, scale: f64) -> Self {
        let turn = Similarity { x: 0.0, y: 0.0, angle, scale };
        let c = turn.apply(centre);
        Similarity { x: centre.0 + shift.0 - c.0, y: centre.1 + shift.1 - c.1, angle, scale }
    }

    /// Whether it is a pure translation (angle 0, scale 1).
    pub fn is_translation(&self) -> bool {
        self.angle == 0.0 && self.scale == 1.0
    }

    /// Its translation `(x, y)`.
    pub fn shift(&self) -> (f64, f64) {
        (self.x, self.y)
    }

    fn matrix(&self) -> (f64, f64) {
        if self.angle == 0.0 {
            return (self.scale, 0.0);
        }
        (self.scale * libm::cos(self.angle), self.scale * libm::sin(self.angle))
    }

    /// The image of the point `(u, v)`.
    pub fn apply(&self, p: (f64, f64)) -> (f64, f64) {
        self.mapping()(p)
    }

    /// [`apply`](Self::apply) for many points: the trigonometry of its matrix done once.
    pub fn mapping(&self) -> impl Fn((f64, f64)) -> (f64, f64) {
        let (Similarity { x, y, .. }, translation) = (*self, self.is_translation());
        let (c, s) = if translation { (1.0, 0.0) } else { self.matrix() };
        move |(u, v)| if translation { (x + u, y + v) } else { (x + c * u - s * v, y + s * u + c * v) }
    }

    /// `self` after `inner`: `p -> self(inner(p))`. A frame's pose from its reference's pose
    /// and the pair's motion is `reference_pose.then(&pair)`.
    pub fn then(&self, inner: &Similarity) -> Similarity {
        if self.is_translation() && inner.is_translation() {
            return Similarity::translation((self.x + inner.x, self.y + inner.y));
        }
        let (x, y) = self.apply(inner.shift());
        Similarity { x, y, angle: self.angle + inner.angle, scale: self.scale * inner.scale }
    }

    /// The inverse motion. A scale of 0 has none: callers keep scales positive.
    pub fn inverse(&self) -> Similarity {
        if self.is_translation() {
            return Similarity::translation((-self.x, -self.y));
        }
        let back = Similarity { x: 0.0, y: 0.0, angle: -self.angle, scale: 1.0 / self.scale };
        let (x, y) = back.apply((self.x, self.y));
        Similarity { x: -x, y: -y, ..back }
    }

    /// How far (pixels) it moves any point of a frame of `size` away from where the
    /// translation of its centre would put it: the rotation and scale's effect at the
    /// corners. 0 for a translation.
    pub fn spread(&self, size: (usize, usize)) -> f64 {
        if self.is_translation() {
            return 0.0;
        }
        let half = libm::hypot(size.0 as f64 / 2.0, size.1 as f64 / 2.0);
        let (c, s) = self.matrix();
        half * libm::hypot(c - 1.0, s)
    }
}

/// A point correspondence: `reference` (a template's centre) is where the moving frame's
/// point `moving` (where it was found) lands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Correspondence {
    pub reference: (f64, f64),
    pub moving: (f64, f64),
}

/// A least-squares fit and how well it is determined.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    pub motion: Similarity,
    /// Root mean square residual (pixels).
    pub rms: f64,
    /// Standard error of the angle (radians), from the residuals (at least `floor` pixels of
    /// noise per point, so that a perfect fit of few points is not overconfident).
    pub angle_error: f64,
}

/// The least-squares similarity mapping each `moving` point onto its `reference` (scale 1
/// unless `with_scale`). `None` with fewer than two points or all moving points in one place.
pub fn fit(points: &[Correspondence], with_scale: bool, floor: f64) -> Option<Fit> {
    let n = points.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let (mut ax, mut ay, mut bx, mut by) = (0.0, 0.0, 0.0, 0.0);
    for p in points {
        ax += p.reference.0;
        ay += p.reference.1;
        bx += p.moving.0;
        by += p.moving.1;
    }
    let (ax, ay, bx, by) = (ax / nf, ay / nf, bx / nf, by / nf);
    let (mut dot, mut cross, mut spread) = (0.0, 0.0, 0.0);
    for p in points {
        let (ux, uy) = (p.moving.0 - bx, p.moving.1 - by);
        let (vx, vy) = (p.reference.0 - ax, p.reference.1 - ay);
        dot += ux * vx + uy * vy;
        cross += ux * vy - uy * vx;
        spread += ux * ux + uy * uy;
    }
    if !(spread > 1e-9) {
        return None;
    }
    let angle = libm::atan2(cross, dot);
    let scale = if with_scale { libm::hypot(dot, cross) / spread } else { 1.0 };
    let turn = Similarity { x: 0.0, y: 0.0, angle, scale };
    let b = turn.apply((bx, by));
    let motion = Similarity { x: ax - b.0, y: ay - b.1, angle, scale };
    let image = motion.mapping();
    let rss: f64 = points.iter().map(|p| sq_dist(image(p.moving), p.reference)).sum();
    let unknowns = if with_scale { 4.0 } else { 3.0 };
    let dof = (2.0 * nf - unknowns).max(1.0);
    let sigma = libm::sqrt(rss / dof).max(floor);
    Some(Fit { motion, rms: libm::sqrt(rss / nf), angle_error: sigma / (scale * libm::sqrt(spread)) })
}

/// [`fit`] of the points of `points` at the indices `set`, in its order: the points
/// themselves where `set` names all of them in order (no copy made), else gathered.
pub(crate) fn fit_set(points: &[Correspondence], set: &[usize], with_scale: bool, floor: f64) -> Option<Fit> {
    if set.iter().copied().eq(0..points.len()) {
        return fit(points, with_scale, floor);
    }
    let chosen: Vec<Correspondence> = set.iter().map(|&k| points[k]).collect();
    fit(&chosen, with_scale, floor)
}

fn sq_dist(a: (f64, f64), b: (f64, f64)) -> f64 {
    (a.0 - b.0) * (a.0 - b.0) + (a.1 - b.1) * (a.1 - b.1)
}

/// Points a consensus draws its hypotheses from at most (the strongest): a 6 x 6 grid whole.
const MAX_HYPOTHESIS_POINTS: usize = 36;

/// Limits of a consensus hypothesis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// Largest rotation (radians, either way) a hypothesis may have.
    pub max_angle: f64,
    /// Largest `|scale - 1|` (0: scale fixed at 1).
    pub max_scale_change: f64,
    /// Fewest pixels between the two moving points of a hypothesis (closer points
    /// determine the angle poorly).
    pub min_baseline: f64,
}

/// The consensus similarity of the correspondences `points` with the given `weights` (ties
/// of inlier count go to the larger weight sum): for every pair of points at least
/// `min_baseline` apart among the [`MAX_HYPOTHESIS_POINTS`] of largest weight as hypothesis, the points whose image lands within `tol` pixels
/// (Chebyshev) of their reference; the largest set wins, the model is refitted on it by
/// least squares, and the set gathered once more around the fit. Returns the fit and its
/// inlier indices, or `None` when no hypothesis is within `bounds` (or `weights` is not one
/// per point).
pub fn consensus(points: &[Correspondence], weights: &[f64], tol: f64, bounds: &Bounds) -> Option<(Fit, Vec<usize>)> {
    if weights.len() != points.len() {
        return None;
    }
    // Made a row at a time, as the host's test asks for them.
    let h = best_on_host(points, weights, tol, hypotheses(points, weights, bounds))?;
    refitted(points, h, tol, bounds)
}

/// The similarity consensus of correspondences (every pair of the strongest points a
/// hypothesis, the largest set the winner, refitted) in two steps, for hypotheses' sets
/// counted elsewhere (a device counting a batch of pairs' consensuses in one launch): the
/// hypotheses made at once, then the winner and its refit from their counts
/// ([`ConsensusCount::finish`]), the host's answer to the bit.
///
/// Each hypothesis `[c, s, x, y]` takes the points whose moving point it takes within `tol`
/// (Chebyshev) of their reference point, each coordinate's residual `x + c u - s v - r_x`
/// and `y + s u + c v - r_y` evaluated in that order with every product and sum rounded on
/// its own; its count is those points', its score their weights summed from 0 in point
/// order, exactly as the host's test makes them.
#[derive(Clone, Debug, PartialEq)]
pub struct ConsensusCount {
    points: Vec<Correspondence>,
    weights: Vec<f64>,
    tol: f64,
    bounds: Bounds,
    hypotheses: Vec<Hypothesis>,
}

impl ConsensusCount {
    /// The consensus's hypotheses of `points` with their `weights`; `None` where `weights`
    /// is not one per point.
    pub fn new(points: Vec<Correspondence>, weights: Vec<f64>, tol: f64, bounds: &Bounds) -> Option<Self> {
        if weights.len() != points.len() {
            return None;
        }
        let hypotheses = hypotheses(&points, &weights, bounds).all();
        Some(ConsensusCount { points, weights, tol, bounds: *bounds, hypotheses })
    }

    pub fn points(&self) -> &[Correspondence] {
        &self.points
    }

    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    pub fn tol(&self) -> f64 {
        self.tol
    }

    pub fn hypotheses(&self) -> &[Hypothesis] {
        &self.hypotheses
    }

    /// Point tests the counts take: hypotheses times points.
    pub fn tests(&self) -> usize {
        self.hypotheses.len().saturating_mul(self.points.len())
    }

    /// The consensus (its fit and inliers) from each hypothesis's `(count, score)` in order; counted on
    /// the host where `counts` is `None` (or not one per hypothesis).
    pub fn finish(&self, counts: Option<&[(usize, f64)]>) -> Option<(Fit, Vec<usize>)> {
        let h = match counts {
            Some(counted) if counted.len() == self.hypotheses.len() => self.hypotheses[best_counted(counted)?],
            _ => best_on_host(&self.points, &self.weights, self.tol, self.hypotheses.iter().copied())?,
        };
        refitted(&self.points, h, self.tol, &self.bounds)
    }
}

/// The winner among `hypotheses` by [`vote::best_set`], their sets tested on the host.
fn best_on_host(points: &[Correspondence], weights: &[f64], tol: f64, hypotheses: impl Iterator<Item = Hypothesis>) -> Option<Hypothesis> {
    let coordinates: [fn(&Correspondence) -> f64; 4] = [|p| p.moving.0, |p| p.moving.1, |p| p.reference.0, |p| p.reference.1];
    let [mx, my, rx, ry] = coordinates.map(|f| vote::blocks(points.iter().map(f)));
    let set = |&h: &Hypothesis, mask: &mut vote::Mask| vote::fill_mask(mask, &Near { h, tol, mx: &mx, my: &my, rx: &rx, ry: &ry });
    vote::best_set(weights, hypotheses, set, 0.0).map(|(_, _, h)| h)
}

/// [`consensus`]'s test of a hypothesis `h` over the points' coordinates in blocks:
/// [`near`], 64 points a word.
struct Near<'a> {
    h: Hypothesis,
    tol: f64,
    mx: &'a vote::Blocks,
    my: &'a vote::Blocks,
    rx: &'a vote::Blocks,
    ry: &'a vote::Blocks,
}

impl vote::Test for Near<'_> {
    #[inline(always)]
    fn word(&self, w: usize) -> u64 {
        let (mx, my, rx, ry) = (&self.mx[w], &self.my[w], &self.rx[w], &self.ry[w]);
        vote::word(|j| lands_near(self.h, (mx[j], my[j]), (rx[j], ry[j]), self.tol))
    }
}

/// A similarity as its matrix entries and shift, `[c, s, x, y]` with `(c, s)` = scale (cos
/// a, sin a), so that no hypothesis needs trigonometry.
pub type Hypothesis = [f64; 4];

/// The winner among counted hypotheses, by [`vote::best_set`]'s rule ([`vote::beats`]):
/// the largest set, ties to the larger score, the first of equals; `None` with none.
fn best_counted(counted: &[(usize, f64)]) -> Option<usize> {
    let mut best: Option<(usize, (usize, f64))> = None;
    for (k, &set) in counted.iter().enumerate() {
        if best.is_none_or(|(_, b)| vote::beats(set, b)) {
            best = Some((k, set));
        }
    }
    best.map(|(k, _)| k)
}

/// Whether `h` takes `p`'s moving point within `tol` (Chebyshev) of its reference point.
fn near(h: Hypothesis, p: &Correspondence, tol: f64) -> bool {
    lands_near(h, p.moving, p.reference, tol)
}

/// Whether `h` takes the point `(u, v)` within `tol` (Chebyshev) of `(rx, ry)`: [`near`],
/// inlined into the consensus's vectorized test too (both axes tested, `&` not `&&`: a
/// branch-free test reads every lane with plain loads, not masked ones).
#[inline(always)]
fn lands_near([c, s, x, y]: Hypothesis, (u, v): (f64, f64), (rx, ry): (f64, f64), tol: f64) -> bool {
    ((x + c * u - s * v - rx).abs() <= tol) & ((y + s * u + c * v - ry).abs() <= tol)
}

/// [`consensus`]'s hypotheses: every pair of points at least `min_baseline` apart among the
/// [`MAX_HYPOTHESIS_POINTS`] of largest weight, the motion taking one to the other, where it
/// is within `bounds`; in the order of the pairs `(n, m)`, `n < m`, of that ranking.
fn hypotheses(points: &[Correspondence], weights: &[f64], bounds: &Bounds) -> Hypotheses {
    // Hypotheses from the strongest points only: the consensus needs one good pair of
    // them, and all pairs of every point cost quadratically more.
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]));
    order.truncate(MAX_HYPOTHESIS_POINTS);
    let strongest = Strongest::of(points, &order);
    Hypotheses { limits: Limits::of(bounds), row: Row::default(), n: 0, m: strongest.len, strongest }
}

/// [`hypotheses`]' iterator: a row made at a time, as the consensus asks for them (it stops
/// at a set of every point), its valid lanes handed out in order from the row itself.
struct Hypotheses {
    strongest: Strongest,
    limits: Limits,
    row: Row,
    /// The next row to make, and the next lane of the current one.
    n: usize,
    m: usize,
}

impl Hypotheses {
    /// At most as many hypotheses as there are pairs of points.
    fn most(&self) -> usize {
        let len = self.strongest.len;
        len * len.saturating_sub(1) / 2
    }

    /// The hypotheses left, in the iterator's order: each row's valid lanes copied as the
    /// row is made, rather than handed out one call at a time.
    fn all(mut self) -> Vec<Hypothesis> {
        let mut all = Vec::with_capacity(self.most());
        loop {
            let row = &self.row;
            all.extend((self.m..self.strongest.len).filter(|&m| row.valid[m]).map(|m| row.hypothesis(m)));
            if !self.next_row() {
                return all;
            }
        }
    }

    /// Makes the next row, its lanes handed out from the one past its point; `false` after
    /// the last.
    fn next_row(&mut self) -> bool {
        if self.n >= self.strongest.len {
            return false;
        }
        hypothesis_row(&self.strongest, self.n, &self.limits, &mut self.row);
        self.n += 1;
        self.m = self.n;
        true
    }
}

impl Iterator for Hypotheses {
    type Item = Hypothesis;

    fn next(&mut self) -> Option<Hypothesis> {
        loop {
            while self.m < self.strongest.len {
                let m = self.m;
                self.m += 1;
                if self.row.valid[m] {
                    return Some(self.row.hypothesis(m));
                }
            }
            if !self.next_row() {
                return None;
            }
        }
    }
}

/// The hypothesis points' coordinates, a lane each: moving `(mx, my)`, reference `(rx, ry)`;
/// lanes from `len` on are 0 (and never valid).
#[derive(Clone, Copy)]
struct Strongest {
    mx: [f64; MAX_HYPOTHESIS_POINTS],
    my: [f64; MAX_HYPOTHESIS_POINTS],
    rx: [f64; MAX_HYPOTHESIS_POINTS],
    ry: [f64; MAX_HYPOTHESIS_POINTS],
    len: usize,
}

impl Strongest {
    fn of(points: &[Correspondence], order: &[usize]) -> Strongest {
        let at = |f: fn(&Correspondence) -> f64| core::array::from_fn(|k| order.get(k).map_or(0.0, |&i| f(&points[i])));
        Strongest { mx: at(|p| p.moving.0), my: at(|p| p.moving.1), rx: at(|p| p.reference.0), ry: at(|p| p.reference.1), len: order.len() }
    }
}

/// [`Bounds`] as limits on a hypothesis's baseline and matrix `(c, s)` = scale (cos a, sin a).
struct Limits {
    min_baseline: f64,
    with_scale: bool,
    max_zoom: f64,
    min_cos: f64,
}

impl Limits {
    fn of(bounds: &Bounds) -> Limits {
        Limits {
            min_baseline: bounds.min_baseline,
            with_scale: bounds.max_scale_change > 0.0,
            max_zoom: 1.0 + bounds.max_scale_change + 1e-12,
            min_cos: libm::cos(bounds.max_angle.min(core::f64::consts::PI)),
        }
    }
}

/// The hypotheses of point `n` with every point `m`, a lane each ([`hypothesis_row`]).
#[derive(Clone, Copy)]
struct Row {
    c: [f64; MAX_HYPOTHESIS_POINTS],
    s: [f64; MAX_HYPOTHESIS_POINTS],
    x: [f64; MAX_HYPOTHESIS_POINTS],
    y: [f64; MAX_HYPOTHESIS_POINTS],
    valid: [bool; MAX_HYPOTHESIS_POINTS],
}

impl Row {
    /// Lane `m`'s hypothesis.
    fn hypothesis(&self, m: usize) -> Hypothesis {
        [self.c[m], self.s[m], self.x[m], self.y[m]]
    }
}

impl Default for Row {
    fn default() -> Self {
        let zero = [0.0; MAX_HYPOTHESIS_POINTS];
        Row { c: zero, s: zero, x: zero, y: zero, valid: [false; MAX_HYPOTHESIS_POINTS] }
    }
}

multiversion! {
    /// Fills `row` with the hypotheses taking point `n` and point `m` of `points`, for every
    /// lane `m` at once (valid for `n < m < len` within `limits`): the turn (scaled, with a
    /// scale) taking the moving baseline `u` onto the reference baseline `v`, about the
    /// pair's midpoint. Branch-free, so that each level's lanes make several at a time.
    /// Only the lanes a row hands out (`n < m < len`) are made, from the vector of four
    /// that holds lane `n + 1`: the others are never read.
    fn hypothesis_row(points: &Strongest, n: usize, limits: &Limits, row: &mut Row) {
        let (ax, ay, bx, by) = (points.mx[n], points.my[n], points.rx[n], points.ry[n]);
        let lanes = ((n + 1) & !3)..points.len.next_multiple_of(4).min(MAX_HYPOTHESIS_POINTS);
        for m in lanes {
            let (ux, uy) = (points.mx[m] - ax, points.my[m] - ay);
            let (vx, vy) = (points.rx[m] - bx, points.ry[m] - by);
            let (lu, lv) = (sqrt(ux * ux + uy * uy), sqrt(vx * vx + vy * vy));
            let zoom = if limits.with_scale { lv / lu } else { 1.0 };
            // The turn taking u to v, scaled.
            let (cos, sin) = ((ux * vx + uy * vy) / (lu * lv), (ux * vy - uy * vx) / (lu * lv));
            let (c, s) = (zoom * cos, zoom * sin);
            let (mid_x, mid_y) = ((ax + points.mx[m]) / 2.0, (ay + points.my[m]) / 2.0);
            let (goal_x, goal_y) = ((bx + points.rx[m]) / 2.0, (by + points.ry[m]) / 2.0);
            row.c[m] = c;
            row.s[m] = s;
            row.x[m] = goal_x - (c * mid_x - s * mid_y);
            row.y[m] = goal_y - (s * mid_x + c * mid_y);
            // Written so that NaN (a baseline of length 0) fails every test.
            row.valid[m] = (m > n) & (m < points.len) & (lu >= limits.min_baseline) & (lv > 0.0) & (zoom <= limits.max_zoom) & (zoom >= 2.0 - limits.max_zoom) & (cos >= limits.min_cos);
        }
    }
}

/// The winning hypothesis `h`'s set refitted by least squares and gathered once more
/// around the fit ([`consensus`]'s last step); `None` where the fit leaves `bounds`.
fn refitted(points: &[Correspondence], h: Hypothesis, tol: f64, bounds: &Bounds) -> Option<(Fit, Vec<usize>)> {
    let with_scale = bounds.max_scale_change > 0.0;
    let within = |m: &Similarity| libm::fabs(m.angle) <= bounds.max_angle && libm::fabs(m.scale - 1.0) <= bounds.max_scale_change + 1e-12;
    let gather = |h: Hypothesis| -> Vec<usize> { (0..points.len()).filter(|&k| near(h, &points[k], tol)).collect() };
    let mut set = gather(h);
    let mut result = None;
    for _ in 0..2 {
        let Some(f) = fit_set(points, &set, with_scale, 0.0).filter(|f| within(&f.motion)) else { break };
        let (c, s) = f.motion.matrix();
        let again = gather([c, s, f.motion.x, f.motion.y]);
        result = Some((f, set.clone()));
        if again.len() < set.len() || again == set {
            break;
        }
        set = again;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::SplitMix64;

    fn close(a: (f64, f64), b: (f64, f64), tol: f64) -> bool {
        libm::fabs(a.0 - b.0) <= tol && libm::fabs(a.1 - b.1) <= tol
    }

    #[test]
    fn composition_and_inverse_agree_with_applying_points() {
        let mut rng = SplitMix64::new(3);
        for _ in 0..200 {
            let mut m = || Similarity { x: 100.0 * rng.normal(), y: 100.0 * rng.normal(), angle: rng.normal(), scale: 0.5 + rng.uniform() };
            let (a, b) = (m(), m());
            let p = (50.0, -20.0);
            assert!(close(a.then(&b).apply(p), a.apply(b.apply(p)), 1e-9));
            assert!(close(a.inverse().apply(a.apply(p)), p, 1e-9));
            assert!(close(a.then(&a.inverse()).shift(), (0.0, 0.0), 1e-9));
        }
        // Translations compose as sums, to the bit.
        let (t, u) = (Similarity::translation((0.1, 0.7)), Similarity::translation((1e-3, 2.2)));
        assert_eq!(t.then(&u), Similarity::translation((0.1 + 1e-3, 0.7 + 2.2)));
        assert_eq!(t.inverse(), Similarity::translation((-0.1, -0.7)));
        // About a centre: the centre moves by the shift.
        let m = Similarity::about((10.0, 5.0), (2.0, -1.0), 0.3, 1.1);
        assert!(close(m.apply((10.0, 5.0)), (12.0, 4.0), 1e-12));
        assert!(libm::fabs(Similarity::about((100.0, 0.0), (0.0, 0.0), 0.01, 1.0).spread((200, 0)) - 100.0 * 0.01) < 1e-3);
    }

    /// The float64 reference: the angle and translation that minimise the squared residuals,
    /// found by a fine scan of the angle within 0.05 rad of `near` (the translation is the
    /// centroids' difference).
    fn scanned(points: &[Correspondence], near: f64) -> Similarity {
        let n = points.len() as f64;
        let (mut best, mut arg) = (f64::INFINITY, Similarity::IDENTITY);
        for k in -50_000..=50_000 {
            let angle = near + k as f64 * 1e-6;
            let turn = Similarity { x: 0.0, y: 0.0, angle, scale: 1.0 };
            let (mut tx, mut ty) = (0.0, 0.0);
            for p in points {
                let q = turn.apply(p.moving);
                tx += (p.reference.0 - q.0) / n;
                ty += (p.reference.1 - q.1) / n;
            }
            let m = Similarity { x: tx, y: ty, ..turn };
            let rss: f64 = points.iter().map(|p| sq_dist(m.apply(p.moving), p.reference)).sum();
            if rss < best {
                (best, arg) = (rss, m);
            }
        }
        arg
    }

    #[test]
    fn the_fit_is_the_least_squares_motion() {
        let mut rng = SplitMix64::new(11);
        for _ in 0..5 {
            let truth = Similarity { x: 30.0 * rng.normal(), y: 30.0 * rng.normal(), angle: 0.1 * rng.normal(), scale: 1.0 };
            let points: Vec<Correspondence> = (0..12)
                .map(|_| {
                    let m = (200.0 * rng.uniform(), 150.0 * rng.uniform());
                    let r = truth.apply(m);
                    Correspondence { moving: m, reference: (r.0 + 0.3 * rng.normal(), r.1 + 0.3 * rng.normal()) }
                })
                .collect();
            let f = fit(&points, false, 0.0).unwrap();
            let want = scanned(&points, truth.angle);
            assert!(libm::fabs(f.motion.angle - want.angle) < 2e-6, "{f:?} vs {want:?}");
            assert!(close(f.motion.shift(), want.shift(), 2e-3));
            // The angle's standard error covers the truth.
            assert!(libm::fabs(f.motion.angle - truth.angle) < 5.0 * f.angle_error, "{f:?} vs {truth:?}");
            // With scale: exact points give the exact motion back.
            let scaled = Similarity { scale: 1.03, ..truth };
            let exact: Vec<Correspondence> = points.iter().map(|p| Correspondence { moving: p.moving, reference: scaled.apply(p.moving) }).collect();
            let g = fit(&exact, true, 0.0).unwrap();
            assert!(libm::fabs(g.motion.angle - scaled.angle) < 1e-12 && libm::fabs(g.motion.scale - 1.03) < 1e-12 && g.rms < 1e-9);
        }
        assert!(fit(&[], false, 0.0).is_none());
        let one = Correspondence { moving: (1.0, 1.0), reference: (2.0, 2.0) };
        assert!(fit(&[one], false, 0.0).is_none() && fit(&[one, one], false, 0.0).is_none());
    }

    /// [`consensus`] by its definition: every hypothesis's set counted and scored point by
    /// point.
    fn consensus_reference(points: &[Correspondence], weights: &[f64], tol: f64, bounds: &Bounds) -> Option<(Fit, Vec<usize>)> {
        let mut best: Option<(usize, f64, Hypothesis)> = None;
        for h in hypotheses(points, weights, bounds) {
            let (count, score) = points.iter().zip(weights).filter(|(p, _)| near(h, p, tol)).fold((0, 0.0), |(n, w), (_, &k)| (n + 1, w + k));
            if best.is_none_or(|b| count > b.0 || (count == b.0 && score > b.1)) {
                best = Some((count, score, h));
            }
        }
        refitted(points, best?.2, tol, bounds)
    }

    /// [`hypotheses`] by its definition, one pair at a time: the angle from `atan2`, the
    /// lengths from `hypot`.
    fn hypotheses_reference(points: &[Correspondence], weights: &[f64], bounds: &Bounds) -> Vec<(usize, usize, Similarity)> {
        let mut order: Vec<usize> = (0..points.len()).collect();
        order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]));
        order.truncate(MAX_HYPOTHESIS_POINTS);
        let mut out = Vec::new();
        for n in 0..order.len() {
            for m in n + 1..order.len() {
                let (a, b) = (&points[order[n]], &points[order[m]]);
                let (u, v) = ((b.moving.0 - a.moving.0, b.moving.1 - a.moving.1), (b.reference.0 - a.reference.0, b.reference.1 - a.reference.1));
                let (lu, lv) = (libm::hypot(u.0, u.1), libm::hypot(v.0, v.1));
                let angle = libm::atan2(v.1, v.0) - libm::atan2(u.1, u.0);
                let angle = libm::atan2(libm::sin(angle), libm::cos(angle));
                let scale = if bounds.max_scale_change > 0.0 { lv / lu } else { 1.0 };
                if lu < bounds.min_baseline || lv == 0.0 || libm::fabs(scale - 1.0) > bounds.max_scale_change + 1e-12 || libm::fabs(angle) > bounds.max_angle {
                    continue;
                }
                let mid = ((a.moving.0 + b.moving.0) / 2.0, (a.moving.1 + b.moving.1) / 2.0);
                let goal = ((a.reference.0 + b.reference.0) / 2.0, (a.reference.1 + b.reference.1) / 2.0);
                out.push((n, m, Similarity::about(mid, (goal.0 - mid.0, goal.1 - mid.1), angle, scale)));
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// The hypotheses, made a row of lanes at a time, against their definition: the same
        /// pairs in the same order, each the motion taking one point of the pair to the other
        /// and the midpoint to the midpoint (within 1e-9 px over the frame).
        #[test]
        fn hypotheses_match_their_definition(n in 0usize..50, seed in proptest::prelude::any::<u64>(), zoom in proptest::prelude::any::<bool>(), max_angle in 0.05f64..4.0) {
            let mut rng = SplitMix64::new(seed);
            let points: Vec<Correspondence> = (0..n)
                .map(|_| {
                    let m = (400.0 * rng.uniform(), 300.0 * rng.uniform());
                    Correspondence { moving: m, reference: (m.0 + 30.0 * rng.normal(), m.1 + 30.0 * rng.normal()) }
                })
                .collect();
            let weights: Vec<f64> = (0..n).map(|_| rng.uniform()).collect();
            let bounds = Bounds { max_angle, max_scale_change: if zoom { 0.1 } else { 0.0 }, min_baseline: 40.0 };
            let got: Vec<Hypothesis> = hypotheses(&points, &weights, &bounds).collect();
            let want = hypotheses_reference(&points, &weights, &bounds);
            proptest::prop_assert_eq!(got.len(), want.len());
            // Those left taken all at once, from any point of the iteration: the same, to the bit.
            let skip = (seed % (got.len() as u64 + 1)) as usize;
            let mut rest = hypotheses(&points, &weights, &bounds);
            rest.by_ref().take(skip).for_each(drop);
            let bits = |h: &Hypothesis| h.map(f64::to_bits);
            proptest::prop_assert!(rest.all().iter().map(bits).eq(got[skip..].iter().map(bits)), "after {}", skip);
            for (&[c, s, x, y], (n, m, w)) in got.iter().zip(&want) {
                for p in [(0.0, 0.0), (400.0, 0.0), (0.0, 300.0), (400.0, 300.0)] {
                    let (g, e) = ((x + c * p.0 - s * p.1, y + s * p.0 + c * p.1), w.apply(p));
                    proptest::prop_assert!(close(g, e, 1e-9), "pair ({}, {}) at {:?}: {:?} against {:?}", n, m, p, g, e);
                }
            }
        }

        /// Up to 90 points (two words of bits) of a turn and zoom with noise, outliers and
        /// equal weights (ties), against the definition.
        #[test]
        fn consensus_matches_the_reference(n in 0usize..90, seed in proptest::prelude::any::<u64>(), outliers in 0.0f64..0.5, zoom in proptest::prelude::any::<bool>()) {
            let mut rng = SplitMix64::new(seed);
            let truth = Similarity::about((100.0, 80.0), (4.0, -3.0), 0.05 * rng.normal(), if zoom { 1.0 + 0.01 * rng.normal() } else { 1.0 });
            let points: Vec<Correspondence> = (0..n)
                .map(|_| {
                    let m = (200.0 * rng.uniform(), 160.0 * rng.uniform());
                    let r = truth.apply(m);
                    let off = if rng.uniform() < outliers { (20.0 * rng.normal(), 20.0 * rng.normal()) } else { (0.3 * rng.normal(), 0.3 * rng.normal()) };
                    Correspondence { moving: m, reference: (r.0 + off.0, r.1 + off.1) }
                })
                .collect();
            let weights: Vec<f64> = (0..n).map(|_| if rng.uniform() < 0.3 { 0.75 } else { rng.uniform() }).collect();
            let bounds = Bounds { max_angle: 0.2, max_scale_change: if zoom { 0.05 } else { 0.0 }, min_baseline: 25.0 };
            let want = consensus_reference(&points, &weights, 1.0, &bounds);
            proptest::prop_assert_eq!(&consensus(&points, &weights, 1.0, &bounds), &want);
            // Sets counted elsewhere, by the documented arithmetic: the same answer; and
            // where they are not counted (none, or a count per hypothesis missing), the
            // host's.
            let counting = ConsensusCount::new(points.clone(), weights.clone(), 1.0, &bounds).unwrap();
            let counted = counted_elsewhere(&counting);
            proptest::prop_assert_eq!(counting.tests(), counting.hypotheses().len() * n);
            for counts in [Some(&counted[..]), None, counted.get(1..)] {
                proptest::prop_assert_eq!(&counting.finish(counts), &want, "{:?}", counts.map(|c| c.len()));
            }
            if n > 0 {
                proptest::prop_assert!(ConsensusCount::new(points.clone(), weights[1..].to_vec(), 1.0, &bounds).is_none());
            }
        }
    }

    /// The rule of [`vote::best_set`]: the largest set, ties to the larger score, the first
    /// of equals (a NaN score never wins a tie).
    #[test]
    fn the_best_of_counted_sets_is_the_first_largest_best_scored() {
        assert_eq!(best_counted(&[(3, 1.0), (5, 0.5), (5, 0.5), (5, 0.7), (5, 0.7), (2, 9.0), (5, f64::NAN)]), Some(3));
        assert_eq!(best_counted(&[(4, f64::NAN), (4, 1.0), (6, 0.0)]), Some(2));
        assert_eq!(best_counted(&[(0, 0.0)]), Some(0));
        assert_eq!(best_counted(&[]), None);
    }

    /// Each hypothesis's `(count, score)` by the documented arithmetic, point after point.
    fn counted_elsewhere(c: &ConsensusCount) -> Vec<(usize, f64)> {
        let counted = |&h: &Hypothesis| c.points().iter().zip(c.weights()).filter(|(p, _)| near(h, p, c.tol())).fold((0, 0.0), |(n, s), (_, &w)| (n + 1, s + w));
        c.hypotheses().iter().map(counted).collect()
    }

    #[test]
    fn consensus_ignores_outliers_and_respects_its_bounds() {
        let mut rng = SplitMix64::new(5);
        let truth = Similarity::about((100.0, 80.0), (4.0, -3.0), 0.035, 1.0);
        let mut points: Vec<Correspondence> = (0..30)
            .map(|k| {
                let m = (20.0 + 30.0 * (k % 6) as f64, 20.0 + 25.0 * (k / 6) as f64);
                let r = truth.apply(m);
                Correspondence { moving: m, reference: (r.0 + 0.1 * rng.normal(), r.1 + 0.1 * rng.normal()) }
            })
            .collect();
        for k in [3, 8, 17, 22, 29] {
            points[k].reference.0 += 15.0 + 10.0 * rng.uniform();
        }
        let weights = alloc::vec![1.0; points.len()];
        let bounds = Bounds { max_angle: 0.1, max_scale_change: 0.0, min_baseline: 25.0 };
        let (f, inliers) = consensus(&points, &weights, 1.0, &bounds).unwrap();
        assert_eq!(inliers.len(), 25);
        assert!(inliers.iter().all(|k| ![3, 8, 17, 22, 29].contains(k)));
        assert!(libm::fabs(f.motion.angle - 0.035) < 1e-3 && close(f.motion.apply((100.0, 80.0)), (104.0, 77.0), 0.1), "{f:?}");
        // A rotation beyond the bounds is not a hypothesis.
        let tight = Bounds { max_angle: 0.01, ..bounds };
        assert!(consensus(&points, &weights, 1.0, &tight).is_none_or(|(_, s)| s.len() < 10));
        assert!(consensus(&points[..1], &weights[..1], 1.0, &bounds).is_none());
    }
}

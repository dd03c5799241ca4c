//! Where the next frame is expected: a pose predicted at constant velocity or with the
//! centre's acceleration, the pair motion as a search's starting shift, and when the
//! keyframe is left behind.

use super::similarity::Similarity;

/// The keyframe changes when the predicted frame has turned more than this (radians) from
/// it: the overlap shrinks, and the frame turned back has more of its corners off the frame.
const KEYFRAME_TURN: f64 = 10.0 * core::f64::consts::PI / 180.0;

/// The centre of a frame of `size` (pixel coordinates).
pub(super) fn centre(size: (usize, usize)) -> (f64, f64) {
    ((size.0 as f64 - 1.0) / 2.0, (size.1 as f64 - 1.0) / 2.0)
}

/// How far the centre of a frame at pose `a` is from that of one at pose `b` (for
/// translations, the offset of their origins, to the bit).
pub(super) fn centre_offset(a: &Similarity, b: &Similarity, size: (usize, usize)) -> (f64, f64) {
    if a.is_translation() && b.is_translation() {
        return (a.x - b.x, a.y - b.y);
    }
    let c = centre(size);
    let (p, q) = (a.apply(c), b.apply(c));
    (p.0 - q.0, p.1 - q.1)
}

/// The shift a pair's search starts from for the predicted pair motion `motion`: where it
/// puts the frame's centre (its own shift for a translation).
pub(super) fn pair_prediction(motion: &Similarity, size: (usize, usize)) -> (f64, f64) {
    if motion.is_translation() {
        return motion.shift();
    }
    let c = centre(size);
    let m = motion.apply(c);
    (m.0 - c.0, m.1 - c.1)
}

/// Whether a frame predicted at `predicted` has left the keyframe at `key`: its centre moved
/// past `limit`, or it turned past [`KEYFRAME_TURN`].
pub(super) fn keyframe_left(predicted: &Similarity, key: &Similarity, limit: (f64, f64), size: (usize, usize)) -> bool {
    let d = centre_offset(predicted, key, size);
    libm::fabs(d.0) > limit.0 || libm::fabs(d.1) > limit.1 || libm::fabs(predicted.angle - key.angle) > KEYFRAME_TURN
}

/// How a window's frames are predicted from its last good frame ([`Velocity::predict_by`]):
/// at constant velocity, or with the centre's acceleration too. A path that curves at
/// several pixels a frame (a sweep's turn) is predicted pixels off at constant velocity
/// four frames ahead, within a pixel with its acceleration; a hand-held probe's jitter makes
/// the acceleration noise, which extrapolated four frames ahead is worse than none. So the
/// run plans each window by the extrapolation that would have predicted the last one's far
/// pairs better ([`super::window::Window::better_extrapolation`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Extrapolation {
    #[default]
    ConstantVelocity,
    Accelerating,
}

impl Extrapolation {
    /// The other extrapolation.
    pub(super) fn other(self) -> Self {
        match self {
            Extrapolation::ConstantVelocity => Extrapolation::Accelerating,
            Extrapolation::Accelerating => Extrapolation::ConstantVelocity,
        }
    }
}

/// The sequence's motion per frame at constant velocity: the move of a frame's centre, its
/// turn and its zoom; and the change of the centre's move per frame, where two velocities
/// in a row measured it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Velocity {
    shift: (f64, f64),
    spin: f64,
    /// The log of the scale ratio per frame (0 without a fitted scale). The scale was once
    /// kept from the last frame: a probe advancing at 1 % per frame was then predicted a
    /// zoom behind at every pair (and after a gap of skipped frames several), and the
    /// zooming sweeps' worst scale errors were 2.5e-3 instead of 1.7e-3.
    zoom: f64,
    /// The frames the shift was measured over (0: no velocity measured).
    gap: f64,
    /// The shift's change per frame, in pixels a frame a frame (0 where unknown).
    accel: (f64, f64),
}

impl Velocity {
    /// From pose `from` to pose `to`, `gap` frames later.
    pub(super) fn between(from: &Similarity, to: &Similarity, gap: f64, size: (usize, usize)) -> Self {
        let d = centre_offset(to, from, size);
        // Exactly 0 for equal scales (ln 1 = 0), so an unscaled run predicts as before.
        let zoom = if to.scale == from.scale { 0.0 } else { libm::log(to.scale / from.scale) / gap };
        Velocity { shift: (d.0 / gap, d.1 / gap), spin: (to.angle - from.angle) / gap, zoom, gap, accel: (0.0, 0.0) }
    }

    /// `next`, measured right after this one, with the shift's change between the two: each
    /// shift is the mean over its gap, so the two lie half their gaps apart.
    pub(super) fn then(&self, next: Velocity) -> Self {
        if !(self.gap > 0.0 && next.gap > 0.0) {
            return next;
        }
        let apart = (self.gap + next.gap) / 2.0;
        Velocity { accel: ((next.shift.0 - self.shift.0) / apart, (next.shift.1 - self.shift.1) / apart), ..next }
    }

    /// The same motion the other way (at constant velocity).
    pub(super) fn reversed(&self) -> Self {
        Velocity { shift: (-self.shift.0, -self.shift.1), spin: -self.spin, zoom: -self.zoom, gap: self.gap, accel: (0.0, 0.0) }
    }

    /// The pose `gap` frames after pose `from` at constant velocity, turning and zooming
    /// about the frame's centre.
    pub(super) fn predict(&self, from: &Similarity, gap: f64, size: (usize, usize)) -> Similarity {
        self.predict_by(from, gap, size, Extrapolation::ConstantVelocity)
    }

    /// The pose `gap` frames after pose `from`, by `extrapolation`: accelerating, the centre
    /// moves on by the acceleration over the frames ahead too, the shift being the mean
    /// velocity over the frames before `from` (`gap (gap + measured) / 2` frames squared).
    pub(super) fn predict_by(&self, from: &Similarity, gap: f64, size: (usize, usize), extrapolation: Extrapolation) -> Similarity {
        let mut shift = (self.shift.0 * gap, self.shift.1 * gap);
        if extrapolation == Extrapolation::Accelerating {
            let frames = gap * (gap + self.gap) / 2.0;
            shift = (shift.0 + self.accel.0 * frames, shift.1 + self.accel.1 * frames);
        }
        if self.spin == 0.0 && self.zoom == 0.0 && from.is_translation() {
            return Similarity::translation((from.x + shift.0, from.y + shift.1));
        }
        let c = centre(size);
        let at = from.apply(c);
        let scale = if self.zoom == 0.0 { from.scale } else { from.scale * libm::exp(self.zoom * gap) };
        let turned = Similarity { x: 0.0, y: 0.0, angle: from.angle + self.spin * gap, scale };
        let tc = turned.apply(c);
        Similarity { x: at.0 + shift.0 - tc.0, y: at.1 + shift.1 - tc.1, ..turned }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accelerating_path_is_predicted_on_its_curve_and_a_steady_one_as_before() {
        let size = (720, 576);
        let at = |t: f64| Similarity::translation((3.0 * t + 0.25 * t * t, -2.0 * t));
        // Measured over frames 8 -> 9 and 9 -> 10 (gaps of one), then 10 -> 12 after a skip.
        let v = Velocity::between(&at(8.0), &at(9.0), 1.0, size).then(Velocity::between(&at(9.0), &at(10.0), 1.0, size));
        for k in 1..=6 {
            let k = k as f64;
            let p = v.predict_by(&at(10.0), k, size, Extrapolation::Accelerating);
            assert!((p.x - at(10.0 + k).x).abs() < 1e-9 && (p.y - at(10.0 + k).y).abs() < 1e-9, "{k}: {p:?}");
            // At constant velocity, behind by the acceleration (half a pixel a frame squared)
            // times k (k + 1) / 2.
            let q = v.predict(&at(10.0), k, size);
            assert!((at(10.0 + k).x - q.x - 0.5 * k * (k + 1.0) / 2.0).abs() < 1e-9, "{k}: {q:?}");
        }
        let skipped = v.then(Velocity::between(&at(10.0), &at(12.0), 2.0, size));
        let p = skipped.predict_by(&at(12.0), 3.0, size, Extrapolation::Accelerating);
        assert!((p.x - at(15.0).x).abs() < 1e-9, "{p:?}");
        // One velocity alone, or a steady one, predicts as at constant velocity, to the bit.
        let steady = Velocity::between(&at(0.0), &at(1.0), 1.0, size);
        let from = at(1.0);
        assert_eq!(steady.predict_by(&from, 3.0, size, Extrapolation::Accelerating), steady.predict(&from, 3.0, size));
        let line = |t: f64| Similarity::translation((1.5 * t, 0.5 * t));
        let lv = Velocity::between(&line(0.0), &line(1.0), 1.0, size).then(Velocity::between(&line(1.0), &line(2.0), 1.0, size));
        assert_eq!(lv.predict_by(&line(2.0), 4.0, size, Extrapolation::Accelerating), lv.predict(&line(2.0), 4.0, size));
        // No velocity measured: no acceleration either.
        assert_eq!(Velocity::default().then(steady), steady);
        assert_eq!(Extrapolation::default().other().other(), Extrapolation::ConstantVelocity);
    }

    #[test]
    fn a_turning_path_accelerates_its_centre_about_the_turn() {
        let size = (720, 576);
        let c = centre(size);
        let at = |t: f64| Similarity::about(c, (2.0 * t + 0.1 * t * t, t), 0.01 * t, 1.0);
        let v = Velocity::between(&at(3.0), &at(4.0), 1.0, size).then(Velocity::between(&at(4.0), &at(5.0), 1.0, size));
        let p = v.predict_by(&at(5.0), 4.0, size, Extrapolation::Accelerating);
        let (got, want) = (p.apply(c), at(9.0).apply(c));
        assert!((got.0 - want.0).abs() < 1e-6 && (got.1 - want.1).abs() < 1e-6, "{got:?} {want:?}");
        assert!((p.angle - at(9.0).angle).abs() < 1e-12);
    }
}

//! Where the next frame is expected: constant-velocity prediction of a pose, the pair
//! motion as a search's starting shift, and when the keyframe is left behind.

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

/// The sequence's motion per frame at constant velocity: the move of a frame's centre, its
/// turn and its zoom.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Velocity {
    shift: (f64, f64),
    spin: f64,
    /// The log of the scale ratio per frame (0 without a fitted scale). The scale was once
    /// kept from the last frame: a probe advancing at 1 % per frame was then predicted a
    /// zoom behind at every pair (and after a gap of skipped frames several), and the
    /// zooming sweeps' worst scale errors were 2.5e-3 instead of 1.7e-3.
    zoom: f64,
}

impl Velocity {
    /// From pose `from` to pose `to`, `gap` frames later.
    pub(super) fn between(from: &Similarity, to: &Similarity, gap: f64, size: (usize, usize)) -> Self {
        let d = centre_offset(to, from, size);
        // Exactly 0 for equal scales (ln 1 = 0), so an unscaled run predicts as before.
        let zoom = if to.scale == from.scale { 0.0 } else { libm::log(to.scale / from.scale) / gap };
        Velocity { shift: (d.0 / gap, d.1 / gap), spin: (to.angle - from.angle) / gap, zoom }
    }

    /// The same motion the other way.
    pub(super) fn reversed(&self) -> Self {
        Velocity { shift: (-self.shift.0, -self.shift.1), spin: -self.spin, zoom: -self.zoom }
    }

    /// The pose `gap` frames after pose `from`, turning and zooming about the frame's centre.
    pub(super) fn predict(&self, from: &Similarity, gap: f64, size: (usize, usize)) -> Similarity {
        if self.spin == 0.0 && self.zoom == 0.0 && from.is_translation() {
            return Similarity::translation((from.x + self.shift.0 * gap, from.y + self.shift.1 * gap));
        }
        let c = centre(size);
        let at = from.apply(c);
        let scale = if self.zoom == 0.0 { from.scale } else { from.scale * libm::exp(self.zoom * gap) };
        let turned = Similarity { x: 0.0, y: 0.0, angle: from.angle + self.spin * gap, scale };
        let tc = turned.apply(c);
        Similarity { x: at.0 + self.shift.0 * gap - tc.0, y: at.1 + self.shift.1 * gap - tc.1, ..turned }
    }
}

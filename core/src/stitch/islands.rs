//! Islands: what a run registers after it lost its way and found nothing to return to.
//!
//! A frame that registers with neither the keyframe nor the last good frame, and that no
//! kept keyframe confirms (module `relocate`), may have reached ground the run has not seen
//! (a sweep that crossed a featureless stretch and went on). It is held as a seed, and
//! where the next frame registers against it (from a coarse search, its match confirmed on
//! texture, as every lost frame's must be) it starts a new island at its own origin; the
//! chain goes on from there. Each island's frames hang on its first frame, as the run's on
//! the reference.
//!
//! Islands join: each keyframe the store newly keeps while more than one set of islands
//! exists is searched among the keyframes of the other sets, as a lost frame is; a
//! confirmed pair moves its whole set into the other's coordinates, and the global solve
//! (module `loops`) holds the pair as a registration like any other. A lost frame found
//! again on another island's keyframe continues the chain there.
//!
//! At the end the panorama holds the set with the most registered frames (ties: the
//! earliest). The frames of every other set keep their pose, relative to their island's
//! first frame, as [`FrameRecord::island_position`] (and angle and scale), with
//! [`FrameRecord::position`] `None`: nothing registered is dropped, and nothing lands in the
//! panorama at a place it was never registered to.

use super::sequence::FrameRecord;
use super::similarity::Similarity;
use alloc::vec::Vec;

/// Keyframes of the other sets confirmed by full registration per keyframe searched for a
/// join, best ranked first. More than a lost frame's: a row joining the row beside it
/// overlaps it by 30 to 50 %, where the phase peak of the partner ranked up to 11th among
/// unrelated keyframes on the cameraman's glass-patch scan; a join is searched only while
/// islands stand apart, once per newly kept keyframe.
pub const JOIN_CANDIDATES: usize = 12;

/// The islands of a run, each named by its first frame, and the sets they joined into.
#[derive(Default)]
pub(super) struct Islands {
    /// Each island and the island whose set it joined (itself while it joined none).
    joined: Vec<(usize, usize)>,
}

impl Islands {
    /// An island begins at frame `first`.
    pub(super) fn start(&mut self, first: usize) {
        if !self.joined.iter().any(|j| j.0 == first) {
            self.joined.push((first, first));
        }
    }

    /// The set island `island` belongs to, named by the island whose coordinates it uses.
    pub(super) fn set_of(&self, island: usize) -> usize {
        let mut at = island;
        while let Some(&(_, into)) = self.joined.iter().find(|j| j.0 == at && j.1 != at) {
            at = into;
        }
        at
    }

    /// The set of frame record `rec` (`None` for a frame on no island: skipped).
    pub(super) fn set_of_record(&self, rec: &FrameRecord) -> Option<usize> {
        rec.island.map(|i| self.set_of(i))
    }

    /// Whether the run has more than one set of islands.
    pub(super) fn many(&self) -> bool {
        self.joined.iter().filter(|j| j.0 == j.1).count() > 1
    }

    /// Set `from` joins set `into` (both named by [`Islands::set_of`]).
    pub(super) fn join(&mut self, from: usize, into: usize) {
        if let Some(j) = self.joined.iter_mut().find(|j| j.0 == from) {
            j.1 = into;
        }
    }

    /// The set the panorama holds: the one with the most registered frames, the earliest
    /// of equals; `None` where no frame is on an island.
    pub(super) fn panorama_set(&self, records: &[FrameRecord]) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for &(island, _) in self.joined.iter() {
            let set = self.set_of(island);
            if island != set {
                continue;
            }
            let n = records.iter().filter(|r| r.position.is_some() && self.set_of_record(r) == Some(set)).count();
            if best.is_none_or(|b| n > b.1) {
                best = Some((set, n));
            }
        }
        best.map(|b| b.0)
    }

    /// Moves every frame of set `set` by `t` (into another set's coordinates).
    pub(super) fn move_set(&self, records: &mut [FrameRecord], set: usize, t: &Similarity) {
        for rec in records.iter_mut().filter(|r| self.set_of_record(r) == Some(set)) {
            if let Some(p) = rec.pose() {
                let q = t.then(&p);
                (rec.position, rec.angle, rec.scale) = (Some(q.shift()), q.angle, q.scale);
            }
        }
    }

    /// The records as a caller sees them: the frames off the panorama's set with their pose
    /// relative to their island's first frame, as [`FrameRecord::island_position`] (module
    /// doc). Returns the panorama's
    /// reference frame (the first frame of its set), `None` with a single set.
    pub(super) fn publish(&self, records: &mut [FrameRecord]) -> Option<usize> {
        if !self.many() {
            return None;
        }
        let set = self.panorama_set(records)?;
        let firsts: Vec<(usize, Option<Similarity>)> = self.joined.iter().map(|j| (j.0, records.get(j.0).and_then(FrameRecord::pose))).collect();
        for rec in records.iter_mut() {
            let Some(island) = rec.island.filter(|&i| self.set_of(i) != set) else { continue };
            let first = firsts.iter().find(|f| f.0 == island).and_then(|f| f.1);
            if let (Some(first), Some(pose)) = (first, rec.pose()) {
                let q = first.inverse().then(&pose);
                (rec.island_position, rec.angle, rec.scale) = (Some(q.shift()), q.angle, q.scale);
            }
            (rec.position, rec.residual) = (None, None);
        }
        Some(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered(index: usize, island: usize, at: (f64, f64)) -> FrameRecord {
        FrameRecord { island: Some(island), ..FrameRecord::placed(index, at) }
    }

    #[test]
    fn sets_follow_their_joins() {
        let mut islands = Islands::default();
        for first in [0, 10, 20] {
            islands.start(first);
        }
        assert!(islands.many());
        islands.join(20, 10);
        assert_eq!((islands.set_of(20), islands.set_of(10), islands.set_of(0)), (10, 10, 0));
        islands.join(10, 0);
        assert_eq!(islands.set_of(20), 0);
        assert!(!islands.many());
    }

    #[test]
    fn the_panorama_holds_the_largest_set_and_the_rest_keep_their_island_positions() {
        let mut islands = Islands::default();
        islands.start(0);
        islands.start(3);
        let mut records: Vec<FrameRecord> = [(0, 0), (1, 0), (2, 0), (3, 3), (4, 3), (5, 3), (6, 3)].iter().map(|&(i, isl)| registered(i, isl, (i as f64, 0.0))).collect();
        records.push(FrameRecord { position: None, island: None, ..FrameRecord::placed(7, (0.0, 0.0)) });
        // Island 0's poses relative to its first frame at (-5, 2).
        for r in &mut records[..3] {
            r.position = r.position.map(|p| (p.0 - 5.0, p.1 + 2.0));
        }
        let mut published = records.clone();
        assert_eq!(islands.publish(&mut published), Some(3));
        for (a, b) in records.iter().zip(&published) {
            match a.island {
                Some(0) => assert_eq!((b.position, b.island_position), (None, Some((a.index as f64, 0.0)))),
                _ => assert_eq!((b.position, b.island_position), (a.position, None)),
            }
        }
        // Joined, one set: nothing moves out.
        islands.join(3, 0);
        let mut one = records.clone();
        assert_eq!(islands.publish(&mut one), None);
        assert_eq!(one, records);
    }

    #[test]
    fn a_moved_set_composes_its_poses() {
        let mut islands = Islands::default();
        islands.start(0);
        islands.start(2);
        let mut records = alloc::vec![registered(0, 0, (0.0, 0.0)), registered(2, 2, (0.0, 0.0)), registered(3, 2, (5.0, 1.0))];
        records[2].angle = 0.1;
        let t = Similarity { x: 100.0, y: -20.0, angle: 0.2, scale: 1.0 };
        islands.move_set(&mut records, 2, &t);
        assert_eq!(records[0].position, Some((0.0, 0.0)));
        assert_eq!(records[1].position, Some((100.0, -20.0)));
        let moved = t.then(&Similarity { x: 5.0, y: 1.0, angle: 0.1, scale: 1.0 });
        assert_eq!((records[2].position, records[2].angle), (Some(moved.shift()), moved.angle));
    }
}

//! Re-localization: finding the way back after a lost stretch.
//!
//! A frame that registers with neither the last good frame nor the keyframe (the sweep
//! crossed a featureless stretch, or turned back onto ground it covered rows ago) is
//! searched against the run's earlier keyframes. They are ranked by the significance of
//! their phase-correlation peak against the frame (`stitch::coarse`, whole frames reduced
//! to a 128 x 128 grid: a fraction of a millisecond per keyframe once its spectrum is
//! kept), and the best [`RELOCATE_CANDIDATES`] are confirmed by the full registration from
//! that peak, whose match must also stand on the overlap's texture (`stitch::textured`, as
//! a weak consensus must: a lost frame tried against many keyframes has more chances of a
//! chance match); the first confirmed continues the chain.
//!
//! The store keeps a keyframe only where no kept keyframe lies within a quarter frame of it
//! (the sweep's coverage, not its length), and their spectra within [`RELOCATE_BUDGET`]
//! bytes, the oldest out first. Frames with fewer textured blocks than a confirmation
//! needs are not searched: nothing could confirm them.

use super::coarse::{candidates, Spectrum, SIDE};
use super::register::{PairRegistration, SkipReason};
use super::prediction::centre_offset;
use super::sequence::Run;
use super::source::{FrameSource, GrayType, Held};
use super::similarity::Similarity;
use super::textured::{noise_variance, textured_blocks, Noise, MIN_TEXTURED_BLOCKS};
use crate::error::Result;
use crate::ncc::Integral;
use crate::parallel::map_indices;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Keyframes confirmed by full registration per lost frame, best ranked first.
pub const RELOCATE_CANDIDATES: usize = 3;
/// Least significance of a keyframe's phase peak for it to be confirmed: unrelated frames
/// of the robustness footage peaked at up to 7.5 (`coarse::SIGNIFICANT_PEAK` is 10); a
/// lower bar only ranks, the full registration decides.
pub const RELOCATE_MIN_SIGNIFICANCE: f64 = 5.0;
/// Bytes of keyframe spectra the store keeps (each is `SIDE x SIDE` complex f32: 128 KiB).
pub const RELOCATE_BUDGET: usize = 32 << 20;

/// The keyframes a run may find its way back to: index, chained pose, the set of islands
/// whose coordinates that pose is in (module `islands`), and the spectrum once computed.
#[derive(Default)]
pub(super) struct Keyframes {
    kept: VecDeque<(usize, Similarity, usize, Option<Spectrum>)>,
}

impl Keyframes {
    /// Keeps keyframe `index` at pose `pos` of set `set` unless a kept one of that set lies
    /// within a quarter frame of it; the oldest goes where the budget is spent. Returns
    /// whether it was kept.
    pub(super) fn keep(&mut self, index: usize, pos: Similarity, set: usize, size: (usize, usize)) -> bool {
        let near = |q: &Similarity| {
            let d = centre_offset(q, &pos, size);
            libm::fabs(d.0) < size.0 as f64 / 4.0 && libm::fabs(d.1) < size.1 as f64 / 4.0
        };
        if self.kept.iter().any(|k| k.0 == index || (k.2 == set && near(&k.1))) {
            return false;
        }
        if self.kept.len() >= RELOCATE_BUDGET / (SIDE * SIDE * 8) {
            self.kept.pop_front();
        }
        self.kept.push_back((index, pos, set, None));
        true
    }

    /// Set `from` joined set `into`, its poses moved by `t`.
    pub(super) fn join(&mut self, from: usize, into: usize, t: &Similarity) {
        for k in self.kept.iter_mut().filter(|k| k.2 == from) {
            (k.1, k.2) = (t.then(&k.1), into);
        }
    }

    /// How many keyframes are kept.
    pub(super) fn len(&self) -> usize {
        self.kept.len()
    }
}

/// Whether a frame skipped for `why` is worth searching for among the keyframes.
pub(super) fn relocatable(why: Option<&SkipReason>) -> bool {
    !matches!(why, Some(SkipReason::NoTexture | SkipReason::Unreadable(_) | SkipReason::Mismatch(_) | SkipReason::NonFinite { .. }))
}

/// A frame found again: the keyframe it registered against (held, at its chained pose), its
/// set of islands, and the registration.
pub(super) struct Found<'a> {
    pub(super) keyframe: Held<'a>,
    pub(super) set: usize,
    pub(super) registration: PairRegistration,
}

impl<'a> Run<'a> {
    /// Searches frame `current` among the kept keyframes but those `passed` (by index and
    /// set), confirming the best `confirmed` (module doc). Returns what it found, if anything, and the NCC evaluations it spent.
    pub(super) fn relocate<T: GrayType>(&self, frames: &'a dyn FrameSource, current: &Held<'a>, store: &mut Keyframes, passed: &dyn Fn(usize, usize) -> bool, confirmed: usize, buffer: &mut Integral<T>, turn_buffer: &mut Integral<T>) -> Result<(Option<Found<'a>>, u64)> {
        // Too little texture for any overlap to confirm a match (a frame over an empty
        // patch, or outside a fundus's rim, where only noise passes `min_variance`).
        let view = current.view::<T>()?;
        let noise = noise_variance(view, self.p.register.rsz).unwrap_or(0.0);
        if textured_blocks(view, self.p.register.rsz, Noise::white(noise), self.p.register.min_variance, self.par) < MIN_TEXTURED_BLOCKS {
            return Ok((None, 0));
        }
        let here = Spectrum::new(view);
        for (k, _, set, spectrum) in store.kept.iter_mut() {
            if spectrum.is_none() && !passed(*k, *set) {
                // A keyframe that cannot be read again (a file removed during the run) is
                // not searched.
                let Ok(held) = self.load(frames, *k) else { continue };
                *spectrum = Some(Spectrum::new(held.view::<T>()?));
            }
        }
        // Each keyframe's peak against the frame, over the run's threads (a lost stretch
        // searches every kept keyframe for every frame), then ranked in one order whatever
        // the threads: by significance, then by index.
        let searched: Vec<(usize, Similarity, usize, &Spectrum)> =
            store.kept.iter().filter(|(k, _, set, _)| !passed(*k, *set)).filter_map(|(k, pos, set, spectrum)| Some((*k, *pos, *set, spectrum.as_ref()?))).collect();
        let peaks = map_indices(searched.len(), self.par, |i| candidates(searched[i].3, &here, 1).and_then(|c| c.into_iter().next()));
        let mut ranked: Vec<(f64, usize, Similarity, usize, (f64, f64))> = searched
            .iter()
            .zip(peaks)
            .filter_map(|(&(k, pos, set, _), peak)| peak.filter(|p| p.significance >= RELOCATE_MIN_SIGNIFICANCE).map(|p| (p.significance, k, pos, set, p.shift)))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut evaluations = 0;
        for &(_, k, k_pos, set, shift) in ranked.iter().take(confirmed) {
            let Ok(mut keyframe) = self.load(frames, k) else { continue };
            keyframe.pos = k_pos;
            let (registration, spent) = self.confirming_every_match().settle_against::<T>(&keyframe, current, Similarity::translation(shift), buffer, turn_buffer)?;
            evaluations += spent;
            if registration.shift.is_some() {
                return Ok((Some(Found { keyframe, set, registration }), evaluations));
            }
        }
        Ok((None, evaluations))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_keeps_the_sweeps_coverage_within_its_budget() {
        let size = (200, 160);
        let mut store = Keyframes::default();
        // Frames 10 px apart: one kept per quarter frame (50 px) of the path.
        for i in 0..50 {
            store.keep(i, Similarity::translation((10.0 * i as f64, 0.0)), 0, size);
        }
        let kept: Vec<usize> = store.kept.iter().map(|k| k.0).collect();
        assert_eq!(kept, [0, 5, 10, 15, 20, 25, 30, 35, 40, 45]);
        // Kept once only, however often a frame is a reference.
        assert!(!store.keep(45, Similarity::translation((450.0, 0.0)), 0, size));
        assert_eq!(store.len(), 10);
        // Another set's pose is in other coordinates: near is only within a set.
        assert!(store.keep(46, Similarity::translation((450.0, 0.0)), 46, size));
        store.join(46, 0, &Similarity::translation((50.0, 0.0)));
        assert_eq!(store.kept.back().map(|k| (k.1, k.2)), Some((Similarity::translation((500.0, 0.0)), 0)));
        assert_eq!(store.len(), 11);
        // The budget holds: the oldest go first.
        let most = RELOCATE_BUDGET / (SIDE * SIDE * 8);
        for i in 0..2 * most {
            store.keep(1000 + i, Similarity::translation((0.0, 1000.0 + 100.0 * i as f64)), 0, size);
        }
        assert_eq!(store.len(), most);
        assert_eq!(store.kept.back().map(|k| k.0), Some(1000 + 2 * most - 1));
    }

    #[test]
    fn only_frames_with_texture_are_searched() {
        assert!(!relocatable(Some(&SkipReason::NoTexture)));
        assert!(!relocatable(Some(&SkipReason::NonFinite { pixels: 3 })));
        assert!(relocatable(Some(&SkipReason::NoOverlap)));
        assert!(relocatable(Some(&SkipReason::TooFewVectors { above_threshold: 2, agreeing: 1, needed: 3 })));
    }
}

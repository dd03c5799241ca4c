//! The quality measures of a registered pair (the NCC of its overlap and of the overlap's
//! grid), on the host or from the sums a registrar adds for a batch of pairs.

use super::quality::{grid_ncc, Measures, QualityPlan};
use super::registrar::QualityRequest;
use super::sequence::Run;
use super::settle::Aligned;
use super::similarity::Similarity;
use super::source::{GrayType, Held};
use crate::error::{Error, Result};
use crate::parallel::map_indices;
use alloc::vec::Vec;

impl<'a> Run<'a> {
    /// With `quality` on, the NCC of the overlap of `moving`, registered against `reference`
    /// by pair motion `motion`, and of its grid; `None`s with it off. A registrar may measure
    /// them ([`PairRegistrar::quality_measures`]).
    pub(super) fn quality<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, motion: &Similarity) -> Result<Measures> {
        if !self.p.quality {
            return Ok((None, None));
        }
        if !motion.is_translation() {
            return self.host_quality::<T>(reference, moving, motion);
        }
        let pair = [(reference, moving, *motion)];
        let measured = match self.registrar_quality::<T>(&pair)? {
            Some(q) => q,
            None => self.host_quality_of_pairs::<T>(&pair)?,
        };
        measured.first().copied().ok_or_else(|| Error::Backend("internal: a pair's quality measures went missing".into()))
    }

    /// The quality measures of `pairs` (reference, moving, pair motion: translations) from
    /// the registrar in one call, or `None` where it measures none (no registrar, f32
    /// frames).
    pub(super) fn registrar_quality<T: GrayType>(&self, pairs: &[(&Held<'_>, &Held<'_>, Similarity)]) -> Result<Option<Vec<Measures>>> {
        let Some(g) = self.registrar else { return Ok(None) };
        let mut requests = Vec::with_capacity(pairs.len());
        for &(reference, moving, motion) in pairs {
            let (a, b) = (reference.view::<T>()?, moving.view::<T>()?);
            let plan = QualityPlan::new(a.size(), motion.shift(), self.p.register.rsz)?;
            requests.push(QualityRequest { reference: (reference.index, T::gray(a)), moving: (moving.index, T::gray(b)), plan });
        }
        let Some(measures) = g.quality_measures(&requests) else { return Ok(None) };
        let measures = measures?;
        if measures.len() != requests.len() {
            return Err(Error::Backend(alloc::format!("quality measures of {} pairs for {}", measures.len(), requests.len())));
        }
        Ok(Some(measures))
    }

    /// The quality measures of `pairs` (reference, moving, pair motion: translations) on the
    /// host over the run's threads: integer frames all at once, their regions cut into jobs
    /// ([`QualitySample::measures_of_pairs`](super::quality::QualitySample::measures_of_pairs)), floats pair by pair.
    pub(super) fn host_quality_of_pairs<T: GrayType>(&self, pairs: &[(&Held<'_>, &Held<'_>, Similarity)]) -> Result<Vec<Measures>> {
        let mut views = Vec::with_capacity(pairs.len());
        for &(reference, moving, motion) in pairs {
            views.push((reference.view::<T>()?, moving.view::<T>()?, motion.shift()));
        }
        match T::measures_of_pairs(&views, self.p.register.rsz, self.par) {
            Some(measures) => measures,
            None => map_indices(pairs.len(), self.par, |i| self.host_quality::<T>(pairs[i].0, pairs[i].1, &pairs[i].2)).into_iter().collect(),
        }
    }

    /// The quality measures of one pair on the host.
    pub(super) fn host_quality<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, motion: &Similarity) -> Result<Measures> {
        let aligned = Aligned::new(moving.view::<T>()?, motion, self.par)?;
        let a = reference.view::<T>()?;
        Ok((aligned.overlap_ncc(a, self.par)?, grid_ncc(a, aligned.view(), aligned.shift, self.p.register.rsz)?))
    }

    /// The NCC of the whole overlap of `moving` and `reference` at pair motion `motion`, on
    /// the host whether or not the run measures quality.
    pub(super) fn overlap_correlation<T: GrayType>(&self, reference: &Held<'_>, moving: &Held<'_>, motion: &Similarity) -> Result<Option<f64>> {
        Aligned::new(moving.view::<T>()?, motion, self.par)?.overlap_ncc(reference.view::<T>()?, self.par)
    }
}

//! Drives `kernels/ncc.cu`: pair registration with every template search of one or several
//! pairs in one launch (a warp per template), and their null probes in another (each
//! template's reduced to its [`NullPeak`] on the device), through
//! the core's seam [`pair_sites`] /
//! [`PairPlan::conclude`](tessera_core::stitch::PairPlan::conclude): the grid, the texture
//! test, the threshold and the consensus are the core's, the templates' sums (integer
//! frames), the searches and the subpixel refinement (`refine.rs`) the device's, each one
//! launch for all pairs; the kernels read the templates' pixels from the reference on the
//! device.
//! Integer frames (u8, u16, RGBA on its u8 luma) give the CPU's registration exactly
//! (every coefficient, peak, evaluation count and shift); f32 frames within about 1e-6 of
//! the CPU's coefficients.
//!
//! A stitching run registers its windows of pairs through [`register_jobs`]
//! (`registrar.rs`).

use crate::consensus::{count_sets, DEVICE_TESTS};
use crate::device::{args, as_bytes, int, Arg, DevicePtr, FrameTable, Gpu, KernelCall, Pod};
use crate::host_count;
use crate::kernels::{Kernel, Module};
use crate::refine::refine_shifts;
use crate::registrar::HostSteps;
use core::ops::Range;
use tessera_core::image::Pixel;
use tessera_core::ncc::{Integral, Match, NccSample, SearchParams, TemplateStats};
use tessera_core::parallel::{map_claimed, map_slots};
use tessera_core::stitch::{
    gray, luma_storage, pair_sites, plan_pair, spaced_null_sites, Concluded, ConsensusCount, Counting, Gray, NullPeak, PairPlan, PairRegistration, PairSites, RegisterParams, SearchMethod, ShiftRefinement, TemplateSearch, Unrefined, NULL_SAMPLES,
};
use tessera_core::{AnyView, Error, ImageView, Parallelism, Result};

/// Warps per block of the search launch.
const WARPS: u32 = 4;
/// Most shared memory a search block's cache bitmaps take (within the 48 KiB a launch may
/// ask for without opting in): search radii up to 155.
const SHARED_BITMAP_BYTES: usize = 48 * 1024;
/// Words per search of the kernel's site and stat records and of its results
/// (`NCC_SITE_WORDS`, `NCC_STAT_WORDS`, `NCC_RESULT_WORDS` of ncc.cu).
const SITE_WORDS: usize = 6;
const STAT_WORDS: usize = 4;
const RESULT_WORDS: usize = 6;
/// Ints of a template's null probes' record (`NCC_NULL_INTS` of ncc.cu): its own search,
/// its probe count, and the searches at whose starts it is probed (`NCC_NULL_SAMPLES`
/// places, the core's [`NULL_SAMPLES`]), counted from its pair's first search, which the
/// launch lists beside the records (`bases`): a pair's records are the same wherever it
/// lies in a launch, so that the records of spaced templates are uploaded from one table.
const NULL_INTS: usize = 2 + NULL_SAMPLES;
/// Ints of a template's record for its sums (`NCC_TEMPLATE_INTS` of ncc.cu).
const TEMPLATE_INTS: usize = 3;

/// The kernel and its per-frame constants for one sample type.
pub(crate) trait DeviceSample: NccSample + Pod + Pixel + Into<f64> {
    const KERNEL: &'static str;
    /// The null probes' kernel (each template's reduced to its null peak).
    const NULLS: &'static str;
    /// The refinement's kernel.
    const REFINE: &'static str;
    /// The quality sums' kernel (integer frames; f32 frames are measured on the host).
    const QUALITY: Option<&'static str> = None;
    /// The template sums' kernel (integer frames; f32 templates are measured on the host).
    const SUMS: Option<&'static str> = None;
    /// The frame's offset and flatness tolerance (f32 only: the core's integral image's).
    fn f32_terms(_moving: ImageView<'_, Self>) -> Result<(f64, f64)> {
        Ok((0.0, 0.0))
    }
    /// The template statistic the coefficient divides by: `n^2 var` (integers) or the
    /// zero-mean norm (f32).
    fn norm(t: &TemplateStats) -> f64 {
        t.n2_var
    }
}

impl DeviceSample for u8 {
    const KERNEL: &'static str = "ncc_search_u8";
    const NULLS: &'static str = "ncc_null_peaks_u8";
    const REFINE: &'static str = "refine_shift_u8";
    const QUALITY: Option<&'static str> = Some("quality_sums_u8");
    const SUMS: Option<&'static str> = Some("template_sums_u8");
}
impl DeviceSample for u16 {
    const KERNEL: &'static str = "ncc_search_u16";
    const NULLS: &'static str = "ncc_null_peaks_u16";
    const REFINE: &'static str = "refine_shift_u16";
    const QUALITY: Option<&'static str> = Some("quality_sums_u16");
    const SUMS: Option<&'static str> = Some("template_sums_u16");
}
impl DeviceSample for f32 {
    const KERNEL: &'static str = "ncc_search_f32";
    const NULLS: &'static str = "ncc_null_peaks_f32";
    const REFINE: &'static str = "refine_shift_f32";
    fn f32_terms(moving: ImageView<'_, f32>) -> Result<(f64, f64)> {
        let integral = Integral::new(moving)?;
        Ok((integral.offset(), 64.0 * f64::EPSILON * integral.squares_scale()))
    }
    fn norm(t: &TemplateStats) -> f64 {
        t.dev
    }
}

/// A frame on the device as the searches see it: its address and, as a moving frame, its
/// f32 terms.
#[derive(Clone, Copy)]
pub(crate) struct OnDevice {
    pub(crate) ptr: DevicePtr,
    pub(crate) terms: (f64, f64),
}

/// One pair of a launch: the reference's view (the host takes its templates' statistics),
/// both frames on the device, the prediction.
pub(crate) struct Job<'v, T> {
    pub(crate) reference: ImageView<'v, T>,
    pub(crate) moving: ImageView<'v, T>,
    pub(crate) devices: (OnDevice, OnDevice),
    pub(crate) prediction: (f64, f64),
}

/// Registers `moving` against `reference` ([`tessera_core::stitch::register_pair_any`]).
pub(crate) fn register_pair(gpu: &Gpu, reference: AnyView<'_>, moving: AnyView<'_>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairRegistration> {
    if reference.type_name() != moving.type_name() {
        return Err(Error::UnsupportedType { op: "register pair", types: "frames of two different pixel types" });
    }
    let (ls, lm) = (luma_storage(&reference), luma_storage(&moving));
    match (gray(&reference, &ls)?, gray(&moving, &lm)?) {
        (Gray::U8(a), Gray::U8(b)) => register_gray(gpu, a, b, p, prediction),
        (Gray::U16(a), Gray::U16(b)) => register_gray(gpu, a, b, p, prediction),
        (Gray::F32(a), Gray::F32(b)) => register_gray(gpu, a, b, p, prediction),
        _ => Err(Error::UnsupportedType { op: "register pair", types: "frames of two different pixel types" }),
    }
}

fn register_gray<T: DeviceSample>(gpu: &Gpu, reference: ImageView<'_, T>, moving: ImageView<'_, T>, p: &RegisterParams, prediction: (f64, f64)) -> Result<PairRegistration> {
    // Non-finite f32 pixels are an error, as the CPU's search frame says (checked first,
    // as the CPU prepares the moving frame before validating).
    let terms = T::f32_terms(moving)?;
    p.validate()?;
    tessera_core::image::check_same_size(reference.size(), moving.size())?;
    let grids = grids::<T>(1, |_| (reference, moving, prediction), p, Parallelism::Sequential);
    let (dref, dmov) = (gpu.upload_view(reference)?, gpu.upload_view(moving)?);
    let devices = (OnDevice { ptr: dref.buf.ptr(), terms: (0.0, 0.0) }, OnDevice { ptr: dmov.buf.ptr(), terms });
    let job = Job { reference, moving, devices, prediction };
    let (mut found, _) = register_jobs(gpu, &[job], grids, p, Parallelism::Sequential, &mut NullTables::default())?;
    found.pop().unwrap_or_else(|| Err(Error::Backend("internal: a launch answered no pair".into())))
}

/// Each of `n` pairs' grid ([`pair_sites`]; pair `k`'s frames and prediction `pair(k)`) for
/// the device's template sums, on the threads of `par`: made before the pairs' frames go up,
/// so that it runs on with the host work before it instead of after a device call. Empty
/// for f32 frames, whose pairs are planned on the host whole ([`plan_pair`]).
pub(crate) fn grids<'v, T: DeviceSample>(n: usize, pair: impl Fn(usize) -> (ImageView<'v, T>, ImageView<'v, T>, (f64, f64)) + Sync, p: &RegisterParams, par: Parallelism) -> Vec<Result<PairSites>> {
    if T::SUMS.is_none() {
        return Vec::new();
    }
    map_claimed(n, par, |k| {
        let (reference, moving, prediction) = pair(k);
        host_count::pair_work(|| pair_sites(reference, moving, p, prediction))
    })
}

/// Registers every pair of `jobs` (frames of one size, the parameters `p`; their [`grids`]): their searches
/// in one launch and their null probes in another ([`search_jobs`]), each concluded by the
/// core on the host (consensus and acceptance, [`PairPlan::conclude`]; the sets of every
/// pair's large similarity consensus counted on the device in one launch, [`count_sets`]),
/// and the shifts that ask for it refined in one more launch ([`refine_shifts`]). Returns
/// each pair's registration (or its own error) and what was launched. Each pair's host
/// work (its plan, its conclusion) runs on the threads of `par`, a pair to a thread
/// (`registrar.rs`'s `HostWork`). `tables`: the spaced null records made so far, kept for
/// the run's next launches.
pub(crate) fn register_jobs<T: DeviceSample>(gpu: &Gpu, jobs: &[Job<'_, T>], grids: Vec<Result<PairSites>>, p: &RegisterParams, par: Parallelism, tables: &mut NullTables) -> Result<(Vec<Result<PairRegistration>>, Launched)> {
    let Some(first) = jobs.first() else { return Ok((Vec::new(), Launched::default())) };
    let mut watch = gpu.host_watch();
    let (searched, (found, peaks), searches) = search_jobs(gpu, jobs, grids, p, par, tables)?;
    let mut launched = Launched { searches, consensus_pairs: 0, steps: HostSteps { plans: watch.lap(), ..HostSteps::default() } };
    let mut searched: Vec<Option<Searched>> = searched.into_iter().map(Some).collect();
    // Each pair concluded, those whose similarity consensus has sets worth the device's
    // count stopping there; their sets then counted in one launch, and those pairs resumed.
    let concluded: Vec<Result<Concluded>> = map_slots(&mut searched, par, |k, searched| {
        host_count::pair_work(|| match searched.take() {
            Some(Searched::Matches { plan, found: f, nulls: q }) => {
                let nulls = peaks.get(q).ok_or_else(|| Error::Backend("internal: null peaks missing".into()))?;
                plan.conclude(jobs[k].reference, jobs[k].moving, p, found.matches(f)?, nulls, Some(DEVICE_TESTS))
            }
            Some(Searched::Failed(e)) => Err(e),
            None => Err(Error::Backend("internal: a pair concluded twice".into())),
        })
    });
    let mut waiting: Vec<(usize, Box<Counting>)> = Vec::new();
    let mut concluded: Vec<Result<Unrefined>> = concluded
        .into_iter()
        .enumerate()
        .map(|(k, c)| match c? {
            Concluded::Unrefined(u) => Ok(u),
            Concluded::Counting(c) => {
                waiting.push((k, c));
                Err(Error::Backend("internal: a consensus left uncounted".into()))
            }
        })
        .collect();
    launched.steps.conclusions = watch.lap();
    if !waiting.is_empty() {
        let consensuses: Vec<&ConsensusCount> = waiting.iter().map(|(_, c)| c.sets()).collect();
        // A failed count leaves the sets to the host.
        let counts = count_sets(gpu, &consensuses).ok();
        launched.consensus_pairs = counts.as_ref().map_or(0, |_| consensuses.len());
        let mut waiting: Vec<Option<(usize, Box<Counting>)>> = waiting.into_iter().map(Some).collect();
        let resumed = map_slots(&mut waiting, par, |i, waiting| {
            let (k, c) = waiting.take()?;
            Some((k, host_count::pair_work(|| c.resume(jobs[k].reference, jobs[k].moving, p, counts.as_ref().map(|c| c[i].as_slice())))))
        });
        for (k, u) in resumed.into_iter().flatten() {
            concluded[k] = Ok(u);
        }
        launched.steps.consensus_counts = watch.lap();
    }
    let asks: Vec<(usize, ((DevicePtr, DevicePtr), &ShiftRefinement))> = concluded
        .iter()
        .enumerate()
        .filter_map(|(k, c)| Some((k, ((jobs[k].devices.0.ptr, jobs[k].devices.1.ptr), c.as_ref().ok()?.refinement.as_ref()?))))
        .collect();
    let pairs: Vec<_> = asks.iter().map(|&(_, ask)| ask).collect();
    let refined = refine_shifts(gpu, T::REFINE, first.moving.size(), &pairs)?;
    let mut shifts = vec![None; jobs.len()];
    for (&(k, _), shift) in asks.iter().zip(refined) {
        shifts[k] = Some(shift);
    }
    let registered = concluded.into_iter().zip(shifts).map(|(c, shift)| c.map(|u| if let Some(s) = shift { u.refined(s) } else { u.registration })).collect();
    launched.steps.refinements = watch.lap();
    Ok((registered, launched))
}

/// What one [`register_jobs`] launched: whether its searches ran (pairs without a search
/// need none), how many pairs' consensus sets one launch counted (none: no launch), and
/// its host time by step (plans, conclusions, consensus counts, refinements).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Launched {
    pub searches: bool,
    pub consensus_pairs: usize,
    pub steps: HostSteps,
}

/// A pair's device searches, not yet turned into its registration: the core's plan of the
/// pair with where the matches of its searches and the null peaks of its templates lie
/// among the launches' ([`search_jobs`]), or the error that stopped the plan.
enum Searched {
    Matches { plan: PairPlan<TemplateStats>, found: Range<usize>, nulls: Range<usize> },
    Failed(Error),
}

/// A launch's answers: each search's match, each null record's peak.
type Answers = (Found, Vec<NullPeak>);

/// A launch's search results as downloaded, [`RESULT_WORDS`] a search, each pair's read
/// where they lie ([`matches`](Self::matches)).
#[derive(Default)]
struct Found(Vec<f64>);

impl Found {
    /// The matches of the launch's `searches`, in order, as the core's search returns them.
    fn matches(&self, searches: Range<usize>) -> Result<impl ExactSizeIterator<Item = Option<Match>> + '_> {
        let words = self.0.get(RESULT_WORDS * searches.start..RESULT_WORDS * searches.end).ok_or_else(|| Error::Backend("internal: search results missing".into()))?;
        Ok(words.chunks_exact(RESULT_WORDS).map(|r| {
            // Positions and counts are exact in f64; the subpixel offset is the core's
            // `quadratic_peak`, fitted on the device.
            (r[2] != f64::NEG_INFINITY).then(|| Match { x: r[0] as usize, y: r[1] as usize, coefficient: r[2], offset: (r[4], r[5]), evaluations: r[3] as u32 })
        }))
    }
}

/// A pair's searches and their null probes, its part of a launch ([`Launch`]): the
/// searches' parameters, per search its site record and template statistics, per template
/// with null probes the searches it reads (one record a template: its peak is reduced on
/// the device).
#[derive(Default)]
struct Call {
    sp: Option<SearchParams>,
    sites: Vec<i32>,
    stats: Vec<f64>,
    nulls: Vec<[i32; NULL_INTS]>,
    /// `Some(n)`: the null records are [`spaced_null_sites`]`(n)`'s over the call's `n`
    /// searches, every one of which can start a window, made once for the run's pairs of
    /// `n` templates ([`NullTables`]); `nulls` is then empty.
    spaced: Option<usize>,
}

impl Call {
    /// An empty call with room for `searches` searches and `nulls` templates' null probes
    /// (those added then append without growing).
    fn with_room_for(searches: usize, nulls: usize) -> Call {
        Call { sp: None, sites: Vec::with_capacity(SITE_WORDS * searches), stats: Vec::with_capacity(STAT_WORDS * searches), nulls: Vec::with_capacity(nulls), spaced: None }
    }

    /// One pair's part of a launch, made on the pair's own thread: the searches of `plan`
    /// and their null probes ([`add`](Self::add), [`add_nulls`](Self::add_nulls)), its
    /// frames at `slots` of the launch's table, the moving frame's f32 terms `terms`.
    fn of_pair<T: DeviceSample>(plan: &PairPlan<TemplateStats>, last: (isize, isize), slots: (i32, i32), terms: (f64, f64)) -> Result<Call> {
        let spaced = plan.spaced_probes();
        let mut part = Call::with_room_for(plan.searches().len(), if spaced.is_some() { 0 } else { plan.probe_sets().len() });
        let searches = part.add::<T>(plan.searches(), &plan.search_params(), last, slots, terms)?;
        match spaced {
            // Every search probed by some template (or the listed records' check finds the
            // one that cannot start).
            Some(n) if n == searches.len() && part.all_startable(&searches, last) => part.spaced = Some(n),
            _ => {
                part.add_nulls(&searches, plan.probe_sets(), last)?;
            }
        }
        Ok(part)
    }

    /// Whether a window can be placed at the start of each search of `searches`, in order (a
    /// probe there can start); `None` where the call does not hold them.
    fn startable(&self, searches: &Range<usize>, (xmax, ymax): (isize, isize)) -> Option<impl Iterator<Item = bool> + '_> {
        let sites = self.sites.get(SITE_WORDS * searches.start..SITE_WORDS * searches.end)?;
        Some(sites.chunks_exact(SITE_WORDS).map(move |site| (0..=xmax).contains(&(site[2] as isize)) && (0..=ymax).contains(&(site[3] as isize))))
    }

    /// Whether a window can be placed at the start of every search of `searches`.
    fn all_startable(&self, searches: &Range<usize>, last: (isize, isize)) -> bool {
        self.startable(searches, last).is_some_and(|mut starts| starts.all(|s| s))
    }

    /// Adds `searches` (checked first: none is added if one cannot start), returning their
    /// range among the call's searches.
    fn add<'t, T: DeviceSample>(&mut self, searches: impl Iterator<Item = TemplateSearch<'t, TemplateStats>> + Clone, sp: &SearchParams, (xmax, ymax): (isize, isize), slots: (i32, i32), terms: (f64, f64)) -> Result<Range<usize>> {
        if self.sp.is_some_and(|c| c != *sp) {
            return Err(Error::Backend("internal: pairs of one launch asked with different search parameters".into()));
        }
        let r = sp.radius as isize;
        for s in searches.clone() {
            // The core's checks of a search start (SearchCache::begin).
            let (sx, sy) = s.start;
            let (x0, x1) = (sx.saturating_sub(r).max(0), sx.saturating_add(r).min(xmax));
            let (y0, y1) = (sy.saturating_sub(r).max(0), sy.saturating_add(r).min(ymax));
            if x0 > x1 || y0 > y1 {
                return Err(Error::InvalidParameter { name: "search start", reason: format!("({sx}, {sy}) with radius {r} leaves no window position inside the frame") });
            }
        }
        self.sp = Some(*sp);
        let start = self.sites.len() / SITE_WORDS;
        for s in searches {
            // Sites lie inside the frame and starts within a search radius of it: all fit i32.
            self.sites.extend([s.site.0 as i32, s.site.1 as i32, s.start.0 as i32, s.start.1 as i32, slots.0, slots.1]);
            let stat: [f64; STAT_WORDS] = [s.template.sum, T::norm(s.template), terms.0, terms.1];
            self.stats.extend(stat);
        }
        Ok(start..self.sites.len() / SITE_WORDS)
    }

    /// Adds the null probes `sets` of the call's searches `searches` (the `t`-th set, counted
    /// from the range's start: the searches at whose starts search `t`'s template is
    /// evaluated), a record a set, each start checked first as the core checks a search of
    /// radius 0 (none is added if one cannot start); returns their range among the call's
    /// null records.
    fn add_nulls(&mut self, searches: &Range<usize>, sets: impl ExactSizeIterator<Item = impl AsRef<[usize]>>, last: (isize, isize)) -> Result<Range<usize>> {
        // Each search's start checked once: whether a window can be placed at it.
        let Some(startable) = self.startable(searches, last) else {
            return Err(Error::Backend("internal: null probes of searches the call does not have".into()));
        };
        let startable: Vec<bool> = startable.collect();
        if sets.len() > startable.len() {
            return Err(Error::Backend("internal: null probes of a search the pair does not have".into()));
        }
        // The records' search indices fit an int: a launch counts its searches in one
        // (checked as the call joins it, `Launch::join`). A probe that cannot start takes
        // the pair's records added so far back out.
        let first = self.nulls.len();
        for (t, us) in sets.enumerate() {
            let us = us.as_ref();
            // Each probe checked as its record is made.
            let null = null_record(searches.start, t, us).and_then(|null| match us.iter().find(|&&u| startable.get(u) != Some(&true)) {
                Some(&u) => Err(self.unstartable(searches.start, u, startable.len())),
                None => Ok(null),
            });
            match null {
                Ok(null) => self.nulls.push(null),
                Err(e) => {
                    self.nulls.truncate(first);
                    return Err(e);
                }
            }
        }
        Ok(first..self.nulls.len())
    }

    /// The error of a null probe at the start of the call's search `start + u` that cannot
    /// start a window there, or that names none of the pair's `searches` searches.
    #[cold]
    fn unstartable(&self, start: usize, u: usize, searches: usize) -> Error {
        if u >= searches {
            return Error::Backend("internal: a null probe at a search the pair does not have".into());
        }
        let at = SITE_WORDS * (start + u) + 2;
        let (sx, sy) = (self.sites[at], self.sites[at + 1]);
        Error::InvalidParameter { name: "search start", reason: format!("({sx}, {sy}) with radius 0 leaves no window position inside the frame") }
    }
}

/// The null record of search `t` of a pair whose first search is the call's `first`: its
/// template probed at the starts of the pair's searches `us` (at most [`NULL_SAMPLES`]),
/// indices of the call's searches.
fn null_record(first: usize, t: usize, us: &[usize]) -> Result<[i32; NULL_INTS]> {
    let mut null = [0; NULL_INTS];
    let Some(places) = null.get_mut(2..2 + us.len()) else {
        return Err(Error::Backend(format!("internal: {} null probes of a template, at most {NULL_SAMPLES}", us.len())));
    };
    places.iter_mut().zip(us).for_each(|(place, &u)| *place = (first + u) as i32);
    null[..2].copy_from_slice(&[(first + t) as i32, us.len() as i32]);
    Ok(null)
}

/// One launch's searches: each pair's call as made on its thread, in order, gathered into
/// the launch's records as they are uploaded ([`search_and_probe`]), with how many
/// searches they hold and, per null record, its pair's first search.
#[derive(Default)]
struct Launch {
    sp: Option<SearchParams>,
    calls: Vec<Call>,
    searches: usize,
    /// Per null record of the launch, in the calls' order: the launch's index of its
    /// pair's first search.
    bases: Vec<i32>,
}

/// The null records of spaced templates ([`Call::spaced`]) by their count, relative to
/// their pair's first search: each made once for the launches of a run, the last
/// [`NULL_TABLES`] counts kept from one launch to the next (a grid of up to 1 024 templates
/// whose textured count changed pair after pair would otherwise keep a table of every
/// count).
#[derive(Default)]
pub(crate) struct NullTables(Vec<(usize, Vec<[i32; NULL_INTS]>)>);

/// Template counts whose spaced null records a run keeps between launches.
const NULL_TABLES: usize = 8;

impl NullTables {
    /// The records of `n` spaced templates, made where they are not kept.
    fn spaced(&mut self, n: usize) -> Result<&[[i32; NULL_INTS]]> {
        let k = match self.0.iter().position(|&(m, _)| m == n) {
            Some(k) => k,
            None => {
                let records = spaced_null_sites(n).iter().enumerate().map(|(t, us)| null_record(0, t, us.as_slice())).collect::<Result<_>>()?;
                self.0.push((n, records));
                self.0.len() - 1
            }
        };
        Ok(&self.0[k].1)
    }

    /// The records of `n` spaced templates where made.
    fn get(&self, n: usize) -> Option<&[[i32; NULL_INTS]]> {
        self.0.iter().find(|&&(m, _)| m == n).map(|(_, records)| records.as_slice())
    }

    /// Drops the tables made first beyond the last [`NULL_TABLES`]: between launches, so
    /// that every table a launch's calls name is there when it uploads them.
    fn trim(&mut self) {
        let extra = self.0.len().saturating_sub(NULL_TABLES);
        self.0.drain(..extra);
    }
}

impl Launch {
    /// Adds `part` (a pair's own call, [`Call::of_pair`]), its spaced null records made
    /// where the run has not made them; returns the ranges of its searches and of its null
    /// records in the launch.
    fn join(&mut self, part: Call, tables: &mut NullTables) -> Result<[Range<usize>; 2]> {
        if part.sp.is_some_and(|p| self.sp.is_some_and(|c| c != p)) {
            return Err(Error::Backend("internal: pairs of one launch asked with different search parameters".into()));
        }
        let first = self.searches;
        let searches = first + part.sites.len() / SITE_WORDS;
        // Search indices of one launch, which counts its searches in an int.
        int(searches, "template searches")?;
        let nulls = match part.spaced {
            Some(n) => tables.spaced(n)?.len(),
            None => part.nulls.len(),
        };
        let start = self.bases.len();
        self.bases.resize(start + nulls, first as i32);
        self.sp = self.sp.or(part.sp);
        self.searches = searches;
        self.calls.push(part);
        Ok([first..searches, start..self.bases.len()])
    }

    /// Each call's null records, in order (those of spaced templates from `tables`, which
    /// made them as the calls joined).
    fn null_records<'a>(&'a self, tables: &'a NullTables) -> Result<Vec<&'a [[i32; NULL_INTS]]>> {
        self.calls
            .iter()
            .map(|call| match call.spaced {
                Some(n) => tables.get(n).ok_or_else(|| Error::Backend("internal: spaced null records missing".into())),
                None => Ok(call.nulls.as_slice()),
            })
            .collect()
    }
}

/// The first half of the registration of every pair of `jobs`: each pair planned by the
/// core (the grid, the templates and their texture test, the null probes), then one launch
/// for all pairs' template searches and one for all their null probes, their answers in one
/// download ([`search_and_probe`]).
/// Returns each pair's [`Searched`], the launch's [`Answers`], and whether a launch ran.
fn search_jobs<T: DeviceSample>(gpu: &Gpu, jobs: &[Job<'_, T>], grids: Vec<Result<PairSites>>, p: &RegisterParams, par: Parallelism, tables: &mut NullTables) -> Result<(Vec<Searched>, Answers, bool)> {
    let Some(first) = jobs.first() else { return Ok((Vec::new(), Answers::default(), false)) };
    let (w, h) = first.moving.size();
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let last = (w as isize - p.rsz as isize, h as isize - p.rsz as isize);
    let mut frames = FrameTable::default();
    let slots: Vec<(i32, i32)> = jobs.iter().map(|job| (frames.slot(job.devices.0.ptr), frames.slot(job.devices.1.ptr))).collect();
    // Each pair's plan and its part of the launch, on the pair's thread.
    let parts = plan_jobs(gpu, jobs, grids, p, par, |k, plan| {
        let part = Call::of_pair::<T>(&plan, last, slots[k], jobs[k].devices.1.terms);
        Ok((plan, part))
    })?;
    // The launch's null records' bases allocated once.
    let nulls = parts.iter().flatten().filter_map(|(_, part)| part.as_ref().ok()).map(|part| part.spaced.unwrap_or(part.nulls.len())).sum();
    let mut launch = Launch { calls: Vec::with_capacity(parts.len()), bases: Vec::with_capacity(nulls), ..Launch::default() };
    tables.trim();
    let searched = parts
        .into_iter()
        .map(|part| match part.and_then(|(plan, part)| Ok((plan, launch.join(part?, tables)?))) {
            Ok((plan, [found, nulls])) => Searched::Matches { plan, found, nulls },
            Err(e) => Searched::Failed(e),
        })
        .collect();
    let found = search_and_probe::<T>(gpu, frames.addresses(), (wi, hi), p, &launch, tables)?;
    let launched = launch.searches > 0;
    Ok((searched, found, launched))
}

/// Each pair's plan ([`plan_pair`]'s), and `then` of it, on the pair's thread: for integer
/// frames the grid's sites from the core (`grids`, [`grids`]' of the jobs), every site's
/// template summed on the device, one launch for all pairs (so the host reads no template
/// pixel), and the texture test and null probes from those sums; f32 templates are
/// measured on the host.
fn plan_jobs<T: DeviceSample, R: Send>(gpu: &Gpu, jobs: &[Job<'_, T>], mut grids: Vec<Result<PairSites>>, p: &RegisterParams, par: Parallelism, then: impl Fn(usize, PairPlan<TemplateStats>) -> Result<R> + Sync) -> Result<Vec<Result<R>>> {
    let (Some(kernel), Some(first)) = (T::SUMS, jobs.first()) else {
        return Ok(map_claimed(jobs.len(), par, |k| host_count::pair_work(|| then(k, plan_pair(jobs[k].reference, jobs[k].moving, p, jobs[k].prediction)?))));
    };
    if grids.len() != jobs.len() {
        return Err(Error::Backend(format!("internal: {} grids for {} pairs", grids.len(), jobs.len())));
    }
    let mut frames = FrameTable::default();
    let mut records: Vec<i32> = Vec::new();
    for (job, sites) in jobs.iter().zip(&grids) {
        if let Ok(sites) = sites {
            let slot = frames.slot(job.devices.0.ptr);
            records.reserve(TEMPLATE_INTS * sites.sites().len());
            // Sites lie inside the frame, whose width fits an int (checked below).
            records.extend(sites.sites().flat_map(|(x, y)| [slot, x as i32, y as i32]));
        }
    }
    let sums = template_sums(gpu, kernel, frames.addresses(), int(first.reference.width(), "width")?, p.rsz, &records)?;
    let n = (p.rsz * p.rsz) as u64;
    // Each pair's first template among the sums: the templates of the planned pairs before it.
    let firsts: Vec<usize> = grids.iter().scan(0, |at, sites| Some(core::mem::replace(at, *at + sites.as_ref().map_or(0, |s| s.sites().len())))).collect();
    Ok(map_slots(&mut grids, par, |k, sites| {
        host_count::pair_work(|| {
            let sites = core::mem::replace(sites, Err(Error::Backend("internal: a pair planned twice".into())))?;
            let stats = sums.get(2 * firsts[k]..2 * (firsts[k] + sites.sites().len())).ok_or_else(|| Error::Backend("internal: template sums missing".into()))?;
            then(k, sites.plan::<T>(stats.chunks_exact(2).map(|s| TemplateStats::of_int_sums(n, s[0], s[1])), p)?)
        })
    }))
}

/// The exact sums of each template of side `rsz` whose record (`TEMPLATE_INTS` ints: the
/// reference's slot in `frames`, the top-left pixel) is in `records`, two words a template
/// (of the pixels, of their squares): one launch and one download.
fn template_sums(gpu: &Gpu, kernel: &'static str, frames: &[u64], width: i32, rsz: usize, records: &[i32]) -> Result<Vec<u64>> {
    let count = records.len() / TEMPLATE_INTS;
    if count == 0 {
        return Ok(Vec::new());
    }
    let (_records, at) = gpu.upload_packed(&[as_bytes(frames), as_bytes(records)])?;
    let out = gpu.buffer::<u64>(2 * count)?;
    let list = args![Arg::Ptr(at[0]), width, int(rsz, "template size")?, Arg::Ptr(at[1]), int(count, "templates")?, &out];
    gpu.launch_all_and_download(&[KernelCall::new(Kernel::new(Module::Ncc, kernel), [(count as u32).div_ceil(WARPS), 1, 1], [32 * WARPS, 1, 1], list)], &out, 2 * count)
}

/// The launch of every search of `launch` over the frames at the addresses `frames`, and of
/// its null probes (those of spaced templates in `tables`), their records uploaded once,
/// both launches and the download of their answers in one device call: each search's
/// result ([`Found`]), each template's null peak.
fn search_and_probe<T: DeviceSample>(gpu: &Gpu, frames: &[u64], (w, h): (i32, i32), p: &RegisterParams, launch: &Launch, tables: &NullTables) -> Result<Answers> {
    let count = launch.searches;
    let (Some(sp), true) = (launch.sp, count > 0) else { return Ok(Answers::default()) };
    let r = sp.radius;
    let side = 2 * (r + 1) + 1;
    let cells = side * side;
    let words = cells.div_ceil(32);
    // Both launches' records in one transfer: the frame table, the searches' sites and
    // statistics, the null records, each gathered from the pairs' calls (a spaced pair's
    // from the run's table), and the records' bases.
    let gathered = |part: fn(&Call) -> &[u8]| launch.calls.iter().map(part).collect::<Vec<&[u8]>>();
    let nulls = launch.null_records(tables)?.into_iter().map(|records| as_bytes(records.as_flattened())).collect();
    let parts = [vec![as_bytes(frames)], gathered(|c| as_bytes(&c.sites)), gathered(|c| as_bytes(&c.stats)), nulls, vec![as_bytes(&launch.bases)]];
    let (_records, at) = gpu.upload_gathered(&parts)?;
    let (dframes, dsites, dstats, dnulls, dbases) = (Arg::Ptr(at[0]), Arg::Ptr(at[1]), Arg::Ptr(at[2]), Arg::Ptr(at[3]), Arg::Ptr(at[4]));
    let values = gpu.buffer::<f64>(count * cells)?;
    // The cache's bitmaps in shared memory where a block's fit (no clearing call), else in
    // global scratch cleared here.
    let shared_bytes = WARPS as usize * words * std::mem::size_of::<u32>();
    let in_shared = shared_bytes <= SHARED_BITMAP_BYTES;
    let bits = if in_shared { None } else { Some(gpu.zeroed::<u32>(count * words)?) };
    let bits_arg = bits.as_ref().map_or(Arg::Ptr(0), Arg::from);
    // Each search's result, then each null record's peak: one buffer, one download.
    let searched = RESULT_WORDS * count;
    let out = gpu.buffer::<f64>(searched + 2 * launch.bases.len())?;
    let method_code = match p.method {
        SearchMethod::Log => 0,
        SearchMethod::LogPlain => 1,
        SearchMethod::Exhaustive => 2,
    };
    let accept = sp.accept.unwrap_or(f64::INFINITY);
    let count_i = int(count, "template searches")?;
    let search = args![dframes, w, h, p.rsz as i32, dsites, dstats, count_i, r as i32, method_code, accept, i32::from(sp.subpixel), &values, bits_arg, &out];
    let shared = if in_shared { shared_bytes as u32 } else { 0 };
    // Each null record's peak (reduced on the device, two words) after the searches'
    // results; a block a record, a warp a probe.
    let nulls = launch.bases.len();
    let peaks_at = Arg::Ptr(out.ptr() + (searched * std::mem::size_of::<f64>()) as u64);
    let probes = args![dframes, w, p.rsz as i32, dsites, dstats, dnulls, dbases, peaks_at];
    let calls = [
        KernelCall { kernel: Kernel::new(Module::Ncc, T::KERNEL), grid: [(count as u32).div_ceil(WARPS), 1, 1], block: [32 * WARPS, 1, 1], shared_bytes: shared, args: search },
        KernelCall::new(Kernel::new(Module::Ncc, T::NULLS), [int(nulls, "null records")? as u32, 1, 1], [32 * NULL_SAMPLES as u32, 1, 1], probes),
    ];
    let mut words = gpu.launch_all_and_download(&calls, &out, searched + 2 * nulls)?;
    // Window counts (at most NULL_SAMPLES) are exact in f64.
    let peaks = words.get(searched..).unwrap_or_default().chunks_exact(2).map(|n| NullPeak { largest: (n[1] > 0.0).then_some(n[0]), windows: n[1] as u32 }).collect();
    words.truncate(searched);
    Ok((Found(words), peaks))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call holding three searches with starts `starts`, as `Call::add` records them.
    fn call_of(starts: [(i32, i32); 3]) -> Call {
        let sites = starts.iter().flat_map(|&(x, y)| [x, y, x, y, 0, 1]).collect();
        Call { sp: Some(PROBE_PARAMS), sites, stats: vec![0.0; 3 * STAT_WORDS], ..Call::default() }
    }

    const PROBE_PARAMS: SearchParams = SearchParams { radius: 0, subpixel: false, accept: None };

    /// What null records name: per record, the search whose template it probes and the
    /// searches at whose starts, as indices of the call.
    fn named(nulls: &[[i32; NULL_INTS]]) -> Vec<(i32, Vec<i32>)> {
        named_from(nulls.iter().map(|n| (0, n)))
    }

    /// [`named`] for records each with its pair's first search, as the kernel reads them.
    fn named_from<'a>(nulls: impl Iterator<Item = (i32, &'a [i32; NULL_INTS])>) -> Vec<(i32, Vec<i32>)> {
        nulls.map(|(base, n)| (base + n[0], n[2..2 + n[1] as usize].iter().map(|u| base + u).collect())).collect()
    }

    /// What the null records of a launch name, as indices of the launch.
    fn launched(launch: &Launch, tables: &NullTables) -> Vec<(i32, Vec<i32>)> {
        let records = launch.null_records(tables).unwrap();
        assert_eq!(records.iter().map(|r| r.len()).sum::<usize>(), launch.bases.len());
        named_from(launch.bases.iter().copied().zip(records.into_iter().flatten()))
    }

    /// A null record: search `t`'s template at the searches `us`.
    fn null(t: i32, us: &[i32]) -> [i32; NULL_INTS] {
        let mut n = [0; NULL_INTS];
        (n[0], n[1]) = (t, us.len() as i32);
        n[2..2 + us.len()].copy_from_slice(us);
        n
    }

    #[test]
    fn null_records_are_added_in_order_or_not_at_all() {
        let bounds = (10, 10);
        let mut call = call_of([(1, 1), (10, 0), (4, 11)]);
        // Searches 1 and 2 of the call as one pair's range 0..2: search 2 has no probe.
        let range = 1..3;
        assert_eq!(call.add_nulls(&range, [&[0][..], &[]].into_iter(), bounds).unwrap(), 0..2);
        assert_eq!(named(&call.nulls), [(1, vec![1]), (2, vec![])]);
        // A probe at search 2's start, which lies below the frame's last row: an error, and
        // none of the pair's records added.
        let err = call.add_nulls(&range, [&[0, 1][..]].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::InvalidParameter { name: "search start", .. }), "{err:?}");
        assert!(err.to_string().contains("(4, 11)"), "{err}");
        // A probe of a search the range does not hold; more probes than a record holds.
        let err = call.add_nulls(&range, [&[0][..], &[], &[0]].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        let err = call.add_nulls(&range, [&[2][..]].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        let err = call.add_nulls(&(0..2), [&[0][..], &[0; NULL_SAMPLES + 1]].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        assert_eq!(named(&call.nulls), [(1, vec![1]), (2, vec![])]);
        // A range beyond the call's searches.
        let err = call.add_nulls(&(2..4), [&[0][..]].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        assert_eq!(call.nulls.len(), 2);
        // Every search of the call, search 0 probed at its own start and search 1's, with
        // every place of its record.
        assert_eq!(call.add_nulls(&(0..3), [&[0, 1][..], &[0; NULL_SAMPLES]].into_iter(), bounds).unwrap(), 2..4);
        assert_eq!(named(&call.nulls[2..]), [(0, vec![0, 1]), (1, vec![0; NULL_SAMPLES])]);
        // Joining a launch after a call of two searches, every index moves on by two.
        let mut first = call_of([(0, 0), (1, 1), (2, 2)]);
        first.sites.truncate(2 * SITE_WORDS);
        first.stats.truncate(2 * STAT_WORDS);
        first.nulls = vec![null(1, &[0])];
        let (mut launch, mut tables) = (Launch::default(), NullTables::default());
        assert_eq!(launch.join(first, &mut tables).unwrap(), [0..2, 0..1]);
        assert_eq!(launch.join(call, &mut tables).unwrap(), [2..5, 1..5]);
        assert_eq!((launch.searches, launch.bases.as_slice()), (5, &[0, 2, 2, 2, 2][..]));
        assert_eq!(launched(&launch, &tables), [(1, vec![0]), (3, vec![3]), (4, vec![]), (2, vec![2, 3]), (3, vec![2; NULL_SAMPLES])]);
        // A call asked with other search parameters joins no launch.
        let mut other = call_of([(0, 0), (1, 1), (2, 2)]);
        other.sp = Some(SearchParams { radius: 3, ..PROBE_PARAMS });
        assert!(matches!(launch.join(other, &mut tables).unwrap_err(), Error::Backend(_)));
        assert_eq!((launch.searches, launch.bases.len(), launch.calls.len()), (5, 5, 2));
    }

    /// A pair whose probes are spaced over its searches joins a launch with the records its
    /// sets would list, made once for every pair of as many templates; one of its searches
    /// that cannot start a window lists them, and is an error where a template probes it.
    #[test]
    fn spaced_probes_join_a_launch_as_their_sets_listed() {
        let bounds = (10, 10);
        let listed = |n: usize, base: usize| {
            let mut call = call_of([(0, 0); 3]);
            call.sites = (0..base + n).flat_map(|i| [i as i32 % 10, 1, i as i32 % 10, 1, 0, 1]).collect();
            call.add_nulls(&(base..base + n), spaced_null_sites(n).into_iter(), bounds).unwrap();
            named(&call.nulls)
        };
        let spaced = |n: usize| {
            let mut call = call_of([(0, 0); 3]);
            call.sites = (0..n).flat_map(|i| [i as i32 % 10, 1, i as i32 % 10, 1, 0, 1]).collect();
            call.spaced = Some(n);
            call
        };
        let (mut launch, mut tables) = (Launch::default(), NullTables::default());
        for (n, base) in [(3, 0), (12, 3), (3, 15), (1, 18)] {
            let [searches, nulls] = launch.join(spaced(n), &mut tables).unwrap();
            assert_eq!(searches, base..base + n);
            assert_eq!(launched(&launch, &tables)[nulls], listed(n, base), "{n} templates from search {base}");
        }
        // The sets of 3 and of 12 templates made once each, and those of 1 (none probed).
        assert_eq!(tables.0.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [3, 12, 1]);
        assert_eq!(launch.searches, 19);
        // A later launch of the run reads the same tables.
        let mut next = Launch::default();
        assert_eq!(next.join(spaced(12), &mut tables).unwrap(), [0..12, 0..12]);
        assert_eq!(launched(&next, &tables), listed(12, 0));
        assert_eq!(tables.0.len(), 3);
        // A launch keeps every table its calls name, however many counts they have; the
        // last NULL_TABLES made are kept for the next, the oldest going first.
        let mut many = Launch::default();
        for n in 20..21 + NULL_TABLES {
            many.join(spaced(n), &mut tables).unwrap();
        }
        assert_eq!(launched(&many, &tables).len(), (20..21 + NULL_TABLES).sum::<usize>());
        tables.trim();
        assert_eq!(tables.0.iter().map(|(n, _)| *n).collect::<Vec<_>>(), (21..21 + NULL_TABLES).collect::<Vec<_>>());
        assert!(matches!(many.null_records(&tables).unwrap_err(), Error::Backend(_)));
        assert_eq!(named(tables.spaced(3).unwrap()), listed(3, 0));
        assert_eq!(tables.0.last().map(|(n, _)| *n), Some(3));

        // All searches startable: no record of the pair's own; one start below the frame.
        let mut call = call_of([(1, 1), (2, 2), (3, 3)]);
        assert!(call.all_startable(&(0..3), bounds));
        call.sites[SITE_WORDS + 3] = 11;
        assert!(!call.all_startable(&(0..3), bounds));
        assert!(call.all_startable(&(2..3), bounds));
        let err = call.add_nulls(&(0..3), spaced_null_sites(3).into_iter(), bounds).unwrap_err();
        assert!(err.to_string().contains("(2, 11)"), "{err}");
    }

    /// The search kernel's subpixel fit (`quadratic_peak` of ncc.cu) gives the core's
    /// offsets to the bit: peaks of sampled quadratics (proper maxima, saddles, ridges,
    /// fits beyond a pixel), noisy coefficients, ties with a neighbour, missing and NaN
    /// neighbours, signed zeros and a missing centre.
    #[cfg(feature = "shim")]
    #[test]
    fn the_devices_subpixel_fit_is_the_cores_to_the_bit() {
        use tessera_core::ncc::quadratic_peak;
        use tessera_core::stitch::SplitMix64;
        let gpu = Gpu::with_staging(Box::new(crate::shim::ShimDevice::new()), crate::transfer::StagingConfig::for_shim());
        let mut rng = SplitMix64::new(0x5b_9e1);
        let unit = |rng: &mut SplitMix64| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut cases: Vec<[f64; 9]> = Vec::new();
        for _ in 0..2000 {
            let mut u = || unit(&mut rng);
            let (a, b, e, px, py) = (u() * 2.0 - 0.5, u() * 2.0 - 0.5, u() * 2.0 - 1.0, u() * 3.0 - 1.5, u() * 3.0 - 1.5);
            let noise = if u() < 0.5 { 0.0 } else { 1e-3 };
            let mut v: [f64; 9] = core::array::from_fn(|k| {
                let (x, y) = ((k % 3) as f64 - 1.0 - px, (k / 3) as f64 - 1.0 - py);
                0.9 - a * x * x - b * y * y - e * x * y
            });
            v.iter_mut().for_each(|c| *c += noise * (unit(&mut rng) - 0.5));
            match (rng.next_u64() % 8) as usize {
                0 => v[(rng.next_u64() % 9) as usize] = f64::NEG_INFINITY,
                1 => v[(rng.next_u64() % 9) as usize] = f64::NAN,
                2 => v[3] = v[4],
                3 => v[1] = v[4],
                _ => {}
            }
            cases.push(v);
        }
        let r = [-0.25, 0.5, 0.75];
        cases.extend([[0.0; 9], [-0.0; 9], [1.0; 9], [f64::NEG_INFINITY; 9], [r[0], r[1], r[2], r[1], r[2], r[1], r[2], r[1], r[0]]]);
        cases.push([0.1, 0.2, 0.1, 0.2, f64::NAN, 0.2, 0.1, 0.2, 0.1]);
        cases.push([0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0]);
        let values = gpu.upload(cases.as_flattened()).unwrap();
        let out = gpu.zeroed::<f64>(2 * cases.len()).unwrap();
        let count = cases.len() as i32;
        gpu.launch(Kernel::new(Module::Ncc, "subpixel_peaks"), [(count as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, args![&values, count, &out]).unwrap();
        let mut got = vec![0f64; 2 * cases.len()];
        gpu.download(&out, &mut got).unwrap();
        for (v, d) in cases.iter().zip(got.chunks_exact(2)) {
            let want = quadratic_peak(&core::array::from_fn(|j| core::array::from_fn(|i| v[3 * j + i])));
            assert_eq!((d[0].to_bits(), d[1].to_bits()), (want.0.to_bits(), want.1.to_bits()), "{v:?}: {d:?} vs {want:?}");
        }
    }
}

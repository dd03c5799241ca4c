//! Drives `kernels/ncc.cu`: pair registration with every template search of one or several
//! pairs in one launch (a warp per template), and their null probes in another, through
//! the core's seam [`pair_sites`](tessera_core::stitch::pair_sites) /
//! [`PairPlan::conclude`](tessera_core::stitch::PairPlan::conclude): the grid, the texture
//! test, the threshold and the consensus are the core's, the templates' sums (integer
//! frames), the searches and the subpixel refinement (`refine.rs`) the device's, each one
//! launch for all pairs; the kernels read the templates' pixels from the reference on the
//! device.
//! Integer frames (u8, u16, RGBA on its u8 luma) give the CPU's registration exactly
//! (every coefficient, peak, evaluation count and shift); f32 frames within about 1e-6 of
//! the CPU's coefficients.
//!
//! A stitching run registers through [`DeviceRegistrar`]: each frame uploaded once (kept
//! by index in a small cache), the pairs the run will probably ask for next registered
//! ahead in one launch ([`PairRegistrar::speculate`]), and the composite pasted on the
//! device (`stitch.rs`).

use crate::device::{args, int, Arg, DevBuf, DevImage, DevicePtr, FrameTable, Gpu, Pod};
use crate::kernels::{Kernel, Module};
use core::ops::{ControlFlow, Range};
use std::sync::Mutex;
use tessera_core::image::Pixel;
use tessera_core::ncc::{quadratic_peak, Integral, Match, NccSample, SearchParams, TemplateStats};
use crate::refine::refine_shifts;
use tessera_core::stitch::{
    gray, luma_storage, pair_sites, plan_pair, Gray, PairPlan, PairSites, TemplateSearch, stitch_frames_into, FrameSource, Moments, PairRegistrar, PairRegistration, PairRequest, Panorama, Pasting, QualityRequest,
    RegisterParams, SearchMethod, ShiftRefinement, StitchParams, Unrefined, WINDOW,
};
use tessera_core::stitch::Blend;
use crate::tuning::{self, Design};
use tessera_core::choice::Choice;
use tessera_core::parallel::{map_indices, map_slots, on_pool};
use tessera_core::{AnyView, Error, ImageView, Parallelism, Result};

/// Warps per block of the search launch.
const WARPS: u32 = 4;
/// Words per search of the kernel's site and stat records and of its results
/// (`NCC_SITE_WORDS`, `NCC_STAT_WORDS`, `NCC_RESULT_WORDS` of ncc.cu).
const SITE_WORDS: usize = 6;
const STAT_WORDS: usize = 4;
const RESULT_WORDS: usize = 13;
/// Ints of a null probe's record (`NCC_PROBE_INTS` of ncc.cu).
const PROBE_INTS: usize = 2;
/// Ints of a template's record for its sums (`NCC_TEMPLATE_INTS` of ncc.cu).
const TEMPLATE_INTS: usize = 3;

/// The kernel and its per-frame constants for one sample type.
trait DeviceSample: NccSample + Pod + Pixel + Into<f64> {
    const KERNEL: &'static str;
    /// The null probes' kernel.
    const PROBE: &'static str;
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
    /// A grey frame of this type, or `None`.
    fn typed<'a>(g: &Gray<'a>) -> Option<ImageView<'a, Self>>;
    /// This type's slot of a registrar's cache.
    fn cache<'s, 'g>(c: &'s mut Caches<'g>) -> &'s mut Vec<Resident<'g, Self>>;
}

impl DeviceSample for u8 {
    const KERNEL: &'static str = "ncc_search_u8";
    const PROBE: &'static str = "ncc_probe_u8";
    const REFINE: &'static str = "refine_shift_u8";
    const QUALITY: Option<&'static str> = Some("quality_sums_u8");
    const SUMS: Option<&'static str> = Some("template_sums_u8");
    fn typed<'a>(g: &Gray<'a>) -> Option<ImageView<'a, Self>> {
        if let Gray::U8(v) = g { Some(*v) } else { None }
    }
    fn cache<'s, 'g>(c: &'s mut Caches<'g>) -> &'s mut Vec<Resident<'g, Self>> {
        &mut c.u8
    }
}
impl DeviceSample for u16 {
    const KERNEL: &'static str = "ncc_search_u16";
    const PROBE: &'static str = "ncc_probe_u16";
    const REFINE: &'static str = "refine_shift_u16";
    const QUALITY: Option<&'static str> = Some("quality_sums_u16");
    const SUMS: Option<&'static str> = Some("template_sums_u16");
    fn typed<'a>(g: &Gray<'a>) -> Option<ImageView<'a, Self>> {
        if let Gray::U16(v) = g { Some(*v) } else { None }
    }
    fn cache<'s, 'g>(c: &'s mut Caches<'g>) -> &'s mut Vec<Resident<'g, Self>> {
        &mut c.u16
    }
}
impl DeviceSample for f32 {
    const KERNEL: &'static str = "ncc_search_f32";
    const PROBE: &'static str = "ncc_probe_f32";
    const REFINE: &'static str = "refine_shift_f32";
    fn f32_terms(moving: ImageView<'_, f32>) -> Result<(f64, f64)> {
        let integral = Integral::new(moving)?;
        Ok((integral.offset(), 64.0 * f64::EPSILON * integral.squares_scale()))
    }
    fn norm(t: &TemplateStats) -> f64 {
        t.dev
    }
    fn typed<'a>(g: &Gray<'a>) -> Option<ImageView<'a, Self>> {
        if let Gray::F32(v) = g { Some(*v) } else { None }
    }
    fn cache<'s, 'g>(c: &'s mut Caches<'g>) -> &'s mut Vec<Resident<'g, Self>> {
        &mut c.f32
    }
}

/// A frame on the device as the searches see it: its address and, as a moving frame, its
/// f32 terms.
#[derive(Clone, Copy)]
struct OnDevice {
    ptr: DevicePtr,
    terms: (f64, f64),
}

/// One pair of a launch: the reference's view (the host takes its templates' statistics),
/// both frames on the device, the prediction.
struct Job<'v, T> {
    reference: ImageView<'v, T>,
    moving: ImageView<'v, T>,
    devices: (OnDevice, OnDevice),
    prediction: (f64, f64),
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
    let (dref, dmov) = (gpu.upload_view(reference)?, gpu.upload_view(moving)?);
    let devices = (OnDevice { ptr: dref.buf.ptr(), terms: (0.0, 0.0) }, OnDevice { ptr: dmov.buf.ptr(), terms });
    let job = Job { reference, moving, devices, prediction };
    let (mut found, _) = register_jobs(gpu, &[job], p, Parallelism::Sequential)?;
    found.pop().unwrap_or_else(|| Err(Error::Backend("internal: a launch answered no pair".into())))
}

/// Registers every pair of `jobs` (frames of one size, the parameters `p`): their searches
/// in one launch and their null probes in another ([`search_jobs`]), each concluded by the
/// core on the host (consensus and acceptance, [`PairPlan::conclude`]), and the
/// shifts that ask for it refined in one more launch ([`refine_shifts`]). Returns each
/// pair's registration (or its own error) and whether a search launch ran (pairs without a
/// search need none). Each pair's host work (its plan, its conclusion) runs on the threads
/// of `par`, a pair to a thread ([`HostWork`]).
fn register_jobs<T: DeviceSample>(gpu: &Gpu, jobs: &[Job<'_, T>], p: &RegisterParams, par: Parallelism) -> Result<(Vec<Result<PairRegistration>>, bool)> {
    let Some(first) = jobs.first() else { return Ok((Vec::new(), false)) };
    let (searched, (found, probed), launched) = search_jobs(gpu, jobs, p, par)?;
    let mut searched: Vec<Option<Searched>> = searched.into_iter().map(Some).collect();
    let concluded: Vec<Result<Unrefined>> = map_slots(&mut searched, par, |k, searched| match searched.take() {
        Some(Searched::Matches { plan, found: f, probed: q }) => plan.conclude(jobs[k].reference, jobs[k].moving, p, &found[f], &probed[q]),
        Some(Searched::Failed(e)) => Err(e),
        None => Err(Error::Backend("internal: a pair concluded twice".into())),
    });
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
    Ok((registered, launched))
}

/// A pair's device searches, not yet turned into its registration: the core's plan of the
/// pair with where the matches of its searches and of its null probes lie among the
/// launches' ([`search_jobs`]), or the error that stopped the plan.
enum Searched {
    Matches { plan: PairPlan<TemplateStats>, found: Range<usize>, probed: Range<usize> },
    Failed(Error),
}

/// A launch's answers: each search's match, each null probe's coefficient.
type Answers = (Vec<Option<Match>>, Vec<Option<f64>>);

/// One launch's searches and their null probes: the searches' parameters, per search its
/// site record and template statistics, per probe the two searches it reads.
#[derive(Default)]
struct Call {
    sp: Option<SearchParams>,
    sites: Vec<i32>,
    stats: Vec<f64>,
    probes: Vec<i32>,
}

impl Call {
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

    /// Adds the null probes `pairs` of the call's searches `searches` (`(t, u)`, counted from
    /// the range's start: search `t`'s template evaluated at search `u`'s start), each start
    /// checked first as the core checks a search of radius 0 (none is added if one cannot
    /// start); returns their range among the call's probes.
    fn add_probes(&mut self, searches: &Range<usize>, pairs: impl Iterator<Item = (usize, usize)>, (xmax, ymax): (isize, isize)) -> Result<Range<usize>> {
        // Each search's start checked once: whether a window can be placed at it.
        let Some(sites) = self.sites.get(SITE_WORDS * searches.start..SITE_WORDS * searches.end) else {
            return Err(Error::Backend("internal: null probes of searches the call does not have".into()));
        };
        let startable: Vec<bool> = sites.chunks_exact(SITE_WORDS).map(|site| (0..=xmax).contains(&(site[2] as isize)) && (0..=ymax).contains(&(site[3] as isize))).collect();
        let first = self.probes.len() / PROBE_INTS;
        for (t, u) in pairs {
            let checked = match (t < startable.len(), startable.get(u)) {
                (true, Some(true)) => Ok(()),
                (true, Some(false)) => {
                    let at = SITE_WORDS * (searches.start + u) + 2;
                    let (sx, sy) = (self.sites[at], self.sites[at + 1]);
                    Err(Error::InvalidParameter { name: "search start", reason: format!("({sx}, {sy}) with radius 0 leaves no window position inside the frame") })
                }
                _ => Err(Error::Backend("internal: a null probe of a search the pair does not have".into())),
            };
            if let Err(e) = checked {
                self.probes.truncate(first * PROBE_INTS);
                return Err(e);
            }
            // Search indices of one launch, which counts its searches in an int.
            self.probes.extend([(searches.start + t) as i32, (searches.start + u) as i32]);
        }
        Ok(first..self.probes.len() / PROBE_INTS)
    }
}

/// The first half of the registration of every pair of `jobs`: each pair planned by the
/// core (the grid, the templates and their texture test, the null probes), then one launch
/// for all pairs' template searches and one for all their null probes, one download each
/// ([`search_and_probe`]).
/// Returns each pair's [`Searched`], the launch's [`Answers`], and whether a launch ran.
fn search_jobs<T: DeviceSample>(gpu: &Gpu, jobs: &[Job<'_, T>], p: &RegisterParams, par: Parallelism) -> Result<(Vec<Searched>, Answers, bool)> {
    let Some(first) = jobs.first() else { return Ok((Vec::new(), Answers::default(), false)) };
    let (w, h) = first.moving.size();
    let (wi, hi) = (int(w, "width")?, int(h, "height")?);
    let last = (w as isize - p.rsz as isize, h as isize - p.rsz as isize);
    let mut frames = FrameTable::default();
    let mut call = Call::default();
    type Planned = core::result::Result<(PairPlan<TemplateStats>, [Range<usize>; 2]), Error>;
    let mut planned: Vec<Planned> = Vec::with_capacity(jobs.len());
    for (job, plan) in jobs.iter().zip(plan_jobs(gpu, jobs, p, par)?) {
        let plan = match plan {
            Ok(plan) => plan,
            Err(e) => {
                planned.push(Err(e));
                continue;
            }
        };
        let slots = (frames.slot(job.devices.0.ptr), frames.slot(job.devices.1.ptr));
        let terms = job.devices.1.terms;
        let marks = (call.sites.len(), call.stats.len(), call.probes.len());
        let added = (|| -> Result<[Range<usize>; 2]> {
            let searches = call.add::<T>(plan.searches(), &plan.search_params(), last, slots, terms)?;
            let probes = call.add_probes(&searches, plan.probe_pairs(), last)?;
            Ok([searches, probes])
        })();
        planned.push(match added {
            Ok(ranges) => Ok((plan, ranges)),
            Err(e) => {
                call.sites.truncate(marks.0);
                call.stats.truncate(marks.1);
                call.probes.truncate(marks.2);
                Err(e)
            }
        });
    }
    let found = search_and_probe::<T>(gpu, frames.addresses(), (wi, hi), p, &call)?;
    let launched = !call.sites.is_empty();
    let searched = planned
        .into_iter()
        .map(|pl| match pl {
            Err(e) => Searched::Failed(e),
            Ok((plan, [found, probed])) => Searched::Matches { plan, found, probed },
        })
        .collect();
    Ok((searched, found, launched))
}

/// Each pair's plan ([`plan_pair`]'s): for integer frames the grid's sites from the core
/// ([`pair_sites`]), every site's template summed on the device, one launch for all pairs (so
/// the host reads no template pixel), and the texture test and null probes from those sums;
/// f32 templates are measured on the host.
fn plan_jobs<T: DeviceSample>(gpu: &Gpu, jobs: &[Job<'_, T>], p: &RegisterParams, par: Parallelism) -> Result<Vec<Result<PairPlan<TemplateStats>>>> {
    let (Some(kernel), Some(first)) = (T::SUMS, jobs.first()) else {
        return Ok(map_indices(jobs.len(), par, |k| plan_pair(jobs[k].reference, jobs[k].moving, p, jobs[k].prediction)));
    };
    let mut sited: Vec<Result<PairSites>> = map_indices(jobs.len(), par, |k| pair_sites(jobs[k].reference, jobs[k].moving, p, jobs[k].prediction));
    let mut frames = FrameTable::default();
    let mut records: Vec<i32> = Vec::new();
    for (job, sites) in jobs.iter().zip(&sited) {
        if let Ok(sites) = sites {
            let slot = frames.slot(job.devices.0.ptr);
            // Sites lie inside the frame, whose width fits an int (checked below).
            records.extend(sites.sites().flat_map(|(x, y)| [slot, x as i32, y as i32]));
        }
    }
    let sums = template_sums(gpu, kernel, frames.addresses(), int(first.reference.width(), "width")?, p.rsz, &records)?;
    let n = (p.rsz * p.rsz) as u64;
    // Each pair's first template among the sums: the templates of the planned pairs before it.
    let firsts: Vec<usize> = sited.iter().scan(0, |at, sites| Some(core::mem::replace(at, *at + sites.as_ref().map_or(0, |s| s.sites().len())))).collect();
    Ok(map_slots(&mut sited, par, |k, sites| {
        let sites = core::mem::replace(sites, Err(Error::Backend("internal: a pair planned twice".into())))?;
        let stats = sums.get(firsts[k]..firsts[k] + sites.sites().len()).ok_or_else(|| Error::Backend("internal: template sums missing".into()))?;
        sites.plan::<T>(stats.iter().map(|&(s1, s2)| TemplateStats::of_int_sums(n, s1, s2)).collect(), p)
    }))
}

/// The exact sums (of the pixels, of their squares) of each template of side `rsz` whose
/// record (`TEMPLATE_INTS` ints: the reference's slot in `frames`, the top-left pixel) is in
/// `records`: one launch and one download.
fn template_sums(gpu: &Gpu, kernel: &'static str, frames: &[u64], width: i32, rsz: usize, records: &[i32]) -> Result<Vec<(u64, u64)>> {
    let count = records.len() / TEMPLATE_INTS;
    if count == 0 {
        return Ok(Vec::new());
    }
    let dframes = gpu.upload(frames)?;
    let drecords = gpu.upload(records)?;
    let out = gpu.buffer::<u64>(2 * count)?;
    let list = args![&dframes, width, int(rsz, "template size")?, &drecords, int(count, "templates")?, &out];
    gpu.launch(Kernel::new(Module::Ncc, kernel), [(count as u32).div_ceil(WARPS), 1, 1], [32 * WARPS, 1, 1], 0, list)?;
    let mut sums = vec![0u64; 2 * count];
    gpu.download(&out, &mut sums)?;
    Ok(sums.chunks_exact(2).map(|s| (s[0], s[1])).collect())
}

/// The launch of every search of `call` over the frames at the addresses `frames`, and of
/// its null probes, their records uploaded once, one download each: each search's match as
/// the core's search returns it, each probe's coefficient at its one window.
fn search_and_probe<T: DeviceSample>(gpu: &Gpu, frames: &[u64], (w, h): (i32, i32), p: &RegisterParams, call: &Call) -> Result<Answers> {
    let count = call.sites.len() / SITE_WORDS;
    let (Some(sp), true) = (call.sp, count > 0) else { return Ok(Answers::default()) };
    let r = sp.radius;
    let side = 2 * (r + 1) + 1;
    let cells = side * side;
    let words = cells.div_ceil(32);
    let dframes = gpu.upload(frames)?;
    let dsites = gpu.upload(&call.sites)?;
    let dstats = gpu.upload(&call.stats)?;
    let values = gpu.buffer::<f64>(count * cells)?;
    let bits = gpu.zeroed::<u32>(count * words)?;
    let out = gpu.buffer::<f64>(RESULT_WORDS * count)?;
    let method_code = match p.method {
        SearchMethod::Log => 0,
        SearchMethod::LogPlain => 1,
        SearchMethod::Exhaustive => 2,
    };
    let accept = sp.accept.unwrap_or(f64::INFINITY);
    let count_i = int(count, "template searches")?;
    let list: Vec<Arg> = args![
        &dframes, w, h, p.rsz as i32, &dsites, &dstats, count_i, r as i32, method_code, accept, i32::from(sp.subpixel), &values, &bits, &out
    ]
    .to_vec();
    let threads = 32 * WARPS;
    gpu.launch(Kernel::new(Module::Ncc, T::KERNEL), [(count as u32).div_ceil(WARPS), 1, 1], [threads, 1, 1], 0, &list)?;
    let probed = probe_all::<T>(gpu, &dframes, w, p.rsz, (&dsites, &dstats), call)?;
    let mut res = vec![0f64; RESULT_WORDS * count];
    gpu.download(&out, &mut res)?;
    let found = res
        .chunks_exact(RESULT_WORDS)
        .map(|r| {
            if r[2] == f64::NEG_INFINITY {
                return None;
            }
            let offset = if sp.subpixel {
                let v: [[f64; 3]; 3] = core::array::from_fn(|j| core::array::from_fn(|k| r[4 + 3 * j + k]));
                quadratic_peak(&v)
            } else {
                (0.0, 0.0)
            };
            // Positions and counts are exact in f64.
            Some(Match { x: r[0] as usize, y: r[1] as usize, coefficient: r[2], offset, evaluations: r[3] as u32 })
        })
        .collect();
    Ok((found, probed))
}

/// The launch of `call`'s null probes over its searches' records already on the device
/// (`records`: sites and statistics), and its download: each probe's coefficient at its
/// start (`None`: a flat window).
fn probe_all<T: DeviceSample>(gpu: &Gpu, frames: &DevBuf<'_, u64>, w: i32, rsz: usize, (sites, stats): (&DevBuf<'_, i32>, &DevBuf<'_, f64>), call: &Call) -> Result<Vec<Option<f64>>> {
    let count = call.probes.len() / PROBE_INTS;
    if count == 0 {
        return Ok(Vec::new());
    }
    let dprobes = gpu.upload(&call.probes)?;
    let out = gpu.buffer::<f64>(count)?;
    let list = args![frames, w, rsz as i32, sites, stats, &dprobes, int(count, "null probes")?, &out];
    gpu.launch(Kernel::new(Module::Ncc, T::PROBE), [(count as u32).div_ceil(WARPS), 1, 1], [32 * WARPS, 1, 1], 0, list)?;
    let mut coefficients = vec![0f64; count];
    gpu.download(&out, &mut coefficients)?;
    Ok(coefficients.into_iter().map(|c| (c != f64::NEG_INFINITY).then_some(c)).collect())
}

/// Frames kept on the device by a run: a window's (at most `WINDOW + 2` distinct ones:
/// its frames, the keyframe and the last good frame) and two the run may go back to.
const RESIDENT: usize = WINDOW + 4;
/// Search scratch (cached coefficients) a speculative launch may take; the pair asked for
/// is registered whatever its own scratch.
const SPECULATION_SCRATCH: usize = 256 << 20;

/// A frame of the run kept on the device, by its index in the source.
struct Resident<'g, T> {
    index: usize,
    image: DevImage<'g, T>,
    terms: (f64, f64),
    used: u64,
}

/// The resident frames of each grey type (a run has one).
#[derive(Default)]
struct Caches<'g> {
    u8: Vec<Resident<'g, u8>>,
    u16: Vec<Resident<'g, u16>>,
    f32: Vec<Resident<'g, f32>>,
}

/// What a pair's registration depends on (the core's `plan_pair` reads the prediction only
/// rounded): a speculative result answers a request with the same key.
#[derive(Clone, Copy, PartialEq)]
struct Key {
    reference: usize,
    moving: usize,
    prediction: (i64, i64),
    params: RegisterParams,
}

impl Key {
    /// `None` for a non-finite prediction (an error, which the pair registered afresh gives).
    fn of(pair: &PairRequest<'_>, p: &RegisterParams) -> Option<Key> {
        let (x, y) = pair.prediction;
        (x.is_finite() && y.is_finite()).then(|| Key { reference: pair.reference.0, moving: pair.moving.0, prediction: (x.round() as i64, y.round() as i64), params: *p })
    }
}

/// What a device stitching run did, for the tests that it uploads each frame once and
/// batches pairs.
#[doc(hidden)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StitchCounts {
    /// Registration uploads of each frame index.
    pub uploads: Vec<usize>,
    /// Search launches.
    pub launches: usize,
    /// Pairs the run asked for, and how many of them a speculative launch had registered.
    pub pairs: usize,
    pub speculated: usize,
    /// Pairs registered on the device, a window's pairs the run did not ask for included.
    pub registered: usize,
    /// Launches of the quality sums, and the pairs whose quality measures they summed (a
    /// window's batch in one launch).
    pub quality_launches: usize,
    pub quality_pairs: usize,
    /// Frames uploaded for the composite, and downloads of the canvas.
    pub paste_uploads: usize,
    pub canvas_downloads: usize,
    /// Seconds the run spent inside device calls (on the shim: the kernels' emulation
    /// included); the rest of its time is host work.
    pub device_seconds: f64,
    /// The run's wall time, from its first frame to its panorama (the device's start and
    /// teardown left out).
    pub run_seconds: f64,
    /// Device allocations of the whole run (requests its buffer pool could not serve).
    pub allocations: usize,
}

struct State<'g> {
    frames: Caches<'g>,
    /// A window's pairs registered in one launch, waiting for their request.
    ahead: Vec<(Key, PairRegistration)>,
    clock: u64,
    counts: StitchCounts,
}

impl Default for State<'_> {
    fn default() -> Self {
        State { frames: Caches::default(), ahead: Vec::new(), clock: 0, counts: StitchCounts::default() }
    }
}

/// The device's pair registration as the core's stitching run asks for it: frames kept on
/// the device by index (each uploaded once while the run needs it), and the pairs the run
/// will probably ask for next registered in one launch.
struct DeviceRegistrar<'g> {
    gpu: &'g Gpu,
    /// The threads each pair's host work runs on ([`HostWork`]).
    par: Parallelism,
    state: Mutex<State<'g>>,
}

/// The tuning family of where a device stitch does each pair's host work (`tuning.rs`).
const HOST_WORK: &str = "stitch_host_work";
/// The environment variable that overrides the device's choice of [`HOST_WORK`].
pub const HOST_WORK_ENV: &str = "TESSERA_STITCH_HOST_WORK";

/// Where a device stitch plans and concludes a window's pairs: the host work between its
/// launches, tens of microseconds a pair (a PAL pair's 64 templates). The same results
/// either way; which is faster depends on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostWork {
    /// On the run's thread, one pair after another (the built-in default). The run's
    /// thread is not one of the pool's: handing the pairs to the pool puts it to sleep
    /// until the pool answers, which on the 2-core VM made the host's time a pair twice as
    /// long.
    RunThread,
    /// A pair to a thread of the pool, for a host with cores to spare. The whole launch
    /// (its plans, launches and conclusions) runs on a thread of the pool, so that the
    /// run's thread hands it over once, not once for each of its parallel steps.
    Pool,
}

impl Choice for HostWork {
    const WHAT: &'static str = "stitch host work design";
    const ALL: &'static [Self] = &[HostWork::RunThread, HostWork::Pool];
    fn name(self) -> &'static str {
        match self {
            HostWork::RunThread => "run-thread",
            HostWork::Pool => "pool",
        }
    }
}

impl Design for HostWork {
    const FAMILY: &'static str = HOST_WORK;
}

impl<'g> DeviceRegistrar<'g> {
    fn state(&self) -> Result<std::sync::MutexGuard<'_, State<'g>>> {
        self.state.lock().map_err(|_| Error::Backend("stitch registrar poisoned by an earlier panic".into()))
    }

    /// Frame `index` on the device, uploaded unless resident; the least recently used frame
    /// not used since `batch` (the clock when the current launch began) makes room.
    fn resident<T: DeviceSample>(&self, st: &mut State<'g>, batch: u64, index: usize, view: ImageView<'_, T>) -> Result<OnDevice> {
        st.clock += 1;
        let clock = st.clock;
        let cache = T::cache(&mut st.frames);
        if let Some(r) = cache.iter_mut().find(|r| r.index == index) {
            r.used = clock;
            return Ok(OnDevice { ptr: r.image.buf.ptr(), terms: r.terms });
        }
        let terms = T::f32_terms(view)?;
        let image = self.gpu.upload_view(view)?;
        let ptr = image.buf.ptr();
        if cache.len() >= RESIDENT {
            if let Some(old) = cache.iter().enumerate().filter(|(_, r)| r.used < batch).min_by_key(|(_, r)| r.used).map(|(k, _)| k) {
                cache.swap_remove(old);
            }
        }
        cache.push(Resident { index, image, terms, used: clock });
        let uploads = &mut st.counts.uploads;
        if uploads.len() <= index {
            uploads.resize(index + 1, 0);
        }
        uploads[index] += 1;
        Ok(OnDevice { ptr, terms })
    }

    /// Registers `pairs` together ([`register_jobs`]; their frames made resident first).
    fn launch<T: DeviceSample>(&self, st: &mut State<'g>, pairs: &[PairRequest<'_>], p: &RegisterParams) -> Result<Vec<Result<PairRegistration>>> {
        let batch = st.clock + 1;
        let mut jobs = Vec::with_capacity(pairs.len());
        for pair in pairs {
            let (reference, moving) = typed_pair::<T>(pair)?;
            // The moving frame first: its f32 terms are the CPU's first check.
            let m = self.resident(st, batch, pair.moving.0, moving)?;
            let r = self.resident(st, batch, pair.reference.0, reference)?;
            jobs.push(Job { reference, moving, devices: (r, m), prediction: pair.prediction });
        }
        let (registered, launched) = register_jobs(self.gpu, &jobs, p, self.par)?;
        st.counts.launches += usize::from(launched);
        st.counts.registered += jobs.len();
        Ok(registered)
    }

    fn register_typed<T: DeviceSample>(&self, pair: &PairRequest<'_>, p: &RegisterParams) -> Result<PairRegistration> {
        let mut st = self.state()?;
        st.counts.pairs += 1;
        if let Some(key) = Key::of(pair, p) {
            if let Some(k) = st.ahead.iter().position(|(a, _)| *a == key) {
                st.counts.speculated += 1;
                return Ok(st.ahead.swap_remove(k).1);
            }
        }
        let state = &mut *st;
        let registered = on_pool(self.par, || self.launch::<T>(state, std::slice::from_ref(pair), p))?.pop();
        registered.unwrap_or_else(|| Err(Error::Backend("internal: a launch answered no pair".into())))
    }

    /// Registers a window's planned pairs not yet done in one launch, keeping their results
    /// for the run's requests (the run offers exactly the requests it will make if its
    /// frames stay on the plan). A failure costs only the work: each pair is then
    /// registered afresh when asked (and its error, if any, reported then).
    fn speculate_typed<T: DeviceSample>(&self, pairs: &[PairRequest<'_>], p: &RegisterParams) -> Result<()> {
        let Some(first) = pairs.first() else { return Ok(()) };
        let mut st = self.state()?;
        // Results for frames the run has passed will never be asked for.
        st.ahead.retain(|(k, _)| k.moving >= first.moving.0);
        // A pair's scratch is at most npts^2 searches of (2 r + 3)^2 coefficients (f64 and
        // a bit each).
        let side = 2 * p.search_radius + 3;
        let per_pair = (p.npts * p.npts * side * side * 9).max(1);
        let most = (SPECULATION_SCRATCH / per_pair).clamp(1, WINDOW);
        let known = |st: &State<'_>, pair: &PairRequest<'_>| Key::of(pair, p).is_none_or(|key| st.ahead.iter().any(|(a, _)| *a == key));
        let todo: Vec<PairRequest<'_>> = pairs.iter().filter(|pair| !known(&st, pair)).take(most).cloned().collect();
        if todo.is_empty() {
            return Ok(());
        }
        let state = &mut *st;
        let Ok(found) = on_pool(self.par, || self.launch::<T>(state, &todo, p)) else { return Ok(()) };
        for (pair, registered) in todo.iter().zip(found) {
            // A pair that failed is registered afresh when asked (its error reported then).
            if let (Some(key), Ok(registered)) = (Key::of(pair, p), registered) {
                st.ahead.push((key, registered));
            }
        }
        Ok(())
    }
}

impl DeviceRegistrar<'_> {
    /// The quality sums of registered pairs on the device, their frames made resident: one
    /// launch for all.
    fn quality_typed<T: DeviceSample>(&self, requests: &[QualityRequest<'_>]) -> Option<Result<Vec<Vec<Moments<4>>>>> {
        let kernel = T::QUALITY?;
        Some((|| {
            let mut st = self.state()?;
            let batch = st.clock + 1;
            let mut frames = Vec::with_capacity(requests.len());
            let mut size = None;
            for q in requests {
                let (r, m) = (typed_frame::<T>(&q.reference.1)?, typed_frame::<T>(&q.moving.1)?);
                if size.is_some_and(|s| s != r.size()) || r.size() != m.size() {
                    return Err(Error::Backend("internal: quality sums of frames of different sizes".into()));
                }
                size = Some(r.size());
                let dm = self.resident(&mut st, batch, q.moving.0, m)?;
                let dr = self.resident(&mut st, batch, q.reference.0, r)?;
                frames.push((dr.ptr, dm.ptr));
            }
            let Some(size) = size else { return Ok(Vec::new()) };
            let pairs: Vec<_> = frames.into_iter().zip(requests.iter().map(|q| &q.plan)).collect();
            let sums = crate::quality::quality_sums(self.gpu, kernel, size, &pairs)?;
            st.counts.quality_launches += 1;
            st.counts.quality_pairs += requests.len();
            Ok(sums)
        })())
    }
}

/// The pair's two frames as views of `T` (a run's frames share one type).
fn typed_pair<'a, T: DeviceSample>(pair: &'a PairRequest<'_>) -> Result<(ImageView<'a, T>, ImageView<'a, T>)> {
    Ok((typed_frame::<T>(&pair.reference.1)?, typed_frame::<T>(&pair.moving.1)?))
}

/// A run's frame as a view of `T`, or the error of a run whose frames differ in type.
fn typed_frame<'a, T: DeviceSample>(g: &Gray<'a>) -> Result<ImageView<'a, T>> {
    T::typed(g).ok_or(Error::UnsupportedType { op: "stitch", types: "frames of differing pixel types" })
}

/// `by_type!(self.f(gray, args..))`: `self.f::<T>(args..)` for the grey type `T` of `gray`.
macro_rules! by_type {
    ($self:ident . $f:ident ($g:expr, $($a:expr),*)) => {
        match $g {
            Gray::U8(_) => $self.$f::<u8>($($a),*),
            Gray::U16(_) => $self.$f::<u16>($($a),*),
            Gray::F32(_) => $self.$f::<f32>($($a),*),
        }
    };
}

impl PairRegistrar for DeviceRegistrar<'_> {
    fn register(&self, pair: &PairRequest<'_>, p: &RegisterParams) -> Result<PairRegistration> {
        by_type!(self.register_typed(&pair.moving.1, pair, p))
    }
    fn speculate(&self, pairs: &[PairRequest<'_>], p: &RegisterParams) -> Result<()> {
        let Some(first) = pairs.first() else { return Ok(()) };
        by_type!(self.speculate_typed(&first.moving.1, pairs, p))
    }
    fn quality_sums(&self, requests: &[QualityRequest<'_>]) -> Option<Result<Vec<Vec<Moments<4>>>>> {
        let first = requests.first()?;
        by_type!(self.quality_typed(&first.moving.1, requests))
    }
}

/// Stitches a sequence ([`tessera_core::stitch::stitch_frames`]): the core's run (frame
/// reading, attempts, keyframes, skips, progress and cancellation) with every pair
/// registered on the device and the composite pasted on the device. The same panorama
/// and records as the CPU for integer frames; f32 positions within 1e-3 px.
///
/// Each frame is uploaded once for registration (kept on the device by index while the
/// run may register against it) and once more to be pasted. Each window of the run's
/// planned pairs ([`tessera_core::stitch::WINDOW`]) registers in one launch, all their
/// templates in one grid; a request with the same frames, parameters and prediction is
/// answered from that launch, anything else registered afresh, so the result is the CPU
/// run's. Each launch downloads one packed result buffer, and the canvas is
/// downloaded once. The quality measures (`p.quality`) of integer frames are summed on the
/// device (a launch per batch of registered pairs, their frames already resident), those of
/// f32 frames and of turned pairs on the host.
pub(crate) fn stitch(gpu: &Gpu, frames: &dyn FrameSource, p: &StitchParams, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<Panorama> {
    stitch_counted(gpu, frames, p, progress).map(|(pano, _)| pano)
}

/// [`stitch`], with what it did.
pub(crate) fn stitch_counted(gpu: &Gpu, frames: &dyn FrameSource, p: &StitchParams, progress: &mut dyn FnMut(usize) -> ControlFlow<()>) -> Result<(Panorama, StitchCounts)> {
    let par = Parallelism::AllThreads;
    let host_work = match tuning::chosen::<HostWork>(gpu)? {
        HostWork::RunThread => Parallelism::Sequential,
        HostWork::Pool => par,
    };
    let registrar = DeviceRegistrar { gpu, par: host_work, state: Mutex::new(State::default()) };
    let pasted = crate::stitch::PasteCounts::default();
    let mut canvas = |like: &AnyView<'_>, positions: &[Option<(f64, f64)>], blend: Blend| -> Result<Box<dyn Pasting + '_>> {
        crate::stitch::device_canvas(gpu, like, positions, blend, &pasted)
    };
    let start = std::time::Instant::now();
    let pano = stitch_frames_into(frames, p, par, progress, Some(&registrar), &mut canvas)?;
    let run_seconds = start.elapsed().as_secs_f64();
    let mut counts = registrar.state()?.counts.clone();
    (counts.paste_uploads, counts.canvas_downloads) = (pasted.uploads.get(), pasted.downloads.get());
    (counts.device_seconds, counts.run_seconds, counts.allocations) = (gpu.device_seconds(), run_seconds, gpu.allocations());
    Ok((pano, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call holding three searches with starts `starts`, as `Call::add` records them.
    fn call_of(starts: [(i32, i32); 3]) -> Call {
        let sites = starts.iter().flat_map(|&(x, y)| [x, y, x, y, 0, 1]).collect();
        Call { sp: Some(PROBE_PARAMS), sites, stats: vec![0.0; 3 * STAT_WORDS], probes: Vec::new() }
    }

    const PROBE_PARAMS: SearchParams = SearchParams { radius: 0, subpixel: false, accept: None };

    #[test]
    fn null_probes_are_added_in_order_or_not_at_all() {
        let bounds = (10, 10);
        let mut call = call_of([(1, 1), (10, 0), (4, 11)]);
        // Searches 1 and 2 of the call as one pair's range 0..2.
        let range = 1..3;
        assert_eq!(call.add_probes(&range, [(0, 0), (1, 0)].into_iter(), bounds).unwrap(), 0..2);
        assert_eq!(call.probes, [1, 1, 2, 1]);
        // A probe at search 2's start, which lies below the frame's last row: an error, and
        // none of the pair's probes added.
        let err = call.add_probes(&range, [(0, 0), (0, 1)].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::InvalidParameter { name: "search start", .. }), "{err:?}");
        assert!(err.to_string().contains("(4, 11)"), "{err}");
        // A probe of a search the range does not hold.
        let err = call.add_probes(&range, [(0, 0), (2, 0)].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        let err = call.add_probes(&range, [(0, 2)].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        assert_eq!(call.probes, [1, 1, 2, 1]);
        // A range beyond the call's searches.
        let err = call.add_probes(&(2..4), [(0, 0)].into_iter(), bounds).unwrap_err();
        assert!(matches!(err, Error::Backend(_)), "{err:?}");
        assert_eq!(call.probes, [1, 1, 2, 1]);
        // Every search of the call, search 0 probed at its own start.
        assert_eq!(call.add_probes(&(0..3), [(0, 0)].into_iter(), bounds).unwrap(), 2..3);
        assert_eq!(call.probes, [1, 1, 2, 1, 0, 0]);
    }
}

//! Registration and stitching, synthetic sequences, and image files: the stitching report
//! is the library's (`tessera::report`, the JSON contract of `tessera stitch --report`),
//! frames from files are read by the library's frame sources (`tessera::frames`), and the
//! parameters are built from the library's options (`tessera::options`), as the CLI builds
//! them, so nothing of the contract is written twice.

use crate::array::{image_to_numpy, input, Accepts, Input};
use crate::backend::choose;
use crate::errors::{to_py, type_error, value_error};
use crate::params::{choice, count, name_of, to_python, AUTO};
use numpy::PyUntypedArray;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError};
use pyo3::prelude::*;
use serde_json::json;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;
use tessera::frames::{frame_source, read_ahead_depth, resolve_inputs};
use tessera::options::{default_min_variance, scale_min_variance, RegisterOptions, StitchOptions};
use tessera::report::{peak_memory_mib, report};
use tessera::stitch::{synth_sequence as synth, Acceptance, Blend, FrameSource, InMemory, Motion, Panorama, RegisterParams, SearchMethod, StitchParams, SynthParams};
use tessera::{AnyImage, AnyView, Image, Parallelism, Pixel};

/// The CLI's `--frame-cache` default, MiB.
pub const FRAME_CACHE_MIB: usize = 64;

/// Writes a `#[pyfunction]` that takes the registration keywords, named and defaulted as
/// the library's `RegisterOptions` (whose field list this is: a field the library adds
/// fails to compile here until it is exposed), between the function's own keywords: those
/// before `..NAME: RegisterOptions` and those after it. The body sees the keywords checked
/// into a `RegisterOptions` called NAME (a negative count or an unknown name is a
/// `ValueError`); the ranges are the core's to check. `register_pair` and `stitch` share
/// the list this way.
macro_rules! with_registration_keywords {
    (
        $(#[$attr:meta])*
        pub fn $name:ident<$py:lifetime>($pyarg:ident: $pyty:ty, $($pos:ident: $pos_ty:ty),+, /, *,
            $($head:ident: $head_ty:ty = $head_default:expr,)*
            ..$args:ident: RegisterOptions,
            $($tail:ident: $tail_ty:ty = $tail_default:expr),+ $(,)?
        ) -> $ret:ty $body:block
    ) => {
        $(#[$attr])*
        #[pyfunction]
        #[pyo3(signature = ($($pos),+, /, *, $($head = $head_default,)*
            rsz = RegisterParams::default().rsz as i64,
            accept = name_of(RegisterParams::default().acceptance),
            cthresh = RegisterParams::default().cthresh,
            null_margin = RegisterParams::default().null_margin,
            min_coefficient = RegisterParams::default().min_coefficient,
            npts = RegisterParams::default().npts as i64,
            search_radius = RegisterParams::default().search_radius as i64,
            min_variance = None,
            method = name_of(RegisterParams::default().method),
            no_refine = !RegisterParams::default().refine,
            motion = name_of(RegisterParams::default().motion),
            fit_scale = RegisterParams::default().fit_scale,
            max_turn = RegisterParams::default().max_turn,
            $($tail = $tail_default),+))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name<$py>(
            $pyarg: $pyty,
            $($pos: $pos_ty,)+
            $($head: $head_ty,)*
            rsz: i64,
            accept: String,
            cthresh: f64,
            null_margin: f64,
            min_coefficient: f64,
            npts: i64,
            search_radius: i64,
            min_variance: Option<f64>,
            method: String,
            no_refine: bool,
            motion: String,
            fit_scale: bool,
            max_turn: f64,
            $($tail: $tail_ty),+
        ) -> $ret {
            let $args = RegisterOptions {
                rsz: count("rsz", rsz)?,
                accept: choice::<Acceptance>("accept", &accept)?,
                cthresh,
                null_margin,
                min_coefficient,
                npts: count("npts", npts)?,
                search_radius: count("search_radius", search_radius)?,
                min_variance,
                method: choice::<SearchMethod>("method", &method)?,
                no_refine,
                motion: choice::<Motion>("motion", &motion)?,
                fit_scale,
                max_turn,
            };
            $body
        }
    };
}

pub(crate) use with_registration_keywords;

with_registration_keywords! {
/// Registers ``moving`` against ``reference`` by normalized cross-correlation: ``npts x
/// npts`` templates of ``rsz x rsz`` pixels of the reference, each searched in the moving
/// frame within ``search_radius`` of ``prediction`` (``method``: ``"log"`` centre-biased
/// logarithmic search, ``"log-plain"`` the original three-step search, ``"exhaustive"``),
/// with ``NCC = sum (a - mean a)(b - mean b) / sqrt(sum (a - mean a)**2 sum (b - mean b)**2)``.
/// A match is accepted (``accept="adaptive"``) when its peak beats the template's largest
/// coefficient where it cannot match by ``null_margin`` (and is at least
/// ``min_coefficient``), or (``"fixed"``) when it is at least ``cthresh``; templates with
/// variance below ``min_variance`` are not searched (default: 4 grey levels squared,
/// scaled by the frame's value range for uint16 / float32, as the CLI). The agreeing
/// vectors' shift is refined to subpixel (Lucas-Kanade on their pixels unless
/// ``no_refine``). With ``motion="similarity"`` the vectors are also fitted with a rotation
/// (and a scale with ``fit_scale``) of at most ``max_turn`` degrees, kept where it is
/// significant against their scatter; ``"translation"`` fits the shift alone.
///
/// Frames of one dtype and shape (uint8, uint16, float32, or RGBA registered on the luma).
/// Returns a dict: ``shift`` ``(x, y)``, ``angle`` (degrees) and ``scale`` (moving pixel
/// ``(u, v)`` shows reference ``(x, y) + scale R(angle) (u, v)``, ``R(a) = [[cos a, -sin
/// a], [sin a, cos a]]``, x right, y down; without a turn ``(u + x, v + y)``), all None
/// with ``reason`` when skipped, and ``ncc``, ``margin``, ``confidence``, ``templates``,
/// ``textured``, ``above_threshold``, ``vectors_used``, ``evaluations``, ``vectors``.
pub fn register_pair<'py>(
    py: Python<'py>,
    reference: &Bound<'py, PyAny>,
    moving: &Bound<'py, PyAny>,
    /, *,
    prediction: (f64, f64) = (0.0, 0.0),
    ..args: RegisterOptions,
    backend: &str = AUTO,
    single_thread: bool = false,
) -> PyResult<Bound<'py, PyAny>> {
    let b = choose(backend, single_thread)?.backend;
    let (ri, mi) = (input(reference, "reference", Accepts::ALL)?, input(moving, "moving", Accepts::ALL)?);
    let (r, m) = (ri.view("reference")?, mi.view("moving")?);
    let mut p = args.params();
    if args.min_variance.is_none() {
        p.min_variance = default_min_variance(&r);
    }
    let reg = py.detach(|| b.register_pair(r, m, &p, prediction)).map_err(to_py)?;
    let vectors: Vec<_> = reg
        .vectors
        .iter()
        .map(|v| {
            json!({"template": [v.template.0, v.template.1], "found": [v.found.0, v.found.1], "shift": [v.shift.0, v.shift.1],
                   "coefficient": v.coefficient, "threshold": v.threshold, "evaluations": v.evaluations, "inlier": v.inlier})
        })
        .collect();
    let motion = reg.motion();
    let out = json!({
        "shift": motion.map(|m| [m.x, m.y]), "angle": motion.map(|m| m.angle.to_degrees()), "scale": motion.map(|m| m.scale),
        "reason": reg.skip.as_ref().map(|s| s.describe()),
        "ncc": reg.ncc, "margin": reg.margin, "confidence": reg.confidence, "templates": reg.templates,
        "textured": reg.textured, "above_threshold": reg.above_threshold, "vectors_used": reg.vectors_used,
        "evaluations": reg.evaluations, "vectors": vectors,
    });
    to_python(py, &out)
}
}

/// What `stitch` was given: frame files (after the library's resolution of directories and
/// patterns) or arrays.
pub(crate) enum Frames<'py> {
    Files(Vec<PathBuf>),
    Arrays(Vec<Input<'py>>),
}

pub(crate) fn frames_arg<'py>(frames: &Bound<'py, PyAny>) -> PyResult<Frames<'py>> {
    let not_found = |e: anyhow::Error| PyFileNotFoundError::new_err(format!("{e:#}"));
    if let Ok(one) = frames.extract::<PathBuf>() {
        return Ok(Frames::Files(resolve_inputs(&[one]).map_err(not_found)?));
    }
    if frames.cast::<PyUntypedArray>().is_ok() {
        return Err(type_error("frames: expected a list of arrays or of paths (or one path), got one array"));
    }
    let items: Vec<Bound<'py, PyAny>> = frames
        .try_iter()
        .map_err(|_| type_error("frames: expected a list of arrays, a list of paths, or a path"))?
        .collect::<PyResult<_>>()?;
    if items.first().is_some_and(|f| f.cast::<PyUntypedArray>().is_ok()) {
        let arrays = items
            .iter()
            .enumerate()
            .map(|(i, f)| input(f, &format!("frames[{i}]"), Accepts::ALL))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Frames::Arrays(arrays));
    }
    let paths = items
        .iter()
        .enumerate()
        .map(|(i, f)| f.extract::<PathBuf>().map_err(|_| type_error(format!("frames[{i}]: expected a path like frames[0], or all arrays"))))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Frames::Files(resolve_inputs(&paths).map_err(not_found)?))
}

/// Why a stitching run failed: the core's error, the frame source's, or a signal.
enum Failure {
    Core(tessera::Error),
    Source(anyhow::Error),
    Interrupted(PyErr),
}

/// The run: the texture threshold from the first frame that reads when none is given (as
/// `tessera stitch`), then the backend's stitch; Ctrl-C between frames stops it.
fn run(backend: &dyn tessera::Backend, source: &dyn FrameSource, p: StitchParams, min_variance: Option<f64>) -> Result<(Panorama, StitchParams, f64), Failure> {
    let p = scale_min_variance(p, min_variance, source);
    let mut interrupted = None;
    let t0 = Instant::now();
    let result = backend.stitch(source, &p, &mut |_| match Python::attach(|py| py.check_signals()) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => {
            interrupted = Some(e);
            ControlFlow::Break(())
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    match (result, interrupted) {
        (_, Some(e)) => Err(Failure::Interrupted(e)),
        (Err(e), None) => Err(Failure::Core(e)),
        (Ok(pano), None) => Ok((pano, p, secs)),
    }
}

with_registration_keywords! {
/// Stitches a sequence into a panorama by NCC registration (see :func:`register_pair`):
/// every frame against the current keyframe (kept while the predicted shift from it is at
/// most ``keyframe_shift`` of the frame size), frames that do not register where their
/// motion predicts retried from ``coarse`` phase-correlation estimates, pairs with too few
/// agreeing templates retried with templates of twice the side (unless ``no_grow``), and
/// where templates stay too faint, registered on the whole overlap from a clear
/// phase-correlation peak (unless ``no_whole_overlap``; ``refine_every_pair`` refines every
/// pair on the whole overlap: about twice to four times more precise, a seventh of the speed);
/// under ``motion="similarity"`` without ``fit_scale``, the scale fitted from the first pair
/// that shows a clear zoom on (unless ``no_detect_zoom``); frames
/// that come back over earlier keyframes registered against them too and all positions
/// solved together by robust least squares (unless ``no_close_loops``); then
/// the composite (``blend``: ``"overwrite"``, ``"average"``, ``"feather"``) at the positions
/// rounded to whole pixels, turned frames (``motion="similarity"``) resampled bilinearly.
/// A frame that cannot be read or registered is skipped with its reason.
///
/// ``frames``: a list of arrays (one dtype and shape; borrowed, not copied), or a list of
/// paths, or one path: image files, a directory (natural order), a glob pattern
/// (``"dir/*.png"``) or a multi-page TIFF, read as the run needs them (``frame_cache`` MiB
/// of decoded frames kept). Returns ``(panorama, report)``: the panorama array (the
/// frames' dtype) and the report dict of ``tessera stitch --report`` (``frames``, each
/// with its pose ``x``, ``y``, ``angle`` in degrees and, with ``fit_scale``, ``scale``;
/// ``panorama``, whose ``pose_meaning`` states the pose; ``quality``, ``params``, ``run``).
/// Raises ValueError when no two frames register (with the reasons), FileNotFoundError
/// for paths that name no frames, KeyboardInterrupt on Ctrl-C (between frames).
pub fn stitch<'py>(
    py: Python<'py>,
    frames: &Bound<'py, PyAny>,
    /, *,
    ..args: RegisterOptions,
    blend: String = name_of(StitchParams::default().blend),
    keyframe_shift: f64 = StitchParams::default().keyframe_shift,
    no_quality: bool = false,
    coarse: i64 = StitchParams::default().coarse_candidates as i64,
    no_grow: bool = false,
    no_close_loops: bool = !StitchParams::default().close_loops,
    no_whole_overlap: bool = !StitchParams::default().whole_overlap,
    refine_every_pair: bool = StitchParams::default().refine_every_pair,
    no_detect_zoom: bool = !StitchParams::default().detect_zoom,
    frame_cache: i64 = FRAME_CACHE_MIB as i64,
    backend: &str = AUTO,
    single_thread: bool = false,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let options = StitchOptions {
        register: args,
        blend: choice::<Blend>("blend", &blend)?,
        keyframe_shift,
        no_quality,
        coarse: count("coarse", coarse)?,
        no_grow,
        no_close_loops,
        no_whole_overlap,
        refine_every_pair,
        no_detect_zoom,
    };
    let p = options.params().map_err(to_py)?;
    let cache_bytes = count("frame_cache", frame_cache)?.saturating_mul(1 << 20);
    let b = choose(backend, single_thread)?.backend;
    let given = options.register.min_variance;
    let (outcome, labels) = match frames_arg(frames)? {
        Frames::Files(files) => {
            let labels: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            let outcome = py.detach(|| {
                // Labels as the CLI's: a multi-page TIFF names its pages.
                let read_ahead = read_ahead_depth(if single_thread { Parallelism::Sequential } else { Parallelism::AllThreads });
                let (source, labels) = frame_source(&files, cache_bytes, read_ahead).map_err(Failure::Source)?;
                run(b, source.as_ref(), p, given).map(|r| (r, labels))
            });
            match outcome {
                Ok((r, labels)) => (Ok(r), labels),
                Err(e) => (Err(e), labels),
            }
        }
        Frames::Arrays(arrays) => {
            let views = arrays.iter().enumerate().map(|(i, a)| a.view(&format!("frames[{i}]"))).collect::<PyResult<Vec<AnyView<'_>>>>()?;
            let labels = (0..views.len()).map(|i| format!("frames[{i}]")).collect();
            (py.detach(|| run(b, &InMemory(&views), p, given)), labels)
        }
    };
    let (pano, p, secs) = outcome.map_err(|e| match e {
        Failure::Core(e) => to_py(e),
        Failure::Source(e) => PyOSError::new_err(format!("{e:#}")),
        Failure::Interrupted(e) => e,
    })?;
    let extra = json!({"backend": b.name(), "seconds": (secs * 1e4).round() / 1e4, "output": null,
                       "peak_memory_mib": peak_memory_mib().map(|m| (m * 10.0).round() / 10.0)});
    let rep = report(&pano, &labels, None, &p, extra);
    Ok((image_to_numpy(py, pano.canvas.image)?, to_python(py, &rep)?))
}
}

/// A synthetic sequence with ground truth, as ``tessera synth-seq``: ``frames`` windows of
/// ``width x height`` cut from ``image`` magnified by ``zoom`` (bilinear), along a smooth
/// random subpixel path of speed at most ``max_step`` px per frame, with Gaussian noise of
/// ``noise`` grey levels, a gain changing linearly by ``gain_drift`` from first to last
/// frame, and ``blur`` passes of a 3x3 mean. Returns ``(frames, positions)``: a list of
/// arrays of the image's dtype and ``positions[i] = (x, y)``, frame ``i``'s pixel ``(u,
/// v)`` showing what frame 0 shows at ``(u + x, v + y)``.
#[pyfunction]
#[pyo3(signature = (image, /, *, frames = SynthParams::default().frames as i64, width = SynthParams::default().frame_width as i64,
                    height = SynthParams::default().frame_height as i64, zoom = SynthParams::default().zoom,
                    max_step = SynthParams::default().max_step, noise = SynthParams::default().noise_sigma,
                    gain_drift = SynthParams::default().gain_drift, blur = SynthParams::default().blur_passes as i64,
                    seed = SynthParams::default().seed))]
#[allow(clippy::too_many_arguments)]
pub fn synth_sequence<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    frames: i64,
    width: i64,
    height: i64,
    zoom: f64,
    max_step: f64,
    noise: f64,
    gain_drift: f64,
    blur: i64,
    seed: u64,
) -> PyResult<(Vec<Bound<'py, PyAny>>, Vec<(f64, f64)>)> {
    let p = SynthParams {
        frame_width: count("width", width)?,
        frame_height: count("height", height)?,
        frames: count("frames", frames)?,
        zoom,
        max_step,
        noise_sigma: noise,
        gain_drift,
        blur_passes: count("blur", blur)?,
        seed,
    };
    let inp = input(image, "image", Accepts::ALL)?;
    let src = inp.view("image")?;
    fn split<P: Pixel>(s: tessera::stitch::SynthSequence<P>) -> (Vec<AnyImage>, Vec<(f64, f64)>)
    where
        AnyImage: From<Image<P>>,
    {
        (s.frames.into_iter().map(AnyImage::from).collect(), s.positions)
    }
    let par = Parallelism::AllThreads;
    let (imgs, positions) = py
        .detach(|| -> tessera::Result<_> {
            Ok(match src {
                AnyView::U8(v) => split(synth(v, &p, par)?),
                AnyView::U16(v) => split(synth(v, &p, par)?),
                AnyView::F32(v) => split(synth(v, &p, par)?),
                AnyView::Rgba8(v) => split(synth(v, &p, par)?),
            })
        })
        .map_err(to_py)?;
    let arrays = imgs.into_iter().map(|i| image_to_numpy(py, i)).collect::<PyResult<Vec<_>>>()?;
    Ok((arrays, positions))
}

/// Reads an image with the CLI's decoders (PNG, TIFF, JPEG, PGM/PPM; their size limits):
/// gray as uint8 / uint16 / float32 ``(H, W)`` (a 32-bit integer TIFF as uint32), colour as
/// RGBA uint8 ``(H, W, 4)``.
#[pyfunction]
pub fn load<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    if !path.exists() {
        return Err(PyFileNotFoundError::new_err(format!("{}: no such file", path.display())));
    }
    let img = py.detach(|| tessera::io::load(&path)).map_err(|e| PyOSError::new_err(format!("{e:#}")))?;
    image_to_numpy(py, img)
}

/// Writes an image with the CLI's encoders, the format from the extension (float32 needs
/// ``.tif``).
#[pyfunction]
pub fn save(py: Python<'_>, path: PathBuf, image: &Bound<'_, PyAny>) -> PyResult<()> {
    let inp = input(image, "image", Accepts::ALL)?;
    let owned: AnyImage = match inp.view("image")? {
        AnyView::U8(v) => v.to_image().into(),
        AnyView::U16(v) => v.to_image().into(),
        AnyView::F32(v) => v.to_image().into(),
        AnyView::Rgba8(v) => v.to_image().into(),
    };
    py.detach(|| tessera::io::save(&owned, &path)).map_err(|e| {
        let msg = format!("{e:#}");
        if msg.contains("extension") || msg.contains("format") { value_error(msg) } else { PyOSError::new_err(msg) }
    })
}

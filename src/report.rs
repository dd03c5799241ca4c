//! The stitching report: the JSON contract of `tessera stitch --report`, which the Python
//! package's `stitch` returns too. Frames (pose, status, scores), panorama (size, origin),
//! quality, params (choices by their [`Choice`] names, as the command line spells them) and
//! what the caller adds under `run`.

use crate::stitch::{FrameRecord, Panorama, StitchParams};
use crate::Choice;
use serde_json::{json, Value};

/// `x` rounded to `digits` decimals.
pub fn round(x: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (x * k).round() / k
}

fn opt(x: Option<f64>) -> Value {
    x.map_or(Value::Null, |v| json!(round(v, 4)))
}

/// The process's peak resident memory in MiB (Linux), for the report.
pub fn peak_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}

/// The islands of a run (`stitch::FrameRecord::island`): each by its first frame, its
/// registered frames, whether the panorama holds it, and the pairs by which it joined
/// another (its frame, the other island's keyframe, that island).
fn islands(frames: &[FrameRecord]) -> Value {
    let firsts: std::collections::BTreeSet<usize> = frames.iter().filter_map(|f| f.island).collect();
    let list: Vec<Value> = firsts
        .iter()
        .map(|&first| {
            let members = frames.iter().filter(|f| f.island == Some(first));
            let joins: Vec<Value> = members
                .clone()
                .filter_map(|f| f.joined.map(|k| json!({"frame": f.index, "keyframe": k, "island": frames.get(k).and_then(|r| r.island)})))
                .collect();
            json!({"first_frame": first, "frames": members.clone().count(), "in_panorama": members.clone().any(|f| f.is_ok()), "joined_by": joins})
        })
        .collect();
    Value::Array(list)
}

/// The report of `pano`: frames (labelled by `labels`, with the true positions of `truth`
/// where given), panorama, quality, the params of `p`, and `extra` as `run`.
pub fn report(pano: &Panorama, labels: &[String], truth: Option<&[(f64, f64)]>, p: &StitchParams, extra: Value) -> Value {
    report_sized(pano, pano.canvas.image.size(), labels, truth, p, extra)
}

/// [`report`] of a panorama of `size`, whose canvas may have been streamed to disk (see
/// [`crate::large`]) and stands in `pano` only for its origin.
pub fn report_sized(pano: &Panorama, size: (usize, usize), labels: &[String], truth: Option<&[(f64, f64)]>, p: &StitchParams, extra: Value) -> Value {
    // Scales are reported where fitted: asked for, or switched on by a detected zoom.
    let scaled = p.register.fit_scale || pano.frames.iter().any(|f| f.scale != 1.0);
    let frames: Vec<Value> = pano
        .frames
        .iter()
        .map(|f| {
            // A frame on an island the panorama does not hold: its pose on its island.
            let at = f.position.or(f.island_position);
            let mut o = json!({
                "index": f.index,
                "file": labels.get(f.index).cloned().unwrap_or_default(),
                "x": at.map(|q| round(q.0, 3)),
                "y": at.map(|q| round(q.1, 3)),
                "angle": at.map(|_| round(f.angle.to_degrees(), 4)),
                "status": if f.is_ok() { "ok" } else if f.island_position.is_some() { "island" } else { "skipped" },
                "island": f.island,
                "joined": f.joined,
                "reference": f.reference,
                "ncc": round(f.ncc, 4),
                "vectors_used": f.vectors_used,
                "confidence": round(f.confidence, 3),
                "accepted_by": f.is_ok().then(|| if f.phase_significance.is_some() { "whole overlap" } else { p.register.acceptance.name() }),
                "margin": round(f.margin, 4),
                "phase_significance": opt(f.phase_significance),
                "evaluations": f.evaluations,
                "quality": opt(f.quality),
                "quality_grid": opt(f.quality_grid),
                "residual": opt(f.residual),
                "loop_closure": f.loop_closure,
            });
            if let Some(r) = &f.skip {
                o["reason"] = json!(r.describe());
            }
            if scaled {
                o["scale"] = json!(at.map(|_| round(f.scale, 6)));
            }
            if let Some(t) = truth.and_then(|t| t.get(f.index)) {
                o["true_x"] = json!(round(t.0, 3));
                o["true_y"] = json!(round(t.1, 3));
            }
            o
        })
        .collect();
    let (w, h) = size;
    let ok = pano.frames.iter().filter(|f| f.is_ok()).count();
    let on_islands = pano.frames.iter().filter(|f| f.island_position.is_some()).count();
    let r = &p.register;
    json!({
        "frames": frames,
        "panorama": {"width": w, "height": h, "origin_x": pano.canvas.origin.0, "origin_y": pano.canvas.origin.1,
                     "reference_frame": pano.reference,
                     "scale_fitted": scaled,
                     "origin_meaning": "panorama pixel (X, Y) shows what the reference frame shows at (X + origin_x, Y + origin_y)",
                     "pose_meaning": "frame pixel (u, v) shows what the reference frame shows at (x, y) + scale R(angle) (u, v), R(a) = [[cos a, -sin a], [sin a, cos a]], angle in degrees, x right, y down; for a frame of status island, what its island's first frame shows there"},
        "islands": islands(&pano.frames),
        "quality": {"mean_ncc": opt(pano.mean_ncc()), "mean_overlap_ncc": opt(pano.mean_quality()),
                    "mean_grid_ncc": opt(pano.mean_quality_grid()), "frames_ok": ok, "frames_on_islands": on_islands, "frames_skipped": pano.frames.len() - ok - on_islands},
        "params": {"rsz": r.rsz, "accept": r.acceptance.name(), "cthresh": r.cthresh, "null_margin": r.null_margin,
                   "min_coefficient": r.min_coefficient, "coarse_candidates": p.coarse_candidates, "grow_templates": p.grow_templates, "close_loops": p.close_loops, "whole_overlap": p.whole_overlap, "refine_every_pair": p.refine_every_pair, "detect_zoom": p.detect_zoom, "npts": r.npts, "search_radius": r.search_radius,
                   "min_variance": r.min_variance, "agreement": r.agreement, "min_vectors": r.min_vectors,
                   "subpixel": r.subpixel, "refine": r.refine, "method": r.method.name(),
                   "motion": r.motion.name(), "fit_scale": r.fit_scale, "max_turn": r.max_turn,
                   "blend": p.blend.name(), "keyframe_shift": p.keyframe_shift},
        "run": extra,
    })
}

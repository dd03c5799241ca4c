//! The options of stitching and stereo as the faces take them (the command line's flags,
//! the Python package's keywords: one name per option, `no_*` switches for what is on by
//! default), and the one conversion of each into the core's parameters, so that
//! `tessera stitch` and `tessera.stitch` cannot build different parameters from the same
//! options. Each face only maps its own syntax onto these structs.

use crate::stereo::{Cost, CostKind, Paths, StereoParams, Tiling};
use crate::stitch::{Acceptance, Blend, FrameSource, Motion, RegisterParams, SearchMethod, StitchParams};
use crate::AnyView;
use anyhow::{anyhow, bail, Context, Result};

/// Pair registration's options (`RegisterParams`' user-facing fields).
#[derive(Clone, Debug, PartialEq)]
pub struct RegisterOptions {
    /// Template side in pixels.
    pub rsz: usize,
    pub accept: Acceptance,
    pub cthresh: f64,
    pub null_margin: f64,
    pub min_coefficient: f64,
    /// Templates per side of the grid.
    pub npts: usize,
    pub search_radius: usize,
    /// The texture threshold; `None`: [`default_min_variance`] of the first frame.
    pub min_variance: Option<f64>,
    pub method: SearchMethod,
    /// Keep the consensus of the peak fits instead of refining the shift.
    pub no_refine: bool,
    pub motion: Motion,
    pub fit_scale: bool,
    pub max_turn: f64,
}

impl Default for RegisterOptions {
    /// `RegisterParams::default()`'s values, `min_variance` left to the first frame.
    fn default() -> Self {
        let r = RegisterParams::default();
        RegisterOptions {
            rsz: r.rsz,
            accept: r.acceptance,
            cthresh: r.cthresh,
            null_margin: r.null_margin,
            min_coefficient: r.min_coefficient,
            npts: r.npts,
            search_radius: r.search_radius,
            min_variance: None,
            method: r.method,
            no_refine: !r.refine,
            motion: r.motion,
            fit_scale: r.fit_scale,
            max_turn: r.max_turn,
        }
    }
}

impl RegisterOptions {
    /// The registration parameters; without `min_variance`, `RegisterParams`' default (8-bit
    /// scale), which [`scale_min_variance`] or [`default_min_variance`] replace once a frame
    /// is known.
    pub fn params(&self) -> RegisterParams {
        RegisterParams {
            rsz: self.rsz,
            cthresh: self.cthresh,
            acceptance: self.accept,
            null_margin: self.null_margin,
            min_coefficient: self.min_coefficient,
            npts: self.npts,
            search_radius: self.search_radius,
            min_variance: self.min_variance.unwrap_or(RegisterParams::default().min_variance),
            method: self.method,
            refine: !self.no_refine,
            motion: self.motion,
            fit_scale: self.fit_scale,
            max_turn: self.max_turn,
            ..Default::default()
        }
    }
}

/// A stitching run's options: the registration's and the sequence engine's.
#[derive(Clone, Debug, PartialEq)]
pub struct StitchOptions {
    pub register: RegisterOptions,
    pub blend: Blend,
    pub keyframe_shift: f64,
    pub no_quality: bool,
    /// Coarse (phase-correlation) candidates for a frame that loses track.
    pub coarse: usize,
    pub no_grow: bool,
    pub no_close_loops: bool,
    pub no_whole_overlap: bool,
    pub refine_every_pair: bool,
    pub no_detect_zoom: bool,
}

impl Default for StitchOptions {
    /// `StitchParams::default()`'s values.
    fn default() -> Self {
        let s = StitchParams::default();
        StitchOptions {
            register: RegisterOptions::default(),
            blend: s.blend,
            keyframe_shift: s.keyframe_shift,
            no_quality: !s.quality,
            coarse: s.coarse_candidates,
            no_grow: !s.grow_templates,
            no_close_loops: !s.close_loops,
            no_whole_overlap: !s.whole_overlap,
            refine_every_pair: s.refine_every_pair,
            no_detect_zoom: !s.detect_zoom,
        }
    }
}

impl StitchOptions {
    /// The stitching parameters, checked ([`StitchParams::validate`]).
    pub fn params(&self) -> crate::Result<StitchParams> {
        let p = StitchParams {
            register: self.register.params(),
            blend: self.blend,
            keyframe_shift: self.keyframe_shift,
            quality: !self.no_quality,
            coarse_candidates: self.coarse,
            grow_templates: !self.no_grow,
            close_loops: !self.no_close_loops,
            whole_overlap: !self.no_whole_overlap,
            refine_every_pair: self.refine_every_pair,
            detect_zoom: !self.no_detect_zoom,
        };
        p.validate()?;
        Ok(p)
    }
}

/// The texture threshold when none is given: `RegisterParams`' (4 squared grey levels on an
/// 8-bit scale, a standard deviation of 2), scaled for 16-bit and float frames by the
/// frame's value range, so a float frame in [0, 1] gets the same relative threshold as an
/// 8-bit one.
pub fn default_min_variance(frame: &AnyView<'_>) -> f64 {
    fn range<T: crate::Pixel + Into<f64>>(v: &crate::ImageView<'_, T>) -> f64 {
        let (lo, hi) = v.rows().flatten().fold((f64::MAX, f64::MIN), |(l, h), &x| {
            let x: f64 = x.into();
            if x.is_finite() { (l.min(x), h.max(x)) } else { (l, h) }
        });
        if hi > lo { hi - lo } else { 255.0 }
    }
    let r = match frame {
        AnyView::U8(_) | AnyView::Rgba8(_) => 255.0,
        AnyView::U16(v) => range(v),
        AnyView::F32(v) => range(v),
    };
    RegisterParams::default().min_variance * (r / 255.0) * (r / 255.0)
}

/// `p` with the texture threshold of the first frame of `source` that reads
/// ([`default_min_variance`]) when `given` is `None`; a live source waits for it.
pub fn scale_min_variance(mut p: StitchParams, given: Option<f64>, source: &dyn FrameSource) -> StitchParams {
    if given.is_none() {
        let first = (0..).take_while(|&i| i < source.len()).find_map(|i| source.frame(i).ok());
        if let Some(v) = first.as_ref().and_then(|f| f.view().ok()) {
            p.register.min_variance = default_min_variance(&v);
        }
    }
    p
}

/// Semi-global matching's options: the cost by its kind with the kind's settings, the
/// memory bound as automatic bands (`max_mem` MiB) or as tiles (`tile`, `WxH`).
#[derive(Clone, Debug, PartialEq)]
pub struct StereoOptions {
    /// Number of disparities.
    pub max_disp: usize,
    pub cost: CostKind,
    /// The census window, `WxH`.
    pub census_window: String,
    pub mi_iterations: usize,
    pub mi_levels: usize,
    /// Aggregation paths: 4, 5, 8 or 16.
    pub paths: usize,
    pub p1: Option<u16>,
    pub p2: Option<u16>,
    pub fixed_p2: bool,
    pub uniqueness: u8,
    pub subpixel: bool,
    pub lr_check: bool,
    pub median: bool,
    pub fill: bool,
    /// Tiles of `WxH` pixels instead of automatic bands.
    pub tile: Option<String>,
    pub overlap: usize,
    /// The automatic bands' working-set budget, MiB.
    pub max_mem: usize,
}

/// The default census window, `WxH`: the default cost's.
pub fn census_window_default() -> String {
    match StereoParams::default().cost {
        Cost::Census { width, height } => format!("{width}x{height}"),
        _ => unreachable!("the default stereo cost is census"),
    }
}

/// The default MI schedule (iterations, levels): that of [`CostKind::Mi`]'s default cost.
pub fn mi_default() -> (usize, usize) {
    match CostKind::Mi.default_cost() {
        Cost::Mi { iterations, levels } => (iterations, levels),
        _ => unreachable!("an MI kind's cost is MI"),
    }
}

/// The default automatic banding (working-set bytes, overlap): `Tiling::default()`'s.
pub fn tiling_default() -> (usize, usize) {
    match Tiling::default() {
        Tiling::Auto { max_bytes, overlap } => (max_bytes, overlap),
        Tiling::Tiles { .. } => unreachable!("the default tiling is automatic"),
    }
}

/// `WxH` -> (W, H); an error names `what`.
pub fn parse_wxh(s: &str, what: &str) -> Result<(usize, usize)> {
    let (w, h) = s.split_once(['x', 'X']).with_context(|| format!("{what} {s:?}: expected WxH"))?;
    Ok((w.trim().parse().with_context(|| format!("{what} width {w:?}"))?, h.trim().parse().with_context(|| format!("{what} height {h:?}"))?))
}

/// A tile grid's `COLSxROWS` (the command line's `--grid`) -> (cols, rows). Errors: not
/// `COLSxROWS`, a side that is not a positive whole number, a tile count beyond `usize`.
pub fn parse_grid(s: &str) -> Result<(usize, usize)> {
    let (c, r) = s.split_once(['x', 'X']).ok_or_else(|| anyhow!("--grid {s}: expected COLSxROWS, e.g. 4x3"))?;
    let n = |t: &str| t.trim().parse::<usize>().ok().filter(|&v| v > 0).ok_or_else(|| anyhow!("--grid {s}: {t:?} is not a positive whole number"));
    let (cols, rows) = (n(c)?, n(r)?);
    if cols.checked_mul(rows).is_none() {
        bail!("--grid {s}: {cols} x {rows} tiles is more than any tile count ({} at most)", usize::MAX);
    }
    Ok((cols, rows))
}

/// Nominal tile positions from the text of a positions CSV (the command line's
/// `--positions`, named `name` in messages): one line per tile in input order, the last two
/// fields x and y (fields separated by `,`, `;` or tabs; blank lines skipped), divided by
/// `pixel_size` when given (positions in micrometres). The first line is a header when both
/// of those fields are names, not numbers; `NaN` and `inf` read as numbers, and are refused
/// as invalid values. Errors name the line: a field that is not a number, a value that is
/// not finite, a `pixel_size` that is not finite and positive.
pub fn parse_positions(text: &str, pixel_size: Option<f64>, name: &str) -> Result<Vec<(f64, f64)>> {
    let scale = match pixel_size {
        Some(s) if s.is_finite() && s > 0.0 => s,
        Some(s) => bail!("--pixel-size {s}: expected a positive number of micrometres per pixel"),
        None => 1.0,
    };
    let mut out = Vec::new();
    let mut first = true;
    for (k, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split([',', ';', '\t']).map(str::trim).filter(|f| !f.is_empty()).collect();
        if fields.len() < 2 {
            continue;
        }
        let header_allowed = std::mem::take(&mut first);
        let (xs, ys) = (fields[fields.len() - 2], fields[fields.len() - 1]);
        match (xs.parse::<f64>(), ys.parse::<f64>()) {
            (Ok(x), Ok(y)) => {
                let (px, py) = (x / scale, y / scale);
                for (axis, v, given) in [("x", px, xs), ("y", py, ys)] {
                    if !v.is_finite() {
                        bail!("{name} line {}: {axis} = {given} is not a finite number of {}", k + 1, if pixel_size.is_some() { "micrometres within range" } else { "pixels" });
                    }
                }
                out.push((px, py));
            }
            (Err(_), Err(_)) if header_allowed => continue,
            _ => bail!("{name} line {}: expected x and y numbers as the last two fields, got {line:?}", k + 1),
        }
    }
    Ok(out)
}

impl Default for StereoOptions {
    /// `StereoParams::default()`'s values.
    fn default() -> Self {
        let st = StereoParams::default();
        let (mi_iterations, mi_levels) = mi_default();
        let (max_bytes, overlap) = tiling_default();
        StereoOptions {
            max_disp: st.max_disparity,
            cost: st.cost.kind(),
            census_window: census_window_default(),
            mi_iterations,
            mi_levels,
            paths: st.paths.count(),
            p1: None,
            p2: None,
            fixed_p2: !st.adaptive_p2,
            uniqueness: st.uniqueness,
            subpixel: st.subpixel,
            lr_check: st.lr_check,
            median: st.median,
            fill: st.fill,
            tile: None,
            overlap,
            max_mem: max_bytes >> 20,
        }
    }
}

impl StereoOptions {
    /// The stereo parameters. Errors: a census window or tile that is not `WxH`, a path
    /// count other than 4, 5, 8 or 16; ranges are the core's to check.
    pub fn params(&self) -> Result<StereoParams> {
        let cost = match self.cost {
            CostKind::Census => {
                let (width, height) = parse_wxh(&self.census_window, "census window")?;
                Cost::Census { width, height }
            }
            CostKind::Ad => Cost::Ad,
            CostKind::Mi => Cost::Mi { iterations: self.mi_iterations, levels: self.mi_levels },
        };
        let tiling = match &self.tile {
            Some(t) => {
                let (width, height) = parse_wxh(t, "tile")?;
                Tiling::Tiles { width, height, overlap: self.overlap }
            }
            None => Tiling::Auto { max_bytes: self.max_mem.saturating_mul(1 << 20), overlap: self.overlap },
        };
        Ok(StereoParams {
            max_disparity: self.max_disp,
            cost,
            paths: Paths::from_count(self.paths)?,
            p1: self.p1,
            p2: self.p2,
            adaptive_p2: !self.fixed_p2,
            uniqueness: self.uniqueness,
            subpixel: self.subpixel,
            lr_check: self.lr_check,
            lr_max_diff: StereoParams::default().lr_max_diff,
            median: self.median,
            fill: self.fill,
            tiling,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_options_give_the_default_params() {
        assert_eq!(StitchOptions::default().params().unwrap(), StitchParams::default());
        assert_eq!(StereoOptions::default().params().unwrap(), StereoParams::default());
    }

    #[test]
    fn stereo_costs_and_tiles() {
        let o = StereoOptions { cost: CostKind::Mi, mi_iterations: 2, mi_levels: 1, tile: Some("64x48".into()), overlap: 8, ..Default::default() };
        let p = o.params().unwrap();
        assert_eq!(p.cost, Cost::Mi { iterations: 2, levels: 1 });
        assert_eq!(p.tiling, Tiling::Tiles { width: 64, height: 48, overlap: 8 });
        let e = StereoOptions { census_window: "7by5".into(), ..Default::default() }.params().unwrap_err();
        assert_eq!(format!("{e:#}"), "census window \"7by5\": expected WxH");
        assert!(StereoOptions { paths: 6, ..Default::default() }.params().is_err());
    }

    #[test]
    fn grids_that_overflow_the_tile_count_are_refused() {
        assert_eq!(parse_grid("4x3").unwrap(), (4, 3));
        let e = format!("{:#}", parse_grid("18446744073709551615x2").unwrap_err());
        assert!(e.contains("more than any tile count"), "{e}");
        assert!(format!("{:#}", parse_grid("0x2").unwrap_err()).contains("positive whole number"));
        assert!(format!("{:#}", parse_grid("4").unwrap_err()).contains("COLSxROWS"));
    }

    #[test]
    fn a_header_is_a_line_of_names_and_non_finite_values_are_invalid() {
        let p = parse_positions("tile,x,y\n0,0,0\n1,90.5,0\n", None, "p.csv").unwrap();
        assert_eq!(p, [(0.0, 0.0), (90.5, 0.0)]);
        assert_eq!(parse_positions("0;0;0\n\n1;10;20\n", Some(2.0), "p.csv").unwrap(), [(0.0, 0.0), (5.0, 10.0)]);
        for (text, line) in [("0,NaN,0\n1,90,0\n", 1), ("0,0,inf\n1,90,0\n", 1), ("0,0,0\n1,-infinity,0\n", 2)] {
            let e = format!("{:#}", parse_positions(text, None, "p.csv").unwrap_err());
            assert!(e.contains(&format!("p.csv line {line}:")) && e.contains("not a finite number"), "{text:?}: {e}");
        }
        let e = format!("{:#}", parse_positions("0,0,0\n1,x,y\n", None, "p.csv").unwrap_err());
        assert!(e.contains("line 2") && e.contains("expected x and y numbers"), "{e}");
        // Micrometres that overflow once divided by a tiny pixel size.
        assert!(parse_positions("0,1e300,0\n", Some(1e-300), "p.csv").is_err());
        assert!(parse_positions("0,0,0\n", Some(0.0), "p.csv").is_err());
    }
}

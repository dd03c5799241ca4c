//! Entry point of tile-grid stitching: `Native.stitchGrid` registers the tiles of a
//! microscope scan laid on a `cols x rows` grid (the core's `stitch::grid`: every
//! neighbouring pair from its nominal offset, all positions solved together) and composites
//! them, as `tessera stitch --grid` does.
//!
//! Like a sequence ([`crate::stitch`]) the run is long and reports progress to Java between
//! pairs, which may cancel it, so the tiles are copied into Rust memory first and the canvas
//! comes back as a new Java array. Registration and composite run on the CPU core whatever
//! the `backend` option says (tile pairs have no GPU path yet).

use crate::error::{bad_arg, BridgeError, Result};
use crate::options::{Op, OptValue, Visitor};
use crate::pixels::{dims, to_java};
use crate::progress::with_java_progress;
use crate::stitch::{copy_frames, reason};
use crate::{guarded, options};
use jni::objects::{JClass, JObject, JObjectArray, JString, JValue};
use crate::level::Level;
use jni::sys::{jboolean, jint, jlong};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use tessera::large::{composite_in_memory, default_max_mem_mib, write_composite, OutputOptions, MAX_STREAMED_CANVAS};
use tessera::pyramid::level_sizes;
use tessera::ome_tiff::OmeTiffOptions;
use jni::{jni_sig, jni_str, Env, EnvUnowned};
use tessera::flatfield::FieldSource;
use tessera::grid::Planes;
use tessera_core::shading::Corrected;
use tessera_core::stitch::{grid_positions, DEFAULT_OVERLAP, neighbours, register_tiles, Blend, Corner, FrameSource, GridParams, InMemory, Mosaic, Plan, Similarity, TileOrder, MAX_CANVAS};
use tessera_core::{AnyImage, AnyView, Parallelism};


/// A grid run's options: the layout (overlap in percent of the tile, acquisition order,
/// first tile's corner), the registration ([`GridParams`]), the blend and the shading
/// correction.
#[derive(Clone, Debug, PartialEq)]
pub struct GridRun {
    pub overlap_percent: f64,
    pub order: TileOrder,
    pub start: Corner,
    pub grid: GridParams,
    pub blend: Blend,
    pub flatfield: Field,
    pub darkfield: Field,
    /// Channels and time points: the tiles are the grid's blocks, channel by channel within
    /// each time point ([`crate::grid_planes`]).
    pub planes: Planes,
    /// Cycles of a re-stained slide in place of time points ([`Planes::new`]).
    pub cycles: usize,
}

impl Default for GridRun {
    fn default() -> Self {
        GridRun {
            overlap_percent: DEFAULT_OVERLAP * 100.0,
            order: TileOrder::default(),
            start: Corner::default(),
            grid: GridParams::default(),
            blend: Blend::default(),
            flatfield: Field::default(),
            darkfield: Field::default(),
            planes: Planes::default(),
            cycles: 1,
        }
    }
}

/// A shading field as the command line's `--flatfield` / `--darkfield` take it: `none`,
/// `estimate` (from the tiles) or an image file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Field(Option<String>);

impl OptValue for Field {
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "" => Err("expected none, estimate or an image file".into()),
            "none" => Ok(Field(None)),
            v => Ok(Field(Some(v.to_string()))),
        }
    }
    fn show(&self) -> String {
        self.0.clone().unwrap_or_else(|| "none".into())
    }
}

impl Field {
    /// The library's field source (a file must exist), for option `flag`.
    pub(crate) fn source(&self, flag: &str) -> Result<Option<FieldSource>> {
        self.0.as_deref().map(|v| FieldSource::parse(v, flag).map_err(|e| bad_arg(format!("{e:#}")))).transpose()
    }
}

/// `overlap` (percent), `order` (`row`, `column`, `snake-row`, `snake-column`), `start`
/// (`top-left`, ...), the registration's options, `stage-error` (fraction of a tile),
/// `coarse` (phase-correlation seeds), `blend`, and `flatfield` / `darkfield` (`none`,
/// `estimate` or an image file: the tiles corrected for shading before registration and in
/// the mosaic), `channels`, `time-points`, `cycles`, `register-channel` and
/// `reuse-positions`: the command line's names.
impl Op for GridRun {
    const NAME: &'static str = "grid";
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
        v.field("overlap", &mut self.overlap_percent)?;
        v.field("order", &mut self.order)?;
        v.field("start", &mut self.start)?;
        self.grid.register.visit(v)?;
        v.field("stage-error", &mut self.grid.stage_error)?;
        v.field("coarse", &mut self.grid.coarse_candidates)?;
        v.field("blend", &mut self.blend)?;
        v.field("flatfield", &mut self.flatfield)?;
        v.field("darkfield", &mut self.darkfield)?;
        v.field("channels", &mut self.planes.channels)?;
        v.field("time-points", &mut self.planes.time_points)?;
        v.field("cycles", &mut self.cycles)?;
        v.field("register-channel", &mut self.planes.register_channel)?;
        v.field("reuse-positions", &mut self.planes.reuse_positions)
    }
}

/// `GridResult Native.stitchGrid(Object[] tiles, int width, int height, int cols, int rows,
/// String options, String ome, boolean force, int omeTile, long maxPixels, Native.Progress
/// progress)`: `cols * rows` tiles of one pixel type, each `width x height`, in acquisition
/// order. `progress` (may be null) is called on this thread before each neighbouring pair
/// and after the last, with the pairs done of all, then, when the mosaic is streamed, after
/// each strip with the mosaic rows written of all; false stops the run (a
/// `CancellationException`), and so does an exception it throws, which is left pending for
/// the caller.
///
/// The mosaic comes back whole when it fits: at most `maxPixels` (the Java heap's share;
/// 0 or less: no such bound) and the core's `MAX_CANVAS` pixels. Otherwise, or always when
/// `force`, and when `ome` (a path) is not null, it is composited in strips and streamed to
/// a pyramidal OME-TIFF at `ome` with `omeTile`-pixel tiles, as `tessera stitch --grid ...
/// -o FILE.ome.tif` does (the library's `large::write_composite`, the command line's too),
/// and the result holds the largest level of that pyramid that fits ([`crate::level`]).
/// Without `ome`, a mosaic beyond `MAX_CANVAS` is an error that prints the command line.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_tessera_ij_Native_nativeStitchGrid<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tiles: JObjectArray<'l>,
    width: jint,
    height: jint,
    cols: jint,
    rows: jint,
    options: JString<'l>,
    ome: JString<'l>,
    force: jboolean,
    ome_tile: jint,
    max_pixels: jlong,
    progress: JObject<'l>,
) -> JObject<'l> {
    guarded(&mut env, |env| {
        // The backend is parsed (a bad name is still an error) but unused: tile pairs run on
        // the CPU core.
        let (run, _backend) = options::from_java::<GridRun>(env, &options)?;
        run.grid.validate()?;
        let (w, h) = dims(width, height)?;
        let (cols, rows) = dims(cols, rows).map_err(|_| bad_arg(format!("grid {cols}x{rows}: the numbers of columns and rows must be positive")))?;
        let ome: Option<PathBuf> = if ome.is_null() { None } else { Some(PathBuf::from(ome.try_to_string(env)?)) };
        let tile = usize::try_from(ome_tile).unwrap_or(0);
        if ome.is_some() && (!tile.is_multiple_of(16) || !(16..=4096).contains(&tile)) {
            return Err(bad_arg(format!("OME-TIFF tile side {ome_tile} must be a multiple of 16 from 16 to 4096")));
        }
        let limit = if max_pixels > 0 { MAX_CANVAS.min(usize::try_from(max_pixels).unwrap_or(usize::MAX)) } else { MAX_CANVAS };
        let owned_tiles = copy_frames(env, &tiles, w, h)?;
        if run.planes.asked() || run.cycles > 1 {
            return crate::grid_planes::stitch_planes(env, &progress, &owned_tiles, (cols, rows), &run, force, limit);
        }
        if cols * rows != owned_tiles.len() {
            return Err(bad_arg(format!("a {cols}x{rows} grid is {} tiles, but {} were given", cols * rows, owned_tiles.len())));
        }
        let nominal = grid_positions(cols, rows, (w, h), run.overlap_percent / 100.0, run.order, run.start)?;
        let views = owned_tiles
            .iter()
            .map(|t| t.view().ok_or_else(|| BridgeError::State("internal: a tile image without a view".into())))
            .collect::<Result<Vec<AnyView<'_>>>>()?;
        let raw = InMemory(&views);
        // Shading: the tiles corrected as they are read, for registration and the mosaic.
        let (flat, dark) = (run.flatfield.source("flatfield")?, run.darkfield.source("darkfield")?);
        if dark.is_some() && flat.is_none() {
            return Err(bad_arg("darkfield needs flatfield (estimate, or a file)".to_string()));
        }
        let prepared = tessera::flatfield::prepare(flat.as_ref(), dark.as_ref(), &raw, (w, h)).map_err(|e| bad_arg(format!("{e:#}")))?;
        let corrected = prepared.as_ref().map(|q| Corrected { inner: &raw, shading: &q.shading });
        let source: &dyn FrameSource = match &corrected {
            Some(c) => c,
            None => &raw,
        };
        let total = neighbours(&nominal, (w, h)).len();
        let mosaic = with_java_progress(env, &progress, total, ("grid stitching", "pair"), |report| {
            register_tiles(source, &nominal, &run.grid, Parallelism::AllThreads, report)
        })?;
        let positions: Vec<Option<(f64, f64)>> = mosaic.tiles.iter().map(|t| t.unreadable.is_none().then_some(t.position)).collect();
        let poses: Vec<Option<Similarity>> = positions.iter().map(|p| p.map(Similarity::translation)).collect();
        let plan = Plan::with_poses(&views[0], &poses, MAX_STREAMED_CANVAS)?;
        let (cw, ch) = plan.size;
        match ome {
            Some(path) if force || cw.saturating_mul(ch) > limit => {
                let streamed = stream(env, &progress, source, &views[0], &poses, &run, &path, tile, limit, plan.size)?;
                grid_result(env, std::slice::from_ref(&streamed.image), plan.origin, &mosaic, Some((&path, streamed.level, plan.size)), (1, 1))
            }
            _ => {
                let canvas = composite_in_memory(source, &positions, run.blend).map_err(|e| match e.downcast::<tessera_core::Error>() {
                    Ok(core) => beyond_memory(core, (cols, rows), &run),
                    Err(other) => bad_arg(format!("{other:#}")),
                })?;
                grid_result(env, std::slice::from_ref(&canvas.image), canvas.origin, &mosaic, None, (1, 1))
            }
        }
    })
}

/// A streamed mosaic: the level kept in memory and its index in the pyramid.
struct Streamed {
    image: AnyImage,
    level: usize,
}

/// Composites the tiles at `poses` in strips and streams them to the pyramidal OME-TIFF
/// `path` (the library's `large::write_composite`, the command line's too), keeping in
/// memory the largest level of at most `limit` pixels (the smallest level when none is
/// that small). Progress counts mosaic rows; a cancelled or failed run removes the
/// incomplete file (never a file it did not begin to write).
#[allow(clippy::too_many_arguments)]
fn stream(
    env: &mut Env<'_>,
    progress: &JObject<'_>,
    source: &dyn FrameSource,
    like: &AnyView<'_>,
    poses: &[Option<Similarity>],
    run: &GridRun,
    path: &Path,
    tile: usize,
    limit: usize,
    size: (usize, usize),
) -> Result<Streamed> {
    let sizes = level_sizes(size, tile);
    let k = sizes.iter().position(|&(w, h)| w * h <= limit).unwrap_or(sizes.len() - 1);
    let mut level = Level::new(like, size, k);
    let opts = OutputOptions { max_mem_mib: default_max_mem_mib(), ome: OmeTiffOptions { tile, name: "tessera grid mosaic".into(), ..OmeTiffOptions::default() }, ..OutputOptions::default() };
    let mut failure = None;
    let mut begun = false;
    let written = with_java_progress(env, progress, size.1, ("writing the OME-TIFF", "row"), |report| {
        let mut on_strip = |strip: &AnyView<'_>, y0: usize| -> anyhow::Result<()> {
            begun = true;
            level.push(strip);
            match report(y0 + strip.size().1) {
                ControlFlow::Continue(()) => Ok(()),
                ControlFlow::Break(()) => Err(tessera_core::Error::Cancelled.into()),
            }
        };
        match write_composite(source, like, poses, run.blend, path, &opts, &mut on_strip) {
            Ok(w) => Ok(Some(w)),
            Err(e) if matches!(e.downcast_ref::<tessera_core::Error>(), Some(tessera_core::Error::Cancelled)) => Err(tessera_core::Error::Cancelled),
            Err(e) => {
                failure = Some(e);
                Ok(None)
            }
        }
    });
    let written = match written {
        Ok(Some(w)) => w,
        other => {
            if begun {
                let _ = std::fs::remove_file(path);
            }
            return match (other, failure) {
                (_, Some(e)) => Err(bad_arg(format!("{e:#}"))),
                (Err(e), None) => Err(e),
                (Ok(_), None) => Err(BridgeError::State("internal: the OME-TIFF run ended without a result".into())),
            };
        }
    };
    debug_assert_eq!(written.ome.as_ref().map(|o| o.levels().get(k).copied()), Some(Some(level.size())));
    Ok(Streamed { image: level.finish()?, level: k })
}

/// A canvas too large to be one image in memory is an error that says how to stitch the grid
/// anyway (reached only when no OME-TIFF path was given: the plugin always gives one): the
/// command line composites in strips and streams a pyramidal OME-TIFF. Other errors pass
/// unchanged.
fn beyond_memory(e: tessera_core::Error, (cols, rows): (usize, usize), run: &GridRun) -> BridgeError {
    match e {
        tessera_core::Error::InvalidParameter { name: "canvas", reason } => bad_arg(format!(
            "the mosaic is too large for one image in memory ({reason}); the command line streams it to a pyramidal OME-TIFF: \
             tessera stitch FOLDER --grid {cols}x{rows} --overlap {} --order {} --start {} -o mosaic.ome.tif",
            run.overlap_percent,
            crate::options::OptValue::show(&run.order),
            crate::options::OptValue::show(&run.start)
        )),
        other => other.into(),
    }
}

/// The Java `GridResult`: the image (a new array of the tiles' type: the canvas, or a level
/// of the OME-TIFF it was streamed to; with several `planes` (channels, time points) one
/// array per plane, channel by channel within each time point, the first also as the
/// image), the canvas's origin (full resolution), one `GridResult.Tile` per tile, one
/// `GridResult.Pair` per neighbouring pair and, when streamed, the file, the level's index
/// and the full-resolution size.
pub(crate) fn grid_result<'l>(
    env: &mut Env<'l>,
    images: &[AnyImage],
    (ox, oy): (i64, i64),
    m: &Mosaic,
    ome: Option<(&Path, usize, (usize, usize))>,
    (channels, times): (usize, usize),
) -> Result<JObject<'l>> {
    let Some(image) = images.first() else { return Err(BridgeError::State("internal: a grid result without an image".into())) };
    let tiles = env.new_object_array(m.tiles.len() as jint, jni_str!("tessera/ij/GridResult$Tile"), JObject::null())?;
    for (i, t) in m.tiles.iter().enumerate() {
        let status = JString::from_str(env, tile_status(m, i))?;
        let why = reason(env, t.unreadable.clone())?;
        let record = env.new_object(
            jni_str!("tessera/ij/GridResult$Tile"),
            jni_sig!("(DDLjava/lang/String;DLjava/lang/String;)V"),
            &[t.position.0.into(), t.position.1.into(), (&status).into(), largest_residual(m, i).into(), (&why).into()],
        )?;
        tiles.set_element(env, i, &record)?;
        // Freed as they go: a large grid would overflow the frame's local references.
        env.delete_local_ref(record);
        env.delete_local_ref(status);
        env.delete_local_ref(why);
    }
    let pairs = env.new_object_array(m.pairs.len() as jint, jni_str!("tessera/ij/GridResult$Pair"), JObject::null())?;
    for (k, q) in m.pairs.iter().enumerate() {
        let (dx, dy) = q.shift.unwrap_or((f64::NAN, f64::NAN));
        let why = reason(env, q.skip.clone())?;
        let record = env.new_object(
            jni_str!("tessera/ij/GridResult$Pair"),
            jni_sig!("(IIZDDDDIDLjava/lang/String;)V"),
            &[
                (q.a as jint).into(),
                (q.b as jint).into(),
                q.shift.is_some().into(),
                dx.into(),
                dy.into(),
                q.ncc.into(),
                q.margin.into(),
                (q.vectors_used as jint).into(),
                q.residual.unwrap_or(f64::NAN).into(),
                (&why).into(),
            ],
        )?;
        pairs.set_element(env, k, &record)?;
        env.delete_local_ref(record);
        env.delete_local_ref(why);
    }
    let pixels = to_java(env, image)?;
    let planes = if images.len() > 1 {
        let all = env.new_object_array(images.len() as jint, jni_str!("java/lang/Object"), JObject::null())?;
        all.set_element(env, 0, &pixels)?;
        for (k, plane) in images.iter().enumerate().skip(1) {
            let array = to_java(env, plane)?;
            all.set_element(env, k, &array)?;
            env.delete_local_ref(array);
        }
        JObject::from(all)
    } else {
        JObject::null()
    };
    let (cw, ch) = image.size();
    let (path, level, (fw, fh)) = match ome {
        Some((p, k, full)) => (JString::from_str(env, p.to_string_lossy())?, k, full),
        None => (JString::null(), 0, (cw, ch)),
    };
    Ok(env.new_object(
        jni_str!("tessera/ij/GridResult"),
        jni_sig!("(Ljava/lang/Object;IIII[Ltessera/ij/GridResult$Tile;[Ltessera/ij/GridResult$Pair;Ljava/lang/String;III[Ljava/lang/Object;II)V"),
        &[
            (&pixels).into(),
            (cw as jint).into(),
            (ch as jint).into(),
            (ox as jint).into(),
            (oy as jint).into(),
            JValue::Object(&tiles),
            JValue::Object(&pairs),
            (&path).into(),
            (level as jint).into(),
            (fw as jint).into(),
            (fh as jint).into(),
            JValue::Object(&planes),
            (channels as jint).into(),
            (times as jint).into(),
        ],
    )?)
}

/// The command line's word for tile `i` (`TileRecord::status`): "ok", "detached",
/// "nominal" or "skipped".
fn tile_status(m: &Mosaic, i: usize) -> &'static str {
    m.tiles[i].status()
}

/// The largest residual of the accepted pairs that tile `i` is in (NaN when none).
fn largest_residual(m: &Mosaic, i: usize) -> f64 {
    m.pairs.iter().filter(|q| q.a == i || q.b == i).filter_map(|q| q.residual).fold(f64::NAN, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{defaults, parse};

    #[test]
    fn grid_defaults_are_the_cores_and_the_command_lines() {
        let d = defaults::<GridRun>().unwrap();
        let get = |k: &str| d.iter().find(|(key, _)| *key == k).map(|(_, v)| v.as_str());
        assert_eq!((get("overlap"), get("order"), get("start")), (Some("10"), Some("row"), Some("top-left")));
        assert_eq!((get("stage-error"), get("coarse"), get("rsz")), (Some("0.1"), Some("3"), Some("25")));
        assert_eq!(parse::<GridRun>(None).unwrap().0, GridRun::default());
    }

    #[test]
    fn a_canvas_beyond_memory_says_how_to_stitch_it() {
        let run = GridRun { order: TileOrder::SnakeRow, ..GridRun::default() };
        let e = tessera_core::Error::InvalidParameter { name: "canvas", reason: "20000x20000 exceeds 268435456 pixels".into() };
        match beyond_memory(e, (11, 11), &run) {
            BridgeError::Argument(m) => assert!(m.contains("20000x20000") && m.contains("--grid 11x11 --overlap 10 --order snake-row --start top-left -o mosaic.ome.tif"), "{m}"),
            other => panic!("{other:?}"),
        }
        let e = tessera_core::Error::ZeroSize { width: 0, height: 1 };
        assert!(matches!(beyond_memory(e, (1, 1), &run), BridgeError::Argument(m) if m.contains("no pixels")));
    }

    #[test]
    fn grid_options() {
        let (p, _) = parse::<GridRun>(Some("overlap=25 order=snake-column start=bottom-right stage-error=0.05 blend=feather rsz=31")).unwrap();
        assert_eq!((p.overlap_percent, p.order, p.start), (25.0, TileOrder::SnakeColumn, Corner::BottomRight));
        assert_eq!((p.grid.stage_error, p.blend, p.grid.register.rsz), (0.05, Blend::Feather, 31));
        assert!(parse::<GridRun>(Some("order=spiral")).is_err());
        assert!(parse::<GridRun>(Some("keyframe-shift=0.5")).is_err(), "a grid has no keyframes");
        let (p, _) = parse::<GridRun>(Some("flatfield=estimate darkfield=[/data/dark field.tif]")).unwrap();
        assert_eq!((p.flatfield.show(), p.darkfield.show()), ("estimate".to_string(), "/data/dark field.tif".to_string()));
        assert_eq!(parse::<GridRun>(None).unwrap().0.flatfield, Field(None));
        assert!(parse::<GridRun>(Some("flatfield=")).is_err());
        let (p, _) = parse::<GridRun>(Some("channels=2 time-points=3 register-channel=1 reuse-positions")).unwrap();
        assert_eq!(p.planes, Planes { channels: 2, time_points: 3, register_channel: 1, reuse_positions: true, cycles: false });
        assert!(!parse::<GridRun>(None).unwrap().0.planes.asked());
        assert!(parse::<GridRun>(Some("channels=-1")).is_err());
    }
}

"""Tile grids: tessera's `stitch --grid` beside ASHLAR and m2stitch (the Python port of NIST's
MIST) on the same generated grids, every tile's position compared with the truth.

The grids (GRIDS below) are cut with NumPy/SciPy from the repository's photographs
(assets/photos/, the robustness suite's, and the green channel of assets/retina.jpg),
upscaled 2x (bicubic) where the grid needs the room. Each tile lies at its nominal stage
position plus a uniform stage error of up to 2 % of the tile on each axis, sampled with a
cubic spline at that subpixel position (so the truth is exact), then gets vignetting
(x (1 - v r^2), r = 1 in the tile's corners), Gaussian camera noise and 8- or 16-bit
quantisation (seeded: the grids are the same on every run). The tiles are written as TIFF
files in acquisition order (row-major or snake-row; a 2-channel grid as every tile of
channel 0, then of channel 1) and every tool reads those same files:

- tessera: `tessera stitch DIR --grid CxR --overlap P --order O --backend cpu` and its
  defaults (the 2-channel grid: `--channels 2 --register-channel 0`, to an OME-TIFF); the
  time is the whole command's wall time, which also composites and writes the mosaic.
- ASHLAR: `ashlar.reg.EdgeAligner(reader, channel=0)` through its Python API, with an
  in-memory `Metadata` holding the nominal positions and a reader of the TIFF files (no
  BioFormats), once with filter_sigma 0 (its default) and once with 1; the one with the
  lower mean error is reported (chosen with the truth: this favours ASHLAR). It is given
  the nominal positions rounded to whole pixels: its EdgeAligner crops the overlaps at
  whole-pixel offsets and does not add the fraction back, so fractional positions cost it
  up to half a pixel.
- m2stitch: `stitch_images(tiles, rows, cols, row_col_transpose=False)` with its defaults,
  channel 0. Where that raises (its NCC threshold of 0.5), the run counts as failed and the
  script also reruns it with the threshold lowered (LOWER_NCC, the first that runs), as its
  error message advises; both lines are reported.

The peers' times include reading the TIFF files. Each tool runs --repeat times and the
shortest time is reported (the machine may be shared; the positions are the same every
time). The peers run with OPENBLAS_NUM_THREADS=1 unless it is set (see below), tessera with
its defaults, from a copy of the binary made at the start (its hash, build time and the
checkout's HEAD go into the JSON).

Position error: the distance between a tool's final position of a tile and its true
position, once the mean difference over the tiles is removed (the same for every tool).
"mean" and "worst" cover every tile the tool puts somewhere, "registered" only the tiles it
registered (the mean difference removed over those alone). "unplaced": tiles the tool
itself says it did not register and put where its stage model says (tessera: a status other
than "ok"; ASHLAR: tiles outside the largest component of accepted pairs). m2stitch gives
every tile a registered position (a pair that fails its filters is replaced by its stage
model and then refined by hill climbing); the tiles none of whose pairs passed are noted.

Run: benches/peers/grid_peers.sh [--tessera PATH] [--repeat N] [--only NAME ...]
(the wrapper makes target/peers-venv with the pinned peers). Prints the Markdown tables and
writes the results, versions and machine to benches/peers/grid_peers.json (--json PATH).
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from functools import partial
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # m2stitch's progress bars
# One OpenBLAS thread for the peers: with two on a 2-core machine that something else also
# loads, OpenBLAS's waiting threads made m2stitch's run take 3 to 13 s instead of 1.1 s.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import scipy.ndimage as ndi
import tifffile
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
PHOTOS = ROOT / "assets" / "photos"
JITTER = 0.02  # stage error: up to this fraction of the tile, each axis
WRONG_PX = 2.0
LOWER_NCC = (0.1, 0.05, 0.02)  # m2stitch's threshold where its default (0.5) raises


@dataclass
class Grid:
    name: str
    photo: str  # a file of assets/photos, or "retina" (green channel of assets/retina.jpg)
    cols: int
    rows: int
    tile: tuple  # (width, height)
    overlap: float  # percent
    bits: int  # 8 or 16
    noise: float  # sigma, fraction of the full range
    vignetting: float
    order: str  # "row" or "snake-row"
    zoom: int = 2  # bicubic upscaling of the photograph
    channels: int = 1
    seed: int = 0


GRIDS = [
    Grid("gravel", "gravel.png", 4, 4, (256, 256), 10, 8, 0.01, 0.0, "row", seed=1),
    Grid("grass", "grass.png", 5, 5, (256, 256), 30, 8, 0.02, 0.15, "snake-row", seed=2),
    Grid("ihc", "ihc.png", 4, 4, (256, 256), 5, 16, 0.01, 0.3, "row", seed=3),
    Grid("coffee", "coffee.png", 4, 3, (320, 256), 20, 8, 0.015, 0.15, "row", seed=4),
    Grid("camera", "camera.png", 6, 6, (192, 192), 20, 8, 0.01, 0.3, "snake-row", seed=5),
    Grid("astronaut", "astronaut.png", 5, 5, (256, 256), 30, 16, 0.02, 0.15, "row", seed=6),
    Grid("retina", "retina", 4, 4, (256, 256), 20, 8, 0.01, 0.15, "row", zoom=1, seed=7),
    Grid("ihc-2ch", "ihc.png", 4, 4, (256, 256), 10, 16, 0.01, 0.15, "row", channels=2, seed=8),
    Grid("gravel-small", "gravel.png", 6, 6, (160, 160), 5, 16, 0.01, 0.15, "snake-row", seed=9),
    Grid("grass-5%", "grass.png", 4, 4, (256, 256), 5, 8, 0.02, 0.3, "row", seed=10),
]


# ---------------------------------------------------------------- generating the grids

def load_photo(name):
    """The photograph as float64 in [0, 1]; the retina: its green channel, the central
    1000x1000 (inside the fundus disc)."""
    if name == "retina":
        rgb = np.asarray(Image.open(ROOT / "assets" / "retina.jpg").convert("RGB"))
        c = rgb.shape[0] // 2
        return rgb[c - 500:c + 500, c - 500:c + 500, 1] / 255.0
    return np.asarray(Image.open(PHOTOS / name).convert("L")) / 255.0


def second_channel(src):
    """A second 'stain' of the same specimen: another contrast, smoother."""
    return ndi.gaussian_filter((1.0 - src) ** 2, 2.0)


def acquisition(grid):
    """(row, col) of each tile in acquisition order."""
    out = []
    for r in range(grid.rows):
        cols = range(grid.cols)
        if grid.order == "snake-row" and r % 2 == 1:
            cols = reversed(cols)
        out.extend((r, c) for c in cols)
    return out


def layout(grid, shape, rng):
    """Nominal and true top-left corners (x, y) of the tiles, acquisition order; the grid
    centred in the (upscaled) photograph."""
    size = np.array(grid.tile, float)
    step = size * (1 - grid.overlap / 100)
    extent = size + step * [grid.cols - 1, grid.rows - 1]
    origin = (np.array([shape[1], shape[0]]) - extent) / 2
    if np.any(origin < JITTER * size + 3):  # room for the stage error and the spline
        raise ValueError(f"{grid.name}: a {extent[0]:.0f}x{extent[1]:.0f} grid does not fit {shape[1]}x{shape[0]}")
    nominal = np.array([origin + step * [c, r] for r, c in acquisition(grid)])
    truth = nominal + rng.uniform(-1, 1, nominal.shape) * JITTER * size
    return nominal, truth


def cut(coeffs, x, y, w, h):
    """The tile whose top-left corner is at the subpixel (x, y), cubic spline."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    return ndi.map_coordinates(coeffs, [yy + y, xx + x], order=3, prefilter=False, mode="nearest")


def degrade(tile, grid, rng):
    """Vignetting, camera noise, quantisation to the grid's bit depth."""
    h, w = tile.shape
    yy, xx = np.mgrid[0:h, 0:w]
    r2 = ((xx - (w - 1) / 2) ** 2 + (yy - (h - 1) / 2) ** 2) / (((w - 1) / 2) ** 2 + ((h - 1) / 2) ** 2)
    f = tile * (1 - grid.vignetting * r2) + grid.noise * rng.standard_normal(tile.shape)
    if grid.bits == 8:
        return np.clip(np.round(f * 255), 0, 255).astype(np.uint8)
    return np.clip(np.round(1000 + f * 60000), 0, 65535).astype(np.uint16)


def make_grid(grid, folder):
    """Write the grid's tiles to folder: its files (per channel), rows/cols, positions."""
    rng = np.random.default_rng(grid.seed)
    src = load_photo(grid.photo)
    if grid.zoom > 1:
        src = np.clip(ndi.zoom(src, grid.zoom, order=3), 0, 1)
    nominal, truth = layout(grid, src.shape, rng)
    w, h = grid.tile
    files = []
    for ch, s in enumerate([src, second_channel(src)][:grid.channels]):
        coeffs = ndi.spline_filter(s, order=3)
        files.append([])
        for k, (x, y) in enumerate(truth):
            f = folder / f"c{ch}_tile_{k:03d}.tif"
            tifffile.imwrite(f, degrade(cut(coeffs, x, y, w, h), grid, rng))
            files[ch].append(f)
    return {"files": files, "rowcol": acquisition(grid), "nominal": nominal, "truth": truth}


# ---------------------------------------------------------------- scoring

def errors(pos, truth):
    """Distances to the truth once the mean difference is removed."""
    d = pos - truth
    return np.hypot(*(d - d.mean(axis=0)).T) if len(d) else np.zeros(0)


def score(pos, truth, registered, seconds, nominal=None, **extra):
    """Errors of every tile with a position and of the registered ones alone; with the
    stage's positions `nominal`, how much further from the truth than its stage position
    the worst unregistered tile lies ("beyond_stage_px": where no pair verifies a tile, a
    tool should leave it no worse than the stage did)."""
    pos, truth, registered = np.asarray(pos, float), np.asarray(truth, float), np.asarray(registered, bool)
    has = ~np.isnan(pos).any(axis=1)
    err = errors(pos[has], truth[has])
    reg = errors(pos[registered], truth[registered])
    beyond = None
    left = has & ~registered
    if nominal is not None and left.any():
        full = np.full(len(pos), np.nan)
        full[has] = err
        stage = errors(np.asarray(nominal, float), truth)
        beyond = round(float((full[left] - stage[left]).max()), 3)
    extra.setdefault("beyond_stage_px", beyond)
    return {"mean_px": round(float(err.mean()), 3) if has.any() else None,
            "worst_px": round(float(err.max()), 3) if has.any() else None,
            "registered_mean_px": round(float(reg.mean()), 3) if registered.any() else None,
            "seconds": seconds, "unplaced": int((~registered).sum()), "no_position": int((~has).sum()),
            "over_2px": int((err > WRONG_PX).sum()), "error": None, **extra}


def failed(exc_or_text, seconds):
    """A failed run: the last line of the message (or, for a bare assert, where it is)."""
    if isinstance(exc_or_text, BaseException):
        text = f"{type(exc_or_text).__name__}: {exc_or_text}".strip()
        if text.endswith(":"):
            where = traceback.extract_tb(exc_or_text.__traceback__)[-1]
            text += f" `{where.line}` ({Path(where.filename).name}:{where.lineno})"
    else:
        text = exc_or_text.strip().splitlines()[-1] if exc_or_text.strip() else "failed"
    return {"mean_px": None, "worst_px": None, "registered_mean_px": None, "seconds": seconds,
            "unplaced": None, "no_position": None, "over_2px": None, "error": text[:200]}


def repeated(run, repeat):
    """run() repeat times: the first result, with the shortest time of all (all kept)."""
    runs = [run() for _ in range(repeat)]
    times = [r["seconds"] for r in runs]
    return {**runs[0], "seconds": round(min(times), 3), "seconds_runs": [round(t, 3) for t in times]}


# ---------------------------------------------------------------- tessera

def run_tessera(binary, grid, data, folder):
    out = folder / ("mosaic.ome.tif" if grid.channels > 1 else "mosaic.tif")
    report = folder / "report.json"
    cmd = [binary, "stitch", str(folder / "tiles"), "--grid", f"{grid.cols}x{grid.rows}",
           "--overlap", f"{grid.overlap:g}", "--order", grid.order, "--backend", "cpu",
           "-o", str(out), "--report", str(report)]
    if grid.channels > 1:
        cmd += ["--channels", str(grid.channels), "--register-channel", "0"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        return failed(done.stderr, seconds)
    rep = json.loads(report.read_text())
    by_file = {Path(f["file"]).name: f for f in rep["frames"]}
    frames = [by_file[f.name] for f in data["files"][0]]
    pos = [(f["x"], f["y"]) if f["x"] is not None else (np.nan, np.nan) for f in frames]
    statuses = {s: sum(f["status"] == s for f in frames) for s in sorted({f["status"] for f in frames})}
    return score(pos, data["truth"], [f["status"] == "ok" for f in frames], seconds, nominal=data["nominal"], statuses=statuses,
                 pairs=pair_summary(rep, data, grid), write_seconds=(rep["run"].get("written") or {}).get("seconds"))


def pair_summary(rep, data, grid):
    """tessera's pairs: how many accepted, the rejections by reason, and the true overlap
    (px, across the pair) of the narrowest accepted pair and of the widest rejected one."""
    tile_of = {f["index"]: k for k, f in enumerate(rep["frames"]) if Path(f["file"]).name.startswith("c0_")}
    out = {"total": 0, "accepted": 0, "rejected": {}, "narrowest_accepted_px": None, "widest_rejected_px": None}
    for p in rep["pairs"]:
        a, b = tile_of.get(p["a"]), tile_of.get(p["b"])
        if a is None or b is None:
            continue
        axis = 0 if data["rowcol"][a][0] == data["rowcol"][b][0] else 1  # same row: across x
        overlap = round(float(grid.tile[axis] - abs(data["truth"][b][axis] - data["truth"][a][axis])), 1)
        out["total"] += 1
        if p["status"] == "accepted":
            out["accepted"] += 1
            out["narrowest_accepted_px"] = min(overlap, out["narrowest_accepted_px"] or np.inf)
        else:
            reason = (p["reason"] or p["status"]).split(":")[0]
            out["rejected"][reason] = out["rejected"].get(reason, 0) + 1
            out["widest_rejected_px"] = max(overlap, out["widest_rejected_px"] or -np.inf)
    return out


# ---------------------------------------------------------------- ASHLAR

def ashlar_classes():
    """An ASHLAR Metadata over given nominal positions and a Reader of the TIFF files."""
    import ashlar.reg

    class ArrayMetadata(ashlar.reg.Metadata):
        """Nominal positions in pixels (pixel size 1), kept (y, x) as ASHLAR does."""

        def __init__(self, nominal_xy, shape, channels, dtype):
            self._pos = np.asarray(nominal_xy, float)[:, ::-1]
            self._shape, self._channels, self._dtype = np.array(shape), channels, np.dtype(dtype)

        @property
        def _num_images(self):
            return len(self._pos)

        @property
        def num_channels(self):
            return self._channels

        @property
        def pixel_size(self):
            return 1.0

        @property
        def pixel_dtype(self):
            return self._dtype

        def tile_position(self, i):
            return self._pos[i]

        def tile_size(self, i):
            return self._shape

    class TiffReader(ashlar.reg.Reader):
        def __init__(self, files, metadata):
            self.files, self.metadata = files, metadata

        def read(self, series, c):
            return tifffile.imread(self.files[c][series])

    return ArrayMetadata, TiffReader


def run_ashlar_once(grid, data, sigma):
    import ashlar.reg
    import networkx as nx
    ArrayMetadata, TiffReader = ashlar_classes()
    w, h = grid.tile
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            meta = ArrayMetadata(np.round(data["nominal"]), (h, w), grid.channels,
                                 np.uint8 if grid.bits == 8 else np.uint16)
            aligner = ashlar.reg.EdgeAligner(TiffReader(data["files"], meta), channel=0, filter_sigma=sigma,
                                             do_make_thumbnail=False, verbose=False)
            aligner.run()
    except Exception as e:  # noqa: BLE001 - a peer's failure is a result
        return {**failed(e, time.perf_counter() - t0), "filter_sigma": sigma}
    seconds = time.perf_counter() - t0
    largest = max(nx.connected_components(aligner.spanning_tree), key=len)
    registered = [i in largest for i in range(len(data["truth"]))]
    pos = np.asarray(aligner.positions)[:, ::-1]
    notes = sorted({str(m.message)[:120] for m in caught})
    return score(pos, data["truth"], registered, seconds, nominal=data["nominal"], filter_sigma=sigma, warnings=notes)


def run_ashlar(grid, data, repeat):
    """filter_sigma 0 (its default) and 1: the one with the lower mean error; both kept."""
    tries = [repeated(partial(run_ashlar_once, grid, data, s), repeat) for s in (0.0, 1.0)]
    ok = [t for t in tries if t["error"] is None]
    best = min(ok, key=lambda t: t["mean_px"]) if ok else tries[0]
    keep = ("filter_sigma", "mean_px", "worst_px", "registered_mean_px", "unplaced", "seconds", "error")
    return {**best, "tries": [{k: t[k] for k in keep} for t in tries]}


# ---------------------------------------------------------------- m2stitch

def run_m2stitch_once(data, threshold):
    import m2stitch
    t0 = time.perf_counter()
    try:
        images = np.stack([tifffile.imread(f) for f in data["files"][0]])
        rows = [r for r, _ in data["rowcol"]]
        cols = [c for _, c in data["rowcol"]]
        kwargs = {} if threshold is None else {"ncc_threshold": threshold}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result, _ = m2stitch.stitch_images(images, rows, cols, row_col_transpose=False, full_output=True,
                                               **kwargs)
    except Exception as e:  # noqa: BLE001 - a peer's failure is a result
        return failed(e, time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    pos = result[["x_pos", "y_pos"]].to_numpy(float)
    return score(pos, data["truth"], [True] * len(pos), seconds, without_valid_pair=no_valid_pair(result))


def no_valid_pair(result):
    """How many tiles none of whose pairs passed m2stitch's filters (valid3)."""
    valid = set()
    for direction in ("left", "top"):
        for i, row in result.iterrows():
            j = row[direction]
            if not _missing(j) and bool(row[f"{direction}_valid3"]):
                valid.update((i, int(j)))
    return len(result) - len(valid)


def _missing(v):
    try:
        return v is None or bool(np.isnan(v))
    except TypeError:  # pandas.NA
        return str(v) == "<NA>"


def run_m2stitch(data, repeat):
    """Its defaults; where they raise, also the first of LOWER_NCC that runs, as its error
    message advises: (default result, lowered result or None)."""
    default = repeated(partial(run_m2stitch_once, data, None), repeat)
    if default["error"] is None:
        return default, None
    for threshold in LOWER_NCC:
        lowered = repeated(partial(run_m2stitch_once, data, threshold), repeat)
        if lowered["error"] is None:
            break
    return default, {**lowered, "ncc_threshold": threshold}


# ---------------------------------------------------------------- output

def snapshot(binary, folder):
    """A private copy of the tessera binary, so that a rebuild during the run cannot mix two."""
    copy = Path(folder) / "tessera"
    shutil.copy2(binary, copy)
    return str(copy)


def versions(binary, original):
    tessera = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()

    def git(*args):  # read-only: no index refresh either
        cmd = ["git", "--no-optional-locks", "-C", str(ROOT), *args]
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()

    built = datetime.datetime.fromtimestamp(Path(original).stat().st_mtime, datetime.timezone.utc)
    return {"tessera": tessera, "tessera_binary": {
                "sha256": hashlib.sha256(Path(binary).read_bytes()).hexdigest()[:16],
                "built": built.isoformat(timespec="seconds"),
                "head": git("rev-parse", "--short", "HEAD"),
                "tracked_changes": bool(git("status", "--porcelain", "--untracked-files=no"))},
            "ashlar": version("ashlar"), "m2stitch": version("m2stitch"),
            "python": platform.python_version(), "numpy": np.__version__, "scipy": version("scipy"),
            "scikit-image": version("scikit-image"), "tifffile": version("tifffile")}


def machine():
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    return {"cpu": model, "cores": os.cpu_count(), "arch": platform.machine(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def fmt(v, digits=2):
    return "–" if v is None else f"{v:.{digits}f}"


def dash(v):
    return "–" if v is None else str(v)


def grid_table(grids):
    lines = ["| grid | photograph | tiles | tile (px) | overlap | depth | noise | vignetting | order |",
             "|---|---|---:|---|---:|---:|---:|---:|---|"]
    for g in grids:
        photo = "retina.jpg (green)" if g.photo == "retina" else g.photo + (" x2" if g.zoom > 1 else "")
        ch = f", {g.channels} channels" if g.channels > 1 else ""
        lines.append(f"| {g.name} | {photo} | {g.cols}x{g.rows}{ch} | {g.tile[0]}x{g.tile[1]} | {g.overlap:g} % | "
                     f"{g.bits}-bit | {g.noise * 100:g} % | {g.vignetting:g} | {g.order} |")
    return "\n".join(lines)


def tool_rows(res):
    """(label, result, note) for each tool's line of one grid."""
    ash, m2, low = res["ashlar"], res["m2stitch"], res["m2stitch_lowered"]
    rows = [("tessera", res["tessera"], res["tessera"]["error"] or beyond_note(res["tessera"])),
            ("ASHLAR", ash, ash["error"] or "; ".join(filter(None, [f"filter_sigma {ash['filter_sigma']:g}", beyond_note(ash)]))),
            ("m2stitch", m2, m2["error"] or valid_note(m2))]
    if low is not None:
        rows.append(("m2stitch, lowered", low,
                     f"ncc_threshold {low['ncc_threshold']:g}: " + (low["error"] or valid_note(low))))
    return rows


def beyond_note(r):
    b = r.get("beyond_stage_px")
    return "" if b is None else f"unplaced tiles at most {b:.3f} px further from the truth than their stage positions"


def valid_note(r):
    n = r.get("without_valid_pair") or 0
    return f"{n} tiles without a valid pair" if n else "every tile has a valid pair"


def results_table(results):
    lines = ["| grid | tool | mean error (px) | worst (px) | registered tiles' mean (px) | unplaced | > 2 px off "
             "| time (s) | note |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for res in results:
        for k, (label, r, note) in enumerate(tool_rows(res)):
            lines.append(f"| {res['grid']['name'] if k == 0 else ''} | {label} | {fmt(r['mean_px'], 3)} | "
                         f"{fmt(r['worst_px'], 3)} | {fmt(r['registered_mean_px'], 3)} | {dash(r['unplaced'])} | "
                         f"{dash(r['over_2px'])} | {fmt(r['seconds'])} | {note} |")
    return "\n".join(lines)


def run_grid(grid, binary, repeat):
    """Generate one grid in a temporary folder and run the three tools on it."""
    with tempfile.TemporaryDirectory(prefix="grid_peers_") as tmp:
        folder = Path(tmp)
        (folder / "tiles").mkdir()
        data = make_grid(grid, folder / "tiles")
        m2stitch, lowered = run_m2stitch(data, repeat)
        return {"grid": asdict(grid),
                "tessera": repeated(partial(run_tessera, binary, grid, data, folder), repeat),
                "ashlar": run_ashlar(grid, data, repeat),
                "m2stitch": m2stitch, "m2stitch_lowered": lowered}


def report_progress(grid, res):
    print(f"{grid.name}: " + ", ".join(f"{label} {fmt(r['mean_px'], 3)}/{fmt(r['worst_px'], 3)} px "
                                       f"{fmt(r['seconds'])} s" for label, r, _ in tool_rows(res)),
          file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessera", default=str(ROOT / "target" / "release" / "tessera"))
    ap.add_argument("--json", default=str(Path(__file__).with_name("grid_peers.json")))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tool per grid (shortest time reported)")
    ap.add_argument("--only", nargs="*", help="grid names to run (default: all)")
    args = ap.parse_args()
    grids = [g for g in GRIDS if not args.only or g.name in args.only]
    with tempfile.TemporaryDirectory(prefix="grid_peers_bin_") as bin_dir:
        binary = snapshot(args.tessera, bin_dir)
        info = {"date": datetime.date.today().isoformat(), "machine": machine(),
                "versions": versions(binary, args.tessera), "repeat": args.repeat,
                "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}
        results, t_all = [], time.perf_counter()
        for grid in grids:
            results.append(run_grid(grid, binary, args.repeat))
            report_progress(grid, results[-1])
        info["total_seconds"] = round(time.perf_counter() - t_all, 1)
    table = grid_table(grids) + "\n\n" + results_table(results)
    Path(args.json).write_text(json.dumps({**info, "markdown": table, "results": results}, indent=1) + "\n")
    print(table)
    print(f"\n{len(results)} grids in {info['total_seconds']} s; JSON -> {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()

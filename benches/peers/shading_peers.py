"""Shading correction: tessera's flat-field estimate beside BaSiC (basicpy) on the same
vignetted tile grids, each correction applied by tessera to the same tiles.

Grids are generated as ``grid_peers.py`` makes them (tiles cut from the repository's
photographs at subpixel stage positions, vignetting ``x (1 - v r^2)``, camera noise, 8- or
16-bit with 16-bit's dark level of 1000), with more tiles than the peer grids: a flat field
is estimated from many tiles. Each grid is stitched four times by ``tessera stitch --grid``,
differing only in the correction:

* ``none``: a flat field of ones (the correction is the identity, so the report's seam
  step is the uncorrected one);
* ``tessera``: ``--flatfield estimate --darkfield estimate``;
* ``BaSiC``: ``basicpy.BaSiC(get_darkfield=True)`` fitted to the tiles, its flat and dark
  fields written as float TIFFs (the dark field clipped at 0) and given as
  ``--flatfield FILE --darkfield FILE``;
* ``truth``: the vignetting the tiles were made with (and the 16-bit dark level).

Measured: the report's seam step (the mean ``|difference|`` of 8x8 block means of the two
tiles over every accepted pair's overlap, after correction), in grey levels and as a
percentage of the tiles' mean level above the dark level; the tiles' mean and worst
position error against the truth (mean difference removed); the estimate's time (BaSiC's
fit; tessera's whole run, registration and mosaic included, against the ``none`` run).
"""

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path

import numpy as np
import tifffile

sys.path.insert(0, str(Path(__file__).parent))
import grid_peers as gp  # noqa: E402  (the same grid generator and scoring)

GRIDS = [
    gp.Grid("ihc-8x8", "ihc.png", 8, 8, (160, 160), 15, 16, 0.01, 0.3, "row", zoom=3, seed=21),
    gp.Grid("grass-8x8", "grass.png", 8, 8, (160, 160), 20, 8, 0.02, 0.3, "snake-row", zoom=3, seed=22),
    gp.Grid("astronaut-6x6", "astronaut.png", 6, 6, (224, 224), 15, 16, 0.01, 0.3, "row", zoom=3, seed=23),
    gp.Grid("coffee-7x6", "coffee.png", 7, 6, (176, 160), 20, 8, 0.015, 0.2, "row", zoom=3, seed=24),
]


def vignetting(grid):
    """The multiplicative field the tiles were made with (grid_peers.degrade)."""
    w, h = grid.tile
    yy, xx = np.mgrid[0:h, 0:w]
    r2 = ((xx - (w - 1) / 2) ** 2 + (yy - (h - 1) / 2) ** 2) / (((w - 1) / 2) ** 2 + ((h - 1) / 2) ** 2)
    return (1 - grid.vignetting * r2).astype(np.float32)


def dark_level(grid):
    return 1000.0 if grid.bits == 16 else 0.0


def run_tessera(binary, grid, data, folder, name, field_args):
    report = folder / f"report-{name}.json"
    cmd = [binary, "stitch", str(folder / "tiles"), "--grid", f"{grid.cols}x{grid.rows}", "--overlap", f"{grid.overlap:g}",
           "--order", grid.order, "--backend", "cpu", "-o", str(folder / f"mosaic-{name}.tif"), "--report", str(report)] + field_args
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        return gp.failed(done.stderr, seconds)
    rep = json.loads(report.read_text())
    by_file = {Path(f["file"]).name: f for f in rep["frames"]}
    frames = [by_file[f.name] for f in data["files"][0]]
    pos = [(f["x"], f["y"]) if f["x"] is not None else (np.nan, np.nan) for f in frames]
    shading = rep.get("shading", {})
    return gp.score(pos, data["truth"], [f["status"] == "ok" for f in frames], round(seconds, 3),
                    seam_step=shading.get("seam_step_after"), seam_step_uncorrected=shading.get("seam_step_before"),
                    vignetting_percent=shading.get("vignetting_percent"))


def basic_fields(files, folder):
    """BaSiC's flat and dark fields of the tiles, written as float TIFFs; its fit's time."""
    from basicpy import BaSiC

    stack = np.stack([tifffile.imread(f).astype(np.float32) for f in files])
    t0 = time.perf_counter()
    basic = BaSiC(get_darkfield=True)
    basic.fit(stack)
    seconds = time.perf_counter() - t0
    flat, dark = folder / "basic-flat.tif", folder / "basic-dark.tif"
    tifffile.imwrite(flat, np.asarray(basic.flatfield, np.float32))
    # BaSiC's dark field may dip below zero (tessera takes none below: a dark level is a
    # count); clipped there.
    tifffile.imwrite(dark, np.clip(np.asarray(basic.darkfield, np.float32), 0, None))
    return flat, dark, seconds


def run_grid(grid, binary):
    with tempfile.TemporaryDirectory(prefix="shading_peers_") as tmp:
        folder = Path(tmp)
        (folder / "tiles").mkdir()
        data = gp.make_grid(grid, folder / "tiles")
        level = float(np.mean([tifffile.imread(f).mean() for f in data["files"][0]])) - dark_level(grid)
        ones, true_flat, true_dark = folder / "ones.tif", folder / "true-flat.tif", folder / "true-dark.tif"
        tifffile.imwrite(ones, np.ones(grid.tile[::-1], np.float32))
        tifffile.imwrite(true_flat, vignetting(grid))
        tifffile.imwrite(true_dark, np.full(grid.tile[::-1], dark_level(grid), np.float32))
        out = {"grid": asdict(grid), "level": round(level, 1)}
        out["none"] = run_tessera(binary, grid, data, folder, "none", ["--flatfield", str(ones)])
        out["tessera"] = run_tessera(binary, grid, data, folder, "tessera", ["--flatfield", "estimate", "--darkfield", "estimate"])
        try:
            flat, dark, fit_seconds = basic_fields(data["files"][0], folder)
            out["basic"] = run_tessera(binary, grid, data, folder, "basic", ["--flatfield", str(flat), "--darkfield", str(dark)])
            out["basic"]["fit_seconds"] = round(fit_seconds, 2)
        except Exception as e:  # noqa: BLE001  (a peer that fails is a row, not a stop)
            out["basic"] = gp.failed(e, 0.0)
        dark_args = ["--darkfield", str(true_dark)] if grid.bits == 16 else []
        out["truth"] = run_tessera(binary, grid, data, folder, "truth", ["--flatfield", str(true_flat)] + dark_args)
        return out


def table(results):
    lines = ["| grid | tiles | vignetting | correction | seam step (grey levels) | seam step (% of level) | mean error (px) | worst (px) | time (s) |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for res in results:
        g = res["grid"]
        for k, (label, key) in enumerate([("none", "none"), ("tessera estimate", "tessera"), ("BaSiC", "basic"), ("true field", "truth")]):
            r = res[key]
            step = r.get("seam_step")
            pct = f"{100 * step / res['level']:.2f}" if step is not None else "–"
            when = f"{r['seconds']:.2f}" + (f" (fit {r['fit_seconds']:.2f})" if r.get("fit_seconds") is not None else "")
            note = f" ({r['error']})" if r.get("error") else ""
            lines.append(f"| {g['name'] if k == 0 else ''} | {g['cols'] * g['rows'] if k == 0 else ''} | {g['vignetting'] if k == 0 else ''} | {label}{note} | "
                         f"{gp.fmt(step, 3)} | {pct} | {gp.fmt(r['mean_px'], 3)} | {gp.fmt(r['worst_px'], 3)} | {when} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessera", default=str(gp.ROOT / "target" / "release" / "tessera"))
    ap.add_argument("--json", default=str(Path(__file__).with_name("shading_peers.json")))
    ap.add_argument("--only", nargs="*", help="grid names to run (default: all)")
    args = ap.parse_args()
    grids = [g for g in GRIDS if not args.only or g.name in args.only]
    with tempfile.TemporaryDirectory(prefix="shading_peers_bin_") as bin_dir:
        binary = gp.snapshot(args.tessera, bin_dir)
        info = {"date": datetime.date.today().isoformat(), "machine": gp.machine(),
                "versions": {"tessera": subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip(),
                             "tessera_head": subprocess.run(["git", "--no-optional-locks", "-C", str(gp.ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
                             "basicpy": version("basicpy"), "jax": version("jax"), "numpy": np.__version__}}
        results, t0 = [], time.perf_counter()
        for grid in grids:
            results.append(run_grid(grid, binary))
            r = results[-1]
            print(f"{grid.name}: " + ", ".join(f"{k} {gp.fmt(r[k].get('seam_step'), 3)} / {gp.fmt(r[k]['mean_px'], 3)} px" for k in ("none", "tessera", "basic", "truth")),
                  file=sys.stderr, flush=True)
        info["total_seconds"] = round(time.perf_counter() - t0, 1)
    md = table(results)
    Path(args.json).write_text(json.dumps({**info, "markdown": md, "results": results}, indent=1) + "\n")
    print(md)


if __name__ == "__main__":
    main()

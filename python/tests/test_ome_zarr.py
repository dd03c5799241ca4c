"""The OME-Zarr store (NGFF 0.5) that ``tessera stitch -o NAME.ome.zarr`` streams in strips,
read back by the reference reader (``ome-zarr-py``, as napari's plugin reads it): its axes,
its levels' scales, and every level's pixels equal to the OME-TIFF the same command writes
(itself checked against the in-memory composite in test_ome_tiff.py), in 8- and 16-bit
gray, RGB as three channels, and channels and time points as the C and T axes."""

import json

import numpy as np
import pytest
import tifffile
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader

from test_ome_tiff import OME_TILE, cut_grid, photo, plane_blocks


GRID = ["--grid", "3x3", "--overlap", "25", "--order", "snake-row"]


def read_ome_zarr(path):
    """The image node of the store at ``path``: its metadata and its levels as NumPy arrays."""
    nodes = list(Reader(parse_url(str(path)))())
    assert nodes, f"{path} is not read as OME-Zarr"
    node = nodes[0]
    return node.metadata, [np.asarray(level) for level in node.data]


def tiff_levels(path):
    """Every level of the OME-TIFF at ``path`` as (T, C, Y, X)."""
    with tifffile.TiffFile(path) as tf:
        series = tf.series[0]
        out = []
        for lvl in series.levels:
            a = lvl.asarray()
            axes = lvl.axes
            if "S" in axes:  # RGB samples become channels
                a = np.moveaxis(a, -1, 0)
                axes = "C" + axes.replace("S", "")
            for axis in "TC":
                if axis not in axes:
                    a = a[np.newaxis]
                    axes = axis + axes
            out.append(a)
        return out


@pytest.mark.parametrize("kind", ["uint8", "uint16", "rgb"])
def test_ome_zarr_levels_equal_the_ome_tiff(cli, tmp_path, kind):
    tiles = tmp_path / "tiles"
    cut_grid(photo(kind), tiles, seed=len(kind) + 1)
    opts = [*GRID, "--blend", "feather", "--ome-tile", OME_TILE, "--max-mem", 1, "--pixel-size", 0.65]
    store, tif = tmp_path / "mosaic.ome.zarr", tmp_path / "mosaic.ome.tif"
    report = tmp_path / "r.json"
    cli("stitch", tiles, *opts, "-o", store, "--report", report)
    cli("stitch", tiles, *opts, "-o", tif)
    meta, levels = read_ome_zarr(store)
    assert [a["name"] for a in meta["axes"]] == ["t", "c", "y", "x"]
    assert meta["axes"][3] == {"name": "x", "type": "space", "unit": "micrometer"}
    want = tiff_levels(tif)
    assert len(levels) == len(want) >= 3, "a pyramid of several levels"
    for k, (got, ref) in enumerate(zip(levels, want)):
        assert got.dtype == ref.dtype and got.shape == ref.shape, (k, got.shape, ref.shape)
        assert np.array_equal(got, ref), f"level {k} differs in {np.count_nonzero(got != ref)} samples"
        scale = meta["coordinateTransformations"][k][0]["scale"]
        assert scale == pytest.approx([1, 1, 0.65 * 2**k, 0.65 * 2**k])
    assert levels[0].shape[1] == (3 if kind == "rgb" else 1)
    # The store itself: Zarr v3, chunks of one tile, and the report's account of it.
    group = zarr.open_group(str(store), mode="r")
    assert group.metadata.zarr_format == 3 and group.attrs["ome"]["version"] == "0.5"
    assert group["0"].chunks == (1, 1, OME_TILE, OME_TILE)
    written = json.loads(report.read_text())["run"]["written"]
    assert written["ome_zarr"]["levels"] == [list(lvl.shape[:-3:-1]) for lvl in levels]
    assert written["ome_zarr"]["chunks"] > 0 and written["ome_tiff"] is None


def test_channels_and_time_points_are_the_c_and_t_axes(cli, tmp_path):
    tiles = plane_blocks(tmp_path)
    opts = [*GRID, "--channels", 2, "--time-points", 2, "--ome-tile", OME_TILE]
    store, tif = tmp_path / "planes.ome.zarr", tmp_path / "planes.ome.tif"
    cli("stitch", tiles, *opts, "-o", store)
    cli("stitch", tiles, *opts, "-o", tif)
    meta, levels = read_ome_zarr(store)
    assert levels[0].shape[:2] == (2, 2)
    assert len(meta["channel_names"]) == 2
    for got, ref in zip(levels, tiff_levels(tif)):
        assert np.array_equal(got, ref)


def test_a_store_replaces_only_a_store(cli, tmp_path):
    """An existing store is replaced once the new one is complete; a folder that is not a
    Zarr store is never removed: the run fails and names it."""
    tiles = tmp_path / "tiles"
    cut_grid(photo("uint8"), tiles, seed=5)
    store = tmp_path / "m.ome.zarr"
    cli("stitch", tiles, *GRID, "-o", store)
    first = read_ome_zarr(store)[1][0]
    cli("stitch", tiles, *GRID, "-o", store)
    assert np.array_equal(read_ome_zarr(store)[1][0], first)
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name], "no partial store left behind"
    other = tmp_path / "notes.zarr"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(AssertionError, match="is not a Zarr store"):
        cli("stitch", tiles, *GRID, "-o", other)
    assert (other / "keep.txt").read_text() == "mine"

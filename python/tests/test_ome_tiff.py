"""The pyramidal OME-TIFF that ``tessera stitch`` streams in strips, read back level by level
by an independent reader (tifffile), against the same mosaic composited whole in memory and
written as a PNG: the full level pixel for pixel, every smaller level against the 2x2 mean
of the level before it (``ceil`` sizes, an odd last row or column averaging what it has,
integers rounded half up), computed here in NumPy from the PNG. A small 3x3 grid cut from a
photograph, 64-pixel OME tiles so that it has several levels and several strips."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest
import tifffile

import tessera
from conftest import PHOTOS

TILE = (160, 128)
OME_TILE = 64


def halved(level):
    """The 2x2 mean of ``level`` (H, W) or (H, W, C), as tessera's pyramid computes it."""
    h, w = level.shape[:2]
    wide = level.astype(np.uint64 if level.dtype.kind == "u" else np.float64)
    sums = np.zeros(((h + 1) // 2, (w + 1) // 2) + level.shape[2:], wide.dtype)
    counts = np.zeros(((h + 1) // 2, (w + 1) // 2), np.uint64)
    for dy in (0, 1):
        for dx in (0, 1):
            part = wide[dy::2, dx::2]
            sums[: part.shape[0], : part.shape[1]] += part
            counts[: part.shape[0], : part.shape[1]] += 1
    if level.dtype.kind == "f":
        return (sums / counts.reshape(counts.shape + (1,) * (level.ndim - 2))).astype(level.dtype)
    n = counts.reshape(counts.shape + (1,) * (level.ndim - 2))
    return ((sums + n // 2) // n).astype(level.dtype)


def cut_grid(photo, folder, seed):
    """A snake-row 3x3 grid of TILE tiles overlapping by 25 %, each up to 3 whole pixels off
    its stage position, saved as PNG files in acquisition order."""
    rng = np.random.default_rng(seed)
    folder.mkdir()
    step = (int(TILE[0] * 0.75), int(TILE[1] * 0.75))
    for k in range(9):
        r, c = divmod(k, 3)
        c = c if r % 2 == 0 else 2 - c
        x, y = 10 + c * step[0] + rng.integers(-3, 4), 10 + r * step[1] + rng.integers(-3, 4)
        tessera.save(folder / f"tile_{k}.png", np.ascontiguousarray(photo[y : y + TILE[1], x : x + TILE[0]]))


def photo(kind):
    gray = tessera.load(PHOTOS / "gravel.png")
    if kind == "uint8":
        return gray
    if kind == "uint16":
        # Most of the 16-bit range, with low bits that an 8-bit path would lose.
        return gray.astype(np.uint16) * 250 + (np.arange(gray.size).reshape(gray.shape) % 251).astype(np.uint16)
    rgba = np.stack([gray, tessera.load(PHOTOS / "grass.png"), tessera.load(PHOTOS / "ihc.png"), np.full_like(gray, 255)], axis=-1)
    return np.ascontiguousarray(rgba)


@pytest.mark.parametrize("kind", ["uint8", "uint16", "rgb"])
def test_ome_tiff_levels_equal_the_in_memory_composite(cli, tmp_path, kind):
    tiles = tmp_path / "tiles"
    cut_grid(photo(kind), tiles, seed=len(kind))
    grid = ["--grid", "3x3", "--overlap", "25", "--order", "snake-row", "--blend", "feather"]
    ome, png = tmp_path / "mosaic.ome.tif", tmp_path / "mosaic.png"
    cli("stitch", tiles, *grid, "--ome-tile", OME_TILE, "--max-mem", 1, "--pixel-size", 0.65, "-o", ome)
    cli("stitch", tiles, *grid, "-o", png)
    whole = tessera.load(png)
    if kind == "rgb":
        whole = whole[..., :3]  # the OME-TIFF is RGB: the alpha is the compositor's coverage
    with tifffile.TiffFile(ome) as tf:
        assert tf.is_ome, "not recognised as OME-TIFF"
        pixels = ET.fromstring(tf.ome_metadata).find(".//{*}Pixels")
        assert float(pixels.attrib["PhysicalSizeX"]) == 0.65
        levels = tf.series[0].levels
        assert len(levels) >= 3, "a pyramid of several levels"
        assert all(lvl.keyframe.is_tiled and lvl.keyframe.tilewidth == OME_TILE for lvl in levels)
        want = whole
        for k, lvl in enumerate(levels):
            got = lvl.asarray()
            assert got.dtype == want.dtype and got.shape == want.shape, (k, got.shape, want.shape)
            assert np.array_equal(got, want), f"level {k} differs in {np.count_nonzero(got != want)} samples"
            want = halved(want)
        assert max(levels[-1].shape[:2]) <= OME_TILE


def plane_blocks(tmp_path):
    """A 3x3 grid in 2 channels (two photographs) at 2 time points, as 4 blocks of 9 tile
    files, channel by channel within each time point, in the folder ``tiles``."""
    gray = photo("uint8")
    other = tessera.load(PHOTOS / "grass.png")
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    k = 0
    for t in range(2):
        for src in (gray, other):
            block = tmp_path / f"block{t}{k}"
            cut_grid(src, block, seed=t)
            for f in sorted(block.iterdir()):
                f.rename(tiles / f"tile_{k:02d}.png")
                k += 1
    return tiles


def test_channels_and_time_points_read_back_as_tcyx(cli, tmp_path):
    """``--channels 2 --time-points 2``: tifffile (an independent reader) sees one series
    of shape (T, C, Y, X) with a pyramid, each plane the mosaic of its block of tiles."""
    tiles = plane_blocks(tmp_path)
    grid = ["--grid", "3x3", "--overlap", "25", "--order", "snake-row"]
    ome = tmp_path / "planes.ome.tif"
    cli("stitch", tiles, *grid, "--channels", 2, "--time-points", 2, "--ome-tile", OME_TILE, "-o", ome)
    with tifffile.TiffFile(ome) as tf:
        series = tf.series[0]
        assert series.axes == "TCYX" and series.shape[:2] == (2, 2)
        assert len(series.levels) >= 2
        planes = series.asarray()
    # Channel 0 shows the first photograph, channel 1 the second, at both time points.
    for t in range(2):
        assert np.abs(planes[t, 0].astype(int) - planes[t, 1].astype(int))[planes[t, 0] > 0].mean() > 10
    covered = (planes[0, 0] > 0) & (planes[1, 0] > 0)
    assert np.abs(planes[0, 0].astype(int) - planes[1, 0].astype(int))[covered].mean() < 3


def test_planes_in_one_multi_page_file_per_tile_equal_blocks_of_files(cli, tmp_path):
    """Each tile's planes in one multi-page TIFF (as a microscope writes an OME-TIFF per
    tile, channels within time points) give the same mosaic as blocks of files; a tile file
    with other pages is refused, naming it."""
    tiles = plane_blocks(tmp_path)
    files = sorted(tiles.iterdir())
    per_tile = tmp_path / "per_tile"
    per_tile.mkdir()
    for j in range(9):
        pages = np.stack([tessera.load(files[b * 9 + j]) for b in range(4)])
        tifffile.imwrite(per_tile / f"tile_{j}.tif", pages, photometric="minisblack")
    grid = ["--grid", "3x3", "--overlap", "25", "--order", "snake-row", "--channels", 2, "--time-points", 2]
    blocks, pages = tmp_path / "blocks.ome.tif", tmp_path / "pages.ome.tif"
    cli("stitch", tiles, *grid, "-o", blocks)
    cli("stitch", per_tile, *grid, "-o", pages)
    assert np.array_equal(tifffile.imread(blocks), tifffile.imread(pages))
    tifffile.imwrite(per_tile / "tile_4.tif", np.stack([tessera.load(files[4])] * 3), photometric="minisblack")
    with pytest.raises(AssertionError, match="tile_4.tif has 3 pages"):
        cli("stitch", per_tile, *grid, "-o", pages)

"""``tessera.stitch_grid``: the command line's grid mode as a function. Grids cut from real
photographs with stage error; the same positions, statuses and mosaic as ``tessera stitch
--grid``, positions against the truth, each layout (grid, positions, Fiji's tile
configuration), shading correction, and bad input."""

import json

import numpy as np
import pytest

import tessera
from conftest import PHOTOS

TILE = (160, 128)


def cut(photo, seed, cols=3, rows=3, overlap=0.25, order="snake-row", origin=(10, 10)):
    """Tiles of TILE overlapping by ``overlap``, each up to 3 whole pixels off its stage
    position (the grid's first at ``origin`` on the photograph), in acquisition order;
    their true top-left corners."""
    rng = np.random.default_rng(seed)
    step = (int(TILE[0] * (1 - overlap)), int(TILE[1] * (1 - overlap)))
    tiles, truth = [], []
    for k in range(cols * rows):
        r, c = divmod(k, cols)
        if order == "snake-row" and r % 2 == 1:
            c = cols - 1 - c
        x, y = origin[0] + c * step[0] + int(rng.integers(-3, 4)), origin[1] + r * step[1] + int(rng.integers(-3, 4))
        tiles.append(np.ascontiguousarray(photo[y : y + TILE[1], x : x + TILE[0]]))
        truth.append((x, y))
    return tiles, truth


def errors(report, truth):
    x0, y0 = truth[0]
    return [np.hypot(f["x"] - (t[0] - x0), f["y"] - (t[1] - y0)) for f, t in zip(report["frames"], truth)]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_stitch_grid_is_the_command_lines_grid_mode(cli, tmp_path, dtype):
    gray = tessera.load(PHOTOS / "gravel.png")
    photo = gray if dtype == np.uint8 else gray.astype(np.uint16) * 250 + 7
    tiles, truth = cut(photo, seed=3)
    folder = tmp_path / "tiles"
    folder.mkdir()
    for k, t in enumerate(tiles):
        tessera.save(folder / f"tile_{k}.png", t)
    args = ["--grid", "3x3", "--overlap", "25", "--order", "snake-row", "--blend", "feather"]
    cli("stitch", folder, *args, "-o", tmp_path / "cli.png", "--report", tmp_path / "cli.json")
    want = json.loads((tmp_path / "cli.json").read_text())
    for given in (folder, tiles):
        mosaic, rep = tessera.stitch_grid(given, grid="3x3", overlap=25, order="snake-row", blend="feather")
        np.testing.assert_array_equal(mosaic, tessera.load(tmp_path / "cli.png"))
        for f, g in zip(rep["frames"], want["frames"]):
            assert (f["x"], f["y"], f["status"]) == (g["x"], g["y"], g["status"])
        assert rep["pairs"] == want["pairs"] and rep["stage_model"] == want["stage_model"]
        assert rep["params"]["grid"] == "3x3" and rep["params"]["order"] == "snakerow"
    assert max(errors(rep, truth)) < 0.1
    assert all(f["status"] == "ok" for f in rep["frames"])


def test_positions_and_a_tile_configuration_place_the_tiles(tmp_path):
    photo = tessera.load(PHOTOS / "ihc.png")
    tiles, truth = cut(photo, seed=5, order="row")
    # Nominal positions: the stage's, without its error.
    step = (TILE[0] * 0.75, TILE[1] * 0.75)
    nominal = [(10 + (k % 3) * step[0], 10 + (k // 3) * step[1]) for k in range(9)]
    _, rep = tessera.stitch_grid(tiles, positions=nominal)
    assert max(errors(rep, truth)) < 0.1 and rep["params"]["positions"] == "given"
    # In micrometres at 0.5 um per pixel.
    _, um = tessera.stitch_grid(tiles, positions=[(x * 0.5, y * 0.5) for x, y in nominal], pixel_size=0.5)
    assert [f["x"] for f in um["frames"]] == [f["x"] for f in rep["frames"]]
    # Fiji's TileConfiguration.txt names the files itself.
    lines = ["dim = 2"]
    for k, (t, (x, y)) in enumerate(zip(tiles, nominal)):
        tessera.save(tmp_path / f"t{k}.png", t)
        lines.append(f"t{k}.png; ; ({x}, {y})")
    (tmp_path / "TileConfiguration.txt").write_text("\n".join(lines) + "\n")
    _, fiji = tessera.stitch_grid(None, tile_config=tmp_path / "TileConfiguration.txt")
    assert [(f["x"], f["y"]) for f in fiji["frames"]] == [(f["x"], f["y"]) for f in rep["frames"]]


def test_shading_is_estimated_and_reported():
    photo = tessera.load(PHOTOS / "gravel.png").astype(np.float32)
    tiles, truth = cut(photo, seed=7)
    yy, xx = np.mgrid[: TILE[1], : TILE[0]]
    r2 = ((xx - TILE[0] / 2) / (TILE[0] / 2)) ** 2 + ((yy - TILE[1] / 2) / (TILE[1] / 2)) ** 2
    vignette = (1 - 0.3 * r2 / 2).astype(np.float32)
    shaded = [np.ascontiguousarray((t * vignette).astype(np.float32)) for t in tiles]
    _, rep = tessera.stitch_grid(shaded, grid="3x3", overlap=25, order="snake-row", flatfield="estimate")
    assert rep["shading"]["corrected"] is True
    assert max(errors(rep, truth)) < 0.25


def test_channels_and_time_points_share_one_canvas(cli, tmp_path):
    gravel, grass = tessera.load(PHOTOS / "gravel.png"), tessera.load(PHOTOS / "grass.png")
    tiles, truths = [], []
    for t, seed in enumerate((3, 8)):
        for photo in (gravel, grass):
            block, truth = cut(photo, seed=seed)
            tiles += block
        truths.append(truth)
    mosaic, rep = tessera.stitch_grid(tiles, grid="3x3", overlap=25, order="snake-row", channels=2, time_points=2)
    assert mosaic.shape[:2] == (2, 2) and mosaic.dtype == np.uint8
    assert rep["planes"]["channels"] == 2 and len(rep["time_points"]) == 2
    # Time point 1 brought onto time point 0: its tile 0 where the stage put it against
    # time point 0's tile 0 (whole pixels here, so the planes agree exactly where both cover).
    dx, dy = (truths[1][0][0] - truths[0][0][0], truths[1][0][1] - truths[0][0][1])
    assert np.hypot(rep["time_points"][1]["offset_to_time_point_0"][0] - dx, rep["time_points"][1]["offset_to_time_point_0"][1] - dy) < 0.1
    for c in range(2):
        both = (mosaic[0, c] > 0) & (mosaic[1, c] > 0)
        assert both.mean() > 0.5
        np.testing.assert_array_equal(mosaic[0, c][both], mosaic[1, c][both])
    # The command line writes the same planes into its OME-TIFF.
    folder = tmp_path / "tiles"
    folder.mkdir()
    for k, t in enumerate(tiles):
        tessera.save(folder / f"tile_{k:02d}.png", t)
    ome = tmp_path / "planes.ome.tif"
    cli("stitch", folder, "--grid", "3x3", "--overlap", "25", "--order", "snake-row", "--channels", 2, "--time-points", 2, "-o", ome)
    import tifffile
    np.testing.assert_array_equal(tifffile.imread(ome), mosaic)
    with pytest.raises(ValueError, match="register channel"):
        tessera.stitch_grid(tiles, grid="3x3", channels=2, time_points=2, register_channel=2)
    with pytest.raises(ValueError, match="not 5 channels"):
        tessera.stitch_grid(tiles, grid="3x3", channels=5)


def test_tiles_named_by_fields_give_their_channels_and_time_points(tmp_path):
    """Files named as a MetaMorph scan names them (channel number and name, site, time
    point): the pattern orders them, counts the planes, and the mosaic is the one of the
    same tiles given as arrays."""
    gravel, grass = tessera.load(PHOTOS / "gravel.png"), tessera.load(PHOTOS / "grass.png")
    tiles = []
    for seed in (3, 8):
        for photo in (gravel, grass):
            tiles += cut(photo, seed=seed)[0]
    for k, t in enumerate(tiles):
        block, site = divmod(k, 9)
        tessera.save(tmp_path / f"scan_w{block % 2 + 1}{['DAPI', 'GFP'][block % 2]}_s{site + 1}_t{block // 2 + 1}.png", t)
    pattern = str(tmp_path / "scan_w{c}*_s{i}_t{t}.png")
    named, rep = tessera.stitch_grid(pattern, grid="3x3", overlap=25, order="snake-row")
    assert rep["planes"]["channels"] == 2 and len(rep["time_points"]) == 2
    arrays, _ = tessera.stitch_grid(tiles, grid="3x3", overlap=25, order="snake-row", channels=2, time_points=2)
    np.testing.assert_array_equal(named, arrays)
    with pytest.raises(ValueError, match="the file names give 2"):
        tessera.stitch_grid(pattern, grid="3x3", channels=3)
    with pytest.raises(FileNotFoundError, match="matches no image file"):
        tessera.stitch_grid(str(tmp_path / "other_{i}.png"), grid="3x3")


def test_cycles_of_a_slide_put_back_elsewhere_line_up(cli, tmp_path):
    """Two cycles of a re-stained slide: a shared stain (the same photograph) and one other
    per cycle, the second cycle's slide put back 47 px right and 29 px up (beyond any
    template search from no shift). The mosaic holds the four channels at one time point,
    and the shared stain of cycle 1 lies on cycle 0's; the command line writes the same."""
    shared, first, second = (tessera.load(PHOTOS / f"{n}.png") for n in ("gravel", "grass", "ihc"))
    blocks, corner = [], []
    for cycle, (origin, other) in enumerate([((60, 60), first), ((107, 31), second)]):
        for photo in (shared, other):
            tiles, truth = cut(photo, seed=cycle, origin=origin)
            blocks.extend(tiles)
        corner.append(truth[0])
    mosaic, report = tessera.stitch_grid(blocks, grid="3x3", overlap=25, order="snake-row", channels=2, cycles=2)
    assert mosaic.shape[:2] == (1, 4)
    assert report["planes"]["cycles"] and report["planes"]["output"] == {"channels": 4, "time_points": 1}
    offset = report["time_points"][1]["offset_to_time_point_0"]
    want = (corner[1][0] - corner[0][0], corner[1][1] - corner[0][1])
    assert np.hypot(offset[0] - want[0], offset[1] - want[1]) < 0.5, (offset, want)
    a, b = mosaic[0, 0].astype(int), mosaic[0, 2].astype(int)
    both = (a > 0) & (b > 0)
    assert both.sum() > 0.5 * a.size and np.abs(a - b)[both].mean() < 2
    assert np.abs(a - mosaic[0, 1].astype(int))[both].mean() > 10, "channel 1 is the other stain"
    # The command line: the same planes as the four channels of one OME-TIFF.
    folder = tmp_path / "tiles"
    folder.mkdir()
    for i, t in enumerate(blocks):
        tessera.save(folder / f"t_{i:02d}.png", t)
    out = tmp_path / "cycles.ome.tif"
    cli("stitch", folder, "--grid", "3x3", "--overlap", 25, "--order", "snake-row", "--channels", 2, "--cycles", 2, "-o", out)
    import tifffile

    with tifffile.TiffFile(out) as tf:
        assert tf.series[0].axes == "CYX" and tf.series[0].shape[0] == 4
        assert np.array_equal(tf.series[0].asarray(), mosaic[0])
    with pytest.raises(ValueError, match="not both"):
        tessera.stitch_grid(blocks, grid="3x3", overlap=25, channels=2, cycles=2, time_points=2)


def test_each_tile_of_a_later_cycle_is_aligned_onto_the_first_cycles_tile():
    """A later cycle's centre tile whose overlaps are blank in the shared stain (a dim
    re-staining, bleached edges): its own cycle cannot join it, but matched against the
    first cycle's same tile it lies where the slide really put it, as every other tile of
    that cycle does."""
    shared, first, second = (tessera.load(PHOTOS / f"{n}.png") for n in ("gravel", "grass", "ihc"))
    blocks, truths = [], []
    for cycle, (origin, other) in enumerate([((60, 60), first), ((107, 31), second)]):
        for channel, photo in enumerate((shared, other)):
            tiles, truth = cut(photo, seed=cycle + 5, origin=origin)
            if cycle == 1 and channel == 0:
                centre = tiles[4].copy()
                band = (int(TILE[1] * 0.3), int(TILE[0] * 0.3))
                centre[: band[0]], centre[-band[0] :] = 128, 128
                centre[:, : band[1]], centre[:, -band[1] :] = 128, 128
                tiles[4] = centre
            blocks.extend(tiles)
        truths.append(truth)
    _, report = tessera.stitch_grid(blocks, grid="3x3", overlap=25, order="snake-row", channels=2, cycles=2)
    later = report["time_points"][1]
    assert later["frames"][4]["status"] != "ok", "its own cycle cannot join the centre tile"
    assert later["tiles_aligned_to_cycle_0"] == 9
    x0, y0 = truths[0][0]
    for j, (x, y) in enumerate(truths[1]):
        got = later["positions_on_cycle_0"][j]
        assert np.hypot(got[0] - (x - x0), got[1] - (y - y0)) < 0.25, (j, got, (x - x0, y - y0))
    # Where its own cycle put it (the stage model), it was whole pixels off.
    own, offset = later["frames"][4], later["offset_to_time_point_0"]
    x, y = truths[1][4]
    print("the centre tile by its own cycle:", np.hypot(own["x"] + offset[0] - (x - x0), own["y"] + offset[1] - (y - y0)), "px off")
    assert np.hypot(own["x"] + offset[0] - (x - x0), own["y"] + offset[1] - (y - y0)) > 1.0


def test_each_channel_is_corrected_by_its_own_shading():
    """Two channels under different vignetting (30 % and 15 %), two time points: with
    ``flatfield="estimate"`` each channel's tiles are corrected by the flat field found from
    its own tiles, so both mosaics lose their dark tile corners."""
    gravel, grass = (tessera.load(PHOTOS / n).astype(np.float32) for n in ("gravel.png", "grass.png"))
    yy, xx = np.mgrid[: TILE[1], : TILE[0]]
    r2 = ((xx - TILE[0] / 2) / (TILE[0] / 2)) ** 2 + ((yy - TILE[1] / 2) / (TILE[1] / 2)) ** 2
    tiles = []
    for seed in (3, 8):
        for photo, strength in ((gravel, 0.3), (grass, 0.15)):
            block, _ = cut(photo, seed=seed)
            tiles += [np.ascontiguousarray((t * (1 - strength * r2 / 2)).astype(np.float32)) for t in block]
    args = dict(grid="3x3", overlap=25, order="snake-row", channels=2, time_points=2)
    raw, _ = tessera.stitch_grid(tiles, **args)
    fixed, rep = tessera.stitch_grid(tiles, flatfield="estimate", **args)
    assert [q["corrected"] for q in rep["shading_per_channel"]] == [True, True]
    assert all(f["status"] == "ok" for t in rep["time_points"] for f in t["frames"])

    def corners_to_centre(plane):
        # Tile 0 sits at the mosaic's top left within the stage's 3 px.
        corner = plane[4:24, 4:24].mean()
        centre = plane[TILE[1] // 2 - 10 : TILE[1] // 2 + 10, TILE[0] // 2 - 10 : TILE[0] // 2 + 10].mean()
        return corner / centre

    for c in range(2):
        assert corners_to_centre(fixed[0, c]) > corners_to_centre(raw[0, c]) + 0.05, c


def test_bad_input_is_a_clear_error(tmp_path):
    tiles, _ = cut(tessera.load(PHOTOS / "gravel.png"), seed=1)
    with pytest.raises(ValueError, match="one of"):
        tessera.stitch_grid(tiles)
    with pytest.raises(ValueError, match="one of"):
        tessera.stitch_grid(tiles, grid="3x3", positions=[(0, 0)] * 9)
    with pytest.raises(ValueError, match="12 tiles, but 9"):
        tessera.stitch_grid(tiles, grid="4x3")
    with pytest.raises(ValueError, match="positions"):
        tessera.stitch_grid(tiles, positions=[(0.0, 0.0)] * 4)
    with pytest.raises(ValueError, match="not finite"):
        tessera.stitch_grid(tiles, positions=[(float("nan"), 0.0)] * 9)
    with pytest.raises(TypeError, match="positions"):
        tessera.stitch_grid(tiles, positions=3)
    with pytest.raises(ValueError, match="snake"):
        tessera.stitch_grid(tiles, grid="3x3", order="zigzag")
    with pytest.raises(ValueError, match="flatfield"):
        tessera.stitch_grid(tiles, grid="3x3", darkfield="estimate")
    with pytest.raises(ValueError, match="tiles=None"):
        tessera.stitch_grid(tiles, tile_config=tmp_path / "x.txt")
    with pytest.raises(FileNotFoundError):
        tessera.stitch_grid(None, tile_config=tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="rsz"):
        tessera.stitch_grid(tiles, grid="3x3", rsz=2)

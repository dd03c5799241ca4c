"""register_pair, stitch, synth_sequence, stereo, matmul: against the truth of synthetic
sequences, the tessera CLI's runs and reports, OpenCV and NumPy."""

import json

import cv2
import numpy as np
import pytest

import tessera
from conftest import PHOTOS, REPO, random_image

SHARED = REPO.parent / "shared" / "data"


@pytest.fixture(scope="module")
def sequence():
    """Eight gray frames of 200 x 160 cut along a known subpixel path from a photograph."""
    photo = tessera.load(PHOTOS / "astronaut.png")
    frames, positions = tessera.synth_sequence(photo, frames=8, width=200, height=160, seed=5)
    return frames, positions


def test_synth_sequence(sequence):
    frames, positions = sequence
    assert len(frames) == 8 and positions[0] == (0.0, 0.0)
    assert all(f.shape == (160, 200) and f.dtype == np.uint8 for f in frames)


def test_register_pair_recovers_the_shift_like_phase_correlation(sequence):
    frames, positions = sequence
    for i in (1, 2):
        r = tessera.register_pair(frames[i - 1], frames[i], backend="cpu")
        truth = np.subtract(positions[i], positions[i - 1])
        assert r["shift"] is not None and r["reason"] is None
        assert np.hypot(*(np.array(r["shift"]) - truth)) < 0.25
        assert r["vectors_used"] >= 3 and len(r["vectors"]) >= r["vectors_used"]
        gray = [f.astype(np.float32) for f in (frames[i - 1], frames[i])]
        (dx, dy), _ = cv2.phaseCorrelate(gray[1], gray[0])
        assert np.hypot(dx - truth[0], dy - truth[1]) < 1.0


def turned(photo, corner, angle, scale=1.0, size=(200, 160)):
    """A frame of ``size`` whose pixel (u, v) shows ``photo`` at corner + scale R(angle) (u,
    v), R(a) = [[cos a, -sin a], [sin a, cos a]] (angle in degrees, y down): cv2.warpAffine,
    bilinear, rounded to uint8 like a camera frame."""
    a = np.radians(angle)
    c, s = scale * np.cos(a), scale * np.sin(a)
    m = np.array([[c, -s, corner[0]], [s, c, corner[1]]])
    return cv2.warpAffine(photo, m, size, flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)


def corner_for(centre, angle, scale=1.0, size=(200, 160)):
    """The corner that puts a frame's centre pixel at ``centre`` of the photograph."""
    a = np.radians(angle)
    half = (np.array(size) - 1) / 2
    rot = scale * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return np.array(centre) - rot @ half


@pytest.mark.parametrize("angle", [-3.0, 1.5, 4.0])
def test_register_pair_finds_a_turn(angle):
    photo = tessera.load(PHOTOS / "astronaut.png")
    ref_corner = corner_for((240, 250), 0.0)
    reference = turned(photo, ref_corner, 0.0)
    corner = corner_for((249, 244), angle)
    moving = turned(photo, corner, angle)
    # The reference is an upright window, so moving (u, v) shows it at
    # (corner - ref_corner) + R(angle) (u, v).
    truth = corner - ref_corner
    r = tessera.register_pair(reference, moving, backend="cpu")
    assert r["reason"] is None, r["reason"]
    assert abs(r["angle"] - angle) < 0.1, (r["angle"], angle)
    assert r["scale"] == 1.0
    assert np.hypot(*(np.array(r["shift"]) - truth)) < 0.3, (r["shift"], truth)
    # The translation model fits the shift alone (a few degrees turn its templates too far
    # for it to register at all).
    t = tessera.register_pair(reference, moving, motion="translation", backend="cpu")
    if abs(angle) < 2.0:
        assert (t["angle"], t["scale"]) == (0.0, 1.0) and t["reason"] is None
    else:
        assert t["shift"] is None or (t["angle"], t["scale"]) == (0.0, 1.0)
    # A turn beyond max_turn is not fitted as one.
    narrow = tessera.register_pair(reference, moving, max_turn=1.0, backend="cpu")
    assert narrow["shift"] is None or abs(narrow["angle"]) <= 1.0, narrow["angle"]


def test_register_pair_fits_a_zoom_with_fit_scale():
    photo = tessera.load(PHOTOS / "astronaut.png")
    ref_corner = corner_for((240, 250), 0.0)
    reference = turned(photo, ref_corner, 0.0)
    moving = turned(photo, corner_for((246, 247), 2.0, 1.03), 2.0, 1.03)
    r = tessera.register_pair(reference, moving, fit_scale=True, backend="cpu")
    assert r["reason"] is None, r["reason"]
    assert abs(r["angle"] - 2.0) < 0.1 and abs(r["scale"] - 1.03) < 0.003, (r["angle"], r["scale"])
    plain = tessera.register_pair(reference, moving, backend="cpu")
    assert plain["shift"] is None or plain["scale"] == 1.0


def test_register_pair_on_flat_frames_gives_the_reason():
    flat = np.full((100, 100), 7, np.uint8)
    r = tessera.register_pair(flat, flat, backend="cpu")
    assert r["shift"] is None and "texture" in r["reason"]
    assert r["angle"] is None and r["scale"] is None


def _positions(report):
    return [(f["index"], f["status"], f["x"], f["y"]) for f in report["frames"]]


def test_stitch_arrays_files_and_the_cli_agree(cli, tmp_path, sequence):
    frames, positions = sequence
    d = tmp_path / "seq"
    d.mkdir()
    for i, f in enumerate(frames):
        tessera.save(d / f"frame_{i:04d}.png", f)
    cli("stitch", d, "-o", tmp_path / "pano.png", "--report", tmp_path / "r.json", "--backend", "cpu")
    want = json.loads((tmp_path / "r.json").read_text())
    pano_a, rep_a = tessera.stitch(frames, backend="cpu")
    pano_f, rep_f = tessera.stitch(d, backend="cpu")
    pano_g, rep_g = tessera.stitch(str(d / "frame_*.png"), backend="cpu")
    assert "pose_meaning" in want["panorama"] and all("angle" in f and "scale" not in f for f in want["frames"])
    assert (want["params"]["motion"], want["params"]["fit_scale"], want["params"]["max_turn"]) == ("similarity", False, 6.0)
    for rep in (rep_a, rep_f, rep_g):
        assert _positions(rep) == _positions(want)
        assert rep["params"] == want["params"] and rep["quality"] == want["quality"] and rep["panorama"] == want["panorama"]
        # The CLI's run also says where it wrote the panorama ("written"); Python returns it.
        assert set(rep["run"]) == set(want["run"]) - {"written"}
    # The same report contract as the CLI's, field for field (labels aside).
    strip = lambda r: [{k: v for k, v in f.items() if k != "file"} for f in r["frames"]]
    assert strip(rep_a) == strip(want)
    assert rep_f["frames"][3]["file"] == want["frames"][3]["file"]
    np.testing.assert_array_equal(pano_a, tessera.load(tmp_path / "pano.png"))
    np.testing.assert_array_equal(pano_f, pano_a)
    # And near the truth.
    for f in rep_a["frames"]:
        assert f["status"] == "ok"
        assert np.hypot(f["x"] - positions[f["index"]][0], f["y"] - positions[f["index"]][1]) < 0.3


def test_stitch_of_rgba_with_options_matches_the_cli(cli, tmp_path, photo_rgba):
    retina = tessera.load(REPO / "assets" / "retina.jpg")
    frames, _ = tessera.synth_sequence(retina, frames=6, width=240, height=200, seed=2)
    assert frames[0].shape == (200, 240, 4)
    d = tmp_path / "g"
    d.mkdir()
    for i, f in enumerate(frames):
        tessera.save(d / f"{i}.png", f)
    args = ["--rsz", "31", "--npts", "4", "--blend", "feather", "--accept", "fixed", "--cthresh", "0.8", "--no-refine", "--coarse", "0"]
    cli("stitch", d, "-o", tmp_path / "p.png", "--report", tmp_path / "r.json", "--backend", "cpu", *args)
    want = json.loads((tmp_path / "r.json").read_text())
    pano, rep = tessera.stitch(frames, rsz=31, npts=4, blend="feather", accept="fixed", cthresh=0.8, no_refine=True, coarse=0, backend="cpu")
    assert _positions(rep) == _positions(want) and rep["params"] == want["params"]
    np.testing.assert_array_equal(pano, tessera.load(tmp_path / "p.png"))


@pytest.fixture(scope="module")
def turned_sequence():
    """Six frames of 200 x 160 cut from a photograph, frame i turned i degrees about its
    centre (which moves 10, 6 pixels a frame), and their true poses (x, y, degrees) in
    frame 0's coordinates."""
    photo = tessera.load(PHOTOS / "astronaut.png")
    corners = [corner_for((170 + 10 * i, 180 + 6 * i), float(i)) for i in range(6)]
    frames = [turned(photo, c, float(i)) for i, c in enumerate(corners)]
    return frames, [(*(c - corners[0]), float(i)) for i, c in enumerate(corners)]


@pytest.mark.parametrize("options", [
    {},
    {"fit_scale": True, "max_turn": 4.0},
    {"motion": "translation"},
    {"refine_every_pair": True},
    {"no_detect_zoom": True},
])
def test_stitch_of_a_turned_sweep_matches_the_cli(cli, tmp_path, turned_sequence, options):
    frames, truth = turned_sequence
    d = tmp_path / "turned"
    d.mkdir()
    for i, f in enumerate(frames):
        tessera.save(d / f"{i}.png", f)
    args = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    cli("stitch", d, "-o", tmp_path / "p.png", "--report", tmp_path / "r.json", "--backend", "cpu", *args)
    want = json.loads((tmp_path / "r.json").read_text())
    pano, rep = tessera.stitch(frames, backend="cpu", **options)
    strip = lambda r: [{k: v for k, v in f.items() if k != "file"} for f in r["frames"]]
    assert strip(rep) == strip(want)
    assert rep["params"] == want["params"] and rep["panorama"] == want["panorama"] and rep["quality"] == want["quality"]
    np.testing.assert_array_equal(pano, tessera.load(tmp_path / "p.png"))
    motion = options.get("motion", "similarity")
    assert (rep["params"]["motion"], rep["params"]["fit_scale"]) == (motion, options.get("fit_scale", False))
    assert rep["params"]["max_turn"] == options.get("max_turn", 6.0)
    assert rep["params"]["refine_every_pair"] == options.get("refine_every_pair", False)
    assert rep["params"]["detect_zoom"] == (not options.get("no_detect_zoom", False))
    for f in rep["frames"]:
        assert ("scale" in f) == options.get("fit_scale", False)
        if f["status"] != "ok":
            assert motion == "translation", f
            continue
        x, y, angle = truth[f["index"]]
        if motion == "translation":
            assert f["angle"] == 0.0
            continue
        assert abs(f["angle"] - angle) < 0.1, (f["index"], f["angle"], angle)
        assert np.hypot(f["x"] - x, f["y"] - y) < 0.5, (f["index"], f["x"], f["y"], x, y)
        if "scale" in f:
            assert abs(f["scale"] - 1.0) < 0.005


def test_stitch_skips_a_foreign_frame_and_says_why(sequence):
    frames, _ = sequence
    noise = random_image(np.uint8, frames[0].shape, seed=9)
    _, rep = tessera.stitch(list(frames[:4]) + [noise] + list(frames[4:]), backend="cpu")
    skipped = [f for f in rep["frames"] if f["status"] == "skipped"]
    assert [f["index"] for f in skipped] == [4] and skipped[0]["reason"]
    assert rep["quality"]["frames_skipped"] == 1
    # One island, held by the panorama: every registered frame hangs on frame 0.
    n = len(rep["frames"])
    assert rep["islands"] == [{"first_frame": 0, "frames": n - 1, "in_panorama": True, "joined_by": []}]
    assert rep["quality"]["frames_on_islands"] == 0
    assert all(f["island"] == (None if f["index"] == 4 else 0) for f in rep["frames"])


def test_stitch_of_nothing_registrable_is_a_value_error():
    flat = [np.full((64, 64), 9, np.uint8)] * 3
    with pytest.raises(ValueError, match="no two of the 3 frames"):
        tessera.stitch(flat, backend="cpu")


def read_pfm(path):
    with open(path, "rb") as f:
        assert f.readline().strip() == b"Pf"
        w, h = map(int, f.readline().split())
        scale = float(f.readline())
        data = np.frombuffer(f.read(), dtype="<f4" if scale < 0 else ">f4").reshape(h, w)
    return np.flipud(data)


def stereo_pair():
    """A rectified pair: a real one (Middlebury cones, cropped) when ../shared/data has it,
    else a textured synthetic one with a constant disparity of 6."""
    cones = SHARED / "stereo" / "cones"
    if (cones / "im2.png").exists():
        left, right = (tessera.load(cones / n) for n in ("im2.png", "im6.png"))
        return np.ascontiguousarray(left[100:220, 100:300]), np.ascontiguousarray(right[100:220, 100:300])
    rng = np.random.default_rng(1)
    base = cv2.GaussianBlur(rng.integers(0, 255, (120, 220), dtype=np.uint8), (3, 3), 0)
    return np.ascontiguousarray(base[:, 10:210]), np.ascontiguousarray(base[:, 16:216])


def test_stereo_equals_the_cli(cli, tmp_path):
    left, right = stereo_pair()
    tessera.save(tmp_path / "l.png", left)
    tessera.save(tmp_path / "r.png", right)
    cli("stereo", tmp_path / "l.png", tmp_path / "r.png", "-o", tmp_path / "d.pfm", "--max-disp", "48", "--backend", "cpu")
    disp, stats = tessera.stereo(left, right, max_disp=48, backend="cpu")
    assert disp.dtype == np.float32 and disp.shape == left.shape[:2]
    np.testing.assert_array_equal(disp, read_pfm(tmp_path / "d.pfm"))
    assert stats["valid"] == int(np.isfinite(disp).sum())
    gray_l = left if left.ndim == 2 else np.ascontiguousarray(left[..., 1])
    gray_r = right if right.ndim == 2 else np.ascontiguousarray(right[..., 1])
    d2, _ = tessera.stereo(gray_l, gray_r, max_disp=48, cost="ad", paths=4, median=False, fill=False, backend="cpu")
    assert np.isinf(d2).any() or np.isfinite(d2).all()


def test_matmul_and_mat_add_against_numpy():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((70, 300)).astype(np.float32)
    b = rng.standard_normal((300, 45)).astype(np.float32)
    out = tessera.matmul(a, b, backend="cpu")
    assert out.shape == (70, 45) and out.dtype == np.float32
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(tessera.mat_add(a, a, backend="cpu"), a + a)
    np.testing.assert_allclose(tessera.matmul(a[::2, 10:110], b[10:110:1], backend="cpu"),
                               a[::2, 10:110].astype(np.float64) @ b[10:110], rtol=1e-4, atol=1e-3)

"""tessera.dask on a real dask.distributed LocalCluster with worker processes: chunked
filters and local variance identical to one call, and a batch of sequences stitched with
the same positions as the CLI's runs."""

import json

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

import tessera
import tessera.dask as tdask
from conftest import PHOTOS, random_image


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def big():
    """4096 x 4096 uint8: a real photograph tiled 8 x 8 (edges, texture, flat areas) plus
    noise, so no two chunks are alike."""
    photo = tessera.load(PHOTOS / "gravel.png")
    tiled = np.tile(photo, (8, 8))[:4096, :4096]
    noise = np.random.default_rng(0).integers(0, 16, tiled.shape, dtype=np.uint8)
    return np.ascontiguousarray(tiled // 2 + noise)


def test_workers_are_processes(client):
    info = client.scheduler_info()
    assert len(info["workers"]) == 2
    pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2 and __import__("os").getpid() not in pids.values()


def test_mean_of_4096_in_1024_chunks_equals_one_call(client, big):
    x = da.from_array(big, chunks=1024)
    for kw in ({"size": 31}, {"width": 16, "height": 9}, {"size": 3, "border": "replicate"}):
        chunked = tdask.mean(x, **kw).compute()
        np.testing.assert_array_equal(chunked, tessera.mean(big, **kw))


def test_exact_local_variance_radius_63_in_1024_chunks_equals_one_call(client, big):
    x = da.from_array(big, chunks=1024)
    chunked = tdask.local_variance(x, method="recursive", kernel="tent", radius=63)
    assert chunked.dtype == np.float32
    np.testing.assert_array_equal(chunked.compute(), tessera.local_variance(big, method="recursive", kernel="tent", radius=63))


def test_box_sum_gaussian_and_box_variance_at_uneven_chunks(client, big):
    img = big[:2500, :3000]
    x = da.from_array(img, chunks=(700, 1100))
    np.testing.assert_array_equal(tdask.box_sum(x, size=25).compute(), tessera.box_sum(img, size=25))
    np.testing.assert_array_equal(tdask.gaussian(x, sigma=3.0, method="fir").compute(), tessera.gaussian(img, sigma=3.0, method="fir"))
    np.testing.assert_array_equal(
        tdask.local_variance(x, kernel="box", radius=40, border="constant:10").compute(),
        tessera.local_variance(img, kernel="box", radius=40, border="constant:10"),
    )
    np.testing.assert_array_equal(tdask.mean(x, size=21, border="normalize").compute(), tessera.mean(img, size=21, border="normalize"))


def test_uint16_and_rgba_chunks(client):
    img16 = random_image(np.uint16, (1500, 1300))
    x = da.from_array(img16, chunks=400)
    np.testing.assert_array_equal(tdask.local_variance(x, radius=31).compute(), tessera.local_variance(img16, radius=31))
    rgba = random_image(np.uint8, (900, 700, 4))
    y = da.from_array(rgba, chunks=(300, 250, 4))
    np.testing.assert_array_equal(tdask.mean(y, size=9).compute(), tessera.mean(rgba, size=9))


def test_float32_chunks_agree_to_rounding(client):
    img = random_image(np.float32, (1200, 1200))
    x = da.from_array(img, chunks=500)
    np.testing.assert_allclose(tdask.mean(x, size=15).compute(), tessera.mean(img, size=15), rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(
        tdask.local_variance(x, radius=15, method="threewise").compute(),
        tessera.local_variance(img, radius=15, method="threewise"),
        rtol=1e-3,
        atol=1e-2,
    )


def test_dask_boundary_modes_are_not_reflect101():
    """Why the helpers use boundary='none': Dask's 'reflect' repeats the edge pixel (NumPy
    'symmetric'), tessera's reflect101 does not (NumPy 'reflect')."""
    row = np.arange(6)
    padded = da.overlap.overlap(da.from_array(row, chunks=3), depth={0: 2}, boundary={0: "reflect"}).compute()
    assert list(padded[:2]) == [1, 0] and list(np.pad(row, 2, mode="symmetric")[:2]) == [1, 0]
    assert list(np.pad(row, 2, mode="reflect")[:2]) == [2, 1]


def test_halos_and_what_has_no_exact_chunked_form():
    assert tdask.halo("mean", size=31) == (15, 15)
    assert tdask.halo("mean", width=16, height=9) == (4, 8)
    assert tdask.halo("gaussian", sigma=2.0) == (6, 6)
    assert tdask.halo("local_variance", radius=63) == (63, 63)
    x = da.zeros((100, 100), dtype=np.uint8, chunks=50)
    with pytest.raises(ValueError, match="infinite"):
        tdask.gaussian(x, sigma=20.0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        tdask.mean(x, sigma=2)
    with pytest.raises(TypeError, match="dask.array"):
        tdask.mean(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="4 channels in one chunk"):
        tdask.mean(da.zeros((10, 10, 4), dtype=np.uint8, chunks=(5, 5, 2)))


@pytest.fixture(scope="module")
def eight_sequences(cli, tmp_path_factory):
    """Eight sequences written by `tessera synth-seq` (different photographs and seeds),
    each stitched by the CLI: its report is the expected result."""
    root = tmp_path_factory.mktemp("batch")
    photos = ["astronaut", "camera", "coffee", "grass", "gravel", "ihc", "astronaut", "camera"]
    dirs, reports = [], []
    for i, name in enumerate(photos):
        d = root / f"seq{i}"
        cli("synth-seq", PHOTOS / f"{name}.png", "-o", d, "--frames", "6", "--width", "200", "--height", "160", "--seed", i + 1)
        cli("stitch", d, "-o", root / f"pano{i}.png", "--report", root / f"r{i}.json", "--backend", "cpu")
        dirs.append(d)
        reports.append(json.loads((root / f"r{i}.json").read_text()))
    return root, dirs, reports


def positions(report):
    return [(f["index"], f["status"], f["x"], f["y"]) for f in report["frames"]]


def test_batch_of_eight_sequences_on_the_cluster_equals_eight_cli_runs(client, eight_sequences):
    root, dirs, want = eight_sequences
    outputs = [root / f"py{i}.png" for i in range(len(dirs))]
    reports = tdask.stitch_batch(dirs, outputs=outputs, backend="cpu")
    assert len(reports) == 8
    for i, (got, exp) in enumerate(zip(reports, want)):
        assert positions(got) == positions(exp), i
        assert got["params"] == exp["params"] and got["panorama"] == exp["panorama"]
        assert got["run"]["output"] == str(outputs[i])
        np.testing.assert_array_equal(tessera.load(outputs[i]), tessera.load(root / f"pano{i}.png"))


def test_batch_on_the_threaded_scheduler_with_arrays(eight_sequences):
    _, dirs, want = eight_sequences
    arrays = [[tessera.load(p) for p in sorted(d.glob("frame_*.png"))] for d in dirs[:3]]
    results = tdask.stitch_batch(arrays, return_panoramas=True, scheduler="threads", backend="cpu")
    for (pano, rep), exp in zip(results, want):
        assert positions(rep) == positions(exp)
        assert pano.shape == (exp["panorama"]["height"], exp["panorama"]["width"])
    with pytest.raises(ValueError, match="2 outputs for 3 sequences"):
        tdask.stitch_batch(arrays, outputs=["a.png", "b.png"])
    delayed = tdask.stitch_delayed(arrays[:1], backend="cpu")
    assert positions(dask.compute(*delayed, scheduler="sync")[0]) == positions(want[0])

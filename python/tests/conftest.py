"""Shared fixtures: the tessera CLI (the Rust results the package is checked against), real
photographs from the repository, and random images of every dtype."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tessera

REPO = Path(__file__).resolve().parents[2]
PHOTOS = REPO / "assets" / "photos"


def _find_cli():
    given = os.environ.get("TESSERA_BIN")
    if given:
        if not Path(given).is_file():
            raise RuntimeError(f"TESSERA_BIN={given} is not a file")
        return given
    for candidate in (REPO / "target" / "release" / "tessera", shutil.which("tessera")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


@pytest.fixture(scope="session")
def cli():
    """A function running the ``tessera`` CLI (``TESSERA_BIN``, else target/release/tessera)."""
    path = _find_cli()
    if path is None:
        pytest.skip("no tessera CLI: build it (cargo build --release) or set TESSERA_BIN")

    def run(*args):
        done = subprocess.run([path, *map(str, args)], capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError(f"tessera {' '.join(map(str, args))} failed:\n{done.stderr}")
        return done.stdout + done.stderr

    run.path = path
    return run


@pytest.fixture(scope="session")
def photo_rgba():
    """A real colour photograph, RGBA uint8 (assets/retina.jpg, cropped to keep tests fast)."""
    img = tessera.load(REPO / "assets" / "retina.jpg")
    assert img.ndim == 3 and img.dtype == np.uint8
    return np.ascontiguousarray(img[500:700, 400:700])


@pytest.fixture(scope="session")
def photo_gray():
    """A real photograph, gray uint8 (assets/photos/camera.png, cropped)."""
    img = tessera.load(PHOTOS / "camera.png")
    assert img.ndim == 2 and img.dtype == np.uint8
    return np.ascontiguousarray(img[:180, :240])


def random_image(dtype, shape=(67, 93), seed=0):
    """Random pixels of ``dtype`` (RGBA for shape (H, W, 4)), over the type's range."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return (rng.random(shape) * 1000.0 - 300.0).astype(np.float32)
    return rng.integers(0, np.iinfo(dtype).max, size=shape, endpoint=True, dtype=dtype)


@pytest.fixture
def images():
    """One random image of each input type: uint8, uint16, float32 gray and uint8 RGBA."""
    return {
        "uint8": random_image(np.uint8),
        "uint16": random_image(np.uint16),
        "float32": random_image(np.float32),
        "rgba": random_image(np.uint8, (67, 93, 4)),
    }

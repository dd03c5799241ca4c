"""mean, box_sum, gaussian, local_variance, contrast, glare: against exact references built
with SciPy, against the peers (scipy.ndimage, OpenCV), and against the tessera CLI on the
same file (the Rust result, bit for bit)."""

import cv2
import numpy as np
import pytest
from scipy import ndimage

import tessera
from conftest import random_image

SCIPY_MODE = {"reflect101": "mirror", "replicate": "nearest"}


def window_sums(img, width, height, border="reflect101", cval=0):
    """Exact int64 (or float64) window sums with tessera's anchor (w // 2, h // 2)."""
    x = img.astype(np.float64 if img.dtype == np.float32 else np.int64)
    mode = SCIPY_MODE.get(border, "constant")
    x = ndimage.correlate1d(x, np.ones(width, dtype=x.dtype), axis=1, mode=mode, cval=cval)
    # An outside row of the row sums is `width` outside pixels.
    return ndimage.correlate1d(x, np.ones(height, dtype=x.dtype), axis=0, mode=mode, cval=cval * width)


def rounded_mean(sums, n):
    """floor(sum / n + 1/2) in integers."""
    return (2 * sums + n) // (2 * n)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("width,height", [(3, 3), (15, 15), (16, 7), (1, 31)])
@pytest.mark.parametrize("border", ["reflect101", "replicate", "constant:7"])
def test_mean_of_integers_is_the_exact_rounded_mean(dtype, width, height, border):
    img = random_image(dtype)
    out = tessera.mean(img, width=width, height=height, border=border, backend="cpu")
    cval = 7 if border.startswith("constant") else 0
    want = rounded_mean(window_sums(img, width, height, border.split(":")[0], cval), width * height)
    assert out.dtype == dtype and out.shape == img.shape
    np.testing.assert_array_equal(out, want.astype(dtype))


def test_mean_normalize_divides_by_the_pixels_inside():
    img = random_image(np.uint8)
    out = tessera.mean(img, size=9, border="normalize", backend="cpu")
    sums = window_sums(img, 9, 9, "constant")
    counts = window_sums(np.ones_like(img), 9, 9, "constant")
    np.testing.assert_array_equal(out, rounded_mean(sums, counts).astype(np.uint8))


@pytest.mark.parametrize("size", [3, 15, 64])
@pytest.mark.parametrize("border", ["reflect101", "replicate"])
def test_mean_of_float32_matches_scipy_uniform_filter(size, border):
    img = random_image(np.float32)
    out = tessera.mean(img, size=size, border=border, backend="cpu")
    want = ndimage.uniform_filter(img.astype(np.float64), size=size, mode=SCIPY_MODE[border])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-4 * np.abs(img).max())


def test_mean_of_uint8_against_opencv_blur():
    img = random_image(np.uint8, (120, 160))
    out = tessera.mean(img, size=5, backend="cpu")
    want = cv2.blur(img, (5, 5), borderType=cv2.BORDER_REFLECT_101)
    # OpenCV rounds half to even in fixed point; tessera half up: at most one grey level.
    assert np.abs(out.astype(int) - want.astype(int)).max() <= 1


def test_mean_of_rgba_is_the_mean_of_each_channel():
    img = random_image(np.uint8, (40, 50, 4))
    out = tessera.mean(img, size=7, backend="cpu")
    assert out.shape == img.shape and out.dtype == np.uint8
    for c in range(4):
        np.testing.assert_array_equal(out[..., c], tessera.mean(np.ascontiguousarray(img[..., c]), size=7, backend="cpu"))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_box_sum_of_integers_is_exact_uint32(dtype):
    img = random_image(dtype)
    out = tessera.box_sum(img, width=31, height=5, backend="cpu")
    assert out.dtype == np.uint32
    np.testing.assert_array_equal(out, window_sums(img, 31, 5))


def test_box_sum_of_float32():
    img = random_image(np.float32)
    out = tessera.box_sum(img, size=9, backend="cpu")
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, window_sums(img, 9, 9), rtol=1e-6, atol=1e-3)


@pytest.mark.parametrize("sigma", [0.8, 2.0, 5.0])
def test_gaussian_fir_matches_opencv_and_scipy(sigma):
    img = random_image(np.float32, (90, 110))
    r = int(np.ceil(3 * sigma))
    out = tessera.gaussian(img, sigma=sigma, method="fir", backend="cpu")
    cv = cv2.GaussianBlur(img, (2 * r + 1, 2 * r + 1), sigma, borderType=cv2.BORDER_REFLECT_101)
    sp = ndimage.gaussian_filter(img.astype(np.float64), sigma, mode="mirror", truncate=r / sigma)
    scale = np.abs(img).max()
    np.testing.assert_allclose(out, cv, atol=2e-6 * scale)
    np.testing.assert_allclose(out, sp, atol=2e-6 * scale)


def test_gaussian_of_uint8_rounds_once_against_opencv():
    img = random_image(np.uint8, (90, 110))
    out = tessera.gaussian(img, sigma=1.5, method="fir", backend="cpu")
    want = cv2.GaussianBlur(img, (11, 11), 1.5, borderType=cv2.BORDER_REFLECT_101)
    assert np.abs(out.astype(int) - want.astype(int)).max() <= 1


def test_gaussian_iir_is_close_to_the_gaussian():
    img = random_image(np.float32, (128, 128))
    out = tessera.gaussian(img, sigma=12.0, method="iir", backend="cpu")
    want = ndimage.gaussian_filter(img.astype(np.float64), 12.0, mode="mirror", truncate=4.0)
    assert np.abs(out - want).max() < 0.02 * (img.max() - img.min())


def test_gaussian_plan_tells_the_fir_radius_and_the_iir():
    assert tessera.gaussian_plan(2.0) == ("fir", 6)
    assert tessera.gaussian_plan(2.0, radius=4) == ("fir", 4)
    assert tessera.gaussian_plan(20.0) == ("iir", None)
    assert tessera.gaussian_plan(12.0, channels=4) == ("fir", 36)


def exact_variance(img, kernel, radius, border="reflect101"):
    """The local variance from exact integer moments (int64 / Python ints)."""
    w1 = (radius + 1 - np.abs(np.arange(-radius, radius + 1))) if kernel == "tent" else np.ones(2 * radius + 1)
    w1 = w1.astype(np.int64)
    x = img.astype(np.int64)
    mode = SCIPY_MODE[border]

    def smooth(a):
        for axis in (0, 1):
            a = ndimage.correlate1d(a, w1, axis=axis, mode=mode)
        return a

    s1, s2, w = smooth(x), smooth(x * x), int(w1.sum()) ** 2
    num = s2.astype(object) * w - s1.astype(object) ** 2
    return (num / (w * w)).astype(np.float64)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("kernel,radius", [("tent", 1), ("tent", 7), ("tent", 31), ("box", 0), ("box", 5)])
def test_recursive_variance_of_integers_is_within_one_ulp_of_exact(dtype, kernel, radius):
    img = random_image(dtype)
    out = tessera.local_variance(img, method="recursive", kernel=kernel, radius=radius, backend="cpu")
    assert out.dtype == np.float32 and out.shape == img.shape
    want = exact_variance(img, kernel, radius)
    assert np.all(np.abs(out - want) <= np.spacing(want.astype(np.float32)))


@pytest.mark.parametrize("method", ["usual", "koenig", "welford", "pairwise", "threewise", "recursive"])
def test_every_variance_method_agrees_with_scipy(method):
    img = random_image(np.float32)
    out = tessera.local_variance(img, method=method, kernel="box", radius=3, backend="cpu")
    x = img.astype(np.float64)
    m = ndimage.uniform_filter(x, 7, mode="mirror")
    want = ndimage.uniform_filter(x * x, 7, mode="mirror") - m * m
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=1e-2)


def test_variance_of_rgba_is_the_variance_of_the_luma():
    img = random_image(np.uint8, (40, 50, 4))
    luma = (img[..., :3].astype(np.float32) * np.array([0.299, 0.587, 0.114], np.float32)).sum(axis=2, dtype=np.float32)
    out = tessera.local_variance(img, radius=3, backend="cpu")
    np.testing.assert_allclose(out, tessera.local_variance(luma, radius=3, backend="cpu"), rtol=1e-4, atol=1e-3)


def _same_as_cli(cli, tmp_path, img, command, args, python_out):
    src = tmp_path / "in.png"
    tessera.save(src, img)
    out = tmp_path / ("out.tif" if python_out.dtype in (np.float32, np.uint32) else "out.png")
    cli(command, src, "-o", out, "--backend", "cpu", *args)
    np.testing.assert_array_equal(tessera.load(out), python_out)


def test_filters_equal_the_cli_on_a_photograph(cli, tmp_path, photo_gray):
    img = photo_gray
    _same_as_cli(cli, tmp_path, img, "mean", ["-m", "15"], tessera.mean(img, size=15, backend="cpu"))
    _same_as_cli(cli, tmp_path, img, "mean", ["--width", "8", "--height", "3", "--border", "replicate"],
                 tessera.mean(img, width=8, height=3, border="replicate", backend="cpu"))
    _same_as_cli(cli, tmp_path, img, "box", ["-m", "9"], tessera.box_sum(img, size=9, backend="cpu"))
    _same_as_cli(cli, tmp_path, img, "gauss", ["--sigma", "3"], tessera.gaussian(img, sigma=3, backend="cpu"))
    _same_as_cli(cli, tmp_path, img, "variance", ["--radius", "15", "--method", "threewise"],
                 tessera.local_variance(img, radius=15, method="threewise", backend="cpu"))
    _same_as_cli(cli, tmp_path, img, "contrast", [], tessera.contrast(img, backend="cpu"))


def test_contrast_and_glare_of_rgba_equal_the_cli(cli, tmp_path, photo_rgba):
    img = photo_rgba
    _same_as_cli(cli, tmp_path, img, "contrast", ["--radii", "3,15", "--alpha", "1.5"],
                 tessera.contrast(img, radii=[3, 15], alpha=1.5, backend="cpu"))
    corrected, mask, report = tessera.glare(img, backend="cpu")
    src = tmp_path / "in.png"
    tessera.save(src, img)
    cli("glare", src, "-o", tmp_path / "fixed.png", "--mask", tmp_path / "mask.png", "--backend", "cpu")
    np.testing.assert_array_equal(tessera.load(tmp_path / "fixed.png"), corrected)
    np.testing.assert_array_equal(tessera.load(tmp_path / "mask.png"), mask)
    assert report["pixels"] == int((mask == 255).sum())
    assert set(np.unique(mask)) <= {0, 255}


def test_glare_finds_a_planted_highlight():
    rng = np.random.default_rng(3)
    img = (rng.normal(90, 6, (120, 160))).clip(0, 255).astype(np.uint8)
    yy, xx = np.mgrid[:120, :160]
    spot = (yy - 60) ** 2 + (xx - 80) ** 2 <= 16
    img[spot] = 255
    corrected, mask, report = tessera.glare(img, backend="cpu")
    assert report["spots"] == 1
    assert mask[spot].all()
    assert corrected[spot].max() < 150


def test_contrast_lifts_low_contrast_detail():
    rng = np.random.default_rng(4)
    img = (100 + rng.normal(0, 3, (128, 128))).astype(np.float32)
    img[:, 64:] += 40
    out = tessera.contrast(img, backend="cpu")
    assert out.dtype == np.float32
    assert out[10:50, 10:50].std() > 1.5 * img[10:50, 10:50].std()

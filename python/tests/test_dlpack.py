"""Arrays of other libraries through DLPack, and images that stay on the GPU.

On the CPU, NumPy arrays are lent through the DLPack path itself (an object with only
``__dlpack__`` and ``__dlpack_device__``), so every step a PyTorch or CuPy array takes is
taken here too except the device memory: the capsule protocol, the layout checks, the
results. The CUDA cases run where a GPU is usable and are skipped, by name, elsewhere."""

import sys

import numpy as np
import pytest

import tessera
from conftest import random_image

UNARY = ["mean", "box_sum", "gaussian", "local_variance", "contrast"]
KINDS = {
    "uint8": lambda: random_image(np.uint8),
    "uint16": lambda: random_image(np.uint16, seed=1),
    "float32": lambda: random_image(np.float32, seed=2),
    "rgba": lambda: random_image(np.uint8, (67, 93, 4), seed=3),
}
HAS_GPU = tessera.backend_info()["name"] == "cuda"


class Lent:
    """An array lent only through DLPack, as PyTorch and CuPy lend theirs: ``capsule``
    makes the capsule (NumPy's own exporter by default)."""

    def __init__(self, array, capsule=None, device=(1, 0)):
        self.array = array
        self.capsule = capsule or (lambda **kw: array.__dlpack__(**kw))
        self.device = device
        self.calls = []

    def __dlpack__(self, **kw):
        self.calls.append(kw)
        return self.capsule(**kw)

    def __dlpack_device__(self):
        return self.device


def same(a, b):
    assert type(a) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("kind", KINDS)
def test_host_arrays_through_dlpack_give_the_numpy_results(name, kind):
    img = KINDS[kind]()
    f = getattr(tessera, name)
    if name == "box_sum" and kind == "rgba":
        with pytest.raises(TypeError, match="not supported"):
            f(Lent(img), backend="cpu")
        return
    lent = Lent(img)
    same(f(lent, backend="cpu"), f(img, backend="cpu"))
    assert lent.calls == [{}], "a host array is asked for its capsule once, without a stream"


@pytest.mark.parametrize("kind", KINDS)
def test_glare_through_dlpack_gives_the_numpy_results(kind):
    img = KINDS[kind]()
    got = tessera.glare(Lent(img), backend="cpu")
    want = tessera.glare(img, backend="cpu")
    same(got[0], want[0])
    same(got[1], want[1])
    assert got[2] == want[2]


def test_matrices_through_dlpack_give_the_numpy_results():
    a = random_image(np.float32, (23, 37), seed=8)
    b = random_image(np.float32, (37, 19), seed=9)
    c = random_image(np.float32, (23, 37), seed=10)
    same(tessera.matmul(Lent(a), Lent(b), backend="cpu"), tessera.matmul(a, b, backend="cpu"))
    same(tessera.mat_add(Lent(a), c, backend="cpu"), tessera.mat_add(a, c, backend="cpu"))
    with pytest.raises(TypeError, match="not supported"):
        tessera.matmul(Lent(a.astype(np.uint16)), b, backend="cpu")


@pytest.mark.parametrize("colour", [False, True], ids=["gray", "rgba"])
def test_stereo_through_dlpack_gives_the_numpy_results(colour):
    shape = (24, 40, 4) if colour else (24, 40)
    left = random_image(np.uint8, shape, seed=11)
    right = np.roll(left, -3, axis=1)
    want = tessera.stereo(left, right, max_disp=8, backend="cpu")
    for l, r in [(Lent(left), Lent(right)), (Lent(left), right)]:
        got = tessera.stereo(l, r, max_disp=8, backend="cpu")
        same(got[0], want[0])
        assert got[1] == want[1]
    if not colour:
        with pytest.raises(TypeError, match="not supported"):
            tessera.stereo(Lent(left.astype(np.uint16)), right.astype(np.uint16), backend="cpu")


@pytest.mark.parametrize(
    "view",
    [lambda a: a[::2], lambda a: a[5:40, 7:61], lambda a: a[::3, 2:50]],
    ids=["every other row", "a window", "rows and columns"],
)
def test_strided_host_arrays_are_read_in_place(view):
    img = random_image(np.float32, (90, 120), seed=4)
    v = view(img)
    same(tessera.gaussian(Lent(v), sigma=1.5, backend="cpu"), tessera.gaussian(np.ascontiguousarray(v), sigma=1.5, backend="cpu"))


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: random_image(np.uint8, (40, 30)).T, "not adjacent"),
        (lambda: random_image(np.uint8, (40, 30))[:, ::2], "not adjacent"),
        (lambda: random_image(np.uint8, (40, 30))[::-1], "in order"),
        (lambda: np.zeros((4, 5, 3), np.uint8), "not an image"),
        (lambda: np.zeros((4, 5, 4), np.uint8)[:, :, ::-1], "channels"),
        (lambda: np.zeros(20, np.uint8), "1 dimensions"),
    ],
)
def test_layouts_that_are_not_images_are_value_errors(make, match):
    with pytest.raises(ValueError, match=match):
        tessera.mean(Lent(make()), backend="cpu")


@pytest.mark.parametrize("dtype", [np.float64, np.int16, np.int32, np.complex64])
def test_unsupported_element_types_are_type_errors(dtype):
    with pytest.raises(TypeError, match="not supported"):
        tessera.mean(Lent(np.zeros((8, 8), dtype)), backend="cpu")


def test_other_device_types_and_non_capsules_are_errors():
    img = random_image(np.uint8, (8, 8))
    with pytest.raises(ValueError, match="device type 4 is not supported"):
        tessera.mean(Lent(img, device=(4, 0)), backend="cpu")
    with pytest.raises(TypeError, match="did not return a DLPack capsule"):
        tessera.mean(Lent(img, capsule=lambda **kw: object()), backend="cpu")


def test_the_exporter_lends_without_a_copy_and_releases_its_owner():
    """tessera's own exporter (behind ``CudaImage.__dlpack__``), on host memory: NumPy takes
    its capsule without a copy, tessera takes it as an input, and the lent array is released
    once each consumer is done, or when a capsule is never consumed."""
    img = random_image(np.uint16, (30, 41), seed=5)
    lent = Lent(None, capsule=lambda **kw: tessera._tessera._lend_host(img))
    base = sys.getrefcount(img)

    back = np.from_dlpack(lent)
    assert np.shares_memory(back, img) and back.dtype == img.dtype and back.shape == img.shape
    assert sys.getrefcount(img) == base + 1
    del back
    assert sys.getrefcount(img) == base

    same(tessera.mean(lent, size=5, backend="cpu"), tessera.mean(img, size=5, backend="cpu"))
    assert sys.getrefcount(img) == base

    capsule = tessera._tessera._lend_host(img)
    assert sys.getrefcount(img) == base + 1
    del capsule
    assert sys.getrefcount(img) == base

    rgba = random_image(np.uint8, (6, 7, 4), seed=6)
    back = np.from_dlpack(Lent(rgba, capsule=lambda **kw: tessera._tessera._lend_host(rgba)))
    assert back.shape == (6, 7, 4) and np.array_equal(back, rgba)


@pytest.mark.skipif(HAS_GPU, reason="checks the errors where no GPU is usable")
def test_cuda_arrays_without_a_usable_gpu_are_errors():
    fake = Lent(random_image(np.uint8, (8, 8)), device=(2, 0))
    with pytest.raises(ValueError, match='needs backend="cuda" or "auto"'):
        tessera.gaussian(fake, backend="cpu")
    with pytest.raises(RuntimeError, match="needs the CUDA backend, which is not usable here"):
        tessera.gaussian(fake, backend="auto")
    with pytest.raises(RuntimeError):
        tessera.gaussian(fake, backend="cuda")
    assert fake.calls == [], "no capsule is taken when it cannot be used"
    with pytest.raises(RuntimeError):
        tessera.to_device(random_image(np.uint8, (8, 8)))


needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no usable GPU (CUDA backend)")


@needs_gpu
@pytest.mark.parametrize("kind", KINDS)
def test_a_chain_on_the_gpu_gives_the_host_calls_results(kind):
    img = KINDS[kind]()
    d = tessera.to_device(img)
    assert isinstance(d, tessera.CudaImage) and d.shape == img.shape and d.dtype == img.dtype.name
    blurred = tessera.gaussian(d, sigma=1.5)
    variance = tessera.local_variance(blurred)
    enhanced = tessera.contrast(blurred)
    assert isinstance(variance, tessera.CudaImage) and isinstance(enhanced, tessera.CudaImage)
    host_blurred = tessera.gaussian(img, sigma=1.5, backend="cuda")
    same(variance.numpy(), tessera.local_variance(host_blurred, backend="cuda"))
    same(enhanced.numpy(), tessera.contrast(host_blurred, backend="cuda"))


@needs_gpu
def test_glare_on_the_gpu_gives_the_host_calls_results():
    img = KINDS["uint8"]()
    corrected, mask, report = tessera.glare(tessera.to_device(img))
    assert isinstance(corrected, tessera.CudaImage) and isinstance(mask, tessera.CudaImage)
    want = tessera.glare(img, backend="cuda")
    same(corrected.numpy(), want[0])
    same(mask.numpy(), want[1])
    assert report == want[2]


@needs_gpu
def test_matrices_on_the_gpu_give_the_host_calls_results():
    a = random_image(np.float32, (23, 37), seed=8)
    b = random_image(np.float32, (37, 19), seed=9)
    d = tessera.matmul(tessera.to_device(a), tessera.to_device(b))
    assert isinstance(d, tessera.CudaImage) and d.shape == (23, 19)
    same(d.numpy(), tessera.matmul(a, b, backend="cuda"))
    with pytest.raises(ValueError, match="same side"):
        tessera.mat_add(tessera.to_device(a), a)


@needs_gpu
def test_stereo_on_the_gpu_gives_the_host_calls_results():
    left = random_image(np.uint8, (24, 40), seed=11)
    right = np.roll(left, -3, axis=1)
    disparity, stats = tessera.stereo(tessera.to_device(left), tessera.to_device(right), max_disp=8)
    assert isinstance(disparity, tessera.CudaImage) and disparity.dtype == "float32"
    want = tessera.stereo(left, right, max_disp=8, backend="cuda")
    same(disparity.numpy(), want[0])
    assert stats == want[1]
    with pytest.raises(ValueError, match="same side"):
        tessera.stereo(tessera.to_device(left), right)


@needs_gpu
def test_cuda_image_interfaces():
    img = random_image(np.float32, (33, 47), seed=7)
    d = tessera.to_device(img)
    cai = d.__cuda_array_interface__
    assert cai["shape"] == (33, 47) and cai["typestr"] == "<f4" and cai["version"] == 3 and cai["data"][0] != 0
    assert d.__dlpack_device__() == (2, 0)
    assert tessera.to_device(d) is d
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(1, 0))
    # Its own capsule, consumed by tessera as a CUDA array: the same result as the CudaImage.
    lent = Lent(None, capsule=lambda **kw: d.__dlpack__(**kw), device=(2, 0))
    same(tessera.mean(lent, size=3).numpy(), tessera.mean(d, size=3).numpy())
    assert lent.calls == [{"stream": 1}]

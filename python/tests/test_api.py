"""The package's surface: every dtype of every function, strided views read in place, each
bad input a clear exception, defaults from Rust, the backend choice, the GIL released."""

import inspect
import re
import threading
import time

import numpy as np
import pytest

import tessera
from conftest import random_image

GRAY = ["uint8", "uint16", "float32"]
ALL = GRAY + ["rgba"]

# function, the input types it takes, output dtype by input type (None: the input's).
UNARY = {
    "mean": (ALL, None),
    "box_sum": (GRAY, {"uint8": np.uint32, "uint16": np.uint32, "float32": np.float32}),
    "gaussian": (ALL, None),
    "local_variance": (ALL, np.float32),
    "contrast": (ALL, None),
}


def call(name, img, **kw):
    return getattr(tessera, name)(img, backend="cpu", **kw)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("kind", ALL)
def test_every_dtype(name, kind, images):
    takes, out_dtype = UNARY[name]
    img = images[kind]
    if kind not in takes:
        with pytest.raises(TypeError, match="not supported"):
            call(name, img)
        return
    out = call(name, img)
    want = img.dtype if out_dtype is None else (out_dtype[kind] if isinstance(out_dtype, dict) else out_dtype)
    assert out.dtype == want
    assert out.shape == (img.shape if out_dtype is None else img.shape[:2])


@pytest.mark.parametrize("kind", ALL)
def test_glare_and_registration_take_every_dtype(kind, images):
    img = images[kind]
    corrected, mask, report = tessera.glare(img, backend="cpu")
    assert corrected.dtype == img.dtype and mask.dtype == np.uint8 and mask.shape == img.shape[:2]
    r = tessera.register_pair(img, img, backend="cpu", search_radius=4)
    assert set(r) >= {"shift", "reason", "ncc", "vectors"}


@pytest.mark.parametrize("bad", [np.int32, np.int8, np.float64, np.int64, np.bool_, np.complex64, np.float16])
@pytest.mark.parametrize("name", UNARY)
def test_unsupported_dtypes_are_type_errors(name, bad):
    img = np.zeros((8, 8), dtype=bad)
    with pytest.raises(TypeError, match=r"dtype .* is not supported; expected .*uint8"):
        call(name, img)


def test_non_native_byte_order_is_a_type_error():
    with pytest.raises(TypeError, match="not supported"):
        tessera.mean(np.zeros((8, 8), dtype=">u2"), backend="cpu")


@pytest.mark.parametrize("name", ["mean", "gaussian", "local_variance", "box_sum"])
@pytest.mark.parametrize("kind", GRAY)
def test_strided_row_views_are_read_in_place(name, kind, images):
    img = images[kind]
    for view in (img[5:-5, 3:-7], img[::2], img[1::3, 10:40], img[7:8], img[:, 4:5]):
        assert not view.flags.c_contiguous or view.shape[0] == 1
        np.testing.assert_array_equal(call(name, view), call(name, np.ascontiguousarray(view)))


def test_rgba_views_of_rows_and_columns(images):
    img = images["rgba"]
    view = img[3:50:2, 5:60]
    np.testing.assert_array_equal(tessera.mean(view, size=5), tessera.mean(np.ascontiguousarray(view), size=5))


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a[:, ::2],
        lambda a: a.T,
        lambda a: a[::-1],
        lambda a: a[:, ::-1],
        lambda a: np.lib.stride_tricks.as_strided(a, shape=(10, 10), strides=(1, 1)),
    ],
    ids=["column-step", "transposed", "reversed-rows", "reversed-columns", "overlapping-rows"],
)
def test_layouts_without_a_row_stride_view_are_value_errors(make):
    a = random_image(np.uint8, (40, 40))
    with pytest.raises(ValueError, match="ascontiguousarray"):
        tessera.mean(make(a), backend="cpu")


def test_rgba_with_strided_channels_is_a_value_error():
    planes = random_image(np.uint8, (4, 20, 30))
    with pytest.raises(ValueError, match="channels of a pixel are not adjacent"):
        tessera.mean(np.moveaxis(planes, 0, 2), backend="cpu")


def test_unaligned_buffers_are_value_errors():
    buf = np.zeros(2 * 64 + 1, dtype=np.uint8)
    unaligned = np.frombuffer(buf.data, dtype=np.uint16, count=64, offset=1).reshape(8, 8)
    with pytest.raises(ValueError, match="not aligned"):
        tessera.mean(unaligned, backend="cpu")


def test_read_only_inputs_are_accepted():
    a = random_image(np.uint8)
    a.setflags(write=False)
    np.testing.assert_array_equal(tessera.mean(a), tessera.mean(a.copy()))


@pytest.mark.parametrize(
    "shape,err,match",
    [
        ((10,), ValueError, "not an image"),
        ((2, 3, 4, 4), ValueError, "not an image"),
        ((10, 10, 3), ValueError, "RGB"),
        ((10, 10, 2), ValueError, "not an image"),
        ((0, 10), ValueError, "no pixels"),
        ((10, 0), ValueError, "no pixels"),
    ],
)
def test_wrong_shapes(shape, err, match):
    with pytest.raises(err, match=match):
        tessera.mean(np.zeros(shape, dtype=np.uint8), backend="cpu")


def test_not_an_array_is_a_type_error():
    with pytest.raises(TypeError, match=r"expected a numpy.ndarray \(or an array with __dlpack__\), got list"):
        tessera.mean([[1, 2], [3, 4]])


@pytest.mark.parametrize(
    "name,kwargs,match",
    [
        ("mean", {"size": -3}, "size = -3"),
        ("mean", {"size": 0}, "out of range"),
        ("mean", {"size": 5000}, "out of range"),
        ("mean", {"border": "wrap"}, "unknown border"),
        ("mean", {"border": "constant:x"}, "constant value"),
        ("mean", {"border": "constant:300"}, "border constant"),
        ("gaussian", {"sigma": float("nan")}, "sigma"),
        ("gaussian", {"sigma": -1.0}, "sigma"),
        ("gaussian", {"sigma": float("inf")}, "sigma"),
        ("gaussian", {"method": "fft"}, "gaussian method"),
        ("local_variance", {"radius": 6}, "tent radius"),
        ("local_variance", {"kernel": "disk"}, "kernel"),
        ("local_variance", {"method": "fast"}, "variance method"),
        ("local_variance", {"border": "normalize"}, "Normalize"),
        ("contrast", {"radii": []}, "radii"),
        ("contrast", {"alpha": float("nan")}, "alpha"),
        ("glare", {"mode": "auto"}, "mode"),
        ("glare", {"k_sigma": float("nan")}, "k"),
        ("mean", {"backend": "gpu"}, "unknown backend"),
    ],
)
def test_bad_parameters_are_value_errors(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        getattr(tessera, name)(random_image(np.uint8), **kwargs)


def test_registration_and_stitching_bad_input():
    a, b = random_image(np.uint8, (64, 64)), random_image(np.uint8, (64, 65))
    with pytest.raises(ValueError, match="sizes differ|size"):
        tessera.register_pair(a, b, backend="cpu")
    with pytest.raises(ValueError, match="cthresh"):
        tessera.register_pair(a, a, cthresh=float("nan"), backend="cpu")
    with pytest.raises(ValueError, match='unknown value "spiral"'):
        tessera.register_pair(a, a, method="spiral", backend="cpu")
    with pytest.raises(ValueError, match='motion: unknown value "affine"; expected one of translation, similarity'):
        tessera.register_pair(a, a, motion="affine", backend="cpu")
    with pytest.raises(ValueError, match='motion: unknown value "rigid"'):
        tessera.stitch([a, a], motion="rigid", backend="cpu")
    for turn in (0.0, -1.0, 46.0, float("nan")):
        with pytest.raises(ValueError, match="max turn"):
            tessera.register_pair(a, a, max_turn=turn, backend="cpu")
        with pytest.raises(ValueError, match="max turn"):
            tessera.stitch([a, a], max_turn=turn, backend="cpu")
    with pytest.raises(ValueError, match="keyframe shift"):
        tessera.stitch([a, a], keyframe_shift=2.0, backend="cpu")
    with pytest.raises(ValueError, match="no frames"):
        tessera.stitch([], backend="cpu")
    with pytest.raises(TypeError, match="one array"):
        tessera.stitch(a, backend="cpu")
    with pytest.raises(TypeError, match="frames\\[1\\]"):
        tessera.stitch([a, 3], backend="cpu")
    with pytest.raises(FileNotFoundError):
        tessera.stitch("/nonexistent/dir/*.png", backend="cpu")
    with pytest.raises(FileNotFoundError):
        tessera.load("/nonexistent.png")


def test_stereo_and_matrices_bad_input():
    a = random_image(np.uint8, (32, 48))
    with pytest.raises(TypeError, match="uint16"):
        tessera.stereo(random_image(np.uint16, (32, 48)), random_image(np.uint16, (32, 48)), backend="cpu")
    with pytest.raises(ValueError):
        tessera.stereo(a, random_image(np.uint8, (32, 40)), backend="cpu")
    with pytest.raises(ValueError, match="census window"):
        tessera.stereo(a, a, census_window="7by5", backend="cpu")
    with pytest.raises(ValueError, match="paths"):
        tessera.stereo(a, a, paths=6, backend="cpu")
    f = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="sizes differ|size"):
        tessera.matmul(f, f, backend="cpu")
    with pytest.raises(TypeError, match="float32"):
        tessera.matmul(f.astype(np.float64), f.T.copy(), backend="cpu")


def test_defaults_come_from_rust_and_show_in_signatures():
    d = tessera.defaults()
    assert d["mean"]["size"] == 3 and d["stitch"]["rsz"] == 25 and d["stitch"]["cthresh"] == 0.85
    for name in ("register_pair", "stitch"):
        assert (d[name]["motion"], d[name]["fit_scale"], d[name]["max_turn"]) == ("similarity", False, 6.0)
    for name in ["mean", "box_sum", "gaussian", "local_variance", "contrast", "glare", "register_pair", "stitch", "stitch_grid", "stereo"]:
        sig = inspect.signature(getattr(tessera, name))
        for key, value in d[name].items():
            shown = sig.parameters[key].default
            assert (list(shown) if isinstance(shown, tuple) else shown) == value, (name, key)


def test_calls_without_keywords_equal_calls_with_the_defaults(images):
    for kind in ALL:
        img = images[kind]
        for name in ["mean", "gaussian", "local_variance", "contrast"]:
            d = tessera.defaults(name)
            np.testing.assert_array_equal(getattr(tessera, name)(img), getattr(tessera, name)(img, **d))


def test_defaults_match_the_cli_help(cli):
    """The CLI prints its defaults in --help; they are the same Rust Defaults."""
    for command, function, names in [
        ("mean", "mean", {"size": "size", "border": "border"}),
        ("gauss", "gaussian", {"sigma": "sigma", "method": "method"}),
        ("variance", "local_variance", {"method": "method", "kernel": "kernel", "radius": "radius"}),
        ("stitch", "stitch", {"rsz": "rsz", "cthresh": "cthresh", "npts": "npts", "search-radius": "search_radius",
                              "coarse": "coarse", "blend": "blend", "method": "method", "accept": "accept",
                              "motion": "motion", "max-turn": "max_turn"}),
        ("stereo", "stereo", {"max-disp": "max_disp", "cost": "cost", "census-window": "census_window", "paths": "paths"}),
    ]:
        text = cli(command, "--help")
        d = tessera.defaults(function)
        for option, key in names.items():
            m = re.search(rf"^\s+(?:-\w, )?--{option}\b[^\n]*(?:\n(?!\s+(?:--|-\w,))[^\n]*)*?\[default: ([^\]]+)\]", text, re.M)
            assert m, (command, option)
            shown = m.group(1)
            if isinstance(d[key], float):
                assert float(shown) == d[key], (command, option, shown, d[key])
            else:
                assert shown == str(d[key]), (command, option, shown, d[key])


def test_backend_choice():
    assert tessera.backend_info("cpu") == {"name": "cpu", "fallback": None}
    info = tessera.backend_info("auto")
    assert info["name"] in ("cpu", "cuda")
    assert (info["fallback"] is None) == (info["name"] == "cuda")
    if info["name"] == "cpu":
        with pytest.raises(RuntimeError, match="backend unavailable"):
            tessera.mean(random_image(np.uint8), backend="cuda")
        with pytest.raises(RuntimeError, match="backend unavailable"):
            tessera.backend_info("CUDA")
    assert set(tessera.BACKENDS) == {"cpu", "cuda", "auto"}


def test_the_gil_is_released_while_computing():
    img = random_image(np.float32, (1500, 1500))
    ticks = []
    done = threading.Event()

    def work():
        tessera.local_variance(img, method="usual", kernel="box", radius=7, backend="cpu", single_thread=True)
        done.set()

    t = threading.Thread(target=work)
    t0 = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    # The main thread kept running (the call takes a good fraction of a second).
    assert time.perf_counter() - t0 > 0.05
    assert len(ticks) > 10


def test_threads_run_calls_in_parallel():
    from concurrent.futures import ThreadPoolExecutor

    imgs = [random_image(np.uint8, (800, 800), seed=s) for s in range(4)]
    want = [tessera.local_variance(i, radius=31, single_thread=True) for i in imgs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: tessera.local_variance(i, radius=31, single_thread=True), imgs))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_load_and_save_round_trip(tmp_path, images):
    for kind in ALL:
        img = images[kind]
        path = tmp_path / (f"{kind}.tif" if kind == "float32" else f"{kind}.png")
        tessera.save(path, img)
        back = tessera.load(path)
        if kind == "rgba":
            np.testing.assert_array_equal(back[..., :3], img[..., :3])
        else:
            np.testing.assert_array_equal(back, img)


# Every array function, called with one bad array in every array argument.
ARRAY_FUNCTIONS = {
    "mean": lambda a: tessera.mean(a, backend="cpu"),
    "box_sum": lambda a: tessera.box_sum(a, backend="cpu"),
    "gaussian": lambda a: tessera.gaussian(a, backend="cpu"),
    "local_variance": lambda a: tessera.local_variance(a, backend="cpu"),
    "contrast": lambda a: tessera.contrast(a, backend="cpu"),
    "glare": lambda a: tessera.glare(a, backend="cpu"),
    "register_pair": lambda a: tessera.register_pair(a, a, backend="cpu"),
    "stitch": lambda a: tessera.stitch([a, a], backend="cpu"),
    "stereo": lambda a: tessera.stereo(a, a, backend="cpu"),
    "matmul": lambda a: tessera.matmul(a, a, backend="cpu"),
    "mat_add": lambda a: tessera.mat_add(a, a, backend="cpu"),
}

# Inputs no function takes: each must raise a Python exception naming what is wrong (a
# string is a path to `stitch`, which it cannot find).
REFUSED = {
    "complex": lambda: np.zeros((16, 16), np.complex64),
    "bool": lambda: np.zeros((16, 16), np.bool_),
    "object": lambda: np.empty((16, 16), object),
    "empty": lambda: np.zeros((0, 0), np.uint8),
    "4-D": lambda: np.zeros((2, 16, 16, 4), np.uint8),
    "float16": lambda: np.zeros((16, 16), np.float16),
    "int64": lambda: np.zeros((16, 16), np.int64),
    "list": lambda: [[1, 2], [3, 4]],
    "None": lambda: None,
    "string": lambda: "not an image",
}

# Inputs a function may take or refuse, but never by crashing the interpreter: layouts
# (read in place where rows are strided, else a ValueError) and non-finite values.
TAKEN_OR_REFUSED = {
    "non-contiguous": lambda: np.zeros((32, 32), np.float32)[::2, ::2],
    "reversed strides": lambda: np.zeros((16, 16), np.float32)[::-1, ::-1],
    "Fortran order": lambda: np.asfortranarray(np.zeros((16, 16), np.float32)),
    "NaN": lambda: np.full((16, 16), np.nan, np.float32),
    "Inf": lambda: np.full((16, 16), np.inf, np.float32),
}


@pytest.mark.parametrize("bad", REFUSED)
@pytest.mark.parametrize("name", ARRAY_FUNCTIONS)
def test_every_function_refuses_bad_arrays_with_an_exception(name, bad):
    with pytest.raises((TypeError, ValueError, OSError)) as e:
        ARRAY_FUNCTIONS[name](REFUSED[bad]())
    assert str(e.value)


@pytest.mark.parametrize("odd", TAKEN_OR_REFUSED)
@pytest.mark.parametrize("name", ARRAY_FUNCTIONS)
def test_every_function_takes_or_refuses_odd_arrays(name, odd):
    try:
        ARRAY_FUNCTIONS[name](TAKEN_OR_REFUSED[odd]())
    except (TypeError, ValueError, RuntimeError) as e:
        assert str(e)

"""tessera for Python: the operations of tessera's Backend on NumPy arrays.

Images are NumPy arrays: ``uint8``, ``uint16`` or ``float32`` of shape ``(H, W)`` (gray),
or ``uint8`` ``(H, W, 4)`` (RGBA). Inputs are read in place, without a copy, when the pixels
of each row are adjacent in memory (any C-contiguous array, and slices of rows or of column
ranges); other layouts raise ValueError naming ``numpy.ascontiguousarray``. Outputs are new
arrays. The GIL is released while tessera computes, so Python threads (and Dask's threaded
scheduler) run calls in parallel.

Every function takes ``backend="cpu" | "cuda" | "auto"`` (``auto``: CUDA where a GPU is
usable, else the CPU; see :func:`backend_info`) and ``single_thread`` (run the CPU backend
on one thread instead of all). Keyword arguments are named as the ``tessera`` command
line's options, and their defaults are the Rust library's own (``tessera.defaults()``).

Arrays of other libraries come in without a copy through DLPack (any object with
``__dlpack__``: PyTorch, CuPy, JAX). Host memory is read in place, as a NumPy array is.
CUDA memory is read in place on the GPU by the CUDA backend, and the result is a
:class:`CudaImage` that stays there: the next operation takes it without a transfer, and
``cupy.from_dlpack`` / ``torch.from_dlpack`` take it back without a copy (``to_device``
uploads a NumPy image once; ``CudaImage.numpy()`` downloads).

Errors: ValueError for bad parameters, shapes and strides; TypeError for unsupported dtypes;
RuntimeError for an unavailable backend; MemoryError when an allocation is refused.

``tessera.dask`` applies the filters and the local variance to Dask arrays chunk by chunk
with the exact halo (results identical to one call), and stitches many sequences as Dask
tasks.
"""

import functools as _functools
import inspect as _inspect

from . import _tessera

__version__ = _tessera.__version__
BACKENDS = tuple(_tessera.BACKENDS)

_DEFAULTS = _tessera.defaults()


def defaults(function=None):
    """The keyword defaults of every function (or of one), from the Rust ``Default``s."""
    import copy

    if function is None:
        return copy.deepcopy(_DEFAULTS)
    return copy.deepcopy(_DEFAULTS[function])


def _expose(name):
    """The native function ``name`` with its signature's defaults shown (the native
    signature prints them as ``...``): they are the values ``defaults()`` reads from Rust."""
    raw = getattr(_tessera, name)
    known = _DEFAULTS.get(name, {})
    try:
        sig = _inspect.signature(raw)
    except (TypeError, ValueError):  # pragma: no cover - a Python without text signatures
        return raw
    params = []
    for p in sig.parameters.values():
        if p.name in known:
            d = known[p.name]
            p = p.replace(default=tuple(d) if isinstance(d, list) and p.name == "prediction" else d)
        params.append(p)

    @_functools.wraps(raw)
    def function(*args, **kwargs):
        return raw(*args, **kwargs)

    function.__signature__ = sig.replace(parameters=params)
    function.__module__ = __name__
    function.__wrapped__ = raw
    return function


_EXPOSED = [
    "mean",
    "box_sum",
    "gaussian",
    "local_variance",
    "contrast",
    "glare",
    "register_pair",
    "stitch",
    "stitch_grid",
    "stereo",
    "matmul",
    "mat_add",
    "synth_sequence",
    "backend_info",
    "to_device",
]
for _name in _EXPOSED:
    globals()[_name] = _expose(_name)
del _name
gaussian_plan = _tessera.gaussian_plan
CudaImage = _tessera.CudaImage
load = _tessera.load
save = _tessera.save

__all__ = _EXPOSED + ["load", "save", "gaussian_plan", "defaults", "BACKENDS", "CudaImage"]

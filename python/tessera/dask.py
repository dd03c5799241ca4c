"""tessera on Dask: filters and local variance of arrays larger than one machine's memory,
and many stitching runs at once, on whatever scheduler is active (threads, processes, or a
``dask.distributed`` cluster).

The window operations (``mean``, ``box_sum``, ``gaussian``, ``local_variance``) run
``tessera``'s function on every chunk by ``map_overlap`` with the halo the kernel reads and
``boundary="none"``: each chunk is extended by exactly that many real pixels from its
neighbours, and at the image's own edges it is not extended at all, so there tessera
applies the chosen ``border`` rule itself, to the image's edge, exactly as in one call on
the whole image. (Dask's own boundary modes cannot stand in for tessera's: Dask's
``"reflect"`` repeats the edge pixel, NumPy's ``"symmetric"`` and OpenCV's BORDER_REFLECT,
while tessera's ``reflect101`` does not, NumPy's ``"reflect"`` and OpenCV's
BORDER_REFLECT_101; and ``normalize`` has no padding equivalent at all.)

The result is then identical to one call wherever the operation's arithmetic does not
depend on where the image starts:

- ``mean`` and ``box_sum`` of uint8 / uint16 (exact integer sums), ``gaussian`` with the FIR
  on any dtype, and ``local_variance(method="recursive")`` of uint8 / uint16 (exact integer
  moments): bit-identical, at every chunking.
- ``mean`` / ``box_sum`` of float32 (running sums in float64, rounded once) may differ in
  the last bit; ``local_variance`` of float32, or by the paper's float32 methods, shifts
  the data by the image's (here: the chunk's) mean, so results agree to the methods' float
  error, not bit for bit.
- ``gaussian`` with the IIR (``method="iir"``, or ``"auto"`` at large sigma) has infinite
  support and no exact halo: a ValueError says so (use ``method="fir"``).
- ``contrast`` and ``glare`` use the whole image's statistics (global standard deviation,
  adaptive thresholds) and have no exact chunked form; they are not offered here.

Chunks must hold whole pixels: a 3-D (RGBA) array is chunked along rows and columns only.
Within a task tessera runs on one thread by default (``single_thread=True``): Dask's workers
supply the parallelism.
"""

import numpy as np

import dask
import dask.array as da

from . import _tessera
from . import defaults as _defaults
from . import box_sum as _box_sum, gaussian as _gaussian, local_variance as _local_variance, mean as _mean
from . import save as _save, stitch as _stitch

__all__ = ["mean", "box_sum", "gaussian", "local_variance", "halo", "stitch_batch", "stitch_delayed"]


def _params(function, kwargs):
    known = _defaults(function)
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise TypeError(f"{function}() got unexpected keyword argument(s) {', '.join(unknown)}")
    known.update(kwargs)
    return known


def halo(function, *, channels=1, **kwargs):
    """The halo ``(rows, columns)`` that ``function`` (``"mean"``, ``"box_sum"``,
    ``"gaussian"``, ``"local_variance"``) reads around each pixel with these parameters:
    a window of width w reaches ``w // 2`` columns on each side (its anchor is ``w // 2``);
    the Gaussian FIR its radius (``channels``: 4 for RGBA, whose switch to the IIR comes at a
    larger sigma); the local variance its kernel radius."""
    p = _params(function, kwargs)
    if function in ("mean", "box_sum"):
        width = p["size"] if p["width"] is None else p["width"]
        height = p["size"] if p["height"] is None else p["height"]
        return (int(height) // 2, int(width) // 2)
    if function == "gaussian":
        method, radius = _tessera.gaussian_plan(p["sigma"], p["radius"], p["method"], channels)
        if method == "iir":
            raise ValueError(
                f"gaussian with sigma {p['sigma']} runs the recursive (IIR) filter here, whose support is "
                "infinite: no halo makes chunks exact. Pass method='fir' (halo ceil(3 sigma), or radius=R)"
            )
        return (radius, radius)
    if function == "local_variance":
        r = int(p["radius"])
        if r < 0:
            raise ValueError(f"radius = {r} is out of range (a count, >= 0)")
        return (r, r)
    raise ValueError(f"no halo for {function!r}: expected mean, box_sum, gaussian or local_variance")


def _map(function, op, x, dtype, depth, kwargs):
    if not isinstance(x, da.Array):
        raise TypeError(f"expected a dask.array.Array, got {type(x).__name__}")
    if x.ndim == 3:
        if x.shape[2] != 4 or len(x.chunks[2]) != 1:
            raise ValueError("a 3-D array must be RGBA (H, W, 4) with the 4 channels in one chunk")
        depths = {0: depth[0], 1: depth[1], 2: 0}
    elif x.ndim == 2:
        depths = {0: depth[0], 1: depth[1]}
    else:
        raise ValueError(f"expected a 2-D (gray) or (H, W, 4) (RGBA) array, got shape {x.shape}")
    dtype = np.dtype(dtype if dtype is not None else x.dtype)
    return da.map_overlap(
        op, x, depth=depths, boundary="none", dtype=dtype, meta=np.empty((0,) * x.ndim, dtype=dtype), **kwargs
    )


def _run_kwargs(kwargs):
    kwargs.setdefault("single_thread", True)
    return kwargs


def mean(x, **kwargs):
    """:func:`tessera.mean` of a Dask array, chunk by chunk with the window's halo; the
    same keyword arguments. Identical to one call for uint8 / uint16 (and RGBA)."""
    kwargs = _run_kwargs(kwargs)
    return _map("mean", _mean, x, None, halo("mean", **kwargs), kwargs)


def box_sum(x, **kwargs):
    """:func:`tessera.box_sum` of a Dask array (uint32 sums for uint8 / uint16, exact)."""
    kwargs = _run_kwargs(kwargs)
    dtype = np.float32 if np.dtype(getattr(x, "dtype", None)) == np.float32 else np.uint32
    return _map("box_sum", _box_sum, x, dtype, halo("box_sum", **kwargs), kwargs)


def gaussian(x, **kwargs):
    """:func:`tessera.gaussian` of a Dask array with the FIR's halo (``ceil(3 sigma)`` or
    ``radius``); the IIR has no exact chunked form (ValueError)."""
    kwargs = _run_kwargs(kwargs)
    depth = halo("gaussian", channels=4 if getattr(x, "ndim", 2) == 3 else 1, **kwargs)
    return _map("gaussian", _gaussian, x, None, depth, kwargs)


def local_variance(x, **kwargs):
    """:func:`tessera.local_variance` of a Dask array (float32) with the kernel radius as
    halo; gray arrays. Bit-identical to one call for ``method="recursive"`` on uint8 /
    uint16."""
    kwargs = _run_kwargs(kwargs)
    if getattr(x, "ndim", 2) != 2:
        raise ValueError("tessera.dask.local_variance takes 2-D gray arrays; for RGBA, take the luma first")
    return _map("local_variance", _local_variance, x, np.float32, halo("local_variance", **kwargs), kwargs)


def _stitch_one(frames, output, return_panorama, kwargs):
    panorama, report = _stitch(frames, **kwargs)
    if output is not None:
        _save(output, panorama)
        report["run"]["output"] = str(output)
    return (panorama, report) if return_panorama else report


def stitch_delayed(sequences, *, outputs=None, return_panoramas=False, **kwargs):
    """One ``dask.delayed`` task per sequence running :func:`tessera.stitch` (same keyword
    arguments, ``single_thread=True`` unless given): a list of Delayed objects for a larger
    graph. ``outputs``: one path per sequence, where the task writes its panorama (on the
    worker) and which the report's ``run.output`` then names."""
    sequences = list(sequences)
    if outputs is not None:
        outputs = list(outputs)
        if len(outputs) != len(sequences):
            raise ValueError(f"{len(outputs)} outputs for {len(sequences)} sequences")
    else:
        outputs = [None] * len(sequences)
    _params("stitch", kwargs)
    kwargs = _run_kwargs(dict(kwargs))
    task = dask.delayed(_stitch_one, pure=False)
    return [task(seq, out, return_panoramas, kwargs) for seq, out in zip(sequences, outputs)]


def stitch_batch(sequences, *, outputs=None, return_panoramas=False, scheduler=None, **kwargs):
    """Stitches many sequences as Dask tasks and returns their reports, in order (or
    ``(panorama, report)`` pairs with ``return_panoramas=True``).

    ``sequences``: each what :func:`tessera.stitch` takes (a directory, a glob pattern, a
    list of files or of arrays). The tasks run on the active scheduler: the default
    ``dask.distributed.Client`` if one exists, else Dask's default (threads), or the one
    named by ``scheduler`` (``"threads"``, ``"processes"``, ``"sync"``, a Client). A sequence
    that fails raises its exception here (the others' results are lost with it: use
    :func:`stitch_delayed` with ``client.compute`` to keep them)."""
    tasks = stitch_delayed(sequences, outputs=outputs, return_panoramas=return_panoramas, **kwargs)
    return list(dask.compute(*tasks, scheduler=scheduler))

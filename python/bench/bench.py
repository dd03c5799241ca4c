"""The Python package's benchmarks (python/README.md, "Performance"), printed as Markdown
tables and written as JSON:

1. call overhead: a 512 x 512 uint8 mean filter from Python against the same Rust call
   timed inside Rust (``_tessera._bench_mean``), and the peers' calls;
2. Dask: the exact local variance of a 16384 x 16384 uint8 image on 1 and 2 local worker
   processes against one call, and against dask_image.ndfilters / SciPy per chunk
   computing the same quantity (box variance E[x^2] - E[x]^2);
3. single calls against the peers (OpenCV, SciPy) on 2048 x 2048.

Run: target/py-venv/bin/python python/bench/bench.py [--quick] [--json out.json]
(dask-image is optional: pip install dask-image into the venv to include it).
"""

import argparse
import json
import os
import platform
import statistics
import time
from timeit import repeat

import numpy as np

import tessera
from tessera import _tessera


def median_call(fn, number, rounds=7):
    return min(statistics.median(t / number for t in repeat(fn, number=number, repeat=rounds)), float("inf"))


def best(fn, rounds=3):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def overhead(results):
    import cv2
    from scipy import ndimage

    img = np.random.default_rng(0).integers(0, 256, (512, 512), dtype=np.uint8)
    rows = []
    for single in (True, False):
        rust = statistics.median(_tessera._bench_mean(img, 3, 2000, single_thread=single))
        py = median_call(lambda: tessera.mean(img, size=3, backend="cpu", single_thread=single), 500)
        raw = median_call(lambda: _tessera.mean(img, size=3, backend="cpu", single_thread=single), 500)
        rows.append({"threads": 1 if single else os.cpu_count(), "rust_us": rust * 1e6, "python_us": py * 1e6,
                     "native_us": raw * 1e6, "overhead_us": (py - rust) * 1e6})
    cv2.setNumThreads(1)
    cv_one = median_call(lambda: cv2.blur(img, (3, 3), borderType=cv2.BORDER_REFLECT_101), 500)
    cv2.setNumThreads(os.cpu_count())
    cv_all = median_call(lambda: cv2.blur(img, (3, 3), borderType=cv2.BORDER_REFLECT_101), 500)
    sp = median_call(lambda: ndimage.uniform_filter(img, 3, mode="mirror"), 200)
    results["overhead"] = {"rows": rows, "cv2_blur_1thread_us": cv_one * 1e6, "cv2_blur_us": cv_all * 1e6,
                           "scipy_uniform_filter_us": sp * 1e6}
    print("\n### Call overhead: 512 x 512 uint8 mean filter, 3 x 3\n")
    print("| threads | Rust call (inside Rust) | tessera.mean from Python | native function, no wrapper | overhead |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['threads']} | {r['rust_us']:.1f} us | {r['python_us']:.1f} us | {r['native_us']:.1f} us | {r['overhead_us']:.1f} us |")
    print(f"\nPeers, same image and window: cv2.blur {cv_one * 1e6:.1f} us (1 thread) / {cv_all * 1e6:.1f} us, "
          f"scipy.ndimage.uniform_filter {sp * 1e6:.1f} us.")


def box_variance_scipy(block, r):
    """The box local variance of a block by SciPy, float64 (mirror = reflect101)."""
    from scipy import ndimage

    x = block.astype(np.float64)
    m = ndimage.uniform_filter(x, 2 * r + 1, mode="mirror")
    return (ndimage.uniform_filter(x * x, 2 * r + 1, mode="mirror") - m * m).astype(np.float32)


def dask_variance(results, n, chunk, r):
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    import tessera.dask as tdask

    out = {"size": n, "chunk": chunk, "radius": r}
    img = np.random.default_rng(1).integers(0, 256, (n, n), dtype=np.uint8)
    one_all = best(lambda: tessera.local_variance(img, kernel="box", radius=r, backend="cpu"), 2)
    one_single = best(lambda: tessera.local_variance(img, kernel="box", radius=r, backend="cpu", single_thread=True), 1)
    out["one_call_s"], out["one_call_1thread_s"] = one_all, one_single
    want = tessera.local_variance(img, kernel="box", radius=r, backend="cpu")
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
            x = da.from_array(img, chunks=chunk).persist()
            wait(x)

            def run(make, keep=False):
                t0 = time.perf_counter()
                y = make(x).persist()
                wait(y)
                t = time.perf_counter() - t0
                if keep:
                    return y
                # Released before the next run, which would otherwise find the same keys
                # already in memory and compute nothing.
                client.cancel(y)
                del y
                time.sleep(1.0)
                return t

            def timed(make, rounds):
                return min(run(make) for _ in range(rounds))

            t = timed(lambda a: tdask.local_variance(a, kernel="box", radius=r), 2)
            out[f"tessera_dask_{workers}w_s"] = t
            if workers == 2:
                kept = run(lambda a: tdask.local_variance(a, kernel="box", radius=r), keep=True)
                got = kept.compute()
                client.cancel(kept)
                del kept
                out["identical_to_one_call"] = bool(np.array_equal(got, want))
                del got
            t = timed(lambda a: a.map_overlap(box_variance_scipy, depth=r, boundary="none", dtype=np.float32, r=r), 1)
            out[f"scipy_per_chunk_{workers}w_s"] = t
            try:
                from dask_image import ndfilters

                def di(a):
                    f = a.astype(np.float32)
                    m = ndfilters.uniform_filter(f, 2 * r + 1, mode="mirror")
                    return ndfilters.uniform_filter(f * f, 2 * r + 1, mode="mirror") - m * m

                out[f"dask_image_{workers}w_s"] = timed(di, 1)
            except ImportError:
                pass
    results["dask_variance"] = out
    print(f"\n### Dask: box local variance (radius {r}) of {n} x {n} uint8 in {chunk} x {chunk} chunks\n")
    print("| what | 1 worker | 2 workers |")
    print("|---|---|---|")
    print(f"| one call, no Dask (1 thread / 2 threads) | {one_single:.2f} s | {one_all:.2f} s |")
    for key, label in (("tessera_dask", "tessera.dask.local_variance"), ("dask_image", "dask_image.ndfilters (float32)"),
                       ("scipy_per_chunk", "scipy.ndimage per chunk (float64)")):
        if f"{key}_1w_s" in out:
            print(f"| {label} | {out[f'{key}_1w_s']:.2f} s | {out[f'{key}_2w_s']:.2f} s |")
    print(f"\nChunked result identical to the one call: {out.get('identical_to_one_call')}.")


def peers(results, n):
    import cv2
    from scipy import ndimage

    rng = np.random.default_rng(2)
    u8 = rng.integers(0, 256, (n, n), dtype=np.uint8)
    f32 = u8.astype(np.float32)
    rows = []

    def row(what, ours, theirs):
        rows.append({"what": what, **{k: v for k, v in ours.items()}, **theirs})

    for threads in (1, os.cpu_count()):
        cv2.setNumThreads(threads)
        single = threads == 1
        t = lambda fn: best(fn, 5)
        row(f"mean 15x15 uint8, {threads} thread(s)",
            {"tessera_ms": 1e3 * t(lambda: tessera.mean(u8, size=15, single_thread=single))},
            {"cv2.blur_ms": 1e3 * t(lambda: cv2.blur(u8, (15, 15), borderType=cv2.BORDER_REFLECT_101))})
        row(f"gaussian sigma 3 float32, {threads} thread(s)",
            {"tessera_ms": 1e3 * t(lambda: tessera.gaussian(f32, sigma=3.0, method="fir", single_thread=single))},
            {"cv2.GaussianBlur_ms": 1e3 * t(lambda: cv2.GaussianBlur(f32, (19, 19), 3.0, borderType=cv2.BORDER_REFLECT_101))})
    cv2.setNumThreads(os.cpu_count())
    rows.append({"what": "mean 15x15 uint8 (SciPy, 1 thread)", "scipy.uniform_filter_ms": 1e3 * best(lambda: ndimage.uniform_filter(u8, 15, mode="mirror"), 3)})
    rows.append({"what": "gaussian sigma 3 float32 (SciPy, 1 thread)",
                 "scipy.gaussian_filter_ms": 1e3 * best(lambda: ndimage.gaussian_filter(f32, 3.0, mode="mirror", truncate=3.0), 3)})
    rows.append({"what": "box variance r=7 uint8, 1 thread", "tessera_ms": 1e3 * best(lambda: tessera.local_variance(u8, kernel="box", radius=7, single_thread=True), 3),
                 "scipy_2x_uniform_filter_ms": 1e3 * best(lambda: box_variance_scipy(u8, 7), 3)})
    results["peers"] = {"size": n, "rows": rows}
    print(f"\n### Single calls on {n} x {n}\n")
    for r in rows:
        print("| " + r["what"] + " | " + " | ".join(f"{k[:-3]} {v:.2f} ms" for k, v in r.items() if k.endswith("_ms")) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="4096^2 for the Dask part instead of 16384^2")
    ap.add_argument("--json")
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--only-dask", action="store_true")
    a = ap.parse_args()
    results = {"machine": {"cpus": os.cpu_count(), "processor": platform.processor(), "python": platform.python_version(),
                           "numpy": np.__version__, "tessera": tessera.__version__}}
    if not a.only_dask:
        overhead(results)
        peers(results, 2048)
    if not a.skip_dask:
        dask_variance(results, 4096 if a.quick else 16384, 1024 if a.quick else 4096, 7)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

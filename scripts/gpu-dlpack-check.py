"""The Python package's GPU path on a machine with a GPU and PyTorch (run by
`scripts/gpu-check run`, phase `python`, with the wheel `scripts/gpu-check build` made):
CUDA tensors in through DLPack, CudaImage results out to PyTorch without a copy, the same
values as the host calls, the layouts that are refused, ordering against a PyTorch stream,
and a chain's time as device images against host calls.

Prints one line per check (`ok` or `FAILED: why`) and the timings; exits 1 on a failure,
2 where there is no GPU or no PyTorch."""

import sys
import time

import numpy as np

try:
    import torch
except ImportError:
    print("no PyTorch here: the DLPack check needs it")
    sys.exit(2)

import tessera

if not torch.cuda.is_available() or tessera.backend_info()["name"] != "cuda":
    print(f"no usable GPU: torch {torch.cuda.is_available()}, tessera {tessera.backend_info()}")
    sys.exit(2)

failures = []


def check(name, f):
    try:
        f()
        print(f"ok      {name}")
    except Exception as e:  # noqa: BLE001 - every failure is reported, the others still run
        failures.append(name)
        print(f"FAILED  {name}: {type(e).__name__}: {e}")


rng = np.random.default_rng(0)
u8 = (rng.random((540, 960)) * 255).astype(np.uint8)
f32 = (rng.random((540, 960)) * 1000 - 300).astype(np.float32)
rgba = (rng.random((270, 480, 4)) * 255).astype(np.uint8)


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert a.tobytes() == b.tobytes(), f"max difference {np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))}"


def chain_matches(img):
    def run():
        t = torch.from_numpy(img).cuda()
        blurred = tessera.gaussian(t, sigma=2.0)
        assert isinstance(blurred, tessera.CudaImage), type(blurred)
        variance = tessera.local_variance(blurred, radius=15)
        enhanced = tessera.contrast(blurred)
        host_blurred = tessera.gaussian(img, sigma=2.0, backend="cuda")
        same(torch.from_dlpack(variance).cpu().numpy(), tessera.local_variance(host_blurred, radius=15, backend="cuda"))
        same(enhanced.numpy(), tessera.contrast(host_blurred, backend="cuda"))

    return run


for name, img in [("uint8", u8), ("float32", f32), ("rgba", rgba)]:
    check(f"torch {name} -> gaussian -> variance, contrast on the GPU = host calls", chain_matches(img))


def zero_copy_out():
    d = tessera.mean(torch.from_numpy(u8).cuda(), size=5)
    back = torch.from_dlpack(d)
    assert back.is_cuda and back.data_ptr() == d.__cuda_array_interface__["data"][0], "a copy was made"
    assert tuple(back.shape) == d.shape


def zero_copy_in():
    t = torch.from_numpy(f32).cuda()
    before = t.clone()
    out = tessera.gaussian(t, sigma=3.0)
    assert torch.equal(t, before), "the input was written"
    same(out.numpy(), tessera.gaussian(f32, sigma=3.0, backend="cuda"))


def refused_layouts():
    t = torch.from_numpy(u8).cuda()
    for bad in (t.T, t[:, ::2]):
        try:
            tessera.mean(bad)
        except ValueError:
            continue
        raise AssertionError("a layout without packed rows was taken")
    try:
        tessera.mean(t, backend="cpu")
    except ValueError:
        return
    raise AssertionError("backend='cpu' took a CUDA tensor")


def ordered_after_a_torch_stream():
    # The input is written on a side stream just before the call: the producer's
    # __dlpack__(stream=1) must order that write before tessera's kernels.
    s = torch.cuda.Stream()
    base = torch.from_numpy(f32).cuda()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        x = base * 2.0
        out = tessera.gaussian(x, sigma=2.0)
    same(out.numpy(), tessera.gaussian(f32 * 2.0, sigma=2.0, backend="cuda"))


def matrices():
    a = torch.rand(512, 256, device="cuda")
    b = torch.rand(256, 384, device="cuda")
    d = tessera.matmul(a, b)
    assert isinstance(d, tessera.CudaImage) and d.shape == (512, 384)
    want = tessera.matmul(a.cpu().numpy(), b.cpu().numpy(), backend="cuda")
    same(d.numpy(), want)


def glare():
    corrected, mask, report = tessera.glare(torch.from_numpy(u8).cuda())
    want = tessera.glare(u8, backend="cuda")
    same(corrected.numpy(), want[0])
    same(torch.from_dlpack(mask).cpu().numpy(), want[1])
    assert report == want[2], (report, want[2])


def stereo():
    for left in (u8, rgba):
        right = np.roll(left, -5, axis=1)
        disparity, stats = tessera.stereo(torch.from_numpy(left).cuda(), torch.from_numpy(right).cuda(), max_disp=32)
        want = tessera.stereo(left, right, max_disp=32, backend="cuda")
        assert isinstance(disparity, tessera.CudaImage)
        same(disparity.numpy(), want[0])
        assert stats == want[1], (stats, want[1])


check("a CudaImage goes to torch.from_dlpack without a copy", zero_copy_out)
check("glare of a CUDA tensor: corrected image and mask as CudaImages = host call", glare)
check("a CUDA tensor is read in place and left unchanged", zero_copy_in)
check("transposed and column-step tensors, and backend='cpu', are ValueErrors", refused_layouts)
check("work queued on a PyTorch stream comes before tessera's kernels", ordered_after_a_torch_stream)
check("matmul of two CUDA tensors is a CudaImage equal to the host call", matrices)
check("stereo of two CUDA tensors (gray, RGBA): the map as a CudaImage = host call", stereo)


def median_ms(f, reps=15):
    f()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - t0) * 1e3)
    return sorted(t)[len(t) // 2]


big = (rng.random((1080, 1920)) * 255).astype(np.uint8)
tb = torch.from_numpy(big).cuda()


def host_calls():
    b = tessera.gaussian(big, sigma=2.0, backend="cuda")
    tessera.local_variance(b, radius=15, backend="cuda")
    tessera.contrast(b, backend="cuda")


def device_chain():
    b = tessera.gaussian(tb, sigma=2.0)
    tessera.local_variance(b, radius=15)
    tessera.contrast(b)


print(f"chain 1920x1080 u8 (gaussian sigma 2, variance R 15, contrast): host calls {median_ms(host_calls):.3f} ms, "
      f"torch tensor in, CudaImages out {median_ms(device_chain):.3f} ms")
sys.exit(1 if failures else 0)

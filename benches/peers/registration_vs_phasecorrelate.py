"""Registration on hard footage: tessera's `stitch` (defaults) against OpenCV's phase
correlation (cv2.phaseCorrelate, Hanning-windowed, frame to frame, chained) on the same
frames. Sequences are cut from the eight photographs of tests/robust_registration.rs with
the same conditions (low contrast, noise, blur + gain drift + vignetting, 28 px jumps),
rendered here with bicubic sampling; positions are compared with the truth. Prints JSON.

Run: benches/peers/registration_vs_phasecorrelate.sh [path/to/tessera]
"""
import json, os, subprocess, sys, tempfile, time
import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PHOTOS = {
    "retina": f"{ROOT}/assets/retina.jpg", "ihc": f"{ROOT}/assets/photos/ihc.png",
    "coffee": f"{ROOT}/assets/photos/coffee.png", "camera": f"{ROOT}/assets/photos/camera.png",
    "gravel": f"{ROOT}/assets/photos/gravel.png", "grass": f"{ROOT}/assets/photos/grass.png",
    "astronaut": f"{ROOT}/assets/photos/astronaut.png", "cones": f"{ROOT}/../shared/data/stereo/cones/im2.png",
}
CASES = {  # contrast, noise, blur sigma, gain drift, vignetting, step, turn
    "clean": (1.0, 2.0, 0.0, 0.0, 0.0, 3.0, 0.5),
    "low contrast": (0.3, 3.5, 1.0, 0.0, 0.0, 3.0, 0.5),
    "noise 8": (1.0, 8.0, 0.0, 0.0, 0.0, 3.0, 0.5),
    "blur, gain, lens": (1.0, 3.0, 1.5, 0.2, 0.4, 3.0, 0.5),
    "jumps 28 px": (1.0, 2.0, 0.0, 0.0, 0.0, 28.0, 2.0),
}
W, H, N = 200, 160, 40


def path(size, step, turn, rng):
    room = (size[0] - W - 5.0, size[1] - H - 5.0)
    at = np.array([2 + room[0] * rng.uniform(0.3, 0.7), 2 + room[1] * rng.uniform(0.3, 0.7)])
    heading, out = rng.uniform(0, 2 * np.pi), []
    for _ in range(N):
        out.append(at.copy())
        heading += turn * (rng.uniform() - 0.5)
        nxt = at + step * np.array([np.cos(heading), np.sin(heading)])
        if not 2 <= nxt[0] <= 2 + room[0]:
            heading = np.pi - heading
        if not 2 <= nxt[1] <= 2 + room[1]:
            heading = -heading
        at = np.clip(at + step * np.array([np.cos(heading), np.sin(heading)]), 2, [2 + room[0], 2 + room[1]])
    return np.array(out)


def render(src, origins, c, rng):
    contrast, noise, blur, drift, vig = c[:5]
    mean = src.mean()
    if blur > 0:
        src = cv2.GaussianBlur(src, (0, 0), blur, borderType=cv2.BORDER_REPLICATE)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float64)
    rad = np.hypot(xx - (W - 1) / 2, yy - (H - 1) / 2) / np.hypot((W - 1) / 2, (H - 1) / 2)
    frames = []
    for i, (ox, oy) in enumerate(origins):
        m = np.float32([[1, 0, ox], [0, 1, oy]])
        f = cv2.warpAffine(src, m, (W, H), flags=cv2.INTER_CUBIC | cv2.WARP_INVERSE_MAP).astype(np.float64)
        gain = 1 + drift * i / (N - 1)
        f = (mean + contrast * (f - mean)) * gain * (1 - vig * rad * rad) + noise * rng.standard_normal((H, W))
        frames.append(np.clip(np.round(f), 0, 255).astype(np.uint8))
    return frames


def score(pos, truth, ok):
    err = [np.hypot(*(p - t)) for p, t, o in zip(pos, truth, ok) if o]
    return {"registered": int(sum(ok)), "mean_error_px": round(float(np.mean(err)), 3) if err else None,
            "wrong_ok": int(sum(e > 2 for e in err))}


def main():
    tessera = sys.argv[1] if len(sys.argv) > 1 else f"{ROOT}/target/release/tessera"
    out, rng = [], np.random.default_rng(7)
    window = cv2.createHanningWindow((W, H), cv2.CV_64F)
    for case, c in CASES.items():
        for name, file in PHOTOS.items():
            src = cv2.imread(file, cv2.IMREAD_GRAYSCALE).astype(np.float32)
            origins = path((src.shape[1], src.shape[0]), c[5], c[6], rng)
            frames = render(src, origins, c, rng)
            truth = origins - origins[0]
            # OpenCV: frame to frame, chained; its shift of frame i+1 against i is the
            # motion of the content, so the position moves the other way.
            t0 = time.perf_counter()
            pos, ok = [np.zeros(2)], [True]
            for a, b in zip(frames, frames[1:]):
                (dx, dy), resp = cv2.phaseCorrelate(a.astype(np.float64), b.astype(np.float64), window)
                pos.append(pos[-1] - np.array([dx, dy]))
                ok.append(True)
            cv_ms = (time.perf_counter() - t0) * 1e3 / (N - 1)
            with tempfile.TemporaryDirectory() as d:
                for i, f in enumerate(frames):
                    cv2.imwrite(f"{d}/frame_{i:04}.png", f)
                t0 = time.perf_counter()
                subprocess.run([tessera, "stitch", d, "-o", f"{d}/pano.png", "--report", f"{d}/r.json", "--no-quality",
                                "--backend", "cpu"], check=True, capture_output=True)
                ts_ms = (time.perf_counter() - t0) * 1e3 / (N - 1)
                rep = json.load(open(f"{d}/r.json"))
            ref = rep["panorama"]["reference_frame"]
            tpos = [np.array([f["x"], f["y"]]) if f["status"] == "ok" else np.zeros(2) for f in rep["frames"]]
            tok = [f["status"] == "ok" for f in rep["frames"]]
            out.append({"case": case, "photo": name,
                        "tessera": {**score(tpos, truth - truth[ref], tok), "ms_per_pair_incl_io": round(ts_ms, 2)},
                        "opencv_phase_correlate": {**score(pos, truth, ok), "ms_per_pair": round(cv_ms, 3)}})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

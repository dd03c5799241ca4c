#!/usr/bin/env python3
"""Writes a COLSxROWS grid of 8-bit PGM tiles cut from a procedural texture (value noise
of three octaves) with OVERLAP percent overlap, for measuring `tessera stitch --grid` on a
panorama larger than memory budgets: 11x11 tiles of 2000 px with 10 % overlap make a
20000 x 20000 mosaic. Each tile is computed alone, so the generator holds one tile.

usage: big_grid.py OUT_DIR [COLS ROWS TILE OVERLAP]"""
import os
import sys

import numpy as np


def lattice(ix, iy, seed):
    # A hash of the lattice point to [0, 1): the same value wherever a tile asks for it.
    h = (ix.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (iy.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)) ^ np.uint64(seed)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return (h & np.uint64(0xFFFFFF)).astype(np.float64) / float(1 << 24)


def noise(x0, y0, w, h, spacing, seed):
    xs = (x0 + np.arange(w)) / spacing
    ys = (y0 + np.arange(h)) / spacing
    ix, iy = np.floor(xs).astype(np.int64), np.floor(ys).astype(np.int64)
    fx, fy = xs - ix, ys - iy
    X, Y = np.meshgrid(ix, iy)
    FX, FY = np.meshgrid(fx, fy)
    a, b = lattice(X, Y, seed), lattice(X + 1, Y, seed)
    c, d = lattice(X, Y + 1, seed), lattice(X + 1, Y + 1, seed)
    top, bot = a + (b - a) * FX, c + (d - c) * FX
    return top + (bot - top) * FY


def main():
    out = sys.argv[1]
    cols, rows, tile, overlap = (int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])) if len(sys.argv) > 5 else (11, 11, 2000, 10.0)
    step = round(tile * (1 - overlap / 100))
    os.makedirs(out, exist_ok=True)
    for r in range(rows):
        for c in range(cols):
            x0, y0 = c * step, r * step
            v = 0.5 * noise(x0, y0, tile, tile, 97.0, 1) + 0.3 * noise(x0, y0, tile, tile, 23.0, 2) + 0.2 * noise(x0, y0, tile, tile, 5.0, 3)
            img = np.clip(v * 255.0, 0, 255).astype(np.uint8)
            with open(os.path.join(out, f"tile_{r:02d}_{c:02d}.pgm"), "wb") as f:
                f.write(b"P5\n%d %d\n255\n" % (tile, tile))
                f.write(img.tobytes())
    print(f"{cols}x{rows} tiles of {tile} px, step {step}: mosaic {step * (cols - 1) + tile} x {step * (rows - 1) + tile}")


if __name__ == "__main__":
    main()

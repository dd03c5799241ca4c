#!/usr/bin/env python3
"""Checks an OME-TIFF written by tessera with an independent reader (tifffile): it must be
recognised as OME and as a pyramid (series 0 with its levels as SubIFDs), each level half
the previous (rounded up) until one tile, the physical pixel size when given, and with
--png, the full level equal to a PNG of the same panorama (RGB). Prints the levels.

usage: check_ome_tiff.py FILE.ome.tif [--pixel-size UM] [--png FILE.png]"""
import argparse
import xml.etree.ElementTree as ET

import numpy as np
import tifffile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--pixel-size", type=float)
    ap.add_argument("--png")
    a = ap.parse_args()
    with tifffile.TiffFile(a.path) as tf:
        assert tf.is_ome, "not recognised as OME-TIFF"
        s = tf.series[0]
        assert s.is_pyramidal or len(s.levels) == 1, "no pyramid"
        page = tf.pages[0]
        assert page.is_tiled, "not tiled"
        prev = None
        for k, lvl in enumerate(s.levels):
            shape = lvl.shape
            print(f"level {k}: shape {shape} dtype {lvl.dtype} tiled {lvl.keyframe.is_tiled} ({lvl.keyframe.tilewidth}x{lvl.keyframe.tilelength})")
            if prev is not None:
                assert shape[0] == -(-prev[0] // 2) and shape[1] == -(-prev[1] // 2), (prev, shape)
            prev = shape
        tile = page.tilewidth
        assert prev[0] <= tile and prev[1] <= tile, "last level larger than a tile"
        px = ET.fromstring(tf.ome_metadata).find(".//{*}Pixels")
        print("OME Pixels:", {k: v for k, v in px.attrib.items() if k.startswith(("Size", "Type", "Physical"))})
        if a.pixel_size is not None:
            assert abs(float(px.attrib["PhysicalSizeX"]) - a.pixel_size) < 1e-12
        # The smallest level must be the 2x2 mean of the one before it (checked on the last
        # two levels, which are small).
        if len(s.levels) > 1:
            big = s.levels[-2].asarray().astype(np.float64)
            small = s.levels[-1].asarray()
            h, w = big.shape[:2]
            pad = np.pad(big, [(0, h % 2), (0, w % 2)] + [(0, 0)] * (big.ndim - 2), mode="edge")
            mean = (pad[0::2, 0::2] + pad[1::2, 0::2] + pad[0::2, 1::2] + pad[1::2, 1::2]) / 4
            diff = np.abs(mean - small.astype(np.float64)).max()
            print(f"last level vs 2x2 mean of the one before: max difference {diff}")
            assert diff <= 1.0
        if a.png:
            from PIL import Image

            want = np.asarray(Image.open(a.png))
            if want.ndim == 3:
                want = want[..., :3]
            got = s.levels[0].asarray()
            assert got.shape == want.shape and (got == want).all(), "full level differs from the PNG"
            print("full level equals", a.png)
    print("ok")


if __name__ == "__main__":
    main()

"""Cuts the firmware's embedded test images (raw 8-bit grey, row-major, no header).

Run by hand from the repository root (needs Pillow); the outputs are committed, and the
host test `tests/firmware_checksums.rs` checks the firmware's expected checksums against
them. Sources: assets/photos/ (scikit-image photographs, see assets/README.md) and the
Middlebury "cones" pair in ../shared/data/stereo (Scharstein and Szeliski, CVPR 2003).
"""
from pathlib import Path
from PIL import Image

W, H = 160, 120
OUT = Path(__file__).parent
PHOTOS = Path("assets/photos")
CONES = Path("../shared/data/stereo/cones")


def crop(img, x, y, name):
    data = img.crop((x, y, x + W, y + H)).tobytes()
    assert len(data) == W * H
    (OUT / f"{name}.gray").write_bytes(data)


# Filters: the cameraman's face and camera (edges, flat sky, fine texture).
crop(Image.open(PHOTOS / "camera.png").convert("L"), 200, 90, "camera")
# Registration: two crops of one photograph, the moving one 9 px right and 5 px up, so
# the true shift (moving pixel (u, v) shows the reference at (u + 9, v - 5)) is (9, -5).
coffee = Image.open(PHOTOS / "coffee.png").convert("L")
crop(coffee, 220, 140, "coffee_ref")
crop(coffee, 229, 135, "coffee_moving")
# Stereo: the rectified cones pair halved by 2x2 averaging (both images alike, so the
# pair stays rectified; disparities up to about 30), then the same window of each.
for src, name in (("im2.png", "cones_left"), ("im6.png", "cones_right")):
    img = Image.open(CONES / src).convert("L")
    half = img.reduce(2)
    crop(half, 60, 30, name)

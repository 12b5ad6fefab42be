"""text_video: an 8x8 digit sliding across 4 frames; the caption names the digit and its motion.

Each digit image gives two clips with different motions (chosen by the seed).
Pixels that leave the frame are lost (no wrap-around), so the motion is visible.
The split unit is the source image, so no digit drawing appears in both splits.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from prism.data.sources import Sample, package_versions
from prism.data.sources.image import load_images

SOURCE = "sklearn.datasets.load_digits, each image moved across 4 frames"
N_FRAMES = 4
CLIPS_PER_IMAGE = 2
# name -> (rows, cols) moved per frame at speed 1
DIRECTIONS = {
    "up": (-1, 0),
    "down": (1, 0),
    "left": (0, -1),
    "right": (0, 1),
    "up-left": (-1, -1),
    "up-right": (-1, 1),
    "down-left": (1, -1),
    "down-right": (1, 1),
}
MOTIONS = [("still", 0)] + [(name, speed) for name in DIRECTIONS for speed in (1, 2)]


def versions() -> dict[str, str]:
    return package_versions("scikit-learn", "numpy")


def shift(img: np.ndarray, dr: int, dc: int) -> np.ndarray:
    """`img` moved by (dr, dc) pixels, zero-filled where nothing moved in."""
    out = np.zeros_like(img)
    h, w = img.shape
    src = img[max(0, -dr) : h - max(0, dr), max(0, -dc) : w - max(0, dc)]
    out[max(0, dr) : max(0, dr) + src.shape[0], max(0, dc) : max(0, dc) + src.shape[1]] = src
    return out


def clip(img: np.ndarray, direction: str, speed: int) -> np.ndarray:
    """[N_FRAMES, 1, 8, 8]: frame t is the image moved t*speed pixels along `direction`."""
    dr, dc = DIRECTIONS.get(direction, (0, 0))
    return np.stack([shift(img, t * speed * dr, t * speed * dc)[None] for t in range(N_FRAMES)])


def caption(digit: int, direction: str, speed: int) -> str:
    if speed == 0:
        return f"digit {digit} standing still"
    return f"digit {digit} moving {direction}, {speed} px per frame"


def samples(seed: int) -> Iterator[Sample]:
    images, labels = load_images()
    rng = np.random.default_rng([seed, 5])
    for i, (img, digit) in enumerate(zip(images, labels)):
        picks = rng.choice(len(MOTIONS), size=CLIPS_PER_IMAGE, replace=False)
        for facet, m in enumerate(sorted(int(p) for p in picks)):
            direction, speed = MOTIONS[m]
            frames = clip(img, direction, speed).astype(np.float32)
            yield Sample(f"digit{i:04d}", facet, frames, caption(int(digit), direction, speed))

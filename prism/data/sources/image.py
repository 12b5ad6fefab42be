"""text_image: sklearn's bundled 8x8 handwritten digits with captions read off the pixels.

Each of the 1797 images gives `VIEWS` views: the image itself and `VIEWS - 1`
seeded affine variants of it (a small rotation, scale, shear and shift, bilinear,
drawn per image and view from the build seed), so the training split holds tens of
thousands of unique samples: a CPU study's longest runs pass over them only a few
times. Three captions (facets) per view, computed from that view's pixels: the
digit; its ink and where the ink sits; its shape (symmetry, extent). The split unit
is the source image: every view of one drawing is on the same side.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from prism.data.sources import Sample, bucket, package_versions

SOURCE = "sklearn.datasets.load_digits (1797 8x8 images, 10 classes), seeded affine views per image"
VIEWS = 8  # the original + 7 variants; the LM text pool bounds it at --lm-ratio 0.5 (one passage per sample)
FACETS = 3
MAX_ROTATE_DEG = 15.0
SCALE_RANGE = (0.9, 1.1)
MAX_SHEAR = 0.15
MAX_SHIFT_PX = 1.0
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def versions() -> dict[str, str]:
    return package_versions("scikit-learn", "numpy", "scipy")


def load_images() -> tuple[np.ndarray, np.ndarray]:
    """(images float32 [n, 8, 8] in [0, 1], labels [n]); shared with text_video."""
    from sklearn.datasets import load_digits  # noqa: PLC0415 lazy: sklearn

    digits = load_digits()
    return (digits.images / 16.0).astype(np.float32), digits.target.astype(np.int64)


def where(img: np.ndarray) -> str:
    """Where the ink's centre of mass sits on a 3x3 grid of the frame."""
    total = float(img.sum()) or 1.0
    rows, cols = np.indices(img.shape)
    r = float((rows * img).sum()) / total
    c = float((cols * img).sum()) / total
    mid = (img.shape[0] - 1) / 2
    vert = bucket(r - mid, (-0.4, 0.4), ("upper", "middle", "lower"))
    horiz = bucket(c - mid, (-0.4, 0.4), ("left", "centre", "right"))
    return "centre" if (vert, horiz) == ("middle", "centre") else f"{vert} {horiz}"


def shape_words(img: np.ndarray) -> str:
    """Mirror symmetry and the extent of the inked box."""
    lr = 1.0 - float(np.abs(img - img[:, ::-1]).mean()) / max(float(img.mean()), 1e-6) / 2
    ud = 1.0 - float(np.abs(img - img[::-1, :]).mean()) / max(float(img.mean()), 1e-6) / 2
    sym = "mirror symmetric" if lr > 0.7 else ("flip symmetric" if ud > 0.7 else "asymmetric")
    ink = img > 0.25
    rows = np.flatnonzero(ink.any(axis=1))
    cols = np.flatnonzero(ink.any(axis=0))
    h = int(rows[-1] - rows[0] + 1) if rows.size else 0
    w = int(cols[-1] - cols[0] + 1) if cols.size else 0
    return f"{sym}, {w} wide {h} tall"


def captions(img: np.ndarray, digit: int) -> list[str]:
    ink = float(img.mean())
    return [
        f"a handwritten {WORDS[digit]}: digit {digit}",
        f"digit {digit}, {round(ink * 10) * 10}% ink, mass {where(img)}",
        f"{WORDS[digit]}, {shape_words(img)}",
    ]


def affine_view(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`img` rotated, scaled, sheared and shifted about its centre (bilinear, zero outside), in [0, 1]."""
    from scipy.ndimage import affine_transform  # noqa: PLC0415 lazy: scipy

    angle = np.deg2rad(rng.uniform(-MAX_ROTATE_DEG, MAX_ROTATE_DEG))
    scale = rng.uniform(*SCALE_RANGE)
    shear = rng.uniform(-MAX_SHEAR, MAX_SHEAR)
    shift = rng.uniform(-MAX_SHIFT_PX, MAX_SHIFT_PX, size=2)
    c, s = np.cos(angle), np.sin(angle)
    forward = scale * np.array([[c, -s], [s, c]]) @ np.array([[1.0, shear], [0.0, 1.0]])
    inverse = np.linalg.inv(forward)  # affine_transform maps output coordinates to input ones
    centre = (np.array(img.shape) - 1) / 2
    offset = centre - inverse @ (centre + shift)
    out = affine_transform(img.astype(np.float64), inverse, offset=offset, order=1, mode="constant", cval=0.0)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def views(img: np.ndarray, seed: int, index: int, n_views: int = VIEWS) -> list[np.ndarray]:
    """The image and its `n_views - 1` variants; each drawn from (seed, image index, view) alone."""
    out = [img]
    for view in range(1, n_views):
        out.append(affine_view(img, np.random.default_rng([seed, 11, index, view])))
    return out


def samples(seed: int) -> Iterator[Sample]:
    images, labels = load_images()
    for i, (img, digit) in enumerate(zip(images, labels)):
        for v, view in enumerate(views(img, seed, i)):
            for facet, text in enumerate(captions(view, int(digit))):
                yield Sample(f"digit{i:04d}", v * FACETS + facet, view[None].copy(), text)

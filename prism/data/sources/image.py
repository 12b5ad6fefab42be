"""text_image: sklearn's bundled 8x8 handwritten digits with captions read off the pixels.

Three captions (facets) per image: the digit; its ink and where the ink sits;
its shape (symmetry, extent). The split unit is the image.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from prism.data.sources import Sample, bucket, package_versions

SOURCE = "sklearn.datasets.load_digits (1797 8x8 images, 10 classes)"
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def versions() -> dict[str, str]:
    return package_versions("scikit-learn", "numpy")


def load_images() -> tuple[np.ndarray, np.ndarray]:
    """(images float32 [n, 8, 8] in [0, 1], labels [n]); shared with text_video."""
    from sklearn.datasets import load_digits

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


def samples(seed: int) -> Iterator[Sample]:
    del seed  # the data set is fixed; the split and order come from the shard writer
    images, labels = load_images()
    for i, (img, digit) in enumerate(zip(images, labels)):
        for facet, text in enumerate(captions(img, int(digit))):
            yield Sample(f"digit{i:04d}", facet, img[None].copy(), text)

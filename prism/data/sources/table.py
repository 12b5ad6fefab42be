"""text_table: sklearn's bundled tables, one row per sample, features standardised and zero-padded to 32.

Captions: the row's label or binned target (facet 0) and its most extreme
features by z-score (facet 1). Features are standardised with the statistics of
the whole table (feature scaling, not label information). The split unit is the row.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from prism.data.sources import Sample, package_versions

SOURCE = "sklearn bundled tables: iris, wine, breast_cancer, diabetes, linnerud"
WIDTH = 32
MAX_NAME = 18


def versions() -> dict[str, str]:
    return package_versions("scikit-learn", "numpy")


def tables() -> Iterator[tuple[str, np.ndarray, list[str], list[str]]]:
    """(name, features [n, f], feature names, label caption per row)."""
    from sklearn import datasets as ds  # noqa: PLC0415 lazy: sklearn

    for name, loader in (("iris", ds.load_iris), ("wine", ds.load_wine), ("cancer", ds.load_breast_cancer)):
        bunch = loader()
        labels = [f"{name}: {bunch.target_names[t]}".replace("_", " ") for t in bunch.target]
        yield name, bunch.data, list(bunch.feature_names), labels
    bunch = ds.load_diabetes(scaled=False)
    terciles = np.quantile(bunch.target, [1 / 3, 2 / 3])
    words = ("low", "mid", "high")
    labels = [f"diabetes: {words[int(np.searchsorted(terciles, t))]} progression" for t in bunch.target]
    yield "diabetes", bunch.data, list(bunch.feature_names), labels
    bunch = ds.load_linnerud()
    weight = bunch.target[:, 0]
    median = float(np.median(weight))
    labels = [f"linnerud: {'heavy' if w > median else 'light'} athlete" for w in weight]
    yield "linnerud", bunch.data, list(bunch.feature_names), labels


def salient(z: np.ndarray, names: list[str]) -> str:
    """The highest and the lowest feature of a standardised row."""
    hi, lo = int(np.argmax(z)), int(np.argmin(z))
    short = [n.replace("_", " ").replace(" (cm)", "")[:MAX_NAME] for n in names]
    return f"high {short[hi]}, low {short[lo]}"


def samples(seed: int) -> Iterator[Sample]:
    del seed
    for name, data, features, labels in tables():
        std = data.std(axis=0)
        z = (data - data.mean(axis=0)) / np.where(std > 0, std, 1.0)
        for i, row in enumerate(z):
            padded = np.zeros(WIDTH, np.float32)
            padded[: row.size] = row
            source = f"{name}{i:04d}"
            yield Sample(source, 0, padded, labels[i])
            yield Sample(source, 1, padded, f"{name}: {salient(row, features)}")

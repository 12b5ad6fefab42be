"""One module per family: bundled, offline data turned into captioned samples.

A family's bundle names its module (prism.core.families.Family.source). Every source
module exposes `SOURCE` (what it reads), `versions()` (the package versions the bytes
depend on) and `samples(seed) -> Iterator[Sample]`. Captions are computed from the
stored modality array itself, so the text is predictable only by a model that reads
the modality.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version
from types import ModuleType

import numpy as np

from prism.core.families import family_bundle


@dataclass(frozen=True)
class Sample:
    """One training example.

    `source` names the item the sample comes from (an image, a series, a graph,
    a row, an episode): train and eval are split by it, so two samples of one
    item never land on both sides. It must not contain '.', '/' or '__'.
    """

    source: str
    facet: int
    modality: np.ndarray  # float32, FamilySpec.modality_shape
    caption: str

    @property
    def key(self) -> str:
        return f"{self.source}__{self.facet:04d}"


def source_module(family: str) -> ModuleType:
    """The data source module of `family` (its bundle's `source`)."""
    return family_bundle(family).part("source")


def package_versions(*names: str) -> dict[str, str]:
    """Installed versions of the packages whose data or code decide the sample bytes."""
    return {name: version(name) for name in names}


def bucket(value: float, edges: tuple[float, ...], names: tuple[str, ...]) -> str:
    """The name of the bin `value` falls into (`len(names) == len(edges) + 1`)."""
    return names[int(np.searchsorted(np.asarray(edges), value, side="right"))]

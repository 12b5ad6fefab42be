"""What every shard directory shares, built or indexed: its manifest's name and format, the hash
of its shards, a decoded split, and how a caption is cut to its byte budget.

The bottom of prism.data: the manifest's reader, the index and the build all use it, so
neither imports the other for these.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

# 2: text_image holds seeded affine views of every image; the manifest records the LM text's sha256.
FORMAT_VERSION = 2


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Records:
    """One split, decoded: parallel lists in shard order."""

    keys: list[str]
    captions: list[str]
    modality: np.ndarray  # float32 [N, *shape]; zeros for text-only samples
    has_modality: np.ndarray  # bool [N]

"""SweepOptions: the config's `sweep:` section, the per-modality throughput sweep (rules/sweep.smk).

`outputs` and `storage` are `prism sweep run`'s flags, with the same defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism.core.options import option
from prism.train.options import STORAGES

NAMES = {
    "type": "array",
    "items": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"},
    "minItems": 1,
    "uniqueItems": True,
}


@dataclass(frozen=True)
class SweepOptions:
    """The sweep's cells and where they go (the fields are the config keys of `sweep:`)."""

    id: str = option(
        "local",
        "Sweep id; the cells go to OUTPUTS/ID/<design>/<preset>/.",
        schema={"pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$"},
    )
    outputs: str = option(
        "sweeps", "Folder holding every sweep (see definitions/path).", schema={"$ref": "#/definitions/path"}
    )
    presets: tuple[str, ...] = option(
        ("text_image", "text_ts", "text_graph", "text_table", "text_video", "vla"),
        "Presets (cells) to run, names from the presets file.",
        schema=NAMES,
    )
    designs: tuple[str, ...] = option(
        ("PRISM-MODALITY-SMOKE-1N",),
        "Designs (node count, backbone, step budget) to run, names from the presets file.",
        schema=NAMES,
    )
    storage: str = option(
        "local", "Where cluster jobs read shards - local, lustre, or daos (dfuse mount in the job).", choices=STORAGES
    )
    presets_file: str = option(
        "config/modality_presets.yaml",
        "The presets and designs file.",
        schema={"pattern": "^[A-Za-z0-9_./-]+$"},
    )

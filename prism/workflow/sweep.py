"""The per-modality throughput sweep's files and job resources (rules/sweep.smk)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prism.launch.aurora import FILESYSTEMS
from prism.sweep.presets import load
from prism.workflow.resources import walltime_minutes


def _alternatives(names: Any) -> str:
    return "|".join(sorted(names, key=len, reverse=True))


class Sweep:
    """config `sweep:`: one cell per (design, preset), each trained padded and packed."""

    def __init__(self, config: dict[str, Any]) -> None:
        sweep = config["sweep"]
        self.outputs, self.id, self.storage = sweep["outputs"], sweep["id"], sweep["storage"]
        self.presets_file = sweep["presets_file"]
        self.presets = list(sweep["presets"])
        self.dir = str(Path(self.outputs, self.id))
        self.file = load(self.presets_file)
        self.cells = [
            f"{self.dir}/{design}/{preset}/status.json" for design in sweep["designs"] for preset in self.presets
        ]
        self.filesystems = FILESYSTEMS[self.storage]

    def design_pattern(self) -> str:
        return _alternatives(self.file.designs)

    def preset_pattern(self) -> str:
        return _alternatives(self.file.presets)

    def cell_data(self, wildcards: Any) -> str:
        """The shards folder of a cell's preset (its family and data seed): each its own rule's output."""
        p = self.file.preset(wildcards.preset)
        return f"{self.dir}/data/{p.family}-seed{p.data_seed}"

    def nodes(self, wildcards: Any) -> int:
        return self.file.design(wildcards.design).nodes

    def walltime(self, wildcards: Any) -> str:
        return self.file.design(wildcards.design).walltime

    def runtime(self, wildcards: Any) -> int:
        return walltime_minutes(self.walltime(wildcards))

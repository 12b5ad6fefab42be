"""Presets (what a cell trains on) and designs (how big, where) from config/modality_presets.yaml."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

import yaml

from prism.core.errors import PrismError, check_name
from prism.core.families import FAMILIES, check_row_length
from prism.launch import LAUNCHERS
from prism.launch.registry import get
from prism.model.config import REGIMES, check_backbone, check_variant
from prism.parallel.config import STRATEGIES
from prism.runtime import DEVICES

LAYOUTS: tuple[str, ...] = ("padded", "packed")
PRESETS_ENV = "PRISM_MODALITY_PRESETS"


@dataclass(frozen=True)
class Preset:
    name: str
    family: str
    data_seed: int = 0
    seq_len: int | None = None  # padded rows; None: the family's sample length
    packed_seq_len: int = 256
    global_batch: int = 32  # rows per optimizer step, the same for both layouts

    def row_len(self, layout: str) -> int | None:
        return self.packed_seq_len if layout == "packed" else self.seq_len


@dataclass(frozen=True)
class Design:
    name: str
    backbone: str
    max_steps: int
    nodes: int = 1
    procs_per_node: int = 1
    variant: str = "BASE"
    regime: str = "e2e"
    log_every: int = 5
    strategy: str = "none"
    launcher: str = "local"
    device: str = "cpu"
    threads: int | None = None
    walltime: str = "00:30:00"


def default_path() -> Path:
    """`$PRISM_MODALITY_PRESETS`, else config/modality_presets.yaml of this checkout, else of the cwd."""
    env = os.environ.get(PRESETS_ENV)
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[2] / "config" / "modality_presets.yaml"
    return repo if repo.is_file() else Path("config/modality_presets.yaml")


def _build(kind, cls, name: str, data, path: Path):
    if not isinstance(data, dict):
        raise PrismError(f"{path}: {kind} {name!r} must be a mapping of settings")
    known = {f.name for f in fields(cls)} - {"name"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise PrismError(
            f"{path}: {kind} {name!r} has unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
        )
    try:
        return cls(name=name, **data)
    except TypeError as err:
        raise PrismError(f"{path}: {kind} {name!r}: {err}") from None


def _validate_preset(p: Preset, path: Path) -> None:
    check_name(f"family (preset {p.name} in {path})", p.family, FAMILIES)
    spec = FAMILIES[p.family]  # the sweep measures the laptop shapes, whatever a study's `shapes`
    for key, value in (("global_batch", p.global_batch), ("packed_seq_len", p.packed_seq_len)):
        if not isinstance(value, int) or value < 1:
            raise PrismError(f"{path}: preset {p.name}: {key} must be a positive integer, got {value!r}")
    for key, value in (("seq_len", p.seq_len), ("packed_seq_len", p.packed_seq_len)):
        if value is not None:
            check_row_length(f"{path}: preset {p.name}: {key}", value, p.family, spec.n_modality_tokens, spec.text_len)


def _validate_design(d: Design, path: Path) -> None:
    where = f"(design {d.name} in {path})"
    check_backbone(d.backbone, where)
    check_variant(d.variant, where)
    check_name(f"regime {where}", d.regime, REGIMES)
    check_name(f"strategy {where}", d.strategy, STRATEGIES)
    check_name(f"launcher {where}", d.launcher, LAUNCHERS)
    check_name(f"device {where}", d.device, DEVICES)
    for key in ("nodes", "procs_per_node", "max_steps", "log_every"):
        value = getattr(d, key)
        if not isinstance(value, int) or value < 1:
            raise PrismError(f"{path}: design {d.name}: {key} must be a positive integer, got {value!r}")
    if get(d.launcher).single_process and d.nodes * d.procs_per_node != 1:
        raise PrismError(
            f"{path}: design {d.name}: launcher {d.launcher} runs one process; use torchrun or aurora "
            f"for {d.nodes} node(s) x {d.procs_per_node}"
        )


@dataclass(frozen=True)
class PresetFile:
    path: Path
    presets: dict[str, Preset]
    designs: dict[str, Design]

    def preset(self, name: str) -> Preset:
        return self.presets[check_name(f"preset (in {self.path})", name, self.presets)]

    def design(self, name: str) -> Design:
        return self.designs[check_name(f"design (in {self.path})", name, self.designs)]


def load(path: str | os.PathLike | None = None) -> PresetFile:
    """Read and validate the presets file; every problem names the file and the preset/design."""
    path = Path(path) if path else default_path()
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        if path.parent.name == "experiments":  # where the scripts prism replaced kept them
            raise PrismError(
                f"cannot read presets file {path}: {err.strerror}; the presets moved to "
                "config/modality_presets.yaml (the default: drop --presets-file)"
            ) from None
        raise PrismError(f"cannot read presets file {path}: {err.strerror}; pass --presets-file") from None
    except yaml.YAMLError as err:
        raise PrismError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("presets"), dict)
        or not isinstance(data.get("designs"), dict)
    ):
        raise PrismError(f"{path}: expected top-level mappings 'presets' and 'designs'")
    presets = {str(n): _build("preset", Preset, str(n), v, path) for n, v in data["presets"].items()}
    designs = {str(n): _build("design", Design, str(n), v, path) for n, v in data["designs"].items()}
    for p in presets.values():
        _validate_preset(p, path)
    for d in designs.values():
        _validate_design(d, path)
    return PresetFile(path, presets, designs)


def split_names(text: str | list[str]) -> list[str]:
    """`a,b` or ["a", "b,c"] -> ["a", "b", "c"] (order kept, duplicates dropped)."""
    items = [text] if isinstance(text, str) else list(text)
    names = [n.strip() for item in items for n in item.split(",") if n.strip()]
    return list(dict.fromkeys(names))

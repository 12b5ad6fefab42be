"""RunConfig: every `prism train` setting, identical from flags or from a YAML file.

The plan writes one YAML file per run (`--config RUN.yaml`); the CLI builds its
flags from the same fields, so the two cannot drift. Precedence: defaults, then
the file, then flags given on the command line. Unknown keys in a file are an
error naming the key (a typo must not silently fall back to a default).

Pure Python plus PyYAML: the CLI, the planner and the launchers use it without
importing torch.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError, check_name
from prism.core.families import FAMILIES, FamilySpec
from prism.core.ids import run_id
from prism.core.options import check_field, option
from prism.data.options import LoaderOptions
from prism.model.config import REGIMES, check_backbone, check_variant
from prism.train.lr_schedule import COOLDOWN_SHAPES
from prism.train.options import TrainOptions
from prism.train.trackers import parse_trackers

COMPILE_MODES = ("auto", "none", "static", "dynamic")
LAYOUTS = ("padded", "packed")

# Keys a run writes beside its settings in RUNDIR/config.yaml: derived, informational.
RESOLVED_KEY = "resolved"
# Evaluations of a run without --eval-every (at step 0 and the end besides).
EVALS_PER_RUN = 10

# Settings that change a run's numbers: a rerun on an existing RUNDIR must agree on them.
RESULT_FIELDS = (
    "family",
    "backbone",
    "variant",
    "regime",
    "budget",
    "seed",
    "global_batch",
    "layout",
    "seq_len",
    "max_steps",
    "lr",
    "warmup",
    "schedule",
    "cooldown_fraction",
    "cooldown_shape",
    "init_from",
    "init_step",
    "precision",
)
# What a run started from another run's checkpoint must share with it to continue its trajectory
# (beside the inputs' fingerprints and the resolved lr and warm-up).
TRAJECTORY_FIELDS = (
    "family",
    "backbone",
    "variant",
    "regime",
    "seed",
    "global_batch",
    "layout",
    "seq_len",
    "precision",
)


def _f(
    default: Any = None,
    help: str = "",
    choices: tuple[str, ...] | None = None,
    metavar: str | None = None,
    required: bool = False,
    **bounds: float,
) -> Any:
    """A `prism.core.options.option` (its `minimum`/`exclusive_minimum`/`maximum` checked by `validate`)
    that may be required: a flag, or a key of the run's YAML file."""
    spec = option(default, help, choices=choices, metavar=metavar, **bounds)
    return field(default=default, metadata={**spec.metadata, "required": required})


def _shared(name: str, options: type = TrainOptions) -> Any:
    """A setting every run of a study shares: its default and help are `options`' (defined once)."""
    option = options.__dataclass_fields__[name]
    return field(default=option.default, metadata={**option.metadata, "required": False})


@dataclass
class RunConfig:
    """One training run. `None` means "derive it" (see the field's help)."""

    family: str = _f(help="modality family (prism model families)", metavar="F", required=True)
    backbone: str = _f(help="backbone name, e.g. 30k, 3m, 1b", metavar="B", required=True)
    variant: str = _f(help="projector variant: BASE W2X W4X D2X D4X", metavar="V", required=True)
    regime: str = _f(help="projector_only, encoder_projector or e2e", metavar="R", required=True)
    budget: float = _f(
        help="training FLOPs (forward+backward), e.g. 3e11", metavar="C", required=True, exclusive_minimum=0
    )
    data: str = _f(help="shard directory made by `prism data build`", metavar="DIR", required=True)
    out: str = _f(help="run directory (created; a rerun resumes from its checkpoints)", metavar="RUNDIR", required=True)
    strategy: str = _shared("strategy")
    replicate: int | None = _f(None, "hsdp: replicas (default world size / shard)", metavar="N", minimum=1)
    shard: int | None = _f(None, "hsdp: shards per replica (default processes per node)", metavar="N", minimum=1)
    seed: int = _shared("seed")
    device: str = _shared("device")
    precision: str = _shared("precision")
    compile: str = _f(
        "auto",
        "torch.compile the blocks: auto (static on cuda/xpu; none on a CPU, where it loses on short runs), "
        "none, static, dynamic",
        COMPILE_MODES,
    )
    grad_checkpoint: int = _f(0, "activation checkpointing on every K-th block (0: off)", metavar="K", minimum=0)
    global_batch: int = _f(32, "samples per optimizer step, over all ranks", metavar="B", minimum=1)
    micro_batch: int | None = _f(
        None,
        "rows a rank takes per forward and backward; its share of --global-batch in micro-batches of M rows, "
        "their gradients accumulated into one update (default: the whole share at once)",
        metavar="M",
        minimum=1,
    )
    calibration: str | None = _f(None, "calibration JSON giving flops_per_sample", metavar="FILE")
    calibration_dir: str | None = _f(
        None,
        "calibration directory ({family}__{backbone}__{variant}"
        "__{regime}.json); without either, FLOPs are counted in-process",
        metavar="DIR",
    )
    layout: str = _f("padded", "batch layout (one sample per row, or packed rows)", LAYOUTS)
    seq_len: int | None = _f(None, "row length in tokens (default: the family's sample length)", metavar="L", minimum=1)
    # How the training split is read; a streamed run's order also depends on the ranks, the workers
    # and the buffer, which its input fingerprint records (prism.data.order.data_order).
    loader: str = _shared("loader", LoaderOptions)
    preload_max_mb: int = _shared("preload_max_mb", LoaderOptions)
    workers: int = _shared("workers", LoaderOptions)
    shuffle_buffer: int = _shared("shuffle_buffer", LoaderOptions)
    max_steps: int | None = _f(
        None,
        "train this many steps instead of the budget's (smoke and sweep "
        "runs; the schedule spans them; FLOPs spent are recorded)",
        metavar="N",
        minimum=1,
    )
    lr: float | None = _f(
        None,
        "peak learning rate (default: width-scaled, see prism.train.lr_schedule)",
        metavar="LR",
        exclusive_minimum=0,
    )
    warmup: int | None = _f(None, "warm-up steps (default: 5% of the steps, at least 1)", metavar="N", minimum=0)
    schedule: str = _shared("schedule")
    cooldown_fraction: float = _shared("cooldown_fraction")
    cooldown_shape: str = _f(
        "sqrt", "wsd: cooldown shape, 1-sqrt or linear in the cooldown's progress", COOLDOWN_SHAPES
    )
    eval_every: int | None = _f(
        None,
        "evaluate every K steps (default: about 10 evaluations a run); always at step 0 and at the end",
        metavar="K",
        minimum=1,
    )
    eval_samples: int = _shared("eval_samples")
    final_eval_samples: int | None = _shared("final_eval_samples")
    checkpoint_every: int | None = _f(
        None, "checkpoint every K steps (default: about 10 a run)", metavar="K", minimum=1
    )
    checkpoint_at: str | None = _f(
        None,
        "also checkpoint at these steps and keep those checkpoints "
        "(comma-separated; e.g. where wsd cooldown branches start)",
        metavar="S1,S2",
    )
    init_from: str | None = _f(
        None,
        "start from a checkpoint of this run directory (weights, optimizer, "
        "data position, RNG, counters) instead of from scratch",
        metavar="RUNDIR",
    )
    init_step: int | None = _f(
        None, "the step of --init-from's checkpoint (default: its newest)", metavar="S", minimum=0
    )
    log_every: int = _f(10, "write a perf.jsonl row every K steps (and at steps 1 and last)", metavar="K", minimum=1)
    threads: int | None = _shared("threads")
    trackers: str | None = _shared("trackers")
    tracker_dir: str | None = _f(
        None, "trackers' root: DIR/tensorboard/GROUP/NAME/, DIR/wandb/ (default: RUNDIR/tracking)", metavar="DIR"
    )
    tracker_group: str | None = _f(
        None,
        "trackers' group of this run (default: FAMILY-REGIME; the workflow's is STUDY-FAMILY-REGIME)",
        metavar="NAME",
    )
    tracker_project: str | None = _shared("tracker_project")

    def __post_init__(self) -> None:
        self.validate()

    # --- validation ------------------------------------------------------------------

    def validate(self, source: str = "run config") -> None:
        """Check every value; names against the registries (no torch needed)."""
        missing = [f.name for f in fields(self) if f.metadata.get("required") and getattr(self, f.name) is None]
        if missing:
            raise PrismError(f"{source}: missing {', '.join('--' + m.replace('_', '-') for m in missing)}")
        check_name("family", self.family, FAMILIES)
        check_backbone(self.backbone)
        check_variant(self.variant)
        check_name("regime", self.regime, REGIMES)
        for f in fields(self):
            if f.metadata.get("choices"):  # "unknown strategy 'zero3'; valid: ..." (the registries' wording)
                check_name(f.name.replace("_", "-"), getattr(self, f.name), f.metadata["choices"])
            check_field(f, getattr(self, f.name), f"{source}: {f.name}")
        parse_steps(self.checkpoint_at)
        if self.init_step is not None and not self.init_from:
            raise PrismError(f"{source}: init_step needs init_from (the run directory to start from)")
        parse_trackers(self.trackers)
        if self.calibration and self.calibration_dir:
            raise PrismError(f"{source}: give calibration or calibration_dir, not both")

    # --- identity --------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return run_id(self.backbone, self.variant, self.regime, self.budget)

    @property
    def out_dir(self) -> Path:
        return Path(self.out)

    @functools.cached_property
    def spec(self) -> FamilySpec:
        """The family's shape and tokenizer the run's data was made at (its manifest): what the model is
        built at and the budget and checks count with. Read once; a data directory of another family is
        refused."""
        from prism.data.manifest import data_spec  # noqa: PLC0415 lazy: reads the manifest

        return data_spec(self.data, self.family)

    @property
    def keep_steps(self) -> frozenset[int]:
        """The steps of `checkpoint_at`, whose checkpoints are kept."""
        return parse_steps(self.checkpoint_at)

    # --- dict / YAML -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "run config") -> RunConfig:
        """Build from a mapping; unknown keys and wrong types are errors naming the key."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key == RESOLVED_KEY:
                continue
            name = str(key).replace("-", "_")
            if name not in known:
                raise PrismError(f"{source}: unknown key {key!r}; valid: {', '.join(known)}")
            values[name] = _coerce(known[name], value, source)
        try:
            return cls(**values)
        except TypeError as err:  # a required field absent from both file and flags
            raise PrismError(f"{source}: {err}") from None

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> RunConfig:
        return cls.from_dict(read_yaml(path), source=str(path))

    def to_yaml(self, path: str | os.PathLike, resolved: dict[str, Any] | None = None) -> None:
        """Write atomically; `resolved` (derived values) goes under its own key."""
        data = self.to_dict()
        if resolved:
            data[RESOLVED_KEY] = resolved
        write_text_atomic(path, yaml.safe_dump(data, sort_keys=False))

    def result_mismatch(self, other: RunConfig) -> list[str]:
        """The result-changing settings on which two configs differ."""
        return [
            f"{n}: {getattr(other, n)!r} -> {getattr(self, n)!r}"
            for n in RESULT_FIELDS
            if getattr(self, n) != getattr(other, n)
        ]


def compile_mode(setting: str, device_type: str) -> str:
    """What `compile` means on `device_type`: `auto` is static shapes on an accelerator, none on a CPU."""
    if setting == "auto":
        return "static" if device_type in ("cuda", "xpu") else "none"
    return setting


def parse_steps(text: str | None) -> frozenset[int]:
    """`"100,250"` -> {100, 250}; steps start at 1."""
    if not text:
        return frozenset()
    try:
        steps = frozenset(int(part) for part in str(text).split(",") if part.strip())
    except ValueError:
        raise PrismError(f"checkpoint_at {text!r}: give step numbers separated by commas") from None
    if any(step < 1 for step in steps):
        raise PrismError(f"checkpoint_at {text!r}: steps start at 1")
    return steps


def _coerce(f: dataclasses.Field, value: Any, source: str) -> Any:
    """YAML reads `3e11` as a string and `32` as int; accept what means the field's type."""
    if value is None:
        return None
    kind = str(f.type)
    try:
        if kind.startswith("float"):
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind.startswith("int"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind.startswith("str"):
            if isinstance(value, (dict, list)):
                raise ValueError
            return str(value)
    except (TypeError, ValueError):
        raise PrismError(f"{source}: key {f.name!r} must be {kind.split(' ')[0]}, got {value!r}") from None
    return value


def read_yaml(path: str | os.PathLike) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise PrismError(f"cannot read run config {path}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PrismError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PrismError(f"{path}: a run config is a mapping of settings, got {type(data).__name__}")
    return data


def merge(config_file: str | None, flags: dict[str, Any]) -> RunConfig:
    """Defaults < file < flags (a flag left at None was not given)."""
    known = {f.name for f in fields(RunConfig)}
    data: dict[str, Any] = {}
    if config_file:
        for key, value in read_yaml(config_file).items():
            name = str(key).replace("-", "_")
            if key == RESOLVED_KEY:
                continue
            if name not in known:
                raise PrismError(f"{config_file}: unknown key {key!r}; valid: {', '.join(sorted(known))}")
            data[name] = value
    for key, value in flags.items():
        if key in known and value is not None:
            data[key] = value
    return RunConfig.from_dict(data, source=f"{config_file} + flags" if config_file else "flags")

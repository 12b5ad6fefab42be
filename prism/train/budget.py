"""How many steps a run takes, and what else follows from its FLOP budget before the first step.

`steps = round(budget / (flops_per_sample * global_batch))`. `flops_per_sample` is
the run's calibration record when one is given (`--calibration FILE` or
`--calibration-dir DIR`), else counted in-process on a meta-device copy of the model
and cached; never a 6ND guess, because the study's x-axis is these FLOPs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import prism.model
from prism.core.atomic import write_json_atomic
from prism.core.calibration import load_calibration, load_calibration_file
from prism.core.errors import PrismError
from prism.core.families import spec_record
from prism.model.config import expected_shape
from prism.runtime.peak import cache_dir
from prism.train.config import EVALS_PER_RUN, RunConfig
from prism.train.lr_schedule import Schedule, default_lr, default_warmup


@dataclass(frozen=True)
class StepBudget:
    """What a run derives from its config and model before the first step."""

    flops_per_sample: float
    flops_source: str
    tokens_per_sample: int
    seq_len: int
    budget_steps: int
    steps: int
    lr: float
    warmup: int
    eval_every: int
    checkpoint_every: int
    params: int
    params_total: int
    schedule: Schedule

    def to_dict(self) -> dict[str, Any]:
        """Flat, for the run's `resolved:` section (the schedule's fields prefixed)."""
        data = asdict(self)
        schedule = data.pop("schedule")
        return {
            **data,
            "schedule": schedule["kind"],
            "cooldown_steps": self.schedule.cooldown,
            "cooldown_start": self.schedule.cooldown_start,
        }


def find_calibration(config: RunConfig) -> dict | None:
    """The calibration record the run names (checked), or None when it names none."""
    names = (config.family, config.backbone, config.variant, config.regime)
    shape = expected_shape(config.family, config.backbone, config.spec)
    if config.calibration_dir:
        return load_calibration(config.calibration_dir, *names, shape=shape)
    if config.calibration:
        return load_calibration_file(config.calibration, *names, shape=shape)
    return None


def counted_flops(config: RunConfig, seq_len: int) -> tuple[float, bool]:
    """(FLOPs of one sample's training step, whether from the cache), counted on a meta-device model.

    Counting imports torch's tracing stack (seconds of start-up), so the figure is kept
    in `flops.json` beside the peak cache, keyed by everything it depends on.
    """
    # Imported here, not at the top: the FLOP counter's tracing stack costs seconds of
    # start-up, and a run with a calibration (every study run) never needs it.
    import torch  # noqa: PLC0415 lazy: torch

    from prism.model.accounting import count_training_flops  # noqa: PLC0415 lazy: torch

    model_src = hashlib.sha256()
    for source in sorted(Path(prism.model.__file__).parent.glob("*.py")):
        model_src.update(source.read_bytes())
    key = "|".join(
        [
            config.family,
            *([json.dumps(spec, sort_keys=True)] if (spec := spec_record(config.spec)) else []),
            config.backbone,
            config.variant,
            config.regime,
            str(seq_len),
            str(torch.__version__),
            model_src.hexdigest()[:16],
        ]
    )
    path = cache_dir() / "flops.json"
    cache = _read_cache(path)
    if isinstance(cache.get(key), (int, float)) and cache[key] > 0:
        return float(cache[key]), True
    meta = prism.model.build_model(
        config.family, config.backbone, config.variant, config.regime, device="meta", spec=config.spec
    )
    fps = float(count_training_flops(meta, seq_len))
    cache = _read_cache(path)
    cache[key] = fps
    try:
        write_json_atomic(path, cache, indent=1, sort_keys=True)
    except OSError:
        pass  # a read-only cache only costs the recount
    return fps, False


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def flops_per_sample(config: RunConfig, seq_len: int, log=print) -> tuple[float, int, str]:
    """(FLOPs per unit, tokens per unit, where the figure came from); a unit is a sample or a packed row."""
    record = find_calibration(config)
    if record is None:
        fps, cached = counted_flops(config, seq_len)
        log(
            f"[{config.run_id}] no --calibration: {fps:.4g} training FLOPs per sample counted in-process"
            + (" (cached)" if cached else "")
        )
        return fps, seq_len, "counted in-process (prism.model.accounting; no calibration given)"
    fps = float(record["flops_per_sample"])
    tps = int(record.get("tokens_per_sample", seq_len))
    source = f"calibration {config.calibration or config.calibration_dir}"
    if tps == seq_len:
        return fps, tps, source
    if config.layout == "padded":
        raise PrismError(
            f"calibration for {config.run_id} counts {tps} tokens per sample but the "
            f"run's rows are {seq_len} long; recalibrate with that length or drop --seq-len"
        )
    # A packed row of seq_len tokens costs about seq_len/tps calibrated samples (linear in length).
    return fps * seq_len / tps, seq_len, source + f", scaled linearly to {seq_len}-token packed rows"


def step_budget(config: RunConfig, model: Any, world_size: int, log=print) -> StepBudget:
    """Steps, learning rate, warm-up and intervals of the run, and its parameter counts."""
    seq_len = config.seq_len or config.spec.tokens_per_sample
    fps, tps, source = flops_per_sample(config, seq_len, log)
    if fps <= 0:
        raise PrismError(f"{config.run_id}: {fps} FLOPs per sample (nothing trainable?); cannot plan steps")
    budget_steps = round(config.budget / (fps * config.global_batch))
    steps = config.max_steps if config.max_steps is not None else budget_steps
    if steps < 1:
        raise PrismError(
            f"{config.run_id}: budget {config.budget:g} buys {config.budget / fps:.3g} samples, "
            f"less than one global batch of {config.global_batch}; raise --budget or lower "
            "--global-batch"
        )
    if config.global_batch % world_size:
        raise PrismError(f"--global-batch {config.global_batch} is not divisible by the {world_size} processes")
    # Counted here, not via prism.model.accounting (whose import pulls torch's tracing stack).
    # parameters() de-duplicates tied weights, as accounting does.
    params = list(model.parameters())
    warmup = min(steps, config.warmup) if config.warmup is not None else default_warmup(steps)
    return StepBudget(
        flops_per_sample=fps,
        flops_source=source,
        tokens_per_sample=tps,
        seq_len=seq_len,
        budget_steps=budget_steps,
        steps=steps,
        lr=config.lr if config.lr is not None else default_lr(model.backbone_config.d_model),
        warmup=warmup,
        eval_every=config.eval_every or max(1, steps // EVALS_PER_RUN),
        checkpoint_every=config.checkpoint_every or max(1, steps // 10),
        params=sum(p.numel() for p in params if p.requires_grad),
        params_total=sum(p.numel() for p in params),
        schedule=Schedule(config.schedule, warmup, steps, config.cooldown_fraction, config.cooldown_shape),
    )

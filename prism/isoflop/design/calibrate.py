"""Calibration, step 1 of an IsoFLOP study: what one training sample costs.

For one (family, backbone, projector variant, regime) this counts parameters by
component and the FLOPs of one padded sample's forward + backward on the meta
device (exact, allocation-free, so real sizes calibrate anywhere), puts the 6·N·D
estimate beside it, and optionally times real training steps on a device.
The planner divides budgets by `flops_per_sample`; `prism.core.calibration` reads the records back.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prism.core.atomic import write_json_atomic
from prism.core.calibration import CALIBRATION_VERSION, calibration_filename, speed_filename
from prism.core.errors import PrismError
from prism.core.families import FamilySpec, check_row_length, family_spec, spec_record
from prism.core.options import option
from prism.core.progress import progress
from prism.model.config import backbone_config, backbone_shape, projector_variant, regime_parts
from prism.train.lr_schedule import build_optimizer

# The `prism train` settings the timed steps take from the study's runs (their flags are RunConfig's).
TIMED_RUN_SETTINGS = ("device", "threads", "precision", "compile")


@dataclass(frozen=True)
class CalibrateOptions:
    """The timed steps that estimate a study's wall time: `prism isoflop calibrate` flags and the
    config's `calibrate:` section (the workflow writes the result to a `.speed.json` beside the calibration)."""

    measure_throughput: bool = option(
        False,
        "time real fwd+bwd+AdamW steps on --device, in --precision, compiled as --compile (samples/s)",
        doc=(
            "Time a few real training steps per candidate, on the study's device in its precision and compiled "
            "as its runs are: the plan's estimate of each run's wall time, and on a cluster (the aurora "
            "launcher) of its node-hours. Under a cluster profile each timing is a short job on a compute node. "
            "Without it those estimates rest on plan.mfu, an assumption."
        ),
    )
    batch_size: int = option(32, "samples per timed step", metavar="B", minimum=1, doc="Samples per timed step.")
    steps: int = option(
        3,
        "timed steps after 2 warm-up steps (the median is kept)",
        metavar="N",
        minimum=1,
        doc="Timed steps after 2 warm-up steps (the median is kept).",
    )


def load_speed(calibration_dir: str | Path, family: str, backbone: str, variant: str, regime: str) -> dict | None:
    """The speed record (`samples_per_s`, device, host) when it exists and is readable; None otherwise."""
    path = Path(calibration_dir) / speed_filename(family, backbone, variant, regime)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("samples_per_s") else None


def check_names(family: str, backbone: str, variant: str, regime: str, spec: FamilySpec | None) -> None:
    """Refuse an unknown size, variant, family or regime (a PrismError listing the valid names)."""
    backbone_config(backbone), projector_variant(variant), family_spec(family, spec), regime_parts(regime)


def calibrate(
    family: str,
    backbone: str,
    variant: str,
    regime: str = "e2e",
    seq_len: int | None = None,
    device: str = "auto",
    measure_throughput: bool = False,
    batch_size: int = 32,
    steps: int = 5,
    threads: int | None = None,
    precision: str = "auto",
    compile: str = "auto",
    spec: FamilySpec | None = None,
) -> dict:
    """The calibration record (its keys are listed in docs/architecture.md, "Calibration") at `spec`
    (the family's shape and tokenizer; None: its laptop default).

    `threads` sets torch's CPU threads for the timed steps (on a shared host one
    thread per process avoids OpenMP oversubscription, which is many times slower).
    """
    check_names(family, backbone, variant, regime, spec)
    import torch  # noqa: PLC0415 lazy: torch

    from prism.model.accounting import count_training_flops, input_embedding_params, param_counts  # noqa: PLC0415 lazy: torch
    from prism.model.prism import build_model  # noqa: PLC0415 lazy: torch
    from prism.runtime.device import device_name, resolve_device  # noqa: PLC0415 lazy: torch

    dev = resolve_device(device)
    model = build_model(family, backbone, variant, regime, device="meta", spec=spec)
    spec, cfg = model.family, model.backbone_config
    seq_len = _row_length(spec, seq_len)
    counts = param_counts(model)
    params_total = sum(c["total"] for c in counts.values())
    params_trainable = sum(c["trainable"] for c in counts.values())
    if measure_throughput:  # fail before the (slower) FLOP count
        check_fits(backbone, dev, params_total, params_trainable)
    flops = count_training_flops(model, seq_len)
    record = {
        "calibration_version": CALIBRATION_VERSION,
        "family": family,
        "backbone": backbone,
        "variant": variant,
        "regime": regime,
        "seq_len": seq_len,
        "tokens_per_sample": seq_len,
        "n_modality_tokens": spec.n_modality_tokens,
        "params_total": params_total,
        "params_trainable": params_trainable,
        "params_by_component": counts,
        "input_embedding_params": input_embedding_params(model),
        "backbone_non_embedding_params": cfg.non_embedding_params,
        **backbone_shape(backbone, spec.vocab.rows),
        **({"family_spec": fs} if (fs := spec_record(spec)) else {}),
        "flops_per_sample": flops,
        "flops_6nd_per_sample": 6 * params_trainable * seq_len,
        "flops_counted_on": "meta (torch.utils.flop_counter.FlopCounterMode, batch 1, forward + backward)",
        "samples_per_s": None,
        "throughput": None,
        "device": str(dev),
        "device_name": device_name(dev),
        "host": platform.node(),
        "torch_version": torch.__version__,
    }
    if measure_throughput:
        record["throughput"] = measure_training_throughput(
            family, backbone, variant, regime, seq_len, dev, batch_size, steps, params_total, params_trainable,
            threads=threads, precision=precision, compile=compile, spec=spec,
        )  # fmt: skip
        record["samples_per_s"] = record["throughput"]["samples_per_s"]
        record["throughput"]["flops_per_s"] = record["samples_per_s"] * flops  # one rank's: what a node's ranks each do
    return record


def _row_length(spec, seq_len: int | None) -> int:
    """The timed row length: one padded sample unless given, never shorter than the modality and BOS/EOS."""
    seq_len = spec.tokens_per_sample if seq_len is None else int(seq_len)
    check_row_length("--seq-len", seq_len, spec.name, spec.n_modality_tokens, None)
    return seq_len


def _available_bytes(device) -> int | None:
    """Memory we may use: MemAvailable on cpu (the host is shared), device capacity otherwise."""
    from prism.runtime.device import memory_capacity  # noqa: PLC0415 lazy: torch

    if device.type == "cpu":
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
    return memory_capacity(device)


def check_fits(backbone: str, device, params_total: int, params_trainable: int) -> None:
    """Refuse (PrismError) when fp32 weights, gradients and Adam state alone exceed 80% of the memory at hand."""
    state_bytes = 4 * params_total + 12 * params_trainable  # fp32 weights; grads + 2 Adam moments for trainable
    available = _available_bytes(device)
    if available is not None and state_bytes > 0.8 * available:
        raise PrismError(
            f"backbone {backbone} does not fit for --measure-throughput on {device}: fp32 weights, gradients and "
            f"Adam state need {state_bytes / 2**30:.1f} GiB but {available / 2**30:.1f} GiB is available; "
            "drop --measure-throughput (FLOPs and parameters need no memory) or measure on a larger device"
        )


def measure_training_throughput(
    family: str,
    backbone: str,
    variant: str,
    regime: str,
    seq_len: int,
    device,
    batch_size: int,
    steps: int,
    params_total: int,
    params_trainable: int,
    warmup: int = 2,
    threads: int | None = None,
    precision: str = "auto",
    compile: str = "auto",
    spec: FamilySpec | None = None,
) -> dict:
    """Samples/s of real forward + backward + AdamW steps at `batch_size` on `device`, as a run trains:
    in `precision` (`prism train --precision`: bf16 autocast with fp32 master weights, or fp32) with its
    blocks compiled as `compile` says (`prism train --compile`; the warm-up steps take the compilation).

    Refuses up front (PrismError) when weights, gradients and Adam state alone
    would not fit, rather than thrashing or dying of OOM half-way.
    """
    import torch  # noqa: PLC0415 lazy: torch

    from prism.model.accounting import example_batch  # noqa: PLC0415 lazy: torch
    from prism.model.prism import build_model  # noqa: PLC0415 lazy: torch
    from prism.runtime.device import max_memory_allocated, reset_peak_memory, synchronize  # noqa: PLC0415 lazy: torch
    from prism.train import precision as policy  # noqa: PLC0415 lazy: torch
    from prism.train.config import compile_mode  # noqa: PLC0415 lazy: torch

    computes_in = policy.resolve(precision, device.type)
    compiled = compile_mode(compile, device.type)
    if batch_size < 1 or steps < 1 or (threads is not None and threads < 1):
        raise PrismError(f"--batch-size ({batch_size}), --steps ({steps}) and --threads ({threads}) must be at least 1")
    if threads is not None:
        torch.set_num_threads(threads)
    check_fits(backbone, device, params_total, params_trainable)
    try:
        model = build_model(family, backbone, variant, regime, device=device, spec=spec)
        model.compile_blocks(compiled)
        opt = build_optimizer(model.trainable_parameters(), 1e-4)
        batch = example_batch(model, seq_len, batch_size, device=device)
        reset_peak_memory(device)
        times = []
        for i in progress(range(warmup + steps), f"{backbone}: timed steps"):  # on a terminal only
            synchronize(device)
            t0 = time.perf_counter()
            with policy.autocast(device, computes_in):
                loss = model(*batch)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            synchronize(device)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    except torch.OutOfMemoryError:
        raise PrismError(
            f"backbone {backbone} ran out of memory on {device} at --batch-size {batch_size} "
            f"({computes_in}, no sharding); try a smaller --batch-size, or drop --measure-throughput"
        ) from None
    step_time = sorted(times)[len(times) // 2]  # median: robust to a stray slow step on a shared host
    return {
        "batch_size": batch_size,
        "steps": steps,
        "warmup_steps": warmup,
        "precision": computes_in,
        "compile": compiled,
        "step_time_s": step_time,
        "samples_per_s": batch_size / step_time,
        "tokens_per_s": batch_size * seq_len / step_time,
        "peak_memory_bytes": max_memory_allocated(device),
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
    }


def run_calibrate(
    family: str,
    backbone: str,
    variant: str,
    regime: str = "e2e",
    *,
    calibration_dir: str | Path | None = None,
    out: str | Path | None = None,
    **options: Any,
) -> Path:
    """Calibrate (`options` as for `calibrate`) and write the JSON atomically to `out`,
    or to its canonical name in `calibration_dir`."""
    if (calibration_dir is None) == (out is None):
        raise PrismError("give exactly one of --calibration-dir DIR or --out FILE")
    record = calibrate(family, backbone, variant, regime, **options)
    path = (
        Path(out)
        if out is not None
        else Path(calibration_dir) / calibration_filename(family, backbone, variant, regime)
    )
    return write_json_atomic(path, record, indent=2)

"""Checks a run passes before anything is written in its directory.

A run that would fail in its first step (rows too short for one sample, a global
batch whose activations cannot fit in memory) must fail before `config.yaml` is
written: otherwise the corrected rerun is refused as "a different run". These
are cheap (no torch, no model): lower bounds, so they never refuse a run that
would have fitted.
"""

from __future__ import annotations

from typing import Any

from prism.core.atomic import human_bytes
from prism.core.errors import PrismError
from prism.model.config import backbone_config
from prism.train import precision

# Bytes per fp32 activation element kept for the backward pass per layer and token,
# in units of d_model: q/k/v, attention output, two norms, the MLP's gate/up (2 x ~2.7 d)
# and its output. A lower bound: the real figure (autograd keeps more) is higher.
ACTIVATION_WIDTHS_PER_LAYER = 10


def check_seq_len(config: Any) -> None:
    """Rows must hold one sample's modality tokens plus BOS, one text byte and EOS."""
    if config.seq_len is None:
        return

    spec = config.spec
    need = spec.n_modality_tokens + 3
    if config.seq_len < need:
        raise PrismError(
            f"--seq-len {config.seq_len} is too short for {config.family}: a row holds "
            f"{spec.n_modality_tokens} modality tokens + BOS + text + EOS, "
            f"at least {need} tokens (default: {spec.tokens_per_sample})"
        )


def step_bytes_lower_bound(config: Any, world_size: int = 1, device_type: str = "cpu") -> int:
    """A lower bound on one process's activation memory for one step (no checkpointing): in bf16
    mixed precision the saved activations are 2 bytes wide, the logits fp32 (the loss casts them)."""
    spec = config.spec
    seq_len = config.seq_len or spec.tokens_per_sample
    local_batch = max(1, config.global_batch // max(1, world_size))
    local_batch = min(local_batch, getattr(config, "micro_batch", None) or local_batch)  # one micro-step's rows
    cfg = backbone_config(config.backbone, spec.vocab.rows)
    tokens = local_batch * seq_len
    logits = tokens * spec.vocab.size * 4 * 2  # logits and their gradient
    layers = 1 if config.grad_checkpoint else cfg.n_layers
    width = 2 if precision.resolve(config.precision, device_type) == "bf16" else 4
    hidden = tokens * cfg.d_model * width * ACTIVATION_WIDTHS_PER_LAYER * layers
    return logits + hidden


def available_memory(device: str) -> int | None:
    """Bytes this process may still allocate on `device` (None when unknown)."""
    if device == "cpu":
        try:
            with open("/proc/meminfo") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
        return None
    try:
        import torch  # noqa: PLC0415 lazy: torch

        module = getattr(torch, device)
        if module.is_available():
            return int(module.mem_get_info()[0]) if hasattr(module, "mem_get_info") else None
    except Exception:  # noqa: BLE001 - no figure is not an error
        return None
    return None


def check_memory(config: Any, world_size: int = 1) -> None:
    """Refuse a global batch whose activations alone exceed the memory available."""
    device = config.device
    if device == "auto":
        from prism.runtime.device import resolve_device  # noqa: PLC0415 lazy: torch

        device = resolve_device("auto").type
    need = step_bytes_lower_bound(config, world_size, device)
    have = available_memory(device)
    if have is not None and need > have:
        local = max(1, config.global_batch // max(1, world_size))
        raise PrismError(
            f"--global-batch {config.global_batch} needs at least {human_bytes(need)} of {device} "
            f"memory per step ({local} samples per process), {human_bytes(have)} available; "
            "lower --global-batch or --micro-batch (gradient accumulation), add processes, or use "
            "--grad-checkpoint"
        )


def check(config: Any, world_size: int = 1) -> None:
    check_seq_len(config)
    check_memory(config, world_size)

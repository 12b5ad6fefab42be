"""Whether a benchmark step of the real size fits the device: refused up front with the sizes to
lower, instead of an out-of-memory kill halfway through a sweep."""

from __future__ import annotations

from pathlib import Path

from prism.bench.benchconfig import BenchConfig
from prism.core.errors import PrismError


def available_bytes(device) -> int | None:
    from prism.runtime.device import memory_capacity  # noqa: PLC0415 lazy: torch

    cap = memory_capacity(device)
    if device.type == "cpu":
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    return min(cap, avail) if cap else avail
        except OSError:
            pass
    return cap


def required_bytes(cfg: BenchConfig, batch: int, train: bool) -> int:
    """A lower bound on the memory one step needs: weights (+ grads + AdamW state) + a rough activation term."""
    from prism.model.prism import build_model  # noqa: PLC0415 lazy: torch

    model = build_model(cfg.family, cfg.model, cfg.variant, cfg.regime, device="meta")
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    bc = model.backbone_config
    act_bytes = 2 if cfg.dtype != "fp32" else 4
    # Weights fp32 (autocast keeps fp32 masters); training adds grads and two Adam moments.
    weights = 4 * total + (3 * 4 * trainable if train else 0)
    # Per token and layer: ~16 d_model-wide tensors saved for backward (norms, q/k/v, MLP) in training.
    acts = batch * cfg.seq_len * bc.n_layers * bc.d_model * act_bytes * (16 if train else 2)
    logits = batch * cfg.seq_len * bc.vocab_size * 4 * (3 if train else 1)
    return weights + acts + logits


def check_memory(cfg: BenchConfig, device, batch: int, train: bool) -> None:
    need = required_bytes(cfg, batch, train)
    have = available_bytes(device)
    if have is not None and need > 0.9 * have:
        raise PrismError(
            f"--model {cfg.model} at batch {batch}, seq_len {cfg.seq_len} ({'training' if train else 'forward'}, "
            f"{cfg.dtype}) needs at least {need / 2**30:.1f} GiB but {device} has {have / 2**30:.1f} GiB available; "
            f"use a smaller --model/--batch/--seq-len or a device with more memory"
        )

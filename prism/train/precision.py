"""The precision a run computes in: one policy for every strategy and device.

`bf16` is mixed precision as torchtitan, OLMo-core and Lightning ("bf16-mixed") train
by default: the weights, their gradients and the optimizer state stay fp32 (the
master copy the update is applied to), the forward runs under `torch.autocast` in
bf16 (matmuls, attention), and what needs the range stays fp32: the norms' statistics
(`prism.model.ops`), the residual stream (an fp32 embedding plus bf16 branch outputs),
and the logits' log-softmax and the loss (the model casts the logits to fp32 first).
Under fsdp/hsdp, FSDP2's `MixedPrecisionPolicy` gathers the weights in bf16 and
reduces the gradients in fp32; there the embedding too is bf16 when gathered, so the
residual stream is bf16 as torchtitan's is. Under ddp the gradients are fp32 (the
parameters are), so they are reduced in fp32 too.

`auto` is bf16 on an accelerator (cuda, xpu), where bf16 matmuls run at many times the
fp32 rate, and fp32 on a CPU, where they rarely do and the fused CPU kernels
(`prism.model.kernels`) are fp32. A CPU run may still ask for bf16: the fused kernels
then step aside for the modules' path.

Pure Python at import: the CLI and the workflow read `PRECISIONS` without torch.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

PRECISIONS = ("auto", "fp32", "bf16")
ACCELERATORS = ("cuda", "xpu")


def resolve(precision: str, device_type: str) -> str:
    """The precision a run on `device_type` computes in: `fp32` or `bf16`."""
    if precision == "auto":
        return "bf16" if device_type in ACCELERATORS else "fp32"
    if precision not in PRECISIONS:
        from prism.core.errors import PrismError  # noqa: PLC0415 lazy: keeps this module's import light

        raise PrismError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    return precision


def autocast(device: Any, precision: str) -> AbstractContextManager:
    """The context a forward runs in: autocast to bf16 for `bf16`, nothing for `fp32` (a resolved precision)."""
    if precision == "fp32":
        return nullcontext()
    import torch  # noqa: PLC0415 lazy: torch

    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def fsdp_policy(precision: str) -> Any:
    """FSDP2's mixed-precision policy: bf16 weights in compute, fp32 gradient reduction; None for fp32."""
    if precision == "fp32":
        return None
    import torch  # noqa: PLC0415 lazy: torch
    from torch.distributed.fsdp import MixedPrecisionPolicy  # noqa: PLC0415 lazy: torch.distributed

    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)

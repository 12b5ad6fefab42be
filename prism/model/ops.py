"""Hand-written backward passes for the backbone's element-wise ops.

In eager mode every op is a separate pass over memory, and autograd's generated
backward for RMSNorm and SwiGLU takes about twice as many passes as the maths
needs (plus a `cat` to reassemble the fused gate/up gradient). These Functions
compute the same values with the minimal passes; on this repository's 3M-parameter
step on a CPU they are worth several points of MFU (docs/measurements-archive.md).
Under `torch.compile` the plain forms are used instead: inductor fuses those itself.
`tests/model/test_ops.py` checks both against the composite definitions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _wide(t: torch.Tensor) -> torch.Tensor:
    """At least fp32, so low-precision activations do not lose the scale."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        xf = _wide(x)
        # One fused reduction pass for the statistics (no squared copy of x).
        rstd = torch.linalg.vector_norm(xf, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()
        ctx.save_for_backward(x, weight, rstd)
        return torch.mul(xf, rstd).type_as(x).mul_(weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        xf, gf = _wide(x), _wide(grad)
        gw = gf * weight
        # dx = rstd * gw - x * rstd^3 * mean(gw * x): the gradient of x * rstd(x), in two passes.
        scale = torch.linalg.vecdot(gw, xf).unsqueeze(-1).mul_(rstd.pow(3)).div_(-x.shape[-1])
        dx = torch.mul(xf, scale).addcmul_(gw, rstd)
        dweight = None
        if ctx.needs_input_grad[1]:  # sum over rows of grad * x * rstd, as a matrix-vector product
            dweight = torch.mv((gf * xf).flatten(0, -2).T, rstd.flatten()).type_as(weight)
        return dx.type_as(x), dweight, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """`x / rms(x) * weight` over the last dimension."""
    if torch.compiler.is_compiling():  # inductor fuses the plain form, forward and backward, into one kernel each
        xf = _wide(x)
        return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)).type_as(x) * weight
    return _RMSNorm.apply(x, weight, eps)


class _SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor) -> torch.Tensor:
        gate, up = h.chunk(2, dim=-1)
        act = F.silu(gate)
        ctx.save_for_backward(h, act)
        return act * up

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        h, act = ctx.saved_tensors
        gate, up = h.chunk(2, dim=-1)
        # Both halves are written into one buffer: no cat of two gradients (autograd's chunk
        # backward). Out-of-place writes: in place on these strided halves is 2-5x slower.
        dh = torch.empty_like(h)
        dgate, dup = dh.chunk(2, dim=-1)
        torch.mul(grad, act, out=dup)
        torch.ops.aten.silu_backward.grad_input(grad * up, gate, grad_input=dgate)
        return dh


def swiglu(h: torch.Tensor) -> torch.Tensor:
    """`silu(gate) * up` for `h = [gate | up]` along the last dimension (one fused projection)."""
    if torch.compiler.is_compiling():  # as in rms_norm: inductor fuses the plain form
        gate, up = h.chunk(2, dim=-1)
        return F.silu(gate) * up
    return _SwiGLU.apply(h)

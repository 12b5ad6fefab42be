"""The eager fast forms of the backbone's element-wise maths, each exact to its reference in `backbone`.

In eager mode every op is a separate pass over memory, and autograd's generated
backward for RMSNorm and SwiGLU takes about twice as many passes as the maths
needs (plus a `cat` to reassemble the fused gate/up gradient). These Functions
compute the same values with the minimal passes; on a 3M-parameter step on a CPU
they are worth several points of MFU (docs/measurements-archive.md). Rotary positions as one
complex multiply are likewise some 3x faster in eager mode than the real form.
Under `torch.compile` the reference forms run instead: inductor fuses those itself.
`tests/model/test_block_forms.py` checks every form against the reference.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch
import torch.nn.functional as F

from prism.core.switch import turned_off

_state = {"enabled": True}


def usable() -> bool:
    """Whether the fast forms run: eager mode and not `disabled()`."""
    return _state["enabled"] and not torch.compiler.is_compiling()


def disabled() -> AbstractContextManager[None]:
    """The reference forms of `backbone` everywhere (tests; A/B measurements)."""
    return turned_off(_state)


def wide(t: torch.Tensor) -> torch.Tensor:
    """At least fp32, so low-precision activations do not lose the scale."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        xf = wide(x)
        # One fused reduction pass for the statistics (no squared copy of x).
        rstd = torch.linalg.vector_norm(xf, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()
        ctx.save_for_backward(x, weight, rstd)
        return torch.mul(xf, rstd).type_as(x).mul_(weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        xf, gf = wide(x), wide(grad)
        gw = gf * weight
        # dx = rstd * gw - x * rstd^3 * mean(gw * x): the gradient of x * rstd(x), in two passes.
        scale = torch.linalg.vecdot(gw, xf).unsqueeze(-1).mul_(rstd.pow(3)).div_(-x.shape[-1])
        dx = torch.mul(xf, scale).addcmul_(gw, rstd)
        dweight = None
        if ctx.needs_input_grad[1]:  # sum over rows of grad * x * rstd, as a matrix-vector product
            dweight = torch.mv((gf * xf).flatten(0, -2).T, rstd.flatten()).type_as(weight)
        return dx.type_as(x), dweight, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """`backbone.rms_norm` with a two-pass hand-written backward."""
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
    """`backbone.swiglu` with its gradient written into one buffer."""
    return _SwiGLU.apply(h)


def rope_rotation(angles: torch.Tensor) -> torch.Tensor:
    """The unit complex numbers `[seq_len, 1, head_dim/2]` that `rotary` multiplies by:
    computed once per forward and shared by every layer (and the fused kernel's input)."""
    return torch.polar(torch.ones_like(angles), angles)[:, None, :]


def rotary(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """`backbone.rotary` as one complex multiply forward and one backward: in eager mode 3x faster
    than the real form's four multiplies, two adds and a stack (inductor cannot compile it)."""
    return torch.view_as_real(torch.view_as_complex(x.float().unflatten(-1, (-1, 2))) * rotation).flatten(-2).type_as(x)

import pytest
import torch
import torch.nn.functional as F

from prism.model.ops import rms_norm, swiglu


def composite_rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def composite_swiglu(h):
    gate, up = h.chunk(2, dim=-1)
    return F.silu(gate) * up


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_rms_norm_gradients_are_exact():
    x = torch.randn(3, 5, 16, dtype=torch.double, requires_grad=True)
    weight = torch.randn(16, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: rms_norm(x, w, 1e-5), (x, weight))


def test_swiglu_gradients_are_exact():
    h = torch.randn(3, 5, 16, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(swiglu, (h,))


@pytest.mark.parametrize(
    "op, reference, shapes",
    [
        ("rms_norm", composite_rms_norm, ((4, 7, 32), (32,))),
        ("swiglu", composite_swiglu, ((4, 7, 64),)),
    ],
)
def test_fp32_values_and_gradients_match_the_composite(op, reference, shapes):
    inputs = [torch.randn(s, requires_grad=True) for s in shapes]
    args = (1e-5,) if op == "rms_norm" else ()
    fused = {"rms_norm": rms_norm, "swiglu": swiglu}[op]
    out, ref = fused(*inputs, *args), reference(*inputs, *args)
    torch.testing.assert_close(out, ref)
    grad = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, inputs, grad), torch.autograd.grad(ref, inputs, grad))


def test_rms_norm_keeps_bf16_activations_and_computes_statistics_in_fp32():
    x = (torch.randn(2, 3, 64) * 1e3).to(torch.bfloat16).requires_grad_()
    weight = torch.ones(64, dtype=torch.bfloat16, requires_grad=True)
    y = rms_norm(x, weight, 1e-5)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), composite_rms_norm(x.float(), weight.float(), 1e-5), atol=1e-2, rtol=1e-2)
    y.sum().backward()
    assert x.grad.dtype == torch.bfloat16 and weight.grad.dtype == torch.bfloat16


def test_frozen_norm_weight_gets_no_gradient():
    x = torch.randn(2, 3, 8, requires_grad=True)
    weight = torch.ones(8)
    rms_norm(x, weight, 1e-5).sum().backward()
    assert x.grad is not None and weight.grad is None


def test_the_forms_used_under_torch_compile_agree(monkeypatch):
    x, weight, h = torch.randn(4, 7, 32), torch.randn(32), torch.randn(4, 7, 64)
    eager = rms_norm(x, weight, 1e-5), swiglu(h)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    compiled = rms_norm(x, weight, 1e-5), swiglu(h)
    torch.testing.assert_close(compiled, eager)

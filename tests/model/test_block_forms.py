"""Every form of the block's maths against its one reference, `prism.model.backbone`.

The eager fast forms (`prism.model.ops`) and the fused CPU kernels (`prism.model.kernels`)
must compute the reference's values and gradients (of inputs and parameters) to rounding:
a change to the maths is made in backbone.py and these tests name each form it must follow.
"""

from contextlib import ExitStack, contextmanager

import pytest
import torch

from prism.model import backbone, build_model, kernels, ops
from prism.model.backbone import Backbone, Block
from prism.model.config import BackboneConfig

needs_kernels = pytest.mark.skipif(kernels.load() is None, reason="no C++ toolchain to build the kernels")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@contextmanager
def reference():
    """The backbone's reference forms only: no fast ops, no fused kernels."""
    with ExitStack() as stack:
        stack.enter_context(ops.disabled())
        stack.enter_context(kernels.disabled())
        yield


def config(**kw) -> BackboneConfig:
    base = dict(name="tiny", d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, ffn_dim=80, vocab_size=264)
    return BackboneConfig(**{**base, **kw})


def values_and_grads(module, inputs, step):
    """`step()`'s value and the gradients of `inputs` and of `module`'s parameters."""
    for t in inputs:
        t.grad = None
    module.zero_grad(set_to_none=True)
    out = step()
    out.backward()
    grads = {f"input{i}": t.grad.clone() for i, t in enumerate(inputs)}
    grads |= {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}
    return out.detach(), grads


def assert_close_relative(a: dict, b: dict, rtol: float) -> None:
    assert a.keys() == b.keys()
    for name in b:
        scale = b[name].abs().max().clamp_min(1e-12)
        assert ((a[name] - b[name]).abs().max() / scale).item() < rtol, name


# The element-wise ops: ops' Functions and complex rotary positions against the reference.


def test_the_fast_ops_gradients_are_exact():
    x = torch.randn(3, 5, 16, dtype=torch.double, requires_grad=True)
    weight = torch.randn(16, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: ops.rms_norm(x, w, 1e-5), (x, weight))
    assert torch.autograd.gradcheck(ops.swiglu, (torch.randn(3, 5, 16, dtype=torch.double, requires_grad=True),))


def rotary_case():
    x = torch.randn(2, 9, 3, 16)
    return [x], [backbone.rope_angles(9, 16, 10000.0, "cpu")]  # the angles take no gradient


@pytest.mark.parametrize(
    "fast, ref, make",
    [
        (ops.rms_norm, backbone.rms_norm, lambda: ([torch.randn(4, 7, 32), torch.randn(32)], [1e-5])),
        (ops.swiglu, backbone.swiglu, lambda: ([torch.randn(4, 7, 64)], [])),
        (lambda x, angles: ops.rotary(x, ops.rope_rotation(angles)), backbone.rotary, rotary_case),
    ],
    ids=["rms_norm", "swiglu", "rotary"],
)
def test_each_fast_op_computes_the_references_values_and_gradients(fast, ref, make):
    inputs, constants = make()
    inputs = [t.requires_grad_() for t in inputs]
    out, expected = fast(*inputs, *constants), ref(*inputs, *constants)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, inputs, grad), torch.autograd.grad(expected, inputs, grad))


def test_rms_norm_keeps_bf16_activations_and_computes_statistics_in_fp32():
    x = (torch.randn(2, 3, 64) * 1e3).to(torch.bfloat16).requires_grad_()
    weight = torch.ones(64, dtype=torch.bfloat16, requires_grad=True)
    y = ops.rms_norm(x, weight, 1e-5)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, backbone.rms_norm(x, weight, 1e-5), atol=1e-2, rtol=1e-2)
    y.sum().backward()
    assert x.grad.dtype == torch.bfloat16 and weight.grad.dtype == torch.bfloat16


def test_a_frozen_norm_weight_gets_no_gradient():
    x = torch.randn(2, 3, 8, requires_grad=True)
    weight = torch.ones(8)
    ops.rms_norm(x, weight, 1e-5).sum().backward()
    assert x.grad is not None and weight.grad is None


def test_under_torch_compile_the_block_runs_the_reference_forms(monkeypatch):
    block = Block(config())
    x, angles = torch.randn(2, 12, 32), backbone.rope_angles(12, 16, 10000.0, "cpu")
    with reference():
        expected = block(x, angles)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert not ops.usable() and not kernels.usable(x)
    assert torch.equal(block(x, angles), expected)


# The whole block: eager fast ops, then the fused kernel, against the reference.


def block_step(block, x, rope, weights):
    return lambda: (block(x, rope) * weights).mean()


def block_case(shape, rows):
    cfg = config(**shape)
    block = Block(cfg)
    for p in block.parameters():  # away from the init's ones and zeros: every term counts
        p.data.add_(torch.randn_like(p) * 0.1)
    x = torch.randn(*rows, cfg.d_model, requires_grad=True)
    angles = backbone.rope_angles(rows[1], cfg.head_dim, cfg.rope_theta, "cpu")
    return block, x, angles, torch.randn(*rows, cfg.d_model)


def reference_block(block, x, angles, weights):
    with reference():
        return values_and_grads(block, [x], block_step(block, x, angles, weights))


SHAPES = [
    dict(d_model=16, n_heads=2, ffn_dim=48),  # heads of 8: the smallest study sizes
    dict(d_model=24, n_heads=2, ffn_dim=64),  # heads of 12: not a multiple of the vector width
    dict(d_model=48, n_heads=3, n_kv_heads=3, ffn_dim=136, n_layers=3),
    dict(d_model=64, n_heads=1, n_kv_heads=1, ffn_dim=176),
]


@pytest.mark.parametrize("shape", [*SHAPES, dict(n_kv_heads=1, qkv_bias=True)])
def test_the_eager_fast_ops_compute_the_reference_blocks_values_and_gradients(shape):
    block, x, angles, weights = block_case(shape, (3, 17))
    expected = reference_block(block, x, angles, weights)
    with kernels.disabled():
        fast = values_and_grads(block, [x], block_step(block, x, ops.rope_rotation(angles), weights))
    torch.testing.assert_close(fast[0], expected[0], rtol=1e-5, atol=1e-6)
    assert_close_relative(fast[1], expected[1], rtol=1e-5)


@needs_kernels
@pytest.mark.parametrize("shape", SHAPES)
# (batch, positions); 260: past explicit attention, the flash kernel
@pytest.mark.parametrize("rows", [(4, 64), (3, 17), (2, 200), (1, 260)])
def test_the_fused_kernel_computes_the_reference_blocks_values_and_gradients(shape, rows):
    block, x, angles, weights = block_case(shape, rows)
    expected = reference_block(block, x, angles, weights)
    assert kernels.usable(x) and block.fusable
    fused = values_and_grads(block, [x], block_step(block, x, ops.rope_rotation(angles), weights))
    torch.testing.assert_close(fused[0], expected[0], rtol=1e-5, atol=1e-6)
    assert_close_relative(fused[1], expected[1], rtol=1e-5)


@needs_kernels
@pytest.mark.parametrize("family", ["text_image", "text_graph"])
@pytest.mark.parametrize("length", [None, 260])  # the family's tokens; 260: past explicit attention, the flash kernel
def test_the_fused_encoder_block_computes_the_modules_values_and_gradients(family, length):
    from prism.core.families import family_spec
    from prism.model.encoders import build_encoder

    spec = family_spec(family)
    block = build_encoder(spec).blocks[0]
    x = torch.randn(5, length or spec.n_modality_tokens, spec.encoder_width, requires_grad=True)
    weights = torch.randn_like(x)
    step = lambda: (block(x) * weights).mean()  # noqa: E731
    fused = values_and_grads(block, [x], step)
    with reference():
        expected = values_and_grads(block, [x], step)
    torch.testing.assert_close(fused[0], expected[0], rtol=1e-5, atol=1e-6)
    assert_close_relative(fused[1], expected[1], rtol=1e-5)


@needs_kernels
def test_the_whole_model_trains_the_same_step_with_every_form(built):
    from prism.data.loader import ShardLoader

    batch = next(iter(ShardLoader(built("text_image"), "train", 8, 0, family="text_image")))
    inputs = tuple(torch.as_tensor(batch[k]) for k in ("tokens", "modality", "labels"))
    model = build_model("text_image", "n32e3", "BASE", "e2e")
    step = lambda: model(*inputs)  # noqa: E731
    fused = values_and_grads(model, [], step)
    with kernels.disabled():
        fast = values_and_grads(model, [], step)
    with reference():
        expected = values_and_grads(model, [], step)
    for form in (fused, fast):
        torch.testing.assert_close(form[0], expected[0], rtol=1e-6, atol=1e-6)
        assert_close_relative(form[1], expected[1], rtol=1e-5)


@needs_kernels
def test_packed_rows_take_the_modules_path():
    model = Backbone(config())
    tokens = torch.randint(0, 256, (2, 12))
    segments = torch.tensor([[1] * 5 + [2] * 7, [1] * 12])
    with kernels.disabled():
        packed_reference = model(tokens, segments)
    assert torch.equal(model(tokens, segments), packed_reference)  # block-diagonal masks: not fused

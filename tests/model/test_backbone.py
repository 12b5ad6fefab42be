import pytest
import torch

from prism.model.backbone import Attention, Backbone, apply_rope, rope_angles, segment_mask
from prism.model.config import BACKBONES, BackboneConfig


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tiny(**kw) -> BackboneConfig:
    base = dict(name="tiny", d_model=32, n_layers=2, n_heads=4, n_kv_heads=4, ffn_dim=64, vocab_size=264)
    return BackboneConfig(**{**base, **kw})


def test_logits_shape_and_causality():
    model = Backbone(tiny())
    tokens = torch.randint(0, 256, (2, 10))
    logits = model(tokens)
    assert logits.shape == (2, 10, 264)
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 256
    later = model(changed)
    torch.testing.assert_close(logits[:, :6], later[:, :6])
    assert not torch.allclose(logits[:, 6:], later[:, 6:])


def test_segment_mask_is_block_diagonal_causal():
    seg = torch.tensor([[1, 1, 2, 2, 2, 0]])
    mask = segment_mask(seg)[0, 0]
    assert mask.shape == (6, 6)
    assert mask[1, 0] and not mask[0, 1]  # causal within a sample
    assert not mask[2, 1] and mask[4, 2]  # the second sample does not see the first
    assert mask[5, 5] and not mask[5, 4]  # padding sees only padding, never an empty row
    assert mask.any(-1).all()


def test_one_segment_per_row_is_plain_causal_attention():
    model = Backbone(tiny(n_kv_heads=2))
    tokens = torch.randint(0, 256, (2, 10))
    torch.testing.assert_close(model(tokens, torch.ones(2, 10, dtype=torch.long)), model(tokens))


def test_a_later_segment_is_independent_of_the_earlier_one():
    model = Backbone(tiny())
    tokens = torch.randint(0, 256, (1, 10))
    seg = torch.tensor([[1] * 4 + [2] * 6])
    changed = tokens.clone()
    changed[0, :4] = (changed[0, :4] + 1) % 256
    torch.testing.assert_close(model(tokens, seg)[:, 4:], model(changed, seg)[:, 4:])
    assert not torch.allclose(model(tokens)[:, 4:], model(changed)[:, 4:])


def test_gqa_shapes_and_equivalence_to_repeated_heads():
    gqa = Attention(tiny(n_heads=4, n_kv_heads=2))
    assert gqa.qkv.weight.shape == ((4 + 2 * 2) * 8, 32)
    mha = Attention(tiny(n_heads=4, n_kv_heads=4))
    q, k, v = gqa.qkv.weight.split((32, 16, 16))
    repeat = lambda w: w.view(2, 8, 32).repeat_interleave(2, dim=0).reshape(32, 32)  # noqa: E731
    with torch.no_grad():
        mha.qkv.weight.copy_(torch.cat((q, repeat(k), repeat(v))))
        mha.o.weight.copy_(gqa.o.weight)
    x = torch.randn(3, 7, 32)
    angles = rope_angles(7, 8, 10000.0, x.device)
    torch.testing.assert_close(gqa(x, angles), mha(x, angles))


def test_rope_is_a_rotation_that_depends_on_relative_position():
    angles = rope_angles(12, 16, 10000.0, "cpu")
    q, k = torch.randn(16), torch.randn(16)
    rq = apply_rope(q.expand(1, 12, 1, 16), angles)[0, :, 0]
    rk = apply_rope(k.expand(1, 12, 1, 16), angles)[0, :, 0]
    torch.testing.assert_close(rq.norm(dim=-1), q.norm().expand(12))
    # <R_m q, R_n k> depends only on m - n.
    torch.testing.assert_close(rq[5] @ rk[2], rq[9] @ rk[6])
    assert not torch.allclose(rq[5] @ rk[2], rq[5] @ rk[4])
    torch.testing.assert_close(rq[0], q)  # position 0 is not rotated


def test_blocks_compiled_one_by_one_get_the_angles_and_compute_the_same(monkeypatch):
    """`prism train --compile` compiles each block: the blocks then take the rotary angles (inductor
    fuses their real form); the logits are the eager model's to rounding."""
    model = Backbone(tiny())
    tokens = torch.randint(0, 264, (2, 12))
    eager = model(tokens)
    seen = []
    monkeypatch.setattr("prism.model.backbone.apply_rope", lambda x, rope: seen.append(rope.is_complex()) or x)
    model.blocks_compiled = True
    model(tokens)
    assert seen and not any(seen)
    monkeypatch.undo()
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)  # the real form, as inside a compiled block
    torch.testing.assert_close(model(tokens), eager)


def test_tied_and_untied_embeddings():
    tied, untied = Backbone(tiny(tie_embeddings=True)), Backbone(tiny(tie_embeddings=False))
    assert tied.lm_head.weight is tied.embed_tokens.weight
    assert untied.lm_head.weight is not untied.embed_tokens.weight
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(untied) - n(tied) == 264 * 32


def test_qkv_bias():
    assert Backbone(tiny(qkv_bias=True)).blocks[0].attn.qkv.bias is not None
    assert Backbone(tiny()).blocks[0].attn.qkv.bias is None


@pytest.mark.parametrize("name", list(BACKBONES))
def test_config_params_match_the_module(name):
    device = "cpu" if BACKBONES[name].is_small else "meta"
    with torch.device(device):
        model = Backbone(BACKBONES[name])
    assert sum(p.numel() for p in model.parameters()) == BACKBONES[name].params


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="n_kv_heads"):
        tiny(n_heads=4, n_kv_heads=3)

import pytest
import torch

from prism.core.errors import PrismError
from prism.model.accounting import count_training_flops, example_batch, input_embedding_params, param_counts
from prism.model.config import BACKBONES, VARIANTS
from prism.model.prism import build_model


def test_param_counts_by_component():
    model = build_model("text_image", "60k", "W2X", "projector_only")
    counts = param_counts(model)
    assert counts["backbone"] == {"total": BACKBONES["60k"].params, "trainable": 0}
    assert counts["encoder"]["trainable"] == 0 < counts["encoder"]["total"]
    assert counts["projector"]["trainable"] == counts["projector"]["total"] > 0
    assert sum(c["total"] for c in counts.values()) == sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def flops_7b():
    out = {}
    for regime in ("e2e", "projector_only"):
        model = build_model("text_image", "7b", "BASE", regime, device="meta")
        out[regime] = (model, count_training_flops(model))
    return out


def test_7b_e2e_flops_close_to_6nd_without_the_embedding_lookup(flops_7b):
    model, flops = flops_7b["e2e"]
    n = sum(c["total"] for c in param_counts(model).values()) - input_embedding_params(model)
    ratio = flops / (6 * n * model.family.tokens_per_sample)
    assert 0.95 <= ratio <= 1.5


def test_7b_frozen_backbone_pays_no_weight_gradients(flops_7b):
    ratio = flops_7b["projector_only"][1] / flops_7b["e2e"][1]
    assert 0.55 <= ratio <= 0.8


def test_meta_count_equals_a_real_cpu_count():
    real = build_model("text_ts", "30k", "D2X", "encoder_projector")
    meta = build_model("text_ts", "30k", "D2X", "encoder_projector", device="meta")
    assert count_training_flops(real) == count_training_flops(meta) > 0
    assert all(p.grad is None for p in real.parameters())  # counting leaves the real model untouched


def test_attention_is_counted_once_per_score_matrix():
    """Forward QK^T and AV are 4*L^2*d per layer; the backward doubles it (both operands are activations)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model("text_ts", "30k", "BASE", "e2e", device="meta")
    with FlopCounterMode(display=False) as counter:
        model(*example_batch(model)).backward()
    bmm = sum(v for k, v in counter.get_flop_counts()["Global"].items() if "bmm" in str(k))
    cfg, spec = model.backbone_config, model.family
    backbone = 3 * 4 * spec.tokens_per_sample**2 * cfg.d_model * cfg.n_layers
    encoder = 3 * 4 * spec.n_modality_tokens**2 * spec.encoder_width * len(model.encoder.blocks)
    assert bmm == backbone + encoder


def test_regimes_order_flops_and_longer_sequences_cost_more():
    f = {
        r: count_training_flops(build_model("text_graph", "120k", "BASE", r, device="meta"))
        for r in ("projector_only", "encoder_projector", "e2e")
    }
    assert f["projector_only"] < f["encoder_projector"] < f["e2e"]
    model = build_model("text_graph", "120k", "BASE", "e2e", device="meta")
    assert count_training_flops(model, seq_len=128) > count_training_flops(model)


def test_projector_ladder_is_monotone():
    sizes = {
        v: param_counts(build_model("text_image", "1b", v, "projector_only", device="meta"))["projector"]["trainable"]
        for v in VARIANTS
    }
    assert sizes["BASE"] < sizes["W2X"] < sizes["W4X"]
    assert sizes["BASE"] < sizes["D2X"] < sizes["D4X"]


def test_example_batch_layout():
    model = build_model("text_image", "30k", "BASE", "e2e")
    tokens, modality, labels = example_batch(model, seq_len=70, batch_size=2)
    spec = model.family
    assert tokens.shape == labels.shape == (2, 70) and modality.shape == (2, *spec.modality_shape)
    assert (tokens[:, spec.tokens_per_sample :] == 256).all()
    with pytest.raises(PrismError, match="is shorter than a text_image row needs"):
        example_batch(model, seq_len=spec.n_modality_tokens)
    assert torch.isfinite(model(tokens, modality, labels))

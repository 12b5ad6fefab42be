import pytest

from prism.core.errors import PrismError
from prism.model.config import (
    BACKBONES,
    REGIMES,
    SMALL_BACKBONES,
    VARIANTS,
    backbone_config,
    projector_variant,
    regime_parts,
)


@pytest.mark.parametrize("name,published", [("1b", 1.24e9), ("7b", 6.74e9), ("32b", 32.8e9)])
def test_real_sizes_match_published_counts(name, published):
    assert abs(BACKBONES[name].params / published - 1) < 0.01


@pytest.mark.parametrize("name", SMALL_BACKBONES)
def test_small_ladder_named_by_non_embedding_params(name):
    target = float(name[:-1]) * (1e3 if name.endswith("k") else 1e6)
    assert abs(BACKBONES[name].non_embedding_params / target - 1) < 0.15


def test_small_ladder_is_increasing_and_reaches_below_100k():
    sizes = [BACKBONES[n].non_embedding_params for n in SMALL_BACKBONES]
    assert sizes == sorted(sizes) and sizes[0] < 50_000 and sizes[1] < 100_000


def test_small_backbones_use_efficient_head_dims():
    for name in SMALL_BACKBONES:
        assert 16 <= BACKBONES[name].head_dim <= 64


def test_registries():
    assert list(VARIANTS) == ["BASE", "W2X", "W4X", "D2X", "D4X"]
    assert [(v.width_mult, v.n_layers) for v in VARIANTS.values()] == [(1, 2), (2, 2), (4, 2), (1, 4), (1, 8)]
    assert list(REGIMES) == ["projector_only", "encoder_projector", "e2e"]
    assert BACKBONES["32b"].qkv_bias and BACKBONES["32b"].n_kv_heads == 8 and not BACKBONES["32b"].tie_embeddings
    assert BACKBONES["1b"].tie_embeddings and BACKBONES["7b"].n_kv_heads == BACKBONES["7b"].n_heads


@pytest.mark.parametrize(
    "lookup,kind", [(backbone_config, "backbone"), (projector_variant, "projector variant"), (regime_parts, "regime")]
)
def test_unknown_names_list_valid_ones(lookup, kind):
    with pytest.raises(PrismError, match=f"unknown {kind} 'nope'; valid: "):
        lookup("nope")


def test_config_module_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, prism.model.config, prism.model.listing; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

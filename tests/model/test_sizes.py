import math

import pytest

from prism.core.errors import PrismError
from prism.model.config import BACKBONES, VARIANTS, backbone_config, backbone_shape, check_backbone, projector_variant
from prism.model.sizes import RULES, rule_grid, rule_name, rule_target

LADDERS = {"n": (1e4, 1e8), "g": (1e8, 1e11)}


@pytest.mark.parametrize("prefix", list(RULES))
def test_every_size_lands_within_3_percent_of_its_name(prefix):
    lo, hi = LADDERS[prefix]
    names = rule_grid(prefix, lo, hi)
    assert len(names) >= 20 * math.log10(hi / lo)  # 20 a decade, none lost to the two-digit names
    for name in names:
        cfg = backbone_config(name)
        _, target = rule_target(name)
        assert abs(cfg.params / target - 1) < 0.03, (name, cfg)
        assert cfg.ffn_dim % RULES[prefix].ffn_multiple == 0


@pytest.mark.parametrize("prefix", list(RULES))
def test_heads_are_about_the_rules_head_dim_and_never_fewer_than_its_minimum(prefix):
    rule = RULES[prefix]
    for name in rule_grid(prefix, *LADDERS[prefix]):
        cfg = backbone_config(name)
        assert cfg.n_heads >= rule.min_heads and cfg.head_dim % 2 == 0, cfg
        if cfg.d_model >= rule.min_heads * rule.head_dim:
            assert rule.head_dim / 2 <= cfg.head_dim <= 2 * rule.head_dim, cfg
        else:  # narrower than the minimum of full-width heads: the minimum, narrower
            assert cfg.n_heads == rule.min_heads, cfg
    if prefix == "g":
        assert {backbone_config(n).head_dim for n in rule_grid(prefix, *LADDERS[prefix])} == {128}


def test_the_cpu_sizes_have_two_heads():
    """The default study's range: two heads whatever the width (attention on a CPU pays per head)."""
    assert {backbone_config(n).n_heads for n in rule_grid("n", 8e3, 2.2e5)} == {2}


@pytest.mark.parametrize("prefix", list(RULES))
def test_the_rule_is_monotone_in_n(prefix):
    configs = [backbone_config(n) for n in rule_grid(prefix, *LADDERS[prefix])]
    for a, b in zip(configs, configs[1:]):
        assert a.params < b.params
        assert a.d_model <= b.d_model and a.n_layers <= b.n_layers, (a, b)


def test_depth_follows_width_by_the_aspect_ratio():
    for prefix, (lo, hi) in LADDERS.items():
        rule = RULES[prefix]
        for name in rule_grid(prefix, lo, hi):
            cfg = backbone_config(name)
            assert cfg.n_layers == max(rule.min_layers, round(cfg.d_model / rule.aspect))


def test_the_7b_registry_shape_is_the_rules_size_of_its_n():
    """Llama-2-7B follows Llama-2's proportions; the g rule gives its shape from its N (only the vocabulary differs)."""
    seven = BACKBONES["7b"]
    rule = RULES["g"]
    from prism.model.sizes import rule_shape

    shape = rule_shape(rule, seven.non_embedding_params + rule.vocab_size * seven.d_model)
    assert shape == backbone_shape("7b")


def test_names_have_one_spelling_and_round_trip():
    assert rule_name("n", 31_623) == "n32e3"
    assert rule_name("g", 7e9) == "g7e9"
    assert rule_name("n", 1e5) == "n1e5"
    assert rule_name("n", 99_700) == "n1e5"
    for name in rule_grid("n", 1e4, 1e6):
        assert rule_name("n", rule_target(name)[1]) == name
    with pytest.raises(PrismError, match="write n3e4"):
        check_backbone("n30e3")
    with pytest.raises(PrismError, match="rule size such as n32e3"):
        check_backbone("n3.2e4")
    assert check_backbone("n32e3") == "n32e3"


def test_rule_sizes_are_small_on_the_cpu_side_only():
    assert backbone_config("n32e3").is_small and not backbone_config("g1e9").is_small


def test_projector_rule_extends_the_registry_variants():
    assert projector_variant("W8X").width_mult == 8 and projector_variant("W8X").n_layers == 2
    assert projector_variant("D8X").width_mult == 1 and projector_variant("D8X").n_layers == 16
    # The registry's variants are the rule's at k = 2 and 4.
    for name, v in VARIANTS.items():
        if name != "BASE":
            from prism.model.sizes import variant_multipliers

            assert variant_multipliers(name) == (v.width_mult, v.n_layers)
    for bad in ("W1X", "D0X", "W8", "X8X"):
        with pytest.raises(PrismError, match="W<k>X"):
            projector_variant(bad)


def test_a_rule_size_builds_the_model_it_counts():
    torch = pytest.importorskip("torch")
    from prism.model.accounting import param_counts
    from prism.model.prism import build_model

    model = build_model("text_image", "n45e3", "W8X", "e2e")
    assert param_counts(model)["backbone"]["total"] == backbone_config("n45e3").params
    loss = model(torch.full((2, 64), 65), torch.zeros(0, 1, 8, 8), torch.full((2, 64), 66))
    assert torch.isfinite(loss)


def test_a_name_below_the_rules_smallest_size_is_refused_naming_it():
    with pytest.raises(PrismError, match="sizes start at n89e2"):
        check_backbone("n5e3")

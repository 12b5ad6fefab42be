"""The FLOP formulas are the meta device's count: every family, size, variant and regime a plan can hold."""

import itertools
from dataclasses import replace

import pytest

from prism.core.families import (
    FAMILIES,
    FamilySpec,
    family_bundle,
    family_spec,
    register_family,
    resolve_spec,
    unregister_family,
)
from prism.model.config import BACKBONES, REGIMES
from prism.model.flopcount import training_flops
from prism.model.sizes import rule_grid

pytest.importorskip("torch")

VARIANTS = ("BASE", "W2X", "W4X", "D2X", "D4X", "W8X", "D8X")


def counted(family: str, backbone: str, variant: str, regime: str, spec: FamilySpec | None = None) -> int:
    from prism.model.accounting import count_training_flops
    from prism.model.prism import build_model

    return count_training_flops(build_model(family, backbone, variant, regime, device="meta", spec=spec))


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("regime", list(REGIMES))
def test_every_family_variant_and_regime(family, regime):
    for backbone, variant in itertools.product(("n45e3", "30k"), VARIANTS):
        assert training_flops(family_spec(family), backbone, variant, regime) == counted(
            family, backbone, variant, regime
        ), (backbone, variant)


@pytest.mark.slow
@pytest.mark.parametrize("regime", list(REGIMES))
def test_every_registry_and_rule_size(regime):
    """Registry sizes of every kind (one head, grouped-query: 1b, 32b; untied: 7b; q/k/v bias: 32b) and the
    shape rules' grids, whose shapes change with N, over the sizes a study's window can pick."""
    spec = family_spec("text_graph")
    for backbone in [*BACKBONES, *rule_grid("n", 1e4, 1e9)[::3], *rule_grid("g", 1e8, 1e10)[::4]]:
        assert training_flops(spec, backbone, "BASE", regime) == counted(spec.name, backbone, "BASE", regime), backbone


@pytest.mark.parametrize(
    "family, shape",
    [
        ("text_image", {"image_size": 64, "channels": 3, "patch": 8, "text_len": 100}),
        ("text_video", {"image_size": 32, "channels": 3, "patch": 8, "frames": 2}),
        ("text_ts", {"text_len": 20}),
    ],
)
def test_a_studys_shape_and_tokenizer(family, shape, bpe_file):
    spec = resolve_spec(family, shape, str(bpe_file))
    for regime in REGIMES:
        assert training_flops(spec, "n32e3", "W2X", regime) == counted(family, "n32e3", "W2X", regime, spec)
    assert training_flops(spec, "n32e3", "BASE", "e2e", seq_len=spec.tokens_per_sample + 9) > training_flops(
        spec, "n32e3", "BASE", "e2e"
    )


def test_a_family_without_formulas_is_counted_on_the_meta_device():
    from prism.isoflop.design.candidates import counted_record

    image = family_bundle("text_image")
    sketch = replace(image, spec=replace(image.spec, name="text_sketch"), flops="")
    register_family(sketch)
    try:
        assert training_flops(sketch.spec, "n32e3", "BASE", "e2e") is None
        record = counted_record("text_sketch", "n32e3", "BASE", "e2e")
        assert record["flops_per_sample"] == training_flops(image.spec, "n32e3", "BASE", "e2e")
        assert record["torch_version"]  # the calibration record, counted with torch
    finally:
        unregister_family("text_sketch")

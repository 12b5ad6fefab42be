import pytest

from prism.core.families import FAMILIES
from prism.model.paramcount import component_params, trainable_params

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("backbone, variant", [("n45e3", "BASE"), ("30k", "W4X"), ("n1e5", "D8X")])
def test_counts_without_torch_are_the_built_models(family, backbone, variant):
    from prism.model.accounting import param_counts
    from prism.model.prism import build_model

    model = build_model(family, backbone, variant, "e2e", device="meta")
    assert component_params(family, backbone, variant) == {k: v["total"] for k, v in param_counts(model).items()}


def test_trainable_counts_follow_the_regime():
    parts = component_params("text_image", "n45e3", "BASE")
    assert trainable_params("text_image", "n45e3", "BASE", "e2e") == sum(parts.values())
    assert trainable_params("text_image", "n45e3", "BASE", "projector_only") == parts["projector"]


def test_the_shape_and_the_tokenizer_are_counted(bpe_file):
    """The configured shape changes the encoder's patch embedding and the FLOPs per sample; the tokenizer's
    vocabulary sets the embedding rows, counted in N, for rule and registry sizes alike."""
    from prism.core.families import resolve_spec
    from prism.model.accounting import count_training_flops
    from prism.model.config import backbone_config
    from prism.model.prism import build_model

    base_n = trainable_params("text_image", "n32e3", "BASE", "e2e")
    base_flops = count_training_flops(build_model("text_image", "30k", "BASE", "e2e", device="meta"))
    spec = resolve_spec("text_image", {"image_size": 64, "channels": 3, "patch": 8}, str(bpe_file))
    model = build_model("text_image", "30k", "BASE", "e2e", device="meta", spec=spec)
    assert model.backbone.embed_tokens.weight.shape[0] == spec.vocab.rows
    assert model.encoder.patch.weight.shape[1:] == (3, 8, 8)
    assert sum(p.numel() for p in model.parameters()) == sum(
        component_params("text_image", "30k", "BASE", spec).values()
    )
    assert count_training_flops(model) > base_flops  # 64 image tokens a sample, not 16
    rule = backbone_config("n32e3", spec.vocab.rows)
    assert rule.vocab_size == spec.vocab.rows and trainable_params("text_image", "n32e3", "BASE", "e2e", spec) != base_n
    assert backbone_config("1b", spec.vocab.rows).vocab_size == spec.vocab.rows  # not its published 128256
    # Nothing is left behind: without the spec, the laptop default.
    assert trainable_params("text_image", "n32e3", "BASE", "e2e") == base_n
    assert build_model("text_image", "30k", "BASE", "e2e", device="meta").encoder.patch.weight.shape[1:] == (1, 2, 2)

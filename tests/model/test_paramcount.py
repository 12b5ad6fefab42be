import pytest

from prism.families import FAMILIES
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

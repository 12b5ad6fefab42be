"""What the plan reads besides calibrations (prism/isoflop/design/planinputs.py)."""

import pytest

from prism.core.errors import PrismError


def test_a_plan_refuses_data_made_at_another_shape_naming_the_key(tmp_path):
    import json

    from prism.core.families import resolve_spec
    from prism.isoflop.design.planinputs import check_data_spec

    manifest = {"family": "text_image", "modality_shape": [1, 8, 8], "n_modality_tokens": 16, "text_len": 48}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    check_data_spec("text_image", tmp_path)  # the default shape: the data's
    study = resolve_spec("text_image", {"image_size": 64, "channels": 3, "patch": 8})
    with pytest.raises(PrismError, match=r"made at shapes.text_image.image_size 8, the study asks for 64"):
        check_data_spec("text_image", tmp_path, study)

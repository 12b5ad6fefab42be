"""Family shapes and the captions' tokenizer as configuration: one resolved spec, checked in one line."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.core.families import (
    FAMILIES,
    check_same_spec,
    default_shape,
    family_spec,
    resolve_spec,
    spec_flags,
    study_specs,
)

RGB64 = {"image_size": 64, "channels": 3, "patch": 8, "text_len": 24}


def test_an_image_shape_gives_its_patches_and_tokens():
    spec = resolve_spec("text_image", RGB64)
    assert spec.modality_shape == (3, 64, 64)
    assert spec.n_modality_tokens == 64  # (64 / 8)^2
    assert spec.tokens_per_sample == 64 + 24
    video = resolve_spec("text_video", {"image_size": 32, "patch": 8, "frames": 6})
    assert video.modality_shape == (6, 1, 32, 32) and video.n_modality_tokens == 6 * 16


def test_no_shape_is_the_laptop_default_and_its_jobs_get_no_flags():
    for name in FAMILIES:
        assert resolve_spec(name) == FAMILIES[name]
        assert spec_flags(resolve_spec(name, {}, "bytes")) == []
    assert default_shape("text_image") == {"image_size": 8, "channels": 1, "patch": 2, "text_len": 48}
    assert resolve_spec("text_image", default_shape("text_image")) == FAMILIES["text_image"]


def test_a_study_resolves_its_specs_and_gives_only_the_changed_keys_as_flags():
    specs = study_specs({"text_image": {"image_size": 64, "channels": 3, "patch": 8}}, "bytes")
    assert spec_flags(specs["text_image"]) == ["--image-size", "64", "--channels", "3", "--patch", "8"]
    assert spec_flags(specs["text_ts"]) == [] and specs["text_ts"] == FAMILIES["text_ts"]
    assert family_spec("text_image", specs["text_image"]).n_modality_tokens == 64  # what a consumer is handed
    # Nothing is installed anywhere: a consumer given no spec counts with the laptop default.
    assert family_spec("text_image") == FAMILIES["text_image"]
    with pytest.raises(PrismError, match="family 'text_ts' was given the spec of family 'text_image'"):
        family_spec("text_ts", specs["text_image"])


@pytest.mark.parametrize(
    ("family", "shape", "said"),
    [
        ("text_image", {"image_size": 60, "patch": 8}, "shapes.text_image.image_size 60 is not divisible"),
        ("text_image", {"channels": 2}, "shapes.text_image.channels: 2 is not 1 (grey) or 3 (RGB)"),
        ("text_image", {"text_len": 2}, "shapes.text_image.text_len must be >= 3"),
        ("text_ts", {"image_size": 32}, "shapes.text_ts: unknown key(s) image_size"),
        ("text_image", {"frames": 4}, "shapes.text_image: unknown key(s) frames"),
    ],
)
def test_a_bad_shape_is_one_line_naming_the_key(family, shape, said):
    with pytest.raises(PrismError, match="^" + said.replace("(", r"\(").replace(")", r"\)")):
        resolve_spec(family, shape)


def test_an_unknown_family_in_shapes_is_refused():
    with pytest.raises(PrismError, match="shapes: unknown family text_imag"):
        study_specs({"text_imag": {"text_len": 8}}, "bytes")


def test_a_missing_or_broken_tokenizer_file_is_one_line_naming_the_key(tmp_path):
    with pytest.raises(PrismError, match=r"^data.tokenizer: .*nope.json does not exist"):
        resolve_spec("text_image", None, str(tmp_path / "nope.json"))
    broken = tmp_path / "broken.json"
    broken.write_text('{"not": "a tokenizer"}')
    with pytest.raises(PrismError, match=r"^data.tokenizer: .*broken.json is not a Hugging Face tokenizers JSON"):
        resolve_spec("text_image", None, str(broken))


def test_data_at_another_shape_or_tokenizer_is_refused_naming_the_key(bpe_file):
    study = resolve_spec("text_image", RGB64)
    with pytest.raises(PrismError, match="shapes.text_image.image_size 8, the study asks for 64"):
        check_same_spec(study, FAMILIES["text_image"], "data D")
    with pytest.raises(PrismError, match="tokenized with bytes, the study's data.tokenizer is a tokenizer file"):
        check_same_spec(resolve_spec("text_image", RGB64, str(bpe_file)), study, "data D")
    check_same_spec(study, resolve_spec("text_image", RGB64), "data D")

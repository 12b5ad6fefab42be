"""The family bundle: a new modality family is one module (its source, encoder, parameter count and
decoding, here this one) and one registration, and every stage finds its part there."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from prism.core.errors import PrismError
from prism.core.families import (
    FAMILIES,
    Family,
    FamilySpec,
    ImageShape,
    family_bundle,
    family_spec,
    register_family,
    resolve_spec,
    shape_keys,
    spec_flags,
    unregister_family,
)
from prism.data.index import BadSample, decode_sample
from prism.data.sources import Sample, source_module
from prism.model.paramcount import component_params

torch = pytest.importorskip("torch")

from prism.model.encoders import Encoder  # noqa: E402 after the torch skip

# ---- the toy family's one module: four numbers a sample, two tokens -------------------------

SOURCE = "four numbers counted up from the seed"
SPEC = FamilySpec("text_toy", (4,), 2, 32, 16, SOURCE)


def versions() -> dict[str, str]:
    return {}


def samples(seed: int) -> Iterator[Sample]:
    for i in range(3):
        values = np.arange(4, dtype=np.float32) + seed + i
        yield Sample(f"toy-{i}", 0, values, f"from {values[0]:g}")


class ToyEncoder(Encoder):
    """`[S, 4]` -> two tokens of two numbers each, one linear layer."""

    def __init__(self, spec: FamilySpec):
        super().__init__(spec)
        self.linear = torch.nn.Linear(2, spec.encoder_width)

    def tokenize(self, x):
        return self.linear(x.view(x.shape[0], 2, 2))


def toy_tokenizer(spec: FamilySpec) -> int:
    return 2 * spec.encoder_width + spec.encoder_width


def decode(members: dict[str, bytes], spec: FamilySpec) -> np.ndarray:
    """Four comma-separated numbers in a `.csv` member."""
    if "csv" not in members:
        raise BadSample("no .csv numbers")
    return np.array([float(v) for v in members["csv"].decode().split(",")], np.float32).reshape(spec.modality_shape)


TOY = Family(SPEC, __name__, f"{__name__}:ToyEncoder", f"{__name__}:toy_tokenizer", f"{__name__}:decode")

# ---- the registration, and what each stage makes of it --------------------------------------


@pytest.fixture
def toy():
    yield register_family(TOY)
    unregister_family(TOY.name)


def test_every_stage_finds_the_registered_family(toy):
    assert FAMILIES["text_toy"] is SPEC and family_spec("text_toy") is SPEC
    assert resolve_spec("text_toy").tokens_per_sample == 18
    # the data: its source and its decoding
    assert [s.caption for s in source_module("text_toy").samples(1)] == ["from 1", "from 2", "from 3"]
    caption, _, array = decode_sample({"txt": b"hello", "csv": b"1,2,3,4"}, SPEC)
    assert caption == "hello" and array.tolist() == [1, 2, 3, 4]
    with pytest.raises(BadSample, match="no .csv"):
        decode_sample({"txt": b"hello"}, SPEC)
    # the model: its encoder, and the count without torch equals the built model's
    from prism.model.accounting import param_counts
    from prism.model.prism import build_model

    model = build_model("text_toy", "n45e3", "BASE", "e2e", device="meta")
    assert isinstance(model.encoder, ToyEncoder)
    assert component_params("text_toy", "n45e3", "BASE") == {k: v["total"] for k, v in param_counts(model).items()}


def test_a_family_is_registered_once_and_an_unknown_one_names_the_known():
    with pytest.raises(PrismError, match="registered already"):
        register_family(Family(family_spec("text_ts"), "x", "x:y", "x:y", "x:y"))
    with pytest.raises(PrismError, match="text_image"):
        family_bundle("text_nothing")
    assert "text_toy" not in FAMILIES


def test_a_family_of_images_takes_its_shape_keys_from_its_bundle():
    # a second image family: the same parts as text_image, its own name; the keys come with ImageShape
    image = family_bundle("text_image")
    sketch = Family(
        FamilySpec("text_sketch", (1, 8, 8), 16, 32, 48, "digits again"),
        image.source,
        image.encoder,
        image.params,
        image.decode,
        ImageShape(),
    )
    register_family(sketch)
    try:
        assert shape_keys("text_sketch") == ("image_size", "channels", "patch", "text_len")
        spec = resolve_spec("text_sketch", {"image_size": 32, "patch": 8, "channels": 3})
        assert (spec.modality_shape, spec.n_modality_tokens) == ((3, 32, 32), 16)
        assert spec_flags(spec) == ["--image-size", "32", "--channels", "3", "--patch", "8"]
        with pytest.raises(PrismError, match="not divisible by shapes.text_sketch.patch 5; .*e.g. 4"):
            resolve_spec("text_sketch", {"image_size": 32, "patch": 5})
    finally:
        unregister_family("text_sketch")
    # the toy family's bundle names no shape: text_len alone
    assert TOY.shape.keys == ("text_len",)

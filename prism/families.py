"""The modality families: what one sample of each looks like.

This is the contract between the data pipeline (which writes samples of these
shapes) and the model (whose encoder for a family reads them). Pure Python, no
torch, so the CLI and the planning maths can use it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism.errors import unknown_name


@dataclass(frozen=True)
class FamilySpec:
    """One modality family.

    `modality_shape` is the float32 array each sample carries (channels first);
    the family's encoder turns it into `n_modality_tokens` feature vectors of
    width `encoder_width`. `text_len` is the most text tokens a sample holds
    (caption bytes plus BOS/EOS); a padded sample is therefore
    `n_modality_tokens + text_len` tokens long.
    """

    name: str
    modality_shape: tuple[int, ...]
    n_modality_tokens: int
    encoder_width: int
    text_len: int
    source: str

    @property
    def tokens_per_sample(self) -> int:
        return self.n_modality_tokens + self.text_len


FAMILIES: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (
        # 8x8 grey digits, 2x2 patches -> 16 tokens.
        FamilySpec("text_image", (1, 8, 8), 16, 32, 48, "sklearn.datasets.load_digits"),
        # 3 channels x 64 steps, patches of 8 steps -> 8 tokens.
        FamilySpec("text_ts", (3, 64), 8, 32, 56, "sktime + statsmodels bundled series"),
        # adjacency of up to 16 nodes (zero-padded), one token per node slot.
        FamilySpec("text_graph", (16, 16), 16, 32, 48, "networkx graph atlas + named graphs"),
        # up to 32 standardised features (zero-padded), groups of 8 -> 4 tokens.
        FamilySpec("text_table", (32,), 4, 32, 60, "sklearn bundled tables"),
        # 4 frames of 8x8 (a digit moving), one 4x4 patch grid per frame -> 16 tokens.
        FamilySpec("text_video", (4, 1, 8, 8), 16, 32, 48, "sklearn digits, moved across frames"),
        # BabyAI 7x7 egocentric grid (object, colour, state), one token per row -> 7 tokens.
        FamilySpec("vla", (3, 7, 7), 7, 32, 57, "minigrid BabyAI levels + BabyAIBot expert"),
    )
}

# The families of the IsoFLOP studies (the per-modality sweep uses all of FAMILIES).
STUDY_FAMILIES: tuple[str, ...] = ("text_image", "text_ts", "text_graph")


def family_spec(name: str) -> FamilySpec:
    try:
        return FAMILIES[name]
    except KeyError:
        raise unknown_name("family", name, FAMILIES) from None

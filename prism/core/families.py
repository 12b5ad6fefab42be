"""The modality families: what one sample of each looks like, and where each stage's part of it lives.

This is the contract between the data pipeline (which writes samples of these
shapes) and the model (whose encoder for a family reads them). A family is one
bundle (`Family`: its spec, data source, encoder, parameter count and decoding),
registered once (`register_family`; the built-in ones below). Pure Python, no
torch, so the CLI and the planning maths can use it cheaply.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields, replace
from typing import ClassVar

from prism.core.errors import PrismError, unknown_name
from prism.core.options import check_field, option
from prism.core.tokenizer import BYTE_VOCAB, Vocab, load_vocab, vocab_from_record


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
    vocab: Vocab = field(default=BYTE_VOCAB)  # the captions' tokenizer: its ids set the embedding rows

    @property
    def tokens_per_sample(self) -> int:
        return self.n_modality_tokens + self.text_len


@dataclass(frozen=True)
class Shape:
    """How a family's sample is shaped by a study's `shapes.FAMILY` keys: this one, by `text_len` alone
    (the modality's own dimensions are fixed). A family whose modality has dimensions a study sets
    (`ImageShape`) says which keys they are, reads them off a spec and sets them on one."""

    keys: ClassVar[tuple[str, ...]] = ("text_len",)  # in the order a job's flags give them
    fixed_note: ClassVar[str] = " (its other dimensions are fixed)"

    def read(self, spec: FamilySpec) -> dict[str, int]:
        """`spec`'s shape as `shapes:` keys (what a manifest's fields mean)."""
        return {"text_len": spec.text_len}

    def check(self, name: str, shape: dict[str, int]) -> None:
        """Refuse keys that cannot go together (each key's own range is ShapeOptions')."""

    def apply(self, spec: FamilySpec, shape: dict[str, int]) -> FamilySpec:
        return spec


@dataclass(frozen=True)
class ImageShape(Shape):
    """Square images of `channels`, cut into patches (`(image_size/patch)^2` tokens an image); a clip
    of `frames` of them where `frames`."""

    frames: bool = False
    fixed_note: ClassVar[str] = ""

    @property
    def keys(self) -> tuple[str, ...]:  # type: ignore[override]  # frames only for a clip
        return ("image_size", "channels", "patch", "text_len") + (("frames",) if self.frames else ())

    def read(self, spec: FamilySpec) -> dict[str, int]:
        *frames, c, side, _ = spec.modality_shape
        per_frame = spec.n_modality_tokens // (frames[0] if frames else 1)
        out = {"image_size": side, "channels": c, "patch": side // round(per_frame**0.5), "text_len": spec.text_len}
        return out | ({"frames": frames[0]} if frames else {})

    def check(self, name: str, shape: dict[str, int]) -> None:
        if shape["channels"] not in (1, 3):
            raise PrismError(f"shapes.{name}.channels: {shape['channels']} is not 1 (grey) or 3 (RGB)")
        if shape["image_size"] % shape["patch"]:
            side, patch = shape["image_size"], shape["patch"]
            raise PrismError(
                f"shapes.{name}.image_size {side} is not divisible by shapes.{name}.patch {patch}; "
                f"choose a patch that divides it (e.g. {_divisor(side, patch)})"
            )

    def apply(self, spec: FamilySpec, shape: dict[str, int]) -> FamilySpec:
        grid = (shape["image_size"] // shape["patch"]) ** 2
        frame = (shape["channels"], shape["image_size"], shape["image_size"])
        if self.frames:
            return replace(spec, modality_shape=(shape["frames"], *frame), n_modality_tokens=shape["frames"] * grid)
        return replace(spec, modality_shape=frame, n_modality_tokens=grid)


def _divisor(side: int, near: int) -> int:
    return min((d for d in range(1, side + 1) if side % d == 0), key=lambda d: (abs(d - near), d))


@dataclass(frozen=True)
class Family:
    """One modality family as one bundle: its laptop spec and the part each stage implements.

    The parts are named ("module" or "module:attribute") rather than imported, so this layer stays
    below the data and the model that hold them and `prism --help` imports no torch; `part(kind)`
    imports one when a stage asks for it. `source`: the data source module (`SOURCE`, `versions()`,
    `samples(seed)`, prism.data.sources); `encoder`: its encoder class (prism.model.encoders.Encoder,
    built with the spec); `params`: the parameters of that encoder's tokenizer (spec -> int, pure
    Python: the workflow counts N before anything is built); `decode`: a sample's tar members and
    the spec -> its float32 modality array (prism.data.index.BadSample says why not); `shape`: which
    `shapes:` keys a study may set (`Shape`: text_len alone, unless the modality has dimensions of its own);
    `flops`: the training FLOPs of that encoder's tokenizer (spec, trained -> int, pure Python: a dry run
    plans without torch; empty: the plan counts the family's sizes on the meta device instead).
    """

    spec: FamilySpec
    source: str
    encoder: str
    params: str
    decode: str
    shape: Shape = Shape()
    flops: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    def part(self, kind: str):
        """The part `kind` ("source", "encoder", "params", "decode" or "flops"), imported."""
        module, _, attribute = getattr(self, kind).partition(":")
        loaded = importlib.import_module(module)
        return getattr(loaded, attribute) if attribute else loaded


# Every family's laptop spec by name (the registered bundles' specs).
FAMILIES: dict[str, FamilySpec] = {}
_BUNDLES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Make `family` known: its spec in FAMILIES, its parts to each stage. A second bundle of a name is refused."""
    if family.name in _BUNDLES and _BUNDLES[family.name] != family:
        raise PrismError(f"family {family.name} is registered already")
    _BUNDLES[family.name] = family
    FAMILIES[family.name] = family.spec
    return family


def unregister_family(name: str) -> None:
    """Forget the family `name` (a test's own family, after the test)."""
    _BUNDLES.pop(name, None)
    FAMILIES.pop(name, None)


def family_bundle(name: str) -> Family:
    """The bundle of family `name`; an unknown name is a PrismError listing the known ones."""
    try:
        return _BUNDLES[name]
    except KeyError:
        raise unknown_name("family", name, _BUNDLES) from None


# Where the built-in families' parts live.
_SOURCES = "prism.data.sources."
_ENCODERS = "prism.model.encoders:"
_PARAMS = "prism.model.paramcount:"
_DECODE = "prism.data.index:"
_FLOPS = "prism.model.flopcount:"
for _family in (
    # 8x8 grey digits, 2x2 patches -> 16 tokens.
    Family(
        FamilySpec("text_image", (1, 8, 8), 16, 32, 48, "sklearn.datasets.load_digits"),
        _SOURCES + "image",
        _ENCODERS + "ImageEncoder",
        _PARAMS + "image_tokenizer",
        _DECODE + "decode_image_sample",
        ImageShape(),
        flops=_FLOPS + "image_tokenizer",
    ),
    # 3 channels x 64 steps, patches of 8 steps -> 8 tokens.
    Family(
        FamilySpec("text_ts", (3, 64), 8, 32, 56, "sktime + statsmodels bundled series"),
        _SOURCES + "ts",
        _ENCODERS + "SeriesEncoder",
        _PARAMS + "series_tokenizer",
        _DECODE + "decode_series",
        flops=_FLOPS + "series_tokenizer",
    ),
    # adjacency of up to 16 nodes (zero-padded), one token per node slot.
    Family(
        FamilySpec("text_graph", (16, 16), 16, 32, 48, "networkx graph atlas + named graphs"),
        _SOURCES + "graph",
        _ENCODERS + "GraphEncoder",
        _PARAMS + "graph_tokenizer",
        _DECODE + "decode_graph",
        flops=_FLOPS + "graph_tokenizer",
    ),
    # up to 32 standardised features (zero-padded), groups of 8 -> 4 tokens.
    Family(
        FamilySpec("text_table", (32,), 4, 32, 60, "sklearn bundled tables"),
        _SOURCES + "table",
        _ENCODERS + "TableEncoder",
        _PARAMS + "table_tokenizer",
        _DECODE + "decode_npy",
        flops=_FLOPS + "table_tokenizer",
    ),
    # 4 frames of 8x8 (a digit moving), one 4x4 patch grid per frame -> 16 tokens.
    Family(
        FamilySpec("text_video", (4, 1, 8, 8), 16, 32, 48, "sklearn digits, moved across frames"),
        _SOURCES + "video",
        _ENCODERS + "VideoEncoder",
        _PARAMS + "video_tokenizer",
        _DECODE + "decode_npy",
        ImageShape(frames=True),
        flops=_FLOPS + "video_tokenizer",
    ),
    # BabyAI 7x7 egocentric grid (object, colour, state), one token per row -> 7 tokens.
    Family(
        FamilySpec("vla", (3, 7, 7), 7, 32, 57, "minigrid BabyAI levels + BabyAIBot expert"),
        _SOURCES + "vla",
        _ENCODERS + "GridEncoder",
        _PARAMS + "grid_tokenizer",
        _DECODE + "decode_npy",
        flops=_FLOPS + "grid_tokenizer",
    ),
):
    register_family(_family)

# The families of the IsoFLOP studies (the per-modality sweep uses all of FAMILIES).
STUDY_FAMILIES: tuple[str, ...] = ("text_image", "text_ts", "text_graph")


def family_spec(name: str, spec: FamilySpec | None = None) -> FamilySpec:
    """`spec` where the caller has one (a study's shape and tokenizer, or its data's), else the
    family's laptop default: every consumer of a non-default shape is handed it, none looks it up."""
    if spec is not None:
        if spec.name != name:
            raise PrismError(f"family {name!r} was given the spec of family {spec.name!r}")
        return spec
    try:
        return FAMILIES[name]
    except KeyError:
        raise unknown_name("family", name, FAMILIES) from None


# ---- shapes and tokenizer as configuration --------------------------------------------------
#
# A study sets each family's shape (`shapes: {text_image: {image_size: 224, ...}}`) and the
# captions' tokenizer (`data.tokenizer`). `resolve_spec` turns them into the FamilySpec that is
# passed to every consumer (`spec=`): a `prism` command resolves it from its flags or from its
# data's manifest, the workflow from its config, a training run from its data's manifest.


@dataclass(frozen=True)
class ShapeOptions:
    """One family's shape (config `shapes.FAMILY`, flags of `prism data index|build`, `prism isoflop
    calibrate|plan`); a key left out (null) keeps the family's laptop default."""

    image_size: int | None = option(
        None, "text_image/text_video: square side in pixels the images are resized to", metavar="PX", minimum=1
    )
    channels: int | None = option(
        None, "text_image/text_video: 1 (grey) or 3 (RGB)", metavar="C", minimum=1, schema={"enum": [1, 3]}
    )
    patch: int | None = option(
        None, "text_image/text_video: patch side in px; (image_size/patch)^2 tokens a frame", metavar="PX", minimum=1
    )
    frames: int | None = option(None, "text_video: frames per sample", metavar="T", minimum=1)
    text_len: int | None = option(
        None, "most text tokens a sample holds, BOS and EOS included", metavar="TOKENS", minimum=3
    )


def _shape(name: str) -> Shape:
    return family_bundle(name).shape


def shape_keys(name: str) -> tuple[str, ...]:
    """The `shapes.NAME` keys of a family (every other dimension of its sample is fixed)."""
    return _shape(name).keys


def default_shape(name: str) -> dict[str, int]:
    """The laptop shape of a family as `shapes:` keys."""
    return shape_of(FAMILIES[name])


def shape_of(spec: FamilySpec) -> dict[str, int]:
    """A spec's shape as `shapes:` keys (what a manifest's fields mean)."""
    return _shape(spec.name).read(spec)


def _checked_shape(name: str, shape: dict | None) -> dict[str, int]:
    given = {k: v for k, v in dict(shape or {}).items() if v is not None}
    unknown = sorted(set(given) - set(shape_keys(name)))
    if unknown:
        raise PrismError(
            f"shapes.{name}: unknown key(s) {', '.join(unknown)}; {name} has {', '.join(shape_keys(name))}"
            + _shape(name).fixed_note
        )
    by_name = {f.name: f for f in fields(ShapeOptions)}
    for key, value in given.items():
        check_field(by_name[key], value, f"shapes.{name}.{key}")
    out = default_shape(name) | given
    _shape(name).check(name, out)
    return out


def resolve_spec(name: str, shape: dict | None = None, tokenizer: str | None = None) -> FamilySpec:
    """The family's spec at `shape` (config `shapes.NAME`) with captions in `tokenizer` (`data.tokenizer`)."""
    base = family_spec(name)
    s = _checked_shape(name, shape)
    return _shape(name).apply(replace(base, text_len=s["text_len"], vocab=load_vocab(tokenizer)), s)


def study_specs(shapes: dict | None, tokenizer: str | None) -> dict[str, FamilySpec]:
    """Every family's spec of a study's config (`shapes`, `data.tokenizer`)."""
    unknown = sorted(set(shapes or {}) - set(FAMILIES))
    if unknown:
        raise PrismError(f"shapes: unknown family {', '.join(unknown)}; families: {', '.join(FAMILIES)}")
    return {name: resolve_spec(name, (shapes or {}).get(name), tokenizer) for name in FAMILIES}


def spec_flags(spec: FamilySpec) -> list[str]:
    """The flags that give a job `spec`'s shape and tokenizer (none for the family's defaults, so a
    default study's commands are those it always had)."""
    out: list[str] = []
    defaults = default_shape(spec.name)
    for key, value in shape_of(spec).items():
        if value != defaults[key]:
            out += ["--" + key.replace("_", "-"), str(value)]
    if not spec.vocab.is_bytes:
        out += ["--tokenizer", spec.vocab.file]
    return out


def spec_record(spec: FamilySpec) -> dict | None:
    """What a calibration records of a spec that is not the family's default (None for the default,
    so a default study's records are the ones it always wrote)."""
    if spec == FAMILIES.get(spec.name):
        return None
    return {"shape": shape_of(spec), "tokenizer": None if spec.vocab.is_bytes else spec.vocab.record()}


def spec_from_manifest(manifest: dict, data_dir) -> FamilySpec:
    """The spec a data directory was made at: its manifest's shape fields and tokenizer record
    (the tokenizer file is the copy beside the manifest)."""
    from pathlib import Path  # noqa: PLC0415

    name = manifest["family"]
    base = family_spec(name)
    record = manifest.get("tokenizer")
    file = str(Path(data_dir) / record.get("file", TOKENIZER_FILE)) if record else None
    return replace(
        base,
        modality_shape=tuple(manifest["modality_shape"]),
        n_modality_tokens=int(manifest["n_modality_tokens"]),
        text_len=int(manifest["text_len"]),
        vocab=vocab_from_record(record, file),
    )


TOKENIZER_FILE = "tokenizer.json"  # the copy of the tokenizer file a data directory keeps


def manifest_fields(spec: FamilySpec, tokenizer_file: str = TOKENIZER_FILE) -> dict:
    """The manifest's fields of a spec (`tokenizer` only for a tokenizer file: a byte-tokenized
    manifest is the one it always was)."""
    out = {
        "modality_shape": list(spec.modality_shape),
        "n_modality_tokens": spec.n_modality_tokens,
        "text_len": spec.text_len,
    }
    if not spec.vocab.is_bytes:
        out["tokenizer"] = {"file": tokenizer_file, "source": spec.vocab.file, **spec.vocab.record()}
    return out


def check_row_length(where: str, seq_len: int, family: str, n_modality_tokens: int, text_len: int | None) -> None:
    """Refuse a row too short for a `family` sample: a training row holds one whole sample (its modality
    tokens and `text_len`); a timed row (`text_len` None: its text may be cut) at least the modality, BOS
    and EOS. `where` names the setting (e.g. "--seq-len")."""
    least = n_modality_tokens + (2 if text_len is None else int(text_len))
    if seq_len < least:
        needs = "its modality tokens + BOS + EOS" if text_len is None else "one whole sample"
        raise PrismError(f"{where} {seq_len} is shorter than a {family} row needs: {least} tokens ({needs})")


def check_same_spec(expected: FamilySpec, data: FamilySpec, where: str) -> None:
    """Refuse data made at another shape or tokenizer than the study's, naming the key."""
    mine, theirs = shape_of(expected), shape_of(data)
    for key in mine:
        if mine[key] != theirs.get(key):
            raise PrismError(
                f"{where} was made at shapes.{expected.name}.{key} {theirs.get(key)}, the study asks for "
                f"{mine[key]}; rebuild or re-index the data at this shape (or set the key to {theirs.get(key)})"
            )
    if (expected.vocab.sha256, expected.vocab.size) != (data.vocab.sha256, data.vocab.size):
        said = lambda v: "bytes" if v.is_bytes else f"a tokenizer file (sha256 {v.sha256[:12]})"  # noqa: E731
        raise PrismError(
            f"{where} was tokenized with {said(data.vocab)}, the study's data.tokenizer is {said(expected.vocab)}; "
            "rebuild or re-index the data with the study's tokenizer"
        )

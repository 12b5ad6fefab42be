"""The config's `data:` section: the shards' settings (DataOptions) and how a job reads them (LoaderOptions).

`seed` and `lm_ratio` are `prism data build`'s flags, `eval_fraction` and
`max_bad_fraction` `prism data index`'s, with the same defaults; `shards` names the
families whose shards are the user's own (indexed instead of built).

`loader` picks the preloaded split (`prism.data.loader`: the whole decoded split in memory,
the laptop's data) or the stream from the shards (`prism.data.stream`: a few batches in
memory, any size); `auto` preloads while the decoded split stays under `preload_max_mb`.
`workers` and `shuffle_buffer` shape the stream only; these four are `prism train` flags.
`prism data index` keeps the decoded copy a preload reads only of a split under
`preload_max_mb` too (`--decoded-max-mb`): a larger split has none, and streams.
Pure Python: the workflow, the CLI and the schema read these without torch.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from math import ceil, prod
from typing import Any

from prism.core.errors import PrismError
from prism.core.families import FAMILIES
from prism.core.options import from_mapping, option
from prism.data.index import EVAL_FRACTION, MAX_BAD_FRACTION

LOADERS = ("auto", "preload", "stream")
DECODED_MAX_MB = 1024  # the default of data.preload_max_mb and of `prism data index --decoded-max-mb`


@dataclass(frozen=True)
class LoaderOptions:
    """How a training job reads its training split: `prism train` flags and keys of the config's `data:`."""

    loader: str = option(
        "auto",
        "read the training split preloaded in memory, streamed from the shards, or auto: preloaded while "
        "the decoded split is under --preload-max-mb",
        choices=LOADERS,
    )
    preload_max_mb: int = option(
        DECODED_MAX_MB,
        "auto: the largest decoded training split (MB, per rank) that is preloaded; `prism data index` keeps "
        "a decoded copy only of data whose every split fits in it (else the data streams)",
        metavar="MB",
        minimum=1,
    )
    workers: int = option(
        2, "stream: DataLoader worker processes per rank decoding the shards (0: in the training process)", minimum=0
    )
    shuffle_buffer: int = option(
        1000, "stream: samples shuffled together (one buffer of undecoded samples per worker)", metavar="N", minimum=1
    )

    def run_settings(self) -> dict[str, Any]:
        """The fields as `RunConfig` keywords (the defaults give no flag: `prism.launch.command`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def index_args(self) -> list[str]:
        """`prism data index`'s flag for `preload_max_mb` (none at the default: the index's bytes stay as they were)."""
        return [] if self.preload_max_mb == DECODED_MAX_MB else ["--decoded-max-mb", str(self.preload_max_mb)]


def loader_options(data_section: dict[str, Any] | None) -> LoaderOptions:
    """The loader's keys of the config's `data:` section (its other keys are the shards' own)."""
    names = {f.name for f in fields(LoaderOptions)}
    section = {k: v for k, v in (data_section or {}).items() if k in names}
    return from_mapping(LoaderOptions, section, "config data")


def sample_bytes(manifest: dict) -> int:
    """What preloading one sample holds: its float32 modality array and its int64 token row."""
    return 4 * prod(manifest["modality_shape"]) + 8 * (manifest["n_modality_tokens"] + manifest["text_len"])


def decoded_mb(manifest: dict, split: str) -> float:
    """About what preloading `split` holds per rank (MB): float32 modality arrays and int64 token rows."""
    return manifest["splits"][split]["samples"] * sample_bytes(manifest) / 2**20


def has_decoded_copy(manifest: dict, split: str) -> bool:
    """Whether the data keeps `split` decoded beside its manifest (an index of a large split does not)."""
    return manifest["splits"][split].get("decoded", True)


def no_copy_error(data_dir, manifest: dict) -> PrismError:
    """Preloading data the index kept no decoded copy of: its largest split, and the fix, in one line."""
    split = max(manifest["splits"], key=lambda s: manifest["splits"][s]["samples"])
    size = ceil(decoded_mb(manifest, split))  # at least the split's size: room for it
    from prism.data.reindex import reindex_command  # noqa: PLC0415 lazy: the options module stays light

    how = reindex_command(data_dir, manifest, decoded_max_mb=size)
    return PrismError(
        f"{data_dir}: no decoded copy to preload (the {split} split is {size} MB decoded, above the index's "
        f"--decoded-max-mb); stream it (data.loader: stream or auto), or re-index with room for it: `{how}`"
    )


def resolve(manifest: dict, split: str, loader: str, preload_max_mb: float, data_dir=None) -> str:
    """`preload` or `stream`: `loader` itself, or (auto) what the decoded split's size allows.

    Data with a split the index kept no decoded copy of streams: the preloaded loader
    reads the training split and the eval split from their copies.
    """
    missing = [s for s in manifest["splits"] if not has_decoded_copy(manifest, s)]
    if missing and loader == "preload":
        raise no_copy_error(data_dir or "the data", manifest)
    if loader != "auto":
        return loader
    return "preload" if not missing and decoded_mb(manifest, split) <= preload_max_mb else "stream"


@dataclass(frozen=True)
class DataOptions:
    """The shards of each family (the fields are the config keys of `data:`)."""

    seed: int = option(0, "Seed of the shard build; the same seed gives the same bytes.", minimum=0)
    lm_ratio: float = option(
        0.0,
        "Share of each split that is text-only Python documentation (held-out documents in eval). Captions "
        "alone saturate the smallest backbones and give no IsoFLOP minimum; language text gives the loss a "
        "capacity-limited part, so larger models pay off at larger budgets.",
        minimum=0,
        exclusive_maximum=1,
    )
    shards: dict[str, str] = option(
        {},
        "Your own webdataset shards, per family: an absolute folder of .tar shards (or of train/ and eval/ "
        "folders of them), indexed in place by `prism data index` instead of the offline build "
        "(docs/own-data.md). A family not named here is built.",
        schema={
            "type": "object",
            "propertyNames": {"enum": list(FAMILIES)},
            "additionalProperties": {"$ref": "#/definitions/absolute_path"},
        },
    )
    eval_fraction: float = option(
        EVAL_FRACTION,
        "Share of the samples held out for eval, chosen by the hash of their keys, when a shards folder has no "
        "train/ and eval/ folders.",
        exclusive_minimum=0,
        exclusive_maximum=1,
    )
    max_bad_fraction: float = option(
        MAX_BAD_FRACTION,
        "Bad samples (no caption, an image that does not decode) are skipped with a warning, and the samples a "
        "cut or damaged shard lost count with them; above this share of what the shards should hold, the index "
        "refuses.",
        minimum=0,
        exclusive_maximum=1,
    )
    tokenizer: str = option(
        "bytes",
        "The captions' tokenizer: bytes (UTF-8 bytes, 260 ids with the layout's specials), or a Hugging Face "
        "`tokenizers` JSON file (Llama-3's, Qwen's, one trained on your captions), read offline (the optional "
        "extra prism[tokenizer]). Its vocabulary plus the layout's PAD, BOS, EOS and modality tokens (the file's "
        "own where it has them, else added) sets the backbone's embedding rows, counted in N and FLOPs; the data "
        "keeps a copy of the file.",
        schema={"type": "string", "pattern": "^(bytes|[A-Za-z0-9_./~-]+\\.json)$"},
    )

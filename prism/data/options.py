"""LoaderOptions: how a training job reads its split, one field per key of the config's `data:` section.

`loader` picks the preloaded split (`prism.data.loader`: the whole decoded split in memory,
the laptop's data) or the stream from the shards (`prism.data.stream`: a few batches in
memory, any size); `auto` preloads while the decoded split stays under `preload_max_mb`.
`workers` and `shuffle_buffer` shape the stream only. Pure Python: the workflow, the CLI and
the schema read these without torch.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from math import prod
from typing import Any

from prism.options import from_mapping, option

LOADERS = ("auto", "preload", "stream")


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
        1024, "auto: the largest decoded training split (MB, per rank) that is preloaded", metavar="MB", minimum=1
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


def loader_options(data_section: dict[str, Any] | None) -> LoaderOptions:
    """The loader's keys of the config's `data:` section (its other keys are the shards' own)."""
    names = {f.name for f in fields(LoaderOptions)}
    section = {k: v for k, v in (data_section or {}).items() if k in names}
    return from_mapping(LoaderOptions, section, "config data")


def decoded_mb(manifest: dict, split: str) -> float:
    """About what preloading `split` holds per rank (MB): float32 modality arrays and int64 token rows."""
    per_sample = 4 * prod(manifest["modality_shape"]) + 8 * (manifest["n_modality_tokens"] + manifest["text_len"])
    return manifest["splits"][split]["samples"] * per_sample / 2**20


def resolve(manifest: dict, split: str, loader: str, preload_max_mb: float) -> str:
    """`preload` or `stream`: `loader` itself, or (auto) what the decoded split's size allows."""
    if loader != "auto":
        return loader
    return "preload" if decoded_mb(manifest, split) <= preload_max_mb else "stream"

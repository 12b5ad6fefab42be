"""A run's training batches: the preloaded split or a stream from the shards (`config.loader`), and
the streamed order, which is part of the run's inputs."""

from __future__ import annotations

from prism.core.studylayout import manifest_file
from prism.data.loader import ShardLoader
from prism.data.manifest import read_manifest
from prism.data.options import resolve
from prism.data.order import data_order
from prism.parallel.env import DistEnv
from prism.train.config import RunConfig
from prism.train.process import log


def open_loader(config: RunConfig, env: DistEnv):
    """This rank's training batches: the preloaded split, or streamed from the shards (`config.loader`)."""
    manifest = read_manifest(config.data, config.family)  # once: the loader takes it
    common = dict(
        rank=env.rank, world_size=env.world_size, layout=config.layout, seq_len=config.seq_len, manifest=manifest
    )
    kind = resolve(manifest, "train", config.loader, config.preload_max_mb, config.data)
    if kind == "preload":
        return ShardLoader(config.data, "train", config.global_batch, config.seed, family=config.family, **common)
    from prism.data.stream import StreamLoader  # noqa: PLC0415 lazy: only streamed runs need it

    warn = log if env.is_main else None
    return StreamLoader(
        config.data,
        "train",
        config.global_batch,
        config.seed,
        family=config.family,
        workers=config.workers,
        shuffle_buffer=config.shuffle_buffer,
        warn=warn,
        **common,
    )


def run_order(config: RunConfig, world_size: int, manifest: dict | None = None) -> str | None:
    """The streamed split's order beyond the seed (None when preloaded): part of the run's inputs.
    `manifest`: the data's where the caller holds it (the trainer, its loader's), else read here."""
    if manifest is None and manifest_file(config.data).is_file():
        manifest = read_manifest(config.data)
    settings = (config.loader, config.preload_max_mb, config.seed, world_size, config.workers, config.shuffle_buffer)
    return data_order(manifest, config.data, *settings)

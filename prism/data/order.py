"""The order of a streamed split: which shards each stream reads in each epoch (prism.data.stream).

Pure functions of (seed, epoch, world size, workers, the shards' sample counts), numpy only,
so that the trainer's input fingerprint and the tests compute them without reading a shard.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from prism.core.errors import PrismError


@dataclasses.dataclass(frozen=True)
class StreamPlan:
    """Which shards each stream reads in each epoch; `sizes[i]` is shard i's samples of the split."""

    sizes: tuple[int, ...]
    seed: int
    world_size: int
    workers: int  # streams per rank (after the clamp to the shards)

    @property
    def streams(self) -> int:
        return self.world_size * self.workers

    def shards(self, epoch: int, rank: int, k: int) -> list[int]:
        """Shard indices of stream k of `rank` in `epoch`, in reading order."""
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.sizes))
        return [int(i) for i in order[rank + self.world_size * k :: self.streams]]

    def length(self, epoch: int, rank: int, k: int) -> int:
        return sum(self.sizes[i] for i in self.shards(epoch, rank, k))

    def position(self, rank: int, k: int, samples: int) -> tuple[int, int]:
        """(epoch, offset) of stream k of `rank` after it emitted `samples`."""
        epoch = 0
        while samples >= (n := self.length(epoch, rank, k)):
            samples -= n
            epoch += 1
        return epoch, samples


def plan_streams(sizes: list[int], seed: int, world_size: int, workers: int, warn=None) -> StreamPlan:
    """The plan for the shards holding samples (`sizes`): refuses a rank without a shard, clamps workers."""
    shards, per_rank = len(sizes), max(1, workers)
    if shards < world_size:
        raise PrismError(
            f"the training split has {shards} shard(s) with samples for {world_size} ranks: every rank streams "
            "shards of its own; write the data into at least as many shards as ranks, or set data.loader: preload"
        )
    if shards < world_size * per_rank:
        fit = shards // world_size
        if warn is not None:
            warn(
                f"warning: data.workers {workers}: {shards} shard(s) for {world_size} rank(s) give each rank "
                f"{fit} worker(s) with a shard of its own; streaming with {fit} (more shards, or fewer workers, "
                "silences this)"
            )
        per_rank = fit
    return StreamPlan(tuple(sizes), int(seed), int(world_size), per_rank)


def order_of(manifest: dict, seed: int, world_size: int, workers: int, shuffle_buffer: int) -> str:
    """What a streamed run's order depends on beyond its seed, as its input fingerprint records it."""
    sizes = [e["samples"] for e in manifest["splits"]["train"]["shards"] if e["samples"]]
    plan = plan_streams(sizes, seed, world_size, workers)
    return f"stream: {world_size} ranks x {plan.workers} streams, shuffle buffer {shuffle_buffer}"


def data_order(
    manifest: dict | None,
    data_dir,
    loader: str,
    preload_max_mb: float,
    seed: int,
    world_size: int,
    workers: int,
    buffer: int,
):
    """None for a preloaded split (its order is a function of the seed alone), else `order_of` the stream.
    `manifest`: the data's, as its reader read it (None: no data, which the loader says in its words)."""
    from prism.data.options import resolve  # noqa: PLC0415 lazy: the plan's imports stay numpy's

    if manifest is None:
        return None
    if resolve(manifest, "train", loader, preload_max_mb, data_dir) == "preload":
        return None
    return order_of(manifest, seed, world_size, workers, buffer)

"""ShardLoader: a verified, preloaded split served as fixed-shape batches, the same for any world size.

Why it looks like this:
- The shard directory is explicit. An environment variable such as
  WEBDATASET_LOCAL_PATH that points elsewhere is refused, never followed: one
  training cell reading another cell's shards bends a scaling curve silently.
- The split is read once through `manifest.read_split` (sha256 and counts
  checked, every record decoded) into numpy arrays, from the decoded copy the build
  keeps beside the shards (`prism.data.decoded`) while it matches them; a batch is a
  few vectorised gathers, so the loader is never what training waits on.
- The order depends only on (seed, epoch): epoch e visits the samples in
  `default_rng([seed, e]).permutation(N)`. The epochs are concatenated into one
  stream of units (samples when padded, packed rows when packed) and global
  batch k is units [k*GB, (k+1)*GB) of that stream, crossing into the next epoch
  where needed, so every sample is read exactly once per epoch and no sample is
  dropped. Rank r of W takes the contiguous slice [r*GB/W, (r+1)*GB/W) of each
  global batch: the union of the ranks' slices is the batch one process gets,
  and a run can resume on another world size.
- Packed layout: the epoch's permutation is packed greedily, in order, into rows
  of `seq_len` tokens (whole samples only; a sample that does not fit starts a
  new row). `global_batch` then counts ROWS, and the number of samples per batch
  varies (`n_samples`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from prism.core.errors import PrismError
from prism.core.families import check_row_length, spec_from_manifest
from prism.core.tokenizer import TextEncoder
from prism.data import packing
from prism.data.batching import check_batch
from prism.data.decoded import load_split
from prism.data.manifest import read_manifest

# Variables other tools use to decide where shards come from; prism only lets them agree.
DATA_ENV_VARS = ("WEBDATASET_LOCAL_PATH", "WDS_LOCAL_PATH", "PRISM_DATA_DIR")
LAYOUTS = ("padded", "packed")


def check_batching(rank: int, world_size: int, global_batch: int) -> None:
    """Refuse a rank outside its world, or a global batch its ranks cannot split evenly."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise PrismError(f"rank {rank} is not in a world of size {world_size}")
    check_batch(global_batch, world_size, "--global-batch", f"this run ({world_size} processes)")


def row_length(manifest: dict, seq_len: int | None) -> tuple[int, int]:
    """(one sample's tokens, the row length: `seq_len`, else one sample), refusing a row shorter than a sample."""
    width = int(manifest["n_modality_tokens"]) + int(manifest["text_len"])
    length = width if seq_len is None else int(seq_len)
    check_row_length("seq_len", length, manifest["family"], int(manifest["n_modality_tokens"]), manifest["text_len"])
    return width, length


def check_environment(data_dir: Path) -> None:
    """Refuse when a data-location variable names another directory than `data_dir`."""
    for var in DATA_ENV_VARS:
        value = os.environ.get(var)
        if value and Path(value).resolve() != data_dir.resolve():
            raise PrismError(
                f"{var}={value} is set but this loader was asked for {data_dir}; prism reads only the "
                f"explicit shard directory, so unset {var} (or point it at {data_dir})"
            )


class _Split:
    """One split in memory: modality arrays plus every sample's token layout."""

    def __init__(self, data_dir: Path, manifest: dict, split: str, width: int, text: TextEncoder | None = None):
        records = load_split(data_dir, manifest, split)
        if not records.keys:
            raise PrismError(f"{data_dir} split {split} holds no samples; rebuild it")
        self.keys = np.array(records.keys)
        self.sources = np.array([k.split("__")[0] for k in records.keys])
        self.modality = records.modality
        self.has_modality = records.has_modality
        self.table, self.lengths = packing.sample_table(
            records.captions, records.has_modality, manifest["n_modality_tokens"], width, text
        )

    def __len__(self) -> int:
        return len(self.keys)


class ShardLoader:
    """Iterate this rank's slice of each global batch of `split`, forever (epochs cycle)."""

    def __init__(
        self,
        data_dir,
        split: str = "train",
        global_batch: int = 64,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        layout: str = "padded",
        seq_len: int | None = None,
        family: str | None = None,
        manifest: dict | None = None,
    ):
        self.data_dir = Path(data_dir)
        check_environment(self.data_dir)
        if layout not in LAYOUTS:
            raise PrismError(f"unknown layout {layout!r}; valid: {', '.join(LAYOUTS)}")
        check_batching(rank, world_size, global_batch)
        # `manifest`: read once by the run (prism.train.batches), else here.
        self.manifest = manifest if manifest is not None else read_manifest(self.data_dir, family)
        self.family = self.manifest["family"]
        self.n_modality_tokens = int(self.manifest["n_modality_tokens"])
        self.width, self.seq_len = row_length(self.manifest, seq_len)
        self.split, self.layout, self.seed = split, layout, int(seed)
        self.global_batch, self.rank, self.world_size = int(global_batch), int(rank), int(world_size)
        self.local_batch = self.global_batch // self.world_size
        vocab = spec_from_manifest(self.manifest, self.data_dir).vocab  # the captions' tokenizer
        self.vocab, self.text = vocab, None if vocab.is_bytes else TextEncoder(vocab)
        self.data = _Split(self.data_dir, self.manifest, split, self.width, self.text)
        self._eval: _Split | None = self.data if split == "eval" else None
        self.epoch, self.unit, self.step = 0, 0, 0
        self._perms: dict[int, np.ndarray] = {}
        self._packs: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    # --- order -------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Samples in this split."""
        return len(self.data)

    @property
    def keys(self) -> np.ndarray:
        return self.data.keys

    @property
    def sources(self) -> np.ndarray:
        return self.data.sources

    def permutation(self, epoch: int) -> np.ndarray:
        """The visiting order of epoch `epoch`: a function of (seed, epoch) only."""
        if epoch not in self._perms:
            if len(self._perms) > 4:
                self._perms.pop(min(self._perms))
            self._perms[epoch] = np.random.default_rng([self.seed, epoch]).permutation(len(self.data))
        return self._perms[epoch]

    def _pack(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(row starts into the epoch's permutation, offset of each permuted sample) for packing."""
        if epoch not in self._packs:
            if len(self._packs) > 4:
                self._packs.pop(min(self._packs))
            lengths = self.data.lengths[self.permutation(epoch)]
            self._packs[epoch] = packing.greedy_rows(lengths, self.seq_len)
        return self._packs[epoch]

    def units_in_epoch(self, epoch: int) -> int:
        """Samples (padded) or rows (packed) in one epoch."""
        return len(self.data) if self.layout == "padded" else len(self._pack(epoch)[0]) - 1

    @property
    def samples_per_unit(self) -> float:
        """Mean samples per row of epoch 0: 1.0 padded, the packing factor packed (for FLOP accounting)."""
        return len(self.data) / self.units_in_epoch(0)

    @property
    def epochs_seen(self) -> float:
        return self.epoch + self.unit / self.units_in_epoch(self.epoch)

    def _segments(self, epoch: int, unit: int, count: int) -> tuple[list[tuple[int, int, int]], int, int]:
        """The next `count` units from (epoch, unit) as (epoch, lo, hi) runs; the position after them."""
        runs = []
        while count:
            take = min(count, self.units_in_epoch(epoch) - unit)
            runs.append((epoch, unit, unit + take))
            count -= take
            unit += take
            if unit == self.units_in_epoch(epoch):
                epoch, unit = epoch + 1, 0
        return runs, epoch, unit

    # --- batches -----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict]:
        return self

    def __next__(self) -> dict:
        runs, self.epoch, self.unit = self._global_runs()
        self.step += 1
        return self._assemble(runs)

    def _global_runs(self):
        """This rank's runs of the next global batch, and the position after the whole global batch."""
        _, e, u = self._segments(self.epoch, self.unit, self.rank * self.local_batch)
        mine, _, _ = self._segments(e, u, self.local_batch)
        _, end_epoch, end_unit = self._segments(self.epoch, self.unit, self.global_batch)
        return mine, end_epoch, end_unit

    def _assemble(self, runs: list[tuple[int, int, int]]) -> dict:
        if self.layout == "padded":
            idx = np.concatenate([self.permutation(e)[lo:hi] for e, lo, hi in runs])
            tokens = packing.padded(self.data.table, idx, self.seq_len, self.vocab.pad)
            extra = {}
        else:
            idx_parts, row_parts, off_parts, base = [], [], [], 0
            for e, lo, hi in runs:
                starts, offsets = self._pack(e)
                a, b = int(starts[lo]), int(starts[hi])
                idx_parts.append(self.permutation(e)[a:b])
                row_parts.append(base + np.repeat(np.arange(hi - lo), np.diff(starts[lo : hi + 1])))
                off_parts.append(offsets[a:b])
                base += hi - lo
            idx = np.concatenate(idx_parts)
            tokens, segments = packing.packed(
                self.data.table,
                self.data.lengths,
                idx,
                np.concatenate(row_parts),
                np.concatenate(off_parts),
                base,
                self.seq_len,
                self.vocab.pad,
            )
            extra = {"segment_ids": torch.from_numpy(segments)}
        return self._batch(self.data, idx, tokens, extra, epoch=runs[0][0])

    def _batch(self, data: _Split, idx: np.ndarray, tokens: np.ndarray, extra: dict, epoch: int) -> dict:
        with_mod = idx[data.has_modality[idx]]
        return {
            "tokens": torch.from_numpy(tokens),
            "modality": torch.from_numpy(data.modality[with_mod]),
            "labels": torch.from_numpy(packing.labels_for(tokens, self.vocab)),
            "sample_ids": torch.from_numpy(idx),
            "n_samples": int(idx.size),
            "n_tokens": int(data.lengths[idx].sum()),  # real tokens (modality slots + text), no PAD
            "epoch": epoch,
            **extra,
        }

    def eval_batches(self, batch_size: int) -> Iterator[dict]:
        """The eval split in stored order, padded, `batch_size` per batch (the last may be smaller).

        Every rank gets the same, whole batches: eval sets are small, and equal
        losses on all ranks need no all-reduce.
        """
        if batch_size < 1:
            raise PrismError(f"eval batch size {batch_size} must be positive")
        if self._eval is None:
            self._eval = _Split(self.data_dir, self.manifest, "eval", self.width, self.text)
        data = self._eval
        for lo in range(0, len(data), batch_size):
            idx = np.arange(lo, min(lo + batch_size, len(data)))
            yield self._batch(data, idx, packing.padded(data.table, idx, self.seq_len, self.vocab.pad), {}, epoch=0)

    # --- resume ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "seed": self.seed,
            "epoch": self.epoch,
            "unit_in_epoch": self.unit,
            "step": self.step,
            "layout": self.layout,
            "seq_len": self.seq_len,
            "global_batch": self.global_batch,
            "split": self.split,
            "samples": len(self.data),
            "family": self.family,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state` (possibly saved under another world size)."""
        if state.get("loader", "preload") != "preload":
            raise PrismError(
                f"cannot resume: the saved data position is of a {state['loader']}ed split, this loader preloads it; "
                "resume with the same data.loader (or delete the run directory to start over)"
            )
        for key in ("seed", "layout", "seq_len", "global_batch", "split", "samples", "family"):
            mine = self.state_dict()[key]
            if state.get(key) != mine:
                raise PrismError(
                    f"cannot resume: the saved data position has {key}={state.get(key)!r}, this loader {mine!r}; "
                    "resume with the same data directory, seed, layout, seq_len and global batch"
                )
        if not 0 <= int(state["unit_in_epoch"]) < self.units_in_epoch(int(state["epoch"])):
            raise PrismError(f"cannot resume: position {state['unit_in_epoch']} is outside epoch {state['epoch']}")
        self.epoch, self.unit, self.step = int(state["epoch"]), int(state["unit_in_epoch"]), int(state["step"])

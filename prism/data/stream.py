"""StreamLoader: the training split read from its shards where they lie, a few batches in memory.

The preloaded split (`prism.data.loader`) holds every decoded sample in each rank; at
224x224 RGB that is 600 KB a sample, so a split of millions cannot be preloaded. This
loader reads the shards as webdataset does, and its order is still a pure function:

- Streams. Rank r of W runs K worker processes (`workers`; 0: one stream in the training
  process); its stream k is global stream g = r + W*k of the W*K. In epoch e the shards
  that hold samples of the split, in the order `default_rng([seed, e]).permutation(S)`,
  are dealt round-robin to the W*K streams: position i goes to stream i mod (W*K). Each
  rank reads its own shards, each worker its own subset of the rank's.
- Uneven counts. When S is not a multiple of W*K, the first S mod (W*K) streams of that
  deal get one shard more, and shards differ in size; each stream moves to its next epoch
  when its own shards are done (the permutation changes who gets more). Within a stream's
  epoch every sample is read once; streams are not in step with one another. Fewer shards
  than ranks is refused; fewer than W*K runs floor(S/W) workers per rank, with a warning.
- Shuffle. A stream's epoch is cut into windows of `shuffle_buffer` samples in shard order;
  each window (its samples undecoded) is emitted in the order
  `default_rng([seed, e, g, window]).permutation`. A block shuffle, not a reservoir: a
  position then names the buffer's contents, so resuming re-reads one window, never the stream.
- Batches. A worker emits whole local batches (global_batch / W samples, crossing windows and
  epochs), decoded, resized and tokenized there; the DataLoader takes them from the workers in
  turn, so step t of the rank is the (t // K)-th batch of stream t mod K. The position of
  every stream after step t is therefore a function of t alone: a resumed job computes where
  each stream stands (epoch, offset) and re-reads one window per stream, nothing before it.

So the order is a function of (seed, epoch, W, K, shuffle_buffer, the shards). A checkpoint
records them (`state_dict`); the run's input fingerprint does too (`order_of`), so a run
resumed with another world size, worker count or buffer starts over instead of mixing orders.

A shard is checked as it is read: its size before the stream starts; its sha256 and its
count of samples at its end; a sample the index counted as good that does not decode now,
at once. Any of them stops the job with a PrismError naming the shard (and key).
"""

from __future__ import annotations

import io
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.utils.data

from prism.core.errors import PrismError
from prism.core.families import spec_from_manifest
from prism.data import packing
from prism.data.index import BadSample, SplitOf, _HashingReader, decode_sample, iter_samples, text_encoder
from prism.data.loader import check_batching, check_environment, row_length
from prism.data.manifest import MANIFEST, read_manifest, shard_path
from prism.data.order import plan_streams
from prism.data.reindex import reindex_command

# What a resumed stream must share with the one that saved its position.
RESUME_KEYS = (
    "loader",
    "seed",
    "world_size",
    "workers",
    "shuffle_buffer",
    "seq_len",
    "global_batch",
    "split",
    "samples",
    "family",
)
ERROR = "_error"  # a worker's failure, carried to the training process as a batch
POSITION = "_position"


def _fix(data_dir: Path, manifest: dict) -> str:
    if manifest.get("kind") == "index":
        return f"re-index with `{reindex_command(data_dir, manifest)}`"
    return "rebuild the shard directory with `prism data build`"


# ---- one split's shards, read and decoded --------------------------------------------------


def ignore_sigterm(_worker_id: int) -> None:
    """A loader worker outlives the SIGTERM a walltime sends the whole job (its processes' group): the rank
    it serves checkpoints on that signal and then ends it, where a worker killed first made the rank fail
    ("DataLoader worker is killed by signal: Terminated") before its checkpoint (found by the probe)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class ShardSource:
    """The shards of one split, with how to tell its good samples (by key) and decode them.

    The shapes are values of the manifest (the family's modality shape, its modality tokens
    and text length), never constants: a split indexed at another shape streams at that shape.
    """

    def __init__(self, data_dir: Path, manifest: dict, split: str):
        if split not in manifest["splits"]:
            raise PrismError(f"{data_dir / MANIFEST} has no split {split!r}")
        self.data_dir, self.manifest, self.split = data_dir, manifest, split
        self.entries = [e for e in manifest["splits"][split]["shards"] if e["samples"]]
        self.index = manifest.get("kind") == "index"
        self.shape = tuple(int(n) for n in manifest["modality_shape"])
        self.spec = spec_from_manifest(manifest, data_dir)  # its shape and tokenizer, as the index made it
        rule = manifest.get("split") or {"by": "folder"}
        self.split_of = SplitOf(split if rule["by"] == "folder" else None, float(rule.get("eval_fraction", 0.0)))
        self.bad = {(b["shard"], b["key"]) for b in manifest.get("bad_samples", [])}
        self.base = np.cumsum([0] + [e["samples"] for e in self.entries]).tolist()  # sample ids

    def check_sizes(self) -> None:
        """Every shard there with its indexed size (a stat each: the stream hashes them as it reads)."""
        for entry in self.entries:
            path = shard_path(self.data_dir, self.manifest, entry)
            try:
                size = path.stat().st_size
            except OSError as err:
                raise PrismError(
                    f"shard {path} cannot be read ({err.strerror}); restore it, or {_fix(self.data_dir, self.manifest)}"
                ) from None
            if "bytes" in entry and size != entry["bytes"]:
                raise PrismError(
                    f"shard {path} is {size} bytes, {self.data_dir / MANIFEST} says {entry['bytes']} (changed since "
                    f"it was written); {_fix(self.data_dir, self.manifest)}"
                )

    def _good(self, name: str, key: str) -> bool:
        if not self.index:
            return True
        return (name, key) not in self.bad and self.split_of(key) == self.split

    def samples(self, shard: int, skip: int = 0) -> Iterator[tuple[int, str, dict]]:
        """(sample id, key, members) of the good samples of shard `shard` after the first `skip`, undecoded.

        The whole file is read (the skipped samples too) so that its sha256 and count are checked
        at its end.
        """
        entry = self.entries[shard]
        path = shard_path(self.data_dir, self.manifest, entry)
        fix = _fix(self.data_dir, self.manifest)
        count = 0
        try:
            with path.open("rb") as fh:
                reader = _HashingReader(path, fh)
                for key, members, cut in iter_samples(reader):
                    if count == entry["samples"] and cut is not None:
                        break  # the index's account of a shard cut short: its samples before the cut
                    if cut is not None:
                        raise PrismError(f"shard {path} breaks off after sample {key} ({cut}); {fix}")
                    if not self._good(entry["name"], key):
                        continue
                    if count >= skip and count < entry["samples"]:
                        yield self.base[shard] + count, key, members
                    count += 1
                digest, _, _ = reader.finish()
        except OSError as err:
            raise PrismError(f"shard {path} cannot be read ({err.strerror}); {fix}") from None
        if count != entry["samples"]:
            raise PrismError(
                f"shard {path} holds {count} {self.split} samples, the manifest says {entry['samples']}; {fix}"
            )
        if digest != entry["sha256"]:
            raise PrismError(f"shard {path} does not match its sha256 in {self.data_dir / MANIFEST}; {fix}")

    def decode(self, shard: int, key: str, members: dict) -> tuple[str, np.ndarray | None]:
        """(caption, float32 modality array or None for a text-only sample) as the preloaded split has them."""
        path = shard_path(self.data_dir, self.manifest, self.entries[shard])
        if self.index:
            try:
                caption, _, array = decode_sample(members, self.spec)
                return caption, array
            except BadSample as why:
                raise PrismError(
                    f"shard {path}, sample {key}: {why}, but the index counted it good (the shard changed since it "
                    f"was indexed); {_fix(self.data_dir, self.manifest)}"
                ) from None
        try:
            caption = json.loads(members["json"])["caption"]
            array = np.load(io.BytesIO(members["npy"]), allow_pickle=False) if "npy" in members else None
        except (KeyError, ValueError, TypeError, OSError):
            raise PrismError(
                f"shard {path}, sample {key}: missing or bad .json/.npy member; {_fix(self.data_dir, self.manifest)}"
            ) from None
        if array is not None and (array.dtype != np.float32 or array.shape != self.shape):
            raise PrismError(f"shard {path}, sample {key}: .npy is not float32 {list(self.shape)}")
        return caption, array

    def shard_of(self, sample_id: int) -> int:
        return int(np.searchsorted(self.base, sample_id, side="right")) - 1


def assemble(source: ShardSource, picked: list[tuple[int, str, dict]], seq_len: int, epoch: int) -> dict:
    """One padded batch of undecoded samples (sample id, key, members): decoded, resized and tokenized."""
    captions, arrays, ids = [], [], []
    for sid, key, members in picked:
        caption, array = source.decode(source.shard_of(sid), key, members)
        captions.append(caption)
        arrays.append(array)
        ids.append(sid)
    has = np.array([a is not None for a in arrays], bool)
    width = source.spec.n_modality_tokens + source.spec.text_len
    vocab = source.spec.vocab
    text = None if vocab.is_bytes else text_encoder(vocab)
    table, lengths = packing.sample_table(captions, has, source.spec.n_modality_tokens, width, text)
    tokens = packing.padded(table, np.arange(len(picked)), seq_len, vocab.pad)
    modality = np.stack([a for a in arrays if a is not None]) if has.any() else np.zeros((0, *source.shape), np.float32)
    return {
        "tokens": torch.from_numpy(tokens),
        "modality": torch.from_numpy(np.ascontiguousarray(modality, np.float32)),
        "labels": torch.from_numpy(packing.labels_for(tokens, vocab)),
        "sample_ids": torch.tensor(ids, dtype=torch.int64),
        "n_samples": len(picked),
        "n_tokens": int(lengths.sum()),
        "epoch": epoch,
    }


# ---- the streams ---------------------------------------------------------------------------


class Streams(torch.utils.data.IterableDataset):
    """This rank's K streams; DataLoader worker w serves stream (w + first) mod K (`first`: the
    stream whose batch comes next, so that a resumed DataLoader keeps the turns)."""

    def __init__(self, source, plan, rank, buffer, local_batch, seq_len, starts, first):
        super().__init__()
        self.source, self.plan, self.rank, self.buffer = source, plan, rank, buffer
        self.local_batch, self.seq_len, self.starts, self.first = local_batch, seq_len, starts, first

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        k = (self.first + (info.id if info is not None else 0)) % self.plan.workers
        try:
            yield from self.batches(k)
        except PrismError as err:  # one line to the training process, not a worker's traceback
            yield {ERROR: str(err)}

    def samples(self, k: int) -> Iterator[tuple[int, int, tuple]]:
        """(epoch, offset after, undecoded sample) of stream k from its start position, forever."""
        epoch, offset = self.starts[k]
        g = self.rank + self.plan.world_size * k
        while True:
            shards = self.plan.shards(epoch, self.rank, k)
            length = sum(self.plan.sizes[i] for i in shards)
            window = offset // self.buffer
            reader = self.read(shards, window * self.buffer)
            for lo in range(window * self.buffer, length, self.buffer):
                held = [next(reader) for _ in range(min(self.buffer, length - lo))]
                order = np.random.default_rng([self.plan.seed, epoch, g, lo // self.buffer]).permutation(len(held))
                for i in range(max(0, offset - lo), len(held)):
                    yield epoch, lo + i + 1, held[order[i]]
            reader.close()
            epoch, offset = epoch + 1, 0

    def read(self, shards: list[int], start: int) -> Iterator[tuple]:
        """The undecoded samples of `shards` in order from the `start`-th."""
        for i in shards:
            n = self.plan.sizes[i]
            if start >= n:
                start -= n
                continue
            yield from self.source.samples(self.source_index(i), skip=start)
            start = 0

    def source_index(self, i: int) -> int:
        return i  # the plan's shard i is the source's entry i (both list the shards holding samples)

    def batches(self, k: int) -> Iterator[dict]:
        picked, epoch = [], None
        for e, after, sample in self.samples(k):
            epoch = e if epoch is None else epoch
            picked.append(sample)
            if len(picked) == self.local_batch:
                length = self.plan.length(e, self.rank, k)
                position = (e, after) if after < length else (e + 1, 0)
                batch = assemble(self.source, picked, self.seq_len, epoch)
                batch[POSITION] = (k, *position)
                yield batch
                picked, epoch = [], None


class StreamLoader:
    """Iterate this rank's batches of `split`, streamed from the shards, forever (epochs cycle).

    The same batches as a dict, and the same `state_dict`/`load_state_dict`/`eval_batches`,
    as `prism.data.loader.ShardLoader`; padded rows only. `modality_shape` decodes at another
    shape than the manifest's (the benchmark's question: what would this shape cost).
    """

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
        workers: int = 2,
        shuffle_buffer: int = 1000,
        warn=None,
        modality_shape: tuple[int, ...] | None = None,
    ):
        self.data_dir = Path(data_dir)
        check_environment(self.data_dir)
        if layout != "padded":
            raise PrismError(
                f"layout {layout!r} is not streamed (packing needs the whole epoch's lengths): use layout padded, "
                "or data.loader: preload"
            )
        check_batching(rank, world_size, global_batch)
        if shuffle_buffer < 1 or workers < 0:
            raise PrismError(f"shuffle buffer {shuffle_buffer} must be positive and workers {workers} at least 0")
        # `manifest`: read once by the run (prism.train.batches), else here.
        self.manifest = manifest if manifest is not None else read_manifest(self.data_dir, family)
        if modality_shape is not None:  # `prism data bench --shape`: decode at another size than the data's
            self.manifest = {**self.manifest, "modality_shape": list(modality_shape)}
        self.family = self.manifest["family"]
        self.width, self.seq_len = row_length(self.manifest, seq_len)
        self.split, self.layout, self.seed, self.buffer = split, layout, int(seed), int(shuffle_buffer)
        self.global_batch, self.rank, self.world_size = int(global_batch), int(rank), int(world_size)
        self.local_batch = self.global_batch // self.world_size
        self.source = ShardSource(self.data_dir, self.manifest, split)
        self.samples_total = int(self.manifest["splits"][split]["samples"])
        if not self.samples_total:
            raise PrismError(f"{self.data_dir} split {split} holds no samples; rebuild it")
        self.source.check_sizes()
        sizes = [e["samples"] for e in self.source.entries]
        self.plan = plan_streams(sizes, self.seed, self.world_size, int(workers), warn)
        self.processes = int(workers) and self.plan.workers  # 0: the stream runs in this process
        self.step = 0
        self._iter: Iterator[dict] | None = None

    def __len__(self) -> int:
        return self.samples_total

    @property
    def epochs_seen(self) -> float:
        return self.step * self.global_batch / self.samples_total

    def positions(self, step: int) -> list[tuple[int, int]]:
        """(epoch, offset) of each of this rank's streams after `step` steps (stream t mod K gives step t)."""
        k_count = self.plan.workers
        return [
            self.plan.position(self.rank, k, (step - k + k_count - 1) // k_count * self.local_batch)
            for k in range(k_count)
        ]

    def _open(self) -> Iterator[dict]:
        starts = self.positions(self.step)
        streams = Streams(
            self.source,
            self.plan,
            self.rank,
            self.buffer,
            self.local_batch,
            self.seq_len,
            starts,
            self.step % self.plan.workers,
        )
        if not self.processes:
            return streams.batches(0)
        loader = torch.utils.data.DataLoader(
            streams,
            batch_size=None,
            num_workers=self.processes,
            prefetch_factor=2,
            persistent_workers=False,
            worker_init_fn=ignore_sigterm,
        )
        return iter(loader)

    def __iter__(self) -> Iterator[dict]:
        return self

    def __next__(self) -> dict:
        if self._iter is None:
            self._iter = self._open()
        batch = next(self._iter)
        if ERROR in batch:
            self.close()
            raise PrismError(batch[ERROR])
        batch.pop(POSITION, None)
        self.step += 1
        return batch

    def close(self) -> None:
        """Stop the worker processes (a later batch starts them again, where the stream stands)."""
        it, self._iter = self._iter, None
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()

    def eval_batches(self, batch_size: int) -> Iterator[dict]:
        """The eval split in stored order, padded, read from its shards in this process."""
        if batch_size < 1:
            raise PrismError(f"eval batch size {batch_size} must be positive")
        source = ShardSource(self.data_dir, self.manifest, "eval")
        picked = []
        for shard in range(len(source.entries)):
            for sample in source.samples(shard):
                picked.append(sample)
                if len(picked) == batch_size:
                    yield assemble(source, picked, self.seq_len, 0)
                    picked = []
        if picked:
            yield assemble(source, picked, self.seq_len, 0)

    # --- resume ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "loader": "stream",
            "seed": self.seed,
            "step": self.step,
            "epoch": min(e for e, _ in self.positions(self.step)),
            "streams": [list(p) for p in self.positions(self.step)],
            "world_size": self.world_size,
            "workers": self.plan.workers,
            "shuffle_buffer": self.buffer,
            "layout": self.layout,
            "seq_len": self.seq_len,
            "global_batch": self.global_batch,
            "split": self.split,
            "samples": self.samples_total,
            "family": self.family,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue at `state`'s step: every stream's position is computed from it, nothing replayed."""
        mine = self.state_dict()
        for key in RESUME_KEYS:
            if state.get(key, "preload" if key == "loader" else None) != mine[key]:
                raise PrismError(
                    f"cannot resume: the saved data position has {key}={state.get(key)!r}, this loader {mine[key]!r}; "
                    "a streamed run resumes with the same data, seed, batch, ranks, data.workers and "
                    "data.shuffle_buffer (delete the run directory to start it over with others)"
                )
        self.close()
        self.step = int(state["step"])

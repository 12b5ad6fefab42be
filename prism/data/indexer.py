"""`prism data index`: write the index of shards someone else wrote (prism.data.index reads it).

The index reads every shard once (`prism.data.index.read_shard`, in `jobs` processes),
refuses duplicate keys and too many bad samples, and writes the manifest and, when every split
is small enough to preload (`decoded_max_mb`, as `data.preload_max_mb` measures it), the decoded
copies a run opens instead of the tars. Else every split gets `"decoded": false` in its manifest
entry and streams: its samples are still read, checked and counted, but none is kept, so the
index's memory and disk do not grow with it. See prism.data.index for what an index holds.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from prism.core.atomic import DiskFullError, disk_full, folder_kept, free_bytes, is_disk_full, replace_dir
from prism.core.errors import PrismError
from prism.core.families import FamilySpec, family_spec, manifest_fields
from prism.core.progress import progress
from prism.core.studylayout import MANIFEST, manifest_file
from prism.data.format import FORMAT_VERSION
from prism.data.index import (
    EVAL_FRACTION,
    KIND,
    MAX_BAD_FRACTION,
    WARN_LINES,
    BadSample,
    ShardRead,
    SplitOf,
    decode_sample,
    find_shards,
    full_mark,
    iter_samples,
    keep_tokenizer,
    lost_samples,
    read_shard,
    unspool,
)
from prism.data.manifest import manifest_as_written, write_manifest
from prism.data.options import DECODED_MAX_MB, decoded_mb, sample_bytes
from prism.data.reindex import spec_change
from prism.data.shardcount import shard_loss


def _read_task(task: tuple) -> ShardRead:
    return read_shard(*task)


def _map_shards(tasks: list[tuple], jobs: int):
    """read_shard over `tasks`, in order, in `jobs` forked processes (here when 1)."""
    if jobs <= 1 or len(tasks) <= 1:
        yield from map(_read_task, tasks)
        return
    import multiprocessing  # noqa: PLC0415 lazy: `prism --help` imports this module
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415 lazy: `prism --help` imports this module

    with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(_read_task, tasks)


def index(
    shards: str | Path,
    family: str,
    out: str | Path,
    eval_fraction: float = EVAL_FRACTION,
    max_bad_fraction: float = MAX_BAD_FRACTION,
    overwrite: bool = False,
    warn=None,
    jobs: int = 1,
    decoded_max_mb: float = DECODED_MAX_MB,
    spec: FamilySpec | None = None,
    new_spec: bool = False,
) -> dict:
    """Index `shards` for `family` into `out` (manifest.json + decoded copies) at `spec` (the shape samples
    are decoded to and the captions' tokenizer; None: the laptop default); return the manifest.

    `jobs` processes decode the shards (each shard in one); the result does not depend on it.
    When a split's decoded size (`options.decoded_mb`) is above `decoded_max_mb`, no split keeps a copy.
    An index at `out` made at another family, shape or tokenizer is replaced only with `new_spec`.
    """
    from prism.data import decoded  # noqa: PLC0415 lazy: `prism --help` imports this module

    spec = family_spec(family, spec)
    shards, out = Path(shards), Path(out)
    if not 0.0 < eval_fraction < 1.0:
        raise PrismError(f"eval fraction {eval_fraction} must be in (0, 1)")
    if not 0.0 <= max_bad_fraction < 1.0:
        raise PrismError(f"max bad fraction {max_bad_fraction} must be in [0, 1)")
    if not decoded_max_mb >= 0:
        raise PrismError(f"--decoded-max-mb {decoded_max_mb} must be at least 0 (0: no split keeps a decoded copy)")
    if out.exists() and not overwrite:
        raise PrismError(f"{out} already exists; pass --overwrite to replace it, or choose another --out")
    if out.exists() and not manifest_file(out).is_file():
        raise PrismError(f"{out} exists and is not a shard directory (no {MANIFEST}); refusing to replace it")
    if out.exists() and not new_spec:
        _refuse_spec_change(out, spec)
    warn = warn or (lambda line: print(line, file=sys.stderr))
    found = find_shards(shards)
    by_folder = "all" not in found
    out.parent.mkdir(parents=True, exist_ok=True)
    free, existed, needed = free_bytes(out.parent), out.exists(), None
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        limit = int(decoded_max_mb * 2**20 // sample_bytes(manifest_fields(spec)))
        read = _read_all(shards, found, spec, tmp / ".spool", eval_fraction, warn, jobs, limit)
        manifest, spooled, widths, first = read
        _refuse_too_many_bad(shards, manifest, max_bad_fraction, first)
        for split, entry in manifest["splits"].items():
            if not entry["samples"]:
                hint = "add shards to eval/" if by_folder else "raise --eval-fraction or add samples"
                raise PrismError(f"{shards}: the {split} split would hold no samples ({hint})")
        manifest["max_bad_fraction"] = max_bad_fraction
        manifest["decoded_max_mb"] = float(decoded_max_mb)  # with the rest, what `reindex_command` says back
        # Copies of all splits or of none: data with a split too large to preload streams (options.resolve),
        # the eval split too (from its shards), so a copy of the small eval split would never be read.
        fits = all(spooled[s] is not None and decoded_mb(manifest, s) <= decoded_max_mb for s in manifest["splits"])
        copied = list(manifest["splits"]) if fits else []
        for split in manifest["splits"]:
            if split not in copied:
                manifest["splits"][split]["decoded"] = False  # too large to preload: streamed
        # The index writes only decoded rows: spooled, then each split's copy beside them.
        sizes = {
            s: decoded.copy_size(manifest["splits"][s]["samples"], *widths[s], spec.modality_shape) for s in copied
        }
        needed = 64 * 1024 + sum(sizes.values()) + max(sizes.values(), default=0)
        for split in copied:
            decoded.save_spooled(tmp, manifest, split, spooled[split], widths[split])
            for part in spooled[split]:
                unspool(part)  # the copy holds them now: free the disk before the next split's
        shutil.rmtree(tmp / ".spool")
        keep_tokenizer(spec, tmp)
        write_manifest(tmp, manifest)
        os.chmod(tmp, 0o755)
        replace_dir(tmp, out)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if is_disk_full(err) or isinstance(err, DiskFullError):
            raise disk_full(out / "", needed, free, folder_kept(out, existed)) from None
        raise
    return manifest


def _refuse_spec_change(out: Path, spec: FamilySpec) -> None:
    """Refuse to replace an index made at another family, shape or tokenizer, naming both."""
    try:
        old = manifest_as_written(out)
    except (OSError, ValueError):
        return  # an unreadable manifest: nothing to keep
    line = spec_change(out, old, spec) if isinstance(old, dict) and old.get("kind") == KIND else None
    if line:
        raise PrismError(line)


def _refuse_too_many_bad(shards: Path, manifest: dict, max_bad_fraction: float, first: str | None) -> None:
    """Refuse in one line when more than `max_bad_fraction` of the samples the shards should hold are lost."""
    lost = lost_samples(manifest)
    total = lost + sum(s["samples"] for s in manifest["splits"].values())
    if total and lost > max_bad_fraction * total:
        raise PrismError(
            f"{shards}: {lost} of {total} samples are bad or lost ({100 * lost / total:.1f}% > "
            f"max_bad_fraction {100 * max_bad_fraction:g}%; first: {first}); repair or re-download the shards, "
            "or raise --max-bad-fraction"
        )


def _read_all(shards: Path, found: dict, spec: FamilySpec, spool: Path, eval_fraction, warn, jobs, limit: int):
    """Read every shard once, its good samples spooled under `spool` while their split holds at most
    `limit`: (the manifest but for `max_bad_fraction`, each split's spool prefixes in shard order
    (None past `limit`), its longest key and caption, the first bad sample or broken shard, in words)."""
    spool.mkdir()
    by_folder = "all" not in found
    splits = {"train": [], "eval": []}  # per split: the shard entries
    spooled = {"train": [], "eval": []}
    widths = {"train": [0, 0], "eval": [0, 0]}
    counts = Counter()  # per split: the good samples read so far
    blocks = []  # (shard name, split, key digests) in shard order: the uniqueness check
    bad, damaged, first = [], [], None
    tasks = [
        (shards, name, spec, SplitOf(folder if by_folder else None, eval_fraction), None, False, spool / f"{i:06d}")
        + (limit,)
        for i, (folder, name) in enumerate((f, n) for f, names in found.items() for n in names)
    ]
    read = progress(_map_shards(tasks, jobs), "reading shards", total=len(tasks))  # on a terminal only
    for shard, (_, name, _, rule, *_, prefix, _) in zip(read, tasks):
        folder = rule.folder or "all"
        for key, why in shard.bad:
            if len(bad) < WARN_LINES:
                warn(f"warning: shard {shards / name}, sample {key}: {why}; skipped")
            bad.append({"shard": name, "key": key, "reason": why})
            first = first or f"shard {name}, sample {key}: {why}"
        loss = shard_loss(shards / name, sum(shard.samples.values()), len(shard.bad), shard.truncated, shard.partial)
        if loss is not None:
            if len(damaged) < WARN_LINES:
                warn(f"warning: shard {shards / name} {loss.said}; re-download it, then re-index")
            damaged.append({"shard": name, "missing": loss.missing, "reason": loss.said})
            first = first or f"shard {name} {loss.said}"
        for split in shard.samples:
            blocks.append((name, split, shard.digests[split]))
            widths[split] = [max(a, b) for a, b in zip(widths[split], shard.widths[split])]
        _count_spooled(spooled, counts, shard, prefix, limit)
        # A shard is listed in every split it feeds (both, under the key-hash split), and in
        # one at least, so that verify knows it even when none of its samples is good.
        targets = {folder} if by_folder else (set(shard.samples) or {"train"})
        for split in sorted(targets):
            splits[split].append(
                {
                    "name": name,
                    "sha256": shard.sha256,
                    "bytes": shard.bytes,
                    "samples": shard.samples[split],
                    "tokens": int(shard.tokens[split]),
                    "bad": len(shard.bad),
                }
            )
    if len(bad) > WARN_LINES:
        warn(f"warning: {len(bad) - WARN_LINES} more bad samples skipped (all are listed in the index's manifest)")
    if len(damaged) > WARN_LINES:
        warn(f"warning: {len(damaged) - WARN_LINES} more shards broken (all are listed in the index's manifest)")
    _refuse_duplicates(shards, blocks, {task[1]: task for task in tasks})
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "family": spec.name,
        "seed": None,
        "source": f"webdataset shards in {shards}",
        "shards_dir": str(shards),
        "split": {"by": "folder"} if by_folder else {"by": "key_hash", "eval_fraction": eval_fraction},
        **manifest_fields(spec),
        "bad_samples": bad,
        "damaged_shards": damaged,
        "lm_ratio": 0.0,
        "lm_text": None,
        "splits": {
            s: {
                "samples": sum(e["samples"] for e in splits[s]),
                "tokens": sum(e["tokens"] for e in splits[s]),
                "shards": splits[s],
            }
            for s in splits
        },
    }
    return manifest, spooled, widths, first


def _count_spooled(spooled: dict, counts: Counter, shard: ShardRead, prefix: Path, limit: int) -> None:
    """Add the shard's spooled files (at `prefix`) to its splits', until a split holds more than `limit`
    samples: then it is marked full (its workers stop spooling it) and its files are deleted."""
    for split in shard.samples:
        counts[split] += shard.samples[split]
        if spooled[split] is not None and counts[split] > limit:
            full_mark(prefix.parent, split).touch()
            for earlier in spooled[split]:
                unspool(earlier)
            spooled[split] = None
        part = Path(f"{prefix}.{split}")
        if spooled[split] is None:
            unspool(part)  # spooled before its worker saw the mark
        else:
            spooled[split].append(part)


def _refuse_duplicates(shards: Path, blocks: list[tuple[str, str, bytearray]], tasks: dict[str, tuple]) -> None:
    """A key in two samples is refused, naming the first such sample in shard order and the shard of its twin.

    The check holds 16 bytes a sample (the keys' digests), not the keys; the key itself is
    read back from its shard (`tasks`: the read of each, by name).
    """
    if not blocks:
        return
    digests = np.concatenate([np.frombuffer(bytes(d), np.uint64).reshape(-1, 2) for _, _, d in blocks])
    order = np.lexsort((digests[:, 1], digests[:, 0]))  # stable: equal digests stay in shard order
    ranked = digests[order]
    twins = np.flatnonzero(np.all(ranked[1:] == ranked[:-1], axis=1))
    if not len(twins):
        return
    later = int(order[1:][twins].min())  # the first sample, in shard order, whose key came before
    earlier = int(np.flatnonzero(np.all(digests == digests[later], axis=1))[0])
    starts = np.cumsum([0] + [len(d) // 16 for _, _, d in blocks])

    def where(position: int) -> tuple[str, str, int]:
        block = int(np.searchsorted(starts, position, side="right")) - 1
        return blocks[block][0], blocks[block][1], position - int(starts[block])

    (first, _, _), (second, split, row) = where(earlier), where(later)
    key = _nth_key(tasks[second], split, row)
    raise PrismError(
        f"sample key {key!r} is in both shard {shards / first} and {shards / second}; "
        "keys must be unique across the shards"
    )


def _nth_key(task: tuple, split: str, row: int) -> str:
    """The key of the `row`-th good sample of `split` in a shard (`task`: its read), one sample held at a time."""
    root, name, spec, split_of = task[:4]
    with open(root / name, "rb") as fh:
        for key, members, cut in iter_samples(fh):
            if cut is not None:
                break
            try:
                decode_sample(members, spec)
            except BadSample:
                continue
            if split_of(key) == split:
                if not row:
                    return key
                row -= 1
    raise PrismError(f"shard {root / name} changed while it was indexed; index it again")

"""`prism data build`: a family's samples -> train/eval webdataset shards + manifest.json.

Honest by construction:
- train and eval are split by source item (an image, a series, a graph, a row,
  an episode), never by sample, with a seeded permutation of the item ids;
- the same seed gives the same bytes (fixed tar mtime, owner and mode; no
  timestamps in the manifest);
- the shards are written into a temporary directory beside `--out` and renamed
  into place at the end, so a reader never sees a half-written set.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from prism.core.atomic import DiskFullError, disk_full, folder_kept, free_bytes, is_disk_full, replace_dir
from prism.core.errors import PrismError
from prism.core.families import FAMILIES, FamilySpec, family_spec, manifest_fields
from prism.core.progress import progress
from prism.core.studylayout import MANIFEST
from prism.data import decoded
from prism.data.format import FORMAT_VERSION, sha256
from prism.data.index import keep_tokenizer, text_encoder
from prism.data.manifest import write_manifest
from prism.data.sources import Sample, lm_text, source_module
from prism.data.tarwriter import write_tar

EVAL_FRACTION = 0.1
SHARD_SAMPLES = 2000  # samples per tar shard
SOURCE_RE = re.compile(r"^[A-Za-z0-9-]+$")
TAR_MTIME = 0  # an int: a float mtime makes tarfile add a pax header per member


def split_sources(
    sources: list[str], seed: int, eval_fraction: float = EVAL_FRACTION, min_eval: int = 0
) -> tuple[set[str], set[str]]:
    """(train, eval) sets of source ids: a seeded permutation of the sorted ids, eval takes the head.

    The head is `eval_fraction` of the ids, extended while its entries of `sources` number
    fewer than `min_eval`: documents differ in size (one holds a thousand passages), so a
    tenth of them can hold too few passages for an eval split under some seeds.
    """
    ordered = sorted(set(sources))
    if len(ordered) < 2:
        raise PrismError(f"cannot split {len(ordered)} source item(s) into train and eval")
    perm = np.random.default_rng([seed, 1]).permutation(len(ordered))
    n_eval = min(len(ordered) - 1, max(1, round(eval_fraction * len(ordered))))
    if min_eval:
        sizes = Counter(sources)
        held = sum(sizes[ordered[i]] for i in perm[:n_eval])
        while held < min_eval and n_eval < len(ordered) - 1:
            held += sizes[ordered[perm[n_eval]]]
            n_eval += 1
    eval_ids = {ordered[i] for i in perm[:n_eval]}
    return set(ordered) - eval_ids, eval_ids


def check_sample(sample: Sample, shape: tuple[int, ...], family: str) -> None:
    if not SOURCE_RE.match(sample.source) or "--" in sample.source:
        raise PrismError(f"{family}: source id {sample.source!r} must be letters, digits and single '-'")
    m = sample.modality
    if m.dtype != np.float32 or m.shape != shape or not np.isfinite(m).all():
        raise PrismError(f"{family}: sample {sample.key} is {m.dtype} {m.shape}, expected finite float32 {shape}")


def encode_record(key: str, caption: str, source: str, modality: np.ndarray | None) -> dict:
    record = {"__key__": key, "json": json.dumps({"caption": caption, "source": source}, sort_keys=True).encode()}
    if modality is not None:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(modality, np.float32))
        record["npy"] = buf.getvalue()
    return record


def lm_text_record(items: list[tuple[str, str]], max_bytes: int) -> dict:
    """The manifest's account of the LM text: what `prism data verify` derives again and compares."""
    return {
        "sha256": lm_text.passages_digest(items),
        "passages": len(items),
        "max_bytes": max_bytes,
        "source": lm_text.SOURCE,
        "versions": lm_text.versions(),
    }


def lm_records(
    seed: int, counts: dict[str, int], max_bytes: int, items: list[tuple[str, str]] | None = None
) -> dict[str, list[dict]]:
    """Text-only records from the Python documentation (source ids `lm-...`), `counts[split]` per split.

    Documents, not passages, are split between train and eval (by the same rule
    as the modality items, eval taking documents until it holds `counts["eval"]`
    passages), so no held-out passage shares a document with training.
    """
    if items is None:
        items = lm_text.load_passages(max_bytes)
    sources = ["lm-" + re.sub(r"[^A-Za-z0-9]+", "-", doc).strip("-") for doc, _ in items]
    train_docs, eval_docs = split_sources(sources, seed, min_eval=counts.get("eval", 0))
    out: dict[str, list[dict]] = {}
    for split, docs in (("train", train_docs), ("eval", eval_docs)):
        pool = [i for i, source in enumerate(sources) if source in docs]
        n = counts.get(split, 0)
        if n > len(pool):
            raise PrismError(f"--lm-ratio asks for {n} {split} text passages, only {len(pool)} exist; lower it")
        picks = np.sort(np.random.default_rng([seed, 3, len(split)]).choice(len(pool), size=n, replace=False))
        out[split] = [
            encode_record(f"{sources[pool[i]]}__{j:06d}", items[pool[i]][1], sources[pool[i]], None)
            for j, i in enumerate(picks)
        ]
    return out


def tar_bytes(records: list[dict]) -> int:
    """The size of `records` as ustar members (a 512-byte header and 512-byte blocks each)."""
    return sum(512 + (len(v) + 511) // 512 * 512 for r in records for k, v in r.items() if k != "__key__")


def write_split(tmp: Path, split: str, records: list[dict]) -> list[dict]:
    """Write `records` in order to `split-NNNNNN.tar` shards; their manifest entries."""
    entries = []
    shards = range((len(records) + SHARD_SAMPLES - 1) // SHARD_SAMPLES)
    for k in progress(shards, f"writing {split} shards"):  # on a terminal only
        chunk = records[k * SHARD_SAMPLES : (k + 1) * SHARD_SAMPLES]
        members = [(f"{r['__key__']}.{ext}", r[ext]) for r in chunk for ext in sorted(r) if ext != "__key__"]
        path = tmp / (f"{split}-%06d.tar" % k)
        with open(path, "wb") as handle:
            write_tar(handle, members)
        os.chmod(path, 0o444)
        data = path.read_bytes()
        entries.append({"name": path.name, "sha256": sha256(data), "samples": len(chunk), "bytes": len(data)})
    return entries


def build(
    family: str,
    out: str | Path,
    seed: int = 0,
    overwrite: bool = False,
    lm_ratio: float = 0.0,
    spec: FamilySpec | None = None,
) -> dict:
    """Build `out` for `family` at `spec` (its text length and tokenizer; None: the laptop default);
    return the manifest. Refuses an existing `out` unless `overwrite`."""
    spec = family_spec(family, spec)
    module = source_module(family)
    out = Path(out)
    _check_request(spec, lm_ratio)
    _check_out(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)

    samples = list(progress(module.samples(seed), f"{family}: reading samples"))  # on a terminal only
    max_text = spec.text_len - 2  # BOS and EOS take two of text_len
    text = text_encoder(spec.vocab)
    truncated = 0
    for s in samples:
        check_sample(s, spec.modality_shape, family)
    keys = [s.key for s in samples]
    if len(set(keys)) != len(keys):
        raise PrismError(f"{family}: the source produced duplicate sample keys")
    train_ids, eval_ids = split_sources([s.source for s in samples], seed)

    splits: dict[str, list[dict]] = {"train": [], "eval": []}
    for s in progress(samples, "encoding samples"):
        caption, _, cut = text.fit(s.caption, max_text)
        truncated += cut
        split = "eval" if s.source in eval_ids else "train"
        splits[split].append(encode_record(s.key, caption, s.source, s.modality))
    lm_counts, lm_sources, lm_text_info = _add_lm_text(splits, seed, lm_ratio, spec.tokens_per_sample - 2)
    rng = np.random.default_rng([seed, 2])
    for split, records in splits.items():
        order = rng.permutation(len(records))
        splits[split] = [records[i] for i in order]

    free = free_bytes(out.parent)
    existed = out.exists()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        manifest = {
            "format_version": FORMAT_VERSION,
            "family": family,
            "seed": seed,
            "source": module.SOURCE,
            "source_versions": module.versions(),
            **manifest_fields(spec),
            "eval_fraction": EVAL_FRACTION,
            "captions_truncated": truncated,
            "lm_ratio": lm_ratio,
            "lm_samples": lm_counts,
            "lm_text": lm_text_info,
            "splits": {},
            "source_items": {
                "train": sorted(train_ids | lm_sources["train"]),
                "eval": sorted(eval_ids | lm_sources["eval"]),
            },
        }
        for split, records in splits.items():
            manifest["splits"][split] = {"samples": len(records), "shards": write_split(tmp, split, records)}
        decoded.save(tmp, manifest)  # verifies what was written; runs then open the decoded copy
        keep_tokenizer(spec, tmp)
        write_manifest(tmp, manifest)
        os.chmod(tmp, 0o755)
        replace_dir(tmp, out)  # --overwrite: the new set in, the old one dropped
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        # The decoded copy's own write names its temporary path: the build's message names the build.
        if is_disk_full(err) or isinstance(err, DiskFullError):
            raise disk_full(
                out / "", build_bytes(splits, spec.modality_shape), free, folder_kept(out, existed)
            ) from None
        raise
    return manifest


def _check_request(spec: FamilySpec, lm_ratio: float) -> None:
    """Refuse a text-only share out of range, and an image shape the offline sources are not made at."""
    if not 0.0 <= lm_ratio < 1.0:
        raise PrismError(f"--lm-ratio {lm_ratio} must be in [0, 1)")
    offline = FAMILIES[spec.name].modality_shape
    if spec.modality_shape != offline:
        raise PrismError(
            f"shapes.{spec.name}: the offline {spec.name} data is {offline}; other image "
            "sizes, channels and patches are for your own shards (data.shards): keep only text_len here"
        )


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse an existing `out` unless `overwrite`, and never replace a folder that is not a shard directory."""
    if out.exists():
        if not overwrite:
            raise PrismError(f"{out} already exists; pass --overwrite to replace it, or choose another --out")
        if not (out / MANIFEST).is_file():
            raise PrismError(f"{out} exists and is not a shard directory (no {MANIFEST}); refusing to replace it")


def _add_lm_text(splits: dict[str, list[dict]], seed: int, lm_ratio: float, lm_bytes: int):
    """Add text-only passages to both splits at the same ratio, so the eval loss measures what training
    optimises; (passages per split, their source ids per split, the LM text's record or None)."""
    lm_counts = {split: round(lm_ratio / (1.0 - lm_ratio) * len(records)) for split, records in splits.items()}
    lm_sources: dict[str, set[str]] = {"train": set(), "eval": set()}
    if not sum(lm_counts.values()):
        return lm_counts, lm_sources, None
    items = lm_text.load_passages(lm_bytes)
    info = lm_text_record(items, lm_bytes)
    for split, records in lm_records(seed, lm_counts, lm_bytes, items).items():
        splits[split] += records
        lm_sources[split] = {json.loads(r["json"])["source"] for r in records}
    return lm_counts, lm_sources, info


def build_bytes(splits: dict[str, list[dict]], modality_shape: tuple[int, ...]) -> int:
    """About what a build writes: every split's shards and its decoded copy, and the manifest."""
    total = 0
    for records in splits.values():
        captions = [json.loads(r["json"])["caption"] for r in records]
        shards = -(-len(records) // SHARD_SAMPLES)  # each ends in zero blocks padded to a 10 KiB record
        total += tar_bytes(records) + shards * 10240
        total += decoded.copy_bytes([r["__key__"] for r in records], captions, modality_shape)
    return total + 64 * 1024

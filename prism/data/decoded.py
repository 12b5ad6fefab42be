"""A decoded copy of each split beside its shards, so that opening the data is not a run's start-up.

Decoding a split (every tar member, every JSON caption, every shard's sha256) costs
seconds of one core, and every training job opens its splits: a study of dozens of
short jobs would spend minutes there (docs/measurements.md). `prism data build`
therefore decodes each split once through `manifest.read_split`, which verifies every
shard it has just written, and saves the records as one uncompressed .npz under
`DATA_DIR/.decoded/`, stamped with the split's manifest entry and every shard's
size and modification time. `load_split` takes the copy only while every stamp
still matches, so a replaced or rewritten shard is decoded (and verified) from the
tar again; `prism data verify` always reads the shards.

`prism data index` writes one only of a split small enough to preload (`--decoded-max-mb`);
a larger split's manifest entry says `"decoded": false`, and it streams.

Only the build writes the copies, before its directory gets its final name: a
training job never writes into the data directory, whose contents (and so its
modification time, which Snakemake compares with every run's outputs) stay as the
build left them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from prism.core.atomic import write_atomic
from prism.data.manifest import Records, read_split, shard_path
from prism.data.options import has_decoded_copy, no_copy_error

DECODED_DIR = ".decoded"
# Bump when the saved arrays change meaning: older copies are then decoded again.
CACHE_VERSION = 1


def cache_path(data_dir: Path, split: str) -> Path:
    return data_dir / DECODED_DIR / f"{split}.npz"


def stamp(data_dir: Path, manifest: dict, split: str) -> str:
    """What the copy must have been made from: the split's manifest entry and each shard's size and mtime."""
    h = hashlib.sha256()
    described = {k: manifest[k] for k in ("format_version", "family", "seed", "modality_shape")}
    h.update(json.dumps([CACHE_VERSION, split, described, manifest["splits"][split]], sort_keys=True).encode())
    for entry in manifest["splits"][split]["shards"]:
        st = shard_path(data_dir, manifest, entry).stat()
        h.update(f"\0{entry['name']}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()


def _read_copy(path: Path, expected: str) -> Records | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["stamp"]) != expected:
                return None
            return Records(z["keys"].tolist(), z["captions"].tolist(), z["modality"], z["has_modality"])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None  # missing, from another version, or damaged: decode the shards again


def copy_bytes(keys: list[str], captions: list[str], modality_shape: tuple[int, ...] | list[int]) -> int:
    """About the size of a split's decoded copy (uncompressed .npz, fixed-width strings, float32
    modality for every sample, text-only ones included): what a build needs beside its shards."""
    key_width, caption_width = max([len(k) for k in keys] or [1]), max([len(c) for c in captions] or [1])
    return copy_size(len(keys), key_width, caption_width, modality_shape)


def copy_size(samples: int, key_width: int, caption_width: int, modality_shape: tuple[int, ...] | list[int]) -> int:
    """`copy_bytes` from the counts alone: samples and the longest key and caption (characters)."""
    per_modality = 4 * int(np.prod(modality_shape))
    return samples * (per_modality + 4 * max(1, caption_width) + 4 * max(1, key_width) + 1) + 4096


def save(data_dir: str | Path, manifest: dict) -> None:
    """Decode (and so verify) every split of a freshly written shard directory and save its copy."""
    data_dir = Path(data_dir)
    for split in manifest["splits"]:
        save_records(data_dir, manifest, split, read_split(data_dir, manifest, split))


def save_records(data_dir: str | Path, manifest: dict, split: str, records: Records) -> None:
    """Save `records`, just decoded from the shards of `split`, as its copy (`prism data index` too)."""
    data_dir = Path(data_dir)
    value = stamp(data_dir, manifest, split)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(
                fh,
                stamp=np.array(value),
                keys=np.array(records.keys),
                captions=np.array(records.captions),
                modality=records.modality,
                has_modality=records.has_modality,
            )

    write_atomic(cache_path(data_dir, split), write)


CHUNK = 65_536  # rows per write of a streamed array


def _write_npy(zf: zipfile.ZipFile, name: str, dtype: np.dtype, shape: tuple[int, ...], chunks: Iterable) -> None:
    """One .npy member of an .npz (what np.savez writes), its rows written chunk by chunk."""
    with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_1_0(fh, header)
        for chunk in chunks:
            if isinstance(chunk, Path):
                with chunk.open("rb") as src:
                    shutil.copyfileobj(src, fh, 1 << 20)
            else:
                fh.write(np.ascontiguousarray(chunk, dtype).tobytes())


def _lines(paths: list[Path]):
    """The JSON strings of `paths` (one per line), in CHUNK-sized lists."""
    batch = []
    for path in paths:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                batch.append(json.loads(line))
                if len(batch) == CHUNK:
                    yield batch
                    batch = []
    if batch:
        yield batch


def save_spooled(data_dir: str | Path, manifest: dict, split: str, parts: list[Path], widths: tuple[int, int]) -> None:
    """The copy of `split` from rows spooled to disk as they were decoded (`prism data index`).

    `parts` are the spool prefixes of the split's shards in order, each with `.keys` and
    `.captions` (a JSON string a line) and `.modality` (float32 rows); `widths` are the
    longest key's and caption's characters. The same .npz as `save_records` writes, but
    a chunk of rows at a time: memory does not grow with the split.
    """
    data_dir = Path(data_dir)
    value = stamp(data_dir, manifest, split)
    count = manifest["splits"][split]["samples"]
    shape = (count, *manifest["modality_shape"])
    text = [np.dtype(f"<U{max(1, w)}") for w in widths]

    def write(tmp: str) -> None:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            with zf.open("stamp.npy", "w") as fh:
                np.lib.format.write_array(fh, np.array(value))
            _write_npy(zf, "keys", text[0], (count,), _lines([Path(f"{p}.keys") for p in parts]))
            _write_npy(zf, "captions", text[1], (count,), _lines([Path(f"{p}.captions") for p in parts]))
            _write_npy(zf, "modality", np.dtype(np.float32), shape, [Path(f"{p}.modality") for p in parts])
            ones = (np.ones(min(CHUNK, count - i), bool) for i in range(0, count, CHUNK))
            _write_npy(zf, "has_modality", np.dtype(bool), (count,), ones)

    write_atomic(cache_path(data_dir, split), write)


def load_split(data_dir: str | Path, manifest: dict, split: str) -> Records:
    """The split's records: from the decoded copy when its stamps match, else decoded from the shards.

    A split indexed without a copy (too large to preload) is refused, not decoded whole into memory.
    """
    data_dir = Path(data_dir)
    if not has_decoded_copy(manifest, split):
        raise no_copy_error(data_dir, manifest)
    path = cache_path(data_dir, split)
    if path.is_file():
        try:
            value = stamp(data_dir, manifest, split)
        except (OSError, KeyError, TypeError):
            value = None  # a shard or a manifest entry is missing: read_split names it
        if value is not None and (records := _read_copy(path, value)) is not None:
            return records
    return read_split(data_dir, manifest, split)

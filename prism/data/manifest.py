"""The shard directory's manifest and the one reader every consumer goes through.

Whoever reads shards (the build's decoded copy, the loader when that copy does not
match the shards, `prism data verify`) reads them with `read_split`: it checks the
manifest's sha256 and sample count of every shard and decodes every record, so a
flipped byte, a truncated tar or a wrong count stops with a PrismError naming the
shard (and the sample key where known). Nothing is skipped.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from prism.core.errors import PrismError
from prism.core.studylayout import MANIFEST, manifest_file
from prism.data.format import FORMAT_VERSION, Records, sha256
from prism.data.index import read_index_split, verify_index
from prism.data.tarreader import TarCut, iter_tar

SPLITS = ("train", "eval")
SHARD_RE = re.compile(r"^(train|eval)-\d{6}\.tar$")
KEY_RE = re.compile(r"^[A-Za-z0-9-]+__\d{4,}$")


def npy_header(shape: tuple[int, ...]) -> bytes:
    """The exact .npy header np.save writes for a float32 C-order array of `shape`."""
    buf = io.BytesIO()
    np.save(buf, np.zeros(shape, np.float32))
    return buf.getvalue()[: -int(np.prod(shape)) * 4]


def manifest_as_written(data_dir: str | Path) -> Any:
    """A data folder's manifest.json as written, unchecked: for the readers of a field or two (the planner's
    split size and shape) that must not refuse what `read_manifest` would. OSError or ValueError where it
    cannot be read or parsed."""
    return json.loads(manifest_file(data_dir).read_text())


def write_manifest(data_dir: str | Path, manifest: dict) -> None:
    """A data folder's manifest.json, as every writer of one (the build, the index) writes it."""
    manifest_file(data_dir).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def read_manifest(data_dir: str | Path, family: str | None = None) -> dict:
    """The checked manifest of a shard directory; with `family`, one of another family is refused."""
    data_dir = Path(data_dir)
    path = data_dir / MANIFEST
    if not data_dir.is_dir():
        raise PrismError(
            f"shard directory {data_dir} does not exist; build it with `prism data build --out {data_dir}`"
        )
    if not path.is_file():
        raise PrismError(
            f"{path} is missing: {data_dir} is not a finished shard directory; rebuild it with `prism data build`"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PrismError(f"{path} is not valid JSON ({err}); rebuild the shard directory") from None
    for key in ("format_version", "family", "seed", "splits", "modality_shape", "n_modality_tokens", "text_len"):
        if key not in manifest:
            raise PrismError(f"{path} has no key {key!r}; rebuild the shard directory")
    if manifest["format_version"] != FORMAT_VERSION:
        raise PrismError(
            f"{path} has format_version {manifest['format_version']}, this prism reads {FORMAT_VERSION}; rebuild it"
        )
    listed = {s["name"] for split in manifest["splits"].values() for s in split["shards"]}
    extra = sorted(p.name for p in data_dir.glob("*.tar") if p.name not in listed)
    if extra:
        raise PrismError(
            f"{data_dir} holds shards the manifest does not list: {', '.join(extra)}; rebuild the directory"
        )
    if family is not None and manifest["family"] != family:
        raise PrismError(f"{data_dir} holds family {manifest['family']!r}, not {family!r}")
    return manifest


def shard_path(data_dir: str | Path, manifest: dict, entry: dict) -> Path:
    """Where a listed shard lies: in the built directory, or under an index's shards directory."""
    return Path(manifest.get("shards_dir") or data_dir) / entry["name"]


def read_split(data_dir: str | Path, manifest: dict, split: str) -> Records:
    """Every record of `split`, after checking each shard's hash and count against the manifest."""
    data_dir = Path(data_dir)
    if split not in manifest["splits"]:
        raise PrismError(f"{data_dir / MANIFEST} has no split {split!r}; splits: {', '.join(manifest['splits'])}")
    if manifest.get("kind") == "index":  # the user's own shards, read where they lie
        return read_index_split(data_dir, manifest, split)
    shape = tuple(manifest["modality_shape"])
    header = npy_header(shape)
    nbytes = int(np.prod(shape)) * 4
    keys: list[str] = []
    captions: list[str] = []
    arrays: list[bytes] = []
    has_mod: list[bool] = []
    zero = bytes(nbytes)
    for entry in manifest["splits"][split]["shards"]:
        path = data_dir / entry["name"]
        if not SHARD_RE.match(entry["name"]):
            raise PrismError(f"{data_dir / MANIFEST} lists a bad shard name {entry['name']!r}")
        try:
            data = path.read_bytes()
        except OSError as err:
            raise PrismError(f"shard {path} cannot be read ({err.strerror}); rebuild the shard directory") from None
        if sha256(data) != entry["sha256"]:
            raise PrismError(
                f"shard {path} does not match its sha256 in the manifest (corrupt, truncated or replaced); "
                "rebuild the shard directory"
            )
        count = 0
        for key, members in iter_records(path, data):
            if not KEY_RE.match(key):
                raise PrismError(f"shard {path}, sample {key!r}: malformed key")
            try:
                meta = json.loads(members["json"])
                caption = meta["caption"]
            except (KeyError, ValueError, TypeError):
                raise PrismError(f"shard {path}, sample {key}: missing or bad .json member") from None
            if "npy" in members:
                blob = members["npy"]
                if len(blob) != len(header) + nbytes or blob[: len(header)] != header:
                    raise PrismError(f"shard {path}, sample {key}: .npy is not float32 {list(shape)}")
                arrays.append(blob[len(header) :])
                has_mod.append(True)
            else:
                arrays.append(zero)
                has_mod.append(False)
            keys.append(key)
            captions.append(caption)
            count += 1
        if count != entry["samples"]:
            raise PrismError(f"shard {path} holds {count} samples, the manifest says {entry['samples']}; rebuild it")
    if len(keys) != manifest["splits"][split]["samples"]:
        raise PrismError(
            f"{data_dir} split {split} holds {len(keys)} samples, the manifest says "
            f"{manifest['splits'][split]['samples']}"
        )
    modality = np.frombuffer(b"".join(arrays), np.float32).reshape((len(keys), *shape))
    return Records(keys, captions, modality, np.array(has_mod, bool))


def iter_records(path: Path, data: bytes):
    """(key, {extension: bytes}) per sample, in tar order; a broken tar names the shard and last key.

    The strict reader: a prism build writes checksummed ustar regular files and nothing else.
    """
    key, members, last = None, {}, None
    try:
        for name, payload in iter_tar(data, strict=True):
            if "." not in name:
                raise PrismError(f"shard {path}: unexpected tar member {name!r}")
            base, ext = name.split(".", 1)
            if base != key:
                if key is not None:
                    yield key, members
                key, members = base, {}
            last = base
            members[ext] = payload
    except TarCut as cut:
        where = f" after sample {last}" if last else ""
        raise PrismError(f"shard {path} is not a readable tar{where} ({cut}); rebuild the shard directory") from None
    if key is not None:
        yield key, members


def verify(data_dir: str | Path) -> dict:
    """Check every shard of every split against the manifest, and the LM text against the
    documentation it came from; a summary when all is well."""
    manifest = read_manifest(data_dir)
    if manifest.get("kind") == "index":
        return verify_index(data_dir, manifest)
    summary = {"data_dir": str(data_dir), "family": manifest["family"], "seed": manifest["seed"]}
    text_only: list[str] = []
    for split in manifest["splits"]:
        records = read_split(data_dir, manifest, split)
        summary[split] = {"samples": len(records.keys), "shards": len(manifest["splits"][split]["shards"])}
        text_only += [c for c, has in zip(records.captions, records.has_modality) if not has]
    if text_only or manifest.get("lm_text"):
        summary["lm_text"] = verify_lm_text(data_dir, manifest, text_only)
    return summary


def verify_lm_text(data_dir: str | Path, manifest: dict, captions: list[str]) -> str:
    """The text-only samples are passages of the documentation the manifest names, hashed alike.

    The passages are derived again from this interpreter's installed documentation;
    a manifest without the record, other package versions, another digest, or a
    caption that is no such passage is an error.
    """
    from prism.data.sources import lm_text  # noqa: PLC0415 lazy: `prism --help` imports this module

    path = Path(data_dir) / MANIFEST
    record = manifest.get("lm_text")
    if not isinstance(record, dict) or not {"sha256", "max_bytes", "versions"} <= record.keys():
        raise PrismError(f"{path} holds text-only samples but no record of the LM text's sha256; rebuild it")
    here = lm_text.versions()
    if record["versions"] != here:
        raise PrismError(
            f"{path}: the LM text was built from {record['versions']}, this environment has {here}; "
            "its passages cannot be checked here (verify where it was built, or rebuild)"
        )
    items = lm_text.load_passages(int(record["max_bytes"]))
    digest = lm_text.passages_digest(items)
    if digest != record["sha256"]:
        raise PrismError(
            f"{path}: the LM text's sha256 {record['sha256'][:12]} is not that of the documentation "
            f"installed here ({digest[:12]}); the shards were built from other text: rebuild them"
        )
    known = {p for _, p in items}
    stray = next((c for c in captions if c not in known), None)
    if stray is not None:
        raise PrismError(f"{path}: text-only sample {stray[:40]!r} is not a passage of the documentation; rebuild")
    return f"sha256 {digest[:12]}, {len(captions)} passages checked"


def data_spec(data_dir: str | Path, family: str | None = None):
    """The family spec (shape, tokenizer) a data directory was made at, from its manifest."""
    from prism.core.families import spec_from_manifest  # noqa: PLC0415 lazy: families imports the tokenizer

    return spec_from_manifest(read_manifest(data_dir, family), data_dir)

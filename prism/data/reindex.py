"""How an index was made, said back: the command that makes it again, and what it was made at.

Every message that advises a re-index prints `reindex_command`: the family, every shape key,
the tokenizer file, the split and the limits the manifest records, paths shell-quoted, so the
advice run as printed makes the same index (the same manifest) instead of one at the laptop
default. `prism data index --overwrite` over an index made at another family, shape or
tokenizer refuses with `spec_change` unless told so (`--new-spec`).
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from prism.core.families import TOKENIZER_FILE, FamilySpec, shape_keys, shape_of, spec_from_manifest


def tokenizer_path(data_dir: str | Path, manifest: dict) -> str | None:
    """The tokenizer file that re-makes the index: the one it was given while it still holds what
    was used, else the copy kept beside the manifest (None: bytes)."""
    record = manifest.get("tokenizer")
    if not record:
        return None
    source = record.get("source")
    if source and Path(source).is_file() and hashlib.sha256(Path(source).read_bytes()).hexdigest() == record["sha256"]:
        return source
    return str(Path(data_dir) / record.get("file", TOKENIZER_FILE))


def reindex_args(data_dir: str | Path, manifest: dict, **limits) -> list[str]:
    """`prism data index` and its flags that make the index at `data_dir` again as it is;
    `limits` (e.g. decoded_max_mb=) replace what the manifest records."""
    family = manifest["family"]
    args = ["prism", "data", "index", str(manifest.get("shards_dir", "DIR")), "--family", family]
    args += ["--out", str(data_dir), "--overwrite"]
    shape = shape_of(spec_from_manifest(manifest, data_dir))
    for key in shape_keys(family):
        args += ["--" + key.replace("_", "-"), str(shape[key])]
    tokenizer = tokenizer_path(data_dir, manifest)
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    split = manifest.get("split") or {}
    recorded = {
        "eval_fraction": split.get("eval_fraction"),
        "max_bad_fraction": manifest.get("max_bad_fraction"),
        "decoded_max_mb": manifest.get("decoded_max_mb"),
    } | limits
    for key, value in recorded.items():
        if value is not None:
            args += ["--" + key.replace("_", "-"), str(value)]
    return args


def reindex_command(data_dir: str | Path, manifest: dict, **limits) -> str:
    """`reindex_args` as one shell line, every path quoted."""
    return shlex.join(reindex_args(data_dir, manifest, **limits))


def spec_words(spec: FamilySpec) -> str:
    """A spec in a few words: family, shape keys, tokenizer (its file and sha256) or bytes."""
    shape = ", ".join(f"{k} {v}" for k, v in shape_of(spec).items())
    tok = "bytes" if spec.vocab.is_bytes else f"tokenizer {spec.vocab.file} (sha256 {spec.vocab.sha256[:12]})"
    return f"{spec.name} at {shape}, {tok}"


def same_spec(a: FamilySpec, b: FamilySpec) -> bool:
    """Whether two specs make the same samples: family, shape and tokenizer content."""
    return (a.name, shape_of(a), a.vocab.sha256, a.vocab.size) == (b.name, shape_of(b), b.vocab.sha256, b.vocab.size)


def spec_change(out: Path, old: dict, spec: FamilySpec) -> str | None:
    """The line refusing to overwrite the index at `out` (manifest `old`) at another spec, or None."""
    try:
        was = spec_from_manifest(old, out)
    except (KeyError, TypeError, ValueError):
        return None  # not a manifest this prism reads: replaced as before
    if same_spec(was, spec):
        return None
    return (
        f"{out} was indexed as {spec_words(was)}; this command indexes {spec_words(spec)}. Pass --new-spec to "
        f"replace it at the new spec, or re-index it as it was: {reindex_command(out, old)}"
    )

"""`prism data index`: a manifest for shards someone else wrote, read where they lie.

A cluster study trains on the user's own webdataset shards (img2dataset's layout for
text_image), far too many to copy into the study. The index reads every shard once:
its sha256, every sample decoded the way the loader will decode it, the tokens each
sample costs, and which samples are bad (no caption, an image that does not decode, a
tar cut short). It writes the manifest the rest of the pipeline already reads
(`manifest.json`: the planner's epochs, the runs' data fingerprint) with the shards'
absolute directory, plus the decoded copy a run opens instead of the tars. The shards
are never copied or rewritten.

Bad samples are skipped with a warning naming the shard and the key; the loader
skips the same ones (the shards' sha256 fixes what it reads), so a bad sample never
stops a run. Above `max_bad_fraction` of all samples the index refuses: that many bad
samples is a broken download, not noise.

The held-out split is either a separate folder (`DIR/train/*.tar` and `DIR/eval/*.tar`)
or a fixed fraction of the keys chosen by their hash, the same whatever the seed or the
order of the shards, so the eval set does not move when shards are added.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prism.atomic import DiskFullError, disk_full, folder_kept, free_bytes, is_disk_full, replace_dir
from prism.data.manifest import FORMAT_VERSION, MANIFEST, ZERO_BLOCK, Records, sha256
from prism.errors import PrismError
from prism.families import FamilySpec, family_spec
from prism.progress import progress

KIND = "index"
EVAL_FRACTION = 0.05
MAX_BAD_FRACTION = 0.01
IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")
WARN_LINES = 20  # bad samples named one per line; the rest are counted


# ---- reading foreign tars ------------------------------------------------------------------


class TarCut(Exception):
    """The archive stops being readable here (truncated, or a damaged header)."""


def _number(field: bytes) -> int:
    """A tar numeric field: octal text, or GNU base-256 when the high bit is set."""
    if field and field[0] & 0x80:
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0")[0].strip()
    return int(text, 8) if text else 0


def _pax(payload: bytes) -> dict[str, str]:
    """The records of a pax extended header ("LEN key=value\\n" each)."""
    out, pos = {}, 0
    while pos < len(payload):
        space = payload.find(b" ", pos)
        if space < 0:
            break
        length = int(payload[pos:space])
        key, _, value = payload[space + 1 : pos + length - 1].partition(b"=")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        pos += length
    return out


def iter_members(data: bytes):
    """(name, bytes) of each regular file of a tar, in order; TarCut where it stops being readable.

    Reads what Python's tarfile writes (under webdataset's `TarWriter` and img2dataset):
    ustar and GNU headers, pax extended headers (per member and global), GNU long names;
    directories, links and other entries are passed over.
    """
    pos, pending_name, pending_size = 0, None, None
    while True:
        header = data[pos : pos + 512]
        if len(header) < 512:
            raise TarCut("truncated: no end-of-archive marker")
        if header == ZERO_BLOCK:
            return
        stored = header[148:156].split(b"\0")[0].strip()
        try:
            ok = bool(stored) and int(stored, 8) == sum(header) - sum(header[148:156]) + 256
        except ValueError:
            ok = False
        if not ok:
            raise TarCut(f"bad header checksum at byte {pos}")
        kind = header[156:157]
        size = _number(header[124:136])
        if pending_size is not None and kind not in (b"x", b"g", b"L"):
            size, pending_size = pending_size, None
        body = pos + 512
        if body + size > len(data):
            raise TarCut("truncated: a member is cut short")
        payload = data[body : body + size]
        pos = body + (size + 511) // 512 * 512
        if kind == b"x":
            records = _pax(payload)
            pending_name = records.get("path", pending_name)
            if "size" in records:
                pending_size = int(records["size"])
            continue
        if kind == b"L":
            pending_name = payload.split(b"\0")[0].decode("utf-8", "replace")
            continue
        if kind == b"g":
            continue
        name = pending_name
        pending_name = None
        if name is None:
            name = header[:100].split(b"\0")[0].decode("utf-8", "replace")
            if header[257:263] == b"ustar\x00" and header[345] != 0:  # POSIX ustar: a prefix field
                name = header[345:500].split(b"\0")[0].decode("utf-8", "replace") + "/" + name
        if kind in (b"0", b"\0", b"7"):
            yield name, payload


def split_name(name: str) -> tuple[str, str]:
    """(key, extension) as webdataset splits them: the key ends at the basename's first dot."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (ext.lower() if dot else "")


def iter_samples(data: bytes):
    """(key, {ext: bytes}) per sample in tar order, then (None, why) if the tar is cut or damaged.

    Members of one sample are consecutive (webdataset's grouping). On a cut, the sample
    being read is returned with the reason, as it may have lost members.
    """
    key, members = None, {}
    try:
        for name, payload in iter_members(data):
            k, ext = split_name(name)
            if k != key:
                if key is not None:
                    yield key, members, None
                key, members = k, {}
            members[ext] = payload
    except TarCut as cut:
        yield key, members, str(cut)
        return
    if key is not None:
        yield key, members, None


# ---- decoding one sample -------------------------------------------------------------------


class BadSample(Exception):
    """Why a sample cannot be trained on."""


# The format a member's extension names: PIL then tries that decoder alone (probing every
# format was a third of the time per small image). A misnamed image is still opened.
PIL_FORMATS = {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "webp": "WEBP"}


def decode_image(blob: bytes, shape: tuple[int, ...], ext: str | None = None) -> np.ndarray:
    """An encoded image -> float32 `shape` (C, H, W) in [0, 1]: centre-cropped to H:W, area-resized.

    JPEGs are decoded at the smallest scale still at least H x W (PIL's draft mode), so
    an img2dataset 256x256 image costs about what a thumbnail does.
    """
    from PIL import Image, UnidentifiedImageError

    channels, height, width = shape
    mode = "L" if channels == 1 else "RGB"
    try:
        try:
            im = Image.open(io.BytesIO(blob), formats=[PIL_FORMATS[ext]] if ext in PIL_FORMATS else None)
        except UnidentifiedImageError:
            im = Image.open(io.BytesIO(blob))
        with im:
            if im.format == "JPEG":
                im.draft(mode, (width, height))
            im = im.convert(mode)
            w, h = im.size
            if w * height > h * width:  # wider than the target: crop the sides
                cw = max(1, round(h * width / height))
                im = im.crop(((w - cw) // 2, 0, (w - cw) // 2 + cw, h))
            elif w * height < h * width:
                ch = max(1, round(w * height / width))
                im = im.crop((0, (h - ch) // 2, w, (h - ch) // 2 + ch))
            im = im.resize((width, height), Image.Resampling.BOX)
            arr = np.asarray(im, np.float32) / 255.0
    except Exception as err:  # noqa: BLE001 - PIL raises many kinds for a bad image
        raise BadSample(f"image does not decode ({type(err).__name__}: {err})") from None
    return arr[None] if channels == 1 else np.ascontiguousarray(arr.transpose(2, 0, 1))


def decode_array(blob: bytes, spec: FamilySpec) -> np.ndarray:
    """A `.npy` member -> the family's float32 array (series resampled, graphs zero-padded)."""
    try:
        arr = np.load(io.BytesIO(blob), allow_pickle=False).astype(np.float32)
    except Exception as err:  # noqa: BLE001 - any unreadable .npy is one bad sample
        raise BadSample(f".npy does not load ({type(err).__name__})") from None
    shape = spec.modality_shape
    if spec.name == "text_ts":
        from prism.data.sources.ts import CHANNELS, resample, to_window

        if arr.ndim == 1:
            arr = arr[None]
        if arr.ndim != 2 or arr.shape[1] < 2:
            raise BadSample(f".npy is {list(arr.shape)}, expected [channels, steps]")
        x = np.zeros((CHANNELS, arr.shape[1]), np.float64)
        x[: min(CHANNELS, len(arr))] = arr[:CHANNELS]
        arr = to_window(resample(x, shape[1]) if arr.shape[1] != shape[1] else x)
    elif spec.name == "text_graph":
        n = arr.shape[0] if arr.ndim == 2 else -1
        if arr.ndim != 2 or arr.shape[1] != n or n > shape[0]:
            raise BadSample(f".npy is {list(arr.shape)}, expected a square adjacency of at most {shape[0]} nodes")
        padded = np.zeros(shape, np.float32)
        padded[:n, :n] = arr
        arr = padded
    if arr.shape != shape or not np.isfinite(arr).all():
        raise BadSample(f".npy is {arr.dtype} {list(arr.shape)}, expected finite float32 {list(shape)}")
    return arr


def caption_of(members: dict[str, bytes]) -> str:
    if "txt" in members:
        try:
            text = members["txt"].decode("utf-8").strip()
        except UnicodeDecodeError:
            raise BadSample("caption (.txt) is not UTF-8") from None
    elif "json" in members:
        try:
            text = str(json.loads(members["json"]).get("caption") or "").strip()
        except (ValueError, AttributeError):
            text = ""
    else:
        text = ""
    if not text:
        raise BadSample("no caption (.txt)")
    return text


def decode_sample(members: dict[str, bytes], spec: FamilySpec) -> tuple[str, np.ndarray]:
    """(caption cut to the family's text length, modality array); BadSample says why not."""
    from prism.data.shards import fit_caption

    caption, _ = fit_caption(caption_of(members), spec.text_len - 2)
    if spec.name == "text_image":
        ext = next((e for e in IMAGE_EXTS if e in members), None)
        if ext is None:
            raise BadSample(f"no image ({'|'.join(IMAGE_EXTS)})")
        return caption, decode_image(members[ext], spec.modality_shape, ext)
    if "npy" not in members:
        raise BadSample("no .npy array")
    return caption, decode_array(members["npy"], spec)


def is_eval_key(key: str, fraction: float) -> bool:
    """Whether `key` is held out: its sha256 read as a fraction of 2^64, below `fraction`."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") < fraction * 2.0**64


@dataclass(frozen=True)
class SplitOf:
    """The split of a key: its shard's folder (`train/`, `eval/`), or by key hash when `folder` is None."""

    folder: str | None
    eval_fraction: float = 0.0

    def __call__(self, key: str) -> str:
        if self.folder is not None:
            return self.folder
        return "eval" if is_eval_key(key, self.eval_fraction) else "train"


# ---- one shard -----------------------------------------------------------------------------


@dataclass
class ShardRead:
    """What one shard holds, by split: the good samples, their tokens, and the bad ones."""

    name: str
    sha256: str
    bytes: int
    records: dict[str, tuple[list[str], list[str], list[np.ndarray]]] = field(default_factory=dict)
    tokens: Counter = field(default_factory=Counter)
    bad: list[tuple[str, str]] = field(default_factory=list)
    truncated: str | None = None


def read_shard(root: Path, name: str, spec: FamilySpec, split_of, data: bytes | None = None) -> ShardRead:
    """Decode every sample of `root/name`; `split_of(key)` names its split."""
    path = root / name
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as err:
            raise PrismError(f"shard {path} cannot be read ({err.strerror})") from None
    out = ShardRead(name, sha256(data), len(data))
    for key, members, cut in iter_samples(data):
        if cut is not None:
            out.truncated = cut
            if key is not None:
                out.bad.append((key, f"tar {cut}"))
            break
        try:
            caption, array = decode_sample(members, spec)
        except BadSample as why:
            out.bad.append((key, str(why)))
            continue
        split = split_of(key)
        keys, captions, arrays = out.records.setdefault(split, ([], [], []))
        keys.append(key)
        captions.append(caption)
        arrays.append(array)
        out.tokens[split] += spec.n_modality_tokens + len(caption.encode("utf-8")) + 2
    return out


# ---- the index -----------------------------------------------------------------------------


def find_shards(shards: Path) -> dict[str, list[str]]:
    """Shard names (relative to `shards`) per split: `train/` and `eval/` folders, or one flat folder."""
    if not shards.is_absolute():
        raise PrismError(f"shards directory {shards} must be an absolute path (the index records where the shards lie)")
    if not shards.is_dir():
        raise PrismError(f"shards directory {shards} does not exist; point data.shards at a folder of .tar shards")
    if (shards / "train").is_dir() and (shards / "eval").is_dir():
        found = {s: sorted(f"{s}/{p.name}" for p in (shards / s).glob("*.tar")) for s in ("train", "eval")}
        for split, names in found.items():
            if not names:
                raise PrismError(f"{shards / split} holds no .tar shards; add them, or drop the train/eval folders")
        return found
    names = sorted(p.name for p in shards.glob("*.tar"))
    if not names:
        raise PrismError(f"{shards} holds no .tar shards (nor train/ and eval/ folders of them)")
    return {"all": names}


def _read_task(task: tuple) -> ShardRead:
    return read_shard(*task)


def _map_shards(tasks: list[tuple], jobs: int):
    """read_shard over `tasks`, in order, in `jobs` forked processes (here when 1)."""
    if jobs <= 1 or len(tasks) <= 1:
        yield from map(_read_task, tasks)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

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
) -> dict:
    """Index `shards` for `family` into `out` (manifest.json + decoded copy); return the manifest.

    `jobs` processes decode the shards (each shard in one); the result does not depend on it.
    """
    from prism.data import decoded

    spec = family_spec(family)
    shards, out = Path(shards), Path(out)
    if not 0.0 < eval_fraction < 1.0:
        raise PrismError(f"eval fraction {eval_fraction} must be in (0, 1)")
    if not 0.0 <= max_bad_fraction < 1.0:
        raise PrismError(f"max bad fraction {max_bad_fraction} must be in [0, 1)")
    if out.exists() and not overwrite:
        raise PrismError(f"{out} already exists; pass --overwrite to replace it, or choose another --out")
    if out.exists() and not (out / MANIFEST).is_file():
        raise PrismError(f"{out} exists and is not a shard directory (no {MANIFEST}); refusing to replace it")
    warn = warn or (lambda line: print(line, file=sys.stderr))
    found = find_shards(shards)
    by_folder = "all" not in found

    splits = {"train": [], "eval": []}  # per split: the shard entries
    records = {"train": ([], [], []), "eval": ([], [], [])}
    bad, truncated, total, seen = [], [], 0, {}
    tasks = [
        (shards, name, spec, SplitOf(folder if by_folder else None, eval_fraction))
        for folder, names in found.items()
        for name in names
    ]
    read = progress(_map_shards(tasks, jobs), "reading shards", total=len(tasks))  # on a terminal only
    for shard, (_, name, _, rule) in zip(read, tasks):
        folder = rule.folder or "all"
        for key, why in shard.bad:
            if len(bad) < WARN_LINES:
                warn(f"warning: shard {shards / name}, sample {key}: {why}; skipped")
            bad.append({"shard": name, "key": key, "reason": why})
        if shard.truncated:
            truncated.append(name)
        total += len(shard.bad)
        for split, (keys, captions, arrays) in shard.records.items():
            for key in keys:
                if key in seen:
                    raise PrismError(
                        f"sample key {key!r} is in both shard {shards / seen[key]} and "
                        f"{shards / name}; keys must be unique across the shards"
                    )
                seen[key] = name
            total += len(keys)
            dst = records[split]
            dst[0].extend(keys)
            dst[1].extend(captions)
            dst[2].extend(arrays)
        # A shard is listed in every split it feeds (both, under the key-hash split), and in
        # one at least, so that verify knows it even when none of its samples is good.
        targets = {folder} if by_folder else (set(shard.records) or {"train"})
        for split in sorted(targets):
            splits[split].append(
                {
                    "name": name,
                    "sha256": shard.sha256,
                    "bytes": shard.bytes,
                    "samples": len(shard.records.get(split, ([],))[0]),
                    "tokens": int(shard.tokens[split]),
                    "bad": len(shard.bad),
                }
            )
    if len(bad) > WARN_LINES:
        warn(f"warning: {len(bad) - WARN_LINES} more bad samples skipped (all are listed in the index's manifest)")
    if total and len(bad) > max_bad_fraction * total:
        first = bad[0]
        raise PrismError(
            f"{shards}: {len(bad)} of {total} samples are bad ({100 * len(bad) / total:.1f}% > "
            f"max_bad_fraction {100 * max_bad_fraction:g}%; first: shard {first['shard']}, sample "
            f"{first['key']}: {first['reason']}); repair the shards or raise --max-bad-fraction"
        )
    for split in splits:
        if not records[split][0]:
            hint = "add shards to eval/" if by_folder else "raise --eval-fraction or add samples"
            raise PrismError(f"{shards}: the {split} split would hold no samples ({hint})")

    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "family": family,
        "seed": None,
        "source": f"webdataset shards in {shards}",
        "shards_dir": str(shards),
        "split": {"by": "folder"} if by_folder else {"by": "key_hash", "eval_fraction": eval_fraction},
        "modality_shape": list(spec.modality_shape),
        "n_modality_tokens": spec.n_modality_tokens,
        "text_len": spec.text_len,
        "max_bad_fraction": max_bad_fraction,
        "bad_samples": bad,
        "truncated_shards": truncated,
        "lm_ratio": 0.0,
        "lm_text": None,
        "splits": {
            s: {"samples": len(records[s][0]), "tokens": sum(e["tokens"] for e in splits[s]), "shards": splits[s]}
            for s in splits
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    free, existed = free_bytes(out.parent), out.exists()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        for split, (keys, captions, arrays) in records.items():
            modality = np.stack(arrays).astype(np.float32, copy=False)
            decoded.save_records(tmp, manifest, split, Records(keys, captions, modality, np.ones(len(keys), bool)))
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        os.chmod(tmp, 0o755)
        replace_dir(tmp, out)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if is_disk_full(err) or isinstance(err, DiskFullError):  # the index writes only decoded copies
            needed = 64 * 1024 + sum(
                decoded.copy_bytes(keys, captions, spec.modality_shape) for keys, captions, _ in records.values()
            )
            raise disk_full(out / "", needed, free, folder_kept(out, existed)) from None
        raise
    return manifest


def is_index(manifest: dict) -> bool:
    return manifest.get("kind") == KIND


def read_index(data_dir: Path, manifest: dict, splits: tuple[str, ...]) -> dict[str, Records]:
    """Every good sample of each of `splits`, each shard read once, after checking its sha256 and counts."""
    spec = family_spec(manifest["family"])
    root = Path(manifest["shards_dir"])
    rule = manifest["split"]
    fraction = float(rule.get("eval_fraction", 0.0))
    entries = {split: manifest["splits"][split]["shards"] for split in splits}
    reads: dict[str, ShardRead] = {}
    for split, listed in entries.items():
        for entry in listed:
            if entry["name"] in reads:
                continue
            path = root / entry["name"]
            try:
                data = path.read_bytes()
            except OSError as err:
                raise PrismError(
                    f"shard {path} cannot be read ({err.strerror}); restore it, or re-index "
                    f"with `prism data index {root} --out {data_dir} --overwrite`"
                ) from None
            if sha256(data) != entry["sha256"]:
                raise PrismError(
                    f"shard {path} does not match its sha256 in {data_dir / MANIFEST} (changed since "
                    f"it was indexed); re-index with `prism data index {root} --out {data_dir} --overwrite`"
                )
            split_of = SplitOf(split if rule["by"] == "folder" else None, fraction)
            reads[entry["name"]] = read_shard(root, entry["name"], spec, split_of, data)
    shape = tuple(manifest["modality_shape"])
    out = {}
    for split, listed in entries.items():
        keys, captions, arrays = [], [], []
        for entry in listed:
            k, c, a = reads[entry["name"]].records.get(split, ([], [], []))
            if len(k) != entry["samples"]:
                raise PrismError(
                    f"shard {root / entry['name']} gives {len(k)} {split} samples here, the index says "
                    f"{entry['samples']} (another image decoder?); re-index the shards in this environment"
                )
            keys += k
            captions += c
            arrays += a
        modality = np.stack(arrays).astype(np.float32) if arrays else np.zeros((0, *shape), np.float32)
        out[split] = Records(keys, captions, modality, np.ones(len(keys), bool))
    return out


def read_index_split(data_dir: Path, manifest: dict, split: str) -> Records:
    """Every good sample of `split` (what `manifest.read_split` returns for an index)."""
    return read_index(Path(data_dir), manifest, (split,))[split]


def verify_index(data_dir: str | Path, manifest: dict) -> dict:
    """Check an index against its shards: every shard there and unchanged, no shard it does not list."""
    data_dir = Path(data_dir)
    root = Path(manifest["shards_dir"])
    listed = {e["name"] for s in manifest["splits"].values() for e in s["shards"]}
    try:
        here = {n for names in find_shards(root).values() for n in names}
    except PrismError as err:
        raise PrismError(f"{data_dir / MANIFEST} indexes {root}: {err}") from None
    new = sorted(here - listed)
    if new:
        raise PrismError(
            f"{root} holds shards the index {data_dir} does not list ({', '.join(new[:3])}"
            f"{', ...' if len(new) > 3 else ''}); re-index with "
            f"`prism data index {root} --out {data_dir} --overwrite`"
        )
    summary = {
        "data_dir": str(data_dir),
        "family": manifest["family"],
        "seed": None,
        "shards_dir": str(root),
        "bad": len(manifest.get("bad_samples", [])),
    }
    for split, records in read_index(data_dir, manifest, tuple(manifest["splits"])).items():
        summary[split] = {"samples": len(records.keys), "shards": len(manifest["splits"][split]["shards"])}
    return summary

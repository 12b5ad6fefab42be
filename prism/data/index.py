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
stops a run. A shard cut short or damaged is named in one line with the samples it lost
(`shardcount`: img2dataset's count beside it, else one at least), and they count as bad.
Above `max_bad_fraction` of all samples the index refuses: that many bad samples is a
broken download, not noise.

The held-out split is either a separate folder (`DIR/train/*.tar` and `DIR/eval/*.tar`)
or a fixed fraction of the keys chosen by their hash, the same whatever the seed or the
order of the shards, so the eval set does not move when shards are added.

This module reads shards and indexes; prism.data.indexer writes an index.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import shutil
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prism.core.errors import PrismError
from prism.core.families import TOKENIZER_FILE, FamilySpec, family_bundle, spec_from_manifest
from prism.core.studylayout import MANIFEST
from prism.core.tokenizer import TextEncoder, Vocab
from prism.data.format import Records, sha256
from prism.data.reindex import reindex_command
from prism.data.tarreader import TarCut, iter_tar

KIND = "index"
EVAL_FRACTION = 0.05
MAX_BAD_FRACTION = 0.01
IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")
WARN_LINES = 20  # bad samples named one per line; the rest are counted


# ---- samples of foreign tars (webdataset's grouping) -----------------------------------------


def split_name(name: str) -> tuple[str, str]:
    """(key, extension) as webdataset splits them: the key ends at the basename's first dot."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (ext.lower() if dot else "")


CAPTION_EXTS = ("txt", "json")
DATA_EXTS = ("jpg", "jpeg", "png", "webp", "npy")


def _whole(members: dict[str, bytes]) -> bool:
    """Whether a sample has a caption and a modality member: nothing it needs can come later."""
    return any(e in members for e in CAPTION_EXTS) and any(e in members for e in DATA_EXTS)


def iter_samples(source):
    """(key, {ext: bytes}, None) per sample, then (key, members, why) if the tar is cut or damaged.

    `source`: the tar's bytes or a binary file (`tarreader.iter_tar`, lenient). A sample is its
    key's members wherever they sit in the tar. Webdataset writes them consecutively: such a
    sample is given when the next key starts. One still lacking its caption or its image (.npy)
    then waits until a later member of its key completes it, or the tar ends (then it is bad for
    what it lacks, once); a tar of all images, then all captions, holds its images until their
    captions come. A later member of a sample already given adds nothing (img2dataset's .json
    after .jpg and .txt), unless its extension repeats one given: that is a second sample of the
    key (refused as a duplicate). On a cut, the sample being read is returned with the reason,
    as it may have lost members.
    """
    waiting: dict[str, dict[str, bytes]] = {}  # incomplete samples by key, in tar order
    given: dict[str, set[str]] = {}  # the extensions of each sample given, by key
    key, members, extra = None, {}, False

    def close():
        if extra or key is None:
            return
        if _whole(members) or key in given:
            given[key] = set(members)
            yield key, members, None
        else:
            waiting[key] = members

    try:
        for name, payload in iter_tar(source):
            k, ext = split_name(name)
            if k != key:
                yield from close()
                key, extra = k, False
                if k in waiting and ext not in waiting[k]:
                    members = waiting.pop(k)
                elif k in given and ext not in given[k]:
                    members, extra = {}, True
                else:
                    members = {}
            if extra and ext in given[key]:
                yield from close()
                members, extra = {}, False
            members[ext] = payload
    except TarCut as cut:
        yield from ((k, m, None) for k, m in waiting.items())
        if not extra:
            yield key, members, str(cut)
        return
    yield from close()
    yield from ((k, m, None) for k, m in waiting.items())


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
    from PIL import Image, ImageOps, UnidentifiedImageError  # noqa: PLC0415 lazy: PIL

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
            im = _eight_bit(ImageOps.exif_transpose(im)).convert(mode)
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


# Modes whose values are not 0-255, by the largest value their samples may hold (F: [0, 1]).
WIDE_MODES = {"I;16": 65535, "I;16B": 65535, "I;16L": 65535, "I;16N": 65535, "I": 65535, "F": 1.0}


def _eight_bit(im):
    """`im` with its pixel values scaled to 8 bits where its mode holds more (16-bit PNG greys are
    mode I;16 or I, float TIFFs F): PIL's own conversion to L or RGB clips them, a white image.
    A 16-bit colour PNG PIL already opens as 8-bit RGB(A)."""
    from PIL import Image  # noqa: PLC0415 lazy: PIL

    top = WIDE_MODES.get(im.mode)
    if top is None:
        return im
    arr = np.asarray(im, np.float64)
    return Image.fromarray(np.clip(np.rint(arr * (255.0 / top)), 0, 255).astype(np.uint8), "L")


def _npy(members: dict[str, bytes]) -> np.ndarray:
    """The sample's `.npy` member as float32; BadSample when it has none or it does not load."""
    if "npy" not in members:
        raise BadSample("no .npy array")
    try:
        return np.load(io.BytesIO(members["npy"]), allow_pickle=False).astype(np.float32)
    except Exception as err:  # noqa: BLE001 - any unreadable .npy is one bad sample
        raise BadSample(f".npy does not load ({type(err).__name__})") from None


def _checked(arr: np.ndarray, spec: FamilySpec) -> np.ndarray:
    shape = spec.modality_shape
    if arr.shape != shape or not np.isfinite(arr).all():
        raise BadSample(f".npy is {arr.dtype} {list(arr.shape)}, expected finite float32 {list(shape)}")
    return arr


# Each built-in family's decoding (its bundle's `decode`): a sample's members -> its modality array.


def decode_npy(members: dict[str, bytes], spec: FamilySpec) -> np.ndarray:
    """A `.npy` member already of the family's shape."""
    return _checked(_npy(members), spec)


def decode_series(members: dict[str, bytes], spec: FamilySpec) -> np.ndarray:
    """A `.npy` series of any length and up to the family's channels, resampled to its window."""
    from prism.data.sources.ts import CHANNELS, resample, to_window  # noqa: PLC0415 lazy: `prism --help` imports this module

    arr = _npy(members)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise BadSample(f".npy is {list(arr.shape)}, expected [channels, steps]")
    steps = spec.modality_shape[1]
    x = np.zeros((CHANNELS, arr.shape[1]), np.float64)
    x[: min(CHANNELS, len(arr))] = arr[:CHANNELS]
    return _checked(to_window(resample(x, steps) if arr.shape[1] != steps else x), spec)


def decode_graph(members: dict[str, bytes], spec: FamilySpec) -> np.ndarray:
    """A `.npy` square adjacency of at most the family's nodes, zero-padded."""
    arr, shape = _npy(members), spec.modality_shape
    n = arr.shape[0] if arr.ndim == 2 else -1
    if arr.ndim != 2 or arr.shape[1] != n or n > shape[0]:
        raise BadSample(f".npy is {list(arr.shape)}, expected a square adjacency of at most {shape[0]} nodes")
    padded = np.zeros(shape, np.float32)
    padded[:n, :n] = arr
    return _checked(padded, spec)


def decode_image_sample(members: dict[str, bytes], spec: FamilySpec) -> np.ndarray:
    """An image member (`IMAGE_EXTS`), resized to the family's shape."""
    ext = next((e for e in IMAGE_EXTS if e in members), None)
    if ext is None:
        raise BadSample(f"no image ({'|'.join(IMAGE_EXTS)})")
    return decode_image(members[ext], spec.modality_shape, ext)


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


def decode_sample(members: dict[str, bytes], spec: FamilySpec) -> tuple[str, int, np.ndarray]:
    """(caption cut to the family's text length in its tokenizer, the caption's tokens, modality array);
    BadSample says why not."""
    caption, n_text, _ = text_encoder(spec.vocab).fit(caption_of(members), spec.text_len - 2)
    return caption, n_text, family_bundle(spec.name).part("decode")(members, spec)


@functools.lru_cache(maxsize=4)
def text_encoder(vocab: Vocab) -> TextEncoder:
    """The captions' tokenizer, loaded once per process (an index's workers each load it)."""
    return TextEncoder(vocab)


def keep_tokenizer(spec: FamilySpec, folder: Path) -> None:
    """A copy of the tokenizer file beside the manifest: the data names the tokenizer its runs read."""
    if not spec.vocab.is_bytes:
        shutil.copyfile(spec.vocab.file, folder / TOKENIZER_FILE)


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


def key_digest(key: str) -> bytes:
    """16 bytes standing for a key in the uniqueness check (a collision among 1e12 keys: about 1e-15)."""
    return hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()


class _HashingReader:
    """A shard read through once, front to back: its sha256 and size on the way (never whole in memory),
    and whether anything but zeros follows where the tar's walker stopped."""

    def __init__(self, path: Path, fh):
        self.path, self._fh, self._digest, self.size = path, fh, hashlib.sha256(), 0

    def read(self, n: int = -1) -> bytes:
        try:
            chunk = self._fh.read(n)
        except OSError as err:
            raise PrismError(f"shard {self.path} cannot be read ({err.strerror})") from None
        self._digest.update(chunk)
        self.size += len(chunk)
        return chunk

    def finish(self) -> tuple[str, int, int | None]:
        """The sha256 and size of the whole file (reading what the tar's walker left), and the first
        byte after that which is not zero (None: the end-of-archive marker and its padding only)."""
        stray = None
        while chunk := self.read(1 << 20):
            if stray is None and chunk.count(0) != len(chunk):
                stray = self.size - len(chunk.lstrip(b"\0"))
        return self._digest.hexdigest(), self.size, stray


@dataclass
class ShardRead:
    """What one shard holds, by split: good samples counted (their tokens, the longest key and
    caption; each key's digest when spooled), the bad ones, and the samples themselves when kept."""

    name: str
    sha256: str = ""
    bytes: int = 0
    samples: Counter = field(default_factory=Counter)
    tokens: Counter = field(default_factory=Counter)
    widths: dict[str, list[int]] = field(default_factory=dict)
    digests: dict[str, bytearray] = field(default_factory=dict)
    records: dict[str, tuple[list[str], list[str], list[np.ndarray]]] = field(default_factory=dict)
    bad: list[tuple[str, str]] = field(default_factory=list)
    truncated: str | None = None  # how the tar breaks off (cut, damaged, data after its end), None if whole
    partial: bool = False  # the sample a cut interrupted is among `bad`


SPOOLED = ("keys", "captions", "modality")  # the files of a spooled (shard, split): see decoded.save_spooled


def full_mark(folder: Path, split: str) -> Path:
    """The file the index writes among the spooled files once `split` is too large for a decoded copy."""
    return folder / f"full.{split}"


class Spool:
    """One shard's good samples written to `{prefix}.{split}.keys|captions|modality` (a JSON string a
    line, float32 rows) as they are decoded, for the split's decoded copy (`decoded.save_spooled`).

    A split stops spooling, its files of this shard deleted, past `limit` samples here or once the
    index marks it full (`full_mark`, looked for every CHECK samples): a split too large for a
    copy costs no disk.
    """

    CHECK = 256

    def __init__(self, prefix: Path, limit: int | None, stack: ExitStack):
        self.prefix, self.limit, self.stack = Path(prefix), limit, stack
        self.sinks: dict[str, list] = {}
        self.rows: Counter = Counter()
        self.stopped: set[str] = set()

    def write(self, split: str, key: str, caption: str, array: np.ndarray) -> None:
        if split in self.stopped:
            return
        self.rows[split] += 1
        n = self.rows[split]
        if (self.limit is not None and n > self.limit) or (
            (n == 1 or n % self.CHECK == 0) and full_mark(self.prefix.parent, split).exists()
        ):
            self.stop(split)
            return
        if split not in self.sinks:
            self.sinks[split] = [self.stack.enter_context(open(f"{self.prefix}.{split}.{k}", "wb")) for k in SPOOLED]
        keys_fh, captions_fh, modality_fh = self.sinks[split]
        keys_fh.write(json.dumps(key).encode() + b"\n")
        captions_fh.write(json.dumps(caption).encode() + b"\n")
        modality_fh.write(np.asarray(array, np.float32).tobytes())

    def stop(self, split: str) -> None:
        self.stopped.add(split)
        for fh in self.sinks.pop(split, []):
            fh.close()
        unspool(Path(f"{self.prefix}.{split}"))


def unspool(part: Path) -> None:
    """Delete what `Spool` wrote of one (shard, split), `{prefix}.{split}` (nothing there is fine)."""
    for kind in SPOOLED:
        Path(f"{part}.{kind}").unlink(missing_ok=True)


def read_shard(
    root: Path,
    name: str,
    spec: FamilySpec,
    split_of,
    data: bytes | None = None,
    keep: bool = True,
    spool: Path | None = None,
    spool_limit: int | None = None,
) -> ShardRead:
    """Decode every sample of `root/name` (from `data`, else streamed from the file); `split_of(key)` names its split.

    The good samples are kept in `records` (`keep`), and/or written one by one to
    `{spool}.{split}.keys|captions|modality` (`Spool`, up to `spool_limit` samples a split),
    so that indexing holds one sample at a time, whatever the shard's or the split's size.
    """
    path = root / name
    out = ShardRead(name)
    with ExitStack() as stack:
        try:
            source = _HashingReader(path, stack.enter_context(path.open("rb")) if data is None else io.BytesIO(data))
        except OSError as err:
            raise PrismError(f"shard {path} cannot be read ({err.strerror})") from None
        sink = Spool(spool, spool_limit, stack) if spool is not None else None
        for key, members, cut in iter_samples(source):
            if cut is not None:
                out.truncated = cut
                if key is not None:
                    out.bad.append((key, f"tar {cut}"))
                    out.partial = True
                break
            try:
                caption, n_text, array = decode_sample(members, spec)
            except BadSample as why:
                out.bad.append((key, str(why)))
                continue
            split = split_of(key)
            out.samples[split] += 1
            out.tokens[split] += spec.n_modality_tokens + n_text + 2
            widths = out.widths.setdefault(split, [0, 0])
            widths[0], widths[1] = max(widths[0], len(key)), max(widths[1], len(caption))
            if keep:
                keys, captions, arrays = out.records.setdefault(split, ([], [], []))
                keys.append(key)
                captions.append(caption)
                arrays.append(array)
            if sink is not None:
                out.digests.setdefault(split, bytearray()).extend(key_digest(key))
                sink.write(split, key, caption, array)
        out.sha256, out.bytes, stray = source.finish()
        if not out.bytes:
            out.truncated = "0 bytes"
        elif stray is not None and out.truncated is None:
            out.truncated = f"data after its end-of-archive marker, from byte {stray}: tars joined?"
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


def lost_samples(manifest: dict) -> int:
    """The samples an index skipped or lost: its bad samples, and those missing from its broken shards."""
    return len(manifest.get("bad_samples", [])) + sum(d["missing"] for d in manifest.get("damaged_shards", []))


def _checked_reads(data_dir: Path, manifest: dict, splits: tuple[str, ...], keep: bool):
    """(split, manifest entry, ShardRead) of every shard each of `splits` lists, in order: each shard
    read once, after checking its sha256, and its samples counted against the entry."""
    spec = spec_from_manifest(manifest, data_dir)
    root = Path(manifest["shards_dir"])
    rule = manifest["split"]
    fraction = float(rule.get("eval_fraction", 0.0))
    reads: dict[str, ShardRead] = {}
    for split in splits:
        for entry in manifest["splits"][split]["shards"]:
            if entry["name"] not in reads:
                path = root / entry["name"]
                try:
                    data = path.read_bytes()
                except OSError as err:
                    raise PrismError(
                        f"shard {path} cannot be read ({err.strerror}); restore it, or re-index "
                        f"with `{reindex_command(data_dir, manifest)}`"
                    ) from None
                if sha256(data) != entry["sha256"]:
                    raise PrismError(
                        f"shard {path} does not match its sha256 in {data_dir / MANIFEST} (changed since "
                        f"it was indexed); re-index with `{reindex_command(data_dir, manifest)}`"
                    )
                split_of = SplitOf(split if rule["by"] == "folder" else None, fraction)
                reads[entry["name"]] = read_shard(root, entry["name"], spec, split_of, data, keep=keep)
                del data
            shard = reads[entry["name"]]
            if shard.samples[split] != entry["samples"]:
                raise PrismError(
                    f"shard {root / entry['name']} gives {shard.samples[split]} {split} samples here, the index "
                    f"says {entry['samples']} (another image decoder?); re-index the shards in this environment: "
                    f"{reindex_command(data_dir, manifest)}"
                )
            yield split, entry, shard


def read_index(data_dir: Path, manifest: dict, splits: tuple[str, ...]) -> dict[str, Records]:
    """Every good sample of each of `splits`, each shard read once, after checking its sha256 and counts."""
    shape = tuple(manifest["modality_shape"])
    parts: dict[str, tuple[list, list, list]] = {split: ([], [], []) for split in splits}
    for split, _, shard in _checked_reads(Path(data_dir), manifest, splits, keep=True):
        keys, captions, arrays = parts[split]
        k, c, a = shard.records.get(split, ([], [], []))
        keys += k
        captions += c
        arrays += a
    out = {}
    for split, (keys, captions, arrays) in parts.items():
        modality = np.stack(arrays).astype(np.float32) if arrays else np.zeros((0, *shape), np.float32)
        out[split] = Records(keys, captions, modality, np.ones(len(keys), bool))
    return out


def read_index_split(data_dir: Path, manifest: dict, split: str) -> Records:
    """Every good sample of `split` (what `manifest.read_split` returns for an index)."""
    return read_index(Path(data_dir), manifest, (split,))[split]


def broken_shards(manifest: dict) -> list[str]:
    """The names of the shards an index found cut, damaged or short of samples (an older index: its truncated ones)."""
    return [d["shard"] for d in manifest.get("damaged_shards", [])] or list(manifest.get("truncated_shards", []))


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
            f"{', ...' if len(new) > 3 else ''}); re-index with `{reindex_command(data_dir, manifest)}`"
        )
    broken = broken_shards(manifest)
    if broken:
        raise PrismError(
            f"{data_dir / MANIFEST}: {len(broken)} shard(s) of {root} are cut short, damaged or short of samples "
            f"({', '.join(broken[:3])}{', ...' if len(broken) > 3 else ''}; {lost_samples(manifest)} samples bad "
            f"or lost in all); re-download them or remove them from the folder, then re-index with "
            f"`{reindex_command(data_dir, manifest)}`"
        )
    summary = {
        "data_dir": str(data_dir),
        "family": manifest["family"],
        "seed": None,
        "shards_dir": str(root),
        "bad": len(manifest.get("bad_samples", [])),
    }
    for split in manifest["splits"]:  # counted, not held: verify's memory does not grow with the index
        summary[split] = {"samples": 0, "shards": len(manifest["splits"][split]["shards"])}
    for split, entry, _ in _checked_reads(data_dir, manifest, tuple(manifest["splits"]), keep=False):
        summary[split]["samples"] += entry["samples"]
    return summary

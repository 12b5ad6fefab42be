"""Fixtures shared by every test package: shard directories built once per session, and `prism` runners.

Fixture files live in tests/fixtures/ (e.g. `tiny_run.yaml`, the small run most training
tests use). Test packages share through these fixtures, never by importing each other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Session fixtures that cost minutes and that tests in several modules read: two Slurm instances (the
# tests through profiles/aurora, those through profiles/slurm), the wsd study, the tiny study. Heaviest first.
SHARED_FIXTURES = ("scheduler", "slurm_scheduler", "wsd_study", "tiny_study")
SLOW_MARKS = {"slow", "workflow", "cluster", "distributed"}
TINY_RUN = FIXTURES / "tiny_run.yaml"
INJECT_NAN_ENV = "PRISM_TEST_INJECT_NAN_AT_STEP"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items) -> None:
    """Group tests for pytest-xdist (`make test` runs `-n 2 --dist loadgroup`) and order the groups.

    A test that reads a shared fixture joins that fixture's group, so the fixture is built once and
    its tests see its state in file order; any other test joins its module's group, so module
    fixtures are built once too. Workers take groups in order: the shared ones first, then modules
    with slow tests, so the short modules fill the tail instead of one worker finishing a long one
    alone. Without xdist the marks do nothing and only the order changes.
    """

    def group(item) -> str:
        return next((name for name in SHARED_FIXTURES if name in item.fixturenames), item.nodeid.split("::")[0])

    groups = {item.nodeid: group(item) for item in items}
    slow = {groups[item.nodeid] for item in items if SLOW_MARKS & {mark.name for mark in item.iter_markers()}}

    def rank(group: str) -> tuple[int, int]:
        return (
            (SHARED_FIXTURES.index(group), 0) if group in SHARED_FIXTURES else (len(SHARED_FIXTURES), group not in slow)
        )

    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    items.sort(key=lambda item: rank(groups[item.nodeid]))  # stable: file order within a rank


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Callable[[str], Path]:
    """`built(family)` -> the path of a shard directory for `family` (seed 0), built on first use.

    Tests must not modify these directories (tests/data's `fresh_copy` gives a private one).
    """
    from prism.data.shards import build

    root = tmp_path_factory.mktemp("shards")
    cache: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family not in cache:
            build(family, root / family, seed=0)
            cache[family] = root / family
        return cache[family]

    return get


@pytest.fixture(scope="session")
def shards(built) -> Path:
    """The text_image shards most training tests read."""
    return built("text_image")


def _run_prism(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != INJECT_NAN_ENV}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "prism", *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )


@pytest.fixture(scope="session")
def run_prism() -> Callable[..., subprocess.CompletedProcess]:
    """`run_prism(*args, env=None, timeout=600)` -> CompletedProcess of `python -m prism ARGS`."""
    return _run_prism


@pytest.fixture(scope="session")
def tiny() -> list[str]:
    """The flags of the tests' tiny run (tests/fixtures/tiny_run.yaml); add --data and --out."""
    return ["--config", str(TINY_RUN)]


@pytest.fixture
def train(shards, tiny) -> Callable[..., subprocess.CompletedProcess]:
    """`train(out, *flags, env=None)` -> CompletedProcess of `prism train` on the tiny run."""

    def run(out: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return _run_prism("train", *tiny, "--data", str(shards), "--out", str(out), *flags, env=env)

    return run


def _tensorboard_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} of a TensorBoard run directory, read by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@pytest.fixture(scope="session")
def tensorboard_scalars() -> Callable[[Path], dict[str, list[tuple[int, float]]]]:
    """`tensorboard_scalars(run_dir)` -> {tag: [(step, value)]} (needs tensorboard)."""
    pytest.importorskip("tensorboard")
    return _tensorboard_scalars


def _wandb_records(path: Path) -> list:
    """The protobuf records of a W&B run file (`run-ID.wandb`: a LevelDB-style log of 32 KiB blocks).

    W&B has no public reader of its offline files; the format is a 7-byte header (":W&B",
    0xBEE1, version), then records of (crc32c, length, type) + payload that may be split
    across blocks (type 1 full, 2 first, 3 middle, 4 last).
    """
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    block, pos, records, pending = 32768, 7, [], b""
    while pos + 7 <= len(data):
        room = block - pos % block
        if room < 7:  # a block's tail too short for a header is padding
            pos += room
            continue
        length = int.from_bytes(data[pos + 4 : pos + 6], "little")
        kind = data[pos + 6]
        payload = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        pending = payload if kind in (1, 2) else pending + payload
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def _wandb_runs(root: Path) -> list[dict]:
    """Every offline run folder under `root` (a W&B `dir`): id, name, group, project, tags, config, history.

    history: [{key: value, ...}] in logged order, each row with its `_step`.
    """
    import json as _json

    runs = []
    for folder in sorted((Path(root) / "wandb").glob("offline-run-*")):
        run: dict = {"folder": folder, "history": [], "config": {}}
        for record in _wandb_records(next(folder.glob("run-*.wandb"))):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                r = record.run
                run.update(id=r.run_id, name=r.display_name, group=r.run_group, project=r.project, tags=list(r.tags))
                run["config"].update({item.key: _json.loads(item.value_json) for item in r.config.update})
            elif kind == "history":
                row = {
                    item.key or "/".join(item.nested_key): _json.loads(item.value_json) for item in record.history.item
                }
                run["history"].append(row)
        runs.append(run)
    return runs


@pytest.fixture(scope="session")
def wandb_runs() -> Callable[[Path], list[dict]]:
    """`wandb_runs(dir)` -> the offline runs W&B wrote under DIR/wandb (needs wandb)."""
    pytest.importorskip("wandb")
    return _wandb_runs


SHAPES = ("circle", "square", "triangle", "cross")
IMAGE_FORMATS = ("jpg", "png", "webp")


def shape_image(rng):
    """A PIL image of one shape (its kind, ink and size readable at 8x8), of a random size, and its caption."""
    from PIL import Image, ImageDraw

    w, h = int(rng.integers(12, 97)), int(rng.integers(12, 97))
    shape, white, large = SHAPES[rng.integers(len(SHAPES))], bool(rng.integers(2)), bool(rng.integers(2))
    ink, paper = ((255, 255, 255), (0, 0, 0)) if white else ((0, 0, 0), (255, 255, 255))
    im = Image.new("RGB", (w, h), paper)
    draw = ImageDraw.Draw(im)
    r = min(w, h) * (0.45 if large else 0.25)
    cx, cy = w / 2, h / 2
    box = (cx - r, cy - r, cx + r, cy + r)
    if shape == "circle":
        draw.ellipse(box, fill=ink)
    elif shape == "square":
        draw.rectangle(box, fill=ink)
    elif shape == "triangle":
        draw.polygon([(cx - r, cy + r), (cx + r, cy + r), (cx, cy - r)], fill=ink)
    else:
        draw.rectangle((cx - r, cy - r / 3, cx + r, cy + r / 3), fill=ink)
        draw.rectangle((cx - r / 3, cy - r, cx + r / 3, cy + r), fill=ink)
    return im, f"a {'large' if large else 'small'} {'white' if white else 'black'} {shape}"


def write_shape_shards(folder: Path, samples: int, per_shard: int = 100, start: int = 0, seed: int = 0) -> list[Path]:
    """Shards as img2dataset writes them (webdataset's TarWriter: KEY.jpg|png|webp, KEY.txt, KEY.json)
    of generated shapes at sizes other than the model's; keys start at `start`. Returns the shards."""
    import io

    import numpy as np
    import webdataset as wds

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, start])
    paths = []
    for first in range(start, start + samples, per_shard):
        path = folder / f"{first // per_shard:05d}.tar"
        with wds.TarWriter(str(path)) as sink:
            for i in range(first, min(start + samples, first + per_shard)):
                im, caption = shape_image(rng)
                width, height = im.size
                ext = IMAGE_FORMATS[i % len(IMAGE_FORMATS)]
                if ext == "webp":  # webdataset encodes jpg and png itself, webp not: bytes as img2dataset does
                    buf = io.BytesIO()
                    im.save(buf, format="WEBP")
                    im = buf.getvalue()
                sink.write(
                    {
                        "__key__": f"{i:09d}",
                        ext: im,
                        "txt": caption,
                        "json": {"caption": caption, "width": width, "height": height, "status": "success"},
                    }
                )
        paths.append(path)
    return paths


@pytest.fixture(scope="session")
def shape_shards() -> Callable[..., list[Path]]:
    """`shape_shards(folder, samples, per_shard=100, start=0, seed=0)`: write image-text shards of generated shapes."""
    return write_shape_shards


def train_bpe(texts: list[str], path: Path, vocab_size: int = 300) -> Path:
    """A byte-level BPE tokenizer trained on `texts` (offline, `tokenizers`), saved as a tokenizer.json."""
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


# Captions like the shape shards' (`shape_image`): what the tests' BPE tokenizers are trained on.
SHAPE_CAPTIONS = [
    f"a {size} {ink} {shape}" for size in ("large", "small") for ink in ("white", "black") for shape in SHAPES
]


@pytest.fixture(scope="session")
def train_shape_bpe() -> Callable[..., Path]:
    """`train_shape_bpe(path, vocab_size=300)`: a BPE tokenizer.json trained on the shape shards' captions."""
    return lambda path, vocab_size=300: train_bpe(SHAPE_CAPTIONS * 20, path, vocab_size)


@pytest.fixture(scope="session")
def bpe_file(tmp_path_factory) -> Path:
    """A BPE tokenizer.json trained on the shape shards' captions."""
    return train_bpe(SHAPE_CAPTIONS * 20, tmp_path_factory.mktemp("bpe") / "tokenizer.json")

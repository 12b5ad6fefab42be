"""prism data build: splits by source item, deterministic bytes, atomic directories."""

from __future__ import annotations

import json
import tarfile

import pytest

from prism.cli import main
from prism.core.errors import PrismError
from prism.core.families import FAMILIES
from prism.data import shards
from prism.data.manifest import read_manifest
from prism.data.shards import build, split_sources


def shard_keys(data_dir, split):
    manifest = read_manifest(data_dir)
    keys = []
    for entry in manifest["splits"][split]["shards"]:
        with tarfile.open(data_dir / entry["name"]) as tar:
            keys += sorted({m.name.split(".")[0] for m in tar})
    return keys


@pytest.mark.parametrize("family", ["text_image", "text_ts", "text_graph"])
def test_build_then_verify_exits_zero(built, family, capsys):
    data_dir = built(family)
    assert main(["data", "verify", str(data_dir)]) == 0
    assert "ok" in capsys.readouterr().out
    manifest = read_manifest(data_dir)
    assert manifest["family"] == family and manifest["seed"] == 0
    assert manifest["modality_shape"] == list(FAMILIES[family].modality_shape)
    assert manifest["splits"]["train"]["samples"] > 5 * manifest["splits"]["eval"]["samples"] > 0
    for entry in manifest["splits"]["train"]["shards"]:
        assert len(entry["sha256"]) == 64 and entry["samples"] > 0


@pytest.mark.slow
def test_vla_builds_and_verifies(built):
    data_dir = built("vla")
    assert main(["data", "verify", str(data_dir)]) == 0
    assert read_manifest(data_dir)["splits"]["train"]["samples"] > 1000


@pytest.mark.parametrize("family", ["text_image", "text_ts", "text_graph"])
def test_train_and_eval_source_items_are_disjoint(built, family):
    data_dir = built(family)
    manifest = read_manifest(data_dir)
    train_items, eval_items = set(manifest["source_items"]["train"]), set(manifest["source_items"]["eval"])
    assert train_items and eval_items and not train_items & eval_items
    # The keys in the tar files themselves say the same (key = source__facet).
    from_keys = {split: {k.split("__")[0] for k in shard_keys(data_dir, split)} for split in ("train", "eval")}
    assert from_keys["train"] == train_items and from_keys["eval"] == eval_items
    # Several samples per item exist, so a per-sample split would have leaked.
    n_train = manifest["splits"]["train"]["samples"]
    assert n_train > len(train_items)


def test_same_seed_same_bytes_other_seed_other_split(built, tmp_path):
    first = built("text_graph")
    build("text_graph", tmp_path / "again", seed=0)
    # The shards and the manifest; not the decoded copies under .decoded/, stamped with the shards' mtimes.
    names = sorted(p.name for p in first.iterdir() if p.is_file())
    assert names == sorted(p.name for p in (tmp_path / "again").iterdir() if p.is_file())
    for name in names:
        assert (first / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    other = build("text_graph", tmp_path / "seed1", seed=1)
    assert other["source_items"]["eval"] != read_manifest(first)["source_items"]["eval"]


def test_existing_directory_is_refused_or_replaced(built, tmp_path):
    out = tmp_path / "d"
    build("text_table", out, seed=0)
    with pytest.raises(PrismError, match="already exists.*--overwrite"):
        build("text_table", out, seed=1)
    assert read_manifest(out)["seed"] == 0
    build("text_table", out, seed=1, overwrite=True)
    assert read_manifest(out)["seed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]  # no temp or old directory left behind
    plain = tmp_path / "not_shards"
    plain.mkdir()
    with pytest.raises(PrismError, match="not a shard directory"):
        build("text_table", plain, overwrite=True)


def test_failed_build_leaves_nothing(tmp_path, monkeypatch):
    def broken(tmp, split, records):
        (tmp / f"{split}-000000.tar").write_bytes(b"partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(shards, "write_split", broken)
    with pytest.raises(RuntimeError):
        build("text_table", tmp_path / "d", seed=0)
    assert list(tmp_path.iterdir()) == []


def test_cli_build_refuses_existing_dir_with_one_line(built, capsys):
    assert main(["data", "build", "--family", "text_image", "--out", str(built("text_image"))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already exists" in err


def test_split_sources_is_by_item_and_seeded():
    ids = [f"item{i}" for i in range(50) for _ in range(3)]
    train, eval_ = split_sources(ids, seed=0)
    assert train | eval_ == set(ids) and not train & eval_ and len(eval_) == 5
    assert split_sources(list(reversed(ids)), seed=0) == (train, eval_)
    assert split_sources(ids, seed=1) != (train, eval_)
    with pytest.raises(PrismError):
        split_sources(["only"], seed=0)


def test_eval_takes_documents_until_it_holds_the_passages_it_needs():
    # One large document and 99 one-passage ones: a tenth of the documents holds 10 passages
    # unless the large one falls in it, so for most seeds a 30-passage eval split needs more.
    items = [("big", f"p{i}") for i in range(200)] + [(f"doc{i}", "text") for i in range(99)]
    sources = ["lm-" + doc for doc, _ in items]
    for seed in range(8):
        plain = split_sources(sources, seed)
        train, eval_ = split_sources(sources, seed, min_eval=30)
        assert sum(s in eval_ for s in sources) >= 30 and plain[1] <= eval_ and not train & eval_
        if sum(s in plain[1] for s in sources) >= 30:
            assert (train, eval_) == plain  # enough already: the split (and the data) as before
        records = shards.lm_records(seed, {"train": 50, "eval": 30}, 16, items)
        assert len(records["eval"]) == 30 and len(records["train"]) == 50
        held_out = {json.loads(r["json"])["source"] for r in records["eval"]}
        assert not held_out & {json.loads(r["json"])["source"] for r in records["train"]}


def test_lm_ratio_mixes_text_only_samples(tmp_path):
    manifest = build("text_table", tmp_path / "mixed", seed=0, lm_ratio=0.2)
    docs = {}
    for split in ("train", "eval"):
        n = manifest["splits"][split]["samples"]
        assert manifest["lm_samples"][split] == pytest.approx(0.2 * n, abs=1)
        keys = shard_keys(tmp_path / "mixed", split)
        assert sum(k.startswith("lm-") for k in keys) == manifest["lm_samples"][split]
        docs[split] = {k.split("__")[0] for k in keys if k.startswith("lm-")}
    # Held-out passages come from documents that training never sees.
    assert docs["eval"] and not docs["train"] & docs["eval"]
    assert docs["eval"] <= set(manifest["source_items"]["eval"])
    assert json.loads((tmp_path / "mixed" / "manifest.json").read_text())["lm_ratio"] == 0.2


def test_shards_read_back_with_plain_webdataset(built):
    """The shards are ordinary webdataset tars: its own reader decodes what the loader serves."""
    import numpy as np
    import webdataset as wds

    from prism.data.loader import ShardLoader

    data_dir = built("text_image")
    loader = ShardLoader(data_dir, "eval", 8, seed=0)
    position = {key: i for i, key in enumerate(loader.keys)}
    shards = sorted(str(p) for p in data_dir.glob("eval-*.tar"))
    dataset = wds.WebDataset(shards, shardshuffle=False).decode()
    seen = 0
    for sample in dataset:
        i = position[sample["__key__"]]
        np.testing.assert_array_equal(sample["npy"], loader.data.modality[i])
        assert sample["json"]["source"] == loader.sources[i]
        seen += 1
    assert seen == len(loader)


def test_the_lm_text_is_hashed_in_the_manifest_and_verified(tmp_path, monkeypatch):
    from prism.data.manifest import verify
    from prism.data.sources import lm_text

    out = tmp_path / "mixed"
    manifest = build("text_table", out, seed=0, lm_ratio=0.2)
    record = manifest["lm_text"]
    assert record["sha256"] == lm_text.passages_digest(lm_text.load_passages(record["max_bytes"]))
    assert record["versions"] == lm_text.versions()
    assert "passages checked" in verify(out)["lm_text"]
    # The old failure: text that is not the documentation (a planted cache) used by a build.
    real = lm_text.load_passages
    monkeypatch.setattr(lm_text, "load_passages", lambda n: [(d, f"planted {i}") for i, (d, _) in enumerate(real(n))])
    planted = tmp_path / "planted"
    build("text_table", planted, seed=0, lm_ratio=0.2)
    monkeypatch.setattr(lm_text, "load_passages", real)
    with pytest.raises(PrismError, match="not that of the documentation installed here"):
        verify(planted)
    # A manifest that claims the right hash over planted passages is caught by the passages themselves.
    data = json.loads((planted / "manifest.json").read_text())
    data["lm_text"]["sha256"] = record["sha256"]
    (planted / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(PrismError, match="is not a passage of the documentation"):
        verify(planted)


def test_rebuilding_gives_the_same_bytes(tmp_path):
    a = build("text_image", tmp_path / "a", seed=3, lm_ratio=0.5)
    b = build("text_image", tmp_path / "b", seed=3, lm_ratio=0.5)
    assert a == b
    for split in a["splits"].values():
        for entry in split["shards"]:
            assert (tmp_path / "a" / entry["name"]).read_bytes() == (tmp_path / "b" / entry["name"]).read_bytes()
    assert a["splits"]["train"]["samples"] >= 75_000  # the default study's runs stay under 4 epochs

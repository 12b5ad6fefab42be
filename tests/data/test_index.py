"""`prism data index` / `verify` on shards written by webdataset's own TarWriter (generated shapes)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from prism.core.errors import PrismError
from prism.core.fingerprint import file_digest
from prism.data.index import decode_image, is_eval_key
from prism.data.indexer import index
from prism.data.loader import ShardLoader
from prism.data.manifest import verify


@pytest.fixture(scope="module")
def shape_dir(tmp_path_factory, shape_shards) -> Path:
    """300 samples in 3 shards, never modified by a test."""
    folder = tmp_path_factory.mktemp("own") / "shards"
    shape_shards(folder, 300, per_shard=100)
    return folder


@pytest.fixture(scope="module")
def indexed(shape_dir, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("idx") / "text_image"
    return out, index(shape_dir, "text_image", out, eval_fraction=0.2)


def captions_by_key(folder: Path) -> dict[str, str]:
    import webdataset as wds

    out = {}
    for tar in sorted(folder.glob("*.tar")):
        for sample in wds.WebDataset(str(tar), shardshuffle=False):
            out[sample["__key__"]] = sample["txt"].decode()
    return out


def test_index_counts_every_sample_once_with_its_tokens_and_sha256(shape_dir, indexed):
    out, manifest = indexed
    train, held = manifest["splits"]["train"], manifest["splits"]["eval"]
    assert train["samples"] + held["samples"] == 300
    assert 30 <= held["samples"] <= 90  # 20% of 300 keys by their hash
    captions = captions_by_key(shape_dir)
    for split in ("train", "eval"):
        tokens = sum(16 + len(c.encode()) + 2 for k, c in captions.items() if is_eval_key(k, 0.2) == (split == "eval"))
        assert manifest["splits"][split]["tokens"] == tokens
        for entry in manifest["splits"][split]["shards"]:
            assert entry["sha256"] == hashlib.sha256((shape_dir / entry["name"]).read_bytes()).hexdigest()
    assert manifest["shards_dir"] == str(shape_dir) and manifest["bad_samples"] == []
    assert sorted(p.name for p in shape_dir.iterdir()) == [
        "00000.tar",
        "00001.tar",
        "00002.tar",
    ]  # nothing written there
    assert not list(out.glob("*.tar"))  # nothing copied


def test_loader_serves_the_shapes_resized_to_the_family_image(shape_dir, indexed):
    out, _ = indexed
    loader = ShardLoader(out, "train", global_batch=8, family="text_image")
    captions = captions_by_key(shape_dir)
    assert loader.data.modality.shape == (len(loader), 1, 8, 8)
    assert loader.data.modality.min() >= 0.0 and loader.data.modality.max() <= 1.0
    batch = next(loader)
    assert batch["modality"].shape == (8, 1, 8, 8)
    for i in batch["sample_ids"].tolist()[:3]:
        assert (
            captions[loader.keys[i]]
            in bytes(t for t in batch["tokens"][list(batch["sample_ids"]).index(i)].tolist() if t < 256).decode()
        )
    # Ink tells white shapes from black ones: the mean of the 8x8 image says which.
    white = [i for i, k in enumerate(loader.keys) if " white " in captions[k]]
    black = [i for i, k in enumerate(loader.keys) if " black " in captions[k]]
    assert loader.data.modality[white].mean() < 0.5 < loader.data.modality[black].mean()
    assert len(list(loader.eval_batches(16))) >= 1


def test_images_are_centre_cropped_and_area_resized():
    from PIL import Image

    im = Image.new("L", (90, 30), 0)
    im.paste(255, (30, 0, 60, 30))  # a white square in the middle of a wide black frame
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    arr = decode_image(buf.getvalue(), (1, 8, 8))
    assert arr.shape == (1, 8, 8) and arr.dtype == np.float32
    np.testing.assert_allclose(arr, 1.0)  # the crop is the square: the black sides are gone
    rgb = decode_image(buf.getvalue(), (3, 4, 12))
    assert rgb.shape == (3, 4, 12) and rgb[:, :, 5:7].min() == 1.0 and rgb[:, :, :2].max() == 0.0


def test_key_hash_split_keeps_eval_keys_when_shards_are_added(shape_dir, shape_shards, tmp_path, indexed):
    _, before = indexed
    more = tmp_path / "more"
    for p in shape_dir.glob("*.tar"):
        (more / p.name).parent.mkdir(exist_ok=True)
        (more / p.name).write_bytes(p.read_bytes())
    shape_shards(more, 100, per_shard=100, start=300)
    after = index(more, "text_image", tmp_path / "idx", eval_fraction=0.2)
    old_eval = ShardLoader(indexed[0], "eval").keys.tolist()
    new_eval = ShardLoader(tmp_path / "idx", "eval").keys.tolist()
    assert set(old_eval) < set(new_eval)
    assert after["splits"]["train"]["samples"] + after["splits"]["eval"]["samples"] == 400
    assert before["splits"]["train"]["samples"] < after["splits"]["train"]["samples"]


def test_train_and_eval_folders_are_the_split(shape_shards, tmp_path):
    shape_shards(tmp_path / "own" / "train", 120, per_shard=60)
    shape_shards(tmp_path / "own" / "eval", 30, per_shard=60, start=1000)
    manifest = index(tmp_path / "own", "text_image", tmp_path / "idx")
    assert manifest["split"] == {"by": "folder"}
    assert [manifest["splits"][s]["samples"] for s in ("train", "eval")] == [120, 30]
    assert [e["name"] for e in manifest["splits"]["eval"]["shards"]] == ["eval/00016.tar"]
    assert ShardLoader(tmp_path / "idx", "eval").keys[0] == "000001000"


def _damage(folder: Path) -> dict[str, str]:
    """One shard with a sample without caption and one whose image does not decode; one cut in half."""
    import webdataset as wds

    with wds.TarWriter(str(folder / "00007.tar")) as sink:
        for i in range(50):
            sample = {"__key__": f"bad{i:06d}", "png": np.full((20, 30), 0.5, np.float32), "txt": f"grey {i}"}
            if i == 3:
                del sample["txt"]
            if i == 4:
                sample = {"__key__": sample["__key__"], "jpg": b"not a jpeg at all", "txt": "broken"}
            sink.write(sample)
    cut = folder / "00001.tar"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2 + 700])
    return {"bad000003": "no caption", "bad000004": "image does not decode"}


def test_bad_samples_are_skipped_with_a_warning_naming_shard_and_key(shape_shards, tmp_path):
    folder = tmp_path / "own"
    shape_shards(folder, 400, per_shard=100)
    expected = _damage(folder)
    warnings: list[str] = []
    manifest = index(folder, "text_image", tmp_path / "idx", max_bad_fraction=0.05, warn=warnings.append)
    bad = {b["key"]: b for b in manifest["bad_samples"]}
    assert len(bad) == 3 and [d["shard"] for d in manifest["damaged_shards"]] == ["00001.tar"]
    for key, why in expected.items():
        assert why in bad[key]["reason"] and bad[key]["shard"] == "00007.tar"
        assert any(f"{folder / '00007.tar'}, sample {key}: {why}" in w for w in warnings)
    (cut_key,) = [k for k, b in bad.items() if b["shard"] == "00001.tar"]
    assert "truncated" in bad[cut_key]["reason"] and any(cut_key in w and "00001.tar" in w for w in warnings)
    total = manifest["splits"]["train"]["samples"] + manifest["splits"]["eval"]["samples"]
    assert 300 + 48 < total < 300 + 48 + 100  # the first half of the cut shard is kept, its second half lost
    # The run opens the same good samples, from the shards as well as from the decoded copy.
    for copy in (tmp_path / "idx" / ".decoded").glob("*.npz"):
        copy.unlink()
    loader = ShardLoader(tmp_path / "idx", "train")
    assert len(loader) == manifest["splits"]["train"]["samples"] and not set(expected) & set(loader.keys)
    with pytest.raises(PrismError, match=r"00001\.tar; 3 samples bad or lost.*re-download.*prism data index"):
        verify(tmp_path / "idx")  # a run trains on what is there; verify says the download is broken


def test_too_many_bad_samples_refuse_with_one_line(shape_shards, tmp_path):
    folder = tmp_path / "own"
    shape_shards(folder, 200, per_shard=100)
    _damage(folder)
    with pytest.raises(PrismError) as err:
        index(folder, "text_image", tmp_path / "idx", max_bad_fraction=0.01, warn=lambda line: None)
    message = str(err.value)
    assert "\n" not in message and "3 of" in message and "--max-bad-fraction" in message
    assert "first: shard 00001.tar, sample 000000" in message and "truncated" in message  # the first in shard order
    assert not (tmp_path / "idx").exists() and not list(tmp_path.glob(".idx*"))


def _three_shards_two_broken(shape_shards, folder: Path) -> None:
    """Three shards of 100 samples: 00001.tar cut to 700 bytes (inside its first sample), 00002.tar 0 bytes."""
    shape_shards(folder, 300, per_shard=100)
    cut = folder / "00001.tar"
    cut.write_bytes(cut.read_bytes()[:700])
    (folder / "00002.tar").write_bytes(b"")


def test_cut_and_empty_shards_are_named_and_counted_lost(shape_shards, tmp_path):
    folder = tmp_path / "own"
    _three_shards_two_broken(shape_shards, folder)
    warnings: list[str] = []
    with pytest.raises(PrismError) as err:
        index(folder, "text_image", tmp_path / "idx", warn=warnings.append)
    message = str(err.value)
    assert "\n" not in message and "2 of 102 samples are bad or lost" in message and "00001.tar" in message
    for name in ("00001.tar", "00002.tar"):
        (line,) = [w for w in warnings if f"{folder / name} " in w]
        assert "at least 1 lost" in line and "re-download" in line
    assert "(0 bytes)" in next(w for w in warnings if "00002.tar" in w)
    # Within the limit the index is written, and verify refuses it, naming both shards and the fix.
    manifest = index(folder, "text_image", tmp_path / "idx", max_bad_fraction=0.5, warn=lambda line: None)
    assert [(d["shard"], d["missing"]) for d in manifest["damaged_shards"]] == [("00001.tar", 1), ("00002.tar", 1)]
    with pytest.raises(PrismError, match=r"00001\.tar, 00002\.tar; 2 samples bad or lost.*--overwrite"):
        verify(tmp_path / "idx")


def test_a_shard_cut_in_the_middle_counts_the_samples_its_stats_list(shape_shards, tmp_path):
    """img2dataset's NNNNN_stats.json gives the count: the samples the cut took are all counted."""
    folder = tmp_path / "own"
    shape_shards(folder, 300, per_shard=100)
    for i in range(3):
        (folder / f"{i:05d}_stats.json").write_text(json.dumps({"count": 120, "successes": 100}))
    cut = folder / "00001.tar"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    warnings: list[str] = []
    with pytest.raises(PrismError, match=r"(4[5-9]|5[0-5]) of 300 samples are bad or lost"):
        index(folder, "text_image", tmp_path / "idx", max_bad_fraction=0.1, warn=warnings.append)
    manifest = index(folder, "text_image", tmp_path / "idx", max_bad_fraction=0.2, warn=warnings.append)
    good = sum(s["samples"] for s in manifest["splits"].values())
    (damaged,) = manifest["damaged_shards"]
    assert good + len(manifest["bad_samples"]) + damaged["missing"] == 300
    assert f"{300 - good} lost" in damaged["reason"] and "00001_stats.json lists" in damaged["reason"]
    # A whole tar holding fewer samples than its stats list is short of them, and said so.
    (folder / "00000_stats.json").write_text(json.dumps({"successes": 104}))
    manifest = index(folder, "text_image", tmp_path / "idx", max_bad_fraction=0.2, warn=warnings.append, overwrite=True)
    assert [d["missing"] for d in manifest["damaged_shards"]][0] == 4
    assert "holds fewer samples than it should" in manifest["damaged_shards"][0]["reason"]


def test_data_after_the_end_of_archive_is_a_broken_shard(shape_shards, tmp_path):
    """Two tars joined (`cat a.tar b.tar`): the second's samples are past the first's end marker."""
    folder = tmp_path / "own"
    a, b = shape_shards(folder, 200, per_shard=100)
    a.write_bytes(a.read_bytes() + b.read_bytes())
    b.unlink()
    warnings: list[str] = []
    manifest = index(folder, "text_image", tmp_path / "idx", max_bad_fraction=0.5, warn=warnings.append)
    assert sum(s["samples"] for s in manifest["splits"].values()) == 100
    assert "data after its end-of-archive marker" in manifest["damaged_shards"][0]["reason"]
    assert any("00000.tar" in w and "at least 1 lost" in w for w in warnings)


def test_cli_index_names_broken_shards_and_verify_fails(run_prism, shape_shards, tmp_path):
    folder = tmp_path / "own"
    _three_shards_two_broken(shape_shards, folder)
    out = str(tmp_path / "idx")
    refused = run_prism("data", "index", str(folder), "--family", "text_image", "--out", out)
    assert refused.returncode != 0 and "00001.tar" in refused.stderr.splitlines()[-1]
    lines = refused.stderr.splitlines()
    assert all(any(f"{name} is cut short" in line for line in lines) for name in ("00001.tar", "00002.tar"))
    done = run_prism("data", "index", str(folder), "--family", "text_image", "--out", out, "--max-bad-fraction", "0.5")
    assert done.returncode == 0 and "2 broken shards (00001.tar, 00002.tar" in done.stdout, done.stderr
    checked = run_prism("data", "verify", out)
    assert checked.returncode != 0 and "00001.tar, 00002.tar" in checked.stderr and "ok" not in checked.stdout


def test_verify_finds_a_replaced_and_an_added_shard(shape_shards, tmp_path):
    folder = tmp_path / "own"
    shape_shards(folder, 200, per_shard=100)
    index(folder, "text_image", tmp_path / "idx")
    assert verify(tmp_path / "idx")["train"]["shards"] == 2
    shape_shards(folder, 100, per_shard=100, start=200)
    with pytest.raises(PrismError, match=r"00002\.tar.*prism data index"):
        verify(tmp_path / "idx")
    (folder / "00002.tar").unlink()
    shape_shards(folder, 100, per_shard=100, seed=5)  # 00000.tar rewritten with other images
    with pytest.raises(PrismError, match=r"00000\.tar does not match its sha256"):
        verify(tmp_path / "idx")
    # A run opening the index refuses before its first step (the decoded copy no longer matches).
    with pytest.raises(PrismError, match=r"00000\.tar does not match its sha256.*prism data index"):
        ShardLoader(tmp_path / "idx", "train")


def test_a_new_shard_makes_a_new_index_digest_which_runs_record(shape_shards, tmp_path):
    """Runs record their data manifest's sha256: a re-index over new shards makes them stale."""
    folder = tmp_path / "own"
    shape_shards(folder, 100, per_shard=100)
    index(folder, "text_image", tmp_path / "idx")
    first = file_digest(tmp_path / "idx" / "manifest.json")
    index(folder, "text_image", tmp_path / "idx", overwrite=True)
    assert file_digest(tmp_path / "idx" / "manifest.json") == first  # same shards, same index
    shape_shards(folder, 100, per_shard=100, start=100)
    index(folder, "text_image", tmp_path / "idx", overwrite=True)
    assert file_digest(tmp_path / "idx" / "manifest.json") != first


def test_duplicate_keys_and_bad_folders_are_refused(shape_shards, tmp_path):
    shape_shards(tmp_path / "a", 50, per_shard=50)
    (tmp_path / "a" / "00009.tar").write_bytes((tmp_path / "a" / "00000.tar").read_bytes())
    with pytest.raises(PrismError, match="000000000.*unique"):
        index(tmp_path / "a", "text_image", tmp_path / "idx")
    with pytest.raises(PrismError, match="absolute"):
        index(Path("relative/shards"), "text_image", tmp_path / "idx")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PrismError, match="no .tar shards"):
        index(tmp_path / "empty", "text_image", tmp_path / "idx")


@pytest.mark.parametrize(
    "family, array, shape",
    [
        ("text_ts", np.sin(np.linspace(0, 9, 200))[None].repeat(2, 0), (3, 64)),
        ("text_graph", np.ones((5, 5)) - np.eye(5), (16, 16)),
    ],
)
def test_array_families_take_npy_members(tmp_path, family, array, shape):
    import webdataset as wds

    (tmp_path / "own").mkdir()
    with wds.TarWriter(str(tmp_path / "own" / "00000.tar")) as sink:
        for i in range(40):
            sink.write({"__key__": f"s{i:04d}", "npy": array.astype(np.float32), "txt": f"item {i}"})
    manifest = index(tmp_path / "own", family, tmp_path / "idx", eval_fraction=0.3)
    loader = ShardLoader(tmp_path / "idx", "train", global_batch=4, family=family)
    assert loader.data.modality.shape[1:] == shape and len(loader) == manifest["splits"]["train"]["samples"]


def test_cli_index_and_verify(run_prism, shape_dir, tmp_path):
    done = run_prism("data", "index", str(shape_dir), "--family", "text_image", "--out", str(tmp_path / "idx"))
    assert done.returncode == 0, done.stderr
    assert "train" in done.stdout and "0 bad samples" in done.stdout
    checked = run_prism("data", "verify", str(tmp_path / "idx" / "manifest.json"))
    assert checked.returncode == 0 and "ok" in checked.stdout, checked.stderr
    again = run_prism("data", "index", str(shape_dir), "--family", "text_image", "--out", str(tmp_path / "idx"))
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1 and "--overwrite" in again.stderr
    meta = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert meta["kind"] == "index"


def test_index_in_several_processes_is_the_same_index(shape_dir, indexed, tmp_path):
    out, manifest = indexed
    assert index(shape_dir, "text_image", tmp_path / "idx", eval_fraction=0.2, jobs=3) == manifest
    assert file_digest(tmp_path / "idx" / "manifest.json") == file_digest(out / "manifest.json")
    np.testing.assert_array_equal(ShardLoader(tmp_path / "idx").data.modality, ShardLoader(out).data.modality)


@pytest.mark.parametrize("fmt", ["GNU_FORMAT", "PAX_FORMAT", "USTAR_FORMAT"])
def test_tar_reader_takes_what_tarfile_writes(fmt):
    """Long names (GNU longname, pax path, ustar prefix), directories passed over, members in order."""
    import tarfile

    from prism.data.index import iter_samples

    folder = "d" * 90 + "/" + "e" * 60
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=getattr(tarfile, fmt)) as tar:
        info = tarfile.TarInfo(folder)
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for name, data in ((f"{folder}/k1.txt", b"one"), (f"{folder}/k1.png", b"\x89PNG"), ("k2.txt", b"two")):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1.5 if fmt == "PAX_FORMAT" else 1
            tar.addfile(info, io.BytesIO(data))
    samples = list(iter_samples(buf.getvalue()))
    assert [(k, sorted(m), cut) for k, m, cut in samples] == [
        (f"{folder}/k1", ["png", "txt"], None),
        ("k2", ["txt"], None),
    ]
    assert samples[0][1]["txt"] == b"one"


def test_index_at_a_configured_shape_and_tokenizer_is_what_runs_read(shape_dir, bpe_file, tmp_path):
    """64x64 RGB images, captions in a BPE tokenizer: the manifest records the spec (and keeps the
    tokenizer's copy), the token counts are the tokenizer's, and the loader serves its ids."""
    from prism.core.families import resolve_spec
    from prism.core.tokenizer import TextEncoder
    from prism.data.manifest import data_spec

    spec = resolve_spec("text_image", {"image_size": 64, "channels": 3, "patch": 8, "text_len": 24}, str(bpe_file))
    manifest = index(shape_dir, "text_image", tmp_path / "idx", eval_fraction=0.2, spec=spec)
    assert manifest["modality_shape"] == [3, 64, 64] and manifest["n_modality_tokens"] == 64
    assert manifest["text_len"] == 24 and manifest["tokenizer"]["sha256"] == spec.vocab.sha256
    assert (tmp_path / "idx" / "tokenizer.json").read_bytes() == bpe_file.read_bytes()
    assert data_spec(tmp_path / "idx").vocab.record() == spec.vocab.record()
    encoder = TextEncoder(spec.vocab)
    captions = captions_by_key(shape_dir)
    train = [c for k, c in captions.items() if not is_eval_key(k, 0.2)]
    assert manifest["splits"]["train"]["tokens"] == sum(64 + len(ids) + 2 for ids in encoder.encode_batch(train))
    loader = ShardLoader(tmp_path / "idx", "train", global_batch=4, seed=0)
    batch = next(iter(loader))
    assert tuple(batch["modality"].shape) == (4, 3, 64, 64)
    row = batch["tokens"][0].tolist()
    v = spec.vocab
    assert row[:64] == [v.mod] * 64 and row[64] == v.bos and len(row) == 64 + 24
    text = row[65 : row.index(v.eos)]
    assert text == encoder.encode_batch([captions[str(loader.keys[int(batch["sample_ids"][0])])]])[0]


def test_a_split_above_decoded_max_mb_keeps_no_copy_counts_every_sample_and_streams(shape_dir, indexed, tmp_path):
    from prism.data.options import resolve, sample_bytes
    from prism.data.stream import StreamLoader

    _, whole = indexed
    assert all("decoded" not in entry for entry in whole["splits"].values())  # an index under the bound: as before
    # Room for 100 samples: train (about 240, 80 a shard) passes it at its second shard, eval (about 60) does not,
    # but data with a split to stream streams its eval split too: neither keeps a copy.
    bound = 100.5 * sample_bytes(whole) / 2**20
    out = tmp_path / "idx"
    manifest = index(shape_dir, "text_image", out, eval_fraction=0.2, decoded_max_mb=bound)
    assert [manifest["splits"][s].pop("decoded") for s in ("train", "eval")] == [False, False]
    assert manifest.pop("decoded_max_mb") == bound and whole["decoded_max_mb"] == 1024  # recorded: re-indexed so
    whole = {k: v for k, v in whole.items() if k != "decoded_max_mb"}
    assert manifest == whole  # the same counts, sha256 and tokens
    assert [p.name for p in out.iterdir()] == ["manifest.json"]  # nothing spooled is left
    again = index(shape_dir, "text_image", tmp_path / "jobs", eval_fraction=0.2, decoded_max_mb=bound, jobs=3)
    assert again["splits"]["train"].pop("decoded") is False and again["splits"]["eval"].pop("decoded") is False
    assert again.pop("decoded_max_mb") == bound and again == whole
    fits = index(shape_dir, "text_image", tmp_path / "fits", eval_fraction=0.2, decoded_max_mb=1.0)
    assert fits.pop("decoded_max_mb") == 1.0 and fits == whole
    stored = json.loads((out / "manifest.json").read_text())
    assert resolve(stored, "train", "auto", 10**6) == "stream"
    with pytest.raises(PrismError, match=f"{out}: no decoded copy .*the train split .*--decoded-max-mb 1`"):
        resolve(stored, "train", "preload", 10**6, out)
    assert resolve(whole, "train", "auto", 1024) == "preload"
    with pytest.raises(PrismError, match="no decoded copy"):
        ShardLoader(out)
    assert verify(out)["train"]["samples"] == whole["splits"]["train"]["samples"]
    loader = StreamLoader(out, "train", global_batch=8, workers=0)
    assert next(loader)["modality"].shape[0] == 8
    assert sum(len(b["modality"]) for b in loader.eval_batches(16)) == whole["splits"]["eval"]["samples"]

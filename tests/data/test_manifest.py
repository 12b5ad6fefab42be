"""Bad data stops verify and the loader with an error naming the shard; nothing is skipped."""

from __future__ import annotations

import json

import pytest

from prism.cli import main
from prism.core.errors import PrismError
from prism.data.loader import ShardLoader
from prism.data.manifest import read_manifest, sha256, verify


def flip(path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def assert_both_fail(data_dir, needle, capsys):
    assert main(["data", "verify", str(data_dir)]) == 2
    assert needle in capsys.readouterr().err
    with pytest.raises(PrismError, match=needle):
        ShardLoader(data_dir, "train", 8, 0)


def test_flipped_bytes_name_the_shard(fresh_copy, capsys):
    data_dir = fresh_copy("text_image")
    flip(data_dir / "train-000001.tar", 5000)
    assert_both_fail(data_dir, "train-000001.tar", capsys)


def test_truncated_shard_names_the_shard(fresh_copy, capsys):
    data_dir = fresh_copy("text_image")
    shard = data_dir / "train-000002.tar"
    shard.write_bytes(shard.read_bytes()[:7000])
    assert_both_fail(data_dir, "train-000002.tar", capsys)


def test_missing_manifest(fresh_copy, capsys):
    data_dir = fresh_copy("text_graph")
    (data_dir / "manifest.json").unlink()
    assert_both_fail(data_dir, "manifest.json is missing", capsys)


def test_unlisted_shard_is_refused(fresh_copy, capsys):
    data_dir = fresh_copy("text_graph")
    (data_dir / "train-000099.tar").write_bytes(b"")
    assert_both_fail(data_dir, "train-000099.tar", capsys)


def rewrite_manifest(data_dir, edit):
    manifest = json.loads((data_dir / "manifest.json").read_text())
    edit(manifest)
    (data_dir / "manifest.json").write_text(json.dumps(manifest))


def test_wrong_count_with_matching_hash_names_the_shard(fresh_copy, capsys):
    data_dir = fresh_copy("text_graph")
    rewrite_manifest(data_dir, lambda m: m["splits"]["train"]["shards"][0].update(samples=1999))
    assert_both_fail(data_dir, "train-000000.tar holds 2000 samples", capsys)


def test_corrupt_record_names_shard_and_key(fresh_copy, capsys):
    """A tar that hashes right (manifest re-hashed) but holds a broken record: shard and key named."""
    data_dir = fresh_copy("text_graph")
    shard = data_dir / "eval-000000.tar"
    data = bytearray(shard.read_bytes())
    # The first member is a .json (sorted before .npy); break its JSON text, keep the tar valid.
    data[512] = ord("#")
    shard.write_bytes(bytes(data))
    rewrite_manifest(data_dir, lambda m: m["splits"]["eval"]["shards"][0].update(sha256=sha256(bytes(data))))
    assert read_manifest(data_dir)["family"] == "text_graph"  # the manifest itself is fine
    with pytest.raises(PrismError, match=r"eval-000000.tar, sample [a-z0-9-]+__\d{4}: missing or bad .json"):
        verify(data_dir)


def test_missing_directory_says_how_to_build(tmp_path):
    with pytest.raises(PrismError, match="prism data build"):
        verify(tmp_path / "nope")


def test_truncated_tar_with_matching_hash_is_caught_by_the_reader(fresh_copy):
    """Even a manifest re-hashed over a cut tar (no hash protection) fails, naming shard and sample."""
    data_dir = fresh_copy("text_graph")
    shard = data_dir / "train-000001.tar"
    cut = shard.read_bytes()[: 512 * 41]
    shard.write_bytes(cut)
    rewrite_manifest(data_dir, lambda m: m["splits"]["train"]["shards"][1].update(sha256=sha256(cut)))
    with pytest.raises(PrismError, match=r"train-000001.tar is not a readable tar after sample [a-z0-9-]+__\d{4}"):
        verify(data_dir)

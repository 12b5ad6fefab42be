"""The decoded copy the build saves: the same records as the shards, and never trusted past a changed shard."""

from __future__ import annotations

import numpy as np
import pytest

from prism.data import decoded, manifest
from prism.data.manifest import read_manifest, read_split


@pytest.fixture
def calls(shards, monkeypatch):
    """Counts the decodings of a split from its shards (the copy's fallback).

    Takes `shards` so that the text_image directory is built (its build decodes each split
    once) before the counting starts, whichever test runs first.
    """
    seen: list[str] = []

    def counted(data_dir, m, split):
        seen.append(split)
        return read_split(data_dir, m, split)

    monkeypatch.setattr(decoded, "read_split", counted)
    return seen


def test_the_copy_holds_what_the_shards_hold(built, calls):
    data_dir = built("text_image")
    m = read_manifest(data_dir)
    for split in manifest.SPLITS:
        assert decoded.cache_path(data_dir, split).is_file()
        copy, shards = decoded.load_split(data_dir, m, split), read_split(data_dir, m, split)
        assert copy.keys == shards.keys and copy.captions == shards.captions
        assert np.array_equal(copy.modality, shards.modality)
        assert np.array_equal(copy.has_modality, shards.has_modality)
    assert calls == []  # served from the copy


def test_a_rewritten_shard_is_decoded_from_the_tar_again(fresh_copy, calls):
    data_dir = fresh_copy("text_image")
    m = read_manifest(data_dir)
    shard = data_dir / m["splits"]["train"]["shards"][0]["name"]
    shard.write_bytes(shard.read_bytes())  # same bytes, new modification time
    decoded.load_split(data_dir, m, "train")
    decoded.load_split(data_dir, m, "eval")
    assert calls == ["train"]


def test_a_damaged_or_missing_copy_falls_back_to_the_shards(fresh_copy, calls):
    data_dir = fresh_copy("text_image")
    m = read_manifest(data_dir)
    decoded.cache_path(data_dir, "train").write_bytes(b"not a zip")
    decoded.cache_path(data_dir, "eval").unlink()
    assert decoded.load_split(data_dir, m, "train").keys == read_split(data_dir, m, "train").keys
    decoded.load_split(data_dir, m, "eval")
    assert calls == ["train", "eval"]


def test_the_size_a_build_expects_for_each_copy_is_what_it_writes(built):
    # A full disk's message says what the build needs: the shards and these copies (prism.data.shards).
    data_dir = built("text_image")
    m = read_manifest(data_dir)
    for split in manifest.SPLITS:
        records = read_split(data_dir, m, split)
        expected = decoded.copy_bytes(records.keys, records.captions, m["modality_shape"])
        assert expected == pytest.approx(decoded.cache_path(data_dir, split).stat().st_size, rel=0.01)

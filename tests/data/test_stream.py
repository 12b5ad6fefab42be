"""The streamed split: who reads which shard, resuming at a step, and shards that break while streamed."""

from __future__ import annotations

import pytest
import torch

from prism.core.errors import PrismError
from prism.data.options import LoaderOptions, decoded_mb, loader_options, resolve
from prism.data.order import plan_streams
from prism.data.stream import StreamLoader


def same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in ("tokens", "modality", "labels", "sample_ids"))


# ---- the order ------------------------------------------------------------------------------


def test_each_epoch_deals_every_shard_once_to_disjoint_streams_of_ranks_and_workers():
    plan = plan_streams([10] * 13, seed=3, world_size=3, workers=2)
    for epoch in range(4):
        dealt = [plan.shards(epoch, r, k) for r in range(3) for k in range(2)]
        flat = [i for shards in dealt for i in shards]
        assert sorted(flat) == list(range(13))  # once each, no stream shares a shard
        # 13 shards for 6 streams: one stream gets 3, the rest 2 (the documented rule).
        assert sorted(map(len, dealt)) == [2, 2, 2, 2, 2, 3]
    # The permutation changes who reads which shard, and is the seed's.
    assert plan.shards(0, 0, 0) != plan.shards(1, 0, 0)
    assert plan.shards(1, 2, 1) == plan_streams([10] * 13, 3, 3, 2).shards(1, 2, 1)


def test_a_stream_position_walks_its_own_epochs():
    plan = plan_streams([5, 7, 9, 11], seed=0, world_size=1, workers=2)
    n0 = plan.length(0, 0, 1)
    assert plan.position(0, 1, 0) == (0, 0)
    assert plan.position(0, 1, n0 - 1) == (0, n0 - 1)
    assert plan.position(0, 1, n0) == (1, 0)
    assert plan.position(0, 1, n0 + plan.length(1, 0, 1) + 2) == (2, 2)


def test_fewer_shards_than_ranks_is_refused_and_too_many_workers_are_cut_with_a_warning():
    with pytest.raises(PrismError, match="3 shard\\(s\\) with samples for 4 ranks.*data.loader: preload"):
        plan_streams([1, 1, 1], 0, world_size=4, workers=1)
    said = []
    plan = plan_streams([1] * 5, 0, world_size=2, workers=4, warn=said.append)
    assert plan.workers == 2 and "data.workers 4" in said[0] and "2 worker(s)" in said[0]


def test_auto_preloads_a_small_split_and_streams_a_large_one():
    manifest = {"modality_shape": [3, 224, 224], "n_modality_tokens": 196, "text_len": 128}
    manifest["splits"] = {"train": {"samples": 20_000}}
    assert decoded_mb(manifest, "train") > 11_000
    assert resolve(manifest, "train", "auto", 1024) == "stream"
    assert resolve(manifest, "train", "preload", 1024) == "preload"
    manifest["splits"]["train"]["samples"] = 1000
    assert resolve(manifest, "train", "auto", 1024) == "preload"


def test_the_config_section_gives_the_loader_keys_only():
    opts = loader_options({"seed": 0, "shards": {}, "loader": "stream", "workers": 4})
    assert opts == LoaderOptions(loader="stream", workers=4)
    with pytest.raises(PrismError, match="loader"):
        loader_options({"loader": "mmap"})


# ---- the loader ---------------------------------------------------------------------------


def test_a_stream_reads_each_sample_once_per_epoch_in_a_shuffled_order(shards):
    loader = StreamLoader(shards, global_batch=16, workers=0, shuffle_buffer=64)
    plan = loader.plan
    n = plan.length(0, 0, 0)
    assert n == len(loader)  # one stream: every shard
    seen = []
    while len(seen) < n:
        seen += next(loader)["sample_ids"].tolist()
    first = seen[:n]
    assert sorted(first) == list(range(n))
    assert first != sorted(first)  # shuffled, within and across shards


def test_a_loader_resumed_at_a_step_gives_the_same_batches_without_reading_from_the_start(shards):
    whole = StreamLoader(shards, global_batch=8, seed=1, workers=2, shuffle_buffer=40)
    batches = [next(whole) for _ in range(9)]
    state = whole.state_dict()
    whole.close()
    assert state["step"] == 9 and state["workers"] == 2 and len(state["streams"]) == 2
    resumed = StreamLoader(shards, global_batch=8, seed=1, workers=2, shuffle_buffer=40)
    resumed.load_state_dict({**state, "step": 5})
    again = [next(resumed) for _ in range(4)]
    resumed.close()
    assert all(same(a, b) for a, b in zip(again, batches[5:]))
    # Each rank of two reads its own shards: no sample in both ranks' first batches.
    ranks = [StreamLoader(shards, global_batch=8, rank=r, world_size=2, workers=1) for r in range(2)]
    ids = [set(next(r)["sample_ids"].tolist()) for r in ranks]
    for r in ranks:
        r.close()
    assert not ids[0] & ids[1]


def test_resuming_with_other_workers_or_a_preloaded_position_is_refused(shards):
    loader = StreamLoader(shards, global_batch=8, workers=1)
    state = loader.state_dict()
    other = StreamLoader(shards, global_batch=8, workers=2)
    with pytest.raises(PrismError, match="workers=1.*data.workers"):
        other.load_state_dict(state)
    with pytest.raises(PrismError, match="loader=None"):
        other.load_state_dict({k: v for k, v in state.items() if k != "loader"})


def test_eval_batches_are_the_preloaded_loaders(shards):
    from prism.data.loader import ShardLoader

    stream = next(StreamLoader(shards, global_batch=8, workers=0).eval_batches(32))
    preload = next(ShardLoader(shards, global_batch=8).eval_batches(32))
    assert same(stream, preload)


def test_packed_rows_are_not_streamed(shards):
    with pytest.raises(PrismError, match="layout 'packed' is not streamed.*preload"):
        StreamLoader(shards, layout="packed")


def _shard(copy, name="train-000003.tar"):
    path = copy / name
    path.chmod(0o644)
    return path


def test_a_shard_changed_since_the_build_stops_the_stream_naming_it(fresh_copy):
    copy = fresh_copy("text_image")
    path = _shard(copy)
    data = bytearray(path.read_bytes())
    where = data.index(b'"caption": "') + 13
    data[where] = ord("Z") if data[where] != ord("Z") else ord("Y")  # same size, another caption
    path.write_bytes(bytes(data))
    loader = StreamLoader(copy, global_batch=100, workers=1, shuffle_buffer=100)
    with pytest.raises(PrismError, match=f"shard {path} does not match its sha256.*prism data build"):
        for _ in range(1000):
            next(loader)
    # A shard cut short is refused before anything streams.
    path.write_bytes(bytes(data[:-5000]))
    with pytest.raises(PrismError, match=f"shard {path} is {len(data) - 5000} bytes"):
        StreamLoader(copy, global_batch=8)


def test_an_image_that_no_longer_decodes_stops_the_stream_naming_shard_and_key(shape_shards, tmp_path):
    from prism.data.indexer import index

    folder = tmp_path / "shards"
    shape_shards(folder, 60, per_shard=20)
    out = tmp_path / "index"
    index(folder, "text_image", out, warn=lambda line: None)
    path = folder / "00001.tar"  # keys 20-39; 21 is a .png, 24 a .jpg
    data = path.read_bytes()
    at = data.index(b"\xff\xd8\xff")  # the first JPEG of the shard: no longer one, same size
    path.write_bytes(data[:at] + b"XXX" + data[at + 3 :])
    with pytest.raises(PrismError, match=f"shard {path}, sample 0000000\\d\\d: image does not decode.*re-index"):
        loader = StreamLoader(out, global_batch=60, workers=1, shuffle_buffer=60)
        next(loader)


def test_a_preloaded_loader_refuses_a_streamed_position(shards):
    from prism.data.loader import ShardLoader

    state = StreamLoader(shards, global_batch=8, workers=0).state_dict()
    with pytest.raises(PrismError, match="streamed split, this loader preloads it"):
        ShardLoader(shards, global_batch=8).load_state_dict(state)

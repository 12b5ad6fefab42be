"""ShardLoader: explicit directories, world-size-independent global batches, resume, eval."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest
import torch

from prism.core.errors import PrismError
from prism.core.families import FAMILIES
from prism.core.tokenizer import MOD, PAD
from prism.data.loader import ShardLoader


def raw_modality(data_dir, key):
    """The modality array of `key` read straight from the tar files (not through the loader)."""
    for shard in sorted(data_dir.glob("*.tar")):
        with tarfile.open(shard) as tar:
            try:
                member = tar.getmember(f"{key}.npy")
            except KeyError:
                continue
            return np.load(io.BytesIO(tar.extractfile(member).read()))
    raise AssertionError(f"{key} not in {data_dir}")


def take(loader, n):
    return [next(loader) for _ in range(n)]


def test_two_loaders_read_only_their_own_shards(built, monkeypatch):
    image_dir, graph_dir = built("text_image"), built("text_graph")
    image = ShardLoader(image_dir, "train", 16, seed=0)
    graph = ShardLoader(graph_dir, "train", 16, seed=0)
    for loader, data_dir, family in ((image, image_dir, "text_image"), (graph, graph_dir, "text_graph")):
        batch = next(loader)
        assert loader.family == family
        assert tuple(batch["modality"].shape[1:]) == FAMILIES[family].modality_shape
        for j in (0, 7, 15):
            key = loader.keys[int(batch["sample_ids"][j])]
            np.testing.assert_array_equal(batch["modality"][j].numpy(), raw_modality(data_dir, key))
    assert not set(image.keys) & set(graph.keys)

    # With WEBDATASET_LOCAL_PATH pointing at one of them: that one still reads its own shards,
    # the other refuses instead of following the variable.
    monkeypatch.setenv("WEBDATASET_LOCAL_PATH", str(image_dir))
    again = ShardLoader(image_dir, "train", 16, seed=0)
    assert torch.equal(next(again)["tokens"], next(ShardLoader(image_dir, "train", 16, seed=0))["tokens"])
    with pytest.raises(PrismError, match="WEBDATASET_LOCAL_PATH=.*unset WEBDATASET_LOCAL_PATH"):
        ShardLoader(graph_dir, "train", 16, seed=0)
    monkeypatch.setenv("WEBDATASET_LOCAL_PATH", str(graph_dir / ".." / "elsewhere"))
    with pytest.raises(PrismError, match="WEBDATASET_LOCAL_PATH"):
        ShardLoader(image_dir, "train", 16, seed=0)


def test_family_mismatch_is_refused(built):
    with pytest.raises(PrismError, match="holds family 'text_image', not 'text_graph'"):
        ShardLoader(built("text_image"), "train", 8, seed=0, family="text_graph")


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_two_ranks_split_each_global_batch_and_cover_each_epoch_once(built, layout):
    data_dir = built("text_graph")
    kw = dict(seed=3, layout=layout, seq_len=None if layout == "padded" else 128)
    gb = 64 if layout == "padded" else 16
    single = ShardLoader(data_dir, "train", gb, **kw)
    ranks = [ShardLoader(data_dir, "train", gb, rank=r, world_size=2, **kw) for r in (0, 1)]
    n = len(single)
    stream = []
    steps = 0
    while len(stream) < 2 * n + 1:  # two whole epochs and into the third
        whole = next(single)
        parts = [next(r) for r in ranks]
        for key in ("tokens", "labels", "modality", "sample_ids"):
            assert torch.equal(torch.cat([p[key] for p in parts]), whole[key]), (steps, key)
        assert parts[0]["tokens"].shape[0] == parts[1]["tokens"].shape[0] == gb // 2
        stream += whole["sample_ids"].tolist()
        steps += 1
    # Every train sample exactly once per epoch (global batches run on across the epoch boundary).
    for epoch in (0, 1):
        assert sorted(stream[epoch * n : (epoch + 1) * n]) == list(range(n))
    assert stream[:n] != stream[n : 2 * n]  # a fresh order each epoch
    assert single.epochs_seen > 2 and single.step == steps


def test_order_depends_only_on_seed_and_epoch(built):
    data_dir = built("text_image")
    a, b, c = (ShardLoader(data_dir, "train", 32, seed=s) for s in (5, 5, 6))
    for _ in range(3):
        ba, bb, bc = next(a), next(b), next(c)
        assert torch.equal(ba["sample_ids"], bb["sample_ids"])
        assert not torch.equal(ba["sample_ids"], bc["sample_ids"])
    np.testing.assert_array_equal(a.permutation(1), np.random.default_rng([5, 1]).permutation(len(a)))


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_resume_continues_identically_on_any_world_size(built, layout):
    data_dir = built("text_ts")
    kw = dict(seed=1, layout=layout, seq_len=None if layout == "padded" else 256)
    first = ShardLoader(data_dir, "train", 32, **kw)
    take(first, 140)  # past the end of the first epoch
    state = json.loads(json.dumps(first.state_dict()))  # survives a checkpoint file
    expected = take(first, 5)

    resumed = ShardLoader(data_dir, "train", 32, **kw)
    resumed.load_state_dict(state)
    for want, got in zip(expected, take(resumed, 5)):
        assert torch.equal(want["tokens"], got["tokens"]) and torch.equal(want["modality"], got["modality"])

    ranks = [ShardLoader(data_dir, "train", 32, rank=r, world_size=2, **kw) for r in (0, 1)]
    for r in ranks:
        r.load_state_dict(state)
    for want in expected:
        parts = [next(r) for r in ranks]
        assert torch.equal(torch.cat([p["sample_ids"] for p in parts]), want["sample_ids"])
    assert resumed.state_dict()["epoch"] == first.state_dict()["epoch"] >= 1


def test_resume_refuses_another_seed_or_layout(built):
    data_dir = built("text_image")
    state = ShardLoader(data_dir, "train", 8, seed=0).state_dict()
    with pytest.raises(PrismError, match="seed"):
        ShardLoader(data_dir, "train", 8, seed=1).load_state_dict(state)
    with pytest.raises(PrismError, match="layout"):
        ShardLoader(data_dir, "train", 8, seed=0, layout="packed", seq_len=64).load_state_dict(state)


@pytest.mark.parametrize("family", ["text_image", "text_ts", "text_graph"])
def test_padded_batch_contract(built, family):
    spec = FAMILIES[family]
    loader = ShardLoader(built(family), "train", 24, seed=0)
    batch = next(loader)
    tokens, labels, modality = batch["tokens"], batch["labels"], batch["modality"]
    assert tokens.dtype == labels.dtype == torch.int64 and modality.dtype == torch.float32
    assert tokens.shape == labels.shape == (24, spec.tokens_per_sample)
    assert modality.shape == (24, *spec.modality_shape)
    assert (tokens == MOD).sum() == 24 * spec.n_modality_tokens
    assert (tokens[:, : spec.n_modality_tokens] == MOD).all()
    assert batch["n_tokens"] == int((tokens != PAD).sum()) and batch["n_samples"] == 24
    nxt = tokens[:, 1:]
    keep = (nxt != MOD) & (nxt != PAD)
    assert torch.equal(labels[:, :-1][keep], nxt[keep]) and (labels[:, :-1][~keep] == -100).all()
    assert (labels[:, -1] == -100).all()
    wide = next(ShardLoader(built(family), "train", 24, seed=0, seq_len=256))
    assert wide["tokens"].shape == (24, 256)
    assert torch.equal(wide["tokens"][:, : spec.tokens_per_sample], tokens)


def test_eval_batches_cover_the_eval_split_deterministically(built):
    data_dir = built("text_graph")
    loader = ShardLoader(data_dir, "train", 16, seed=0)
    batches = list(loader.eval_batches(100))
    again = list(ShardLoader(data_dir, "train", 64, seed=9, rank=1, world_size=2).eval_batches(100))
    assert len(batches) == len(again)
    for a, b in zip(batches, again):
        assert torch.equal(a["tokens"], b["tokens"]) and torch.equal(a["modality"], b["modality"])
    n_eval = sum(b["n_samples"] for b in batches)
    manifest = loader.manifest
    assert n_eval == manifest["splits"]["eval"]["samples"]
    assert [b["n_samples"] for b in batches][:-1] == [100] * (len(batches) - 1)
    eval_loader = ShardLoader(data_dir, "eval", 16, seed=0)
    assert set(eval_loader.sources) == set(manifest["source_items"]["eval"])
    assert not set(eval_loader.sources) & set(loader.sources)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(global_batch=9, world_size=2), "--global-batch 9 does not divide among the 2 ranks"),
        (dict(global_batch=8, rank=2, world_size=2), "rank 2"),
        (
            dict(global_batch=8, seq_len=10),
            r"seq_len 10 is shorter than a text_image row needs: 64 tokens \(one whole",
        ),
        (dict(global_batch=8, layout="ragged"), "unknown layout"),
    ],
)
def test_bad_arguments_are_refused(built, kwargs, match):
    with pytest.raises(PrismError, match=match):
        ShardLoader(built("text_image"), "train", seed=0, **kwargs)

"""Packed rows: whole samples only, MOD runs match modality rows, no loss on PAD/MOD targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prism.core.families import FAMILIES
from prism.core.tokenizer import BOS, EOS, MOD, PAD
from prism.data import packing
from prism.data.loader import ShardLoader


def test_greedy_rows_keeps_order_and_never_splits():
    starts, offsets = packing.greedy_rows(np.array([5, 5, 5, 3, 7, 10]), 10)
    assert starts.tolist() == [0, 2, 4, 5, 6]
    assert offsets.tolist() == [0, 5, 0, 5, 0, 0]
    with pytest.raises(ValueError, match="does not fit"):
        packing.greedy_rows(np.array([3, 11]), 10)


def test_sample_table_layout():
    table, lengths = packing.sample_table(["ab", "xyz"], np.array([True, False]), 3, 9)
    assert table[0].tolist() == [MOD, MOD, MOD, BOS, 97, 98, EOS, PAD, PAD]
    assert table[1].tolist() == [BOS, 120, 121, 122, EOS, PAD, PAD, PAD, PAD]
    assert lengths.tolist() == [7, 5]


def test_sample_table_lays_out_every_sample_as_its_bytes_say():
    """Many samples at once, multi-byte UTF-8, empty captions and a full row, each as one row alone."""
    rng = np.random.default_rng(0)
    alphabet = ["a", "Z", " ", "é", "漢", "\n"]
    captions = ["".join(rng.choice(alphabet, rng.integers(0, 6))) for _ in range(200)] + ["漢" * 5 + "a"]
    has_mod = rng.random(len(captions)) < 0.5
    has_mod[-1] = True  # 2 modality slots + BOS + 16 bytes + EOS: exactly the width
    table, lengths = packing.sample_table(captions, has_mod, 2, 20)
    for i, (caption, mod) in enumerate(zip(captions, has_mod)):
        row = [MOD] * (2 if mod else 0) + [BOS] + list(caption.encode("utf-8")) + [EOS]
        assert table[i].tolist() == row + [PAD] * (20 - len(row)) and lengths[i] == len(row)
    with pytest.raises(ValueError, match="sample 1 needs 21 tokens, rows hold 20"):
        packing.sample_table(["a", "漢" * 5 + "ab"], np.array([False, True]), 2, 20)


@pytest.mark.parametrize("family", ["text_image", "text_ts", "text_graph"])
def test_packed_batch_invariants(built, family):
    spec = FAMILIES[family]
    loader = ShardLoader(built(family), "train", 8, seed=2, layout="packed", seq_len=256)
    for _ in range(3):
        batch = next(loader)
        tokens, labels, seg, ids = batch["tokens"], batch["labels"], batch["segment_ids"], batch["sample_ids"]
        assert tokens.shape == labels.shape == seg.shape == (8, 256)
        # One MOD run per sample, in the order of the modality rows.
        assert (tokens == MOD).sum() == batch["modality"].shape[0] * spec.n_modality_tokens
        assert torch.equal(batch["modality"], torch.from_numpy(loader.data.modality[ids.numpy()]))
        # Every sample appears whole, contiguous, in order; rows end in PAD only.
        j = 0
        for r in range(8):
            row, srow = tokens[r].numpy(), seg[r].numpy()
            for s in range(1, int(srow.max()) + 1):
                where = np.flatnonzero(srow == s)
                assert where.size and (np.diff(where) == 1).all()
                sid = int(ids[j])
                want = loader.data.table[sid, : loader.data.lengths[sid]]
                np.testing.assert_array_equal(row[where], want)
                j += 1
            assert (row[srow == 0] == PAD).all()
        assert j == batch["n_samples"] == ids.numel()
        assert batch["n_tokens"] == int((tokens != PAD).sum())
        # Labels: next token, -100 where it is MOD or PAD (also across sample boundaries).
        nxt = tokens[:, 1:]
        keep = (nxt != MOD) & (nxt != PAD)
        assert torch.equal(labels[:, :-1][keep], nxt[keep])
        assert (labels[:, :-1][~keep] == -100).all() and (labels[:, -1] == -100).all()


@pytest.mark.parametrize("family", ["text_image", "text_ts", "text_graph"])
def test_packing_puts_several_samples_in_a_row(built, family):
    """At seq_len 256, a padded row holds one sample and wastes the rest; packed rows hold several."""
    spec = FAMILIES[family]
    loader = ShardLoader(built(family), "train", 16, seed=0, layout="packed", seq_len=256)
    n = sum(next(loader)["n_samples"] for _ in range(5))
    assert n / (5 * 16) >= 256 // spec.tokens_per_sample
    k = 256 // spec.tokens_per_sample  # every row but an epoch's last holds at least k samples
    assert len(loader) >= k * (loader.units_in_epoch(0) - 1) and loader.samples_per_unit > k - 0.1
    assert ShardLoader(built(family), "train", 16, seed=0, seq_len=256).samples_per_unit == 1.0

"""Token layouts: one sample per row (padded) or whole samples packed greedily into rows.

Pure numpy, vectorised over the batch: the loader's throughput rests on these.
A sample's tokens are `[MOD x n_modality_tokens] BOS text EOS` (text-only
samples have no MOD run); rows are filled with PAD after their last sample.
Labels are the next token, IGNORE where the target is MOD or PAD (and at the
last position), so a packed row never asks a sample to predict the next
sample's modality slots.
"""

from __future__ import annotations

import numpy as np

from prism.model.tokenizer import BOS, EOS, IGNORE, MOD, PAD


def sample_table(captions: list[str], has_modality: np.ndarray, n_mod: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens int64 [N, width] PAD-filled, lengths int64 [N]) of every sample's layout."""
    n = len(captions)
    table = np.full((n, width), PAD, np.int64)
    lengths = np.zeros(n, np.int64)
    for i, (caption, has_mod) in enumerate(zip(captions, has_modality)):
        body = np.frombuffer(caption.encode("utf-8"), np.uint8)
        head = n_mod if has_mod else 0
        length = head + body.size + 2
        if length > width:
            raise ValueError(f"sample {i} needs {length} tokens, rows hold {width}")
        table[i, :head] = MOD
        table[i, head] = BOS
        table[i, head + 1 : head + 1 + body.size] = body
        table[i, head + 1 + body.size] = EOS
        lengths[i] = length
    return table, lengths


def labels_for(tokens: np.ndarray) -> np.ndarray:
    """Next-token targets with IGNORE where the target is MOD or PAD, and at the last position."""
    labels = np.full(tokens.shape, IGNORE, np.int64)
    nxt = tokens[:, 1:]
    labels[:, :-1] = np.where((nxt == MOD) | (nxt == PAD), IGNORE, nxt)
    return labels


def padded(table: np.ndarray, idx: np.ndarray, seq_len: int) -> np.ndarray:
    """[len(idx), seq_len]: one sample per row."""
    if seq_len == table.shape[1]:
        return table[idx]
    out = np.full((idx.size, seq_len), PAD, np.int64)
    out[:, : table.shape[1]] = table[idx]
    return out


def greedy_rows(lengths: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy in-order packing: (row starts into `lengths` with a final sentinel, offset of each sample).

    A sample that does not fit in the current row's remaining space opens a new
    row; no sample is ever split across rows.
    """
    if lengths.size and int(lengths.max()) > seq_len:
        raise ValueError(f"a sample of {int(lengths.max())} tokens does not fit seq_len {seq_len}")
    starts = [0]
    offsets = np.empty(lengths.size, np.int64)
    fill = 0
    for i, n in enumerate(lengths.tolist()):
        if fill + n > seq_len:
            starts.append(i)
            fill = 0
        offsets[i] = fill
        fill += n
    starts.append(lengths.size)
    return np.asarray(starts if lengths.size else [0], np.int64), offsets


def packed(table: np.ndarray, lengths: np.ndarray, idx: np.ndarray, row_of: np.ndarray,
           offsets: np.ndarray, n_rows: int, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens [n_rows, seq_len], segment ids [n_rows, seq_len]) for samples `idx` at (row_of, offsets).

    Segment ids number the samples within a row from 1 (0 is padding): what an
    attention mask needs to keep packed samples apart.
    """
    width = table.shape[1]
    cols = np.arange(width)
    mask = cols[None, :] < lengths[idx][:, None]
    dest = (row_of * seq_len + offsets)[:, None] + cols[None, :]
    flat = np.full(n_rows * seq_len, PAD, np.int64)
    flat[dest[mask]] = table[idx][mask]
    seg = np.zeros(n_rows * seq_len, np.int64)
    first = np.r_[True, row_of[1:] != row_of[:-1]] if row_of.size else np.zeros(0, bool)
    run_start = np.maximum.accumulate(np.where(first, np.arange(row_of.size), 0)) if row_of.size else row_of
    number = np.arange(row_of.size) - run_start + 1
    seg[dest[mask]] = np.broadcast_to(number[:, None], mask.shape)[mask]
    return flat.reshape(n_rows, seq_len), seg.reshape(n_rows, seq_len)

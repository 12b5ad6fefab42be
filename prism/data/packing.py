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

from prism.core.tokenizer import BYTE_VOCAB, IGNORE, PAD, TextEncoder, Vocab


def sample_table(
    captions: list[str], has_modality: np.ndarray, n_mod: int, width: int, text: TextEncoder | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens int64 [N, width] PAD-filled, lengths int64 [N]) of every sample's layout.

    Vectorised over the samples (one scatter of all caption tokens): every training job
    builds the table of its whole split, so a loop over samples would cost it a second.
    `text`: the captions' tokenizer file (None: bytes); its ids are cut to fit the row (the
    index cut each caption to the family's text length, but a prefix may tokenize longer).
    """
    n = len(captions)
    vocab = BYTE_VOCAB if text is None else text.vocab
    head = np.where(np.asarray(has_modality, bool), n_mod, 0).astype(np.int64)
    if text is None:
        encoded = [caption.encode("utf-8") for caption in captions]
        sizes = np.fromiter(map(len, encoded), np.int64, count=n)
        body = np.frombuffer(b"".join(encoded), np.uint8)
    else:
        ids = [row[: max(0, width - h - 2)] for row, h in zip(text.encode_batch(captions), head.tolist())]
        sizes = np.fromiter(map(len, ids), np.int64, count=n)
        body = np.fromiter((t for row in ids for t in row), np.int64, count=int(sizes.sum()))
    lengths = head + sizes + 2
    if n and int(lengths.max()) > width:
        i = int(np.argmax(lengths > width))
        raise ValueError(f"sample {i} needs {int(lengths[i])} tokens, rows hold {width}")
    table = np.full((n, width), vocab.pad, np.int64)
    cols = np.arange(width)
    table[cols < head[:, None]] = vocab.mod
    rows = np.arange(n)
    table[rows, head] = vocab.bos
    table[rows, head + 1 + sizes] = vocab.eos
    owner = np.repeat(rows, sizes)
    starts = np.cumsum(sizes) - sizes
    table[owner, head[owner] + 1 + np.arange(body.size) - starts[owner]] = body
    return table, lengths


def labels_for(tokens: np.ndarray, vocab: Vocab = BYTE_VOCAB) -> np.ndarray:
    """Next-token targets with IGNORE where the target is MOD or PAD, and at the last position."""
    labels = np.full(tokens.shape, IGNORE, np.int64)
    nxt = tokens[:, 1:]
    labels[:, :-1] = np.where((nxt == vocab.mod) | (nxt == vocab.pad), IGNORE, nxt)
    return labels


def padded(table: np.ndarray, idx: np.ndarray, seq_len: int, pad: int = PAD) -> np.ndarray:
    """[len(idx), seq_len]: one sample per row."""
    if seq_len == table.shape[1]:
        return table[idx]
    out = np.full((idx.size, seq_len), pad, np.int64)
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


def packed(
    table: np.ndarray,
    lengths: np.ndarray,
    idx: np.ndarray,
    row_of: np.ndarray,
    offsets: np.ndarray,
    n_rows: int,
    seq_len: int,
    pad: int = PAD,
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens [n_rows, seq_len], segment ids [n_rows, seq_len]) for samples `idx` at (row_of, offsets).

    Segment ids number the samples within a row from 1 (0 is padding): what an
    attention mask needs to keep packed samples apart.
    """
    width = table.shape[1]
    cols = np.arange(width)
    mask = cols[None, :] < lengths[idx][:, None]
    dest = (row_of * seq_len + offsets)[:, None] + cols[None, :]
    flat = np.full(n_rows * seq_len, pad, np.int64)
    flat[dest[mask]] = table[idx][mask]
    seg = np.zeros(n_rows * seq_len, np.int64)
    first = np.r_[True, row_of[1:] != row_of[:-1]] if row_of.size else np.zeros(0, bool)
    run_start = np.maximum.accumulate(np.where(first, np.arange(row_of.size), 0)) if row_of.size else row_of
    number = np.arange(row_of.size) - run_start + 1
    seg[dest[mask]] = np.broadcast_to(number[:, None], mask.shape)[mask]
    return flat.reshape(n_rows, seq_len), seg.reshape(n_rows, seq_len)

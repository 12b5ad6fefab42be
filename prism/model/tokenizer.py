"""Byte-level tokenizer: the local studies need no vocabulary download.

Ids 0-255 are the bytes of the UTF-8 text; four specials follow. A sample is laid
out as `[MOD x n_modality_tokens] BOS text-bytes EOS [PAD ...]` (docs/architecture.md).
"""

from __future__ import annotations

PAD = 256
BOS = 257
EOS = 258
MOD = 259  # a modality slot: the projector's output replaces its embedding
VOCAB_SIZE = 260
IGNORE = -100  # label of a position with no loss (cross_entropy's ignore_index)


def encode(text: str) -> list[int]:
    """UTF-8 bytes of `text` (no specials)."""
    return list(text.encode("utf-8"))


def decode(ids) -> str:
    """Text of the byte ids in `ids`; specials are dropped, broken UTF-8 replaced."""
    return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")


def sample_ids(text: str, n_modality_tokens: int, text_len: int, seq_len: int | None = None) -> list[int]:
    """One sample's token ids: modality slots, BOS, the text (cut to fit), EOS, then PAD to `seq_len`.

    `text_len` counts BOS and EOS, so at most `text_len - 2` bytes of text are kept.
    """
    if text_len < 2:
        raise ValueError(f"text_len {text_len} leaves no room for BOS and EOS")
    body = encode(text)[: text_len - 2]
    ids = [MOD] * n_modality_tokens + [BOS] + body + [EOS]
    seq_len = n_modality_tokens + text_len if seq_len is None else seq_len
    if len(ids) > seq_len:
        raise ValueError(f"sample of {len(ids)} tokens does not fit seq_len {seq_len}")
    return ids + [PAD] * (seq_len - len(ids))


def sample_labels(ids: list[int]) -> list[int]:
    """Next-token targets for `ids`: IGNORE where the target is a modality slot or padding.

    The last position has no next token, so it is IGNORE too.
    """
    labels = [IGNORE if t in (MOD, PAD) else t for t in ids[1:]]
    return labels + [IGNORE]

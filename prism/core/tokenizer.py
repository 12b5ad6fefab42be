"""The captions' tokenizer: bytes (the default: no vocabulary download) or a tokenizer file.

Byte level: ids 0-255 are the bytes of the UTF-8 text; four specials follow. A sample is
laid out as `[MOD x n_modality_tokens] BOS text EOS [PAD ...]` (docs/architecture.md).
A Hugging Face `tokenizers` JSON file (`data.tokenizer`: Llama-3's, Qwen's, one trained on
the captions) gives the text's ids instead; the layout's four specials are the file's own
where it names them (`KNOWN_NAMES`), else added after its vocabulary. Its `Vocab` (size and
special ids) sets the backbone's embedding rows.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from prism.core.errors import PrismError

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


# ---- the vocabulary a study uses: the bytes above, or a tokenizer file --------------------------

BYTES = "bytes"
# The layout's specials, by role, in the order ids are added to a tokenizer file that lacks them.
ROLES = ("pad", "bos", "eos", "mod")
# Names a tokenizer file may already give a role (Llama-3, Llama-2/Mistral, Gemma, BERT-style);
# the first present is used, else prism's own name is added after the file's vocabulary.
KNOWN_NAMES: dict[str, tuple[str, ...]] = {
    "pad": ("<|prism_pad|>", "<pad>", "[PAD]", "<|pad|>"),
    "bos": ("<|prism_bos|>", "<|begin_of_text|>", "<s>", "<bos>", "[BOS]"),
    "eos": ("<|prism_eos|>", "<|end_of_text|>", "</s>", "<eos>", "[EOS]", "<|endoftext|>"),
    "mod": ("<|prism_modality|>", "<image>", "<|image|>"),
}
ROW_MULTIPLE = 8  # embedding rows are padded to a multiple of this (aligned LM-head matmuls)


@dataclass(frozen=True)
class Vocab:
    """The token ids a sample layout uses: `size` ids (specials included), the specials' ids, and
    the tokenizer file they come from (`file` None: the byte tokenizer; `sha256` its content)."""

    size: int = VOCAB_SIZE
    pad: int = PAD
    bos: int = BOS
    eos: int = EOS
    mod: int = MOD
    file: str | None = None
    sha256: str | None = None

    @property
    def is_bytes(self) -> bool:
        return self.file is None

    @property
    def rows(self) -> int:
        """The backbone's embedding rows: `size` padded to a multiple of 8 (bytes: 264)."""
        return -(-self.size // ROW_MULTIPLE) * ROW_MULTIPLE

    def record(self) -> dict:
        """What a manifest or a calibration records of a tokenizer file (its path is not part of it)."""
        return {"sha256": self.sha256, "vocab_size": self.size, **{role: getattr(self, role) for role in ROLES}}


BYTE_VOCAB = Vocab()


def _load_file(path: Path):
    """The `tokenizers.Tokenizer` of a file, or a PrismError naming `data.tokenizer` and the fix."""
    if not path.is_file():
        raise PrismError(
            f"data.tokenizer: {path} does not exist; give a Hugging Face tokenizer.json, or 'bytes' "
            "for the byte tokenizer"
        )
    try:
        from tokenizers import Tokenizer  # noqa: PLC0415 lazy: the optional extra 'tokenizer'
    except ImportError:
        raise PrismError(
            "data.tokenizer names a file, but the package 'tokenizers' is not installed: pip install 'prism[tokenizer]'"
        ) from None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # noqa: BLE001 - the Rust side raises plain Exceptions for a bad file
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise PrismError(
            f"data.tokenizer: {path} is not a Hugging Face tokenizers JSON file ({reason[:120]}); "
            "give a tokenizer.json (tokenizers' Tokenizer.save), or 'bytes'"
        ) from None


@functools.lru_cache(maxsize=16)
def _file_vocab(path: str, sha: str) -> Vocab:
    tok = _load_file(Path(path))
    known = tok.get_vocab(with_added_tokens=True)
    ids, next_id = {}, max(known.values(), default=-1) + 1
    for role in ROLES:
        found = next((known[name] for name in KNOWN_NAMES[role] if name in known), None)
        if found is None:
            found, next_id = next_id, next_id + 1
        ids[role] = found
    if len(set(ids.values())) < len(ROLES):  # e.g. one token serving as both BOS and EOS
        for role in ROLES[::-1]:
            if list(ids.values()).count(ids[role]) > 1:
                ids[role], next_id = next_id, next_id + 1
    return Vocab(size=next_id, **ids, file=path, sha256=sha)


def load_vocab(tokenizer: str | Path | None) -> Vocab:
    """`data.tokenizer` resolved: 'bytes' (or None), or a tokenizer file read offline with its specials."""
    if tokenizer is None or str(tokenizer) == BYTES:
        return BYTE_VOCAB
    path = Path(tokenizer).expanduser().resolve()
    if not path.is_file():
        _load_file(path)  # its error names the key
    return _file_vocab(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def vocab_from_record(record: dict | None, file: str | None) -> Vocab:
    """The Vocab a manifest or calibration recorded (None: bytes)."""
    if not record:
        return BYTE_VOCAB
    return Vocab(
        size=int(record["vocab_size"]), **{r: int(record[r]) for r in ROLES}, file=file, sha256=record["sha256"]
    )


class TextEncoder:
    """Caption -> token ids (no specials) in a study's vocabulary."""

    def __init__(self, vocab: Vocab):
        self.vocab = vocab
        self._tok = None if vocab.is_bytes else _load_file(Path(vocab.file))
        if self._tok is not None:
            sha = hashlib.sha256(Path(vocab.file).read_bytes()).hexdigest()
            if sha != vocab.sha256:
                raise PrismError(
                    f"tokenizer {vocab.file} has sha256 {sha[:12]}, the data was tokenized with "
                    f"{vocab.sha256[:12]}; re-index the data with this tokenizer"
                )

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        if self._tok is None:
            return [encode(t) for t in texts]
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def fit(self, text: str, max_tokens: int) -> tuple[str, int, bool]:
        """(`text` cut to at most `max_tokens` tokens at a token boundary, its tokens, whether it was cut)."""
        if self._tok is None:
            raw = text.encode("utf-8")
            if len(raw) <= max_tokens:
                return text, len(raw), False
            cut = raw[:max_tokens].decode("utf-8", errors="ignore")
            return cut, len(cut.encode("utf-8")), True
        enc = self._tok.encode(text, add_special_tokens=False)
        if len(enc.ids) <= max_tokens:
            return text, len(enc.ids), False
        end = enc.offsets[max_tokens - 1][1] if max_tokens else 0
        cut = text[:end]
        return cut, min(max_tokens, len(self.encode_batch([cut])[0])), True

"""The evaluator fits wherever the training step fits, and its split into pieces changes no value."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import prism.model.prism as prism_model
from prism.core.families import family_spec
from prism.core.tokenizer import IGNORE, MOD
from prism.model import kernels
from prism.model.accounting import example_batch
from prism.model.config import BackboneConfig, projector_variant
from prism.model.prism import PrismModel
from prism.train.evaluator import Evaluator, split_rows

# A large vocabulary and long rows: the logits dominate memory, as at 1b on 2048-token rows.
VOCAB, ROW, TRAIN_ROWS, EVAL_ROWS = 4096, 256, 2, 32


class LargestTensor(TorchDispatchMode):
    """The largest tensor any op allocates while active (bytes): the logits, when they are whole."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel() * t.element_size())
        return out


@pytest.fixture
def model() -> PrismModel:
    torch.manual_seed(0)
    cfg = BackboneConfig("wide-vocab", 32, 2, 2, 2, 64, vocab_size=VOCAB)
    return PrismModel(family_spec("text_image"), cfg, projector_variant("BASE"), "e2e")


def _batch(model, rows):
    torch.manual_seed(rows)  # the same batch each time
    tokens, modality, labels = example_batch(model, ROW, rows)
    text = (tokens != MOD) & (labels != IGNORE)
    tokens[text] = torch.randint(3, 256, (int(text.sum()),))  # varied text, so rows differ
    labels = torch.cat([tokens[:, 1:], labels[:, -1:]], dim=1).masked_fill(labels == IGNORE, IGNORE)
    modality = torch.randn_like(modality)
    return tokens, modality, labels


def _evaluator(model, max_rows):
    tokens, modality, labels = _batch(model, EVAL_ROWS)

    def eval_batches(size):
        for lo in range(0, EVAL_ROWS, size):
            rows = slice(lo, lo + size)
            yield {"tokens": tokens[rows], "modality": modality[rows], "labels": labels[rows]}

    return Evaluator(
        eval_batches, lambda b: (b["tokens"], b["modality"], b["labels"]), 10, 100, EVAL_ROWS, max_rows=max_rows
    )


def _train_step_largest(model) -> int:
    with LargestTensor() as seen:
        model(*_batch(model, TRAIN_ROWS)).backward()
    return seen.largest


def _eval_largest(model, evaluator) -> tuple[int, float]:
    with LargestTensor() as seen:
        result = evaluator.evaluate(model, final=True)
    return seen.largest, result.loss


def test_an_evaluation_allocates_no_more_than_a_training_step(model, monkeypatch):
    """With the micro-batch's rows per forward, no tensor of an evaluation outgrows the training step's largest
    (the logits and their gradient); a whole eval batch's logits at once would (the check can fail)."""
    with kernels.disabled():
        train_largest = _train_step_largest(model)
        whole_largest, whole_loss = _eval_largest(model, _evaluator(model, max_rows=EVAL_ROWS))
        assert whole_largest >= EVAL_ROWS * ROW * VOCAB * 4 > train_largest  # the evaluation the trainer used to run
        fitted_largest, fitted_loss = _eval_largest(model, _evaluator(model, max_rows=TRAIN_ROWS))
        assert fitted_largest <= train_largest
        # Logits a chunk of tokens at a time: smaller still, and the same loss.
        monkeypatch.setattr(prism_model, "EVAL_LOGITS_BYTES", 64 * VOCAB * 4)
        chunked_largest, chunked_loss = _eval_largest(model, _evaluator(model, max_rows=TRAIN_ROWS))
    assert chunked_largest < fitted_largest and chunked_largest < TRAIN_ROWS * ROW * VOCAB * 4
    assert fitted_loss == pytest.approx(whole_loss, rel=1e-6) and chunked_loss == pytest.approx(whole_loss, rel=1e-6)


def test_chunked_token_losses_are_the_whole_batchs(model, monkeypatch):
    tokens, modality, labels = _batch(model, 4)
    with torch.no_grad():
        whole = model(tokens, modality, labels, reduction="none")
        monkeypatch.setattr(prism_model, "EVAL_LOGITS_BYTES", 100 * VOCAB * 4)  # 100 tokens: chunks cross rows
        chunked = model(tokens, modality, labels, reduction="none")
    assert whole.shape == labels.shape and torch.all(whole[labels == IGNORE] == 0)
    torch.testing.assert_close(chunked, whole, rtol=1e-6, atol=1e-6)


def test_split_rows_keeps_each_rows_modality_samples(model):
    tokens, modality, labels = _batch(model, 5)
    pieces = list(split_rows((tokens, modality, labels), 2))
    assert [p[0].shape[0] for p in pieces] == [2, 2, 1] and [p[1].shape[0] for p in pieces] == [2, 2, 1]
    assert torch.equal(torch.cat([p[1] for p in pieces]), modality)
    with torch.no_grad():
        whole = model(tokens, modality, labels, reduction="none")
        parts = torch.cat([model(*p, reduction="none") for p in pieces])
    torch.testing.assert_close(parts, whole, rtol=1e-6, atol=1e-6)
    assert list(split_rows((tokens, modality, labels), 8))[0][0] is tokens  # a batch that fits is not copied

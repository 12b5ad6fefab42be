"""The Trainer in this process: one step, a collapsed step, an evaluation, the loss's standard error."""

from __future__ import annotations

import json
import math

import pytest
import torch

from prism.parallel.env import discover
from prism.train.config import RunConfig
from prism.train.evaluator import mean_and_se
from prism.train.trainer import INJECT_NAN_ENV, Trainer


@pytest.fixture
def trainer(shards, tmp_path, monkeypatch):
    monkeypatch.setenv(INJECT_NAN_ENV, "3")
    config = RunConfig(
        family="text_image",
        backbone="30k",
        variant="BASE",
        regime="e2e",
        budget=3e11,
        data=str(shards),
        out=str(tmp_path / "run"),
        global_batch=8,
        eval_samples=32,
        final_eval_samples=64,
        max_steps=20,
        threads=1,
    )
    made = Trainer(config, discover({}))
    yield made
    made.close()


def test_a_step_updates_the_weights_and_counts(trainer):
    before = [p.detach().clone() for p in trainer.params]
    batches = trainer._batches()
    result = trainer.train_step(next(batches))
    assert result.step == trainer.step == 1 and result.collapsed is None and not result.stopping
    assert result.samples == 8 == trainer.samples
    assert math.isfinite(result.loss) and result.grad_norm > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.params))
    assert trainer.train_step(next(batches), stop_requested=True).stopping


def test_a_collapsed_step_makes_no_update(trainer):
    batches = trainer._batches()
    trainer.train_step(next(batches))
    trainer.train_step(next(batches))
    before = [p.detach().clone() for p in trainer.params]
    result = trainer.train_step(next(batches))  # the injected NaN
    assert result.step == 3 and "non-finite" in result.collapsed
    assert trainer.samples == 16
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.params))


def test_the_final_evaluation_covers_more_samples_and_has_an_error(trainer):
    during = trainer.evaluator.evaluate(trainer.eval_model)
    final = trainer.evaluator.evaluate(trainer.eval_model, final=True)
    assert during.samples == 32 and during.loss_se is not None
    assert final.samples == 64 and 0 < final.loss_se < final.loss
    assert trainer.eval_model.training  # train mode restored


def test_standard_error_of_a_token_weighted_mean():
    sums, counts = torch.tensor([2.0, 4.0, 9.0]), torch.tensor([1, 2, 3])
    loss, se = mean_and_se(sums, counts)
    assert loss == pytest.approx(15 / 6)
    residual = [2 - loss, 4 - 2 * loss, 9 - 3 * loss]
    assert se == pytest.approx(math.sqrt(sum(r * r for r in residual) / 6) / 2)
    assert mean_and_se(torch.tensor([3.0]), torch.tensor([2]))[1] is None


def test_a_resumed_run_drops_the_final_evaluation_of_the_process_that_died(tmp_path):
    from prism.train.rundir import resume

    rows = [
        {"step": 0, "loss": 5.0},
        {"step": 10, "loss": 2.0},
        {"step": 10, "loss": 1.9, "final": True},
        {"step": 12, "loss": 1.8},
    ]
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    resume.truncate_logs(tmp_path, 10)
    assert [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()] == rows[:2]


def test_a_packed_step_masks_attention_to_each_sample(shards, tmp_path, monkeypatch):
    """The step hands the packed loader's segment ids to the model."""
    config = RunConfig(
        family="text_image",
        backbone="30k",
        variant="BASE",
        regime="e2e",
        budget=3e11,
        data=str(shards),
        out=str(tmp_path / "packed"),
        global_batch=4,
        eval_samples=8,
        layout="packed",
        seq_len=128,
        max_steps=2,
        threads=1,
    )
    made = Trainer(config, discover({}))
    seen = []
    forward = made.model.forward
    monkeypatch.setattr(made.model, "forward", lambda *args, **kw: seen.append(args[3]) or forward(*args, **kw))
    try:
        batch = next(made._batches())
        made.train_step(batch)
    finally:
        made.close()
    assert torch.equal(seen[0], torch.as_tensor(batch["segment_ids"])) and int(seen[0].max()) > 1

"""A job's start-up by phase: the clock's arithmetic, the slowest rank's record, and a run's metrics."""

from __future__ import annotations

import json

import pytest

from prism.train.startup import PHASES, StartupClock, slowest


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_phases_add_up_until_the_first_step_closes_the_clock():
    fake = FakeClock()
    clock = StartupClock(imports_s=4.0, clock=fake)
    with clock.phase("process_group"):
        fake.t += 2.0
    with clock.phase("model_build"):
        fake.t += 1.5
    with clock.phase("model_build"):  # a phase in two parts
        fake.t += 0.5
    clock.close(first_batch_s=0.25, first_step_s=3.0, to_first_step_s=12.0)
    with clock.phase("loader"):  # after the first step: not start-up
        fake.t += 100.0
    record = clock.record()
    assert set(record) == {f"{name}_s" for name in PHASES}
    assert record == {
        "imports_s": 4.0, "process_group_s": 2.0, "model_build_s": 2.0, "loader_s": None, "kernel_build_s": None,
        "resume_s": None, "first_eval_s": None, "first_batch_s": 0.25, "first_step_s": 3.0, "to_first_step_s": 12.0,
    }  # fmt: skip
    with pytest.raises(ValueError, match="unknown start-up phase"):
        StartupClock(None).add("compile", 1.0)


def test_the_record_is_the_slowest_ranks_and_keeps_phases_no_rank_had():
    ranks = [{"imports_s": 3.0, "resume_s": None}, {"imports_s": 5.0, "resume_s": None}]

    def reduce_max(values: list[float]) -> list[float]:  # what the all-reduce does over both ranks
        encoded = [[-1.0 if v is None else v for v in r.values()] for r in ranks]
        assert values in encoded
        return [max(column) for column in zip(*encoded)]

    assert slowest(ranks[0], reduce_max) == {"imports_s": 5.0, "resume_s": None}


def test_a_run_records_its_start_up_in_metrics_and_its_first_perf_row(shards, tmp_path):
    from prism.parallel.env import discover
    from prism.train.config import RunConfig
    from prism.train.trainer import Trainer

    out = tmp_path / "run"
    config = RunConfig(family="text_image", backbone="30k", variant="BASE", regime="e2e", budget=3e11,
                       data=str(shards), out=str(out), global_batch=8, eval_samples=16, final_eval_samples=16,
                       max_steps=3, threads=1)  # fmt: skip
    trainer = Trainer(config, discover({}))
    try:
        metrics = trainer.train().to_json()
    finally:
        trainer.close()
    startup = metrics["startup"]
    assert startup["resume_s"] is None  # a fresh run loads no checkpoint
    for phase in ("imports", "process_group", "model_build", "loader", "kernel_build", "first_eval", "first_batch"):
        assert startup[f"{phase}_s"] >= 0, phase
    assert startup["to_first_step_s"] >= startup["first_step_s"] > 0
    first = json.loads((out / "perf.jsonl").read_text().splitlines()[0])
    assert first["step"] == 1 and first["startup"] == startup  # what the probe reads of a stopped body
    assert json.loads((out / "metrics.json").read_text())["startup"] == startup

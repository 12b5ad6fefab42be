"""A job's wall time by phase, and a study's jobs added up (pure Python)."""

from __future__ import annotations

import pytest

from prism.train.timing import PHASES, JobClock, study_timing, timing_lines


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_job_clock_splits_its_wall_time_by_phase():
    fake = FakeClock()
    clock = JobClock(startup_s=2.0, clock=fake, now=lambda: 1000.0 + fake.t, cpu=lambda: 6.5)
    fake.t = 1.0
    clock.add("setup", 1.0)
    with clock.phase("eval"):
        fake.t = 1.5
    clock.add("step", 3.0)
    fake.t = 5.0  # 0.5 s logged nowhere
    record = clock.record(trained_flops=6e9, steps=10)
    assert record["started_at"] == 998.0 and record["ended_at"] == 1005.0
    assert record["wall_s"] == 7.0
    assert (record["startup_s"], record["setup_s"], record["eval_s"], record["step_s"]) == (2.0, 1.0, 0.5, 3.0)
    assert record["other_s"] == pytest.approx(0.5)
    assert sum(record[f"{p}_s"] for p in PHASES) + record["other_s"] == pytest.approx(record["wall_s"])
    assert (record["steps"], record["trained_flops"], record["cpu_s"]) == (10, 6e9, 6.5)


def job(start, end, flops, step_s, peak=1e12, cpu_s=None):
    return {
        "started_at": start,
        "ended_at": end,
        "wall_s": end - start,
        "step_s": step_s,
        "eval_s": end - start - step_s,
        "trained_flops": flops,
        "peak_flops": peak,
        "cpu_s": (end - start) / 2 if cpu_s is None else cpu_s,
    }


def test_a_study_counts_its_span_concurrency_idle_cores_and_flops_per_second():
    # Two cores: two jobs side by side for 10 s, then one alone for 10 s (the idle tail).
    timing = study_timing([job(0, 10, 1e12, 8), job(0, 10, 1e12, 8), job(10, 20, 2e12, 9), {"no": "time"}])
    assert timing.jobs == 3 and timing.concurrency == 2 and timing.span_s == 20
    assert timing.flops_per_s == pytest.approx(4e12 / 20)
    assert timing.peak_flops == 2e12 and timing.of_peak == pytest.approx(0.1)
    assert timing.busy == pytest.approx(30 / 40)
    assert timing.phase_s["step"] == 25 and timing.phase_s["eval"] == 5
    lines = timing_lines(timing)
    assert "200.0 GFLOP/s end to end, 10.0% of the peak 2000" in lines[0] and "cores busy 75%" in lines[0]
    assert "step 83%" in lines[1] and "eval 17%" in lines[1]
    # 4e12 FLOPs in 25 s of steps: 160 GFLOP/s per job, against one job's 1000.
    assert timing.step_flops_per_s == pytest.approx(4e12 / 25) and timing.step_of_peak == pytest.approx(0.16)
    assert "while stepping: 160.0 GFLOP/s per job (16.0% of a job's peak)" in lines[2]
    # Half a core each (a busy host): 4e12 FLOPs in 15 CPU seconds, 267 GFLOP/s per CPU second.
    assert timing.flops_per_cpu_s == pytest.approx(4e12 / 15)
    assert "by CPU time: 266.7 GFLOP/s per CPU second, whole jobs (26.7% of a job's peak)" in lines[3]


def test_without_every_jobs_cpu_seconds_there_is_no_cpu_figure():
    older = {**job(0, 10, 1e12, 8)}
    del older["cpu_s"]
    timing = study_timing([job(0, 10, 1e12, 8), older])
    assert timing.cpu_s is None and not any("by CPU time" in line for line in timing_lines(timing))


def test_jobs_one_after_another_are_one_at_a_time():
    timing = study_timing([job(0, 5, 1e12, 5), job(5, 9, 1e12, 4)])
    assert timing.concurrency == 1 and timing.busy == pytest.approx(1.0)


def test_jobs_of_an_earlier_invocation_are_left_out():
    # A study extended an hour later: only the new stretch is this invocation's time.
    timing = study_timing([job(0, 10, 1e12, 8), job(3600, 3610, 1e12, 8), job(3605, 3620, 1e12, 8)])
    assert timing.jobs == 2 and timing.earlier == 1 and timing.span_s == 20
    assert "1 jobs of earlier invocations left out" in timing_lines(timing)[0]


def test_no_records_is_said_not_fatal():
    assert study_timing([{}, None]) is None
    assert "no job recorded" in timing_lines(None)[0]

"""PerfMeter: when it logs, what a row says, when the progress line comes."""

from __future__ import annotations

import pytest

from prism.train.meter import PerfMeter, format_eta


def meter(clock=lambda: 0.0, cpu=False) -> PerfMeter:
    return PerfMeter(
        steps=100,
        log_every=10,
        global_batch=8,
        flops_per_unit=1e6,
        tokens_per_unit=64,
        world_size=2,
        threads=1,
        cpu=cpu,
        peak_flops=lambda: 1e9,
        clock=clock,
    )


def test_logs_every_k_steps_and_at_the_first_and_last():
    m = meter()
    assert [s for s in range(1, 101) if m.should_log(s)] == [1, *range(10, 101, 10)]


def test_row_averages_the_window_and_resets_it():
    m = meter(cpu=True)
    m.update(samples=8, step_s=0.5, wait_s=0.1, cpu_s=0.4)
    m.update(samples=12, step_s=1.5, wait_s=0.1, cpu_s=1.2)  # a packed batch holds more samples
    row = m.row()
    assert row["samples_per_s"] == pytest.approx(20 / 2.0)
    assert row["tokens_per_s"] == pytest.approx(16 / 2.0 * 64)
    assert row["step_time_s"] == pytest.approx(1.0) and row["data_wait_s"] == pytest.approx(0.1)
    assert row["flops_per_s"] == pytest.approx(8e6)
    assert row["mfu"] == pytest.approx(8e6 / 2e9)
    assert row["cpu_time_s"] == pytest.approx(0.8) and row["mfu_cpu"] == pytest.approx(8e6 / 0.8 / 2e9)
    m.update(samples=8, step_s=2.0, wait_s=0.0, cpu_s=0.0)
    assert m.row()["step_time_s"] == pytest.approx(2.0)


def test_the_peak_is_measured_once_and_only_when_a_row_needs_it():
    calls = []
    m = PerfMeter(
        steps=10,
        log_every=1,
        global_batch=1,
        flops_per_unit=1.0,
        tokens_per_unit=1,
        world_size=1,
        threads=1,
        cpu=False,
        peak_flops=lambda: calls.append(1) or 1.0,
    )
    m.update(1, 1.0, 0.0, 0.0)
    assert calls == []
    m.row()
    m.update(1, 1.0, 0.0, 0.0)
    m.row()
    assert calls == [1]


def test_progress_every_few_percent_and_every_minute_with_an_eta():
    now = [0.0]
    m = meter(clock=lambda: now[0])
    m.update(8, 0.5, 0.0, 0.0)
    assert "step 1/100 (1%)" in m.progress(1, 2.5, "run")  # the first step always
    m.update(8, 0.5, 0.0, 0.0)
    now[0] = 59.0
    assert m.progress(2, 2.4, "run") is None
    now[0] = 61.0  # a slow run: a minute without a line
    line = m.progress(2, 2.4, "run")
    assert line == "[run] step 2/100 (2%) loss 2.4000 16.0 samples/s ETA 0:00:49"
    lines = [s for s in range(3, 101) if m.update(8, 0.5, 0.0, 0.0) or m.progress(s, 2.0, "run")]
    assert lines == list(range(5, 101, 5))  # a fast run: every 5% of its steps


def test_eta_format():
    assert format_eta(3725.9) == "1:02:05" and format_eta(-3) == "0:00:00"


def test_the_steady_state_leaves_out_the_warm_up_steps():
    """A compiled run's first steps compile: its steady-state MFU is over the steps after them, against
    the peak (of the run's precision) recorded beside it."""
    m = PerfMeter(
        steps=10, log_every=10, global_batch=8, flops_per_unit=1e6, tokens_per_unit=64, world_size=2,
        threads=1, cpu=False, peak_flops=lambda: 1e9, warmup_steps=2,
    )  # fmt: skip
    assert m.steady() == {}
    m.update(samples=8, step_s=30.0, wait_s=0.0, cpu_s=0.0)  # compiling
    m.update(samples=8, step_s=10.0, wait_s=0.0, cpu_s=0.0)  # recompiling
    assert m.steady() == {}
    m.update(samples=8, step_s=0.5, wait_s=0.0, cpu_s=0.0)
    m.update(samples=8, step_s=1.5, wait_s=0.0, cpu_s=0.0)
    steady = m.steady()
    assert steady["steady_steps"] == 2 and steady["steady_step_s"] == pytest.approx(1.0)
    assert steady["steady_flops_per_s"] == pytest.approx(8e6)
    assert steady["peak_flops"] == 2e9 and steady["steady_mfu"] == pytest.approx(8e6 / 2e9)
    assert m.row()["mfu"] == pytest.approx(4 * 8e6 / 42 / 2e9)  # the log window keeps every step

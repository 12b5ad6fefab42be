"""prism.isoflop.runs.progress: the ETA from the pace kept so far, or the longest chain of jobs left."""

from __future__ import annotations

import pytest

from prism.isoflop.runs.progress import Part, job_line, progress, run_fraction


def test_a_wsd_run_counts_its_trajectory_up_to_its_branch_point():
    assert run_fraction(80, 100, trajectory_step=50, branch_step=None, branch_done=False) == 0.5
    assert run_fraction(80, 100, trajectory_step=160, branch_step=None, branch_done=False) == 0.8
    assert run_fraction(80, 100, trajectory_step=160, branch_step=90, branch_done=False) == 0.9
    assert run_fraction(80, 100, trajectory_step=0, branch_step=None, branch_done=True) == 1.0


def test_the_eta_is_the_jobs_left_at_the_time_the_finished_ones_took():
    """One job took 150 s for 100 s of estimate, one at a time: the 300 s of estimate left take 450 s."""
    parts = [
        Part("a", "segment", 100.0, 1.0, "done", wall_s=150.0, chain_s=0.0, started=0.0, job_s=150.0),
        Part("b", "segment", 100.0, 0.0, "waiting", chain_s=100.0),
        Part("c", "branch", 200.0, 0.0, "waiting", chain_s=200.0),
    ]
    found = progress(parts, now=200.0)
    assert found.eta_s == pytest.approx(450.0) and "1.0 at a time" in found.basis and "x1.50" in found.basis
    assert found.done == {"branch": 0, "segment": 1} and found.total == {"branch": 1, "segment": 2}


def test_short_jobs_pay_their_start_up():
    """Jobs of 10, 20 and 40 s of estimate took 30, 40 and 60 s: 20 s of start-up each, then the estimate."""
    parts = [
        Part(k, "branch", est, 1.0, "done", started=0.0, job_s=est + 20) for k, est in (("a", 10), ("b", 20), ("c", 40))
    ]
    assert job_line(parts) == pytest.approx((20.0, 1.0))
    parts += [Part("d", "branch", 10.0, 0.0, "waiting"), Part("e", "branch", 10.0, 0.0, "waiting")]
    assert progress(parts, now=130.0).eta_s == pytest.approx(60.0)  # two jobs of 30 s, one at a time


def test_a_long_chain_left_outlasts_the_pace():
    """Many jobs at a time keep the pace high, but the last trajectory's chain runs one job after another."""
    parts = [Part(f"d{i}", "segment", 100.0, 1.0, "done", started=0.0, job_s=100.0) for i in range(10)]
    parts.append(Part("long", "segment", 500.0, 0.0, "waiting", chain_s=900.0))
    found = progress(parts, now=100.0)  # 10 jobs at a time: 500 s left take 50 s; its chain 900 s
    assert found.eta_s == pytest.approx(900.0) and "longest chain" in found.basis


def test_no_estimate_or_no_progress_says_why():
    assert progress([Part("a", "run", None, 0.0, "waiting")], now=10.0).eta_s is None
    assert "no job has finished" in progress([Part("a", "run", 10.0, 0.0, "waiting")], now=10.0).basis
    assert progress([Part("a", "run", 10.0, 1.0, "done")], now=10.0).eta_s == 0.0


def test_each_kind_of_job_has_its_own_start_up_at_the_pace_of_all():
    """Every job stepped at twice its estimate; segments took 5 s besides, branches 30 s: the branch left is
    timed at the branches' start-up and the common pace."""
    parts = [Part(f"s{i}", "segment", est, 1.0, "done", started=0.0, job_s=5 + 2 * est) for i, est in
             enumerate((100.0, 200.0, 300.0))]  # fmt: skip
    parts += [
        Part(f"b{i}", "branch", est, 1.0, "done", started=0.0, job_s=30 + 2 * est) for i, est in enumerate((5, 10, 20))
    ]
    parts += [Part("left", "branch", 10.0, 0.0, "waiting", chain_s=10.0)]
    now = sum(p.job_s for p in parts)  # one at a time
    found = progress(parts, now=now)
    assert found.eta_s == pytest.approx(50.0, rel=0.05) and "a branch 30 s + x2.00" in found.basis


def test_the_first_finished_branches_do_not_time_the_short_ones_left_by_their_line():
    """The longest branches finish first (they start first); a line through three of them, scattered by a few
    seconds, would put 17 s of start-up on each short one left. Each is timed at the branches' median start-up
    over the common pace instead: 10 branches of 1 s of steps and about 5 s of start-up take about 60 s."""
    parts = [Part(f"s{i}", "segment", est, 1.0, "done", started=0.0, job_s=5 + est) for i, est in
             enumerate((100.0, 200.0, 300.0, 400.0))]  # fmt: skip
    parts += [Part(f"b{i}", "branch", est, 1.0, "done", started=0.0, job_s=est + over)
              for i, (est, over) in enumerate(((50.0, 3.0), (60.0, 8.0), (70.0, 5.0)))]  # fmt: skip
    parts += [Part(f"left{i}", "branch", 1.0, 0.0, "waiting", chain_s=1.0) for i in range(10)]
    found = progress(parts, now=sum(p.job_s for p in parts))
    assert found.eta_s == pytest.approx(60.0, rel=0.1), found.basis

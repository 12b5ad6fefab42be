"""Trajectories and branches of a wsd study: grouping, branch points, honest FLOPs."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.isoflop.design.trajectories import (
    plan_trajectories,
    plan_warmup,
    saving,
    saving_text,
    trajectories,
)
from prism.train.lr_schedule import Schedule

from ..conftest import FPS
from ..conftest import plan_row as row


def test_one_trajectory_per_model_with_a_branch_per_budget():
    runs = [row("30k", 8e5), row("30k", 1.6e6), row("60k", 8e5), row("30k", 4e6)]
    trajs = trajectories(runs)
    assert [t.traj_id for t in trajs] == ["30k-BASE-e2e-B8", "60k-BASE-e2e-B8"]
    t30 = trajs[0]
    assert [b.steps for b in t30.branches] == [100, 200, 500]
    # branch point = steps - round(0.2 steps): where an uninterrupted wsd run starts its cooldown
    assert [b.start for b in t30.branches] == [80, 160, 400]
    assert t30.points == (80, 160, 400)
    assert [(s.start, s.end) for s in t30.segments] == [(0, 80), (80, 160), (160, 400)]
    assert t30.previous_point(400) == 160 and t30.previous_point(80) == 0 and t30.previous_point(300) == 160


def test_flops_are_honest():
    t = trajectories([row("30k", 8e5), row("30k", 1.6e6), row("30k", 4e6)])[0]
    step = 8 * FPS
    # each branch's flops is the whole model: prefix + its cooldown, the same as a cosine run of that budget
    assert [b.flops for b in t.branches] == [100 * step, 200 * step, 500 * step]
    assert [b.cooldown_flops for b in t.branches] == [20 * step, 40 * step, 100 * step]
    # the study: the longest prefix once, plus every cooldown
    assert t.steps == 400 + 20 + 40 + 100
    assert t.flops == pytest.approx(560 * step)
    assert t.independent_flops == pytest.approx(800 * step)
    assert sum(s.flops for s in t.segments) + sum(b.cooldown_flops for b in t.branches) == pytest.approx(t.flops)


def test_branch_points_match_the_schedule():
    """The stable trajectory's rate up to a branch point is what the branch's own wsd run would have used."""
    for steps in (10, 37, 100, 523):
        branch = Schedule("wsd", 5, steps, 0.2)
        stable = Schedule("wsd", 5, branch.cooldown_start, 0.0)  # a segment ending at the branch point
        t = trajectories([row("30k", steps * 8 * FPS)], warmup=5)[0]
        assert t.points == (branch.cooldown_start,)
        for step in range(branch.cooldown_start):
            assert stable.factor(step) == branch.factor(step)
        assert branch.factor(branch.cooldown_start) == 1.0 and branch.factor(steps - 1) < 1.0


def test_batch_or_variant_split_trajectories():
    trajs = trajectories([row("30k", 8e5, batch=8), row("30k", 1.6e6, batch=16), row("30k", 8e5, variant="W2X")])
    assert [t.traj_id for t in trajs] == ["30k-BASE-e2e-B16", "30k-BASE-e2e-B8", "30k-W2X-e2e-B8"]


def test_shared_points_count_once():
    # two budgets whose cooldowns start at the same step (steps 100 and 101: 80 and 81, no; 100 and 100 by batch)
    a, b = row("30k", 8e5), row("30k", 8.04e5)  # 100 and 100.5 -> 100 steps
    t = trajectories([a, b])[0]
    assert t.points == (80,) and len(t.segments) == 1


def test_warmup_is_fixed_by_min_steps_not_by_budgets():
    small = trajectories([row("30k", 8e5), row("30k", 4e6)], min_steps=50)[0]
    large = trajectories([row("30k", 4e6)], min_steps=50)[0]
    assert small.warmup == large.warmup == plan_warmup(50) == 25
    assert plan_warmup(10) == 5 and plan_warmup(1) == 1


def test_a_branch_inside_the_warmup_is_refused():
    with pytest.raises(PrismError, match="inside the warm-up"):
        trajectories([row("30k", 8e4)], warmup=20)  # 10 steps: cooldown from step 8


def test_saving_on_four_budgets_per_size_is_below_60_percent():
    budgets = [8e5, 1.2e6, 1.6e6, 2.4e6]
    runs = [row(b, c, hours=0.01 * round(c / 8e3)) for b in ("30k", "60k", "120k") for c in budgets]
    s = saving(trajectories(runs))
    assert s.n_runs == 12 and s.n_trajectories == 3
    assert s.ratio <= 0.6
    assert s.wsd_node_hours / s.cosine_node_hours == pytest.approx(s.ratio)
    assert s.wsd_hours / s.cosine_hours == pytest.approx(s.ratio)
    assert "time here cosine" in saving_text(runs) and "node-hours cosine" in saving_text(runs)


def test_saving_text_and_plan_mapping():
    runs = [row("30k", 8e5), row("30k", 1.6e6)]
    text = saving_text(runs, min_steps=10)
    assert "30k-BASE-e2e-B8" in text and "80/100 160/200" in text and "of cosine" in text
    plan = {
        "runs": [{k: v for k, v in r.to_json().items() if k not in ("hours_here", "node_hours")} for r in runs],
        "min_steps": 10,
    }  # an older plan.yaml without the cost fields
    assert plan_trajectories(plan)[0].warmup == 5
    assert "not plannable" in saving_text([row("30k", 8e4)], min_steps=50)


def test_the_longest_chain_of_work_goes_first():
    # Branches at 100, 200 and 500 steps: points 80, 160, 400.
    t = trajectories([row("30k", 8e5), row("30k", 1.6e6), row("30k", 4e6)])[0]
    # Without the machine's speed, costs are MFLOPs (8 samples x 1000 FLOPs a step).
    assert t.cost(1000) == 8
    # The first segment waits for nothing and everything waits for it: 500 steps of chain;
    # the last one (160, 400] carries the 500-step branch's cooldown after it.
    assert [t.segment_priority(p) for p in t.points] == [t.cost(500), t.cost(500 - 80), t.cost(500 - 160)]
    # A branch comes just after the trajectory's next segment from its point, ahead of shorter chains (its
    # run is done early, not at the study's end); the last branch waits on nothing: its own cooldown.
    ranks = [t.branch_priority(b.run_id) for b in t.branches]
    assert ranks == [t.cost(500 - 80) - 1, t.cost(500 - 160) - 1, t.cost(100)]
    # With the machine's seconds per step (hours_here), a slow model's short chain outranks a
    # fast model's long one: the order follows time, not steps.
    slow = trajectories([row("3m", 8e5, hours=0.5)])[0]  # 100 steps, 1 hour: 36 s a step
    fast = trajectories([row("4k", 4e6, hours=0.05)])[0]  # 500 steps, 0.1 hour: 0.72 s a step
    assert slow.segment_priority(80) == 100 * 36_000 > fast.segment_priority(400) == 500 * 720

"""WSD studies: one constant-rate trajectory per model, one cooldown branch per budget.

A warmup-stable-decay run's learning rate does not depend on its length until its
cooldown (the last `cooldown_fraction` of its steps), so the planned runs of one
(backbone, variant, regime) and batch share a stable prefix: one trajectory trains
it once, writing a checkpoint at every branch point (a run's `cooldown_start`), and
each run becomes a branch that starts from its point and cools down to its budget.

- A branch of S steps starts at its schedule's `cooldown_start` (S - round(f S)); it is
  the same model an uninterrupted wsd run of S steps would train.
- The trajectory is cut into segments at its branch points: segment k trains from
  point k-1 (or from scratch) to point k. Points are named by their step, so adding a
  budget adds a point (and a segment up to it) without moving the others.
- The warm-up is the same for every branch of a trajectory (it must be: the stable
  phase is shared), fixed in steps and independent of the budgets:
  `plan_warmup(min_steps)` = half the shortest run a plan may hold. A cosine study's
  runs take the same warm-up, so the two schedules of one grid differ only after it.
- FLOPs, honestly: a branch's `flops` is what producing its model took (its whole
  prefix plus its cooldown = S x batch x FLOPs per sample, as for a cosine run), and
  the study's total counts each trajectory's prefix once plus every cooldown.

Pure: plan rows in, records out; no torch, no files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass
from typing import Any

from prism.core.errors import PrismError
from prism.core.ids import format_budget
from prism.isoflop.records import PlanRow
from prism.train.lr_schedule import COOLDOWN_FRACTION as DEFAULT_COOLDOWN_FRACTION
from prism.train.lr_schedule import Schedule

# The planner's default for its shortest run, in optimizer steps (PlanOptions.min_steps).
DEFAULT_MIN_STEPS = 50
# Warm-up of a plan's runs, as a share of its min_steps: a branch point is at least
# 0.8 min_steps (cooldown 0.2 of a run of >= min_steps), so the warm-up always ends before it.
WARMUP_SHARE = 0.5


def plan_warmup(min_steps: int = DEFAULT_MIN_STEPS) -> int:
    """Warm-up steps of every run of a plan, either schedule: half the shortest run it allows (`min_steps`).

    Fixed by the plan's `min_steps`, not by its budgets, so adding or removing a budget
    never changes the stable phase that the finished segments trained; a cosine study of
    the same grid warms up alike, so comparing the two compares the schedules alone.
    """
    return max(1, round(WARMUP_SHARE * min_steps))


@dataclass(frozen=True)
class Branch:
    """One planned run, trained as a cooldown from its trajectory's checkpoint at `start`."""

    run_id: str
    budget: float
    steps: int
    start: int
    flops: float  # the whole model: prefix + cooldown (what a cosine run of this budget spends)
    cooldown_flops: float  # what this branch adds to the study

    @property
    def cooldown(self) -> int:
        return self.steps - self.start


@dataclass(frozen=True)
class Segment:
    """Stable steps (start, end] of a trajectory: one job, from the checkpoint at `start` (0: from scratch)."""

    start: int
    end: int
    flops: float


@dataclass(frozen=True)
class Trajectory:
    """The stable run of one (family, backbone, variant, regime, batch) and its branches."""

    traj_id: str
    family: str
    backbone: str
    variant: str
    regime: str
    global_batch: int
    flops_per_sample: float
    warmup: int
    cooldown_fraction: float
    branches: tuple[Branch, ...]
    # Wall hours per step on the machine that measured samples/s (`hours_here`) and node-hours per
    # step on the cluster (`node_hours`), where the plan has them for every run, else None.
    hours_per_step: float | None = None
    node_hours_per_step: float | None = None
    # Its placement, its runs' (the same for all: one shape, row length and batch; PlanRow's fields).
    devices: int = 1
    micro_batch: int | None = None
    accum_steps: int = 1
    # Its runs' peak lr and its rule (PlanRow's; one lr for all: the rule depends on width only).
    lr: float | None = None
    lr_rule: str = "hand"

    @property
    def points(self) -> tuple[int, ...]:
        """Branch points, ascending, each once (two budgets may share one)."""
        return tuple(sorted({b.start for b in self.branches}))

    @property
    def segments(self) -> tuple[Segment, ...]:
        edges = (0, *self.points)
        return tuple(Segment(a, b, (b - a) * self.step_flops) for a, b in zip(edges, edges[1:]))

    @property
    def step_flops(self) -> float:
        return self.global_batch * self.flops_per_sample

    @property
    def stable_steps(self) -> int:
        return self.points[-1]

    @property
    def steps(self) -> int:
        """Steps trained in all: the stable prefix once, then every cooldown."""
        return self.stable_steps + sum(b.cooldown for b in self.branches)

    @property
    def flops(self) -> float:
        return self.steps * self.step_flops

    @property
    def independent_steps(self) -> int:
        """Steps of the same runs trained one by one from scratch (the cosine study)."""
        return sum(b.steps for b in self.branches)

    @property
    def independent_flops(self) -> float:
        return self.independent_steps * self.step_flops

    def previous_point(self, step: int) -> int:
        """The branch point a segment ending at `step` starts from (0: from scratch)."""
        return max((p for p in self.points if p < step), default=0)

    def branch(self, run_id: str) -> Branch:
        for b in self.branches:
            if b.run_id == run_id:
                return b
        raise KeyError(run_id)

    def cost(self, steps: int) -> int:
        """What `steps` of this model cost, for ordering jobs: milliseconds where the plan measured
        this machine's speed (`hours_here`), else MFLOPs."""
        if self.hours_per_step:
            return int(steps * self.hours_per_step * 3.6e6)
        return int(steps * self.step_flops / 1e6)

    def segment_priority(self, end: int) -> int:
        """The longest chain of work that waits on the segment ending at `end`: its own steps,
        the later segments and the longest branch off them. Starting the longest chains first
        keeps every core busy to the end of the study (no lone last trajectory)."""
        chain_end = max((b.steps for b in self.branches if b.start >= end), default=end)
        return self.cost(chain_end - self.previous_point(end))

    def branch_priority(self, run_id: str) -> int:
        """Just below the trajectory going on from the branch's point (the segment that starts there), so
        that runs finish as the study goes, the longest chains still first: ranked by its own cooldown
        alone, every branch would wait for every segment, and halfway through a study no run would be
        done (the default study's jobs replayed: the same wall time either way, 15-17 of 40 runs done
        halfway instead of 0-1). A branch off the last point waits on nothing: its own cooldown."""
        branch = self.branch(run_id)
        own = self.cost(branch.cooldown)
        later = [p for p in self.points if p > branch.start]
        return max(own, self.segment_priority(later[0]) - 1) if later else own


def traj_id(backbone: str, variant: str, regime: str, global_batch: int) -> str:
    """`{backbone}-{variant}-{regime}-B{batch}`: the batch too, since a trajectory has one."""
    return f"{backbone}-{variant}-{regime}-B{int(global_batch)}"


def _row(run: PlanRow | Mapping[str, Any]) -> PlanRow:
    """A plan row as the record: a plan.yaml mapping may lack the cost fields (then None)."""
    if isinstance(run, PlanRow):
        return run
    fields = PlanRow.__dataclass_fields__
    return PlanRow(**{name: run.get(name) for name in fields if name in run or fields[name].default is MISSING})


def trajectories(
    runs: Iterable[PlanRow | Mapping[str, Any]],
    cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
    warmup: int | None = None,
    min_steps: int = DEFAULT_MIN_STEPS,
) -> list[Trajectory]:
    """Group a plan's runs into trajectories (sorted by id), each with its branches (sorted by steps).

    Runs of one (family, backbone, variant, regime) share a trajectory when they share
    the batch and FLOPs per sample (the planner gives every budget the same batch when
    `--global-batch` is set; an automatic batch that differs makes another trajectory).
    """
    if not 0.0 < cooldown_fraction < 1.0:
        raise PrismError(f"cooldown fraction must be in (0, 1), got {cooldown_fraction}")
    warm = plan_warmup(min_steps) if warmup is None else int(warmup)
    groups: dict[tuple, list[PlanRow]] = {}
    for run in runs:
        row = _row(run)
        key = (row.family, row.backbone, row.variant, row.regime, int(row.global_batch), float(row.flops_per_sample))
        if groups.get(key) and groups[key][0].lr != row.lr:
            raise PrismError(
                f"{row.run_id}: its lr {row.lr} differs from {groups[key][0].run_id}'s {groups[key][0].lr}, "
                "so they cannot share a wsd trajectory; plan with --lr-tokens size (one lr per size)"
            )
        groups.setdefault(key, []).append(row)
    out = []
    for (family, backbone, variant, regime, batch, fps), rows in groups.items():
        branches = []
        for row in sorted(rows, key=lambda r: (r.steps, r.budget)):
            start = Schedule("wsd", warm, int(row.steps), cooldown_fraction).cooldown_start
            if start < warm:
                raise PrismError(
                    f"{row.run_id}: its cooldown would start at step {start}, inside the warm-up of {warm} steps; "
                    "raise the budget, lower the warm-up or the cooldown fraction"
                )
            branches.append(
                Branch(
                    run_id=row.run_id,
                    budget=float(row.budget),
                    steps=int(row.steps),
                    start=start,
                    flops=row.steps * batch * fps,
                    cooldown_flops=(row.steps - start) * batch * fps,
                )
            )
        here = [r.hours_here / r.steps for r in rows if r.hours_here and r.steps]
        nodes = [r.node_hours / r.steps for r in rows if r.node_hours and r.steps]
        out.append(
            Trajectory(
                traj_id=traj_id(backbone, variant, regime, batch),
                family=family,
                backbone=backbone,
                variant=variant,
                regime=regime,
                global_batch=batch,
                flops_per_sample=fps,
                warmup=warm,
                cooldown_fraction=cooldown_fraction,
                branches=tuple(branches),
                hours_per_step=here[0] if len(here) == len(rows) else None,
                node_hours_per_step=nodes[0] if len(nodes) == len(rows) else None,
                devices=rows[0].devices,
                micro_batch=rows[0].micro_batch,
                accum_steps=rows[0].accum_steps,
                lr=rows[0].lr,
                lr_rule=rows[0].lr_rule,
            )
        )
    ids = [t.traj_id for t in out]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise PrismError(f"trajectories {dup} have runs with different FLOPs per sample; one calibration per model")
    return sorted(out, key=lambda t: t.traj_id)


@dataclass(frozen=True)
class Saving:
    """What a wsd study of a plan's grid costs against the independent cosine runs of the same grid."""

    n_runs: int
    n_trajectories: int
    cosine_flops: float
    wsd_flops: float
    cosine_hours: float | None
    wsd_hours: float | None
    cosine_node_hours: float | None
    wsd_node_hours: float | None

    @property
    def ratio(self) -> float:
        return self.wsd_flops / self.cosine_flops

    def to_json(self) -> dict:
        return {
            "n_runs": self.n_runs,
            "n_trajectories": self.n_trajectories,
            "cosine_flops": self.cosine_flops,
            "wsd_flops": self.wsd_flops,
            "ratio": self.ratio,
            "cosine_hours": self.cosine_hours,
            "wsd_hours": self.wsd_hours,
            "cosine_node_hours": self.cosine_node_hours,
            "wsd_node_hours": self.wsd_node_hours,
        }


def saving(trajs: list[Trajectory]) -> Saving:
    def hours(attr: str, steps: str) -> float | None:
        per_step = [getattr(t, attr) for t in trajs]
        if not per_step or any(h is None for h in per_step):
            return None
        return sum(getattr(t, steps) * h for t, h in zip(trajs, per_step))

    return Saving(
        n_runs=sum(len(t.branches) for t in trajs),
        n_trajectories=len(trajs),
        cosine_flops=sum(t.independent_flops for t in trajs),
        wsd_flops=sum(t.flops for t in trajs),
        cosine_hours=hours("hours_per_step", "independent_steps"),
        wsd_hours=hours("hours_per_step", "steps"),
        cosine_node_hours=hours("node_hours_per_step", "independent_steps"),
        wsd_node_hours=hours("node_hours_per_step", "steps"),
    )


def schedule_costs(
    runs: Iterable[PlanRow | Mapping[str, Any]],
    cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
    min_steps: int = DEFAULT_MIN_STEPS,
) -> dict:
    """plan.yaml's record of what `saving_text` prints: FLOPs and time of the grid under both schedules."""
    try:
        s = saving(trajectories(runs, cooldown_fraction, min_steps=min_steps))
    except PrismError as err:
        return {"cooldown_fraction": cooldown_fraction, "wsd": f"not plannable: {err}"}
    return {"cooldown_fraction": cooldown_fraction} | s.to_json()


def saving_text(
    runs: Iterable[PlanRow | Mapping[str, Any]],
    cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
    min_steps: int = DEFAULT_MIN_STEPS,
) -> str:
    """The plan's comparison: the same grid as independent cosine runs and as wsd trajectories with branches."""
    try:
        trajs = trajectories(runs, cooldown_fraction, min_steps=min_steps)
    except PrismError as err:
        return f"wsd (cooldown {cooldown_fraction:g}): not plannable: {err}"
    s = saving(trajs)
    head = f"{'trajectory':<26} {'budgets':>7} {'cosine FLOPs':>12} {'wsd FLOPs':>10} {'ratio':>6}  branch at/steps"
    lines = [
        f"Same grid, two schedules (wsd: warm-up {trajs[0].warmup if trajs else 0} steps, stable, "
        f"(1-sqrt) cooldown of the last {cooldown_fraction:.0%}; a branch's FLOPs = its prefix + cooldown, "
        "the total counts each prefix once):",
        head,
        "-" * len(head),
    ]
    for t in trajs:
        at = " ".join(f"{b.start}/{b.steps}" for b in t.branches)
        lines.append(
            f"{t.traj_id:<26} {len(t.branches):>7} {t.independent_flops:>12.3g} {t.flops:>10.3g} "
            f"{t.flops / t.independent_flops:>6.2f}  {at}"
        )
    hours = (
        "" if s.cosine_hours is None else f"; time here cosine {s.cosine_hours:.3g} h, wsd {s.wsd_hours:.3g} h"
    ) + (
        ""
        if s.cosine_node_hours is None
        else f"; node-hours cosine {s.cosine_node_hours:.3g}, wsd {s.wsd_node_hours:.3g}"
    )
    lines.append(
        f"{s.n_runs} runs: cosine {s.cosine_flops:.3g} FLOPs, wsd {s.wsd_flops:.3g} FLOPs in "
        f"{s.n_trajectories} trajectories = {s.ratio:.1%} of cosine{hours}"
    )
    return "\n".join(lines)


def plan_trajectories(
    plan: Mapping[str, Any], cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION
) -> list[Trajectory]:
    """The trajectories of a plan.yaml mapping (its runs and min_steps)."""
    return trajectories(
        plan.get("runs") or [], cooldown_fraction, min_steps=int(plan.get("min_steps") or DEFAULT_MIN_STEPS)
    )


def describe(t: Trajectory) -> str:
    """One line for logs: the trajectory's points and budgets."""
    return f"{t.traj_id}: warm-up {t.warmup}, points {list(t.points)}, budgets " + ", ".join(
        format_budget(b.budget) for b in t.branches
    )

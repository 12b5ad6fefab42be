"""Does the fitted lr rule train at least as well as the hand rule? Final losses of both, per size, over seeds.

    python tools/bench_lr_rule.py --study scaling-study [--runs apart | BACKBONE@BUDGET,...] [--seeds 0,1]

`--study` is a study folder whose tuning stage has run (STUDY/text_image/tune/lr_rule.json,
e.g. `snakemake scaling-study/text_image/tune/lr_rule.json --config 'tune={"rule": "fitted"}'`),
with its data and calibrations. `--runs` names BACKBONE@BUDGET runs; by default (`apart`), at every
width of the default grid the grid's run where the two rules' lrs are furthest apart, where the
choice of rule moves the loss most (a size without a calibration file has its FLOPs counted
in-process). For each run and seed it trains two cosine runs of the budget at the plan's batch and
warm-up, one at the hand rule's peak lr, one at the fitted rule's at the run's tokens (its row of
the default plan; `prism train`, one thread each; `--jobs 2`: two at a time), and prints each
size's median final loss under both; the paired difference (fitted minus hand, seed by seed: its
mean, standard error and one-sided 90% upper bound, the most the fitted rule may lose); the seeds
where the fitted rule is lower; and whether its median is at least as low at every size.
`--around F` also trains at the fitted lr / F and x F (is the fitted lr the lowest of the three:
does the rule find the optimum, not only tie a rule already near it?). Runs go to
STUDY/bench_lr_rule/BACKBONE@BUDGET-RULE-lrLR-sSEED/ (a rerun resumes or reuses them).

`--sensitivity-only`: no training; the shift of Approach 2's a on the default study's planned grid
(losses from config/round0's fitted surface) with every run's lr off by the rule's own 80% interval,
and with the hand rule's lrs moved to the rule's optimum (prism.isoflop.fit.lr_sensitivity).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prism.model.config import backbone_config
from prism.train.lr_rule import LrRule, read_rule
from prism.train.lr_schedule import default_lr


def train(study: Path, backbone: str, budget: float, seed: int, lr: float, tag: str, batch: int, warmup: int) -> float:
    """One run's final loss (trained unless its metrics.json exists)."""
    out = study / "bench_lr_rule" / f"{backbone}@{budget:g}-{tag}-lr{lr:.4g}-s{seed}"
    metrics = out / "metrics.json"
    if not metrics.is_file():
        cal = study / "calibration" / f"text_image__{backbone}__BASE__e2e.json"
        cmd = [sys.executable, "-m", "prism", "train", "--family", "text_image", "--backbone", backbone,
               "--variant", "BASE", "--regime", "e2e", "--budget", f"{budget:g}", "--data",
               str(study / "data" / "text_image"), "--out", str(out), "--global-batch", str(batch),
               *(["--calibration", str(cal)] if cal.is_file() else []), "--lr", f"{lr:.4g}",
               "--warmup", str(warmup), "--seed", str(seed),
               "--schedule", "cosine", "--eval-samples", "64", "--final-eval-samples", "2048",
               "--device", "cpu", "--threads", "1"]  # fmt: skip
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return float(json.loads(metrics.read_text())["loss"])


def default_grid() -> list:
    """The default study's planned runs (its config, no data or calibrations: counted sizes)."""
    import yaml  # noqa: PLC0415
    from snakemake.utils import validate  # noqa: PLC0415

    from prism.isoflop.design.plan import plan_runs  # noqa: PLC0415
    from prism.workflow.commands import plan_arguments  # noqa: PLC0415
    from prism.workflow.study import Study  # noqa: PLC0415

    config = yaml.safe_load(Path("config/config.yaml").read_text())
    validate(config, "config/schema.yaml")
    return plan_runs(**plan_arguments(Study(config), "text_image") | {"data": None, "calibration_dir": None}).runs


def sensitivity(rule) -> None:
    """a's shift on the default grid (its planned runs, round0's surface) from the rule's uncertainty."""
    from prism.isoflop.fit.lr_sensitivity import lr_offset, lr_sensitivity  # noqa: PLC0415
    from prism.isoflop.records import RunRecord, Surface  # noqa: PLC0415

    runs = default_grid()
    prior = json.loads(Path("config/round0/text_image/prior.json").read_text())["e2e"]
    surface = Surface(*(prior[k] for k in ("E", "A", "B", "alpha", "beta")))
    records = [RunRecord(r.run_id, r.params, r.tokens, float(surface.loss(r.params, r.tokens)), r.budget) for r in runs]
    widths = [backbone_config(r.backbone).d_model for r in runs]
    found = lr_sensitivity(records, widths, rule)
    print(f"default grid ({len(runs)} runs), round0 surface: a {found.a:.4f} -> {found.a_shifted:.4f} "
          f"(shift {found.shift:+.4f}); loss penalties {found.penalty_min:.3g}-{found.penalty_max:.3g}")  # fmt: skip
    off = lr_offset(records, widths, LrRule(), rule)  # the default study's hand rule against the sweep's optimum
    print(f"hand rule against it: lrs x{off.ratio_min:.3g}-x{off.ratio_max:.3g} of the optimum, loss penalties "
          f"{off.penalty_min:.3g}-{off.penalty_max:.3g}; at the optimum a would move by {off.shift:+.4f}")  # fmt: skip


def furthest_apart(rule, grid: list) -> list[str]:
    """BACKBONE@BUDGET at every width of the grid: its run where |log(fitted lr / hand lr)| is largest."""
    best: dict[int, tuple[float, str]] = {}
    for r in grid:
        width = backbone_config(r.backbone).d_model
        apart = abs(math.log(rule.lr(width, r.tokens) / default_lr(width)))
        if width not in best or apart > best[width][0]:
            best[width] = (apart, f"{r.backbone}@{r.budget:g}")
    return [best[w][1] for w in sorted(best)]


def bench_lrs(rule, runs: list[str], grid: list) -> dict[str, dict]:
    """{BACKBONE@BUDGET: its width, budget and the two rules' lrs}; the fitted rule's at the run's tokens
    (its row of `grid`, the default grid's planned runs: needed only by a rule with a tokens exponent)."""
    rows = {(r.backbone, r.budget): r for r in grid} if rule.has_q else {}
    out = {}
    for run in runs:
        backbone, budget = run.split("@")
        width = backbone_config(backbone).d_model
        row = rows.get((backbone, float(budget)))
        if rule.has_q and row is None:
            raise SystemExit(f"{run}: not a run of the default grid (a rule with a tokens exponent needs its tokens)")
        fitted = rule.lr(width, row.tokens if row else None)
        out[run] = {"backbone": backbone, "budget": float(budget), "width": width,
                    "lrs": {"hand": default_lr(width), "fitted": float(f"{fitted:.4g}")}}  # fmt: skip
    return out


def paired(per: dict[str, list[float]]) -> str:
    """Fitted minus hand, seed by seed: the mean, its standard error and the one-sided 90% upper bound of
    the mean (Student's t): how much worse the fitted rule could be at most. The same seed shares the
    initialisation and the data order, so the pairs resolve what the medians' seed scatter hides."""
    from scipy.stats import t  # noqa: PLC0415

    diffs = [f - h for f, h in zip(per["fitted"], per["hand"])]
    if len(diffs) < 2:
        return f"{diffs[0]:+.4f}"
    mean, se = statistics.mean(diffs), statistics.stdev(diffs) / len(diffs) ** 0.5
    return f"{mean:+.4f} +- {se:.4f} (< {mean + t.ppf(0.9, len(diffs) - 1) * se:+.4f})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--study", required=True)
    p.add_argument("--runs", default="apart", help="BACKBONE@BUDGET,... or `apart` (where the rules differ most)")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--jobs", type=int, default=1, help="runs trained at a time (one thread each)")
    p.add_argument("--around", type=float, default=None, metavar="F",
                   help="also train at the fitted lr / F and x F: is it the lowest of the three?")  # fmt: skip
    p.add_argument("--sensitivity-only", action="store_true", help="only a's shift on the default grid (no training)")
    args = p.parse_args()
    study = Path(args.study)
    rule = read_rule(study / "text_image" / "tune" / "lr_rule.json")
    print(rule.describe())
    if args.sensitivity_only:
        sensitivity(rule)
        return 0
    seeds = [int(s) for s in args.seeds.split(",")]
    grid = default_grid() if args.runs == "apart" or rule.has_q else []  # planned once: it takes seconds
    sizes = bench_lrs(rule, furthest_apart(rule, grid) if args.runs == "apart" else args.runs.split(","), grid)
    if args.around:
        for size in sizes.values():
            fitted = size["lrs"]["fitted"]
            size["lrs"] |= {"below": float(f"{fitted / args.around:.4g}"),
                            "above": float(f"{fitted * args.around:.4g}")}  # fmt: skip
    tasks = [(run, tag, s) for run, size in sizes.items() for s in seeds for tag in size["lrs"]]
    with ThreadPoolExecutor(args.jobs) as pool:
        losses = dict(zip(tasks, pool.map(lambda t: train(
            study, sizes[t[0]]["backbone"], sizes[t[0]]["budget"], t[2], sizes[t[0]]["lrs"][t[1]], t[1],
            args.batch, args.warmup), tasks)))  # fmt: skip
    worse = []
    print(f"{'backbone':<8} {'d_model':>7} {'hand lr':>8} {'fitted lr':>9} {'hand loss':>9} {'fitted loss':>11} "
          f"{'paired diff (90% bound)':>28} {'lower':>5}  seeds")  # fmt: skip
    for run, size in sizes.items():
        per = {tag: [losses[(run, tag, s)] for s in seeds] for tag in size["lrs"]}
        med = {tag: statistics.median(v) for tag, v in per.items()}
        row = f"{size['backbone']:<8} {size['width']:>7} {size['lrs']['hand']:>8.3g} {size['lrs']['fitted']:>9.4g}"
        seeds_text = " | ".join(f"{tag} " + " ".join(f"{v:.3f}" for v in vals) for tag, vals in per.items())
        print(f"{row} {med['hand']:>9.4f} {med['fitted']:>11.4f} {paired(per):>28} "
              f"{sum(f < h for f, h in zip(per['fitted'], per['hand'])):>2}/{len(seeds):<2}  {seeds_text}")  # fmt: skip
        if med["fitted"] > med["hand"]:
            worse.append(size["backbone"])
        if args.around:
            lowest = med["fitted"] <= min(med["below"], med["above"])
            print(f"{'':<8} fitted lr / and x {args.around:g}: medians {med['below']:.4f} {med['above']:.4f}; "
                  f"the fitted lr's the lowest of the three: {lowest}")  # fmt: skip
    print(
        f"fitted at least as low as hand at every size: {not worse}"
        + (f" (not at {', '.join(worse)})" if worse else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

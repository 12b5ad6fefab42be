"""Per-run loss at equal budget, wsd against cosine, paired over seeds.

    python tools/bench_schedules.py --study scaling-study --cells 20k@1.2e12,45k@2e12 [--seeds 0,1,2]

A study's agreement report (`prism isoflop compare`) sets one cosine run beside one
wsd branch per (size, budget): a single seed each, so a difference of a few per cent
may be no more than the seed-to-seed spread of one run. Here every cell (backbone at a
budget) trains both schedules under several seeds, on the study's data and
calibrations, exactly as the study would (`prism train`, batch 32, one thread, the
same final evaluation and the study's warm-up, half the plan's min_steps, for both
schedules; `--cosine-warmup` gives the cosine runs another), and reports per cell the
mean loss of each schedule, the paired difference
(wsd - cosine, in % of cosine) with its standard error over seeds, and the seed spread
of one run. A wsd run trained alone is the branch the study would have taken from its
trajectory (bit-identical, `tests/train/test_wsd_segments.py`).

`--lr-scale X` trains both schedules at X times the study's peak learning rate, so a
rerun at a few scales says whether a gap between them is the learning rate's.

Runs go to `--out` (a rerun skips finished runs, as `prism train` does), `--jobs` at a
time.
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

import yaml

from prism.core.options import from_mapping
from prism.isoflop.design.trajectories import plan_warmup
from prism.train.options import TrainOptions

SCHEDULES = ("cosine", "wsd")
# The default study's settings, which these runs repeat (read, not copied: they follow config.yaml).
CONFIG = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())
STUDY_TRAIN = from_mapping(TrainOptions, CONFIG["train"], "config/config.yaml train")


def run_dir(out: Path, cell: str, schedule: str, seed: int, warmup: int | None = None, lr_scale: float = 1.0) -> Path:
    tag = (schedule if warmup is None else f"{schedule}-w{warmup}") + ("" if lr_scale == 1 else f"-lr{lr_scale:g}")
    return out / f"{cell.replace('@', '-C')}-{tag}-s{seed}"


def warmup_of(args: argparse.Namespace, schedule: str) -> int | None:
    """Warm-up steps of a schedule's runs; None: `prism train`'s own default (5% of the run)."""
    if schedule == "wsd" or args.cosine_warmup is None:
        return args.warmup
    return None if args.cosine_warmup == "run" else int(args.cosine_warmup)


def train(args: argparse.Namespace, cell: str, schedule: str, seed: int) -> dict:
    """One `prism train` run; its metrics.json."""
    backbone, budget = cell.split("@")
    warmup = warmup_of(args, schedule)
    out = run_dir(args.out, cell, schedule, seed, warmup, args.lr_scale)
    calibration = args.study / "calibration" / f"{args.family}__{backbone}__BASE__e2e.json"
    cmd = [
        sys.executable,
        "-m",
        "prism",
        "train",
        "--family",
        args.family,
        "--backbone",
        backbone,
        "--variant",
        "BASE",
        "--regime",
        "e2e",
        "--budget",
        budget,
        "--out",
        str(out),
        "--data",
        str(args.study / "data" / args.family),
        "--device",
        "cpu",
        "--threads",
        "1",
        "--global-batch",
        str(args.global_batch),
        "--schedule",
        schedule,
        "--seed",
        str(seed),
        "--eval-samples",
        str(args.eval_samples),
        *(["--final-eval-samples", str(args.final_eval_samples)] if args.final_eval_samples else []),
    ]
    if calibration.exists():  # else `prism train` counts the FLOPs per sample itself
        cmd += ["--calibration", str(calibration)]
    if warmup is not None:
        cmd += ["--warmup", str(warmup)]
    if args.lr_scale != 1:
        from prism.model.config import backbone_config
        from prism.train.lr_schedule import default_lr

        cmd += ["--lr", repr(args.lr_scale * default_lr(backbone_config(backbone).d_model))]
    log = out.parent / f"{out.name}.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode:
            raise SystemExit(f"{out}: prism train failed, see {log}")
    return json.loads((out / "metrics.json").read_text())


def summarise(cell: str, runs: dict[tuple[str, int], dict], seeds: list[int]) -> dict:
    loss = {s: [runs[s, seed]["loss"] for seed in seeds] for s in SCHEDULES}
    diffs = [100 * (w - c) / c for c, w in zip(loss["cosine"], loss["wsd"])]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    mean_cos = statistics.mean(loss["cosine"])
    spread = (
        statistics.mean(statistics.stdev(loss[s]) for s in SCHEDULES) / mean_cos * 100
        if len(seeds) > 1
        else float("nan")
    )
    return {
        "cell": cell,
        "steps": runs["wsd", seeds[0]]["steps"],
        "cosine": mean_cos,
        "wsd": statistics.mean(loss["wsd"]),
        "diff": statistics.mean(diffs),
        "se": se,
        "spread": spread,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True, help="study dir with data/F and calibration/")
    parser.add_argument("--family", default="text_image")
    parser.add_argument("--cells", required=True, help="comma-separated BACKBONE@BUDGET, e.g. 20k@1.2e12")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument(
        "--global-batch", type=int, default=CONFIG["plan"]["global_batch"], help="default: the default study's"
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=plan_warmup(CONFIG["plan"]["min_steps"]),
        help="warm-up steps of both schedules (default: the default study's, half its min_steps)",
    )
    parser.add_argument(
        "--cosine-warmup",
        default=None,
        metavar="N|run",
        help="cosine runs only: N steps, or `run` for prism train's own default (5%% of the run)",
    )
    parser.add_argument(
        "--lr-scale",
        type=float,
        default=1.0,
        help="both schedules at this multiple of the study's peak learning rate (is a gap the rate's?)",
    )
    parser.add_argument(
        "--eval-samples", type=int, default=STUDY_TRAIN.eval_samples, help="default: the default study's"
    )
    parser.add_argument(
        "--final-eval-samples", type=int, default=STUDY_TRAIN.final_eval_samples, help="default: the default study's"
    )
    parser.add_argument("--jobs", type=int, default=2, help="runs side by side (one thread each)")
    parser.add_argument("--out", type=Path, default=Path("schedules-bench"))
    args = parser.parse_args(argv)
    cells = args.cells.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    work = [(c, s, seed) for c in cells for seed in seeds for s in SCHEDULES]
    with ThreadPoolExecutor(args.jobs) as pool:
        done = dict(zip(work, pool.map(lambda w: train(args, *w), work)))
    print(
        f"wsd - cosine per run at equal budget, {args.lr_scale:g} x the study's peak lr, {len(seeds)} seeds "
        f"({args.seeds}); diff in % of cosine, +- its standard error over seeds; spread: one run's seed-to-seed "
        "std in %"
    )
    print("| cell | steps | cosine | wsd | diff % | spread % |")
    print("|---|---|---|---|---|---|")
    for c in cells:
        r = summarise(c, {(s, seed): done[c, s, seed] for (cc, s, seed) in done if cc == c}, seeds)
        print(
            f"| {c} | {r['steps']} | {r['cosine']:.4f} | {r['wsd']:.4f} | {r['diff']:+.2f} +- {r['se']:.2f} "
            f"| {r['spread']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

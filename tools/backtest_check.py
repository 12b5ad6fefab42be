"""How often the backtest's 80% prediction interval holds what it predicts: studies simulated on the
round-0 surface (config/round0, the default study's seed 0 fit) with Gaussian noise, at the default
study's planned runs, each fitted as `prism isoflop fit` fits a real one (both approaches, backtest
included). For the largest budget predicted from the others it counts how often the interval holds

- that budget's own measured optimum (its parabola's minimum: what the backtest compares with),
- the surface's true optimum there (N minimising L along the budget at the study's FLOPs per token),

and the same for the minimum loss. A calibrated 80% interval holds about 80%.

With `--fitted`, the backtests that trained studies' fit jobs wrote (their fit/e2e.json) instead:
for each, whether the left-out largest budget's own optimum and minimum loss fell inside.

    python tools/backtest_check.py [--noise 0.0146,0.03] [--studies 40] [--bootstrap 200]
    python tools/backtest_check.py --fitted STUDY/text_image [STUDY/text_image ...]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from forecast_check import default_plan  # noqa: E402

from prism.isoflop.design.plan import study_centre  # noqa: E402
from prism.isoflop.fit.fit import fit_records  # noqa: E402
from prism.isoflop.fit.predict import a3_optimum  # noqa: E402
from prism.isoflop.records import RunRecord, Surface  # noqa: E402


def one_study(runs: list[dict], surface: Surface, noise: float, bootstrap: int, seed: int) -> dict | None:
    """The leave-one-out backtest of one simulated study, and whether its intervals hold the truths."""
    n, d = np.array([r["params"] for r in runs]), np.array([r["tokens"] for r in runs])
    rng = np.random.default_rng(seed)
    loss = surface.loss(n, d) + noise * rng.standard_normal(len(runs))
    records = [
        RunRecord(r["run_id"], r["params"], r["tokens"], float(y), r["budget"], flops=r["flops"])
        for r, y in zip(runs, loss, strict=True)
    ]
    result = fit_records(records, bootstrap=bootstrap, seed=seed)
    tests = [b for b in result.prediction.backtests if len(b.left_out) == 1] if result.prediction else []
    if not tests or tests[0].n_ci is None:
        return None
    b = tests[0]
    theta = (surface.E, surface.A, surface.B, surface.alpha, surface.beta)
    true_n, true_loss = (float(v) for v in a3_optimum(np.array(theta), b.budget, result.prediction.model.fpt))
    return {
        "approach": b.approach,
        "measured_in": b.n_units is not None and abs(b.n_units) <= 1,
        "true_in": b.n_ci[0] <= true_n <= b.n_ci[1],
        "loss_in": b.loss_units is not None and abs(b.loss_units) <= 1,
        "true_loss_in": b.loss_ci is not None and b.loss_ci[0] <= true_loss <= b.loss_ci[1],
        "ratio": b.n_ratio,
        "width": math.log10(b.n_ci[1] / b.n_ci[0]),
        "far": b.far,
    }


def share(rows: list[dict], key: str) -> str:
    return f"{100 * sum(r[key] for r in rows) / len(rows):.0f}%"


def fitted(families: list[str]) -> None:
    """The largest-budget backtest of each trained study, as its fit job wrote it."""
    rows = []
    for family in families:
        path = Path(family) / "fit" / "e2e.json"
        tests = [b for b in json.loads(path.read_text())["prediction"]["backtests"] if len(b["left_out"]) == 1]
        if not tests:
            print(f"{path}: no backtest")
            continue
        b = tests[0]
        row = {
            "measured_in": b["n_units"] is not None and abs(b["n_units"]) <= 1,
            "loss_in": b["loss_units"] is not None and abs(b["loss_units"]) <= 1,
            "far": any(u is not None and abs(u) > 2 for u in (b["n_units"], b["loss_units"])),
        }
        rows.append(row)
        print(
            f"{path}: {b['approach']}, N_opt measured x{b['n_ratio']:.2f} ({b['n_units']:+.2f} half-widths), "
            f"minimum loss {b['loss_diff']:+.4f} ({b['loss_units']:+.2f} half-widths)"
        )
    if rows:
        print(
            f"{len(rows)} studies: N_opt inside the 80% interval {share(rows, 'measured_in')}, minimum loss inside "
            f"{share(rows, 'loss_in')}, far off (warning) {share(rows, 'far')}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fitted", nargs="+", metavar="FAMILY_DIR", help="trained studies' family folders")
    ap.add_argument("--noise", help="comma-separated noises (default: the round-0 file's measured and calibrated)")
    ap.add_argument("--studies", type=int, default=40, help="simulated studies per noise (default 40)")
    ap.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples of each fit (default 200)")
    args = ap.parse_args()
    if args.fitted:
        fitted(args.fitted)
        return
    plan, options = default_plan()
    centre = study_centre("text_image", "e2e", options)
    if centre.surface is None:
        raise SystemExit("plan.previous_round gives no surface")
    surface = Surface(**centre.surface)
    noises = [float(x) for x in args.noise.split(",")] if args.noise else [0.0146, centre.noise]
    runs = plan["runs"]
    print(f"default plan: {len(runs)} runs on {len(plan['budgets'])} budgets; round-0 surface {centre.surface}")
    for sigma in noises:
        rows = [r for i in range(args.studies) if (r := one_study(runs, surface, sigma, args.bootstrap, i))]
        if not rows:
            print(f"noise {sigma:.4f}: no study gave a backtest")
            continue
        ratios = [r["ratio"] for r in rows]
        by = {a: sum(r["approach"] == a for r in rows) for a in ("approach2", "approach3", "both")}
        print(
            f"noise {sigma:.4f}: {len(rows)} of {args.studies} studies with a backtest (answer: {by}); "
            f"N_opt inside the 80% interval: measured optimum {share(rows, 'measured_in')}, true optimum "
            f"{share(rows, 'true_in')}; minimum loss: measured {share(rows, 'loss_in')}, true "
            f"{share(rows, 'true_loss_in')}; far off (warning) {share(rows, 'far')}; measured / predicted N_opt "
            f"median {statistics.median(ratios):.2f} (10-90% {np.quantile(ratios, 0.1):.2f}-"
            f"{np.quantile(ratios, 0.9):.2f}); median interval width {statistics.median(r['width'] for r in rows):.2f}"
            " decades",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""How well the plan's forecast predicts a study's outcome: the default study's plan (config/config.yaml's
budgets and `plan:`, its sizes counted here), then at each noise the forecast's verdict and expected
interval width, and studies simulated on the forecast's surface with that noise, each fitted as
`prism isoflop fit` fits a real one (both approaches), against what the seeds of the real study measured.

    python tools/forecast_check.py [--noise 0.0146,0.033] [--studies 60] [--bootstrap 200]

`--surface`: a prior.json holding E, A, B, alpha, beta (default: the one `plan.previous_round`
names); `--noise`: the noises to try (default: the one it records); `--measured`: each seed's
interval width, a NOT identifiable one with a trailing `!` (default: the eight seeds in
docs/measurements.md). A calibrated forecast expects about the seeds' median width, and its
simulated studies come out identifiable about as often as the seeds did.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
import yaml

from prism.core.options import from_mapping
from prism.isoflop.design.forecast import forecast
from prism.isoflop.design.plan import make_plan, study_centre
from prism.isoflop.design.planoptions import PlanOptions
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import SURFACE_KEYS, RunRecord, Surface

REPO = Path(__file__).resolve().parents[1]
# The default study's eight seeds (docs/measurements.md, "Eight seeds"): width, "!" = NOT identifiable.
SEEDS = "0.074,0.129,0.107,0.131,0.117,0.065,0.109,0.249!"


def default_plan() -> tuple[dict, PlanOptions]:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    options = from_mapping(PlanOptions, config["plan"], "config plan")
    budgets = [float(b) for b in config["budgets"]]
    plan = make_plan("text_image", budgets, None, options=options, variants=list(config["variants"]), simulations=20)
    return plan, options


def simulate(runs: list[dict], surface: Surface, noise: float, studies: int, bootstrap: int, seed: int) -> list:
    """(identifiable, interval width) of each study simulated on `surface` with Gaussian `noise`, fitted as real."""
    n, d = np.array([r["params"] for r in runs]), np.array([r["tokens"] for r in runs])
    truth = surface.loss(n, d)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(studies):
        loss = truth + noise * rng.standard_normal(len(runs))
        records = [
            RunRecord(r["run_id"], r["params"], r["tokens"], float(y), r["budget"], flops=r["flops"])
            for r, y in zip(runs, loss)
        ]
        verdict = fit_records(records, bootstrap=bootstrap, seed=i).verdict
        width = None if verdict.interval is None else verdict.interval[1] - verdict.interval[0]
        out.append((verdict.identifiable, width))
    return out


def outcome(rows: list) -> str:
    widths = [w for _, w in rows if w is not None]
    share = sum(ok for ok, _ in rows) / len(rows)
    q1, q3 = np.quantile(widths, [0.25, 0.75])
    return (
        f"{len(rows)}, identifiable {100 * share:.0f}%, median interval width {statistics.median(widths):.3f} "
        f"(quartiles {q1:.3f}-{q3:.3f})"
    )


def _w(width: float | None) -> str:
    return "-" if width is None else f"{width:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--surface", type=Path, help="prior.json: E, A, B, alpha, beta (default: plan.previous_round's)")
    ap.add_argument("--noise", help="comma-separated noises to try (default: the surface file's)")
    ap.add_argument("--studies", type=int, default=60, help="simulated studies per noise (default 60)")
    ap.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples of each fit (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--measured", default=SEEDS, help=f"the seeds' interval widths (default: {SEEDS})")
    args = ap.parse_args()
    plan, options = default_plan()
    if args.surface:
        prior = json.loads(args.surface.read_text())
        surface, noise = Surface(**{k: prior[k] for k in SURFACE_KEYS}), prior.get("noise")
    else:
        centre = study_centre("text_image", "e2e", options)
        if centre.surface is None:
            raise SystemExit("plan.previous_round gives no surface: pass --surface PRIOR.json")
        surface, noise = Surface(**centre.surface), centre.noise
    noises = [float(x) for x in args.noise.split(",")] if args.noise else [noise]
    runs = plan["runs"]
    params, tokens, budget = ([r[k] for r in runs] for k in ("params", "tokens", "budget"))
    print(f"default plan: {len(runs)} runs on {len(plan['budgets'])} budgets")
    measured = [(not w.endswith("!"), float(w.rstrip("!"))) for w in args.measured.split(",")]
    median = statistics.median(w for _, w in measured)
    print(f"measured seeds: {outcome(measured)}")
    for sigma in noises:
        fc = forecast(params, tokens, budget, surface, noise=sigma, n_sims=options.simulations, seed=0)
        print(
            f"noise {sigma:.4f}: forecast {'DETERMINED' if fc.determined else 'UNDETERMINED'}, expected 80% "
            f"interval {_w(fc.a_ci_width)} wide ({fc.a_ci_width / median:.2f}x the seeds' median); simulated "
            f"studies: {outcome(simulate(runs, surface, sigma, args.studies, args.bootstrap, args.seed))}",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""How well the plan's forecast predicts a study's outcome: the default config's plan and forecast,
then studies simulated on the forecast's own surface and noise, each fitted as `prism isoflop fit`
fits a real one, against what the seeds of the real study measured.

    python tools/forecast_check.py [--studies 40] [--bootstrap 200] [--measured 0.118,0.098,...]

Prints the forecast's verdict and expected interval width, the simulated studies' share
identifiable and median interval width (the one the verdict used), and the measured seeds'
share and median (`--measured`: each seed's interval width, NOT identifiable ones with a
trailing `!`; the default is the eight seeds in docs/measurements.md). The plan is the
default study's (config/config.yaml's budgets and `plan:`), its sizes counted here.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
import yaml

from prism.isoflop.design.plan import PlanOptions, make_plan, study_centre
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import RunRecord, Surface
from prism.options import from_mapping

REPO = Path(__file__).resolve().parents[1]
# The default study's eight seeds (docs/measurements.md, "Seeds 1-7 with these kernels"): width, "!" = NOT identifiable.
SEEDS = "0.118,0.098,0.144,0.164!,0.130,0.145,0.120,0.184!"


def default_plan() -> tuple[dict, PlanOptions]:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    options = from_mapping(PlanOptions, config["plan"], "config plan")
    budgets = [float(b) for b in config["budgets"]]
    plan = make_plan("text_image", budgets, None, options=options, variants=list(config["variants"]))
    return plan, options


def simulate(plan: dict, surface: Surface, noise: float, studies: int, bootstrap: int, seed: int) -> list:
    """(identifiable, interval width) of each study simulated on `surface` with Gaussian `noise`, fitted as real."""
    runs = plan["runs"]
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
        print(f"  study {i}: {'identifiable' if verdict.identifiable else 'NOT'} ({_w(width)})", flush=True)
    return out


def _w(width: float | None) -> str:
    return "-" if width is None else f"{width:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--studies", type=int, default=40, help="simulated studies (default 40)")
    ap.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples of each fit (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--measured", default=SEEDS, help=f"the seeds' interval widths (default: {SEEDS})")
    args = ap.parse_args()
    plan, options = default_plan()
    fc = plan["forecast"]
    centre = study_centre("text_image", "e2e", options)
    if centre.surface is None or centre.noise is None:
        raise SystemExit("the default plan's forecast has no surface and noise of its own (plan.previous_round)")
    print(
        f"forecast: {'DETERMINED' if fc['determined'] else 'UNDETERMINED'}, expected 80% interval of a "
        f"{_w(fc['a_ci_width'])} wide, noise {fc['noise']:.4f}, {len(plan['runs'])} runs on {len(plan['budgets'])} "
        f"budgets ({centre.source})"
    )
    sims = simulate(plan, Surface(**centre.surface), centre.noise, args.studies, args.bootstrap, args.seed)
    measured = [(not w.endswith("!"), float(w.rstrip("!"))) for w in args.measured.split(",")]
    for label, rows in (("simulated studies", sims), ("measured seeds", measured)):
        widths = [w for _, w in rows if w is not None]
        share = sum(ok for ok, _ in rows) / len(rows)
        print(
            f"{label}: {len(rows)}, identifiable {100 * share:.0f}%, median interval width "
            f"{statistics.median(widths):.3f} (quartiles {_w(float(np.quantile(widths, 0.25)))}-"
            f"{_w(float(np.quantile(widths, 0.75)))})"
        )
    median = statistics.median(w for _, w in measured)
    print(f"forecast width / measured median: {fc['a_ci_width'] / median:.2f} (target within 1/1.5-1.5)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Benchmark of the IsoFLOP fit (its targets below; not a test): medians of a few repeats.

    .venv/bin/python tools/bench_fit.py [--repeats 5] [--json out.json]

- Approach 2 with 1000 bootstrap resamples on a 15-run study (3 budgets x 5 sizes): target < 2 s.
- Approach 3 point fit (4500-start grid) on Epoch's 240 Chinchilla points: target < 10 s.
- Approach 3 with 200 bootstrap resamples on the same data: target < 2 min on 2 cores.
- The plan's identifiability forecast (200 simulated studies of 4 budgets x 7 runs).
Times are wall-clock seconds of the library calls in this process (imports excluded).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def chinchilla():
    with (ROOT / "tests" / "data" / "scaling" / "chinchilla_epoch_svg.csv").open() as fh:
        rows = sorted(csv.DictReader(fh), key=lambda r: float(r["loss"]))[:-5]
    n = np.array([float(r["Model Size"]) for r in rows])
    c = np.array([float(r["Training FLOP"]) for r in rows])
    return n, c / (6 * n), np.array([float(r["loss"]) for r in rows])


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    from prism.isoflop.design.forecast import forecast, prior_surface
    from prism.isoflop.fit import approach2, approach3
    from prism.isoflop.records import CHINCHILLA_EPOCH
    from prism.isoflop.synthetic import isoflop_study

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    results = {}

    recs = isoflop_study(CHINCHILLA_EPOCH, [1e19, 1e20, 1e21], per_budget=5, spread=1.0, noise=0.012, seed=0)
    arrays = [np.array([getattr(r, k) for r in recs]) for k in ("params", "tokens", "loss", "budget")]
    t, res = timed(lambda: approach2.fit_approach2(*arrays, n_boot=1000, seed=0), args.repeats)
    results["approach2_15runs_1000boot_s"] = t
    print(
        f"Approach 2, 15 runs, 1000 bootstrap: {t:.3f} s (target < 2 s); a = {res.n_law.exponent:.3f} "
        f"{res.n_law.exponent_ci}"
    )

    data = chinchilla()
    t, fit = timed(lambda: approach3.fit_approach3(*data), max(1, args.repeats // 2 + 1))
    results["approach3_chinchilla_point_s"] = t
    s = fit.surface
    print(
        f"Approach 3 point fit, 240 points, 4500-start grid: {t:.2f} s (target < 10 s); E={s.E:.4f} "
        f"alpha={s.alpha:.4f} beta={s.beta:.4f} a={s.a:.4f} objective={fit.objective:.6e} converged={fit.converged}"
    )

    t, boot = timed(lambda: approach3.bootstrap_approach3(*data, fit, n_boot=200, seed=0), max(1, args.repeats // 2))
    results["approach3_chinchilla_200boot_s"] = t
    lo, hi = approach3.interval(boot[:, 3])
    print(
        f"Approach 3, 200 bootstrap (warm-started): {t:.2f} s (target < 120 s); alpha 80% interval [{lo:.4f}, {hi:.4f}]"
    )

    grid = isoflop_study(prior_surface(0.5, 0.1), [1e12, 3e12, 1e13, 3e13], per_budget=7, spread=1.0)
    g = [np.array([getattr(r, k) for r in grid]) for k in ("params", "tokens", "budget")]
    t, fc = timed(lambda: forecast(*g, prior_surface(0.5, 0.1), n_sims=200), args.repeats)
    results["forecast_200sims_s"] = t
    print(
        f"Forecast, 200 simulated studies of 28 runs: {t:.3f} s; determined={fc.determined}, "
        f"80% width of a {fc.a_ci_width:.3f}"
    )

    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Approach 3's 80% interval of a, profile likelihood against the bootstrap over runs, on surfaces with
a known a: how often each holds it, and how wide each is (the same simulated studies for both).

    python tools/a3_interval_check.py [--case default|symmetric|falls|curvatures|offcentre]
                                      [--errors gauss|t4|hetero] [--noise 0.03] [--studies 60] [--bootstrap 200]

`default`: the round-0 surface (config/round0) at the default plan's 40 runs; `symmetric`: a
symmetric surface on 5 budgets x 5 runs; `falls`, `curvatures`, `offcentre`: the verdict tests'
surfaces that are not Approach 3's form (tests/isoflop/fit/test_verdict.py, noise 0.01 there).
`t4`: Student t errors with 4 degrees of freedom scaled to the same standard deviation; `hetero`:
Gaussian, twice the noise at the smallest budget falling to half at the largest (log-linear in C).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from pathlib import Path

import numpy as np

from prism.isoflop.fit import approach3
from prism.isoflop.records import SURFACE_KEYS, Surface
from prism.isoflop.synthetic import isoflop_study

REPO = Path(__file__).resolve().parents[1]
VERDICT_CASES = {"falls": 0, "curvatures": 1, "offcentre": 2}


def grid(case: str):
    """(params, tokens, noiseless loss, true a) of the case's grid."""
    if case == "default":
        from forecast_check import default_plan  # noqa: PLC0415 the sibling tool's plan

        prior = json.loads((REPO / "config/round0/text_image/prior.json").read_text())["e2e"]
        surface = Surface(**{k: prior[k] for k in SURFACE_KEYS})
        runs = default_plan()[0]["runs"]
        n, d = (np.array([r[k] for r in runs], float) for k in ("params", "tokens"))
        return n, d, surface.loss(n, d), surface.a
    if case == "symmetric":
        surface = Surface(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.35)
        recs = isoflop_study(surface, [1e18, 3e18, 1e19, 3e19, 1e20], per_budget=5, spread=1.0)
        n, d = (np.array([getattr(r, k) for r in recs]) for k in ("params", "tokens"))
        return n, d, surface.loss(n, d), surface.a
    spec = importlib.util.spec_from_file_location("verdict_cases", REPO / "tests/isoflop/fit/test_verdict.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    loss, kw = list(cases.CASES.values())[VERDICT_CASES[case]]
    recs = cases.study(loss, **kw)
    n, d = (np.array([getattr(r, k) for r in recs]) for k in ("params", "tokens"))
    return n, d, loss(n, d), cases.true_a(loss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="default", choices=["default", "symmetric", *VERDICT_CASES])
    ap.add_argument("--errors", default="gauss", choices=("gauss", "t4", "hetero"))
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument("--studies", type=int, default=60)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    n, d, truth, a_true = grid(args.case)
    c = np.log(n * d)  # the budget, up to a constant factor
    scale = 2.0 ** (1 - 2 * (c - c.min()) / (c.max() - c.min())) if args.errors == "hetero" else 1.0
    rng = np.random.default_rng(args.seed)
    rows = []
    for i in range(args.studies):
        if args.errors == "t4":
            e = rng.standard_t(4, len(n)) / math.sqrt(2.0)
        else:
            e = rng.standard_normal(len(n)) * scale
        loss = truth + args.noise * e
        fit = approach3.fit_approach3(n, d, loss)
        if not fit.converged:
            continue
        prof = approach3.profile_a(n, d, loss, fit)
        row = [prof.lo, prof.hi]
        if args.bootstrap:
            boot = approach3.bootstrap_approach3(n, d, loss, fit, args.bootstrap, i)
            row += list(approach3.interval(boot[:, 4] / (boot[:, 3] + boot[:, 4])))
        rows.append(row)
    r = np.array(rows)
    print(f"{args.case}, {args.errors} {args.noise}: true a {a_true:.4f}, {len(r)} studies")
    for name, cols in (("profile", (0, 1)), ("bootstrap over runs", (2, 3))):
        if r.shape[1] > cols[1]:
            lo, hi = r[:, cols[0]], r[:, cols[1]]
            held = np.mean((lo <= a_true) & (a_true <= hi))
            print(f"  {name}: holds a in {held:.3f}, median width {np.median(hi - lo):.4f}")


if __name__ == "__main__":
    main()

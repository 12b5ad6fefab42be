"""How often the verdict calls a study identifiable and, when it does, how often its interval holds the true
a: studies simulated with Gaussian noise, each fitted as `prism isoflop fit` fits a real one (both
approaches), by the approach the verdict rests on. The surface is the default plan's (the round-0 prior, on
that plan's runs), or one of the surfaces not of Approach 3's form that tests/isoflop/fit/test_verdict.py
holds the verdict to (on its grid of 6 budgets of 9 sizes).

    python tools/verdict_coverage.py [--surface default] [--noise 0.03] [--studies 80] [--bootstrap 200] [--seed 0]

A calibrated 80% verdict holds the true a in about 80% of the studies it calls identifiable; the
approaches' own intervals are counted beside it over every study.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
from forecast_check import default_plan

from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import SURFACE_KEYS, RunRecord, Surface

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.isoflop.fit.test_verdict import CASES, study, true_a  # noqa: E402

# A study of `noise` drawn with `rng` -> its runs; and the true a.
Draw = Callable[[float, np.random.Generator, int], list[RunRecord]]
SURFACES = {"default": "the default plan's", **{name.split(",")[0].replace(" ", "-"): name for name in CASES}}


def default_surface() -> tuple[Draw, float]:
    prior = json.loads((REPO / "config/round0/text_image/prior.json").read_text())["e2e"]
    surface = Surface(**{k: prior[k] for k in SURFACE_KEYS})
    runs = default_plan()[0]["runs"]
    n, d = (np.array([r[k] for r in runs], float) for k in ("params", "tokens"))
    truth = surface.loss(n, d)

    def draw(noise: float, rng: np.random.Generator, seed: int) -> list[RunRecord]:
        loss = truth + noise * rng.standard_normal(len(runs))
        return [RunRecord(r["run_id"], r["params"], r["tokens"], float(y), r["budget"], flops=r["flops"])
                for r, y in zip(runs, loss)]  # fmt: skip

    return draw, surface.a


def case_surface(case: str) -> tuple[Draw, float]:
    loss, kw = CASES[case]
    return (lambda noise, rng, seed: study(loss, noise=noise, seed=seed, **kw)), true_a(loss)


def holds(interval, a: float) -> bool:
    return interval is not None and interval[0] <= a <= interval[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--surface", choices=list(SURFACES), default="default")
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument("--studies", type=int, default=80)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    draw, a = default_surface() if args.surface == "default" else case_surface(SURFACES[args.surface])
    rng = np.random.default_rng(args.seed)
    by, a2_held, a3_held = Counter(), 0, 0
    held = Counter()
    for i in range(args.studies):
        records = draw(args.noise, rng, args.seed * 100_000 + i)
        fit = fit_records(records, bootstrap=args.bootstrap, seed=i)
        a2_held += holds(fit.approach2.a_ci if fit.approach2 else None, a)
        a3_held += holds(fit.approach3.a_ci if fit.approach3 else None, a)
        if fit.verdict.identifiable:
            by[fit.verdict.rests_on] += 1
            held[fit.verdict.rests_on] += holds(fit.verdict.interval, a)
    called = sum(by.values())
    print(f"{args.studies} studies, surface {args.surface}, noise {args.noise}, true a {a:.3f}")
    print(f"identifiable {called} ({called / args.studies:.2f}); its interval holds a in {sum(held.values())} "
          f"({sum(held.values()) / max(called, 1):.2f})")  # fmt: skip
    for rests_on, count in sorted(by.items()):
        print(f"  resting on {rests_on}: {count}, holds a in {held[rests_on]}")
    share2, share3 = a2_held / args.studies, a3_held / args.studies
    print(f"Approach 2's interval holds a in {share2:.2f} of all studies, Approach 3's in {share3:.2f}")


if __name__ == "__main__":
    main()

"""Input checks and robust noise: duplicates, mislabelled budgets, outliers, non-ok rows, each reported."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from prism.isoflop.fit import checks, diagnostics
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.present.fitfiles import fit_csv
from prism.isoflop.records import RunRecord, Surface
from prism.isoflop.synthetic import isoflop_study

SYMMETRIC = Surface(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.35)
BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]
DATA = Path(__file__).resolve().parents[2] / "data" / "scaling"


def _study(noise=0.004, per_budget=6, seed=2):
    return isoflop_study(SYMMETRIC, BUDGETS, per_budget=per_budget, spread=1.0, noise=noise, seed=seed)


def test_exact_duplicates_dropped_with_a_warning_naming_them():
    recs = _study()
    dup = RunRecord("copy-of-" + recs[3].run_id, recs[3].params, recs[3].tokens, recs[3].loss, recs[3].budget)
    fit = fit_records(recs + [dup, dup], method="approach2", bootstrap=0)
    assert [e.kind for e in fit.exclusions] == ["duplicate", "duplicate"]
    assert all(recs[3].run_id in e.reason for e in fit.exclusions)
    assert any("2 exact duplicate" in w and "copy-of-" in w for w in fit.warnings)
    assert fit.diagnostics.points_used == len(recs)
    # the interval is the one without the copies
    clean = fit_records(recs, method="approach2", bootstrap=0)
    assert fit.approach2.a_ci == clean.approach2.a_ci


def test_mislabelled_budget_excluded_by_flops_or_6nd():
    recs = _study()
    wrong = recs[7]  # a 3e18 run labelled 1e19
    moved = RunRecord(wrong.run_id, wrong.params, wrong.tokens, wrong.loss, 1e19)
    recs6 = recs[:7] + [moved] + recs[8:]
    fit = fit_records(recs6, method="approach2", bootstrap=0)
    (e,) = fit.exclusions
    assert e.kind == "budget" and e.run_id == wrong.run_id
    assert "6ND 3e+18 differs from its budget 1e19 by -70% (ratio 0.3;" in e.reason and "> 10% off both" in e.reason
    # with a flops column, flops are compared (here: a run that spent 15% more than its budget)
    over = RunRecord("over", wrong.params, wrong.tokens, wrong.loss, wrong.budget, flops=wrong.budget * 1.15)
    kept, dropped = checks.check_budgets([over], 0.10)
    assert not kept and "flops 3.45e+18 differs from its budget 3e18 by +15%" in dropped[0].reason
    kept, dropped = checks.check_budgets([over], 0.2)  # the tolerance is an option
    assert kept and not dropped


def _counted(recs, ratio):
    """The runs as a user's counter reports them: flops = ratio(N) x budget (the label stays)."""
    return [RunRecord(r.run_id, r.params, r.tokens, r.loss, r.budget, flops=ratio(r.params) * r.budget) for r in recs]


def test_a_flop_count_that_differs_from_the_budget_smoothly_with_size_keeps_its_runs():
    """A counter with attention and embeddings: flops / budget from 0.93 to 1.35 across sizes.
    Every run is kept; a typo and a run filed under the wrong budget are excluded with their ratios."""
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=9, spread=1.6)
    n_lo, n_hi = min(r.params for r in recs), max(r.params for r in recs)

    def ratio(n):  # a U in log N, as a per-layer count of a changing shape gives
        t = np.log10(n / n_lo) / np.log10(n_hi / n_lo)
        return 0.93 + 0.42 * t * t

    counted = _counted(recs, ratio)
    kept, dropped = checks.check_budgets(counted, 0.10)
    assert len(kept) == len(counted) and not dropped
    # the old check (flops within 10% of the budget) would have left out a quarter of them
    assert sum(abs(ratio(r.params) - 1) > 0.10 for r in recs) > len(recs) // 5
    typo = RunRecord("typo", recs[5].params, recs[5].tokens, recs[5].loss, recs[5].budget, flops=10 * counted[5].flops)
    wrong = RunRecord("wrong", recs[12].params, recs[12].tokens, recs[12].loss, 1e20, flops=counted[12].flops)
    kept, dropped = checks.check_budgets(counted + [typo, wrong], 0.10)
    assert len(kept) == len(counted) and {e.run_id for e in dropped} == {"typo", "wrong"}
    assert all("ratio" in e.reason and "at its size" in e.reason for e in dropped)
    # the fit says why it kept runs whose count is 35% off their budget
    fit = fit_records(counted, method="approach2", bootstrap=0)
    assert fit.diagnostics.points_used == len(counted)
    assert any("smoothly with size" in w for w in fit.warnings)
    # without a flops column the same holds of 6ND against the budget label
    relabelled = [RunRecord(r.run_id, r.params, r.tokens, r.loss, r.budget / ratio(r.params)) for r in recs]
    assert len(checks.check_budgets(relabelled, 0.10)[0]) == len(recs)


def test_excluded_runs_listed_in_the_report_with_status_and_reason(tmp_path):
    recs = _study()
    rows = [[r.run_id, r.params, r.tokens, r.loss, r.budget, r.budget, 0.002, "ok", ""] for r in recs]
    rows[4][-1] = "loss spike 5.5 -> 45.6 at step 120"
    rows[0][-2] = "stale"
    rows[1][-2] = "collapsed"
    rows[1][3] = "nan"
    rows.append(list(rows[5]))
    rows[-1][0] = "dup-run"
    rows[9][5] = rows[9][4] * 2.0  # flops twice the budget
    with open(tmp_path / "runs.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run_id", "params", "tokens", "loss", "budget", "flops", "loss_se", "status", "warnings"])
        w.writerows(rows)
    fit = fit_csv(tmp_path / "runs.csv", tmp_path / "f.json", tmp_path / "f.md", bootstrap=0, method="approach2")
    why = {e.run_id: e.kind for e in fit.exclusions}
    assert why == {recs[0].run_id: "status", recs[1].run_id: "status", "dup-run": "duplicate", recs[9].run_id: "budget"}
    md = (tmp_path / "f.md").read_text()
    assert "## Excluded runs" in md
    for run_id in why:
        assert f"| {run_id} |" in md
    assert "status stale" in md and "status collapsed" in md and "exact duplicate of" in md
    assert f"run {recs[4].run_id}: loss spike 5.5 -> 45.6 at step 120" in md  # training's warnings shown
    data = json.loads((tmp_path / "f.json").read_text())
    assert {e["run_id"] for e in data["exclusions"]} == set(why)
    # the runs' own standard error is read and reported
    assert fit.diagnostics.loss_se_median == pytest.approx(0.002)


def test_noise_is_combined_robustly_and_the_fallback_is_relative():
    recs = _study(noise=0.004, per_budget=6)
    quiet = fit_records(recs, method="approach2", bootstrap=0).diagnostics.noise
    assert 0.002 < quiet < 0.008
    # one budget 20x noisier does not set every budget's noise (the pooled std would be ~9x)
    rng = np.random.default_rng(1)
    loud = [
        RunRecord(
            r.run_id, r.params, r.tokens, r.loss + (0.08 * rng.standard_normal() if r.budget == 1e19 else 0), r.budget
        )
        for r in recs
    ]
    fit = fit_records(loud, method="approach2", bootstrap=0, outlier_threshold=0)
    assert fit.diagnostics.noise < 2.5 * quiet
    # 3 runs per budget: no residuals; the assumed noise scales with the loss, never a fixed 0.012
    three = isoflop_study(SYMMETRIC, BUDGETS, per_budget=3, spread=1.0)
    base = fit_records(three, method="approach2", bootstrap=0).diagnostics
    scaled = [RunRecord(r.run_id, r.params, r.tokens, 10 * r.loss, r.budget) for r in three]
    big = fit_records(scaled, method="approach2", bootstrap=0).diagnostics
    assert big.noise == pytest.approx(10 * base.noise) and "1% of the median loss" in base.noise_source
    # with the runs' own loss_se the noise is measured, not assumed
    with_se = [RunRecord(r.run_id, r.params, r.tokens, r.loss, r.budget, loss_se=0.003) for r in three]
    se = fit_records(with_se, method="approach2", bootstrap=0).diagnostics
    assert se.noise == pytest.approx(0.003) and "loss_se" in se.noise_source


def test_an_outlier_budget_does_not_flip_the_verdict():
    """Two runs far off their parabola in one budget: flagged and excluded; the verdict stands."""
    recs = _study(noise=0.004, per_budget=7, seed=3)
    clean = fit_records(recs, method="approach2", bootstrap=50)
    assert clean.verdict.identifiable, clean.verdict.reasons
    hit = [i for i, r in enumerate(recs) if r.budget == 1e19][1:3]
    bad = [
        RunRecord(r.run_id, r.params, r.tokens, r.loss + (0.15 if i in hit else 0.0), r.budget)
        for i, r in enumerate(recs)
    ]
    fit = fit_records(bad, method="approach2", bootstrap=50)
    assert fit.verdict.identifiable, fit.verdict.reasons
    assert sorted(e.run_id for e in fit.exclusions) == sorted(recs[i].run_id for i in hit)
    assert all(e.kind == "outlier" and "from the parabola of the other runs" in e.reason for e in fit.exclusions)
    without = fit_records([r for i, r in enumerate(recs) if i not in hit], method="approach2", bootstrap=50)
    assert fit.approach2.a == pytest.approx(without.approach2.a, abs=1e-12)  # as if the rows were removed
    # without the outlier test the noise is still robust: the same verdict
    kept = fit_records(bad, method="approach2", bootstrap=50, outlier_threshold=0)
    assert kept.diagnostics.noise < 2 * clean.diagnostics.noise


def test_published_chinchilla_with_its_outlying_runs_is_identifiable():
    """Epoch's extraction of Chinchilla's IsoFLOP points, all 123 with the QC outliers kept:
    one budget's residual std is ~15x the others' (pooled noise 0.085); the robust noise is
    0.012, as without those rows, and the verdict is the one the cleaned data give."""
    with (DATA / "isoflops_public.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["experiment"] == "epochai_chinchilla__massivetext__chinchilla"]
    recs = [
        RunRecord(f"row{i}", float(r["params"]), float(r["tokens"]), float(r["loss"]), float(r["budget"]))
        for i, r in enumerate(rows)
    ]
    fit = fit_records(recs, method="approach2", bootstrap=100)
    fitted = [f for f in fit.approach2.per_budget if f.coef is not None]
    pooled = np.sqrt(sum(f.residual_ss for f in fitted) / sum(f.n_points - 3 for f in fitted))
    per = [diagnostics.budget_noise(f)[0] for f in fitted]
    # pooled over budgets the noise would still be ~4x (7x before the one outlier went out)
    assert max(per) > 5 * np.median(per) and pooled > 3 * fit.diagnostics.noise
    assert fit.diagnostics.noise == pytest.approx(0.0118, abs=0.001)
    assert fit.verdict.identifiable, fit.verdict.reasons
    assert sum(e.kind == "outlier" for e in fit.exclusions) <= 3
    # Hoffmann et al.'s Approach 2: a = 0.49 (10th-90th percentile 0.462-0.534)
    lo, hi = fit.approach2.a_ci
    assert lo < 0.49 < hi
    cleaned = [r for r, row in zip(recs, rows) if row["outlier"] == "False"]
    assert fit_records(cleaned, method="approach2", bootstrap=100).verdict.identifiable


def test_shared_eval_error_is_no_noise_floor():
    """loss_se measures the held-out sample's error, common to every run: residuals decide the noise."""
    recs = _study(noise=0.002, per_budget=6)
    plain = fit_records(recs, method="approach2", bootstrap=0).diagnostics
    # a loss_se 5x the residual scatter (one shared eval set) leaves the measured noise as it was
    shared = [RunRecord(r.run_id, r.params, r.tokens, r.loss, r.budget, loss_se=0.01) for r in recs]
    diag = fit_records(shared, method="approach2", bootstrap=0).diagnostics
    assert diag.noise == pytest.approx(plain.noise) and diag.noise < 0.005
    assert "no floor" in diag.noise_source and diag.loss_se_median == pytest.approx(0.01)

"""The fit stage end to end: CSV in, JSON + Markdown out, diagnostics that say what is wrong."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from prism.cli import main
from prism.core.errors import PrismError
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.fit.result import FitResult
from prism.isoflop.present.fitfiles import fit_csv
from prism.isoflop.records import RunRecord, Surface
from prism.isoflop.synthetic import isoflop_study, write_csv

SYMMETRIC = Surface(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.35)
ASYMMETRIC = Surface(E=1.8, A=480.0, B=400.0, alpha=0.46, beta=0.15)
BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]
DATA = Path(__file__).resolve().parents[2] / "data" / "scaling"


def _fit_cli(tmp_path, csv_path, *extra):
    out_json, out_md = tmp_path / "fit.json", tmp_path / "fit.md"
    rc = main(
        ["isoflop", "fit", "--csv", str(csv_path), "--output-json", str(out_json), "--output-md", str(out_md), *extra]
    )
    return rc, out_json, out_md


def test_json_has_the_report_keys_and_markdown_a_table(tmp_path):
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.0, noise=0.005, seed=1)
    write_csv(recs, tmp_path / "runs.csv")
    rc, out_json, out_md = _fit_cli(tmp_path, tmp_path / "runs.csv", "--bootstrap", "20", "--seed", "3")
    assert rc == 0
    fit = json.loads(out_json.read_text())
    for key in ("a", "a_ci", "a_ci_regression", "a_ci_bootstrap", "a_loo", "b", "per_budget"):
        assert key in fit["approach2"]
    for row in fit["approach2"]["per_budget"]:
        assert {"budget", "n_opt", "d_opt", "loss_min", "accepted", "reason"} <= set(row)
    for key in ("E", "A", "B", "alpha", "beta", "a", "b", "a_ci", "converged"):
        assert key in fit["approach3"]
    assert fit["approach3"]["converged"] is True
    assert len(fit["approach2"]["a_ci"]) == 2 and len(fit["approach3"]["a_ci"]) == 2
    assert fit["diagnostics"]["identifiable"] is True and fit["diagnostics"]["reasons"]
    assert fit["verdict"]["identifiable"] is True and fit["verdict"]["interval_source"]
    assert set(fit["diagnostics"]["n_spread_decades"]) == {"1e18", "3e18", "1e19", "3e19", "1e20"}
    assert 0.001 < fit["diagnostics"]["noise"] < 0.02
    md = out_md.read_text()
    assert "| budget C |" in md and "identifiable" in md and "delta 0.001" in md
    assert not list(tmp_path.glob(".*tmp"))  # nothing half-written left behind


def test_asymmetric_surface_approach3_exact_and_approach2_bias_reported():
    """alpha 0.46, beta 0.15, no noise: Approach 3 recovers a; the JSON names Approach 2's bias.

    The grid follows a prior a = 0.5 through the true optimum at 1e19 (as a real plan
    would): off-centre by an amount that grows with C, where the parabola's vertex
    error (constant for a centred grid on a power-law surface) becomes a bias in a.
    """
    import math

    drift = lambda c: (0.5 - ASYMMETRIC.a) * math.log10(c / 1e19)  # noqa: E731
    recs = isoflop_study(ASYMMETRIC, BUDGETS, per_budget=7, spread=1.6, offset=drift)
    fit = fit_records(recs, method="both", bootstrap=0)
    assert fit.approach3.a == pytest.approx(ASYMMETRIC.a, rel=0.01)
    assert fit.approach3.alpha == pytest.approx(ASYMMETRIC.alpha, rel=0.01)
    assert fit.approach3.beta == pytest.approx(ASYMMETRIC.beta, rel=0.01)
    agree = fit.diagnostics.approach_agreement
    bias = fit.approach2.a - ASYMMETRIC.a
    # Approach 2 is biased on this surface even without noise (0.0018 with the minima read off
    # cubics where the curves lean, the quartic term's share; more with parabolas)
    assert abs(bias) > 0.001
    assert agree["difference"] == pytest.approx(bias, abs=0.002)
    # and the report explains the difference as the method's bias on this very grid
    assert agree["approach2_bias_expected"] == pytest.approx(agree["difference"], abs=1e-3)
    assert "bias" in agree["note"]


def test_symmetric_surface_approaches_agree():
    fit = fit_records(isoflop_study(SYMMETRIC, BUDGETS, per_budget=7, spread=1.0), bootstrap=0)
    assert abs(fit.diagnostics.approach_agreement["difference"]) < 2e-3


def test_small_n_spread_with_noise_is_not_identifiable():
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=0.08, noise=0.012, seed=4)
    fit = fit_records(recs, method="approach2", bootstrap=50)
    assert fit.verdict.identifiable is False
    assert any("N spread" in r for r in fit.verdict.reasons), fit.verdict.reasons
    assert all(b.n_spread_decades < 0.1 for b in fit.diagnostics.budgets)


def test_edge_minimum_budget_rejected_in_json(tmp_path):
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.0)
    recs += isoflop_study(SYMMETRIC, [3e20], per_budget=4, spread=0.5, offset=0.9)
    write_csv(recs, tmp_path / "runs.csv")
    rc, out_json, _ = _fit_cli(tmp_path, tmp_path / "runs.csv", "--bootstrap", "0", "--method", "approach2")
    assert rc == 0
    per = {b["budget"]: b for b in json.loads(out_json.read_text())["approach2"]["per_budget"]}
    assert per[3e20]["accepted"] is False and "outside the sampled range" in per[3e20]["reason"]
    assert all(per[c]["accepted"] for c in BUDGETS)


def _write_rows(path, header, rows):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def test_missing_column_names_it(tmp_path, capsys):
    _write_rows(tmp_path / "r.csv", ["params", "loss", "budget"], [[1e8, 2.0, 1e18]])
    rc, out_json, _ = _fit_cli(tmp_path, tmp_path / "r.csv")
    err = capsys.readouterr().err
    assert rc == 2 and "missing column(s) tokens" in err and "Traceback" not in err
    assert not out_json.exists()


def test_text_in_loss_names_column_and_line(tmp_path):
    rows = [[1e8 * (i + 1), 1e10, 2.0 + 0.01 * i, 1e19] for i in range(6)]
    rows[3][2] = "diverged"
    _write_rows(tmp_path / "r.csv", ["params", "tokens", "loss", "budget"], rows)
    with pytest.raises(PrismError, match=r"column 'loss' at line\(s\) 5"):
        fit_csv(tmp_path / "r.csv", tmp_path / "f.json", tmp_path / "f.md")


def test_nan_rows_excluded_and_counted(tmp_path):
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.0)
    write_csv(recs, tmp_path / "r.csv")
    lines = (tmp_path / "r.csv").read_text().splitlines()
    parts = lines[4].split(",")
    parts[3] = "nan"
    lines[4] = ",".join(parts)
    parts = lines[7].split(",")
    parts[3] = ""
    lines[7] = ",".join(parts)
    (tmp_path / "r.csv").write_text("\n".join(lines) + "\n")
    fit = fit_csv(tmp_path / "r.csv", tmp_path / "f.json", tmp_path / "f.md", bootstrap=0, method="approach2")
    assert fit.input["excluded_nan"] == {"count": 2, "lines": [5, 8]}
    assert [e.kind for e in fit.exclusions] == ["nan", "nan"]
    assert fit.input["n_used"] == len(recs) - 2 == fit.diagnostics.points_used


def test_status_other_than_ok_is_excluded(tmp_path):
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.0)
    write_csv(recs, tmp_path / "r.csv", status={recs[0].run_id: "collapsed", recs[1].run_id: "incomplete"})
    fit = fit_csv(tmp_path / "r.csv", tmp_path / "f.json", tmp_path / "f.md", bootstrap=0, method="approach2")
    assert fit.input["excluded_status"]["collapsed"]["count"] == 1
    assert {(e.run_id, e.reason) for e in fit.exclusions} == {
        (recs[0].run_id, "status collapsed"),
        (recs[1].run_id, "status incomplete"),
    }
    md = (tmp_path / "f.md").read_text()
    assert f"| {recs[0].run_id} |" in md and "status collapsed" in md


def test_filters_need_their_column_and_filter_rows(tmp_path):
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.0)
    write_csv(recs, tmp_path / "r.csv")
    with pytest.raises(PrismError, match="no 'family' column"):
        fit_csv(tmp_path / "r.csv", tmp_path / "f.json", tmp_path / "f.md", family="text_image")
    rows = [
        [r.params, r.tokens, r.loss, r.budget, "text_image" if i % 2 else "text_ts", "e2e"] for i, r in enumerate(recs)
    ]
    _write_rows(tmp_path / "g.csv", ["params", "tokens", "loss", "flops", "family", "regime"], rows)
    fit = fit_csv(
        tmp_path / "g.csv",
        tmp_path / "f.json",
        tmp_path / "f.md",
        family="text_ts",
        regime="e2e",
        bootstrap=0,
        method="approach2",
    )
    assert fit.input["filtered_out"] == len(recs) // 2
    assert fit.input["budget_source"] == "flops"


def test_nothing_fittable_exits_nonzero_and_writes_nothing(tmp_path, capsys):
    recs = isoflop_study(SYMMETRIC, [1e19], per_budget=3, spread=1.0)
    write_csv(recs, tmp_path / "r.csv")
    rc, out_json, out_md = _fit_cli(tmp_path, tmp_path / "r.csv", "--method", "approach2", "--bootstrap", "0")
    assert rc == 2 and "nothing could be fitted" in capsys.readouterr().err
    assert not out_json.exists() and not out_md.exists()
    _write_rows(tmp_path / "e.csv", ["params", "tokens", "loss", "budget", "status"], [[1e8, 1e9, 2.0, 1e18, "error"]])
    rc, _, _ = _fit_cli(tmp_path, tmp_path / "e.csv")
    assert rc == 2 and "nothing to fit" in capsys.readouterr().err


def test_isoflops_public_chinchilla_approach2(tmp_path):
    """The published Chinchilla IsoFLOP points (Epoch extraction, 9 budgets), QC outliers excluded."""
    with (DATA / "isoflops_public.csv").open() as fh:
        rows = [
            r
            for r in csv.DictReader(fh)
            if r["experiment"] == "epochai_chinchilla__massivetext__chinchilla" and r["outlier"] == "False"
        ]
    assert len(rows) > 60
    _write_rows(
        tmp_path / "c.csv",
        ["params", "tokens", "loss", "budget"],
        [[r["params"], r["tokens"], r["loss"], r["budget"]] for r in rows],
    )
    fit = fit_csv(tmp_path / "c.csv", tmp_path / "f.json", tmp_path / "f.md", method="approach2", bootstrap=200)
    # Hoffmann et al.'s Approach 2: a = 0.49 (10th-90th percentile 0.462-0.534)
    assert 0.45 < fit.approach2.a < 0.56
    lo, hi = fit.approach2.a_ci
    assert lo < 0.534 and hi > 0.462
    assert fit.verdict.identifiable is True


def test_two_budgets_of_three_runs_are_never_identifiable_but_get_an_honest_width():
    """Parabolas through 3 points fit them exactly (no measured noise) and 2 minima fit the line
    exactly (no scatter): the interval comes from the assumed noise propagated to each minimum."""
    widths = []
    for spread in (0.6, 1.2):
        fit = fit_records(isoflop_study(SYMMETRIC, [1e18, 1e19], per_budget=3, spread=spread), bootstrap=200)
        a2 = fit.approach2
        lo, hi = a2.a_ci_bootstrap
        assert hi - lo < 1e-6  # the degenerate bootstrap over runs is not what the verdict uses
        assert "an assumed noise; 2 budgets leave the line no scatter" in a2.interval_method
        assert "assumed: 1% of the median loss" in fit.diagnostics.noise_source
        assert fit.verdict.identifiable is False
        assert any("at least 3" in r for r in fit.verdict.reasons)
        widths.append(a2.a_ci[1] - a2.a_ci[0])
    # honest widths (the assumed noise is 1% of the loss, about 0.035 here), narrower for the wider grid
    assert 0.02 < widths[1] < widths[0]


def test_runs_with_residual_degrees_of_freedom_pool_their_noise_into_the_interval():
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.2, noise=0.003, seed=1)
    fit = fit_records(recs, bootstrap=100)
    assert fit.diagnostics.noise_dof >= 3
    assert "regression over the 5 per-budget minima" in fit.approach2.interval_method
    assert "noise from its parabola" in fit.approach2.interval_method or "larger than" in fit.approach2.interval_method
    assert "Approach 3: profile likelihood of a" in fit.verdict.interval_source


def test_json_round_trip_and_old_shape_readable(tmp_path):
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.0, noise=0.005, seed=1)
    fit = fit_records(recs, bootstrap=20)
    data = json.loads(json.dumps(fit.to_json()))
    again = FitResult.from_json(data)
    assert again.to_json() == data
    assert again.approach2.a == fit.approach2.a and again.verdict == fit.verdict
    # readers of the first shape still find their keys
    assert data["diagnostics"]["identifiable"] is fit.verdict.identifiable
    assert data["approach3"]["converged"] is True and data["approach2"]["a_ci"]
    old = {
        "method": "both",
        "approach2": {"a": 0.5, "k": 0.1, "a_ci": [0.4, 0.6], "per_budget": []},
        "approach3": {"converged": False, "reason": "x"},
        "diagnostics": {"identifiable": False, "reasons": ["r"], "noise": 0.01, "a_interval": [0.4, 0.6]},
    }
    parsed = FitResult.from_json(old)
    assert parsed.verdict.reasons == ["r"] and parsed.verdict.interval == (0.4, 0.6)
    assert parsed.approach2.a == 0.5 and parsed.approach3.fitted is False


def test_agreeing_approaches_rest_on_the_first_that_decides_alone_and_disagreeing_ones_span_both():
    from prism.isoflop.fit import diagnostics, methods
    from prism.isoflop.fit.method import MethodFit

    # each estimate inside the other's interval: Approach 2's (the fewer assumptions) where it determines a alone,
    # though Approach 3's is narrower; Approach 3's narrower one only where Approach 2's is too wide to
    out = diagnostics.combine(0.51, (0.50, 0.52), 0.515, (0.48, 0.56))
    assert out["agree"] and out["rests_on"] == "approach2" and out["interval"] == (0.50, 0.52)
    out = diagnostics.combine(0.50, (0.44, 0.56), 0.51, (0.49, 0.53))
    assert out["rests_on"] == "approach2" and out["interval"] == (0.44, 0.56) and "alone" in out["why"]
    out = diagnostics.combine(0.50, (0.40, 0.60), 0.51, (0.50, 0.52))
    assert out["rests_on"] == "approach3" and out["why"] == "the first in the fit's order that determines a alone"
    # neither determines a alone: the narrower, said so (the verdict is then NOT identifiable on its width)
    out = diagnostics.combine(0.50, (0.30, 0.70), 0.51, (0.40, 0.58))
    assert out["rests_on"] == "approach3" and out["why"] == "the narrower: none determines a alone"
    # Approach 2's estimate outside Approach 3's narrow interval: no correction explains it away
    out = diagnostics.combine(0.369, (0.296, 0.442), 0.296, (0.280, 0.330))
    assert not out["agree"] and out["interval"] == (0.280, 0.442) and "0.369 is outside" in out["text"]
    # end to end: a narrow-grid study where both agree rests on one of them and says which and why
    fit = fit_records(isoflop_study(SYMMETRIC, BUDGETS, per_budget=7, spread=1.0, noise=0.005, seed=2), bootstrap=100)
    a2, a3 = fit.approach2.a_ci, fit.approach3.a_ci
    assert fit.verdict.rests_on in ("approach2", "approach3")
    assert fit.verdict.interval[1] - fit.verdict.interval[0] <= max(a2[1] - a2[0], a3[1] - a3[0])
    source = fit.verdict.interval_source
    assert ("determines a alone" in source or "the narrower" in source) and "holds the other's estimate" in source
    assert fit.a() == (fit.approach2.a if fit.verdict.rests_on == "approach2" else fit.approach3.a)
    assert fit.verdict.interval[0] <= min(fit.approach2.a, fit.approach3.a)
    assert fit.verdict.interval[1] >= max(fit.approach2.a, fit.approach3.a)

    def judged(a2_ci, a2_value):
        a2 = MethodFit("approach2", a2_value, a2_ci, "x", summary=fit.approach2)
        a3 = MethodFit("approach3", fit.approach3.a, fit.approach3.a_ci, summary=fit.approach3)
        fits = [(methods.get("approach2"), a2), (methods.get("approach3"), a3)]
        return diagnostics.verdict("both", fit.approach2.per_budget, fit.diagnostics.noise, fits, n_runs=35)

    # a disagreement reaches the verdict's reasons, and the interval spans both
    bad = judged((0.30, 0.32), 0.31)
    assert bad.rests_on == "envelope" and bad.interval == (0.30, fit.approach3.a_ci[1])
    assert any("disagree" in r and "spans both" in r for r in bad.reasons)
    # too wide a span is NOT identifiable, for that reason first
    worse = judged((0.10, 0.12), 0.11)
    assert not worse.identifiable and worse.reasons[0].startswith("the approaches disagree by")


def test_a_vanished_budget_and_an_empty_fit_name_their_reasons(tmp_path, capsys):
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.0, noise=0.005, seed=1)
    # every run of 4.373448e17 labelled with a budget its FLOPs are not
    wrong = [
        RunRecord(f"w{i}", r.params, r.tokens, r.loss, 4.373448e17)
        for i, r in enumerate(isoflop_study(SYMMETRIC, [8.746896e17], per_budget=5, spread=1.0))
    ]
    fit = fit_records(recs + wrong, method="approach2", bootstrap=0)
    (gone,) = [r for r in fit.verdict.reasons if "vanished" in r]
    assert gone.startswith("budget 4.37e17 vanished: all 5 of its runs were excluded (5 by budget, e.g. w0: ")
    with pytest.raises(PrismError, match=r"every one of 5 runs was excluded: 5 by budget, e\.g\. w0: 6ND"):
        fit_records(wrong, bootstrap=0)


def test_approach2_report_describes_no_approach3_and_noise_free_data_no_noise():
    from prism.isoflop.present.report import fit_markdown
    from prism.isoflop.records import CHINCHILLA_EPOCH
    from prism.isoflop.synthetic import undertrained_study

    md = fit_markdown(
        fit_records(isoflop_study(SYMMETRIC, BUDGETS, per_budget=7, spread=1.0), method="approach2", bootstrap=0)
    )
    assert "Approach 3" not in md and "Huber" not in md
    assert "## Approach 2: lack of fit and noise per budget" in md
    # noise-free wide grids with a tail: the misfit (0.0015 through every size) is not called noise
    fit = fit_records(
        undertrained_study(CHINCHILLA_EPOCH, [1e18, 3e18, 1e19, 3e19, 1e20, 3e20]), method="approach2", bootstrap=0
    )
    md = fit_markdown(fit)
    assert fit.diagnostics.noise < 3e-4 and "Noise: 0.1" not in md
    small = fit.approach2.per_budget[0]
    assert small.windowed and f"ok, on {small.window_sizes} of its 13 sizes (lack of fit beyond them)" in md


def test_too_few_budgets_is_one_line_naming_the_fix():
    from prism.isoflop.fit.fit import too_few_budgets

    assert too_few_budgets("text_image", ["1e12", "3e12"]) is None
    line = too_few_budgets("text_image", ["1e12"])
    assert line.startswith("config budgets: the plan of text_image has 1 budget(s) (1e12); the fit needs at least 2")
    assert "--config 'budgets=[...]'" in line and "collect_text_image" in line and "\n" not in line

"""The end-of-study summary and the training-curves figure, on hand-made study files."""

from __future__ import annotations

import csv
import json

from prism.cli import main
from prism.isoflop.present.summary import markdown_html, summarize


def real_fit(tmp_path) -> dict:
    """A fit JSON as `prism isoflop fit` writes it: a noisy synthetic study on Chinchilla's surface."""
    from prism.isoflop.fit.fit import FitOptions
    from prism.isoflop.present.fitfiles import fit_csv
    from prism.isoflop.records import CHINCHILLA_EPOCH
    from prism.isoflop.synthetic import isoflop_study, write_csv

    records = isoflop_study(CHINCHILLA_EPOCH, [1e18, 1e19, 1e20], per_budget=5, noise=0.005, seed=1)
    write_csv(records, tmp_path / "synthetic.csv")
    fit_csv(tmp_path / "synthetic.csv", tmp_path / "fit.json", tmp_path / "fit.md", options=FitOptions(bootstrap=50))
    return json.loads((tmp_path / "fit.json").read_text())


def make_study(tmp_path):
    family = tmp_path / "text_image"
    (family / "fit").mkdir(parents=True)
    (family / "fit" / "e2e.json").write_text(json.dumps(real_fit(tmp_path)))
    (family / "fit" / "e2e.md").write_text("# Fit\n\nVerdict **NOT**.\n\n| a | b |\n|---|---|\n| 1 | `2` |\n\n- x\n")
    rows = []
    for i, (rid, status, note) in enumerate(
        [
            ("30k-BASE-e2e-C1e12", "ok", ""),
            ("60k-BASE-e2e-C1e12", "collapsed", "loss is nan"),
            ("60k-BASE-e2e-C9e12", "stale", "not in the plan"),
        ]
    ):
        run = family / "runs" / rid
        run.mkdir(parents=True)
        (run / "eval.jsonl").write_text(
            "\n".join(json.dumps({"flops": f, "loss": 5 - i - f / 1e12}) for f in (1e10, 1e11, 1e12)) + "\nbroken\n"
        )
        rows.append(
            {
                "run_id": rid,
                "family": "text_image",
                "backbone": rid.split("-")[0],
                "variant": "BASE",
                "regime": "e2e",
                "budget": 1e12 if "C1e12" in rid else 9e12,
                "params": 3e4 * (i + 1),
                "status": status,
                "note": note,
                "warnings": "",
                "wall_s": "60",
                "est_wall_s": "30",
                "run_dir": str(run),
            }
        )
    with (family / "runs.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return family


def test_summary_names_exponents_verdict_runs_left_out_and_figures(tmp_path):
    family = make_study(tmp_path)
    (family / "plots" / "e2e").mkdir(parents=True)
    (family / "plots" / "e2e" / "isoflop_curves.png").write_bytes(b"png")
    text = summarize([family])
    fit = json.loads((family / "fit" / "e2e.json").read_text())
    a2 = fit["approach2"]
    assert f"Approach 2: a = {a2['a']:.3f} [{a2['a_ci'][0]:.3f}, {a2['a_ci'][1]:.3f}]" in text
    assert f"Approach 3: a = {fit['approach3']['a']:.3f}" in text
    verdict = "identifiable" if fit["verdict"]["identifiable"] else "NOT identifiable"
    assert f"verdict: {verdict}" in text and "interval of a used by the verdict: [" in text
    assert "budgets accepted: 1e18, 1e19, 1e20" in text
    assert "left out 60k-BASE-e2e-C1e12 (collapsed): loss is nan" in text
    assert "left out 60k-BASE-e2e-C9e12 (stale): not in the plan" in text
    assert "their steps estimated 0.5 min, the runs took 1.0 min" in text
    assert "1 stale); computed in fp32" in text  # runs.csv from before the precision column: fp32, all there was
    assert f"figures: {family}/plots/e2e/ (isoflop_curves.png)" in text
    assert "no fit yet" in summarize([tmp_path / "nothing"])


def test_summary_says_what_precision_the_runs_computed_in(tmp_path):
    family = make_study(tmp_path)
    with (family / "runs.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row, precision in zip(rows, ["bf16", "fp32", "bf16"]):
        row["precision"] = precision
    with (family / "runs.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    text = summarize([family])
    mixed = {r["precision"] for r in rows if r["status"] == "ok"}
    assert f"computed in {' and '.join(sorted(mixed))}" in text


def test_summary_html_renders_the_fit_tables(tmp_path, capsys):
    family = make_study(tmp_path)
    out = tmp_path / "fit.html"
    assert main(["isoflop", "summary", str(family), "--html", str(out)]) == 0
    page = out.read_text()
    assert "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td><code>2</code></td></tr></table>" in page
    assert "<b>NOT</b>" in page and "<li>x</li>" in page and "Study summary" in page
    assert markdown_html("## T\n\ntext") == "<h2>T</h2>\n<p>text</p>"


def test_training_curves_figure(tmp_path):
    from prism.isoflop.present.curves import plot_training_curves, read_curve

    family = make_study(tmp_path)
    flops, losses = read_curve(family / "runs" / "30k-BASE-e2e-C1e12")
    assert flops == [1e10, 1e11, 1e12] and len(losses) == 3  # the broken line is skipped
    path = plot_training_curves(
        family / "runs.csv", family / "plots", family / "fit" / "e2e.json", "text_image", "e2e", dpi=50
    )
    assert path.name == "training_curves.png" and path.read_bytes()[:4] == b"\x89PNG"
    assert not list((family / "plots").glob("*.tmp*"))


def test_summary_gives_the_studys_training_flops_per_second_against_the_peak(tmp_path):
    family = make_study(tmp_path)
    record = {
        "started_at": 100.0,
        "ended_at": 160.0,
        "wall_s": 60.0,
        "startup_s": 6.0,
        "step_s": 48.0,
        "eval_s": 6.0,
        "trained_flops": 3e12,
        "peak_flops": 1e11,
    }
    (family / "runs" / "30k-BASE-e2e-C1e12" / "metrics.json").write_text(json.dumps({"time": record}))
    segment = family / "stable" / "30k-BASE-e2e-T0" / "to-500"
    segment.mkdir(parents=True)
    (segment / "metrics.json").write_text(json.dumps({"time": {**record, "started_at": 130.0, "ended_at": 190.0}}))
    text = summarize([family])
    # 6e12 FLOPs over 90 s, two jobs at once against 2 x 100 GFLOP/s; 120 of 180 core-seconds busy.
    assert (
        "6e+12 FLOPs in 1.5 min of wall time over 2 jobs (2 at once): 66.7 GFLOP/s end to end, 33.3% of the peak 200"
        in text
    )
    assert "cores busy 67%" in text and "startup 10%, step 80%, eval 10%" in text


def test_summary_without_time_records_says_so(tmp_path):
    assert "no job recorded its time" in summarize([make_study(tmp_path)])


def test_summary_of_a_folder_without_a_fit_exits_non_zero(tmp_path, capsys):
    """A script that asks for the answer must not take "no fit yet" for one."""
    family = make_study(tmp_path)
    (tmp_path / "unfitted").mkdir()
    assert main(["isoflop", "summary", str(family)]) == 0
    capsys.readouterr()
    assert main(["isoflop", "summary", str(family), str(tmp_path / "unfitted"), str(tmp_path / "nothing")]) == 1
    printed = capsys.readouterr()
    assert "Approach 2: a = " in printed.out  # the fitted folder is still summarised
    errors = printed.err.strip().splitlines()
    assert len(errors) == 2
    assert errors[0].startswith(f"prism isoflop summary: {tmp_path / 'unfitted'}: no fit/*.json in it;")
    assert errors[1].startswith(f"prism isoflop summary: {tmp_path / 'nothing'}: no such folder;")


def test_answer_fragment_holds_the_verdict_exponents_and_figures(tmp_path):
    from prism.isoflop.present.summary import answer_html

    family = make_study(tmp_path)
    plots = family / "plots" / "e2e"
    plots.mkdir(parents=True)
    (plots / "isoflop_curves.png").write_bytes(b"\x89PNG one")
    fit = json.loads((family / "fit" / "e2e.json").read_text())
    text = answer_html(family / "fit" / "e2e.json", plots)
    verdict = "identifiable" if fit["verdict"]["identifiable"] else "NOT identifiable"
    assert "The answer (text_image, e2e)" in text and f"<b>verdict: {verdict}</b>" in text
    a2 = fit["approach2"]
    assert f"Approach 2: a = {a2['a']:.3f} [{a2['a_ci'][0]:.3f}, {a2['a_ci'][1]:.3f}]" in text
    assert "alt='isoflop_curves.png' src='data:image/png;base64,iVBORyBvbmU='" in text
    assert "scaling_laws.png" not in text  # a figure not drawn is left out, not a broken image


def test_summary_says_how_a_moves_and_when_the_approaches_disagree(tmp_path):
    import dataclasses

    from prism.isoflop.fit.result import FitResult, Move
    from prism.isoflop.present.summary import verdict_robustness_lines

    fit = FitResult.from_json(real_fit(tmp_path))  # the moves survive the JSON
    (line,) = verdict_robustness_lines(fit)
    assert line.startswith("  a under other choices: budget left out ") and "every size" in line
    assert "edges dropped" in line and "least squares" in line
    moves = [dataclasses.replace(m, outside=0.0) for m in fit.sensitivity]
    moves[0] = dataclasses.replace(moves[0], a=0.9, outside=0.3)
    disagree = "Approach 2 and Approach 3 disagree: difference +0.100; ...: the interval spans both"
    verdict = dataclasses.replace(fit.verdict, reasons=[*fit.verdict.reasons, disagree])
    lines = verdict_robustness_lines(dataclasses.replace(fit, sensitivity=moves, verdict=verdict))
    assert lines[0] == f"  {disagree}"
    assert lines[1].endswith(f"1 of {len(moves)} outside the verdict's interval (largest 0.300)")
    assert not verdict_robustness_lines(dataclasses.replace(fit, sensitivity=[Move("huber", "x", "approach3", None)]))
    # a silenced approach's moves are shown but not counted
    a3_out = [*moves, Move("huber", "least squares", "approach3", 0.95, outside=0.4)]
    only_a2 = dataclasses.replace(verdict, heard=["approach2"])
    lines = verdict_robustness_lines(dataclasses.replace(fit, sensitivity=a3_out, verdict=only_a2))
    counted = sum(m.approach == "approach2" for m in moves)
    assert lines[1].endswith("(A3's moves not counted: it misfits)"), lines[1]
    assert "outside the verdict's interval" in lines[1] and f"of {counted} outside" in lines[1]


def test_summary_names_the_sizes_the_plan_dropped_from_a_budget(tmp_path):
    import yaml

    family = make_study(tmp_path)
    dropped = [
        {"run_id": "30k-BASE-e2e-C1e12", "budget": 1e12, "backbone": "30k", "variant": "BASE", "params": 3e4,
         "reason": "20 steps x batch 64 spend 1.01e+12 FLOPs, +1.4% off the budget"},
        {"run_id": "3m-BASE-e2e-C1e12", "budget": 1e12, "backbone": "3m", "variant": "BASE", "params": 3e6,
         "reason": "N=3e+06 is +2.00 decades from N_opt=3e+04 (window +-1.0)"},
    ]  # fmt: skip
    (family / "plan.yaml").write_text(yaml.safe_dump({"family": "text_image", "dropped": dropped}))
    text = summarize([family])
    assert "plan text_image: budget 1e12 drops 30k-BASE (20 steps x batch 64 spend 1.01e+12 FLOPs, +1.4% off" in text
    assert "3m-BASE" not in text  # outside the budget's window: the grid's design
    (family / "plan.yaml").unlink()
    assert "drops" not in summarize([family])


def test_the_verdict_says_when_the_learning_rate_dominates_as_interval(tmp_path):
    """A fitted lr rule whose own uncertainty moves a further than the seeds' interval: the verdict line, not
    only the lr lines below it, says so; a rule that moves a little leaves the verdict as it was."""
    from dataclasses import replace

    import yaml

    from prism.isoflop.fit.fit import FitOptions
    from prism.isoflop.present.fitfiles import fit_csv
    from prism.isoflop.records import CHINCHILLA_EPOCH
    from prism.isoflop.synthetic import isoflop_study, write_csv
    from prism.train.lr_rule import LrRule

    family = tmp_path / "text_image"
    (family / "fit").mkdir(parents=True)
    records = isoflop_study(CHINCHILLA_EPOCH, [1e18, 1e19, 1e20], per_budget=7, noise=0.002, seed=1)
    names = ["n11e3", "n2e4", "n32e3", "n45e3", "n63e3", "n1e5", "n2e5"]  # ascending width: 16 ... 80
    ns = sorted({r.params for r in records})
    records = [replace(r, run_id=f"{names[ns.index(r.params) % 7]}-BASE-e2e-C{r.budget:g}") for r in records]
    write_csv(records, family / "runs.csv")

    def verdict(rule: LrRule) -> tuple[str, str]:
        (family / "plan.yaml").write_text(yaml.safe_dump({"lr_rule": rule.to_json()}))
        fit_csv(family / "runs.csv", family / "fit" / "e2e.json", family / "fit" / "e2e.md",
                options=FitOptions(bootstrap=50))  # fmt: skip
        line = next(x for x in summarize([family]).splitlines() if x.strip().startswith("verdict:"))
        md = next(x for x in (family / "fit" / "e2e.md").read_text().splitlines() if x.startswith("Verdict:"))
        return line, md

    # p uncertain (the rule surest at d_model 128) and the curve steep at the smallest width: the small sizes'
    # losses rise more than the others', a moves by 0.004 against the seeds' half-width of about 0.002.
    wide = LrRule("fitted", cov=((0.0, 0.0), (0.0, 0.01)),
                  curves=[{"d_model": 16, "curvature": 0.5}, {"d_model": 80, "curvature": 0.0}])  # fmt: skip
    line, md = verdict(wide)
    assert "the learning rate DOMINATES a's interval" in line and "DOMINATES" in md
    # The same penalty at every size leaves a where it is: the noise dominates, the verdict says nothing more.
    flat = LrRule("fitted", cov=((0.01, 0.0), (0.0, 0.0)),
                  curves=[{"d_model": 16, "curvature": 0.05}, {"d_model": 80, "curvature": 0.05}])  # fmt: skip
    line, md = verdict(flat)
    assert "learning rate" not in line and "DOMINATES" not in md

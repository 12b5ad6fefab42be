"""A study whose sizes come from the shape rule: the dry run lists every size's calibration."""

from __future__ import annotations

from prism.isoflop.design.ladder import union
from prism.isoflop.design.plan import plan_runs, rule_sizes
from prism.isoflop.design.planoptions import PlanOptions

from .wfhelpers import TINY_CONFIG, job_counts, make_workdir, rule_outputs, snakemake, train_run_ids


def test_dry_run_lists_the_calibrations_of_the_rule_sizes(tmp_path):
    plan = {**TINY_CONFIG["plan"], "window": 0.4, "prior_k": 0.0258, "prior_a": 0.53, "sizes_per_budget": 5}
    workdir = make_workdir(tmp_path / "w", {"backbones": [], "plan": plan, "budgets": ["1e12", "2e12"]})
    expected = union(rule_sizes("text_image", [1e12, 2e12], PlanOptions(**plan), variants=["BASE"]))
    assert len(expected) >= 5
    out = snakemake(workdir, "-n", "fit_text_image").stdout
    assert job_counts(out)["calibrate"] == len(expected)
    listed = sorted(o.split("__")[1] for o in rule_outputs(out, "calibrate"))
    assert listed == sorted(expected)
    # Nothing is calibrated, nor the data built: the plan is counted in-process, and every training job listed.
    planned = plan_runs("text_image", [1e12, 2e12], None, PlanOptions(**plan), variants=["BASE"]).runs
    assert "<TBD>" not in out and sorted(train_run_ids(out)) == sorted(r.run_id for r in planned)
    assert "the data is not built yet, so no run's epochs are checked" in out

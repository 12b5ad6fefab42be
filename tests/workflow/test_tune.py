"""The tuning stage through the real workflow: a peak-lr sweep as training jobs before the plan, the rule
fitted to it, and a plan whose runs use that rule (each row records its lr)."""

from __future__ import annotations

import math
import re

import pytest
import yaml

from prism.model.config import backbone_config
from prism.train.lr_rule import read_rule

from .wfhelpers import STUDY, job_counts, make_workdir, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

# One length swept at the smallest width only: the stage's shortest form that fits every parameter but q's slope.
TUNE = {"tune": {"rule": "fitted", "steps": 40, "long_steps": 120, "lr_step": 3.0, "long_sizes": 1, "long_points": 0,
                 "widest_points": 0}}  # fmt: skip


def test_tuning_stage_fits_a_rule_the_plan_uses(tmp_path):
    work = make_workdir(tmp_path / "tune", TUNE)
    counts = job_counts(snakemake(work, "-n", "plan_text_image").stdout)
    assert counts["tune_run"] == 20 and counts["tune"] == 1  # 3 sizes x 5 lrs, the smallest again longer; the fit

    snakemake(work, "plan_text_image", "--cores", "2")
    rule = read_rule(work / STUDY / "tune" / "lr_rule.json")
    assert rule.kind == "fitted" and rule.flops > 0 and len(rule.curves) == 4 and len(rule.cov) == 3
    for curve in rule.curves:  # each width's optimum inside its swept lrs
        assert min(curve["lrs"]) < math.exp(curve["ln_opt"]) < max(curve["lrs"])
    plan = yaml.safe_load((work / STUDY / "plan.yaml").read_text())
    for row in plan["runs"]:
        assert row["lr_rule"] == "fitted"
        width = backbone_config(row["backbone"]).d_model  # the smoke study is cosine: each run at its own tokens
        assert row["lr"] == pytest.approx(rule.lr(width, row["tokens"]), rel=1e-3)
    log = (work / "scaling-study" / "logs" / "plan" / "text_image.log").read_text()
    assert "lr rule fitted" in log and "% of the grid's" in log

    # Incremental: the sweep and the rule are files; nothing is trained or fitted again.
    assert "Nothing to be done" in snakemake(work, "-n", "plan_text_image").stdout


def test_the_default_designs_sweep_spends_fewer_lrs_where_runs_cost_most(tmp_path):
    """The default study's own sweep design: every width at 5 lrs but the widest at 4 (the top one dropped),
    the two smallest again at the second length (5 and 3 lrs)."""
    work = make_workdir(tmp_path / "design", {"tune": {"rule": "fitted"}})
    out = snakemake(work, "-n", "plan_text_image").stdout
    assert job_counts(out)["tune_run"] == 14 + 8
    lrs: dict[tuple[str, str], set[str]] = {}
    for steps, run_id, lr in re.findall(r"steps=(\d+), run_id=([^,]+), lr=([0-9.e-]+)", out):
        lrs.setdefault((steps, run_id.split("-")[0]), set()).add(lr)
    assert sorted(len(v) for (steps, _), v in lrs.items() if steps == "200") == [4, 5, 5]
    assert sorted(len(v) for (steps, _), v in lrs.items() if steps == "800") == [3, 5]

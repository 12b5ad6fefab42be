"""prism.workflow.study: the config parsed once, and the paths the rules agree on."""

from __future__ import annotations

import re

import pytest

from prism.core.errors import PrismError
from prism.workflow.study import Study


def test_budgets_are_canonical_sorted_and_unique(smoke_config):
    study = Study(smoke_config(budgets=[2e10, "1e10", 1.0e10, "2.5e11"]))
    assert study.budgets == ["1e10", "2e10", "2.5e11"]


def test_sections_become_their_options(smoke_config):
    study = Study(smoke_config(train={"schedule": "wsd", "seed": 7}))
    assert study.train.schedule == "wsd" and study.train.seed == 7
    assert study.plan.min_steps == 10 and study.warmup == 5  # half the shortest run


def test_a_key_the_options_do_not_have_is_refused(smoke_config):
    with pytest.raises(PrismError, match="plan"):
        Study(smoke_config(plan={"no_such_key": 1}))


def test_paths_of_a_study(smoke_config, tmp_path):
    study = Study(smoke_config(study_dir=f"{tmp_path}/study/"))
    root = f"{tmp_path}/study"
    assert study.dir == root  # the trailing slash dropped: every path below is spelt once
    assert (
        study.run_metrics("text_image", "30k-BASE-e2e-C1e10")
        == f"{root}/text_image/runs/30k-BASE-e2e-C1e10/metrics.json"
    )
    assert (
        study.calibration_file("text_image", "30k", "BASE", "e2e")
        == f"{root}/calibration/text_image__30k__BASE__e2e.json"
    )
    assert study.logfile("plan", "text_image") == f"{root}/logs/plan/text_image.log"
    assert study.fit_outputs("text_image")[0] == f"{root}/text_image/fit/e2e.json"
    assert study.plot_outputs("text_image")[-1] == f"{root}/text_image/plots/e2e/answer.html"
    assert not study.data_built("text_image") and study.fitted_family_dirs() == []


def test_wildcard_constraints_accept_run_ids_and_refuse_shell_text():
    run_id = Study.wildcard_constraints()["run_id"]
    assert re.fullmatch(run_id, "g35e5-BASE-e2e-C1e16")
    assert not re.fullmatch(run_id, "30k-BASE-e2e-C1e10; rm -rf x")

"""`snakemake status_F`: the study's state from its folder, while another Snakemake may hold the lock."""

from __future__ import annotations

import re

import pytest

from .wfhelpers import planned_run_ids, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def test_status_target_reports_a_finished_study(tiny_study):
    out = snakemake(tiny_study.workdir, "--nolock", "status_text_image").stdout
    n = len(planned_run_ids(tiny_study.workdir))
    assert re.search(rf"\b{n} planned runs: {n} done, 0 running, 0 failed, 0 waiting", out), out[-3000:]
    assert "every planned run is done" in out
    # it reads and prints only: nothing to retrain afterwards
    assert "Nothing to be done" in snakemake(tiny_study.workdir, "-n", "collect_text_image").stdout

"""A dry run imports no torch: it trains nothing, and torch with its compiler stack is seconds of every
Snakemake call (the tests make hundreds). The plan it prints counts FLOPs by formula (prism.model.flopcount);
the jobs' `prism` commands, and the worker a real run starts, import torch in their own processes."""

from __future__ import annotations

import re

import pytest

from .wfhelpers import make_workdir, snakemake

pytestmark = [pytest.mark.workflow]


def imported(output: str) -> set[str]:
    """The modules `-X importtime` (PYTHONPROFILEIMPORTTIME) reports in `output`."""
    return {line.rsplit("|", 1)[1].strip() for line in output.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("tiny", [False, True], ids=["default", "smoke"])
def test_a_dry_run_plans_every_budget_without_torch(tmp_path, tiny):
    workdir = make_workdir(tmp_path / "study", tiny=tiny)
    out = snakemake(workdir, "-n", "fit_text_image", extra_env={"PYTHONPROFILEIMPORTTIME": "1"}).stdout
    modules = imported(out)
    assert {"prism.workflow.planfile", "prism.isoflop.design.candidates"} <= modules  # the plan was computed
    assert re.search(r"^(train|wsd_segment) +[1-9]", out, re.MULTILINE)  # and its runs listed
    assert not {m for m in modules if m.split(".")[0] == "torch"}

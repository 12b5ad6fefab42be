"""A finished study under a changed library default: `snakemake -n` lists its runs for retraining.

A run's command leaves out every setting at its default, so a default that changes in the
library (here the hand lr rule's constant, which every run of the tiny study takes its peak
learning rate from) would not change it; the run's identity (prism.train.identity), a param of
the training rules, does. The new library is a copy of the installed package with the one
constant edited, put first on the Snakemake process's PYTHONPATH: what upgrading prism to a
release with another default does, without touching the checkout. A default that changes no
result (perf.jsonl's cadence) retrains nothing.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import prism

from .wfhelpers import copy_of, planned_run_ids, snakemake, train_run_ids

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def edit_library(package: Path, pattern: str, replacement: str) -> None:
    """Replace the one line of the copied package that matches `pattern` (found wherever its module lives)."""
    hits = [p for p in package.rglob("*.py") if re.search(pattern, p.read_text(), flags=re.M)]
    assert len(hits) == 1, f"{pattern!r} is in {hits}: the test no longer finds the default it changes"
    text = hits[0].read_text()
    hits[0].write_text(re.sub(pattern, replacement, text, count=1, flags=re.M))


def test_a_changed_library_default_retrains_the_finished_runs_and_a_cosmetic_one_does_not(tiny_study, tmp_path):
    study = copy_of(tiny_study.workdir, "identity")
    library = tmp_path / "library"
    shutil.copytree(Path(prism.__file__).parent, library / "prism", ignore=shutil.ignore_patterns("__pycache__"))
    upgraded = {"PYTHONPATH": str(library)}

    # How often a run logs its speed is a default too, but no result depends on it.
    edit_library(library / "prism", r"log_every: int = _f\(10,", "log_every: int = _f(5,")
    assert "Nothing to be done" in snakemake(study, "-n", "fit_text_image", extra_env=upgraded).stdout

    # The lr rule's constant: every run of the tiny study (hand rule) trains at another peak lr.
    edit_library(library / "prism", r"^BASE_LR = 3e-3$", "BASE_LR = 4e-3")
    out = snakemake(study, "-n", "fit_text_image", extra_env=upgraded).stdout
    assert sorted(train_run_ids(out)) == sorted(planned_run_ids(study))
    assert "Params have changed" in out
    # The checkout's own library still sees the finished study as it is.
    assert "Nothing to be done" in snakemake(study, "-n", "fit_text_image").stdout

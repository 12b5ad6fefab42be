"""A tiny study, run once per session through the real workflow (Snakemake + prism)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from .wfhelpers import WSD_TRAIN, make_workdir, snakemake


@dataclass
class Study:
    workdir: Path
    dry_plan: str  # `snakemake -n plan_text_image` before anything ran
    plan: str  # `snakemake plan_text_image`
    dry_fit: str  # `snakemake -n fit_text_image` once the plan exists
    fit: str  # `snakemake fit_text_image`


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory) -> Study:
    """plan -n, plan, fit -n, then fit_text_image + plot_text_image on the tiny config."""
    workdir = make_workdir(tmp_path_factory.mktemp("study"))
    dry_plan = snakemake(workdir, "-n", "plan_text_image").stdout
    plan = snakemake(workdir, "plan_text_image").stdout
    dry_fit = snakemake(workdir, "-n", "fit_text_image").stdout
    fit = snakemake(workdir, "fit_text_image", "plot_text_image").stdout
    return Study(workdir, dry_plan, plan, dry_fit, fit)


@pytest.fixture(scope="session")
def wsd_study(tmp_path_factory) -> Path:
    """The tiny study as a wsd study, trained and fitted once; tests change copies of it (`copy_of`)."""
    workdir = make_workdir(tmp_path_factory.mktemp("wsd"), {"train": WSD_TRAIN})
    snakemake(workdir, "fit_text_image", timeout=1800)
    return workdir

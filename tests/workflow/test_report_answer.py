"""The report opens on the answer: its first page shows the verdict, the exponents and the IsoFLOP figure."""

from __future__ import annotations

import subprocess

import pytest

from .wfhelpers import snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def test_report_first_page_is_the_answer(tiny_study):
    from .browser import chromium

    if not chromium():
        pytest.skip("chromium is not installed (tools/install-system-deps.sh installs it as root)")
    workdir = tiny_study.workdir
    snakemake(workdir, "--report", "report-answer.html", "fit_text_image")
    report = workdir / "report-answer.html"
    base = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--virtual-time-budget=20000",
        "--window-size=1280,1400",
    ]
    # The DOM as the page first renders it, before any click: the Workflow page.
    dom = subprocess.run([*base, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=180).stdout
    answer = dom.find("prism-answer")
    assert answer > 0, dom[-2000:]
    first_page = dom[answer:]
    assert "The answer (text_image, e2e)" in first_page
    assert "verdict: " in first_page and "Approach 2: no exponent: " in first_page  # the tiny study's two budgets
    assert 'alt="isoflop_curves.png" src="data:image/png;base64,' in first_page
    assert first_page.find("isoflop_curves.png") < first_page.find("IsoFLOP scaling study of PRISM")
    shot = workdir / "report-answer.png"  # the first page, for a person to look at
    subprocess.run([*base, f"--screenshot={shot}", report.as_uri()], capture_output=True, timeout=180)
    assert shot.is_file() and shot.stat().st_size > 20_000

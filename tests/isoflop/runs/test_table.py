"""The runs table as the fit reads it: a value no run can have names the fix that keeps every run."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.isoflop.runs.collect import collect
from prism.isoflop.runs.table import load_runs, table_problem

from .test_collect import make_run


@pytest.fixture
def collected(tmp_path):
    root = tmp_path / "runs"
    for i, params in enumerate((3e4, 6e4, 1.2e5)):
        make_run(root, f"{int(params / 1e3)}k-BASE-e2e-C1e12", [3.0 - 0.1 * i, 2.5 - 0.1 * i], params=params)
    collect(root, tmp_path / "runs.csv")
    return tmp_path / "runs.csv"


def test_a_corrupted_runs_table_says_delete_it_and_collect_rebuilds_it(collected):
    assert table_problem(collected) is None and len(load_runs(collected).records) == 3
    lines = collected.read_text().splitlines()
    header = lines[0].split(",")
    row = lines[2].split(",")
    row[header.index("loss")] = "2.4x"
    collected.write_text("\n".join([*lines[:2], ",".join(row), *lines[3:]]) + "\n")
    line = table_problem(collected)
    assert "column 'loss' at line(s) 3" in line and f"rm {collected}" in line and "collect rebuilds it" in line
    assert "remove those rows" not in line and "\n" not in line
    with pytest.raises(PrismError, match="collect rebuilds it"):
        load_runs(collected)


def test_someone_elses_table_is_corrected_and_other_faults_are_left_to_the_fit(tmp_path):
    own = tmp_path / "mine.csv"
    own.write_text("params,tokens,loss,budget\n1e8,1e9,-2,1e18\n")
    assert "correct those values" in table_problem(own) and "rm " not in table_problem(own)
    own.write_text("params,tokens,loss,budget,status\n1e8,1e9,2,1e18,incomplete\n")  # nothing to fit yet
    assert table_problem(own) is None and table_problem(tmp_path / "absent.csv") is None


def test_a_row_removed_from_collects_table_is_said_while_a_run_still_to_finish_is_not(collected):
    import os

    runs = collected.parent / "runs"
    planned = {p.name: p / "metrics.json" for p in sorted(runs.iterdir())}
    assert table_problem(collected, planned) is None
    lines = collected.read_text().splitlines()
    dropped = next(line for line in lines[1:] if line.startswith("60k-"))
    collected.write_text("\n".join(line for line in lines if line != dropped) + "\n")
    line = table_problem(collected, planned)
    assert "no row for 1 finished planned run(s) (60k-BASE-e2e-C1e12)" in line and "collect rebuilds it" in line
    # A run that finished after the table was written: collect writes the table again, nothing to say.
    later = collected.stat().st_mtime + 10
    os.utime(planned["60k-BASE-e2e-C1e12"], (later, later))
    assert table_problem(collected, planned) is None
    assert table_problem(collected, {**planned, "240k-BASE-e2e-C1e12": runs / "absent" / "metrics.json"}) is None

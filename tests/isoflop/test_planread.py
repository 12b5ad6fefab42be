"""read_plan: plan.yaml read back once, its header and checked rows, or one line naming the file and the fix."""

from __future__ import annotations

import pytest
import yaml

from prism.core.errors import PrismError
from prism.isoflop.planread import MAKE_PLAN, read_plan
from prism.isoflop.records import PlanRow

ROW = {"run_id": "30k-BASE-e2e-C1e10", "family": "text_image", "backbone": "30k", "variant": "BASE",
       "regime": "e2e", "budget": 1e10, "global_batch": 8, "steps": 66, "hours_here": 0.5}  # fmt: skip
OTHER = {**ROW, "run_id": "60k-BASE-e2e-C1e10", "backbone": "60k"}


def test_header_and_rows_by_run_id(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"family": "text_image", "min_steps": 80, "runs": [ROW, OTHER]}))
    plan = read_plan(path)
    assert plan.header == {"family": "text_image", "min_steps": 80}
    assert list(plan.rows) == [ROW["run_id"], OTHER["run_id"]]  # in the plan's order
    row = plan.rows[ROW["run_id"]]
    assert isinstance(row, PlanRow) and (row.family, row.steps, row.hours_here) == ("text_image", 66, 0.5)


def test_an_empty_plan_has_no_rows(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"family": "text_image", "runs": []}))
    assert read_plan(path).rows == {}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (None, "no such file"),
        ("runs: [a", "not YAML (while parsing a flow sequence)"),
        ("", "no `runs:` list, not a plan"),
        ("- 1\n- 2\n", "no `runs:` list, not a plan"),
        ("family: text_image\n", "no `runs:` list, not a plan"),
    ],
)
def test_a_file_that_is_no_plan_is_one_line_naming_it_and_the_fix(tmp_path, text, said):
    path = tmp_path / "plan.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(PrismError) as err:
        read_plan(path, f"--plan {path}")
    assert str(err.value) == f"--plan {path}: {said}; {MAKE_PLAN}"


def test_the_caller_names_its_own_fix(tmp_path):
    with pytest.raises(PrismError, match=r"plan\.yaml: no such file; `snakemake plan_text_image` makes it$"):
        read_plan(tmp_path / "plan.yaml", fix="`snakemake plan_text_image` makes it")


def test_a_bad_row_is_its_own_check_naming_the_file_row_and_key(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"runs": [ROW, {**OTHER, "steps": "many"}]}))
    with pytest.raises(PrismError) as err:
        read_plan(path)
    assert str(err.value) == f"{path}: runs[1] (60k-BASE-e2e-C1e10): steps must be a positive integer, got 'many'"
    path.write_text(yaml.safe_dump({"runs": {"a": 1}}))
    with pytest.raises(PrismError, match="`runs:` is not a list of plan rows"):
        read_plan(path)


def test_a_run_listed_twice_is_refused(tmp_path):
    """Keyed by run id, a second row would silently replace the first: refused instead."""
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"runs": [ROW, OTHER, {**ROW, "steps": 99}]}))
    with pytest.raises(PrismError, match="run 30k-BASE-e2e-C1e10 is listed twice"):
        read_plan(path)

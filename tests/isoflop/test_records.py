"""prism.isoflop.records: a plan row read back from plan.yaml is the planner's record, checked once."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.isoflop.records import PlanRow, plan_rows

from .conftest import plan_row

ROW = {
    "run_id": "30k-BASE-e2e-C1e12",
    "family": "text_image",
    "backbone": "30k",
    "variant": "BASE",
    "regime": "e2e",
    "budget": 1e12,
    "global_batch": 32,
    "steps": 120,
}


def test_a_written_row_reads_back_as_the_same_record():
    row = plan_row("30k", 1e12, batch=384)
    assert PlanRow.from_dict(row.to_json()) == row


def test_an_older_or_hand_written_row_takes_the_defaults():
    row = PlanRow.from_dict(dict(ROW))
    assert (row.run_id, row.steps, row.devices, row.accum_steps, row.lr_rule) == (ROW["run_id"], 120, 1, 1, "hand")
    assert row.params is None and row.hours_here is None  # cost fields the row did not carry
    # YAML reads `1e12` (no dot) as a string: the number it spells
    assert PlanRow.from_dict({**ROW, "budget": "1e12"}).budget == 1e12


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("backbone", "31k", "backbone '31k' is neither a registry backbone"),
        ("family", "text_smell", "family 'text_smell' is not one of"),
        ("steps", "many", "steps must be a positive integer, got 'many'"),
        ("steps", 12.5, "steps must be a positive integer"),
        ("global_batch", 0, "global_batch must be a positive integer, got 0"),
        ("global_batch", True, "global_batch must be a positive integer, got True"),
        ("budget", "1e400", "budget must be a positive number"),
        ("hours_here", "soon", "hours_here must be a number, got 'soon'"),
        ("run_id", "30k-BASE-e2e-C2e12", "run_id does not match its backbone, variant, regime and budget "
         "(they give 30k-BASE-e2e-C1e12)"),
    ],
)  # fmt: skip
def test_a_bad_row_names_the_file_the_row_and_the_key(key, value, message):
    run = value if key == "run_id" else ROW["run_id"]
    with pytest.raises(PrismError, match=rf"^S/F/plan\.yaml: runs\[3\] \({run}\): ") as err:
        PlanRow.from_dict({**ROW, key: value}, "S/F/plan.yaml: runs[3]")
    assert message in str(err.value)


def test_a_row_without_a_key_a_run_needs_or_with_one_it_does_not_know_is_refused():
    without = {k: v for k, v in ROW.items() if k != "steps"}
    with pytest.raises(PrismError, match=r"^p\.yaml: runs\[0\] \(30k-BASE-e2e-C1e12\): no steps$"):
        plan_rows([without], "p.yaml")
    with pytest.raises(PrismError, match=r"runs\[1\] \(30k-BASE-e2e-C1e12\): unknown key\(s\) stpes; a plan row has"):
        plan_rows([ROW, {**ROW, "stpes": 3}], "p.yaml")
    with pytest.raises(PrismError, match=r"^p\.yaml: runs\[0\] is not a mapping of run settings"):
        plan_rows(["30k"], "p.yaml")

"""A run id built and taken apart in one place: what `run_id` makes, `parse_run_id` gives back."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.core.ids import id_backbone, parse_run_id, run_id, split_budget


def test_a_built_id_parses_back_to_its_parts():
    rid = run_id("n32e3", "BASE", "e2e_frozen", 2.5e17)
    parts = parse_run_id(rid)
    assert (parts.backbone, parts.variant, parts.regime, parts.budget) == ("n32e3", "BASE", "e2e_frozen", "2.5e17")
    assert parts.flops == 2.5e17 and parts.stem == "n32e3-BASE-e2e_frozen" and str(parts) == rid


def test_what_is_no_run_id_is_refused():
    with pytest.raises(PrismError, match="not a run id"):
        parse_run_id("n1.2e+05-C1e18")


def test_a_trajectory_id_names_its_backbone_too():
    assert id_backbone("n32e3-BASE-e2e-B48") == id_backbone("n32e3-BASE-e2e-C1e12") == "n32e3"
    assert id_backbone("n11e3-BASE-e2e-C1e+18") == "n11e3"  # a runs table's own id


def test_any_id_ending_in_a_budget_splits_leniently():
    assert split_budget("n1.2e+05-C1e18") == ("n1.2e+05", "1e18")
    assert split_budget("mine") is None

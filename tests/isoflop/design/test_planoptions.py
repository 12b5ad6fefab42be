"""The planner's settings and its budgets flag (prism/isoflop/design/planoptions.py)."""

import pytest

from prism.core.errors import PrismError
from prism.isoflop.design.planoptions import parse_budgets


def test_budgets_are_sorted_without_duplicates_and_a_bad_one_is_named():
    assert parse_budgets("3e12, 1e12,1e12") == [1e12, 3e12]
    with pytest.raises(PrismError, match="not a number"):
        parse_budgets("1e12,lots")

"""A bad plan row is an error naming the file, the row and the key."""

from __future__ import annotations

import pytest

from prism.errors import PrismError
from prism.train.planrow import check_row

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


def test_a_valid_row_passes():
    assert check_row(dict(ROW), 0) == ROW
    assert check_row({**ROW, "budget": "1e12"}, 0)["budget"] == "1e12"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("backbone", "31k", "backbone '31k' is neither a registry backbone"),
        ("steps", "many", "steps must be a positive integer, got 'many'"),
        ("steps", 12.5, "steps must be a positive integer"),
        ("global_batch", 0, "global_batch must be a positive integer, got 0"),
        ("budget", "1e400", "budget must be a positive number"),
    ],
)
def test_a_bad_row_names_the_row_and_key(key, value, message):
    with pytest.raises(PrismError, match=r"plan\.yaml: runs\[3\] \(30k-BASE-e2e-C1e12\): ") as err:
        check_row({**ROW, key: value}, 3)
    assert message in str(err.value)

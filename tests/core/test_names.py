"""A registry's names read each time they are asked, and a clear error when nothing says where to read."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.core.names import LiveNames


def test_a_name_registered_later_is_a_choice_too():
    registry = ["a"]
    names = LiveNames(lambda: tuple(registry))
    assert list(names) == ["a"] and "b" not in names
    registry.append("b")
    assert "b" in names and len(names) == 2 and names[-1] == "b" and names[:1] == ("a",)


def test_asked_before_it_knows_where_to_read_it_says_so():
    names = LiveNames(unset="no launcher is registered yet")
    with pytest.raises(PrismError, match="no launcher is registered yet"):
        list(names)
    names.read_from(lambda: ("local",))
    assert tuple(names) == ("local",)

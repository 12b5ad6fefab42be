"""A fast path turned off for a block comes back as it was, an error in the block included."""

from __future__ import annotations

import pytest

from prism.core.switch import turned_off


def test_the_switch_is_off_inside_and_as_it_was_after_even_on_an_error():
    state = {"enabled": True}
    with turned_off(state):
        assert state["enabled"] is False
        with turned_off(state):  # nested: still off, and the outer block's value is restored
            assert state["enabled"] is False
        assert state["enabled"] is False
    assert state["enabled"] is True
    with pytest.raises(RuntimeError), turned_off(state):
        raise RuntimeError("a failing A/B arm")
    assert state["enabled"] is True
    state["enabled"] = False  # already off (PRISM_KERNELS=0): stays off after
    with turned_off(state):
        pass
    assert state["enabled"] is False

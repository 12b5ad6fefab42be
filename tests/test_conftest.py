"""tests/conftest.py's grouping of the tests for pytest-xdist (`make test`)."""

import pytest


def test_make_tests_groups_reach_pytest_xdist(request):
    # xdist marks a grouped test's id `id@group`. Where it cannot (pytest 9.2 with xdist 3.8),
    # nothing else fails: each worker builds every shared fixture, a second Slurm among them.
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run under `pytest -n N --dist loadgroup`")
    assert request.node.nodeid.endswith("@tests/test_conftest.py"), (
        f"{request.node.nodeid}: pytest-xdist's --dist loadgroup did not take tests/conftest.py's groups; "
        "install the pytest and pytest-xdist pinned in pyproject.toml"
    )

"""The walltime a training job requests: its estimate x the factor, whole minutes, between the floor and the cap."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.launch.walltime import pieces, requested_seconds, run_estimate_s, walltime_seconds, walltime_text


def test_walltime_text_round_trips_and_rejects_nonsense():
    assert walltime_seconds("02:30:05") == 9005 and walltime_text(9005) == "02:30:05"
    assert walltime_seconds("100:00:00") == 360000 and walltime_text(360000) == "100:00:00"
    for bad in ("2h", "01:60:00", "1:2"):
        with pytest.raises(PrismError, match="HH:MM:SS"):
            walltime_seconds(bad)


def test_request_is_the_estimate_times_the_factor_in_whole_minutes_within_floor_and_cap():
    assert requested_seconds(1000, 2, "00:10:00", "02:00:00") == 34 * 60  # 2000 s -> 34 min
    assert requested_seconds(30, 2, "00:10:00", "02:00:00") == 600  # the floor
    assert requested_seconds(3000, 2, "00:10:00", "01:00:00") == 3600  # the cap
    assert requested_seconds(None, 2, "00:10:00", "01:00:00") == 3600  # no estimate: the cap
    assert requested_seconds(61, 1, "00:01:00", "01:00:00") == 120  # rounded up, never down


def test_estimate_prefers_the_clusters_node_hours_spread_over_the_nodes():
    assert run_estimate_s(2.0, 50.0, 4) == pytest.approx(1800)
    assert run_estimate_s(None, 0.5, 4) == pytest.approx(1800)
    assert run_estimate_s(None, None, 1) is None


def test_a_job_longer_than_the_cap_needs_that_many_walltimes():
    assert pieces(7000, "01:00:00") == 2 and pieces(3600, "01:00:00") == 1 and pieces(None, "01:00:00") == 1

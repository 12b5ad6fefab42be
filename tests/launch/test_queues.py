"""Which queue a job goes to, and the one line that refuses a job no queue holds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from prism.core.errors import PrismError
from prism.launch.queues import choose_queue, fit_walltime, parse_queues, per_user_limit

AURORA = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "aurora.yaml").read_text())
QUEUES = parse_queues(AURORA["cluster"]["queues"])


def test_the_shipped_aurora_limits_route_each_size_where_the_machine_takes_it():
    assert choose_queue(1, 3 * 3600, QUEUES, preferred="capacity").name == "capacity"
    # capacity holds up to 16 nodes and a week; a 1-node job would be refused by prod, never sent there
    assert choose_queue(16, 100 * 3600, QUEUES, preferred="capacity").name == "capacity"
    assert choose_queue(100, 3600, QUEUES, preferred="capacity").name == "debug-scaling"
    assert choose_queue(300, 20 * 3600, QUEUES, preferred="capacity").name == "prod"
    assert choose_queue(1, 1800, QUEUES, preferred="debug").name == "debug"


def test_a_job_no_queue_holds_is_refused_naming_the_queue_and_the_limit():
    with pytest.raises(PrismError) as err:
        choose_queue(100, 3 * 3600, QUEUES, preferred="capacity")
    text = str(err.value)
    assert "queue capacity takes at most 16 nodes, the job asks 100" in text
    assert "queue debug-scaling allows at most 01:00:00 of walltime, the job asks 03:00:00" in text
    assert "queue prod takes at least 256 nodes" in text and "\n" not in text


def test_a_short_job_is_raised_to_its_queues_least_walltime():
    capacity = next(q for q in QUEUES if q.name == "capacity")
    assert fit_walltime(60, capacity) == 300 and fit_walltime(3600, capacity) == 3600


def test_the_per_user_limit_is_the_least_of_the_queues_used():
    assert per_user_limit(QUEUES, ["capacity"]) == 5
    assert per_user_limit(QUEUES, ["capacity", "debug"]) == 1
    assert per_user_limit(QUEUES, ["prod"]) is None


def test_the_profile_submits_no_more_jobs_than_capacity_allows_a_user():
    profile = yaml.safe_load((Path(__file__).resolve().parents[2] / "profiles" / "aurora" / "config.yaml").read_text())
    assert profile["jobs"] == per_user_limit(QUEUES, [AURORA["cluster"]["queue"]])


@pytest.mark.parametrize(
    ("limits", "said"),
    [
        (
            {"min_walltime": "02:00:00", "max_walltime": "01:00:00"},
            "min_walltime 02:00:00 is above max_walltime 01:00:00",
        ),
        ({"min_nodes": 4, "max_nodes": 2}, "min_nodes 4 is above max_nodes 2"),
    ],
)
def test_a_queue_whose_least_is_above_its_most_is_refused_naming_it(limits, said):
    """Accepted, such a queue would have every job ask its least, beyond what the queue allows."""
    with pytest.raises(PrismError, match=f"cluster.queues.short: {said}; no job fits it"):
        parse_queues({"debug": {"max_walltime": "01:00:00"}, "short": limits})

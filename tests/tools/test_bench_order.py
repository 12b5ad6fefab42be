"""tools/bench_order.py: the simulated makespan of a study's jobs under two orders."""

import pytest

from .conftest import load_tool


def test_the_longest_chain_first_leaves_no_lone_tail():
    tool = load_tool("bench_order")
    Job = tool.Job
    # A 3-job chain of 10 s each (a slow model: few steps) and four 10 s jobs of a fast model
    # (many steps, so "by steps" ranks them first), on 2 cores: 70 s of work, chain 30 s.
    jobs = [Job("slow@1", 10, None, 1, 30), Job("slow@2", 10, "slow@1", 2, 20), Job("slow-b", 10, "slow@2", 3, 10)]
    jobs += [Job(f"fast{i}", 10, None, 100, 10) for i in range(4)]
    assert tool.longest_chain(jobs) == 30
    assert tool.makespan(jobs, 2, "longest_chain") == 40  # the chain from the start, the fast jobs beside it
    assert tool.makespan(jobs, 2, "by_steps") == 50  # the chain after the fast jobs: 20 s with a core idle
    assert tool.makespan(jobs, 1, "by_steps") == pytest.approx(70)

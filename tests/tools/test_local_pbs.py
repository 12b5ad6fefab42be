"""tools/local_pbs.py without its daemons: how two instances on one host keep their job ids apart."""

from __future__ import annotations

from .conftest import load_tool

local_pbs = load_tool("local_pbs")

# Slurm's default MaxJobId: a larger FirstJobId is refused.
MAX_JOB_ID = 67_043_328


def test_instances_started_in_one_second_number_their_jobs_in_blocks_of_their_own():
    """The suite's two instances start together on free ports: their first ids lie a whole block apart at
    least, so neither reaches the other's ids within a block's jobs."""
    now = 1_765_000_000.7
    firsts = [local_pbs.first_job_id(port, now) for port in (40_000, 40_001, 51_234)]
    assert len(set(firsts)) == 3
    assert all(abs(a - b) >= local_pbs.ID_BLOCK for a in firsts for b in firsts if a != b)
    assert all(1 <= f and f + local_pbs.ID_BLOCK <= MAX_JOB_ID for f in firsts)


def test_an_instance_restarted_on_the_same_port_numbers_from_another_block():
    assert local_pbs.first_job_id(40_000, 1_765_000_000) != local_pbs.first_job_id(40_000, 1_765_000_060)


def test_the_config_numbers_from_the_block_of_its_port(tmp_path):
    conf = local_pbs.write_config(tmp_path, cpus=2, host="node0").read_text()
    settings = dict(line.split("=", 1) for line in conf.splitlines() if "=" in line and " " not in line)
    first = int(settings["FirstJobId"])
    assert (first - 1) % local_pbs.ID_BLOCK == 0 and first + local_pbs.ID_BLOCK <= MAX_JOB_ID

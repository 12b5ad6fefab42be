"""`prism cluster check`'s PBS checks: the queue's limits, the filesystems, the DAOS variables, one line each."""

from __future__ import annotations

from prism.launch.sitepbs import check_daos, check_filesystems, check_queue

# What PBS Pro's `qstat -Qf prod` prints of the limits (ALCF's prod starts at 256 nodes).
PROD = """Queue: prod
    queue_type = Route
    resources_max.walltime = 24:00:00
    resources_min.walltime = 00:05:00
    resources_max.nodect = 10624
    resources_min.nodect = 256
    enabled = True
"""
CLUSTER = {"queue": "prod", "nodes": 1, "nodes_by_backbone": {}, "walltime": "06:00:00", "min_walltime": "00:10:00"}


def test_a_one_node_job_is_refused_by_a_queue_that_starts_at_256_nodes():
    check = check_queue(CLUSTER, run=lambda args: PROD if args == ["-Qf", "prod"] else None)
    assert not check.ok and "a 1-node job is below queue prod's resources_min.nodect 256" in check.line()
    fine = check_queue({**CLUSTER, "nodes": 256}, run=lambda args: PROD)
    assert fine.ok, fine.line()
    long = check_queue({**CLUSTER, "nodes": 256, "walltime": "30:00:00"}, run=lambda args: PROD)
    assert not long.ok and "cluster.walltime 30:00:00 is above queue prod's limit 24:00:00" in long.detail


def test_without_an_answer_from_qstat_the_queue_is_said_unchecked():
    check = check_queue(CLUSTER, run=lambda args: None)
    assert check.ok and "not checked" in check.detail


def test_filesystems_valid_and_the_study_folder_on_a_requested_one(tmp_path):
    server = "Server: aurora\n    resources_available.valid_filesystems = home,flare,daos_user_fs\n"
    config = {"cluster": {"filesystems": "flare:home"}, "study_dir": str(tmp_path / "study")}
    assert check_filesystems(config, run=lambda args: server, home=str(tmp_path)).ok
    bad = check_filesystems({**config, "cluster": {"filesystems": "flare:eagle"}}, run=lambda args: server)
    assert not bad.ok and "eagle not in qstat -Bf's valid_filesystems" in bad.detail
    # A study folder in home (every cache of every job) while home is not requested.
    home = check_filesystems({**config, "cluster": {"filesystems": "flare"}}, run=lambda a: None, home=str(tmp_path))
    assert not home.ok and "lies on home, which cluster.filesystems (flare) does not request" in home.detail


def test_daos_needs_its_variables_passed_and_its_filesystem_and_lustre_none():
    daos = {"train": {"storage": "daos"}, "cluster": {"filesystems": "flare:home", "env": []}}
    check = check_daos(daos, environ={})
    assert not check.ok
    assert "export DAOS_POOL DAOS_CONT" in check.detail and "add DAOS_POOL, DAOS_CONT to cluster.env" in check.detail
    assert "add daos_user_fs to cluster.filesystems" in check.detail
    ready = {"train": {"storage": "daos"}, "cluster": {"filesystems": "flare:home:daos_user_fs",
                                                       "env": ["DAOS_POOL", "DAOS_CONT"]}}  # fmt: skip
    assert check_daos(ready, environ={"DAOS_POOL": "p", "DAOS_CONT": "c"}).ok
    lustre = {"train": {"storage": "lustre"}, "cluster": {"filesystems": "flare:daos_user_fs"}}
    assert not check_daos(lustre, environ={}).ok  # a filesystem no job uses, which can keep jobs from starting

"""The job-environment checks of `prism cluster check` (no scheduler: qstat's answers given)."""

from __future__ import annotations

from prism.launch.sitejob import check_debug_queue, check_frameworks, check_helpers_python, check_tmpdir

QSTAT = """
Job id            Name             User              Time Use S Queue
----------------  ---------------- ----------------  -------- - -----
101.aurora-pbs    STDIN            me                00:00:01 R debug
102.aurora-pbs    prism.train      me                       0 Q capacity
"""


def test_an_open_debug_job_holds_the_probe_back():
    other = check_debug_queue(environ={"USER": "me"}, run=lambda args: QSTAT)
    assert not other.ok and "101" in other.detail and "allows 1 job" in other.detail
    # The check's own interactive session: said, with what to do before the probe.
    here = check_debug_queue(environ={"USER": "me", "PBS_JOBID": "101.aurora-pbs"}, run=lambda args: QSTAT)
    assert here.ok and "exit it before submitting the probe" in here.detail
    assert check_debug_queue(environ={"USER": "me"}, run=lambda args: QSTAT.replace("R debug", "R prod")).ok
    assert "not checked" in check_debug_queue(environ={"USER": "me"}, run=lambda args: None).detail


def test_tmpdir_is_set_by_the_job_and_short_here(tmp_path):
    script = tmp_path / "jobscript.sh"
    script.write_text("#!/bin/bash -l\n")
    assert "sets no TMPDIR" in check_tmpdir({}, script).detail
    script.write_text('export TMPDIR="$prism_tmp"\n')
    assert check_tmpdir({"TMPDIR": "/tmp"}, script).ok  # writable and short, whatever pytest's own folder is
    long = check_tmpdir({"TMPDIR": "/lus/flare/projects/" + "x" * 80}, script)
    assert not long.ok and "AF_UNIX path too long" in long.detail


def test_frameworks_is_pinned_to_the_venvs_version():
    unpinned = {"cluster": {"setup": ["module load frameworks", "source .venv/bin/activate"]}}
    check = check_frameworks(unpinned, environ={"LOADEDMODULES": "frameworks/2025.3.1:daos"}, base="")
    assert not check.ok and "`module load frameworks/2025.3.1`" in check.detail
    pinned = {"cluster": {"setup": ["module load frameworks/2025.3.1"]}}
    venv = "/opt/aurora/26.1/frameworks/aurora_frameworks-2025.2.0/bin"
    other = check_frameworks(pinned, environ={}, base=venv)
    assert not other.ok and "the venv's Python 2025.2.0" in other.detail
    assert check_frameworks(pinned, environ={"LOADEDMODULES": "frameworks/2025.3.1"}, base="").ok
    assert check_frameworks({"cluster": {"setup": []}}, environ={}, base="").ok


def test_the_helpers_python_is_the_one_running(tmp_path):
    assert check_helpers_python().ok
    (tmp_path / "bin").mkdir()
    assert not check_helpers_python(str(tmp_path / "bin" / "python")).ok

"""prism.launch.jobenv: the environment a cluster job sets up itself."""

from __future__ import annotations

import json
import subprocess

from prism.launch.jobenv import cache_lines, job_env, job_setup, setup_shell


def strict_bash(script: str) -> subprocess.CompletedProcess:
    """`script` as Snakemake runs a job's shell command: bash in its strict mode."""
    return subprocess.run(["bash", "-c", "set -euo pipefail; " + script], capture_output=True, text=True)


def test_the_setup_resource_is_the_studys_lines_then_its_caches(tmp_path):
    lines = json.loads(job_setup({"setup": ["module load frameworks"]}, str(tmp_path)))
    assert lines == ["module load frameworks", *cache_lines(str(tmp_path))]
    assert f"export MPLCONFIGDIR={tmp_path}/cache/matplotlib" in lines
    assert job_env({"env": ["A", "B"]}) == "A B" and job_env({}) == ""


def test_the_setup_as_a_shell_prefix_runs_its_lines_before_the_command(tmp_path):
    """A site's set-up reads unset variables (nounset is off around it); what it exports reaches the command
    after it, and the caches go under the study folder."""
    cluster = {"setup": ['export SITE="${SITE_ROOT:-/opt}/site"', "cd /"]}
    done = strict_bash(setup_shell(cluster, str(tmp_path)) + 'echo "$SITE $MPLCONFIGDIR $PWD"; echo "$UNSET_AFTER"')
    assert done.stdout.splitlines() == [f"/opt/site {tmp_path}/cache/matplotlib /"]
    assert done.returncode != 0 and "UNSET_AFTER: unbound variable" in done.stderr  # strict mode is back after it


def test_a_failing_setup_line_stops_the_job_naming_the_line(tmp_path):
    cluster = {"setup": ["true", "module load no-such-module 2>/dev/null", "echo after"]}
    done = strict_bash(setup_shell(cluster, str(tmp_path)) + "echo trained")
    assert done.returncode == 2 and "trained" not in done.stdout and "after" not in done.stdout
    assert "prism: set-up line failed: module load no-such-module 2>/dev/null\n" in done.stderr

"""A pack keeps going past a failed run: the Snakemake a group job runs gets the call's --keep-going.

Snakemake passes no --keep-going to a group job's own Snakemake (nor does that one read a profile), so
without prism.workflow.engine's `keep_going_in_groups` one crashing run of a pack stops every run of it
not yet started. Here a group of three jobs is submitted as one job through the cluster-generic executor
(the submit command runs the job script at once, on this host): `fails` fails at once, `first` takes a
moment, and `after` starts only once `first` has finished, after the failure.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from .wfhelpers import REPO, SNAKEMAKE, env

pytestmark = [pytest.mark.workflow]

SNAKEFILE = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from prism.workflow.engine import Engine

Engine(workflow).keep_going_in_groups()

rule all:
    input: "fails.txt", "after.txt"

rule fails:
    output: "fails.txt"
    group: "pack"
    shell: "exit 1"

rule first:
    output: "first.txt"
    group: "pack"
    shell: "sleep 3 && echo first >> ran.txt && touch {{output}}"

rule after:
    input: "first.txt"
    output: "after.txt"
    group: "pack"
    shell: "echo after >> ran.txt && touch {{output}}"
"""


def run_pack(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    args = [SNAKEMAKE, "--executor", "cluster-generic", "--cluster-generic-submit-cmd", "bash", "--jobs", "1",
            "--group-components", "pack=2", "--latency-wait", "1", *flags]  # fmt: skip
    return subprocess.run(args, cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=300)


def ran(tmp_path) -> list[str]:
    return (tmp_path / "ran.txt").read_text().split()


def test_a_failed_run_of_a_pack_does_not_stop_the_rest_of_it(tmp_path):
    """With the cluster profile's keep-going and keep-incomplete: the rest of the pack runs, its finished
    outputs are kept, and the next call reruns only the failed run."""
    profile = yaml.safe_load((REPO / "profiles" / "aurora" / "config.yaml").read_text())
    assert profile["keep-going"] is True and profile["keep-incomplete"] is True
    result = run_pack(tmp_path, "all", "--keep-going", "--keep-incomplete")
    assert result.returncode != 0 and "Error in group pack" in result.stderr  # the failed run fails its pack
    assert ran(tmp_path) == ["first", "after"], result.stderr[-3000:]
    assert (tmp_path / "first.txt").is_file() and (tmp_path / "after.txt").is_file()
    again = run_pack(tmp_path, "all", "-n")
    listing = again.stdout + again.stderr
    assert sorted(re.findall(r"^\s*rule (\w+):", listing, flags=re.M)) == ["all", "fails"], listing


def test_without_keep_going_the_pack_stops_at_its_first_failure(tmp_path):
    result = run_pack(tmp_path, "all")
    assert result.returncode != 0
    assert ran(tmp_path) == ["first"], result.stderr[-3000:]

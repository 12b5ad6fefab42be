"""The profiles' scripts and templates, without a scheduler (fast)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
AURORA = REPO / "profiles" / "aurora"


def fake_qstat(tmp_path: Path, body: str) -> dict[str, str]:
    """A PATH whose `qstat` is the given shell body (the parsing is under test, not a scheduler)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "qstat"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin"}


def status(tmp_path, job_id, qstat_body, *extra):
    env = fake_qstat(tmp_path, qstat_body)
    result = subprocess.run(
        [
            sys.executable,
            str(AURORA / "pbs_status.py"),
            job_id,
            "--status-dir",
            str(tmp_path / "status"),
            "--wait",
            "0.01",
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    ("record", "qstat_body", "expected"),
    [
        (None, 'echo "Job Id: 7"; echo "    job_state = R"', "running"),
        (None, 'echo "Job Id: 7"; echo "    job_state = Q"', "running"),
        ("0", 'echo "    job_state = C"', "success"),
        ("1", 'echo "    job_state = C"', "failed"),
        ("0", "exit 153", "success"),
        (None, 'echo "    job_state = C"', "failed"),  # finished without a record: killed
        (None, 'echo "qstat: Unknown Job Id 7" >&2; exit 153', "failed"),
        (None, "exit 15010", "running"),  # server unreachable: ask again later
    ],
)
def test_status_reads_the_record_and_asks_qstat_only_for_existence(tmp_path, record, qstat_body, expected):
    (tmp_path / "status").mkdir()
    if record is not None:
        (tmp_path / "status" / "7").write_text(record + "\n")
    assert status(tmp_path, "7.aurora-pbs-0001.hostmgmt", qstat_body) == expected + "\n"


def test_status_never_exits_nonzero(tmp_path):
    out = subprocess.run([sys.executable, str(AURORA / "pbs_status.py")], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "failed\n"


def test_submit_command_quotes_every_resource():
    from snakemake.utils import format as sm_format

    profile = yaml.safe_load((AURORA / "config.yaml").read_text())
    template = profile["cluster-generic-submit-cmd"]
    assert template.count("-l ") == 1 and "qsub" in template
    evil = "x; touch pwned"

    class Resources:
        nodes, walltime, filesystems, place, account, queue = 2, "01:00:00", "flare:home", "scatter", evil, "debug"

    command = sm_format(template, resources=Resources, rule="train", jobid=3)
    # The shell sees the account as one word, whatever it holds.
    inner = command[command.index("qsub") : command.index('"$1"')]
    words = shlex.split(inner)
    assert words[words.index("-A") + 1] == evil
    assert "-l" in words and words[words.index("-l") + 1] == (
        "select=2,walltime=01:00:00,filesystems=flare:home,place=scatter"
    )


def test_every_profile_key_is_commented():
    for name in ("default", "aurora"):
        lines = (REPO / "profiles" / name / "config.yaml").read_text().splitlines()
        for i, line in enumerate(lines):
            if line and not line.startswith((" ", "#")) and ":" in line:
                assert i > 0 and lines[i - 1].startswith("#"), f"profiles/{name}: key without comment: {line}"

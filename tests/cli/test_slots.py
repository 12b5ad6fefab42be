"""`python -m prism.cli.slots`: the flags of a pack's run; the claim itself is tests/launch/test_slots.py's."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from prism.cli import slots


def test_the_module_runs_the_command_after_the_double_dash_and_gives_its_status(tmp_path, monkeypatch):
    monkeypatch.setenv("PRISM_SLOT_DIR", str(tmp_path))
    before = [signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)]
    assert slots.main(["--slots", "2", "--device", "cpu", "--", sys.executable, "-c", "raise SystemExit(0)"]) == 0
    assert slots.main(["--slots", "2", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    # the signals were passed on while the command ran; this process's own handlers are back after
    assert [signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)] == before


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--slots", "0", "--", "true"], "give --slots N"),
        (["--slots", "2"], "a command after --"),
        (["--slots", "2", "--devices", "3", "--", "true"], "--devices 3: give 1 to --slots (2)"),
    ],
)
def test_bad_flags_are_refused_naming_the_fix(argv, says, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "prism.cli.slots", *argv],
        capture_output=True,
        text=True,
        env={"PRISM_SLOT_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
    )
    assert out.returncode == 2 and says in out.stderr

"""Progress shows on a terminal only: logs and CI keep the commands' own lines."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from prism.progress import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_when_not_a_terminal():
    stream = io.StringIO()
    assert list(progress(range(3), "indexing", stream=stream)) == [0, 1, 2]
    assert stream.getvalue() == ""


def test_counts_on_a_terminal_and_clears_its_line():
    stream = Terminal()
    assert list(progress(["a", "b"], "indexing train", stream=stream, bar=False)) == ["a", "b"]
    text = stream.getvalue()
    assert "\r\033[Kindexing train: 0/2" in text and "\r\033[Kindexing train: 1/2" in text
    assert text.endswith("\r\033[K")


def on_terminal(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> tuple[int, str]:
    """(exit status, what the terminal showed) of `python -m prism ARGS` on a pseudo-terminal of 100 columns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # tqdm draws to the width
    proc = subprocess.Popen(
        [sys.executable, "-m", "prism", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, **(env or {})},
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=timeout), b"".join(chunks).decode(errors="replace")


CALIBRATE = ["isoflop", "calibrate", "--family", "text_image", "--backbone", "30k", "--projector-variant", "BASE"]
TIMED = ["--device", "cpu", "--threads", "1", "--measure-throughput", "--batch-size", "2", "--steps", "3"]


@pytest.mark.slow
def test_a_long_command_shows_progress_on_a_terminal_and_nothing_in_a_log(tmp_path, run_prism):
    """`prism isoflop calibrate` timing steps: a bar on a terminal, cleared after; a log gets only its path."""
    out = tmp_path / "speed.json"
    logged = run_prism(*CALIBRATE, *TIMED, "--out", str(out))
    assert logged.returncode == 0, logged.stderr
    assert (logged.stdout, logged.stderr) == (f"{out}\n", "")
    status, shown = on_terminal(*CALIBRATE, *TIMED, "--out", str(tmp_path / "bar.json"))
    assert status == 0, shown
    assert "30k: timed steps:" in shown and "0/5" in shown  # tqdm's bar: two warm-up steps, three timed
    assert shown.endswith(f"\r{tmp_path / 'bar.json'}\r\n")  # the bar cleared, then the command's line
    # Without tqdm (an optional extra): one line rewritten in place, then cleared.
    hidden = tmp_path / "no-tqdm"
    hidden.mkdir()
    (hidden / "tqdm.py").write_text("raise ImportError('not installed')\n")
    path = os.pathsep.join(p for p in (str(hidden), os.environ.get("PYTHONPATH")) if p)
    status, shown = on_terminal(*CALIBRATE, *TIMED, "--out", str(tmp_path / "line.json"), env={"PYTHONPATH": path})
    assert status == 0, shown
    assert "\r\033[K30k: timed steps: 5/5" in shown and "%|" not in shown
    assert shown.endswith(f"\r\033[K{tmp_path / 'line.json'}\r\n")

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

from prism.core.progress import Bar, progress


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
    assert "\r\033[Kindexing train: 0/2" in text and "\r\033[Kindexing train: 2/2" in text
    assert text.endswith("\r\033[K")


def test_a_fast_loop_redraws_a_few_times_not_once_an_item():
    stream = Terminal()
    assert sum(progress(range(20000), "encoding samples", stream=stream, bar=False)) == sum(range(20000))
    text = stream.getvalue()
    assert text.count("\r\033[K") < 100 and "encoding samples: 20000/20000" in text


def test_notes_print_above_the_line_on_a_terminal_and_plainly_elsewhere(capsys):
    stream = Terminal()
    with Bar("sweep", 2, stream=stream, bar=False) as bar:
        bar.describe("cell A")
        bar.note("cell 1/2: A")
        bar.advance()
    assert capsys.readouterr().out == "cell 1/2: A\n"
    # the line cleared before the note and drawn again after it, with what runs now
    assert stream.getvalue().count("sweep: 0/2 cell A") == 2 and stream.getvalue().endswith("\r\033[K")
    quiet = io.StringIO()
    with Bar("sweep", 2, stream=quiet) as bar:
        bar.note("cell 1/2: A")
    assert capsys.readouterr().out == "cell 1/2: A\n" and quiet.getvalue() == ""


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

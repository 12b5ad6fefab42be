"""The training process's surroundings: its log lines on stderr, its age (the start-up figure), and
SIGTERM, which PBS sends at the walltime and on preemption (a stop request the loop reads each step)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

STOPPED_EXIT = 128 + 15  # the shell's status for a SIGTERM-ended process


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), for the start-up figure."""
    try:
        with open("/proc/self/stat") as handle:
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class StopRequest:
    """Set by SIGTERM while installed; the loop reads it once per step (a handler must not do more)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():  # handlers only install there
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)

"""One Ctrl-C stops a study: SIGINT as a plain KeyboardInterrupt that no asyncio loop can take over.

Snakemake runs parts of its scheduling in `asyncio.Runner`s on the main thread. A runner
takes SIGINT over while it runs, but only where the handler is Python's default one, and
then merely cancels its own task: a coroutine that catches the cancellation (as a status
loop does) swallows the interrupt, and the study goes on (resubmitting what was cancelled).
With a handler of our own that raises KeyboardInterrupt the runners leave SIGINT alone,
so the interrupt reaches Snakemake's scheduler, which cancels its jobs and stops.
"""

from __future__ import annotations

import signal
import threading


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def stop_on_first_interrupt() -> bool:
    """Install the handler (main thread, and only over Python's default one); whether it is installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGINT)
    if current is _interrupt:
        return True
    if current is not signal.default_int_handler:
        return False  # someone chose their own: leave it
    signal.signal(signal.SIGINT, _interrupt)
    return True

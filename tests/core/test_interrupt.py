"""One Ctrl-C stops a study even while an asyncio loop that swallows its cancellation runs."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from prism.core.interrupt import stop_on_first_interrupt


async def _status_loop(rounds: int) -> str:
    """A loop that, like a scheduler's status loop, survives the cancellation of its task."""
    for _ in range(rounds):
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            pass
    return "carried on"


def _interrupt_soon() -> None:
    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()


@pytest.fixture
def default_handler():
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _run(coroutine):
    """As Snakemake runs its coroutines: one Runner kept open across calls (`Workflow.async_run`)."""
    runner = asyncio.Runner()
    try:
        return runner.run(coroutine)
    finally:
        runner.close()  # lets the swallowing loop run out its rounds


def test_without_the_handler_the_loop_swallows_the_interrupt(default_handler):
    _interrupt_soon()
    assert _run(_status_loop(25)) == "carried on"


def test_with_the_handler_the_interrupt_reaches_the_caller(default_handler):
    assert stop_on_first_interrupt() and stop_on_first_interrupt()  # installing twice is harmless
    _interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        _run(_status_loop(50))


def test_a_handler_someone_chose_is_left_alone(default_handler):
    def mine(signum, frame):
        pass

    signal.signal(signal.SIGINT, mine)
    assert not stop_on_first_interrupt() and signal.getsignal(signal.SIGINT) is mine

"""One trainer per run directory: an exclusive `flock` on `RUNDIR/.lock` for the process's lifetime.

Two trainers writing one run directory (a `snakemake` killed alone leaves its
`prism train` running; `--unlock` and a rerun start a second one; two workdirs
naming the same study) interleave checkpoints and log rows. The lock is taken
with `flock(LOCK_EX)` on an open file, so the kernel releases it when the holder
exits, however it exits (SIGKILL included): a stale lock cannot outlive its
process. A forked child (a streaming DataLoader worker) closes its copy of the
descriptor at once, so a trainer killed alone does not leave its workers holding
it. The file records the holder's PID, host and start time for the message a
second trainer prints. On a filesystem without `flock` support (some Lustre or
NFS mounts) the run proceeds unlocked with a warning.

Only rank 0 of a multi-process run takes the lock; the other ranks are its
children under one launcher.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import sys
import time
from pathlib import Path

from prism.core.errors import PrismError

LOCK_NAME = ".lock"
WAIT_ENV = "PRISM_LOCK_WAIT"  # "1": wait for the holder instead of exiting
_HELD: set[int] = set()  # the lock descriptors this process holds


def _close_in_child() -> None:
    """In a forked child: drop the inherited lock descriptors (the parent's lock stays held by its own)."""
    for fd in _HELD:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


os.register_at_fork(after_in_child=_close_in_child)


def lock_path(run_dir: Path) -> Path:
    return Path(run_dir) / LOCK_NAME


def holder(run_dir: Path) -> str:
    """Who holds the lock, as its file says ("PID 123 on host n1 since ...")."""
    try:
        text = lock_path(run_dir).read_text().strip()
    except OSError:
        text = ""
    return text or "an unknown process"


class RunLock:
    """`with RunLock(run_dir, wait=False):` holds the run directory's lock (creates the directory)."""

    def __init__(self, run_dir: str | os.PathLike, wait: bool | None = None):
        self.run_dir = Path(run_dir)
        self.wait = os.environ.get(WAIT_ENV) == "1" if wait is None else wait
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path(self.run_dir), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _try_lock(fd, self.run_dir, blocking=False):
                if not self.wait:
                    raise PrismError(
                        f"{self.run_dir} is being trained by {holder(self.run_dir)}; a second "
                        "trainer would corrupt it. Wait for that process to end (or stop it), "
                        f"or pass --wait-lock (or {WAIT_ENV}=1) to wait for it"
                    )
                print(
                    f"{self.run_dir}: waiting for {holder(self.run_dir)} to release the run directory",
                    file=sys.stderr,
                    flush=True,
                )
                _try_lock(fd, self.run_dir, blocking=True)
        except BaseException:
            os.close(fd)
            raise
        stamp = f"PID {os.getpid()} on host {socket.gethostname()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, (stamp + "\n").encode(), 0)
        self._fd = fd
        _HELD.add(fd)
        return self

    def release(self) -> None:
        if self._fd is not None:
            _HELD.discard(self._fd)
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_lock(fd: int, run_dir: Path, blocking: bool) -> bool:
    """True when locked; False when another process holds it (non-blocking only)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError as err:
        if err.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            print(
                f"warning: {run_dir}: the filesystem does not support flock ({err.strerror}); "
                "training without the one-trainer lock",
                file=sys.stderr,
                flush=True,
            )
            return True
        raise

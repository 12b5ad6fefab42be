"""A fork server for the `prism` commands of a local study: start-up paid once, not per job.

A study's jobs are short (a segment or a branch of a small model trains for seconds)
and each is a new `prism` process that imports torch, its compiler stack (which
`torch.optim` and the distributed checkpoint API pull in) and prism before doing
anything: seconds per job, a large share of a study of a hundred jobs on a laptop.
`serve` imports all of that once, tunes the host (`prism.runtime.host`) and then forks one
child per request: the child takes over the requesting process's stdin, stdout and
stderr, its working directory, environment and arguments, and runs `prism.cli.main`
exactly as a fresh process would.

`run(argv)` is the requesting side, called by the `prism` entry point: when
`PRISM_WORKER` names a socket that answers, it forwards the command, relays SIGINT,
SIGTERM and SIGHUP to the child and returns the child's exit status; otherwise (no
worker, a dead socket, inside a PBS or Slurm job, where the job must run on its own
node, or a rank under torchrun) it returns None and the command runs in its own process as always. So nothing
depends on the worker being there: it only makes starting faster.

Protocol over a Unix socket: the client sends an 8-byte length, then a JSON header (argv,
cwd, env, the hash of its prism source); the child answers with a 4-byte verdict. It serves
only the code it imported: a client whose source differs (prism edited since the worker
started) is refused and runs the command in its own process, as it does when no verdict
comes within $PRISM_WORKER_TIMEOUT seconds (a stopped worker). An accepted client sends 0
(go) with its fds 0-2 (SCM_RIGHTS), then may send 4-byte signal numbers; the child answers
with a 4-byte exit status. A child whose client goes away terminates itself (SIGTERM), as
the job it ran for was killed. The worker resolves its revision (`git_rev`) when it starts:
what its children record is the code they run.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ENV = "PRISM_WORKER"
# Processes that must stay themselves: a batch job's command runs on its own node, never
# through a worker of the submitting host, and torchrun watches the ranks it started.
OWN_PROCESS_ENV = ("PBS_JOBID", "SLURM_JOB_ID", "LOCAL_RANK")
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_LENGTH = struct.Struct("!Q")
_STATUS = struct.Struct("!i")
_ACCEPTED, _REFUSED, _GO = 0, 1, 0
TIMEOUT_ENV = "PRISM_WORKER_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0
_finished = threading.Event()  # in a child: its command has ended
_served: dict[str, str] = {}  # in the server: the source hash and revision of the code it imported


# ---- the requesting side -------------------------------------------------------------


def run(argv: list[str]) -> int | None:
    """Run `prism ARGV` in the worker named by $PRISM_WORKER; its exit status, or None to run it here."""
    path = os.environ.get(ENV)
    if not path or argv[:1] == ["worker"] or any(name in os.environ for name in OWN_PROCESS_ENV):
        return None
    from prism.core.revision import source_hash

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(_timeout())
    try:
        conn.connect(path)
        header = json.dumps(
            {"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ), "source": source_hash()}
        ).encode()
        conn.sendall(_LENGTH.pack(len(header)) + header)
        verdict = _recv_exactly(conn, _STATUS.size)
    except TimeoutError:
        conn.close()
        print(
            f"prism: the worker at {path} did not answer within {_timeout():g} s ({TIMEOUT_ENV}): "
            "running in this process",
            file=sys.stderr,
        )
        return None
    except OSError:  # no worker (anymore), or a closed std stream: run here
        conn.close()
        return None
    if len(verdict) < _STATUS.size or _STATUS.unpack(verdict)[0] != _ACCEPTED:
        conn.close()
        if verdict:
            print(
                f"prism: the worker at {path} runs other prism code (edited since it started): running in this process",
                file=sys.stderr,
            )
        return None
    try:  # the std streams go only to a child that answered: none is left in a socket nobody reads
        conn.settimeout(None)
        socket.send_fds(conn, [_STATUS.pack(_GO)], [0, 1, 2])
    except OSError:
        conn.close()
        return None
    previous = {sig: signal.signal(sig, lambda signum, frame: _send(conn, signum)) for sig in FORWARDED_SIGNALS}
    try:
        reply = _recv_exactly(conn, _STATUS.size)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        conn.close()
    if len(reply) < _STATUS.size:
        print(f"prism: the worker's process at {path} ended without an exit status (killed?)", file=sys.stderr)
        return 1
    return _STATUS.unpack(reply)[0]


def _timeout() -> float:
    try:
        return max(0.1, float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _send(conn: socket.socket, signum: int) -> None:
    try:
        conn.sendall(_STATUS.pack(signum))
    except OSError:
        pass


def _recv_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


# ---- the serving side ----------------------------------------------------------------


def preload(build_parser: Callable[[], object]) -> None:
    """Import what a training job imports (torch, its compiler stack, the distributed checkpoint API, prism,
    its CPU kernels); `build_parser` is the CLI's, which imports every command's module."""
    from prism.runtime.host import tune_host

    tune_host()  # before torch: the children inherit the allocator settings and the environment
    import torch._dynamo  # noqa: F401  (torch.optim and DCP import it on first use)
    import torch.distributed.checkpoint.state_dict  # noqa: F401

    import prism.isoflop.design.calibrate  # noqa: F401
    import prism.train.lifecycle  # noqa: F401
    from prism.model import kernels

    kernels.load()  # the compiled CPU kernels (a shared library; no torch operation runs)
    build_parser()
    from prism.core.revision import git_rev, source_hash

    # What it serves: resolved now, so children record the code they run, not the checkout's later state.
    _served.update(source=source_hash(), rev=git_rev())
    gc.freeze()  # the collector leaves what is loaded now alone: children do not copy its pages


def serve(
    path: str | Path,
    main: Callable[[list[str]], int],
    build_parser: Callable[[], object],
    parent: int | None = None,
    idle_timeout: float = 3600.0,
) -> None:
    """Answer requests on the socket `path` until `parent` exits or nothing came for `idle_timeout` s.

    `main` runs each request's argv (the CLI's entry point) and `build_parser` is imported ahead of them:
    both come from the CLI, which calls this module's `run` first, so this module imports nothing of it.

    Runs no torch operation itself: its children fork from a process whose thread pools
    were never started, so each starts as a fresh process would after its imports.
    """
    path = Path(path)
    preload(build_parser)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound under another name and renamed once listening: a client that finds `path` is answered
    # (the workflow starts its jobs when `path` exists; one refused would run in its own process).
    bound = path.with_name(path.name + ".bound")
    bound.unlink(missing_ok=True)
    server.bind(str(bound))
    os.chmod(bound, 0o600)
    server.listen(16)
    os.replace(bound, path)
    print(f"prism worker: serving revision {_served['rev']} (source {_served['source'][:12]}) on {path}", flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGTERM, _terminate)  # stop: through `finally`, which removes the socket
    last = time.monotonic()
    try:
        while (parent is None or os.getppid() == parent) and time.monotonic() - last < idle_timeout:
            if not select.select([server], [], [], 2.0)[0]:
                continue
            conn, _ = server.accept()
            last = time.monotonic()
            if os.fork() == 0:
                try:
                    server.close()
                    _child(conn, main)
                finally:  # whatever happened, a child never returns into this loop or its cleanup
                    os._exit(1)
            conn.close()
    finally:
        server.close()
        path.unlink(missing_ok=True)


def _child(conn: socket.socket, main: Callable[[list[str]], int]) -> None:
    """Become the requesting process (fds, cwd, environment, arguments), run the command, report, exit."""
    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # subprocesses of the command are waited for again
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _terminate)
        signal.signal(signal.SIGHUP, _terminate)
        os.setsid()
        log = os.fdopen(os.dup(1), "w")  # the worker's own stdout (its log), before it becomes the client's
        request = json.loads(_recv_exactly(conn, _LENGTH.unpack(_recv_exactly(conn, _LENGTH.size))[0]))
        if request.get("source") != _served.get("source"):  # other code than this process imported
            print(f"[{os.getpid()}] refused (other source): prism {' '.join(request['argv'])}", file=log, flush=True)
            _send(conn, _REFUSED)
            os._exit(0)
        _send(conn, _ACCEPTED)
        go, fds, _, _ = socket.recv_fds(conn, _STATUS.size, 3)
        if go != _STATUS.pack(_GO) or len(fds) != 3:  # the client gave up waiting: not ours to run
            os._exit(0)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["prism", *request["argv"]]
        print(f"[{os.getpid()}] prism {' '.join(request['argv'])}", file=log, flush=True)
        threading.Thread(target=_relay_signals, args=(conn,), daemon=True).start()
        status = main(request["argv"])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever it was, the client gets a status
        traceback.print_exc()
    finally:
        # Done: from here no signal may interrupt (the client, once answered, closes the connection,
        # which the relay thread would otherwise take for the client's death).
        _finished.set()
        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        _send(conn, status)
        os._exit(status & 0xFF)


def _terminate(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def _relay_signals(conn: socket.socket) -> None:
    """Deliver the client's signals to this process; the client gone is a SIGTERM."""
    while True:
        data = _recv_exactly(conn, _STATUS.size)
        if _finished.is_set():
            return
        if len(data) < _STATUS.size:
            os.kill(os.getpid(), signal.SIGTERM)
            return
        os.kill(os.getpid(), _STATUS.unpack(data)[0])

"""worker: a `prism` command served by the fork server is the command run in its own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PRISM = [sys.executable, "-m", "prism"]


def wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def worker(tmp_path):
    """A running `prism worker serve`; yields its socket path and its log."""
    sock, log = tmp_path / "w.sock", tmp_path / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*PRISM, "worker", "serve", "--socket", str(sock)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for(sock.exists, what="the worker's socket")
        yield sock, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert not sock.exists()  # stopped cleanly: the socket is gone


def prism(args, env_extra=None, cwd=None, **kw):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([*PRISM, *args], env=env, cwd=cwd, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def data(shards):
    """The session's text_image shards (runs only read them)."""
    return shards


def train_args(data: Path, out: str, budget: str = "3e9") -> list[str]:
    return [
        "train",
        "--family",
        "text_image",
        "--backbone",
        "4k",
        "--variant",
        "BASE",
        "--regime",
        "e2e",
        "--budget",
        budget,
        "--data",
        str(data),
        "--out",
        out,
        "--device",
        "cpu",
        "--threads",
        "1",
        "--global-batch",
        "8",
        "--eval-samples",
        "16",
        "--final-eval-samples",
        "64",
    ]


def start_served_run(sock: Path, data: Path, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """A long training run through the worker, once it is stepping; (its client, its output file)."""
    err = tmp_path / "err.txt"
    with err.open("w") as fh:
        client = subprocess.Popen(
            [*PRISM, *train_args(data, str(tmp_path / "run"), budget="2e11")],
            env={**os.environ, "PRISM_WORKER": str(sock)},
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    wait_for(lambda: "step " in err.read_text(), what="the run's first steps")
    return client, err


def test_output_and_exit_status_are_the_commands(worker):
    sock, log = worker
    served = prism(["model", "list", "--json"], {"PRISM_WORKER": str(sock)})
    alone = prism(["model", "list", "--json"])
    assert served.returncode == alone.returncode == 0 and json.loads(served.stdout) == json.loads(alone.stdout)
    bad = prism(["train", "--no-such-flag"], {"PRISM_WORKER": str(sock)})
    assert bad.returncode == 2 and "unrecognized arguments: --no-such-flag" in bad.stderr
    assert "prism model list --json" in log.read_text()  # the worker, not the client, ran them


def test_a_served_run_trains_the_same_model_in_the_callers_directory(worker, data, tmp_path):
    sock, log = worker
    for name, env in (("served", {"PRISM_WORKER": str(sock)}), ("alone", {})):
        (tmp_path / name).mkdir()
        done = prism(train_args(data, "run"), env, cwd=tmp_path / name)  # a relative --out: the caller's cwd
        assert done.returncode == 0, done.stderr
    served, alone = (json.loads((tmp_path / n / "run" / "metrics.json").read_text()) for n in ("served", "alone"))
    assert served["loss"] == alone["loss"] and served["steps"] == alone["steps"]
    assert "prism train" in log.read_text()


def test_a_stopped_client_stops_its_run(worker, data, tmp_path):
    client, err = start_served_run(worker[0], data, tmp_path)
    client.send_signal(signal.SIGTERM)  # what Snakemake sends a job it cancels
    assert client.wait(timeout=60) == 128 + signal.SIGTERM
    assert "stopped (SIGTERM" in err.read_text()  # the run itself got it, and checkpointed


def test_a_killed_client_takes_its_run_with_it(worker, data, tmp_path):
    client, err = start_served_run(worker[0], data, tmp_path)
    client.kill()  # no chance to pass anything on: the run sees its client's connection close
    client.wait()
    wait_for(lambda: "stopped (SIGTERM" in err.read_text(), timeout=30, what="the orphaned run to stop")


def test_without_a_worker_the_command_runs_in_its_own_process(tmp_path):
    done = prism(["model", "list"], {"PRISM_WORKER": str(tmp_path / "nobody.sock")})
    assert done.returncode == 0 and "backbone" in done.stdout
    in_a_job = prism(["model", "list"], {"PRISM_WORKER": str(tmp_path / "nobody.sock"), "PBS_JOBID": "1.pbs"})
    assert in_a_job.returncode == 0


def test_an_idle_worker_exits_and_removes_its_socket(tmp_path):
    sock = tmp_path / "w.sock"
    done = subprocess.run([*PRISM, "worker", "serve", "--socket", str(sock), "--idle-timeout", "1"], timeout=120)
    assert done.returncode == 0 and not sock.exists()


def test_a_worker_serves_only_the_code_it_imported(tmp_path):
    import shutil

    import prism as package

    src = tmp_path / "src"
    shutil.copytree(Path(package.__file__).parent, src / "prism", ignore=shutil.ignore_patterns("__pycache__"))
    # Not a git checkout: the revision is the environment's; cwd is tmp_path, so `-m prism` imports the copy.
    env = {"PYTHONPATH": str(src), "PRISM_GIT_REV": "old-rev"}
    sock, log = tmp_path / "w.sock", tmp_path / "worker.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [*PRISM, "worker", "serve", "--socket", str(sock)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            cwd=tmp_path,
        )
    try:
        wait_for(sock.exists, what="the worker's socket")
        assert "serving revision old-rev (source " in log.read_text()  # resolved when it started
        served = prism(["model", "list"], {**env, "PRISM_WORKER": str(sock)}, cwd=tmp_path)
        assert served.returncode == 0 and "prism model list" in log.read_text()
        with (src / "prism" / "core" / "ids.py").open("a") as f:  # prism edited while the worker runs
            f.write("\n# edited\n")
        edited = prism(
            ["model", "list", "--json"], {**env, "PRISM_WORKER": str(sock), "PRISM_GIT_REV": "new-rev"}, cwd=tmp_path
        )
        assert edited.returncode == 0 and json.loads(edited.stdout)  # ran, in its own process
        assert "runs other prism code (edited since it started): running in this process" in edited.stderr
        assert "refused (other source): prism model list --json" in log.read_text()
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_worker_that_never_answers_does_not_hang_the_command(tmp_path):
    import socket

    sock = tmp_path / "stopped.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # accepts connections, never answers
    listener.bind(str(sock))
    listener.listen(4)
    try:
        started = time.monotonic()
        done = prism(["model", "list"], {"PRISM_WORKER": str(sock), "PRISM_WORKER_TIMEOUT": "1"}, timeout=120)
        assert done.returncode == 0 and "backbone" in done.stdout
        assert "did not answer within 1 s (PRISM_WORKER_TIMEOUT): running in this process" in done.stderr
        assert time.monotonic() - started < 60
    finally:
        listener.close()


def test_the_socket_appears_only_once_it_listens(tmp_path, monkeypatch):
    """The workflow starts its jobs once the socket exists: a job connecting then is answered, never
    refused (a refused job would run in its own process, importing torch again)."""
    import socket

    from prism.workflow import worker as served

    sock, seen = tmp_path / "w.sock", []

    class Recording(socket.socket):
        def listen(self, *args):
            seen.append(sock.exists())
            super().listen(*args)

    monkeypatch.setattr(served, "preload", lambda build_parser: None)  # no imports: only the socket's order
    monkeypatch.setattr(served, "_served", {"source": "s", "rev": "r"})
    monkeypatch.setattr(served.socket, "socket", Recording)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGCHLD, signal.SIGTERM)}
    try:
        served.serve(sock, main=lambda argv: 0, build_parser=lambda: None, idle_timeout=0.01)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert seen == [False] and not sock.exists()

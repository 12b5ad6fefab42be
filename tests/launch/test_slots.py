"""Slots: a run of a pack claims a free device of its node, is pinned to it, and records it."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from prism.launch import slots
from prism.launch.aurora import CPU_CORES


def test_each_claim_takes_a_free_slot_and_a_held_slot_is_never_given_twice(tmp_path):
    [(first, fd0)] = slots.claim(3, tmp_path)
    [(second, fd1)] = slots.claim(3, tmp_path)
    assert (first, second) == (0, 1)
    os.close(fd0)  # released: the next claim takes it again
    [(third, fd2)] = slots.claim(3, tmp_path)
    assert third == 0
    os.close(fd1), os.close(fd2)


def test_a_spread_run_holds_several_slots_at_once_and_frees_them_all(tmp_path):
    [(_, fd0)] = slots.claim(4, tmp_path)
    held = slots.claim(4, tmp_path, devices=2)
    assert [slot for slot, _ in held] == [1, 2]
    assert [slot for slot, _ in slots.claim(4, tmp_path)] == [3]
    for _, fd in held:
        os.close(fd)
    assert [slot for slot, _ in slots.claim(4, tmp_path, devices=2)] == [1, 2]
    os.close(fd0)


def test_a_claim_waits_while_every_slot_is_held(tmp_path):
    [(held, fd)] = slots.claim(1, tmp_path)
    got = []
    waiter = threading.Thread(target=lambda: got.append(slots.claim(1, tmp_path, poll_s=0.05)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not got
    os.close(fd)
    waiter.join(5)
    assert got and got[0][0][0] == held
    os.close(got[0][0][1])


def test_waiting_claims_are_served_in_arrival_order_a_spread_one_not_overtaken(tmp_path):
    """Snakemake starts a pack's jobs in priority order: they get devices in that order, even when a later
    one-device claim could fit where an earlier two-device one cannot yet."""
    first = slots.claim(2, tmp_path, devices=2)
    order, waiters = [], []
    for name, devices in (("wide", 2), ("a", 1), ("b", 1)):

        def wait(name=name, devices=devices):
            held = slots.claim(2, tmp_path, poll_s=0.02, devices=devices)
            order.append(name)
            time.sleep(0.2)
            for _, fd in held:
                os.close(fd)

        waiters.append(threading.Thread(target=wait))
        waiters[-1].start()
        time.sleep(0.2)  # arrival order: wide, a, b
    os.close(first[0][1])  # one slot free: "a" fits, but "wide" came first
    time.sleep(0.3)
    assert order == []
    os.close(first[1][1])
    for waiter in waiters:
        waiter.join(10)
    assert order[0] == "wide" and sorted(order[1:]) == ["a", "b"]


def test_a_dead_claimants_ticket_does_not_block_the_queue(tmp_path):
    (tmp_path / "queue").mkdir()
    (tmp_path / "queue" / "000000000000-999999999").touch()  # no such process
    [(slot, fd)] = slots.claim(1, tmp_path, poll_s=0.02)
    assert slot == 0 and not list((tmp_path / "queue").iterdir())
    os.close(fd)


def test_a_slot_pins_the_device_variable_and_the_cores():
    assert slots.environment(3, "xpu", CPU_CORES[3])["ZE_AFFINITY_MASK"] == "3"
    assert slots.environment(1, "cuda", [2, 3])["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in slots.environment(1, "cpu", [1])
    assert slots.environment(1, "cpu", [4, 5])["PRISM_SLOT_CORES"] == "4,5"
    # Aurora's per-tile list for xpu; an even share of this process's cores otherwise
    assert slots.slot_cores(6, 12, "xpu", list(range(208))) == "56-59"
    assert slots.slot_cores(1, 4, "cpu", list(range(8))) == [2, 3]
    assert slots.slot_cores(3, 4, "cpu", [0, 1]) == [1]
    assert slots.core_set("4-7,9") == {4, 5, 6, 7, 9}
    # a spread run: its devices listed, and one core list a rank for mpiexec's --cpu-bind
    two = slots.environment([2, 3], "xpu", [CPU_CORES[2], CPU_CORES[3]])
    assert two["ZE_AFFINITY_MASK"] == "2,3" and two["PRISM_SLOT"] == "2"
    assert two["PRISM_SLOT_CORES"] == "12-15:16-19" and slots.core_set(two["PRISM_SLOT_CORES"]) == set(range(12, 20))


def test_a_pinned_command_runs_on_its_slot_and_is_recorded_in_its_run_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("PBS_JOBID", "123.server")
    run = tmp_path / "run"
    run.mkdir()
    body = run / "launch.sh"
    body.write_text('echo "$PRISM_SLOT $PRISM_SLOT_CORES" > "$(dirname "$0")/seen"\nexit 3\n')
    status = slots.run_pinned(["bash", str(body)], 2, "cpu", folder=tmp_path / "slots")
    assert status == 3
    record = json.loads((run / "slots.jsonl").read_text())
    assert record["slot"] == 0 and record["job"] == "123.server" and record["exit"] == 3
    assert record["start"] <= record["end"]
    assert (run / "seen").read_text().split()[0] == "0"


def test_a_one_rank_aurora_body_binds_to_the_cores_of_the_slot_it_holds():
    from prism.launch.aurora import render_aurora
    from prism.train.config import RunConfig

    run = RunConfig(family="text_image", backbone="30k", variant="BASE", regime="e2e", budget=1e10,
                    data="d", out="o", global_batch=8)  # fmt: skip
    body = render_aurora(run, nodes=1, procs_per_node=1, workdir="/w", venv="")
    assert 'mpiexec -n 1 --ppn 1 --cpu-bind=verbose,list:"${PRISM_SLOT_CORES:-4-7}" python -m prism train' in body
    assert "export MASTER_PORT=${PRISM_SLOT_PORT:-$((29500 + ${PRISM_SLOT:-0}))}" in body
    # A run spread over two slots of a pack: its ranks on the slots' cores, at a port of its own.
    two = render_aurora(dataclasses.replace(run, strategy="hsdp"), nodes=1, procs_per_node=2, workdir="/w", venv="")
    assert 'mpiexec -n 2 --ppn 2 --cpu-bind=verbose,list:"${PRISM_SLOT_CORES:-4-7:8-11}" python' in two
    whole = render_aurora(dataclasses.replace(run, strategy="ddp", global_batch=24), nodes=1, procs_per_node=12,
                          workdir="/w", venv="")  # fmt: skip
    assert "--cpu-bind=verbose,list:4-7:8-11:12-15:16-19:" in whole and "PRISM_SLOT" not in whole


def test_a_ticket_whose_pid_was_reused_does_not_block_the_queue(tmp_path):
    """The claimant died and its pid went to another live process: the ticket names a start time that process
    does not have, so it is dropped."""
    (tmp_path / "queue").mkdir()
    reused = os.getppid()  # alive, and not the claimant that took the ticket
    (tmp_path / "queue" / f"000000000000-{reused}-{slots.start_time(reused) + 1}").touch()
    [(slot, fd)] = slots.claim(1, tmp_path, poll_s=0.02)
    assert slot == 0 and not list((tmp_path / "queue").iterdir())
    os.close(fd)
    assert slots.ticket_alive(f"000000000001-{os.getpid()}-{slots.start_time(os.getpid())}")


def test_slots_are_the_nodes_whichever_job_claims_them(tmp_path, monkeypatch):
    """Two scheduler jobs sharing a node (a non-exclusive queue) claim from one folder, and every claim has a
    rendezvous port of its own."""
    monkeypatch.delenv("PRISM_SLOT_DIR", raising=False)
    monkeypatch.setenv("PBS_JOBID", "1.server")
    first = slots.slot_folder()
    monkeypatch.setenv("PBS_JOBID", "2.server")
    assert slots.slot_folder() == first and str(first).startswith("/tmp/prism-slots-")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a job's own TMPDIR does not move the node's slots
    assert slots.slot_folder() == first
    held = [slots.claim(4, tmp_path)[0] for _ in range(4)]
    ports = [slots.held_port(fd) for _, fd in held]
    assert len(set(ports)) == 4 and all(ports), ports
    for _, fd in held:
        os.close(fd)


SLOT_COMMAND = """
import os, signal, sys, time
mode, folder = sys.argv[1], sys.argv[2]
def on_term(signum, frame):
    open(os.path.join(folder, "got-sigterm"), "w").close()
    sys.exit(143)
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "deaf" else on_term)
open(os.path.join(folder, "pid.tmp"), "w").write(str(os.getpid()))
os.rename(os.path.join(folder, "pid.tmp"), os.path.join(folder, "pid"))
time.sleep(120)
"""


def wrapped_run(tmp_path, mode: str) -> tuple[subprocess.Popen, int]:
    """A run under the slot wrapper (`python -m prism.cli.slots`) holding the node's one slot: (the
    wrapper, the run's pid)."""
    (tmp_path / "command.py").write_text(SLOT_COMMAND)
    env = {**os.environ, "PRISM_SLOT_DIR": str(tmp_path / "slots"), "PYTHONPATH": str(Path.cwd())}
    argv = [sys.executable, "-m", "prism.cli.slots", "--slots", "1", "--device", "cpu", "--",
            sys.executable, str(tmp_path / "command.py"), mode, str(tmp_path)]  # fmt: skip
    wrapper = subprocess.Popen(argv, env=env)
    for _ in range(200):
        if (tmp_path / "pid").exists():
            return wrapper, int((tmp_path / "pid").read_text())
        time.sleep(0.05)
    wrapper.kill()
    raise AssertionError("the wrapped run did not start")


def claim_in_background(folder: Path) -> tuple[threading.Thread, list]:
    got: list = []
    thread = threading.Thread(target=lambda: got.append(slots.claim(1, folder, poll_s=0.05)), daemon=True)
    thread.start()
    return thread, got


def test_a_run_whose_wrapper_is_killed_keeps_its_slot_while_it_lives(tmp_path):
    """SIGKILL of the wrapper: its run (deaf to SIGTERM here) still holds the slot, so no other run gets the
    device until it has gone."""
    wrapper, run = wrapped_run(tmp_path, "deaf")
    wrapper.kill()
    wrapper.wait()
    thread, got = claim_in_background(tmp_path / "slots" / slots.slot_folder().name)
    thread.join(1.5)
    assert not got and slots.alive(run), "a second run got the slot of a live one"
    os.kill(run, signal.SIGKILL)
    thread.join(10)
    assert got and got[0][0][0] == 0
    os.close(got[0][0][1])


def test_a_run_is_sent_sigterm_when_its_wrapper_dies_and_frees_its_slot(tmp_path):
    """SIGKILL of the wrapper: its run gets SIGTERM (to checkpoint and end), and the slot is free once it has."""
    wrapper, run = wrapped_run(tmp_path, "checkpoint")
    wrapper.kill()
    wrapper.wait()
    thread, got = claim_in_background(tmp_path / "slots" / slots.slot_folder().name)
    thread.join(10)
    assert got and (tmp_path / "got-sigterm").exists() and not slots.alive(run)
    os.close(got[0][0][1])

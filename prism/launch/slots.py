"""Pin one run of a pack to a free device of its node: claim a slot, run the command there, release it.

A pack (prism.workflow.packing) is one scheduler job whose Snakemake runs several one-device jobs
at once. Each job's command starts with

    python -m prism.launch.slots --slots N --device xpu -- COMMAND...

which takes the first free of the node's N slots: slot i is an `flock`ed file in a folder of this
scheduler job (keyed by $PBS_JOBID, else $SLURM_JOB_ID, else the host), held while the command runs
and released when it exits, however it exits (the kernel drops the lock with the process). No two
running commands of a job ever hold one slot; a command that finds none free waits for one. Slot i
is device i: `ZE_AFFINITY_MASK=i` (xpu: tile i in Aurora's flat device hierarchy),
`CUDA_VISIBLE_DEVICES=i` (cuda), and its own cores: Aurora's per-tile `--cpu-bind` list for xpu
(`$PRISM_SLOT_CORES`, which a one-rank aurora body binds to), else an even share of the cores this
process may use; the command runs on them (sched_setaffinity).

Each claim is recorded in the run's directory (`slots.jsonl` beside a job body `bash DIR/launch.sh`,
else `OUT.slots.jsonl` of the command's `--out OUT`): slot, device, cores, scheduler job, host, start
and end times and exit status, so that one can check that no two runs that overlapped shared a slot.
A SIGTERM (the scheduler's walltime) or SIGINT is passed on to the command, which checkpoints; the
slot is released when it has exited.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prism.launch.aurora import CPU_CORES

# The variable that shows a process only its slot's device (auto: whichever the host has).
DEVICE_VARS = {
    "xpu": ("ZE_AFFINITY_MASK",),
    "cuda": ("CUDA_VISIBLE_DEVICES",),
    "auto": ("CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"),
}
POLL_S = 2.0


def job_key() -> str:
    """This scheduler job (PBS, else Slurm), else this host: the slots belong to one job's node."""
    key = os.environ.get("PBS_JOBID") or os.environ.get("SLURM_JOB_ID") or socket.gethostname()
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def slot_folder(root: str | None = None) -> Path:
    """The folder of this job's slot files (node-local temporary space unless $PRISM_SLOT_DIR)."""
    base = root or os.environ.get("PRISM_SLOT_DIR") or tempfile.gettempdir()
    return Path(base) / f"prism-slots-{job_key()}"


def slot_cores(slot: int, slots: int, device: str, available: list[int]) -> list[int] | str:
    """The cores of `slot`: Aurora's list for a tile (text, as mpiexec --cpu-bind takes it), else an even
    share of `available` (one core, shared, when there are fewer cores than slots)."""
    if device == "xpu" and slots <= len(CPU_CORES):
        return CPU_CORES[slot]
    cores = sorted(available)
    if len(cores) < slots:
        return [cores[slot % len(cores)]]
    share = len(cores) // slots
    return cores[slot * share : (slot + 1) * share]


def core_set(cores: list[int] | str) -> set[int]:
    """A core list or `a-b` text as a set of core numbers."""
    if isinstance(cores, list):
        return set(cores)
    out: set[int] = set()
    for part in cores.split(","):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


def claim(slots: int, folder: Path, poll_s: float = POLL_S) -> tuple[int, int]:
    """(slot, open locked file descriptor) of the first free slot; waits while all are held."""
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        for slot in range(slots):
            fd = os.open(folder / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return slot, fd
        time.sleep(poll_s)


def record_path(command: list[str]) -> Path | None:
    """Where the claim is recorded: beside the job body (`bash DIR/launch.sh`), else the command's --out."""
    if len(command) >= 2 and Path(command[0]).name == "bash":
        return Path(command[1]).parent / "slots.jsonl"
    if "--out" in command[:-1]:
        return Path(command[command.index("--out") + 1] + ".slots.jsonl")
    return None


def environment(slot: int, device: str, cores: list[int] | str) -> dict[str, str]:
    """The variables that pin the command: its device, and its slot and cores for the job body."""
    env = {var: str(slot) for var in DEVICE_VARS.get(device, ())}
    text = cores if isinstance(cores, str) else ",".join(map(str, cores))
    return {**env, "PRISM_SLOT": str(slot), "PRISM_SLOT_CORES": text}


def run_pinned(command: list[str], slots: int, device: str, folder: Path | None = None) -> int:
    """Run `command` on a free slot (see the module's docstring); its exit status (128 + signal if killed)."""
    folder = folder or slot_folder()
    slot, fd = claim(slots, folder)
    cores = slot_cores(slot, slots, device, sorted(os.sched_getaffinity(0)))
    record = {"slot": slot, "slots": slots, "device": device, "cores": cores, "job": job_key(),
              "host": socket.gethostname(), "start": time.time()}  # fmt: skip
    print(f"prism: slot {slot} of {slots} ({device}, cores {cores}) in job {record['job']}", file=sys.stderr)
    child = subprocess.Popen(
        command,
        env={**os.environ, **environment(slot, device, cores)},
        preexec_fn=lambda: os.sched_setaffinity(0, core_set(cores)),  # noqa: PLW1509 - only sets the affinity
    )
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: child.send_signal(signum))
    status = child.wait()
    status = 128 - status if status < 0 else status
    path = record_path(command)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps({**record, "end": time.time(), "exit": status}) + "\n")
    os.close(fd)  # the slot is free again
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prism.launch.slots", description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, required=True, help="devices of the node (cluster.ranks_per_node)")
    parser.add_argument("--device", default="cpu", help="xpu, cuda, cpu or auto: which variable pins the device")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.slots < 1 or not command:
        parser.error("give --slots N (N >= 1) and a command after --")
    return run_pinned(command, args.slots, args.device)


if __name__ == "__main__":
    sys.exit(main())

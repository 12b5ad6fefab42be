"""Pin one run of a pack to a free device of its node: claim a slot, run the command there, release it.

A pack (prism.workflow.packing) is one scheduler job whose Snakemake runs several one-device jobs
at once. Each job's command starts with

    python -m prism.cli.slots --slots N --device xpu -- COMMAND...

which takes the first free of the node's N slots (`--devices K`, else $PRISM_SLOT_DEVICES: K of
them, for a run spread over K devices): slot i is an `flock`ed file in a folder of the node (and
user: `/tmp/prism-slots-USER-HOST`, or under $PRISM_SLOT_DIR), not of the scheduler job, so that two
jobs sharing a node (Aurora's debug queue is not exclusive) never put runs on one device. The lock
is held for as long as the run lives, whoever dies first: the command inherits the locked file
descriptors (a lock is dropped only when every process holding it has gone), so a wrapper killed
by SIGKILL leaves its slot held by its still-running command; and the command is sent SIGTERM when
its wrapper dies (PR_SET_PDEATHSIG), so it checkpoints and ends rather than run on unwatched. No
two live commands ever hold one slot (a process that the command leaves behind still holding the
descriptor keeps the slot: it may still hold the device). A command that finds too few free waits
its turn: claims are served in arrival order (a ticket in the folder's queue, taken and served
under one lock, named by its claimant's pid and that process's start time, so that a pid reused by
another process does not keep a dead claimant's place), so the order Snakemake starts jobs in
(their priority) is the order they get devices, and a run waiting for K devices is not overtaken by
later one-device runs. Each claim also takes a rendezvous port of its own (`$PRISM_SLOT_PORT`, the
job body's MASTER_PORT): free on the node when claimed, and none that a held slot of the folder
has, so two runs of several ranks never meet at one port. Slot i is device i:
`ZE_AFFINITY_MASK=i` (xpu: tile i in Aurora's flat device hierarchy; `i,j` for two),
`CUDA_VISIBLE_DEVICES=i` (cuda), and its own cores: Aurora's per-tile `--cpu-bind` list for xpu
(`$PRISM_SLOT_CORES`, one list a rank, which a one-node aurora body binds its ranks to), else an
even share of the cores this process may use; the command runs on them (sched_setaffinity).
`$PRISM_SLOT` is the first slot held.

Each claim is recorded in the run's directory (`slots.jsonl` beside a job body `bash DIR/launch.sh`,
else `OUT.slots.jsonl` of the command's `--out OUT`): slot, device, cores, scheduler job, host, start
and end times and exit status, so that one can check that no two runs that overlapped shared a slot.
A SIGTERM (the scheduler's walltime) or SIGINT is passed on to the command, which checkpoints; the
slot is released when it has exited.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import pwd
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from prism.launch.aurora import CPU_CORES

# The program that starts a pack's run on its slots (its flags are prism.cli.slots'); a module run by
# the job's python, not a `prism` verb, so that nothing (no worker, no parser of every group) stands
# between the scheduler job and the lock.
PROGRAM = "prism.cli.slots"

# The variable that shows a process only its slot's device (auto: whichever the host has).
DEVICE_VARS = {
    "xpu": ("ZE_AFFINITY_MASK",),
    "cuda": ("CUDA_VISIBLE_DEVICES",),
    "auto": ("CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"),
}
POLL_S = 1.0
# The devices a packed job claims when --devices is not given: its ranks (rules/training.smk sets it).
DEVICES_ENV = "PRISM_SLOT_DEVICES"
# prctl(2)'s option that sends the calling process a signal when its parent dies.
PR_SET_PDEATHSIG = 1


def job_key() -> str:
    """This scheduler job (PBS, else Slurm), else this host: what a claim's record names."""
    key = os.environ.get("PBS_JOBID") or os.environ.get("SLURM_JOB_ID") or socket.gethostname()
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def node_key() -> str:
    """This user on this node: whose slots these are, whichever scheduler job claims them."""
    user = pwd.getpwuid(os.getuid()).pw_name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{user}-{socket.gethostname()}")


def slot_folder(root: str | None = None) -> Path:
    """The folder of this node's slot files: node-local /tmp unless $PRISM_SLOT_DIR (not $TMPDIR, which a
    job may point at a folder of its own: the slots must be the node's)."""
    base = root or os.environ.get("PRISM_SLOT_DIR") or "/tmp"
    return Path(base) / f"prism-slots-{node_key()}"


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
    """A core list or `a-b,c:d-e` text (one list a rank) as a set of core numbers."""
    if isinstance(cores, list):
        return set(cores)
    out: set[int] = set()
    for part in cores.replace(":", ",").split(","):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


class _Locked:
    """The folder's queue lock, held for a ticket's taking or serving (a blocking flock)."""

    def __init__(self, folder: Path) -> None:
        self.fd = os.open(folder / "queue.lock", os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # drops the lock


def take_ticket(folder: Path) -> Path:
    """This claim's place in the queue: a file named by the next number of the folder's counter."""
    queue = folder / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    with _Locked(folder):
        counter = folder / "tickets"
        number = int(counter.read_text() or 0) + 1 if counter.is_file() else 1
        counter.write_text(str(number))
        ticket = queue / f"{number:012d}-{os.getpid()}-{start_time(os.getpid())}"
        ticket.touch()
    return ticket


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat's 22nd field), None without it:
    with the pid, it names one process for good (a pid is reused, a pid and start time are not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # the fields after the command's name, from the 3rd


def alive(pid: int, started: int | None = None) -> bool:
    """Whether process `pid` runs (a zombie has ended), and is the one started at `started` where given."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return started is None  # no /proc: the pid alone
    return fields[0] != "Z" and (started is None or int(fields[19]) == started)


def ticket_alive(name: str) -> bool:
    """Whether a ticket's claimant (NUMBER-PID-START, or NUMBER-PID of an older ticket) still waits."""
    parts = name.split("-")
    started = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
    return alive(int(parts[1]), started)


def first_waiting(queue: Path) -> str | None:
    """The earliest ticket whose process still waits (a killed claimant's ticket is dropped)."""
    for ticket in sorted(p.name for p in queue.iterdir()):
        if ticket_alive(ticket):
            return ticket
        (queue / ticket).unlink(missing_ok=True)
    return None


def free_slots(slots: int, folder: Path, wanted: int) -> list[tuple[int, int]] | None:
    """`wanted` free slots, locked: [(slot, fd)], or None (and none kept) when fewer are free."""
    held: list[tuple[int, int]] = []
    for slot in range(slots):
        fd = os.open(folder / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        held.append((slot, fd))
        if len(held) == wanted:
            return held
    for _, fd in held:
        os.close(fd)
    return None


def claim(slots: int, folder: Path, poll_s: float = POLL_S, devices: int = 1) -> list[tuple[int, int]]:
    """[(slot, open locked file descriptor)] of `devices` free slots, served in arrival order: waits while
    an earlier claim waits or too few are free."""
    if not 1 <= devices <= slots:
        raise ValueError(f"--devices {devices}: a node of {slots} slots holds 1 to {slots}")
    folder.mkdir(parents=True, exist_ok=True)
    ticket = take_ticket(folder)
    try:
        while True:
            with _Locked(folder):
                if first_waiting(ticket.parent) == ticket.name:
                    held = free_slots(slots, folder, devices)
                    if held is not None:
                        ticket.unlink()
                        take_port(folder, held, slots)
                        return held
            time.sleep(poll_s)
    finally:
        ticket.unlink(missing_ok=True)


def held_port(fd: int) -> int | None:
    """The rendezvous port written in a slot's file (None: none yet)."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def take_port(folder: Path, held: list[tuple[int, int]], slots: int) -> int:
    """A port free on the node and unlike any in the folder's slot files, written in the first held slot's
    file (under the queue lock: no two claims pick at once): the run's rendezvous port."""
    taken = set()
    for slot in range(slots):
        try:
            taken.add(int((folder / f"slot-{slot}.lock").read_text().strip() or 0))
        except (OSError, ValueError):
            continue
    while True:
        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        if port not in taken:
            break
    fd = held[0][1]
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(port).encode(), 0)
    return port


def record_path(command: list[str]) -> Path | None:
    """Where the claim is recorded: beside the job body (`bash DIR/launch.sh`), else the command's --out."""
    if len(command) >= 2 and Path(command[0]).name == "bash":
        return Path(command[1]).parent / "slots.jsonl"
    if "--out" in command[:-1]:
        return Path(command[command.index("--out") + 1] + ".slots.jsonl")
    return None


def cores_text(cores: list[int] | str) -> str:
    return cores if isinstance(cores, str) else ",".join(map(str, cores))


def environment(held: list[int] | int, device: str, cores: list[list[int] | str] | list[int] | str) -> dict[str, str]:
    """The variables that pin the command: its devices, its first slot, and its cores (one list a slot, `:`
    between them, as mpiexec's --cpu-bind list takes one a rank) for the job body."""
    held = [held] if isinstance(held, int) else held
    per_slot = [cores] if len(held) == 1 else cores
    env = {var: ",".join(map(str, held)) for var in DEVICE_VARS.get(device, ())}
    return {**env, "PRISM_SLOT": str(held[0]), "PRISM_SLOT_CORES": ":".join(cores_text(c) for c in per_slot)}


def start_pinned(command: list[str], env: dict[str, str], cores: set[int], fds: list[int]) -> subprocess.Popen:
    """Start `command` on `cores`, holding the slots' locked descriptors `fds` itself (the lock lives as long
    as it does), and sent SIGTERM should this wrapper die first (PR_SET_PDEATHSIG: it checkpoints)."""
    libc = ctypes.CDLL(None, use_errno=True)
    wrapper = os.getpid()

    def in_child() -> None:
        os.sched_setaffinity(0, cores)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != wrapper:  # the wrapper died before the line above: no signal would come
            os.kill(os.getpid(), signal.SIGTERM)

    return subprocess.Popen(command, env=env, pass_fds=fds, preexec_fn=in_child)  # noqa: PLW1509 - no threads


def run_pinned(command: list[str], slots: int, device: str, folder: Path | None = None, devices: int = 1) -> int:
    """Run `command` on `devices` free slots (see the module's docstring); its exit status (128 + signal if killed)."""
    folder = folder or slot_folder()
    held = claim(slots, folder, devices=devices)
    numbers = [slot for slot, _ in held]
    available = sorted(os.sched_getaffinity(0))
    per_slot = [slot_cores(slot, slots, device, available) for slot in numbers]
    cores = set().union(*(core_set(c) for c in per_slot))
    port = held_port(held[0][1])
    record = {"slot": numbers[0], "held": numbers, "slots": slots, "device": device,
              "cores": per_slot[0] if len(per_slot) == 1 else per_slot, "job": job_key(),
              "host": socket.gethostname(), "port": port, "pid": None, "start": time.time()}  # fmt: skip
    print(f"prism: slot(s) {numbers} of {slots} ({device}, cores {per_slot}) in job {record['job']}", file=sys.stderr)
    env = {**os.environ, **environment(numbers, device, per_slot), "PRISM_SLOT_PORT": str(port)}
    child = start_pinned(command, env, cores, [fd for _, fd in held])
    record["pid"] = child.pid
    # Passed on while the command runs; the caller's handlers again after (the wrapper may run in a process
    # that goes on: a test, a probe).
    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    before = {sig: signal.signal(sig, lambda signum, frame: child.send_signal(signum)) for sig in signals}
    try:
        status = child.wait()
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    status = 128 - status if status < 0 else status
    path = record_path(command)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps({**record, "end": time.time(), "exit": status}) + "\n")
    for _, fd in held:
        os.close(fd)  # the slots are free again, once the command's own copies have gone with it
    return status

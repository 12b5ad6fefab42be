"""`prism cluster probe`: a few minutes of the real job body on one node, before the grid is spent.

A cluster study's node-hours and walltimes rest on what one of its jobs costs, and the speed jobs
time synthetic batches on one tile: no loader, no collectives, no start-up, no compile time. The
probe runs what a training job runs (the aurora body: `mpiexec` over a node's ranks, the
collective backend, the streamed loader) for the study's largest size that fits a node (by the
plan's memory estimate), twice, eager and compiled, each stopped with SIGTERM (what PBS sends at
the walltime) after `seconds` of steps, so it writes its checkpoint; a second job resumes the
eager run from that checkpoint. Its record (`<study>/probe/<family>.json`) gives, in seconds: the
job's set-up (module load, venv), the Snakemake job's own start (its DAG, prism's imports), each
body's launch to its first step and, from the trainer (prism.train.startup), the slowest rank's
imports, process group, model build, loader, first batch and first step; the compile time and
its gain in samples/s, the checkpoint at SIGTERM and the resume; and the samples/s of one rank
with the loader. The second job also runs what a pack runs: the study's smallest and largest sizes
that fit one tile (`packed`), each one rank of its own slot (prism.launch.slots) at its planned
micro-batch with the streamed loader, both at once as a pack's runs share a node, in the compile
mode the first job chose; where the study spreads its packs' long runs over several tiles, the
largest also runs so spread (`spread`: one multi-rank run of the study's strategy) beside its
one-tile run, and their ratio is the speed a spread run keeps. The plan prices the study from it
(prism.isoflop.design.pricing: each size from its nearest measured rate; a spread run from the
measured ratio), and each training job compiles only where it measured a gain that the job is long
enough to win back.
A body whose ranks wrote no checkpoint at SIGTERM (a launcher that does not forward it) is said
plainly in the record (`sigterm_warning`) and the plan. Each body runs under limits of its own
(prism.launch.probebody: a start limit, its steps, SIGTERM, a grace, SIGKILL), every one ends before
the job's walltime (`walltime_s`, which the workflow derives from those limits: `job_seconds`), and
the record is written whatever they did (`outcome`; `body_warning` where a body measured nothing).
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

from prism.core.atomic import write_json_atomic
from prism.launch.aurora import render_aurora
from prism.launch.probebody import (
    JOB_STOPPED,
    KILL_WAIT_S,
    TERM_GRACE_S,
    Limits,
    body_limit_s,
    drive_body,
    note_job_stopped,
)
from prism.launch.slots import PROGRAM
from prism.train.config import RunConfig

# Steps no probe reaches: SIGTERM ends every body; evaluations and periodic checkpoints never come due.
NEVER = 10**7
# Compiling pays on jobs of fewer nodes only: the earlier tools' "compile storm" at 10 nodes and more.
COMPILE_MAX_NODES = 9
# The least gain in samples/s for which a study compiles (below it, the compile time is not won back).
COMPILE_MIN_GAIN = 1.05
# Bodies of the first job (eager, compiled) and of the second (the eager run resumed).
FIRST_JOB_BODIES = 2
# What a probe job spends beside its bodies: set-up (module load, venv), Snakemake's start, the peak's matmuls.
JOB_OVERHEAD_S = 300.0
# Kept free at the end of the job's walltime: the record's writing and Snakemake's end of the job.
RECORD_MARGIN_S = 60.0


@dataclass(frozen=True)
class Probe:
    """What the probe runs: the study's largest size that fits one node, as its training jobs would."""

    family: str
    backbone: str
    regime: str
    data: str
    calibration_dir: str
    global_batch: int
    device: str
    strategy: str
    procs_per_node: int
    storage: str
    seconds: float
    folder: str  # the probe's run directories and part records
    walltime_s: float | None = None  # the job's walltime: every body ends RECORD_MARGIN_S before it
    eval_samples: int = 8
    workers: int = 2
    precision: str = "auto"
    why: str = ""  # why this size (prism.workflow.probe.probed_size)
    # A pack's one-tile sizes, (backbone, planned micro-batch), smallest first (prism.workflow.probe.packed_sizes).
    packed: tuple[tuple[str, int], ...] = ()
    # The devices of a pack the largest of them also runs spread over (one multi-rank run; 1: none), where the
    # study spreads its packs' long runs (prism.workflow.probe.spread_devices).
    spread: int = 1

    def run(self, mode: str) -> RunConfig:
        """The run of one compile `mode` (its own run directory, so the two never resume each other)."""
        return RunConfig(
            family=self.family, backbone=self.backbone, variant="BASE", regime=self.regime, budget=1e30,
            data=self.data, out=str(Path(self.folder, f"compile-{mode}")), strategy=self.strategy,
            device=self.device, precision=self.precision, compile=mode, global_batch=self.global_batch, loader="stream",
            workers=self.workers, max_steps=NEVER, eval_every=NEVER, checkpoint_every=NEVER,
            eval_samples=self.eval_samples, log_every=1, calibration_dir=self.calibration_dir,
        )  # fmt: skip

    def packed_run(self, backbone: str, micro_batch: int, mode: str) -> RunConfig:
        """One pack's run of `backbone`: one rank on one tile, the study's global batch in micro-batches of
        `micro_batch` rows, as the plan places it."""
        out = str(Path(self.folder, f"packed-{backbone}"))
        run = replace(self.run(mode), backbone=backbone, strategy="none", out=out)
        return replace(run, micro_batch=micro_batch) if micro_batch < self.global_batch else run

    def spread_run(self, backbone: str, micro_batch: int, mode: str) -> RunConfig:
        """`packed_run` spread over `spread` devices of the pack, as a pack runs a long run: the study's
        strategy over one rank a device, its global batch and micro-batch unchanged."""
        out = str(Path(self.folder, f"spread-{backbone}-x{self.spread}"))
        return replace(self.packed_run(backbone, micro_batch, mode), strategy=self.strategy, out=out)

    def slot_argv(self, body: Path, devices: int = 1) -> list[str]:
        """`bash body` on `devices` free slots of the node, as a pack's training job runs it (prism.launch.slots)."""
        slots = ["-m", PROGRAM, "--slots", str(self.procs_per_node), "--device", self.device]
        return [sys.executable, *slots, "--devices", str(devices), "--", "bash", str(body)]


def run_body(
    run: RunConfig, procs_per_node: int, storage: str, limits: Limits, wrap: Callable[[Path], list[str]] | None = None
) -> dict:
    """Render the run's aurora body and run it under `limits` (prism.launch.probebody), through `wrap` (the
    slot a pack's run takes) where given: what it did, and its steady samples/s. Only the perf rows and
    log lines this body appends count (a resumed run's directory has earlier ones)."""
    out = Path(run.out)
    out.mkdir(parents=True, exist_ok=True)
    body = out / "probe.sh"
    body.write_text(render_aurora(run, 1, procs_per_node, storage))
    argv = wrap(body) if wrap else ["bash", str(body)]
    did = drive_body(argv, out / "perf.jsonl", out / "probe.log", limits)
    rows = did.pop("rows")
    return {**did, "first_new_step": rows[0].get("step") if rows else None, **steady(rows, run.global_batch)}


def steady(rows: list[dict], global_batch: int) -> dict:
    """Samples/s of one rank over the rows after the first (the first carries the start-up and compile)."""
    later = [r for r in rows[1:] if r.get("samples_per_s")]
    world = rows[0].get("world_size") if rows else None
    out: dict[str, Any] = {
        "steps": rows[-1]["step"] if rows else 0,
        "startup_s": rows[0].get("startup_s") if rows else None,
        # The slowest rank's seconds by phase before its first step (prism.train.startup).
        "startup_phases": rows[0].get("startup") if rows else None,
    }
    if later and world:
        out["samples_per_s_per_rank"] = median(r["samples_per_s"] for r in later) / world
        out["world_size"] = world
    return out


def job_phases(now: float | None = None) -> dict:
    """The job's set-up and its Snakemake start, from the times jobscript.sh exported (None outside one)."""
    start, setup_end = os.environ.get("PRISM_JOB_START"), os.environ.get("PRISM_SETUP_END")
    if not (start and setup_end):
        return {"setup_s": None, "job_start_s": None}
    now = time.time() if now is None else now
    return {"setup_s": float(setup_end) - float(start), "job_start_s": now - float(setup_end)}


def rank_peak(device: str, precision: str) -> dict:
    """The measured dense matmul peak of one rank's device in the runs' precision (prism.runtime.peak): the one
    denominator of every MFU, the plan's included, once the probe has run."""
    from prism.runtime.peak import peak_record  # noqa: PLC0415 lazy: torch
    from prism.train.precision import resolve  # noqa: PLC0415 lazy: the CLI stays light

    record = peak_record(device, resolve(precision, device))
    return {"peak_flops_per_rank": float(record["flops"]), "peak_key": record["key"]}


def compile_decision(eager: dict, compiled: dict) -> dict:
    """Compile time, gain and the study's choice: compile only where it measured a gain worth it."""
    rate, fast = eager.get("samples_per_s_per_rank"), compiled.get("samples_per_s_per_rank")
    gain = fast / rate if rate and fast else None
    first, eager_first = compiled.get("first_step_s"), eager.get("first_step_s")
    compile_s = None if first is None or eager_first is None else max(0.0, first - eager_first)
    choice = "static" if gain is not None and gain >= COMPILE_MIN_GAIN else "none"
    # A job shorter than this loses more to compiling than it wins.
    payback = compile_s / (1 - 1 / gain) if compile_s is not None and gain and gain > 1 else None
    return {"compile_s": compile_s, "compile_gain": gain, "compile": choice, "compile_payback_s": payback}


def job_compile(record: dict | None, nodes: int, steps_s: float | None) -> str:
    """One training job's compile mode from the probe's record: `static` only where the probe measured a gain
    worth it and the job's steps (`steps_s`, the plan's estimate) outlast compiling's payback, so a short job
    does not spend more on compiling than it wins; `none` on COMPILE_MAX_NODES + 1 nodes or more, where the
    job's length is unknown (the plan pending), and without a record."""
    if record is None or nodes > COMPILE_MAX_NODES or steps_s is None:
        return "none"
    payback = record.get("compile_payback_s")
    if record.get("compile") != "static" or payback is None:
        return "none"
    return "static" if steps_s >= float(payback) else "none"


def record_bodies(record: dict) -> dict[str, Any]:
    """Every body of a probe record by part: eager, compiled, resume, each pack body as "packed SIZE", then
    the spread one as "spread SIZE xK"."""
    bodies = {part: record.get(part) for part in ("eager", "compiled", "resume")}
    bodies.update({f"packed {b}": body for b, body in (record.get("packed") or {}).items()})
    if spread := record.get("spread"):
        bodies[f"spread {spread['backbone']} x{spread['devices']}"] = spread
    return bodies


def sigterm_warning(record: dict) -> str | None:
    """The plain words when a body's ranks did not checkpoint at SIGTERM (None when every body did): the
    probe signals `mpiexec`, and a launcher that does not pass SIGTERM on to the ranks (PALS' forwarding
    is untested by prism) leaves them killed without a checkpoint, so a job stopped at its walltime
    would lose everything since its last periodic checkpoint."""
    bodies = record_bodies(record)
    ran = {part: body for part, body in bodies.items() if isinstance(body, dict) and signalled_after_steps(body)}
    lost = [part for part, body in ran.items() if body.get("checkpoint_step") is None]
    if not lost:
        return None
    return (
        f"SIGTERM was not forwarded to the ranks ({', '.join(lost)}: no checkpoint at SIGTERM, exit status "
        f"{record[lost[0]].get('exit_status')}): a job stopped at its walltime loses its steps since the last "
        "periodic checkpoint (train.checkpoint_every); the resume measured a fresh start"
    )


def signalled_after_steps(body: dict) -> bool:
    """Whether the body stepped and was then stopped by the probe (records before outcomes: no error)."""
    if "outcome" in body:
        return body["outcome"] in ("checkpointed", "stopped", "killed")
    return "error" not in body


def body_warning(record: dict) -> str | None:
    """The plain words when a body measured nothing (hung, ended on its own, not run; None when each stepped):
    what the plan then assumes instead is said by the plan."""
    said = []
    for part, body in record_bodies(record).items():
        if not isinstance(body, dict) or body.get("outcome") not in ("hung", "finished", "not run"):
            continue
        if body["outcome"] == "hung":
            how = f"hung: no first step in {body['limits']['start_s']:.0f} s" + (", ended by SIGKILL" * body["sigkill"])
        elif body["outcome"] == "finished":
            how = f"ended before it was stopped, exit status {body['exit_status']}"
        else:
            how = f"not run: {body['why']}"
        said.append(f"{part} {how}" + (f" (see {body['log']})" if body.get("log") else ""))
    return "; ".join(said) or None


@contextmanager
def job_sigterm() -> Iterator[None]:
    """While the bodies run, a SIGTERM to the probe (its job's walltime) stops the body within its grace, and
    the record is written."""
    previous = signal.signal(signal.SIGTERM, note_job_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def job_until(walltime_s: float | None, now: float | None = None) -> float:
    """The job's deadline on time.monotonic's clock: its walltime from its start (PRISM_JOB_START, exported by
    the job script, else now) less RECORD_MARGIN_S; infinite without a walltime."""
    if walltime_s is None:
        return math.inf
    now = time.time() if now is None else now
    start = float(os.environ.get("PRISM_JOB_START") or now)
    return time.monotonic() + (start + walltime_s - now) - RECORD_MARGIN_S


def run_bodies(probe: Probe, parts: list[tuple[str, str]]) -> dict:
    """Each (part, compile mode) body in turn under its limits, as long as the job has not been stopped; a
    part not run is said (`outcome: not run`)."""
    until, out = job_until(probe.walltime_s), {}
    with job_sigterm():
        for part, mode in parts:
            if JOB_STOPPED.is_set():
                break
            if not time_left(probe, until):
                out[part] = {"outcome": "not run", "why": "too little of the job's walltime was left"}
                continue
            out[part] = run_body(probe.run(mode), probe.procs_per_node, probe.storage, Limits(probe.seconds, until))
    for part, _ in parts:
        out.setdefault(part, {"outcome": "not run", "why": "the probe's job was stopped (SIGTERM)"})
    return out


def time_left(probe: Probe, until: float) -> bool:
    """Whether a body of the probe's `seconds` still ends inside the job's deadline `until`."""
    return until - time.monotonic() >= probe.seconds + TERM_GRACE_S + KILL_WAIT_S


def run_packed(probe: Probe, mode: str) -> dict:
    """The pack's bodies (`probe.packed`, and the largest spread over `probe.spread` devices where it spreads),
    all at once on slots of their own, under one set of limits: `packed` by backbone, what each did, its
    planned micro-batch and which size it stands for, and `spread` (a body not run is said)."""
    until = job_until(probe.walltime_s)
    roles = packed_roles(probe.packed)
    spread = probe.packed[-1] if probe.packed and probe.spread > 1 else None
    parts = [(b, m, 1) for b, m in probe.packed] + ([(SPREAD, spread[1], probe.spread)] if spread else [])
    with job_sigterm():
        if JOB_STOPPED.is_set() or not time_left(probe, until):
            why = "the probe's job was stopped (SIGTERM)" if JOB_STOPPED.is_set() else "too little walltime was left"
            did = {part: {"outcome": "not run", "why": why} for part, _, _ in parts}
        else:
            limits = Limits(probe.seconds, until)
            with ThreadPoolExecutor(max_workers=len(parts) or 1) as pool:
                runs = {part: pool.submit(run_packed_body, probe, spread[0] if part == SPREAD else part, m, mode,
                                          limits, k) for part, m, k in parts}  # fmt: skip
                did = {part: future.result() for part, future in runs.items()}
    out: dict[str, Any] = {"packed": {b: {**did[b], "micro_batch": m, "role": roles[b]} for b, m in probe.packed}}
    if spread:
        backbone, micro = spread
        one = out["packed"][backbone]
        out["spread"] = {**did[SPREAD], "backbone": backbone, "devices": probe.spread, "micro_batch": micro,
                         **spread_speedup(did[SPREAD], one, probe.spread)}  # fmt: skip
    return out


# The part of the probe's pack bodies that runs spread over several devices.
SPREAD = "spread"


def run_packed_body(probe: Probe, backbone: str, micro_batch: int, mode: str, limits: Limits, devices: int) -> dict:
    run = (probe.spread_run if devices > 1 else probe.packed_run)(backbone, micro_batch, mode)
    return run_body(run, devices, probe.storage, limits, wrap=lambda body: probe.slot_argv(body, devices))


def spread_speedup(spread: dict, one: dict, devices: int) -> dict:
    """How many times as fast the spread body ran its size as the one-tile body did (both at once, side by
    side on one node), and the share of a device's speed it kept per doubling of its devices (at most 1):
    what prices a pack's spread runs in place of the assumed `cluster.pack_efficiency`. None where either
    body measured no speed."""
    per_rank, alone = spread.get("samples_per_s_per_rank"), one.get("samples_per_s_per_rank")
    if not per_rank or not alone or devices < 2:
        return {"speedup": None, "efficiency": None}
    speedup = per_rank * devices / alone
    return {"speedup": speedup, "efficiency": min(1.0, (speedup / devices) ** (1 / math.log2(devices)))}


def packed_roles(packed: tuple[tuple[str, int], ...]) -> dict[str, str]:
    """Which one-tile size each packed body stands for (smallest first, as the workflow lists them)."""
    if len(packed) == 1:
        return {packed[0][0]: "the only one-tile size"}
    ends = ("the smallest one-tile size", "the largest one-tile size")
    return {b: ends[0] if i == 0 else ends[1] for i, (b, _) in enumerate(packed)}


def job_seconds(seconds: float) -> float:
    """The longest a probe job of bodies of `seconds` of steps takes (the first: FIRST_JOB_BODIES bodies): its
    walltime, derived from its bodies' limits (prism.launch.probebody.body_limit_s)."""
    return JOB_OVERHEAD_S + FIRST_JOB_BODIES * body_limit_s(seconds) + RECORD_MARGIN_S


def probe_first(probe: Probe, out: Path) -> dict:
    """The first job: eager, then compiled, each stopped by SIGTERM under its limits; its part record, written
    whatever the bodies did."""
    print(f"probe {probe.family}: {probe.why or probe.backbone}", file=sys.stderr, flush=True)
    started = job_phases()
    peak = rank_peak(probe.device, probe.precision)
    bodies = run_bodies(probe, [("eager", "none"), ("compiled", "static")])
    record = {
        "family": probe.family, "backbone": probe.backbone, "device": probe.device, "nodes": 1,
        "ranks_per_node": probe.procs_per_node, "global_batch": probe.global_batch, "loader": "stream",
        "strategy": probe.strategy, "storage": probe.storage, "seconds_per_body": probe.seconds, "size": probe.why,
        **started, **peak, **bodies, **compile_decision(bodies["eager"], bodies["compiled"]),
    }  # fmt: skip
    write_json_atomic(out, record, indent=1, sort_keys=True)
    return record


def probe_resume(probe: Probe, first: Path, out: Path) -> dict:
    """The second job: the eager run resumed from its SIGTERM checkpoint; the full record, written whatever
    the body did."""
    record = json.loads(first.read_text())
    started = job_phases()
    resumed = run_bodies(probe, [("resume", "none")])["resume"]
    record["resume"] = {"resume_s": resumed.get("first_step_s"), **started, **resumed}
    if probe.packed:
        record.update(run_packed(probe, record.get("compile") or "none"))
    record["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record["startup_s"] = startup_s(record)
    record["startup_by_phase"] = startup_by_phase(record)
    record["sigterm_warning"] = sigterm_warning(record)
    record["body_warning"] = body_warning(record)
    for warning in (record["sigterm_warning"], record["body_warning"]):
        if warning:
            print(f"probe {probe.family}: WARNING: {warning}", file=sys.stderr, flush=True)
    write_json_atomic(out, record, indent=1, sort_keys=True)
    return record


def startup_s(record: dict) -> float | None:
    """What every training job spends before its first step, as the probe measured it: set-up, the
    Snakemake job's start, and the body's launch to its first step in the chosen compile mode (None where
    that body reached no first step)."""
    body = record["compiled" if record.get("compile") == "static" else "eager"]
    if body.get("first_step_s") is None:
        return None
    return (record.get("setup_s") or 0.0) + (record.get("job_start_s") or 0.0) + body["first_step_s"]


def startup_by_phase(record: dict) -> dict:
    """A training job's start-up by phase, as the probe measured it: the job's set-up and Snakemake start,
    then the chosen body's slowest rank's phases (imports, process group, model build, loader, first batch,
    first step ...), and `launch_s`, the body's launch to its first step less the ranks' own age then
    (mpiexec starting the ranks)."""
    body = record["compiled" if record.get("compile") == "static" else "eager"]
    phases = dict(body.get("startup_phases") or {})
    age = phases.get("to_first_step_s")
    launch = max(0.0, body["first_step_s"] - age) if age is not None and body.get("first_step_s") is not None else None
    return {"setup_s": record.get("setup_s"), "job_start_s": record.get("job_start_s"), "launch_s": launch, **phases}

"""A plan's rows as training runs: the one mapping, and launching a plan without Snakemake.

`run_config(row, data, out, **settings)` turns a plan row into the run's
`RunConfig`; the workflow's train rule (through `run_args`) and `launch_plan`
both use it, and the command comes from `prism.launch.render`, so
`prism isoflop launch` runs exactly what the workflow would run. `local`/`torchrun`
run one after the other here; `aurora`
writes each PBS job body to `RUNS/jobs/RUN_ID.pbs` and submits it with `qsub`.
A run whose `metrics.json` exists is finished and skipped, unless it finished under another
identity than its plan row's (`prism.train.identity`: a library default changed since): then,
as the workflow does, its metrics.json goes and it trains again. The ledger is
append-only: one row per action (time, run id, launcher, job id, state, detail).
"""

from __future__ import annotations

import csv
import datetime as dt
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.isoflop.design.trajectories import DEFAULT_MIN_STEPS, plan_warmup
from prism.isoflop.planread import read_plan
from prism.isoflop.records import PlanRow
from prism.launch import render
from prism.launch.command import train_args
from prism.launch.registry import get
from prism.train.config import RunConfig
from prism.train.options import TrainOptions
from prism.train.rundir.finished import identity_changes_of

LEDGER_COLUMNS = ("time", "run_id", "launcher", "job_id", "state", "detail")
# What a plan row fixes about its run; everything else is a setting of the study.
ROW_FIELDS = ("family", "backbone", "variant", "regime", "budget", "global_batch")


def run_config(row: PlanRow | Mapping[str, Any], data: str | Path, out: str | Path, **settings: Any) -> RunConfig:
    """The run of one plan row: the row's model, budget and batch, with `settings` (calibration, seed, ...).

    `row` is a checked plan row (PlanRow.from_dict refuses an edited row whose run id does not match its
    fields), or the same keys for a run the plan does not list (a wsd segment, a sweep run).
    """
    row = row.to_json() if isinstance(row, PlanRow) else row
    # The plan's micro-batch only where it accumulates: an unaccumulated run's command is unchanged.
    micro = {"micro_batch": int(row["micro_batch"])} if int(row.get("accum_steps") or 1) > 1 else {}
    # The plan's lr where a given or fitted rule set it: a hand-rule run's command is unchanged.
    lr = {"lr": float(row["lr"])} if row.get("lr") and row.get("lr_rule", "hand") != "hand" else {}
    return RunConfig(**{key: row[key] for key in ROW_FIELDS}, data=str(data), out=str(out), **micro, **lr, **settings)


def run_flags(run: RunConfig) -> str:
    """The run's `prism train` flags, shell-quoted (what the workflow's training rules pass)."""
    return shlex.join(train_args(run)[1:])


def run_args(row: PlanRow | Mapping[str, Any], data: str | Path, out: str | Path, **settings: Any) -> str:
    """`run_config`'s `prism train` flags, shell-quoted."""
    return run_flags(run_config(row, data, out, **settings))


class Ledger:
    """Append-only CSV; each row is flushed so an interrupted launch keeps what happened."""

    def __init__(self, path: Path | None):
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            new = not path.exists() or path.stat().st_size == 0
            self._fh = path.open("a", newline="")
            self._w = csv.writer(self._fh)
            if new:
                self._w.writerow(LEDGER_COLUMNS)
                self._fh.flush()

    def add(self, run_id: str, launcher: str, job_id: str, state: str, detail: str = "") -> None:
        if self.path is None:
            return
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self._w.writerow([now, run_id, launcher, job_id, state, detail])
        self._fh.flush()

    def close(self) -> None:
        if self.path is not None:
            self._fh.close()


def launch_plan(
    plan: str | Path,
    launcher: str,
    ledger_csv: str | Path,
    data: str | Path,
    runs_dir: str | Path | None = None,
    calibration_dir: str | Path | None = None,
    dry_run: bool = False,
    nodes: int = 1,
    procs_per_node: int | None = None,
    options: TrainOptions | None = None,
    qsub: str = "qsub",
    echo=print,
) -> list[dict]:
    """Launch every unfinished run of the plan; returns one dict per run (run_id, state, job_id, command).

    Of `options` (the runs' shared settings; none: their defaults) it takes the seed, device, strategy
    and storage.
    """
    options = options or TrainOptions()
    plan_path = Path(plan)
    content = read_plan(plan_path, f"--plan {plan_path}")  # every row checked before anything is launched
    runs_root = Path(runs_dir) if runs_dir else plan_path.parent / "runs"
    cal = calibration_dir or content.header.get("calibration_dir")
    warmup = plan_warmup(int(content.header.get("min_steps") or DEFAULT_MIN_STEPS))
    ledger = Ledger(None if dry_run else Path(ledger_csv))
    results = []
    try:
        for run_id, row in content.rows.items():
            out = runs_root / run_id
            try:
                cfg = run_config(
                    row,
                    data,
                    out,
                    calibration_dir=str(cal) if cal else None,
                    strategy=options.strategy,
                    device=options.device,
                    seed=options.seed,
                    warmup=warmup,
                )
            except PrismError as err:
                raise PrismError(f"{plan_path}: {err}") from None
            command = render(launcher, cfg, nodes=nodes, procs_per_node=procs_per_node, storage=options.storage)
            if (out / "metrics.json").exists():
                changes = identity_changes_of(out, cfg)
                if not changes:
                    results.append({"run_id": run_id, "state": "finished", "job_id": "", "command": command})
                    echo(f"# {run_id}: finished ({out / 'metrics.json'} exists), skipped")
                    ledger.add(run_id, launcher, "", "skipped", "metrics.json exists")
                    continue
                _train_again(out, run_id, changes, dry_run, echo)
                ledger.add(run_id, launcher, "", "retrain", f"finished under other values: {'; '.join(changes)}")
            if dry_run:
                echo(f"# {run_id}\n{command}")
                results.append({"run_id": run_id, "state": "dry-run", "job_id": "", "command": command})
                continue
            state, job_id, detail = _execute(launcher, command, runs_root, run_id, qsub)
            ledger.add(run_id, launcher, job_id, state, detail)
            echo(f"{run_id}: {state} {job_id} {detail}".rstrip())
            results.append({"run_id": run_id, "state": state, "job_id": job_id, "command": command})
    finally:
        ledger.close()
    return results


def _train_again(out: Path, run_id: str, changes: list[str], dry_run: bool, echo) -> None:
    """A run finished under other values than its plan row's: its metrics.json goes (not in a dry run), as
    Snakemake deletes a job's output before running it again, so `prism train` trains it again."""
    echo(f"# {run_id}: finished under other values ({'; '.join(changes)}): training again")
    if not dry_run:
        (out / "metrics.json").unlink()


def _execute(launcher: str, command: str, runs_root: Path, run_id: str, qsub: str) -> tuple[str, str, str]:
    """Run here (local, torchrun) or submit (aurora: `Launcher.submitted`); (state, job id, detail)."""
    runs_root.mkdir(parents=True, exist_ok=True)
    chosen = get(launcher)
    if chosen.submitted:
        if shutil.which(qsub) is None:
            raise PrismError(
                f"`{qsub}` not found: launcher {launcher} submits with {chosen.scheduler} {chosen.submit} "
                "(use --dry-run to see the job)"
            )
        body = write_text_atomic(runs_root / "jobs" / f"{run_id}.{str(chosen.scheduler).lower()}", command)
        done = subprocess.run([qsub, str(body)], capture_output=True, text=True)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            return "submit-failed", "", said[-1] if said else f"rc {done.returncode}"
        return "submitted", done.stdout.strip(), str(body)
    log = runs_root / f"{run_id}.launch.log"
    with log.open("ab") as fh:
        proc = subprocess.Popen(["bash", "-c", command], stdout=fh, stderr=subprocess.STDOUT)
        rc = proc.wait()
    state = "finished" if rc == 0 else "failed"
    return state, str(proc.pid), f"rc {rc}; log {shlex.quote(str(log))}"

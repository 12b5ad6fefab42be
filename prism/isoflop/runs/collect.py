"""Collect run directories into the runs CSV: one row per run, finished or not.

A run directory is any directory under ROOT holding `config.yaml` (the training
runtime's layout, `prism.train.rundir.runfiles`): `eval.jsonl` (one evaluation per line:
step, samples, tokens, flops, loss), `metrics.json` (written last and atomically:
present = finished; `status: ok|collapsed`, params, params_total, tokens, flops).
Tolerant but exact: a corrupt line is reported (run id, file, line) and counted
in `n_bad_lines`, never crashed on; only `status == ok` rows carry a loss, so
unfinished (`incomplete`), `collapsed` and unreadable (`error`) runs are never
fitted. `loss` is the run's loss at its budget as metrics.json records it (`loss`,
its final evaluation over the held-out split, with `loss_se`), or, for runs that do
not record it, the mean of the last `eval_window` evaluations; `loss_std` is the
standard deviation of those last evaluations (the run's late-training noise).

Given the study's plan (and data), collect lists what the plan holds: run
directories the plan does not name, or trained on other data or another
calibration than the study's current ones, are `stale` and never fitted.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.core.fingerprint import file_digest, record_digest
from prism.core.options import option, validate
from prism.core.studylayout import manifest_file
from prism.isoflop.design.calibrate import calibration_filename
from prism.isoflop.planread import read_plan
from prism.isoflop.records import PlanRow
from prism.isoflop.runs.table import CollectedRun, read_rows, table_text
from prism.train.rundir.runfiles import CONFIG, EVAL, METRICS, PERF, RunConfigUnreadable, read_run_config

IDENTITY = ("run_id", "family", "backbone", "variant", "regime", "budget")


@dataclass(frozen=True)
class CollectOptions:
    """How a run's loss is read: `prism isoflop collect` flags and the config's `collect:` section."""

    eval_window: int = option(
        5,
        "last evaluations giving a run's loss_std (and the loss of a run whose "
        "metrics.json records none; otherwise the loss is its final evaluation)",
        metavar="K",
        minimum=1,
        doc=(
            "A run's loss is its final evaluation (metrics.json); this many last evaluations give its loss_std "
            "(late-training noise), and their mean is the loss of a run whose metrics.json records none (a run "
            "of an older revision)."
        ),
    )


def find_run_dirs(root: Path) -> list[Path]:
    """Directories holding config.yaml; their subdirectories (checkpoints) are not searched."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if CONFIG in filenames:
            found.append(Path(dirpath))
            dirnames.clear()
        else:
            dirnames.sort()
    return sorted(found)


def _num(value) -> float | None:
    """A finite float, or None (JSON NaN is written as the string 'nan' by the runtime)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def read_evals(path: Path, run_id: str, problems: list[str]) -> tuple[list[float], int]:
    """Losses of eval.jsonl in order, and how many lines were corrupt (each reported in `problems`)."""
    if not path.is_file():
        return [], 0
    losses, bad = [], 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            loss = _num(row.get("loss")) if isinstance(row, dict) else None
            if loss is None:
                bad += 1
                what = (
                    "not a JSON object"
                    if not isinstance(row, dict)
                    else f"loss {row.get('loss')!r} is not a finite number"
                )
                problems.append(f"run {run_id}: {path.name} line {number}: {what}")
                continue
            losses.append(loss)
    return losses, bad


def collect_run(run_dir: Path, eval_window: int, problems: list[str]) -> CollectedRun:
    """One run directory -> one row; never raises for a bad run (its status says `error`)."""
    row = CollectedRun(run_id=run_dir.name, run_dir=str(run_dir))
    try:
        config = read_run_config(run_dir)
    except RunConfigUnreadable as err:
        row.status, row.note = "error", f"{CONFIG} unreadable: {err}"
        problems.append(f"run {row.run_id}: {row.note}")
        return row
    _identity(row, config.settings)
    resolved = config.resolved
    _identity(row, resolved)
    row.params = _num(resolved.get("params"))
    row.params_total = _num(resolved.get("params_total"))
    losses, row.n_bad_lines = read_evals(run_dir / EVAL, row.run_id, problems)
    metrics_path = run_dir / METRICS
    if not metrics_path.is_file():
        row.status, row.note = "incomplete", f"no {METRICS} yet ({len(losses)} evaluations so far)"
        row.n_evals = len(losses)
        return row
    try:
        metrics = json.loads(metrics_path.read_text())
        if not isinstance(metrics, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as err:
        row.status, row.note = "error", f"{METRICS} unreadable: {err}"
        problems.append(f"run {row.run_id}: {row.note}")
        return row
    _identity(row, metrics)
    for key in ("params", "params_total", "flops", "tokens", "final_eval_loss", "loss_se", "epochs", "wall_s"):
        value = _num(metrics.get(key))
        if value is not None:
            setattr(row, key, value)
    row.steps = int(metrics["steps"]) if _num(metrics.get("steps")) is not None else None
    row.precision = str(metrics.get("precision") or "")
    row.kernel_path = str(metrics.get("kernel_path") or "")
    warnings = metrics.get("warnings") or []
    row.warnings = "; ".join(str(w) for w in warnings) if isinstance(warnings, list) else str(warnings)
    status = str(metrics.get("status", ""))
    if status == "collapsed":
        row.status = "collapsed"
        row.note = f"collapsed at step {metrics.get('step')}: {metrics.get('reason')}"
        return row
    if status != "ok":
        row.status, row.note = "error", f"{METRICS} status {status!r} (expected ok or collapsed)"
        problems.append(f"run {row.run_id}: {row.note}")
        return row
    window = losses[-eval_window:]
    row.n_evals = len(window)
    final = _num(metrics.get("loss"))
    if not window and final is None:
        row.status, row.note = "error", f"finished but {EVAL} has no valid evaluation"
        problems.append(f"run {row.run_id}: {row.note}")
        return row
    missing = [k for k in ("params", "tokens") if getattr(row, k) is None]
    if missing or (row.budget is None and row.flops is None):
        row.status = "error"
        row.note = f"{METRICS} lacks {', '.join(missing or ['budget/flops'])}"
        problems.append(f"run {row.run_id}: {row.note}")
        return row
    row.status = "ok"
    # The run's own loss at the budget (its final evaluation over the held-out split, with loss_se)
    # where the trainer records it; else the mean of the last evaluations.
    row.loss = final if final is not None else statistics.fmean(window)
    row.loss_std = statistics.stdev(window) if len(window) > 1 else 0.0 if window else None
    if row.n_bad_lines:
        row.note = f"{row.n_bad_lines} corrupt line(s) in {EVAL} skipped"
    elif not window:  # the loss is metrics.json's own; only the spread of the last evaluations is unknown
        row.note = f"no evaluation in {EVAL} (deleted?): loss from {METRICS}, no loss_std"
    return row


def _identity(row: CollectedRun, source: dict) -> None:
    for key in IDENTITY:
        value = source.get(key)
        if value in (None, ""):
            continue
        if key == "budget":
            row.budget = _num(value)
        else:
            setattr(row, key, str(value))


def _up_to_date(csv_path: Path, run_dirs: list[Path]) -> bool:
    """The CSV is newer than every file of every run, and lists exactly these runs."""
    if not csv_path.is_file():
        return False
    mtime = csv_path.stat().st_mtime
    for d in run_dirs:
        for name in (CONFIG, EVAL, METRICS, PERF):
            p = d / name
            if p.exists() and p.stat().st_mtime >= mtime:
                return False
    try:
        listed = {r.get("run_dir") for r in read_rows(csv_path)}
    except (OSError, csv.Error):
        return False
    return listed == {str(d) for d in run_dirs}


def _calibration_digest(path: Path) -> str | None:
    """The digest `prism train` records for its calibration (None: unreadable, so not judged)."""
    try:
        return record_digest(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _wall_s(hours: float | None) -> float | None:
    """The plan's estimated wall hours of a run in seconds (None: not measured)."""
    return None if hours is None else 3600.0 * float(hours)


@dataclass(frozen=True)
class StudyInputs:
    """What the study plans now: its run ids (with their plan rows) and the digests of its inputs."""

    rows: dict[str, PlanRow]
    data_manifest: str | None
    calibration_dir: Path | None

    @classmethod
    def read(cls, plan_path: Path, data: Path | None) -> StudyInputs:
        plan = read_plan(plan_path, f"--plan {plan_path}")
        cal = plan.header.get("calibration_dir")
        return cls(plan.rows, file_digest(manifest_file(data)) if data else None, Path(cal) if cal else None)

    def stale_reason(self, run: CollectedRun, run_dir: Path) -> str | None:
        """Why a finished run is not this study's (None: it is)."""
        if run.run_id not in self.rows:
            return "not in the plan (a budget or candidate removed, or another study's run)"
        try:
            inputs = read_run_config(run_dir).resolved.get("inputs") or {}
        except RunConfigUnreadable:
            inputs = {}
        if self.data_manifest and inputs.get("data_manifest") not in (None, self.data_manifest):
            return "trained on other data (its data manifest differs from the study's)"
        row = self.rows[run.run_id]
        if self.calibration_dir is not None and inputs.get("calibration"):
            path = self.calibration_dir / calibration_filename(row.family, row.backbone, row.variant, row.regime)
            current = _calibration_digest(path)
            if current is not None and inputs["calibration"] != current:
                return "trained with another calibration (the study's calibration changed since)"
        return None


def collect(
    runs_dir: str | Path,
    csv_path: str | Path,
    options: CollectOptions = CollectOptions(),
    *,
    plan: str | Path | None = None,
    data: str | Path | None = None,
    force: bool = False,
) -> str:
    """`prism isoflop collect`: write the runs CSV (atomically); returns the summary to print.

    With `plan`, the CSV lists exactly the planned runs (a planned run without a directory is
    `incomplete`, "not started") and every other run directory as `stale`, as is a finished run
    whose recorded data manifest or calibration differs from the study's current ones (`data`:
    the study's shard directory). `stale` rows are never fitted.
    """
    validate(options)
    root, csv_path = Path(runs_dir), Path(csv_path)
    study = StudyInputs.read(Path(plan), Path(data) if data else None) if plan else None
    if not root.is_dir():
        if study is None:
            raise PrismError(f"--runs-dir {root}: no such directory")
        run_dirs = []
    else:
        run_dirs = find_run_dirs(root)
    if not force and _up_to_date(csv_path, run_dirs):
        return f"{csv_path} is newer than every run file under {root}: left untouched (use --force to rewrite)"
    problems: list[str] = []
    rows = []
    for d in run_dirs:
        row = collect_run(d, options.eval_window, problems)
        if study is not None:
            why = study.stale_reason(row, d)
            if why:
                row.status, row.loss, row.loss_std = "stale", None, None
                row.note = why
            planned = study.rows.get(row.run_id)
            row.est_wall_s = _wall_s(planned.hours_here) if planned else None
        rows.append(row)
    if study is not None:
        seen = {r.run_id for r in rows}
        for run_id, planned in study.rows.items():
            if run_id not in seen:
                rows.append(
                    CollectedRun(
                        run_id=run_id,
                        **{k: getattr(planned, k) for k in IDENTITY if k not in ("run_id", "budget")},
                        budget=float(planned.budget),
                        params=_num(planned.params),
                        est_wall_s=_wall_s(planned.hours_here),
                        status="incomplete",
                        note="not started",
                        run_dir=str(root / run_id),
                    )
                )
    rows.sort(key=lambda r: (r.budget or 0.0, r.params or 0.0, r.run_id))
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    write_text_atomic(csv_path, table_text(rows))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    bad = sum(r.n_bad_lines for r in rows)
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no run directories"
    stale = [f"stale {r.run_id}: {r.note}" for r in rows if r.status == "stale"]
    mixed = mixed_kernels([r for r in rows if r.status == "ok"])
    lines = [f"wrote {csv_path}: {len(rows)} runs ({summary}); {bad} corrupt line(s) skipped", *stale]
    return "\n".join(lines + ([mixed] if mixed else []))


def mixed_kernels(rows: list[CollectedRun]) -> str | None:
    """The warning where the fitted runs took different kernel paths (their losses differ in the last places,
    beyond the run-to-run agreement the fit assumes); None where they agree or did not record it."""
    by_path: dict[str, list[str]] = {}
    for row in rows:
        if row.kernel_path:
            by_path.setdefault(row.kernel_path, []).append(row.run_id)
    if len(by_path) < 2:
        return None
    said = "; ".join(f"{path}: {len(ids)} run(s), e.g. {ids[0]}" for path, ids in sorted(by_path.items()))
    return (
        f"WARNING: the study's runs took different kernel paths ({said}); their losses differ by rounding, "
        "not by design: see each run's metrics.json kernel_error, fix the build (python -m prism.model.kernels) "
        "and rerun the runs of the odd path, or set PRISM_CPU_KERNELS=0 for every run"
    )

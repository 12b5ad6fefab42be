"""A finished run is immutable unless asked: refuse before touching, restore what was only deleted.

Three rules, checked by `prism train` before it writes anything in a run directory:

- `check_same_run`: a run directory whose `config.yaml` describes another run
  (another seed, global batch, budget, ...) is refused at once, before any file is
  touched; a finished run's records (metrics, eval, perf, final weights) stay.
- `restore`: a finished run keeps a copy of its `metrics.json` in `final/finished.json`
  together with the content hashes of its inputs (data manifest, calibration; see
  `prism.train.rundir.resume.input_fingerprint`), its result-deciding settings and its
  identity (every value that decided what it computed, library defaults included:
  `prism.train.identity`; a finished run under another identity is refused). When
  `metrics.json` is gone (Snakemake deletes a job's output before rerunning it: a
  rebuilt data directory, a calibration rewritten, a plan row edited and restored)
  and the inputs, settings and identity are the same, the copy is put back and nothing
  retrains. Changed content or identity retrains.
- `forget`: an explicit retrain (`prism train --retrain`, `PRISM_RETRAIN=1`; the
  workflow sets it for `snakemake --forcerun train`, `--forcerun` of the run's
  metrics.json, or `--forceall`) drops the copy and trains from scratch.

A run's kept checkpoints (`--checkpoint-at`, in `final/keep/`) are part of what it
finished: other runs start from them, and for a wsd segment the kept checkpoint is the
job's only output, which Snakemake deletes before rerunning it. A finished run missing
one is not finished (`missing_kept`): `restore` puts it back from the run's own final
checkpoint of that step (the same file, hard-linked when it was kept) when that reads
and the inputs are unchanged; otherwise the run trains again from its start, which
writes the same checkpoint bit for bit.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from prism.core.atomic import json_safe, write_json_atomic
from prism.core.errors import PrismError
from prism.train.config import RESULT_FIELDS, RunConfig, read_yaml
from prism.train.identity import identity_changes, run_identity
from prism.train.rundir import runfiles
from prism.train.rundir.layout import KEEP_DIR, filename, final_dir

RECORD = "finished.json"
RETRAIN_ENV = "PRISM_RETRAIN"


def retrain_requested(flag: bool | None = None) -> bool:
    """`--retrain`, or `PRISM_RETRAIN=1` (how the flag crosses launchers and PBS jobs)."""
    return bool(flag) or os.environ.get(RETRAIN_ENV) == "1"


def record_path(run_dir: Path) -> Path:
    return final_dir(run_dir) / RECORD


def missing_kept(run_dir: Path, config: Any, steps: Any) -> list[Path]:
    """The kept checkpoints of a run finished at `steps` that are not in final/keep/."""
    kept = final_dir(run_dir) / KEEP_DIR
    reached = [s for s in sorted(config.keep_steps) if isinstance(steps, int) and s <= steps]
    return [kept / filename(s) for s in reached if not (kept / filename(s)).is_file()]


def _put_back(missing: list[Path]) -> bool:
    """Link each missing kept checkpoint to final/'s checkpoint of its step, if that one reads."""
    from prism.train.rundir import checkpoint  # noqa: PLC0415 lazy: torch

    for kept in missing:
        source = kept.parent.parent / kept.name
        try:
            checkpoint.read(source)
        except ValueError:
            return False
        kept.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, kept)
        except FileExistsError:
            pass
        except OSError:
            shutil.copyfile(source, kept)
        os.utime(kept)  # newer than the inputs Snakemake reran it for: not outdated on the next call
    return True


def study_conflict(study: Path, families: list[str], schedule: str, cooldown_fraction: float) -> str | None:
    """One line naming the first finished run of `study` that these settings cannot reuse; None if none.

    A study keeps the schedule its runs were trained with, and a wsd study its cooldown
    fraction (the branch points follow from it). Checked before anything is planned to
    train: otherwise every new segment trains before the first branch is refused as a
    different run (`check_same_run`).
    """
    for family in families:
        for path in sorted(Path(study, family, "runs").glob(f"*/{runfiles.CONFIG}")):
            if not (path.parent / runfiles.METRICS).is_file() and not record_path(path.parent).is_file():
                continue  # never finished: its directory says nothing about the study yet
            try:
                run = read_yaml(path) or {}
            except PrismError:  # an unreadable record is prism train's to report, for its run
                continue
            fix = "set it back, or use another study dir (--config study_dir=...)"
            if run.get("schedule") != schedule:
                return (
                    f"config train.schedule is {schedule!r}, but {path.parent} finished as a "
                    f"{run.get('schedule')!r} run: a study keeps its schedule; {fix}"
                )
            if schedule == "wsd" and run.get("cooldown_fraction") != float(cooldown_fraction):
                return (
                    f"config train.cooldown_fraction is {float(cooldown_fraction)}, but {path.parent} "
                    f"finished with {run.get('cooldown_fraction')}: a wsd study keeps its cooldown fraction "
                    f"(its branch points follow from it); {fix}"
                )
    return None


def check_same_run(run_dir: Path, config: Any) -> None:
    """Refuse (PrismError) a config whose result-changing settings differ from the run directory's."""
    path = Path(run_dir) / runfiles.CONFIG
    if not path.is_file():
        return
    diff = config.result_mismatch(RunConfig.from_yaml(path))
    if not diff:
        return
    record = runfiles.read_json(record_path(run_dir)) or {}
    if isinstance(record, dict) and record.get("settings") == json_safe(settings_of(config)):
        # final/ finished exactly this run: config.yaml, a record, was edited after it (by hand).
        raise PrismError(
            f"{path} says another run ({'; '.join(diff)}) than {record_path(run_dir)}, which finished "
            "with these settings: the record was edited; put it back as it was and rerun (the run is "
            "restored from final/, nothing retrained), or delete the directory to train it again"
        )
    raise PrismError(
        f"{run_dir} holds a different run ({'; '.join(diff)}); nothing was changed there. "
        "Use another --out, or delete the directory to start over"
    )


def identity_changes_of(run_dir: Path, config: Any) -> list[str]:
    """`name: old -> new` for each identity value (prism.train.identity) the run in `run_dir` was started under
    (its config.yaml's record) other than `config`'s; [] when none differs or no record says (a run from
    before identities were kept, or none started)."""
    path = Path(run_dir) / runfiles.CONFIG
    old = runfiles.resolved_of(path).get("identity") if path.is_file() else None
    return identity_changes(old, run_identity(config)) if isinstance(old, dict) else []


def check_identity(run_dir: Path, config: Any) -> None:
    """Refuse a finished run whose identity (prism.train.identity) is not this config's: it was trained under
    other values (a library default since changed), so its metrics are not this run's."""
    changes = identity_changes_of(run_dir, config)
    if changes:
        raise PrismError(
            f"{run_dir} finished under other values ({'; '.join(changes)}): it is not this run; rerun this "
            "command with --retrain to train it again (a workflow reruns it by itself), or use another --out"
        )


def settings_of(config: Any) -> dict[str, Any]:
    """The result-deciding settings (the ones a rerun must agree on)."""
    return {name: getattr(config, name) for name in RESULT_FIELDS}


def keep(run_dir: Path, config: Any, inputs: dict[str, Any], metrics: dict[str, Any]) -> None:
    """After a run ended ok (and its checkpoints became final/): the copy `restore` reads."""
    write_json_atomic(
        record_path(run_dir),
        {"inputs": inputs, "settings": settings_of(config), "identity": run_identity(config), "metrics": metrics},
        indent=2,
        sort_keys=True,
    )


def restore(run_dir: Path, config: Any, inputs: dict[str, Any]) -> dict[str, Any] | None:
    """Put back the metrics.json of an unchanged finished run; None when there is nothing to restore."""
    run_dir = Path(run_dir)
    metrics_path = run_dir / runfiles.METRICS
    if metrics_path.exists():  # finished: there is something to put back only if a kept checkpoint is gone
        if not missing_kept(run_dir, config, (runfiles.read_json(metrics_path) or {}).get("steps")):
            return None
    record = runfiles.read_json(record_path(run_dir))
    if not record or not isinstance(record.get("metrics"), dict):
        return None
    metrics = record["metrics"]
    if metrics.get("run_id") != config.run_id or record.get("settings") != json_safe(settings_of(config)):
        return None
    if _other_identity(record, run_dir, config):
        return None
    if record.get("inputs") != inputs:
        changed = [k for k in inputs if (record.get("inputs") or {}).get(k) != inputs[k]]
        print(
            f"[{config.run_id}] finished on other inputs ({', '.join(changed) or 'unknown'} changed): training again",
            file=sys.stderr,
            flush=True,
        )
        return None
    missing = missing_kept(run_dir, config, metrics.get("steps"))
    if missing and not _put_back(missing):
        print(
            f"[{config.run_id}] finished, but its kept checkpoint {missing[0]} is gone and "
            f"final/{missing[0].name} cannot stand in for it: training again from its start",
            file=sys.stderr,
            flush=True,
        )
        return None
    if missing:
        print(
            f"[{config.run_id}] kept checkpoint {', '.join(map(str, missing))} put back from final/ "
            "(the same weights); nothing retrained",
            file=sys.stderr,
            flush=True,
        )
        if metrics_path.exists():
            return metrics
    write_json_atomic(metrics_path, metrics, indent=2, sort_keys=True)
    print(
        f"[{config.run_id}] finished earlier on the same inputs (content hashes match): restored "
        f"{metrics_path} from {record_path(run_dir)}; nothing retrained (pass --retrain to train again)",
        file=sys.stderr,
        flush=True,
    )
    return metrics


def _other_identity(record: dict[str, Any], run_dir: Path, config: Any) -> bool:
    """Whether the finished run was trained under another identity (said in one line). A record from before
    identities were kept takes this run's: its settings matched, and retraining every such run would cost a
    study's whole budget for defaults that most likely never changed."""
    identity = run_identity(config)
    if "identity" not in record:
        write_json_atomic(record_path(run_dir), {**record, "identity": identity}, indent=2, sort_keys=True)
        return False
    changes = identity_changes(record["identity"] or {}, identity)
    if changes:
        print(
            f"[{config.run_id}] finished under other values ({'; '.join(changes)}): training again",
            file=sys.stderr,
            flush=True,
        )
    return bool(changes)


def forget(run_dir: Path, config: Any, why: str = "--retrain") -> None:
    """A retrain: the finished copy and metrics.json go; the new run replaces final/ when it ends."""
    run_dir = Path(run_dir)
    had = (run_dir / runfiles.METRICS).exists() or record_path(run_dir).exists()
    record_path(run_dir).unlink(missing_ok=True)
    (run_dir / runfiles.METRICS).unlink(missing_ok=True)
    if had:
        print(f"[{config.run_id}] {why}: training the finished run again from scratch", file=sys.stderr, flush=True)

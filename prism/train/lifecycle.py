"""One run from its command to its exit status: skip a finished run (or restore an unchanged one),
check before touching the run directory, hold its lock, train, and map the outcome to a status."""

from __future__ import annotations

from contextlib import nullcontext

from prism.core.errors import PrismError
from prism.core.run_metrics import RunMetrics
from prism.parallel.env import discover
from prism.train import preflight
from prism.train.batches import run_order
from prism.train.budget import find_calibration
from prism.train.config import RunConfig
from prism.train.process import STOPPED_EXIT, log
from prism.train.rundir import finished as finished_run
from prism.train.rundir import resume, runfiles
from prism.train.rundir.lock import RunLock
from prism.train.trainer import Trainer

COLLAPSED_EXIT = 3


def finished(config: RunConfig) -> RunMetrics | None:
    """The metrics of a run whose metrics.json exists (nothing to do), else None.

    An ok run missing a kept checkpoint is not finished (see prism.train.rundir.finished).
    """
    path = config.out_dir / runfiles.METRICS
    existing = runfiles.read_json(path)
    if existing is None:
        return None
    if existing.get("status") == "ok" and finished_run.missing_kept(config.out_dir, config, existing.get("steps")):
        return None
    finished_run.check_identity(config.out_dir, config)
    log(
        f"[{config.run_id}] {path} exists (status {existing.get('status')}): the run is finished, nothing to "
        "do; delete the run directory to train it again"
    )
    return RunMetrics.from_json(existing)


def train(config: RunConfig, retrain: bool | None = None, wait_lock: bool | None = None) -> RunMetrics:
    """Train (or resume, or skip when finished, or restore an unchanged finished run); returns its metrics.

    Nothing in the run directory is touched until the settings, the inputs and the
    memory have been checked (prism.train.rundir.finished, prism.train.preflight); then rank 0
    holds the directory's lock (prism.train.rundir.lock) for the rest of the run.
    """
    retrain = finished_run.retrain_requested(retrain)
    finished_run.check_same_run(config.out_dir, config)
    if not retrain and (done := finished(config)) is not None:
        return done
    env = discover()
    # A missing calibration stops here.
    inputs = resume.input_fingerprint(config, find_calibration(config), run_order(config, env.world_size))
    preflight.check(config, env.world_size)
    with RunLock(config.out_dir, wait=wait_lock) if env.is_main else nullcontext():
        if env.is_main:
            if retrain:
                finished_run.forget(config.out_dir, config)
            else:
                if (done := finished(config)) is not None:
                    return done  # another trainer finished it while this one waited
                if (restored := finished_run.restore(config.out_dir, config, inputs)) is not None:
                    return RunMetrics.from_json(restored)
                if (config.out_dir / runfiles.METRICS).exists():  # finished, but a kept checkpoint is gone
                    finished_run.forget(config.out_dir, config, why="a kept checkpoint is missing")
        trainer = Trainer(config, env)
        try:
            metrics = trainer.train()
        except BaseException:
            trainer.close(ended=False)
            raise
        trainer.close()
        return metrics


def restore_only(config: RunConfig, world_size: int) -> bool:
    """Put back an unchanged finished run's records without training (`train` would too, after its launch):
    whether the run is finished now. The workflow calls it in the job before the run's body claims a device,
    so that a rerun job (a retried pack: Snakemake deleted its finished runs' outputs) holds no device for a
    run that trains nothing. A run another trainer holds is left to its body."""
    if finished_run.retrain_requested():
        return False
    finished_run.check_same_run(config.out_dir, config)
    if finished(config) is not None:
        return True
    inputs = resume.input_fingerprint(config, find_calibration(config), run_order(config, world_size))
    try:
        with RunLock(config.out_dir, wait=False):
            return finished(config) is not None or finished_run.restore(config.out_dir, config, inputs) is not None
    except PrismError:  # held: a live trainer of this directory; its body waits or says so
        return False


def exit_code(metrics: RunMetrics) -> int:
    """0 for a finished run; COLLAPSED_EXIT for a collapsed one (also on a rerun); STOPPED_EXIT
    for one that SIGTERM stopped (resumable)."""
    return {"ok": 0, "stopped": STOPPED_EXIT}.get(metrics.status, COLLAPSED_EXIT)

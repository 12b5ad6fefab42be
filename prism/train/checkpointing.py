"""A run's checkpoints and where it continues from: saving at the interval and kept steps, the
trainer's counters a checkpoint carries, resuming a stopped run, and starting from another run's
checkpoint (a wsd branch) under this run's schedule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prism.core.errors import PrismError
from prism.train.process import log
from prism.train.rundir import checkpoint, resume


class Checkpointing:
    """The checkpoint and resume half of `Trainer` (its attributes are the trainer's)."""

    def checkpoint(self) -> None:
        with self.clock.phase("checkpoint"):
            path = checkpoint.save(
                self.config.out_dir,
                self.step,
                self.model,
                self.optimizer,
                self.scheduler,
                self.loader.state_dict(),
                self.state(),
                self.device,
                self.is_main,
            )
            if self.is_main and self.step in self.config.keep_steps:
                checkpoint.keep(path)

    def checkpoint_due(self, step: int) -> bool:
        return step % self.budget.checkpoint_every == 0 or step in self.config.keep_steps

    def state(self) -> dict[str, Any]:
        """The trainer's counters, as a checkpoint carries them."""
        return {
            "collapse": self.detector.state_dict(),
            "wall_s": self.wall_s(),
            "samples": self.samples,
            "first_eval": self.first_eval,
            "last_eval": self.last_eval,
            "last_eval_step": self.last_eval_step,
            "warnings": self.warnings,
            "started_from": self.started_from,
            "precision": self.precision,
        }

    def _restore(self, step: int, loader_state: Any, extra: dict[str, Any]) -> None:
        trained_in = extra.get("precision", "fp32")  # checkpoints from before the setting are fp32
        if trained_in != self.precision:
            raise PrismError(
                f"[{self.config.run_id}] the checkpoint at step {step} was trained in {trained_in}, this run computes "
                f"in {self.precision} (--precision {self.config.precision} on {self.device.type}): pass --precision "
                f"{trained_in} to continue it, or delete the run directory to train it again"
            )
        self.loader.load_state_dict(loader_state)
        self.detector.load_state_dict(extra["collapse"])
        self.step = step
        self.prior_wall, self.samples = extra["wall_s"], extra["samples"]
        self.first_eval, self.last_eval = extra["first_eval"], extra["last_eval"]
        self.last_eval_step = extra["last_eval_step"]
        self.warnings = list(extra.get("warnings", []))
        self.started_from = extra.get("started_from")

    def resume(self, path: Path) -> None:
        step, loader_state, extra = checkpoint.load(
            path, self.model, self.optimizer, self.scheduler, self.device, self.env.rank
        )
        self._restore(step, loader_state, extra)
        self.resumed_from = step
        if self.is_main:
            resume.truncate_logs(self.config.out_dir, step)
            log(f"[{self.config.run_id}] resuming from {path} (step {step}/{self.budget.steps})")

    def start_from(self, path: Path) -> None:
        """Continue another run's trajectory from its checkpoint, under this run's schedule.

        Weights, optimizer state, data position, RNG and counters come from the
        checkpoint, so a run that branches off at step S continues exactly as a run
        of this config that never stopped at S would (given the same warm-up and lr).
        """
        source = Path(self.config.init_from)
        resume.check_trajectory(self.config, source, self.inputs, self.budget.lr, self.budget.warmup)
        # A kept checkpoint that went bad is rewritten by the run that kept it: without it, that run
        # is no longer finished and trains again from its own start (prism.train.rundir.finished).
        fix = (
            f"delete it and rerun the run that wrote it ({source}; in a study, rerun the workflow), "
            "which trains it again from its own start, then this run"
        )
        step, loader_state, extra = checkpoint.load(
            path, self.model, self.optimizer, self.scheduler, self.device, self.env.rank, fix=fix
        )
        if step >= self.budget.steps:
            raise PrismError(
                f"--init-from {path} is at step {step}, not before this run's last step {self.budget.steps}"
            )
        self._restore(step, loader_state, extra)
        # The learning rate of the next update is this run's schedule's, not the source run's.
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * self.budget.schedule.factor(step)
        self.scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]
        self.started_from = f"{source}@{step}"
        if self.is_main:
            resume.copy_logs(source, self.config.out_dir, step)
            log(f"[{self.config.run_id}] starting from {path} (step {step}/{self.budget.steps})")

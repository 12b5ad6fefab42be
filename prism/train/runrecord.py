"""What a run writes about itself: its evaluations (eval.jsonl), its resolved config and logs, the
keys every perf row repeats, and metrics.json at the end (written last: its presence means finished)."""

from __future__ import annotations

from typing import Any

import torch

from prism.core.atomic import write_json_atomic
from prism.core.revision import git_rev
from prism.core.run_metrics import RunMetrics
from prism.model import kernels
from prism.runtime.peak import peak_flops
from prism.train.evaluator import EvalResult
from prism.train.identity import run_identity
from prism.train.process import log
from prism.train.rundir import checkpoint, runfiles
from prism.train.rundir import finished as finished_run
from prism.train.spikes import eval_warnings
from prism.train.trackers import open_tracking


class RunRecording:
    """The records half of `Trainer` (its attributes are the trainer's)."""

    def evaluate(self, final: bool = False) -> EvalResult:
        """Evaluate now and log the row; `final`: the loss at the budget, over the held-out split."""
        with self.clock.phase("eval"):
            result = self.evaluator.evaluate(self.eval_model, final=final)
        self.last_eval, self.last_eval_step = result.loss, self.step
        if self.first_eval is None:
            self.first_eval = result.loss
        row = {
            "step": self.step,
            **self.counters(self.step),
            "loss": result.loss,
            "eval_samples": result.samples,
            "eval_s": result.seconds,
            "run_id": self.config.run_id,
        }
        if final:
            row.update(loss_se=result.loss_se, final=True)
        self.evals.write(row)
        self.tracking.eval(row)
        return result

    def _open_logs(self) -> None:
        config, out = self.config, self.config.out_dir
        if self.is_main:
            config.to_yaml(out / runfiles.CONFIG, resolved=self._resolved())
            log(
                f"[{config.run_id}] {self.budget.steps} steps x {config.global_batch} samples "
                f"({self.budget.flops_per_sample:.4g} FLOPs/sample, {self.budget.flops_source}); "
                f"lr {self.budget.lr:.3g}, warm-up {self.budget.warmup}; {self.parallel.describe()} on "
                f"{self.device}, {self.threads} threads"
            )
        self.perf = runfiles.JsonlWriter(out / runfiles.PERF, self.is_main)
        self.evals = runfiles.JsonlWriter(out / runfiles.EVAL, self.is_main)
        self.tracking = open_tracking(config, self.step, self._resolved(), enabled=self.is_main)

    def counters(self, step: int) -> dict[str, Any]:
        """Units are samples (padded) or rows (packed): what global_batch counts and FLOPs are per."""
        units = step * self.config.global_batch
        return {
            "samples": self.samples,
            "tokens": units * self.budget.tokens_per_sample,
            "flops": units * self.budget.flops_per_sample,
        }

    def _resolved(self) -> dict[str, Any]:
        return {
            "run_id": self.config.run_id,
            **self.budget.to_dict(),
            "strategy": self.parallel.strategy,
            "world_size": self.parallel.world_size,
            "mesh": [self.parallel.replicate, self.parallel.shard],
            "device": str(self.device),
            "precision": self.precision,
            "threads": self.threads,
            "torch_version": str(torch.__version__),
            "inputs": self.inputs,
            # Every value that decides what it computes, defaults included: a rerun under another is another run.
            "identity": run_identity(self.config),
        }

    def _context(self) -> dict[str, Any]:
        """The keys every perf row repeats, so a row read alone says what it measured."""
        config = self.config
        context = {
            "run_id": config.run_id,
            "family": config.family,
            "backbone": config.backbone,
            "variant": config.variant,
            "regime": config.regime,
            "layout": config.layout,
            "strategy": self.parallel.strategy,
            "world_size": self.parallel.world_size,
            "mesh": f"{self.parallel.replicate}x{self.parallel.shard}",
            "device": self.device.type,
            "threads": self.threads,
            "global_batch": config.global_batch,
            "torch_version": str(torch.__version__),
            "compile": self.compile,
            "precision": self.precision,
            "grad_checkpoint": config.grad_checkpoint,
            "git_rev": git_rev(),
        }
        if self.resumed_from is not None:
            context["resumed_from"] = self.resumed_from
        return context

    def metrics(self, status: str, reason: str | None = None, final: EvalResult | None = None) -> RunMetrics:
        config, budget = self.config, self.budget
        return RunMetrics(
            status=status,
            run_id=config.run_id,
            family=config.family,
            backbone=config.backbone,
            variant=config.variant,
            regime=config.regime,
            budget=config.budget,
            loss=final.loss if final else None,
            loss_se=final.loss_se if final else None,
            eval_samples=final.samples if final else None,
            final_eval_loss=final.loss if final else None,
            initial_eval_loss=self.first_eval,
            last_eval_loss=self.last_eval,
            epochs=self.samples / self.loader.state_dict()["samples"],
            warnings=list(self.warnings),
            params=budget.params,
            params_total=budget.params_total,
            flops_per_sample=budget.flops_per_sample,
            flops_source=budget.flops_source,
            tokens_per_sample=budget.tokens_per_sample,
            global_batch=config.global_batch,
            steps=self.step,
            planned_steps=budget.steps,
            budget_steps=budget.budget_steps,
            **self.counters(self.step),
            lr=budget.lr,
            warmup=budget.warmup,
            schedule=budget.schedule.kind,
            strategy=self.parallel.strategy,
            world_size=self.parallel.world_size,
            device=self.device.type,
            precision=self.precision,
            **kernels.path_record(),
            wall_s=self.wall_s(),
            resumed_from=self.resumed_from,
            started_from=self.started_from,
            git_rev=git_rev(),
            reason=reason,
            step=None if status == "ok" else self.step,
            time=self.time_record(),
            startup=self.startup_record,
        )

    def time_record(self) -> dict[str, Any]:
        """This job's wall time by phase and the FLOPs it trained (prism.train.timing)."""
        trained = (self.step - self.first_step) * self.config.global_batch * self.budget.flops_per_sample
        record = self.clock.record(trained_flops=trained, steps=self.step - self.first_step)
        record["threads"] = self.threads
        record["precision"] = self.precision  # the dtype of the peak every MFU is against
        if self.device.type == "cpu":  # the cached peak every MFU is against (measured at the first perf row)
            record["peak_flops"] = peak_flops(self.device.type, self.precision) * self.parallel.world_size
        if self.meter is not None:
            record.update(self.meter.steady())
        return record

    def finish(self, status: str, final: EvalResult | None) -> RunMetrics:
        """metrics.json (last, atomically: its presence means finished); an ok run retires its checkpoints."""
        if self.is_main:
            with self.clock.phase("finish"):
                spikes = eval_warnings(runfiles.read_jsonl(self.config.out_dir / runfiles.EVAL))
            self.warnings += [w for w in spikes if w not in self.warnings]
            for warning in spikes:
                log(f"[{self.config.run_id}] warning: {warning}")
        metrics = self.metrics(status, self.collapse_reason, final)
        if self.is_main:
            write_json_atomic(self.config.out_dir / runfiles.METRICS, metrics.to_json(), indent=2, sort_keys=True)
            if metrics.ok:
                checkpoint.retire(self.config.out_dir)
                finished_run.keep(self.config.out_dir, self.config, self.inputs, metrics.to_json())
                se = f" +- {metrics.loss_se:.4f}" if metrics.loss_se is not None else ""
                log(
                    f"[{self.config.run_id}] done: {self.step} steps, eval loss {self.first_eval:.4f} -> "
                    f"{metrics.loss:.4f}{se} ({metrics.eval_samples} samples), {metrics.flops:.3g} FLOPs, "
                    f"{metrics.wall_s:.1f} s"
                )
        return metrics

"""`RunMetrics`: what a finished run reports in its `metrics.json`.

`prism train` writes it last (its presence means the run is finished) and
`prism isoflop collect` reads it, so both go through this one record rather than
string keys. Pure Python: collect reads thousands of these without importing torch.

The loss a study fits is `loss`: the mean held-out loss at the run's budget, from
one evaluation after the learning rate has decayed over the whole held-out split
(or its first `eval_samples` samples), token-weighted as the training loss is;
`loss_se` is its standard error over samples (a ratio estimator: per-sample loss
sums over per-sample token counts). `final_eval_loss` keeps its old name for the
same figure; `last_eval_loss` is the last evaluation of any kind.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from prism.core.atomic import json_safe

STATUSES = ("ok", "collapsed")
# Written only when the run did not end ok (the reason it stopped, the step it reached).
FAILURE_KEYS = ("reason", "step")


@dataclass
class RunMetrics:
    status: str
    run_id: str
    family: str
    backbone: str
    variant: str
    regime: str
    budget: float
    loss: float | None = None
    loss_se: float | None = None
    eval_samples: int | None = None
    final_eval_loss: float | None = None
    initial_eval_loss: float | None = None
    last_eval_loss: float | None = None
    epochs: float | None = None
    warnings: list[str] = field(default_factory=list)
    params: int | None = None
    params_total: int | None = None
    flops_per_sample: float | None = None
    flops_source: str | None = None
    tokens_per_sample: int | None = None
    global_batch: int | None = None
    steps: int | None = None
    planned_steps: int | None = None
    budget_steps: int | None = None
    samples: int | None = None
    tokens: int | None = None
    flops: float | None = None
    lr: float | None = None
    warmup: int | None = None
    schedule: str | None = None
    strategy: str | None = None
    world_size: int | None = None
    device: str | None = None
    # The precision the run computed in (fp32, or bf16 mixed: prism.train.precision).
    precision: str | None = None
    # Which path the model's blocks and loss took (prism.model.kernels.path_record: fused, aten, fused+aten;
    # None before it was recorded), and why the fused kernels could not be built where they failed: the two
    # paths' losses differ in the last places, so a study that mixes them is said.
    kernel_path: str | None = None
    kernel_error: str | None = None
    wall_s: float | None = None
    resumed_from: int | None = None
    started_from: str | None = None
    git_rev: str | None = None
    reason: str | None = None
    step: int | None = None
    # This job's wall seconds by phase and the FLOPs it trained itself (prism.train.timing).
    time: dict[str, Any] | None = None
    # This job's seconds before its first step by phase, the slowest rank's (prism.train.startup).
    startup: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (non-finite floats as strings); the failure keys only for a failed run."""
        data = asdict(self)
        if self.ok:
            for key in FAILURE_KEYS:
                data.pop(key)
        return json_safe(data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunMetrics:
        """From a metrics.json dict; keys this prism does not know are ignored, missing ones default.

        Older runs lack the newer fields (loss, loss_se, epochs, warnings): they read as
        None (an empty list for warnings), and `loss` falls back to `final_eval_loss`.
        """
        known = {f.name for f in fields(cls)}
        values = {key: _number_or_text(value) for key, value in data.items() if key in known}
        metrics = cls(**values)
        if metrics.loss is None and metrics.ok:
            metrics.loss = metrics.final_eval_loss
        metrics.warnings = list(metrics.warnings or [])
        return metrics


def _number_or_text(value: Any) -> Any:
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return value

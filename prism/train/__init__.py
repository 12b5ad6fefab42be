"""Training runs: RunConfig, the trainer, its budget, meter, evaluator, schedule, checkpoints, run files.

`train(config)` imports the trainer (and with it torch) on first call, so that
`prism.train.config` and the CLI's start-up stay torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prism.core.run_metrics import RunMetrics
    from prism.train.config import RunConfig


def train(config: RunConfig) -> RunMetrics:
    from prism.train.lifecycle import train as _train  # lazy: keeps torch out of `import prism.train`  # noqa: PLC0415 lazy: torch

    return _train(config)

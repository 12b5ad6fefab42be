"""Training runs: RunConfig, the loop, schedule, checkpoints, collapse detection, run files.

`train(config)` is imported lazily so that `prism.train.config` stays torch-free.
"""

from __future__ import annotations


def train(config):
    from prism.train.loop import train as _train

    return _train(config)

"""ParallelConfig: the one place that decides the layout; and a 1-process wrap of each strategy."""

from __future__ import annotations

import time
from typing import Any

import pytest

from prism.core.errors import PrismError
from prism.parallel.config import BACKENDS, ParallelConfig, destroy
from prism.parallel.env import free_port
from prism.runtime import DEVICES


def test_resolve_fills_the_mesh_each_strategy_implies():
    assert ParallelConfig.resolve("none", 1, 1, "cpu") == ParallelConfig("none", 1, 1, 1, "cpu")
    assert ParallelConfig.resolve("ddp", 4, 2, "cpu") == ParallelConfig("ddp", 4, 4, 1, "cpu")
    assert ParallelConfig.resolve("fsdp", 4, 2, "cpu") == ParallelConfig("fsdp", 4, 1, 4, "cpu")
    # hsdp: shard within a node, replicate across nodes.
    assert ParallelConfig.resolve("hsdp", 24, 12, "xpu") == ParallelConfig("hsdp", 24, 2, 12, "xpu")
    assert ParallelConfig.resolve("hsdp", 2, 2, "cpu", replicate=2) == ParallelConfig("hsdp", 2, 2, 1, "cpu")
    assert ParallelConfig.resolve("hsdp", 2, 2, "cpu", shard=2) == ParallelConfig("hsdp", 2, 1, 2, "cpu")


def test_backends_per_device():
    assert [ParallelConfig("ddp", 1, 1, 1, d).backend for d in ("cpu", "cuda", "xpu")] == ["gloo", "nccl", "xccl"]


def test_every_device_a_run_may_name_has_a_backend():
    assert DEVICES == ("auto", *BACKENDS)


@pytest.mark.parametrize(
    "args,needle",
    [
        (("none", 2, 2, 1), "--strategy none with 2 processes"),
        (("hsdp", 4, 3, 2), "replicate x shard must equal the world size 4"),
        (("ddp", 2, 1, 2), "ddp replicates only"),
        (("fsdp", 4, 2, 2), "use --strategy hsdp"),
        (("zero", 1, 1, 1), "unknown strategy 'zero'"),
    ],
)
def test_invalid_layouts_are_user_errors(args, needle):
    with pytest.raises(PrismError, match=needle):
        ParallelConfig(*args, "cpu")


def test_hsdp_sizes_must_divide_the_world():
    with pytest.raises(PrismError, match="--shard 3 does not divide"):
        ParallelConfig.resolve("hsdp", 4, 4, "cpu", shard=3)
    with pytest.raises(PrismError, match="--replicate 3 does not divide"):
        ParallelConfig.resolve("hsdp", 4, 4, "cpu", replicate=3)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "hsdp"])
def test_one_process_wrap_trains_like_the_plain_model(strategy):
    """World size 1 through the real process-group path: same loss after two steps as no wrapper."""
    import torch

    from prism.parallel.config import destroy
    from prism.parallel.env import discover

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])

        def forward(self, x):
            return self.blocks[1](torch.tanh(self.blocks[0](x))).pow(2).mean()

    def run(wrap: bool) -> float:
        torch.manual_seed(0)
        model = Tiny()
        if wrap:
            config = ParallelConfig.resolve(strategy, 1, 1, "cpu")
            config.init_process_group(discover({}))
            model = config.wrap(model, torch.device("cpu"))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.arange(8.0).view(2, 4) / 8
        for _ in range(2):
            loss = model(x)
            loss.backward()
            opt.step()
            opt.zero_grad()
        with torch.no_grad():
            return float(model(x))

    try:
        assert run(True) == pytest.approx(run(False), rel=1e-6)
    finally:
        destroy()


def _leave(rank: int, port: int, delay_s: float, left: Any) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    if rank == 0:
        time.sleep(delay_s)  # the slower rank: still at work when the other leaves
        left[rank] = time.monotonic()
        destroy()
    else:
        destroy()
        left[rank] = time.monotonic()


@pytest.mark.distributed
def test_no_rank_leaves_the_group_before_the_others_finish():
    """A finished run's ranks leave together: the fast rank's teardown waits for the slow one (with gloo, a
    rank whose peer closed its connections early could abort at exit and fail a finished run)."""
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        left = manager.dict()
        mp.spawn(_leave, args=(free_port(), 1.0, left), nprocs=2, join=True)
        slow, fast = left[0], left[1]
    assert fast >= slow

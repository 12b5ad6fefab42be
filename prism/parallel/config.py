"""One validated description of the parallel layout, and what it does to a model.

`ParallelConfig` is the only place that decides the strategy (the torchtitan habit):

- `none`: one process, the model as it is.
- `ddp`:  replicate the model on every rank, all-reduce gradients
          (`torch.nn.parallel.DistributedDataParallel`).
- `fsdp`: shard parameters, gradients and optimizer state over all ranks: FSDP2
          `fully_shard` on every transformer block, then on the root (embeddings,
          encoder, projector, head). Blocks reshard after forward (ZeRO-3).
- `hsdp`: a 2-D device mesh `(replicate, shard)`: replicas across nodes, shards
          within a node (default `shard` = processes per node). Parameters stay
          gathered between forward and backward (`reshard_after_forward=False`),
          which is FSDP2's form of FSDP1's `SHARD_GRAD_OP` inside the node: one
          all-gather per step instead of two. The PRISM team's earlier tools
          measured SHARD_GRAD_OP 42-47% faster than full sharding for a
          communication-bound 0.6B model at 512-token rows on Aurora (their figure,
          carried over: prism's xccl paths have not run on Aurora yet).

Backends: gloo on CPU, nccl on CUDA, xccl on Intel XPU (Aurora). Gradients are
averaged over all ranks in every strategy, so a run's loss curve depends on the
global batch only, not on the layout (the training loop weights each rank's loss
by its share of the global label tokens to make this exact).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prism.core.errors import PrismError, check_name
from prism.parallel.env import export_torch_env

if TYPE_CHECKING:
    import torch

    from prism.parallel.env import DistEnv

STRATEGIES = ("none", "ddp", "fsdp", "hsdp")
# The collective backend of each device kind a run may name (prism.runtime.DEVICES, but auto).
BACKENDS = {"cpu": "gloo", "cuda": "nccl", "xpu": "xccl"}


@dataclass(frozen=True)
class ParallelConfig:
    """The layout of one training job: strategy, world size and mesh shape `replicate x shard`."""

    strategy: str
    world_size: int
    replicate: int
    shard: int
    device_type: str = "cpu"

    def __post_init__(self) -> None:
        check_name("strategy", self.strategy, STRATEGIES)
        check_name("device type", self.device_type, BACKENDS)
        if self.world_size < 1 or self.replicate < 1 or self.shard < 1:
            raise PrismError(f"parallel layout {self.describe()}: sizes must be positive")
        if self.replicate * self.shard != self.world_size:
            raise PrismError(
                f"parallel layout {self.describe()}: replicate x shard must equal the world size {self.world_size}"
            )
        if self.strategy == "none" and self.world_size != 1:
            raise PrismError(
                f"--strategy none with {self.world_size} processes: every process "
                "would train its own copy; use --strategy ddp, fsdp or hsdp"
            )
        if self.strategy == "ddp" and self.shard != 1:
            raise PrismError(f"--strategy ddp replicates only; got shard={self.shard}")
        if self.strategy == "fsdp" and self.replicate != 1:
            raise PrismError(
                f"--strategy fsdp shards over all ranks; got replicate={self.replicate} "
                "(use --strategy hsdp for replicate x shard)"
            )

    @classmethod
    def resolve(
        cls,
        strategy: str,
        world_size: int,
        local_world_size: int,
        device_type: str,
        replicate: int | None = None,
        shard: int | None = None,
    ) -> ParallelConfig:
        """Fill in the mesh shape a strategy implies; hsdp shards within a node by default."""
        check_name("strategy", strategy, STRATEGIES)
        if strategy == "none":
            replicate, shard = replicate or 1, shard or 1
        elif strategy == "ddp":
            replicate, shard = replicate or world_size, shard or 1
        elif strategy == "fsdp":
            replicate, shard = replicate or 1, shard or world_size
        else:
            if shard is None and replicate is None:
                shard = local_world_size if world_size % local_world_size == 0 else world_size
            if shard is None:
                if world_size % replicate:
                    raise PrismError(f"--replicate {replicate} does not divide the world size {world_size}")
                shard = world_size // replicate
            if replicate is None:
                if world_size % shard:
                    raise PrismError(f"--shard {shard} does not divide the world size {world_size}")
                replicate = world_size // shard
        return cls(strategy, world_size, replicate, shard, device_type)

    @property
    def backend(self) -> str:
        return BACKENDS[self.device_type]

    @property
    def uses_process_group(self) -> bool:
        return self.strategy != "none"

    def describe(self) -> str:
        return f"{self.strategy} world={self.world_size} mesh={self.replicate}x{self.shard}"

    # --- torch side (imported lazily) -------------------------------------------------

    def init_process_group(self, dist_env: DistEnv) -> None:
        """Join the job's process group (a private in-memory store when alone)."""
        import torch.distributed as dist  # noqa: PLC0415 lazy: torch

        if not self.uses_process_group or dist.is_initialized():
            return
        if dist_env.world_size != self.world_size:
            raise PrismError(f"layout {self.describe()} but the launcher started {dist_env.world_size} processes")
        if self.world_size == 1:
            dist.init_process_group(self.backend, store=dist.HashStore(), rank=0, world_size=1)
            return
        export_torch_env(dist_env)
        dist.init_process_group(self.backend, init_method="env://", rank=dist_env.rank, world_size=dist_env.world_size)

    def device_mesh(self) -> Any:
        """The DeviceMesh FSDP2 shards over: 1-D for fsdp, `(replicate, shard)` for hsdp."""
        from torch.distributed.device_mesh import init_device_mesh  # noqa: PLC0415 lazy: torch

        if self.strategy == "fsdp":
            return init_device_mesh(self.device_type, (self.shard,), mesh_dim_names=("shard",))
        if self.strategy == "hsdp":
            return init_device_mesh(
                self.device_type, (self.replicate, self.shard), mesh_dim_names=("replicate", "shard")
            )
        raise PrismError(f"strategy {self.strategy} has no device mesh")

    def wrap(self, model: torch.nn.Module, device: torch.device, mp_policy: Any = None) -> torch.nn.Module:
        """Apply the strategy to a model already on its device; returns what the loop calls.

        `mp_policy`: FSDP2's `MixedPrecisionPolicy` for fsdp/hsdp (`prism.train.precision.fsdp_policy`);
        ddp and none compute under autocast alone, their gradients fp32 like the weights.
        """
        if self.strategy == "none":
            return model
        if self.strategy == "ddp":
            from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415 lazy: torch

            ids = [device.index] if device.type in ("cuda", "xpu") and device.index is not None else None
            return DistributedDataParallel(model, device_ids=ids)
        from torch.distributed.fsdp import fully_shard  # noqa: PLC0415 lazy: torch

        mesh = self.device_mesh()
        keep_gathered = self.strategy == "hsdp"  # shard-grad-op style within the node
        blocks = getattr(model, "blocks", None)
        if blocks is None:
            raise PrismError(
                f"strategy {self.strategy} shards per transformer block, but {type(model).__name__} has no `blocks`"
            )
        policy = {} if mp_policy is None else {"mp_policy": mp_policy}
        for block in blocks:
            fully_shard(block, mesh=mesh, reshard_after_forward=not keep_gathered, **policy)
        fully_shard(model, mesh=mesh, reshard_after_forward=not keep_gathered, **policy)
        return model


def local_device(device_type: str, local_rank: int) -> torch.device:
    """The device this rank trains on (one accelerator per local rank), made current."""
    import torch  # noqa: PLC0415 lazy: torch

    if device_type == "cpu":
        return torch.device("cpu")
    module = getattr(torch, device_type)
    if local_rank >= module.device_count():
        raise PrismError(
            f"local rank {local_rank} but only {module.device_count()} {device_type} "
            "devices on this node: start at most one process per device"
        )
    module.set_device(local_rank)
    return torch.device(device_type, local_rank)


def destroy(barrier: bool = True) -> None:
    """Leave the process group. After a run that ended on every rank (`barrier`), all ranks first meet past
    their last collective, so that no rank tears its connections down while another still uses them (a
    gloo rank that did so could abort at exit, failing a run that finished). After an error the ranks may
    not all get here: no barrier then."""
    import torch.distributed as dist  # noqa: PLC0415 lazy: torch

    if dist.is_available() and dist.is_initialized():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()

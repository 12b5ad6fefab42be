"""Where this process sits in a job: rank discovery for every way prism is launched.

A training process may be started by torchrun (which exports `RANK`, `WORLD_SIZE`,
`LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`), by an MPI launcher (MPICH's Hydra
exports `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`; Aurora's PALS `mpiexec`
exports `PALS_RANKID`, `PALS_LOCAL_RANKID`, `PMI_RANK`, `PMI_SIZE`,
`PMI_LOCAL_RANK`, `PMI_LOCAL_SIZE`), or by hand as one process. torch's `env://`
rendezvous only understands the torchrun names, so `discover` reads whichever
set is there and `export_torch_env` writes the torchrun names back.

Pure standard library (no torch): the launch renderers and tests use it cheaply.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from prism.core.errors import PrismError

DEFAULT_MASTER_PORT = 29500

# (rank, size, local rank, local size) variable names per launcher, first found wins.
_MPI_RANK = ("PMI_RANK", "PALS_RANKID")
_MPI_SIZE = ("PMI_SIZE",)
_MPI_LOCAL_RANK = ("PMI_LOCAL_RANK", "PALS_LOCAL_RANKID", "MPI_LOCALRANKID")
_MPI_LOCAL_SIZE = ("PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE", "MPI_LOCALNRANKS")


@dataclass(frozen=True)
class DistEnv:
    """This process's place: global and node-local rank, and the rendezvous address."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    launcher: str  # "torchrun" | "mpi" | "single"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            return name, value
    return None


def _int(env: Mapping[str, str], names: tuple[str, ...], default: int | None = None) -> int | None:
    found = _first(env, names)
    if found is None:
        return default
    name, value = found
    try:
        return int(value)
    except ValueError:
        raise PrismError(f"environment variable {name}={value!r} is not an integer") from None


def _nodefile_first_host(env: Mapping[str, str]) -> str | None:
    """First host of `$PBS_NODEFILE` (PBS lists one line per node; the first hosts rank 0)."""
    path = env.get("PBS_NODEFILE")
    if not path:
        return None
    try:
        with open(path) as handle:
            for line in handle:
                if line.strip():
                    return line.strip()
    except OSError as err:
        raise PrismError(f"PBS_NODEFILE={path} cannot be read ({err.strerror})") from None
    raise PrismError(f"PBS_NODEFILE={path} is empty: no host for MASTER_ADDR")


def discover(env: Mapping[str, str] | None = None) -> DistEnv:
    """Read the launcher's environment (torchrun first, then MPI/PALS, else one process).

    MASTER_ADDR: an explicit `MASTER_ADDR` wins (torchrun always sets it, and the
    Aurora job body exports the high-speed-network name); else the first line of
    `$PBS_NODEFILE`; else 127.0.0.1. MASTER_PORT: `MASTER_PORT` or 29500.
    """
    env = os.environ if env is None else env
    if _first(env, ("RANK",)) and _first(env, ("WORLD_SIZE",)):
        launcher = "torchrun"
        rank = _int(env, ("RANK",))
        world = _int(env, ("WORLD_SIZE",))
        local_rank = _int(env, ("LOCAL_RANK",), rank)
        local_world = _int(env, ("LOCAL_WORLD_SIZE",), world)
    elif _first(env, _MPI_RANK) and _first(env, _MPI_SIZE):
        launcher = "mpi"
        rank = _int(env, _MPI_RANK)
        world = _int(env, _MPI_SIZE)
        # Without a node-local rank, assume one node (right for a laptop's `mpiexec -n 2`).
        local_rank = _int(env, _MPI_LOCAL_RANK, rank)
        local_world = _int(env, _MPI_LOCAL_SIZE, world)
    else:
        launcher, rank, world, local_rank, local_world = "single", 0, 1, 0, 1
    assert rank is not None and world is not None and local_rank is not None and local_world is not None
    if world < 1 or not 0 <= rank < world:
        raise PrismError(
            f"{launcher} environment gives rank {rank} of world size {world}: rank must be in [0, world size)"
        )
    if local_world < 1 or not 0 <= local_rank < local_world or local_world > world:
        raise PrismError(
            f"{launcher} environment gives local rank {local_rank} of {local_world} "
            f"processes on this node (world size {world}): inconsistent"
        )
    addr = env.get("MASTER_ADDR") or (_nodefile_first_host(env) if launcher != "single" else None) or "127.0.0.1"
    port = _int(env, ("MASTER_PORT",), DEFAULT_MASTER_PORT)
    assert port is not None
    if not 0 < port < 65536:
        raise PrismError(f"MASTER_PORT={port} is not a TCP port")
    return DistEnv(rank, world, local_rank, local_world, addr, port, launcher)


def export_torch_env(dist_env: DistEnv, environ: dict[str, str] | None = None) -> None:
    """Write the torchrun variable names so that `init_process_group(init_method="env://")` works."""
    environ = os.environ if environ is None else environ  # type: ignore[assignment]
    environ.update(
        {
            "RANK": str(dist_env.rank),
            "WORLD_SIZE": str(dist_env.world_size),
            "LOCAL_RANK": str(dist_env.local_rank),
            "LOCAL_WORLD_SIZE": str(dist_env.local_world_size),
            "MASTER_ADDR": dist_env.master_addr,
            "MASTER_PORT": str(dist_env.master_port),
        }
    )


def free_port() -> int:
    """A TCP port free on this host now, for a rendezvous of processes this host starts itself."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

"""Rank discovery from fake launcher environments (no processes started)."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.parallel.env import DEFAULT_MASTER_PORT, discover, export_torch_env


def test_single_process_without_launcher_variables():
    env = discover({})
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (0, 1, 0, 1)
    assert env.launcher == "single" and env.master_addr == "127.0.0.1" and env.master_port == DEFAULT_MASTER_PORT
    assert env.is_main and not env.distributed


def test_torchrun_variables():
    env = discover(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "node7",
            "MASTER_PORT": "29555",
        }
    )
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (3, 4, 1, 2)
    assert (env.launcher, env.master_addr, env.master_port) == ("torchrun", "node7", 29555)
    assert not env.is_main and env.distributed


def test_torchrun_wins_over_mpi_variables():
    env = discover({"RANK": "1", "WORLD_SIZE": "2", "PMI_RANK": "0", "PMI_SIZE": "2"})
    assert env.launcher == "torchrun" and env.rank == 1


def test_mpich_hydra_variables():
    env = discover({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"})
    assert (env.launcher, env.rank, env.world_size, env.local_rank, env.local_world_size) == ("mpi", 1, 2, 1, 2)


def test_pals_variables_on_aurora(tmp_path):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("x4102c5s2b0n0.hostmgmt.cm.aurora\nx4102c5s3b0n0.hostmgmt.cm.aurora\n")
    env = discover(
        {
            "PALS_RANKID": "13",
            "PMI_SIZE": "24",
            "PALS_LOCAL_RANKID": "1",
            "PMI_LOCAL_SIZE": "12",
            "PBS_NODEFILE": str(nodefile),
        }
    )
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (13, 24, 1, 12)
    assert env.master_addr == "x4102c5s2b0n0.hostmgmt.cm.aurora"


def test_pmi_rank_preferred_and_pmi_local_rank_read():
    env = discover({"PMI_RANK": "5", "PALS_RANKID": "5", "PMI_SIZE": "12", "PMI_LOCAL_RANK": "5"})
    assert (env.rank, env.local_rank, env.local_world_size) == (5, 5, 12)


def test_explicit_master_addr_beats_nodefile(tmp_path):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("first\nsecond\n")
    env = discover({"PMI_RANK": "0", "PMI_SIZE": "2", "PBS_NODEFILE": str(nodefile), "MASTER_ADDR": "first.hsn"})
    assert env.master_addr == "first.hsn"


def test_mpi_without_local_rank_assumes_one_node():
    env = discover({"PMI_RANK": "1", "PMI_SIZE": "2"})
    assert (env.local_rank, env.local_world_size) == (1, 2)


@pytest.mark.parametrize(
    "env,needle",
    [
        ({"RANK": "2", "WORLD_SIZE": "2"}, "rank 2 of world size 2"),
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not an integer"),
        ({"PMI_RANK": "0", "PMI_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000"),
        ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"}, "local rank 3"),
    ],
)
def test_inconsistent_environments_are_user_errors(env, needle):
    with pytest.raises(PrismError, match=needle):
        discover(env)


def test_missing_or_empty_nodefile_is_named(tmp_path):
    with pytest.raises(PrismError, match="cannot be read"):
        discover({"PMI_RANK": "0", "PMI_SIZE": "2", "PBS_NODEFILE": str(tmp_path / "none")})
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(PrismError, match="is empty"):
        discover({"PMI_RANK": "0", "PMI_SIZE": "2", "PBS_NODEFILE": str(empty)})


def test_export_writes_torchrun_names():
    environ: dict[str, str] = {}
    export_torch_env(discover({"PMI_RANK": "1", "PMI_SIZE": "2", "MASTER_PORT": "29600"}), environ)
    assert environ == {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29600",
    }

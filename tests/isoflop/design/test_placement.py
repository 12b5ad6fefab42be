"""Placement: each run on the fewest devices that hold it, its global batch kept exactly; a run none holds refused."""

from __future__ import annotations

import dataclasses

import pytest

from prism.core.errors import PrismError
from prism.core.families import family_spec
from prism.data.batching import check_batch
from prism.data.loader import check_batching
from prism.isoflop.design.placement import (
    GIB,
    MARGIN,
    Devices,
    RunShape,
    memory_bytes,
    parse_nodes_by_backbone,
    place,
    place_rows,
    run_shape,
    state_bytes,
    study_devices,
)
from prism.isoflop.design.plantext import plan_table
from prism.isoflop.design.trajectories import trajectories
from prism.isoflop.records import PlanRow
from prism.isoflop.runs.launch import run_config
from prism.launch.command import train_args
from prism.model.config import backbone_config

from ..conftest import plan_row

SPEC = family_spec("text_image")
TILES = Devices(memory_gb=64, per_node=12, nodes=1, precision="bf16", strategy="hsdp")


def shape(backbone: str, row_len: int, published_vocab: bool = True) -> RunShape:
    """A run of `backbone` (with its published vocabulary, or the byte tokenizer's) on rows of `row_len`."""
    if not published_vocab:
        cfg = backbone_config(backbone, SPEC.vocab.rows)
        return run_shape(backbone, SPEC, cfg.params + 30_000, cfg.params + 30_000, row_len)
    cfg = backbone_config(backbone)
    params = cfg.params + 30_000  # with the encoder and projector
    return RunShape(
        params, params, cfg.d_model, cfg.n_layers, cfg.ffn_dim, cfg.vocab_size, row_len,
        SPEC.encoder_width, SPEC.n_modality_tokens,
    )  # fmt: skip


def test_a_1b_run_on_2048_token_rows_is_placed_on_64_gib_tiles_keeping_its_batch():
    placed = place(shape("1b", 2048), 384, TILES)
    assert placed is not None
    assert placed.devices * placed.micro_batch * placed.accum_steps == 384
    assert placed.accum_steps > 1  # 384 rows of 2048 tokens do not fit a tile at once
    assert placed.memory.total * (1 + MARGIN) <= 64 * GIB
    # the next larger micro-batch would not fit: the largest that does is taken
    rows = 384 // placed.devices
    larger = min(m for m in range(placed.micro_batch + 1, rows + 1) if rows % m == 0)
    assert memory_bytes(shape("1b", 2048), larger, "bf16").total * (1 + MARGIN) > 64 * GIB


def test_a_small_run_takes_one_device_and_its_whole_batch():
    placed = place(shape("3m", 326, published_vocab=False), 384, TILES)
    assert (placed.devices, placed.micro_batch, placed.accum_steps) == (1, 384, 1)


def test_a_run_whose_state_does_not_fit_one_device_is_sharded_over_the_fewest_that_hold_it():
    run = shape("7b", 2048)
    placed = place(run, 384, TILES)
    assert placed.devices > 1 and 384 % placed.devices == 0
    assert placed.devices * placed.micro_batch * placed.accum_steps == 384
    fewer = [d for d in range(1, placed.devices) if 384 % d == 0]
    assert all(memory_bytes(run, 1, "bf16", "hsdp", d, 12).total * (1 + MARGIN) > 64 * GIB for d in fewer)
    # sharded state divides by the devices; ddp replicates it (and keeps its gradient buckets)
    assert state_bytes(run, "bf16", "fsdp", 4) == pytest.approx(state_bytes(run, "bf16") / 4)
    assert state_bytes(run, "bf16", "ddp", 4) > state_bytes(run, "bf16")


def test_a_run_no_placement_holds_is_refused_in_one_line_naming_the_fix():
    row = dataclasses.replace(plan_row("7b", 1e20, batch=384), params=6.7e9, params_total=6.7e9, tokens_per_sample=2048)
    with pytest.raises(PrismError) as ddp:
        place_rows([row], dataclasses.replace(TILES, strategy="ddp"), SPEC)
    assert "\n" not in str(ddp.value) and str(ddp.value).startswith(f"run {row.run_id}:")
    assert "train.strategy fsdp" in str(ddp.value)
    big = dataclasses.replace(row, backbone="32b", params=3.3e10, params_total=3.3e10)
    with pytest.raises(PrismError, match=r"use cluster\.nodes_by_backbone \{32b: \d+\}$"):
        place_rows([big], dataclasses.replace(TILES, strategy="fsdp"), SPEC)
    with pytest.raises(PrismError, match=r"train\.strategy fsdp and cluster\.nodes_by_backbone \{32b: \d+\}"):
        place_rows([big], TILES, SPEC)


def test_more_nodes_for_a_backbone_hold_what_one_node_does_not():
    run = shape("32b", 2048)
    fsdp = dataclasses.replace(TILES, strategy="fsdp")
    assert place(run, 384, fsdp) is None
    placed = place(run, 384, dataclasses.replace(fsdp, nodes_by_backbone={"32b": 8}), 8)
    assert placed.devices % 12 == 0 and placed.devices * placed.micro_batch * placed.accum_steps == 384


def test_placed_rows_keep_their_batch_and_the_ranks_checks_accept_them():
    rows = place_rows([plan_row("30k", 1e12, batch=384)], TILES, SPEC)
    assert (rows[0].devices, rows[0].micro_batch, rows[0].accum_steps) == (1, 384, 1)
    check_batch(384, rows[0].devices, "plan.global_batch", "a run")  # ranks x micro x accum = global
    check_batching(0, rows[0].devices, 384)
    check_batch(384, 3, "plan.global_batch", "a run")  # 3 x 4 x 32 = 384
    check_batching(2, 3, 384)


def test_the_training_command_carries_the_micro_batch_only_when_it_accumulates():
    row = plan_row("30k", 1e12, batch=384).to_json()
    plain = train_args(run_config(row | {"micro_batch": 384, "accum_steps": 1}, "data", "out"))
    assert "--micro-batch" not in plain
    assert train_args(run_config(row, "data", "out")) == plain  # an older plan's row: the same command
    accumulated = train_args(run_config(row | {"micro_batch": 96, "accum_steps": 4}, "data", "out"))
    assert accumulated[accumulated.index("--micro-batch") + 1] == "96"


def test_an_older_plan_reads_back_and_the_table_shows_the_placement():
    old = plan_row("30k", 1e12, batch=8).to_json()
    for key in ("devices", "micro_batch", "accum_steps"):
        old.pop(key)
    row = PlanRow(**old)
    assert (row.devices, row.micro_batch, row.accum_steps) == (1, None, 1)
    assert trajectories([old])[0].accum_steps == 1
    placed = dataclasses.replace(row, devices=2, micro_batch=2, accum_steps=2)
    head, _, line = plan_table([placed]).splitlines()
    assert head.split()[4:7] == ["dev", "micro", "accum"] and line.split()[4:7] == ["2", "2", "2"]
    assert trajectories([placed.to_json()])[0].micro_batch == 2


def test_a_local_study_places_on_this_host_with_no_plan_flags():
    local = study_devices({"device_memory_gb": None}, "local", "auto", "auto", "none")
    assert local.flags() == [] and local.precision == "fp32" and local.per_node == 1
    aurora = study_devices(
        {"device_memory_gb": 64, "ranks_per_node": 12, "nodes": 1, "nodes_by_backbone": {"7b": 2}},
        "aurora", "xpu", "auto", "hsdp",
    )  # fmt: skip
    assert aurora == dataclasses.replace(TILES, nodes_by_backbone={"7b": 2})
    assert aurora.flags() == ["--device-memory-gb", "64", "--devices-per-node", "12", "--nodes-by-backbone", "7b=2",
                              "--precision", "bf16", "--strategy", "hsdp"]  # fmt: skip
    assert parse_nodes_by_backbone("7b=2, 32b=8") == {"7b": 2, "32b": 8}
    with pytest.raises(PrismError, match="BACKBONE=NODES"):
        parse_nodes_by_backbone("7b:2")

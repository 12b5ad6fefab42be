"""Packs of one-device runs: at most a node's devices at once, walltime from the busiest device, split
where the cap would be exceeded."""

from __future__ import annotations

import pytest

from prism.workflow.packing import Unit, lpt, make_packs, slot_seconds, split, summary


def units(*seconds, devices=1, nodes=1, prefix="r"):
    return [Unit(f"{prefix}{i}", (f"{prefix}{i}",), s, devices, nodes) for i, s in enumerate(seconds)]


def test_twelve_runs_on_four_slots_are_one_pack_whose_walltime_is_its_busiest_slot():
    packs = make_packs(units(*[100.0] * 12), slots=4, limit_s=10_000)
    assert len(packs) == 1 and len(packs[0].jobs) == 12
    assert packs[0].seconds == pytest.approx(300.0)  # 12 runs of 100 s over 4 slots: 3 in series each
    assert summary(12, packs) == "12 runs in 1 jobs on 1 nodes"


def test_longest_first_balances_the_slots():
    slots = lpt(units(5, 4, 3, 3, 3), 2)
    assert sorted(sum(u.seconds for u in s) for s in slots) == [8, 10]
    assert slot_seconds(units(5, 4, 3, 3, 3), 2) == 10


def test_a_pack_over_the_cap_is_split_into_packs_that_each_fit():
    # one 100 s run a slot fits 150 s: 3 packs of 4
    groups = split(units(*[100.0] * 12), slots=4, limit_s=150)
    assert [len(g) for g in groups] == [4, 4, 4]
    # two a slot fit 250 s: 2 packs, every one within it
    groups = split(units(*[100.0] * 12), slots=4, limit_s=250)
    assert len(groups) == 2 and sum(len(g) for g in groups) == 12
    assert all(slot_seconds(g, 4) <= 250 for g in groups)


def test_units_over_the_cap_share_packs_of_their_own():
    groups = split(units(500.0, 400.0, 300.0, 10.0), slots=2, limit_s=200)
    assert [sorted(u.seconds for u in g) for g in groups] == [[400.0, 500.0], [300.0], [10.0]]


def test_runs_on_several_devices_or_nodes_keep_a_job_each():
    packs = make_packs(units(10.0, 20.0) + units(50.0, devices=12, nodes=1, prefix="big") +
                       units(60.0, devices=24, nodes=2, prefix="huge"), slots=12, limit_s=None)  # fmt: skip
    assert [(len(p.units), p.nodes, p.slots) for p in packs] == [(2, 1, 12), (1, 1, 12), (1, 2, 24)]
    assert summary(4, packs) == "4 runs in 3 jobs on 4 nodes"


def test_unknown_estimates_make_one_pack_of_unknown_walltime():
    packs = make_packs([*units(10.0), Unit("x", ("x",), None)], slots=4, limit_s=100)
    assert len(packs) == 1 and packs[0].seconds is None


def test_a_wsd_trajectory_is_one_unit_its_jobs_in_one_pack():
    traj = Unit("t", ("t/to-00000010", "t/to-00000020", "run-a", "run-b"), 40.0)
    packs = make_packs([traj, *units(5.0, 5.0)], slots=2, limit_s=None)
    assert len(packs) == 1 and set(traj.jobs) <= set(packs[0].jobs) and packs[0].seconds == 40.0

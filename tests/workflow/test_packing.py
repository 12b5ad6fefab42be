"""Packs of one-device runs: at most a node's devices at once, walltime from the busiest device, split
where the cap would be exceeded."""

from __future__ import annotations

from dataclasses import replace

import pytest

from prism.workflow.packing import (
    Unit,
    lpt,
    make_packs,
    slot_loads,
    slot_seconds,
    speedup,
    split,
    spread_units,
    summary,
    widths,
)


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


def test_widths_keep_the_global_batch_and_the_micro_batch():
    assert widths(384, 1, 4) == (1, 2, 3, 4)  # unaccumulated: any count that divides the batch
    assert widths(384, 3, 4) == (1, 3)  # accumulating: each device takes accum / k of the micro-batches
    assert widths(10, 1, 12) == (1, 2, 5, 10)


def test_a_unit_longer_than_its_packs_share_spreads_over_several_devices():
    # 4 slots: one 300 s unit and four of 100 s are 700 s of work, 175 s a slot; on one device the long unit
    # alone sets the pack's walltime (300 s), on two (at 0.9 per doubling: 1.8x) it ends at 167 s.
    long = Unit("long", ("long",), 300.0, widths=(1, 2))
    short = [replace(u, widths=(1, 2)) for u in units(100.0, 100.0, 100.0, 100.0)]
    assert slot_seconds([long, *short], 4) == 300.0
    spread = spread_units([long, *short], 4, efficiency=0.9)
    assert {u.key: u.devices for u in spread} == {"long": 2, "r0": 1, "r1": 1, "r2": 1, "r3": 1}
    assert [u.seconds for u in spread if u.key == "long"] == [pytest.approx(300 / 1.8)]
    assert slot_seconds(spread, 4) == pytest.approx(200.0)  # the pack's busiest slot: its load, not one unit
    assert speedup(4, 0.9) == pytest.approx(4 * 0.81)
    # on up to four: 300 / 3.24 s on all four, then the short ones, 192.6 s
    four = spread_units([replace(long, widths=(1, 2, 4)), *short], 4, efficiency=0.9)
    assert [u.devices for u in four if u.key == "long"] == [4]
    assert slot_seconds(four, 4) == pytest.approx(300 / 3.24 + 100)
    # Priced in the pack: its walltime from the spread schedule, the unit's jobs on two devices.
    [pack] = make_packs([long, *short], slots=4, limit_s=None, efficiency=0.9)
    assert pack.seconds == pytest.approx(200.0) and pack.devices_of("long") == 2 and pack.devices_of("r0") == 1


def test_nothing_spreads_where_it_would_not_end_the_pack_sooner_or_may_not():
    even = [replace(u, widths=(1, 2)) for u in units(*[100.0] * 8)]
    assert [u.devices for u in spread_units(even, 4, 0.9)] == [1] * 8
    fixed = [Unit("long", ("long",), 300.0), *units(100.0, 100.0)]  # widths (1,): its batch allows no other
    assert [u.devices for u in spread_units(fixed, 4, 0.9)] == [1, 1, 1]
    [pack] = make_packs([Unit("long", ("long",), 300.0, widths=(1, 2)), *units(10.0)], slots=4, limit_s=None)
    assert pack.devices_of("long") == 1  # without an efficiency: no spreading


def test_a_spread_unit_waits_for_devices_of_its_pack_in_the_list_schedule():
    # two slots, longest first: the 100 s unit, then the wide one on both slots once that has ended (at 100 s)
    loads = slot_loads([Unit("w", ("w",), 50.0, devices=2), *units(100.0, 30.0)], 2)
    assert loads == [180.0, 150.0]

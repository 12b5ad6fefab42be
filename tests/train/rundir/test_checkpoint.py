"""Checkpoints: a save/load round trip restores everything; partial files never count."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from prism.train.lr_schedule import Schedule, build_optimizer, build_scheduler  # noqa: E402
from prism.train.rundir import checkpoint  # noqa: E402


def make():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    opt = build_optimizer(list(model.parameters()), 1e-2)
    return model, opt, build_scheduler(opt, Schedule("cosine", 2, 10))


def step(model, opt, sched):
    model(torch.ones(2, 3)).pow(2).sum().backward()
    opt.step()
    sched.step()
    opt.zero_grad()


def test_round_trip_restores_model_optimizer_scheduler_and_rng(tmp_path):
    model, opt, sched = make()
    for _ in range(3):
        step(model, opt, sched)
    cpu = torch.device("cpu")
    checkpoint.save(tmp_path, 3, model, opt, sched, {"epoch": 0, "unit_in_epoch": 24}, {"samples": 24}, cpu, True)
    expected_rand = (random.random(), torch.rand(1).item())
    step(model, opt, sched)
    after = [p.detach().clone() for p in model.parameters()]

    model2, opt2, sched2 = make()
    found = checkpoint.latest(tmp_path)
    assert found is not None and found.name == "step-00000003.pt"
    got_step, loader, extra = checkpoint.load(found, model2, opt2, sched2, cpu, rank=0)
    assert (got_step, loader, extra) == (3, {"epoch": 0, "unit_in_epoch": 24}, {"samples": 24})
    assert (random.random(), torch.rand(1).item()) == expected_rand
    step(model2, opt2, sched2)
    for a, b in zip(after, model2.parameters()):
        assert torch.equal(a, b)


def test_latest_ignores_partial_files_and_old_ones_are_pruned(tmp_path):
    model, opt, sched = make()
    cpu = torch.device("cpu")
    for s in (1, 2, 3):
        checkpoint.save(tmp_path, s, model, opt, sched, {}, {}, cpu, True)
    (tmp_path / "checkpoints" / ".step-abc.tmp").write_bytes(b"half")
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*.pt")) == [
        "step-00000002.pt",
        "step-00000003.pt",
    ]
    assert checkpoint.latest(tmp_path).name == "step-00000003.pt"
    checkpoint.remove_partial(tmp_path)
    assert not list((tmp_path / "checkpoints").glob(".step-*"))


def test_a_corrupt_checkpoint_is_a_user_error_naming_it(tmp_path):
    from prism.core.errors import PrismError

    model, opt, sched = make()
    bad = tmp_path / "step-00000001.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(PrismError, match="step-00000001.pt cannot be read"):
        checkpoint.load(bad, model, opt, sched, torch.device("cpu"), 0)


def test_an_unreadable_newest_checkpoint_is_set_aside_never_deleted(tmp_path, capsys):
    model, opt, sched = make()
    cpu = torch.device("cpu")
    for s in (1, 2):
        step(model, opt, sched)
        checkpoint.save(tmp_path, s, model, opt, sched, {"epoch": 0}, {"samples": s}, cpu, True)
    newest = checkpoint.latest(tmp_path)
    newest.write_bytes(newest.read_bytes()[:100])
    path, payload = checkpoint.newest_readable(tmp_path)
    assert path.name == "step-00000001.pt" and payload["step"] == 1
    assert (tmp_path / "checkpoints" / "step-00000002.pt.unreadable").stat().st_size == 100
    assert "cannot be read" in capsys.readouterr().err
    assert checkpoint.latest(tmp_path) == path
    path.write_bytes(b"")
    assert checkpoint.newest_readable(tmp_path) is None
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step-00000001.pt.unreadable",
        "step-00000002.pt.unreadable",
    ]

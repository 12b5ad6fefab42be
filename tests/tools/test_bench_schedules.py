"""tools/bench_schedules.py: wsd against cosine per run, paired over seeds."""

import pytest

from .conftest import load_tool


def test_difference_is_paired_per_seed():
    tool = load_tool("bench_schedules")
    # Seed 1 is worse for both schedules; pairing removes that from the difference.
    runs = {
        ("cosine", 0): {"loss": 1.00, "steps": 10},
        ("wsd", 0): {"loss": 0.99, "steps": 10},
        ("cosine", 1): {"loss": 1.20, "steps": 10},
        ("wsd", 1): {"loss": 1.188, "steps": 10},
    }
    r = tool.summarise("15k@1e11", runs, [0, 1])
    assert r["diff"] == pytest.approx(-1.0)
    assert r["se"] == pytest.approx(0.0, abs=1e-9)
    assert r["spread"] > 10  # one run's seed spread is large, the paired difference is not
    assert (r["cosine"], r["wsd"]) == (pytest.approx(1.1), pytest.approx(1.089))


def test_runs_and_logs_do_not_collide(tmp_path):
    tool = load_tool("bench_schedules")
    dirs = {
        tool.run_dir(tmp_path, cell, s, seed, warmup)
        for cell in ("45k@2.5e11", "45k@2e12")
        for s in tool.SCHEDULES
        for seed in (0, 1)
        for warmup in (None, 50)
    }
    assert len(dirs) == 16 and len({d.parent / f"{d.name}.log" for d in dirs}) == 16


def test_trains_both_schedules_and_reports(tmp_path, capsys, shards):
    # the session's shards, read in place: the tool only reads the study's data
    (tmp_path / "study" / "data").mkdir(parents=True)
    (tmp_path / "study" / "data" / "text_image").symlink_to(shards)
    tool = load_tool("bench_schedules")
    argv = [
        "--study",
        str(tmp_path / "study"),
        "--cells",
        "4k@5e9",
        "--seeds",
        "0,1",
        "--warmup",
        "2",
        "--final-eval-samples",
        "64",
        "--out",
        str(tmp_path / "out"),
    ]
    assert tool.main(argv) == 0
    out = capsys.readouterr().out
    assert "| 4k@5e9 |" in out
    assert len(list((tmp_path / "out").glob("*/metrics.json"))) == 4
    assert (tmp_path / "out" / "4k-C5e9-wsd-w2-s1.log").exists()
    # --lr-scale: both schedules at a multiple of the study's peak rate, in runs of their own
    import json

    from prism.model.config import backbone_config
    from prism.train.lr_schedule import default_lr

    assert tool.main(argv[:5] + ["0"] + argv[6:] + ["--lr-scale", "2"]) == 0
    scaled = sorted((tmp_path / "out").glob("*-lr2-s0/metrics.json"))
    assert len(scaled) == 2
    assert all(
        json.loads(m.read_text())["lr"] == pytest.approx(2 * default_lr(backbone_config("4k").d_model)) for m in scaled
    )


def test_both_schedules_warm_up_alike_unless_told():
    import argparse

    tool = load_tool("bench_schedules")
    args = argparse.Namespace(warmup=50, cosine_warmup=None)
    assert tool.warmup_of(args, "cosine") == tool.warmup_of(args, "wsd") == 50
    args.cosine_warmup = "run"  # prism train's own: 5% of the run
    assert (tool.warmup_of(args, "cosine"), tool.warmup_of(args, "wsd")) == (None, 50)
    args.cosine_warmup = "18"
    assert tool.warmup_of(args, "cosine") == 18

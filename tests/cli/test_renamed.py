"""The old tools' flag names: accepted with one line naming the new flag, or refused in one line."""

from __future__ import annotations

import json

import pytest

from prism.cli import build_parser, main

LAUNCH = ["isoflop", "launch", "--plan", "plan.yaml", "--launcher", "local", "--data", "shards"]


@pytest.mark.parametrize(
    ("argv", "dest", "old", "new"),
    [
        ([*LAUNCH, "--csv", "ledger.csv"], "ledger", "--csv", "--ledger"),
        (["isoflop", "collect", "--outputs", "runs", "--out", "runs.csv"], "runs_dir", "--outputs", "--runs-dir"),
        (["isoflop", "collect", "--runs-dir", "runs", "--csv", "runs.csv"], "out", "--csv", "--out"),
        (["perf", "aggregate", "--outputs", "sweeps", "--out", "perf.csv"], "sweep_dir", "--outputs", "--sweep-dir"),
        (["perf", "aggregate", "--sweep-dir", "sweeps", "--csv", "perf.csv"], "out", "--csv", "--out"),
    ],
)
def test_an_old_name_means_the_new_one_with_one_line_saying_so(argv, dest, old, new, capsys):
    args = build_parser().parse_args(argv)
    value = argv[argv.index(old) + 1]
    assert getattr(args, dest) == value
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"{old} is deprecated, use {new}" in err[0] and err[0].startswith("prism ")


def test_the_new_names_say_nothing(capsys):
    args = build_parser().parse_args([*LAUNCH, "--ledger", "ledger.csv"])
    assert args.ledger == "ledger.csv" and args.launcher == "local"
    assert capsys.readouterr().err == ""


def test_a_required_flag_is_still_required_under_either_name(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(LAUNCH)
    assert "--ledger" in capsys.readouterr().err


@pytest.mark.parametrize("script", ["path/to/script.sh", "launch_aurora_daos.py"])
def test_a_launcher_script_is_refused_in_one_line_naming_what_to_give(script, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*LAUNCH[:5], script, "--ledger", "l.csv"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert f"--launcher takes a launcher name (local, torchrun, aurora, slurm), not a script ({script})" in err[0]


def test_an_unknown_launcher_name_lists_the_names(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*LAUNCH[:5], "lsf", "--ledger", "l.csv"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("error: --launcher 'lsf' is not a launcher; choose one of local, torchrun, aurora, slurm")


def test_perf_aggregate_runs_under_the_old_names(tmp_path, capsys):
    run = tmp_path / "sweeps" / "t1" / "SMOKE" / "vla" / "padded"
    run.mkdir(parents=True)
    rows = [{"step": s, "samples_per_s": 10.0, "tokens_per_s": 640.0, "mfu": 0.1, "layout": "padded"} for s in (1, 2)]
    (run / "perf.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "perf.csv"
    assert main(["perf", "aggregate", "--outputs", str(tmp_path / "sweeps"), "--csv", str(out)]) == 0
    assert out.is_file() and out.with_suffix(".md").is_file()
    assert capsys.readouterr().err.count("is deprecated") == 2

"""Trackers: a run's scalars in TensorBoard and W&B, a wsd trajectory as one curve its branches continue."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from prism.core.errors import PrismError
from prism.train.config import RunConfig
from prism.train.rundir.runfiles import read_jsonl
from prism.train.trackers import eval_scalars, parse_trackers, run_name, train_scalars, wandb_id

WSD = ["--schedule", "wsd", "--warmup", "5", "--eval-every", "10", "--log-every", "4"]
GROUP = "study-text_image-e2e"
TRAJ = "30k-BASE-e2e-B8"
RUN = "30k-BASE-e2e-C3e11"


def config(**overrides) -> RunConfig:
    base = dict(
        family="text_image",
        backbone="30k",
        variant="BASE",
        regime="e2e",
        budget=3e11,
        data="d",
        out="o",
        global_batch=8,
    )
    return RunConfig(**{**base, **overrides})


def test_trackers_are_named_and_checked():
    assert parse_trackers("tensorboard, wandb,tensorboard") == ("tensorboard", "wandb")
    assert parse_trackers(None) == ()
    with pytest.raises(PrismError, match="unknown tracker 'mlflow'.*tensorboard, wandb"):
        config(trackers="mlflow")


def test_a_stable_segment_logs_into_its_trajectory_and_a_branch_into_its_run():
    assert run_name(config(schedule="wsd", cooldown_fraction=0.0, max_steps=16)) == TRAJ
    assert run_name(config(schedule="wsd", init_from="seg", init_step=16)) == RUN
    assert run_name(config()) == RUN
    # the same names give the same W&B run (a resumed run, every segment of a trajectory)
    assert wandb_id("prism", GROUP, TRAJ) == wandb_id("prism", GROUP, TRAJ) != wandb_id("prism", "other", TRAJ)


def test_scalars_of_perf_and_eval_rows():
    row = {
        "step": 4,
        "loss": 2.5,
        "lr": 0.01,
        "grad_norm": 0.5,
        "mfu": 0.1,
        "samples_per_s": 300.0,
        "tokens": 512,
        "run_id": RUN,
        "collapsed": None,
    }
    assert train_scalars(row) == {
        "train/loss": 2.5,
        "train/lr": 0.01,
        "train/grad_norm": 0.5,
        "train/mfu": 0.1,
        "train/samples_per_s": 300.0,
        "train/tokens": 512.0,
    }
    assert eval_scalars({"step": 10, "loss": 3.0}) == {"eval/loss": 3.0}
    assert eval_scalars({"step": 16, "loss": 2.9, "loss_se": 0.01, "final": True}) == {
        "eval/final_loss": 2.9,
        "eval/final_loss_se": 0.01,
    }


def same_curve(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    """The same steps in the same order, the values equal to float32 (what TensorBoard stores)."""
    return [s for s, _ in a] == [s for s, _ in b] and [v for _, v in a] == pytest.approx([v for _, v in b], rel=1e-6)


def steps_of(rows: list[dict], **match) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in rows if all(bool(r.get(k)) == v for k, v in match.items())]


@pytest.mark.slow
def test_segments_and_branch_write_one_continued_curve(train, tmp_path, tensorboard_scalars, wandb_runs):
    pytest.importorskip("wandb")
    track = tmp_path / "tracking"
    flags = [*WSD, "--trackers", "tensorboard,wandb", "--tracker-dir", str(track), "--tracker-group", GROUP]
    seg1, seg2, branch = tmp_path / "to16", tmp_path / "to32", tmp_path / "branch"
    for out, steps, init in ((seg1, 16, []), (seg2, 32, ["--init-from", str(seg1), "--init-step", "16"])):
        done = train(
            out, *flags, "--cooldown-fraction", "0", "--max-steps", str(steps), "--checkpoint-at", str(steps), *init
        )
        assert done.returncode == 0, done.stderr[-3000:]
    done = train(branch, *flags, "--max-steps", "40", "--init-from", str(seg2), "--init-step", "32")
    assert done.returncode == 0, done.stderr[-3000:]

    # The branch's perf/eval files hold the whole history (prefix copied); the trackers hold it once.
    perf, evals = read_jsonl(branch / "perf.jsonl"), read_jsonl(branch / "eval.jsonl")
    tb_traj = tensorboard_scalars(track / "tensorboard" / GROUP / TRAJ)
    tb_run = tensorboard_scalars(track / "tensorboard" / GROUP / RUN)
    traj_loss, run_loss = tb_traj["train/loss"], tb_run["train/loss"]
    assert max(s for s, _ in traj_loss) == 32 and min(s for s, _ in run_loss) == 36  # the branch goes on after 32
    assert [s for s, _ in traj_loss + run_loss] == [r["step"] for r in perf]  # every step once, in order
    assert [v for _, v in traj_loss + run_loss] == pytest.approx([r["loss"] for r in perf], rel=1e-6)
    assert same_curve(tb_traj["eval/loss"] + tb_run.get("eval/loss", []), steps_of(evals, final=False))
    assert [s for s, _ in tb_traj["eval/final_loss"]] == [16, 32]  # each segment's end
    assert same_curve(tb_run["eval/final_loss"], steps_of(evals, final=True)[-1:])
    for tag in ("train/lr", "train/grad_norm", "train/tokens", "train/samples_per_s", "train/mfu"):
        assert [s for s, _ in tb_traj[tag] + tb_run[tag]] == [r["step"] for r in perf], tag

    # W&B offline: one run per name (the two segments resume one id), the same history.
    runs = wandb_runs(track)
    by_name: dict[str, list[dict]] = {}
    for run in runs:
        assert (run["group"], run["project"]) == (GROUP, "prism")
        by_name.setdefault(run["name"], []).append(run)
    assert sorted(by_name) == sorted([RUN, TRAJ]) and len(by_name[TRAJ]) == 2
    assert len({run["id"] for run in by_name[TRAJ]}) == 1
    assert {"30k", "C3e11", "e2e"} <= set(by_name[RUN][0]["tags"])
    assert by_name[RUN][0]["config"]["budget"] == 3e11 and by_name[RUN][0]["config"]["size"] == "30k"
    segments = sorted(by_name[TRAJ], key=lambda run: run["history"][0]["_step"])
    history = [row for run in segments + by_name[RUN] for row in run["history"]]
    wb_loss = [(row["_step"], row["train/loss"]) for row in history if "train/loss" in row]
    assert same_curve(wb_loss, traj_loss + run_loss)
    wb_eval = [(row["_step"], row["eval/loss"]) for row in history if "eval/loss" in row]
    assert same_curve(wb_eval, steps_of(evals, final=False))


def test_a_resumed_run_replaces_the_killed_processs_steps(tmp_path, tensorboard_scalars):
    """Killed at step 30 after a checkpoint at 20: the rerun logs 21.. again; each step is read once, the new value."""
    from prism.train.trackers import TensorBoardTracker

    first = TensorBoardTracker(tmp_path / "run", 0, "config")
    for step in range(1, 31):
        first.log(step, {"train/loss": 10.0 + step})
    first.close()
    resumed = TensorBoardTracker(tmp_path / "run", 20, "config")
    for step in range(21, 41):
        resumed.log(step, {"train/loss": float(step)})
    resumed.close()
    curve = tensorboard_scalars(tmp_path / "run")["train/loss"]
    assert [s for s, _ in curve] == list(range(1, 41))
    assert [v for _, v in curve] == [10.0 + s for s in range(1, 21)] + [float(s) for s in range(21, 41)]


def test_wandbs_scratch_folders_stay_under_the_tracker_folder_when_a_job_skips_interpreter_exit(tmp_path):
    """A job the local worker forks ends with os._exit: what wandb would remove at exit must not land in /tmp."""
    pytest.importorskip("wandb")
    system_tmp, root = tmp_path / "system-tmp", tmp_path / "tracking"
    system_tmp.mkdir()
    job = (
        "import os\n"
        "from pathlib import Path\n"
        "from prism.train.trackers import WandbTracker\n"
        f"t = WandbTracker(Path({str(root)!r}), 'prism', 'g', 'n', {{}}, [])\n"
        "t.log(1, {'train/loss': 1.0})\n"
        "t.close()\n"
        "os._exit(0)\n"
    )
    env = {**os.environ, "TMPDIR": str(system_tmp), "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, "-c", job], env=env, check=True, timeout=120)
    assert not [p.name for p in system_tmp.iterdir() if "wandb" in p.name]
    assert [p.name for p in (root / "wandb" / "tmp").iterdir() if "wandb" in p.name]
    assert list(root.glob("wandb/offline-run-*"))  # the run itself is where it always was

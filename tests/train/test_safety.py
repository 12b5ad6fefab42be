"""A run directory's safety: refusals touch nothing, unchanged finished runs are restored (not retrained),
one trainer per directory, an unreadable newest checkpoint falls back, a full disk is one line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prism.core.errors import PrismError
from prism.train.rundir.runfiles import read_jsonl

pytestmark = pytest.mark.slow

SHORT = ["--max-steps", "30", "--checkpoint-every", "10"]


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def snapshot(out: Path) -> dict[str, bytes]:
    """Every file of a run directory (but the lock) by relative path, for before/after comparisons."""
    return {
        str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".lock"
    }


@pytest.fixture
def finished(train, tmp_path):
    out = tmp_path / "run"
    res = train(out, *SHORT)
    assert res.returncode == 0, res.stderr
    return out


def test_a_refused_rerun_leaves_a_finished_run_intact_and_an_unchanged_one_is_restored(train, finished):
    before = snapshot(finished)
    (finished / "metrics.json").unlink()  # Snakemake removes the output before the job runs
    refused = train(finished, *SHORT, "--seed", "5")
    assert refused.returncode == 2 and "holds a different run (seed: 0 -> 5)" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert snapshot(finished) == {k: v for k, v in before.items() if k != "metrics.json"}
    # An invalid value (a hand-edited plan row) is refused before anything is touched.
    bad = train(finished, *SHORT, "--global-batch", "0")
    assert bad.returncode == 2 and "global_batch must be >= 1, got 0" in bad.stderr
    # The original settings again: restored from final/, not retrained.
    again = train(finished, *SHORT)
    assert again.returncode == 0, again.stderr
    assert "restored" in again.stderr and "step 1/" not in again.stderr
    assert snapshot(finished) == before
    # A finished run with metrics.json present refuses other settings too (instead of "nothing to do").
    other = train(finished, *SHORT, "--seed", "5")
    assert other.returncode == 2 and snapshot(finished) == before


def test_a_hand_edited_config_yaml_of_a_finished_run_is_named_and_put_back_restores_it(train, finished):
    before = snapshot(finished)
    config = finished / "config.yaml"
    original = config.read_text()
    config.write_text(original.replace("seed: 0", "seed: 7", 1))
    (finished / "metrics.json").unlink()  # Snakemake removes the output before the job runs
    refused = train(finished, *SHORT)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"{config} says another run (seed: 7 -> 0) than " in refused.stderr and "put it back" in refused.stderr
    config.write_text(original)
    again = train(finished, *SHORT)
    assert again.returncode == 0 and "restored" in again.stderr and "step 1/" not in again.stderr
    assert snapshot(finished) == before


def test_restore_puts_a_finished_run_back_before_anything_is_launched(train, finished):
    """The workflow's job runs `--restore --dry-run` before it launches (and, packed, claims a device for) the
    run's body: an unchanged finished run is put back there, so the body is not run at all."""
    before = snapshot(finished)
    (finished / "metrics.json").unlink()  # Snakemake removes the output before the job runs
    res = train(finished, *SHORT, "--restore", "--dry-run")
    assert res.returncode == 0 and "restored" in res.stderr, res.stderr
    assert "prism train" in res.stdout  # the body is still printed
    assert snapshot(finished) == before
    # Asked to retrain, nothing is restored: the body trains.
    (finished / "metrics.json").unlink()
    res = train(finished, *SHORT, "--restore", "--dry-run", env={"PRISM_RETRAIN": "1"})
    assert res.returncode == 0 and not (finished / "metrics.json").exists(), res.stderr


def test_an_explicit_retrain_trains_from_scratch(train, finished):
    first = metrics(finished)
    (finished / "metrics.json").unlink()
    res = train(finished, *SHORT, env={"PRISM_RETRAIN": "1"})
    assert res.returncode == 0 and "restored" not in res.stderr and "step 1/30" in res.stderr
    assert metrics(finished)["final_eval_loss"] == pytest.approx(first["final_eval_loss"], rel=1e-5)
    assert read_jsonl(finished / "perf.jsonl")[0]["step"] == 1


def test_a_byte_identical_data_rebuild_retrains_nothing_and_changed_data_retrains(tmp_path, tiny, run_prism):
    from prism.data.shards import build

    data = tmp_path / "data"
    build("text_image", data, seed=0)
    out = tmp_path / "run"
    flags = ["train", *tiny, "--data", str(data), "--out", str(out), *SHORT]
    assert run_prism(*flags).returncode == 0
    before = snapshot(out)
    build("text_image", data, seed=0, overwrite=True)  # `snakemake --forcerun data`: same bytes
    (out / "metrics.json").unlink()
    res = run_prism(*flags)
    assert res.returncode == 0 and "restored" in res.stderr and snapshot(out) == before
    build("text_image", data, seed=1, overwrite=True)  # other content: trains again, from scratch
    (out / "metrics.json").unlink()
    res = run_prism(*flags)
    assert res.returncode == 0 and "data_manifest changed" in res.stderr and "step 1/30" in res.stderr
    assert metrics(out)["resumed_from"] is None


def test_a_second_trainer_on_the_same_directory_is_refused_naming_the_holder(train, tmp_path):
    from prism.train.rundir.lock import RunLock

    out = tmp_path / "locked"
    with RunLock(out):
        res = train(out, *SHORT)
    assert res.returncode == 2 and f"PID {os.getpid()} on host" in res.stderr and "--wait-lock" in res.stderr
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing written
    # The kernel releases the lock of a killed holder: a fresh trainer proceeds.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from prism.train.rundir.lock import RunLock; "
            f"RunLock({str(out)!r}).acquire(); print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert train(out, *SHORT).returncode == 2
    finally:
        holder.kill()
        holder.wait()
    assert train(out, *SHORT).returncode == 0


def test_a_killed_holders_forked_children_do_not_keep_its_lock(tmp_path):
    """A trainer killed alone leaves its streaming workers for a few seconds: they must not hold the lock."""
    from prism.train.rundir.lock import RunLock

    out = tmp_path / "run"
    code = (
        "import os, sys, time; from prism.train.rundir.lock import RunLock; "
        f"RunLock({str(out)!r}).acquire(); child = os.fork(); "
        "print(child or '', flush=True) if child else None; time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    try:
        with pytest.raises(PrismError, match="is being trained by"):
            RunLock(out, wait=False).acquire()
        holder.kill()
        holder.wait()
        os.kill(child, 0)  # the child lives on
        RunLock(out, wait=False).acquire().release()
    finally:
        holder.kill()
        os.kill(child, 9)


def test_wait_lock_waits_for_the_holder(shards, tiny, tmp_path):
    from prism.train.rundir.lock import RunLock

    out = tmp_path / "waits"
    lock = RunLock(out).acquire()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prism",
            "train",
            *tiny,
            *SHORT,
            "--data",
            str(shards),
            "--out",
            str(out),
            "--wait-lock",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stderr.readline()
        assert "waiting for PID" in first, first
        time.sleep(1.0)
        assert proc.poll() is None and not (out / "config.yaml").exists()
        lock.release()
        _, err = proc.communicate(timeout=300)
    finally:
        lock.release()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err


def test_an_unreadable_newest_checkpoint_is_set_aside_and_the_previous_one_used(train, tmp_path):
    out = tmp_path / "trunc"
    first = train(out, *SHORT, env={"PRISM_TEST_INJECT_NAN_AT_STEP": "25"})
    assert first.returncode == 3
    newest = out / "checkpoints" / "step-00000020.pt"
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])  # a disk filled mid-write, or a damaged file
    (out / "metrics.json").unlink()
    res = train(out, *SHORT)
    assert res.returncode == 0, res.stderr
    assert "step-00000020.pt cannot be read" in res.stderr and "resuming from" in res.stderr
    assert metrics(out)["resumed_from"] == 10
    kept = out / "final" / "step-00000020.pt.unreadable"  # set aside, never deleted (moved with final/)
    assert kept.read_bytes() == data[: len(data) // 2]


def test_preflight_errors_are_one_line_and_write_nothing(train, tmp_path):
    cases = [
        (["--seq-len", "10"], "--seq-len 10 is too short"),
        (["--global-batch", "100000000", "--budget", "1e18"], "needs at least"),
        (["--budget", "-1e10"], "budget must be > 0, got -1"),
    ]
    for flags, message in cases:
        out = tmp_path / "pre"
        res = train(out, *flags)
        assert res.returncode == 2, (flags, res.stderr)
        assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not out.exists()


def test_eval_loss_spikes_are_warnings_in_metrics(train, tmp_path):
    out = tmp_path / "smooth"
    res = train(out, *SHORT)
    assert res.returncode == 0 and metrics(out)["warnings"] == []


def _tmpfs(path: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (the ENOSPC tests run as root in CI)")
    path.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if res.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    _tmpfs(mount, "1500k")  # two 30k checkpoints fit, a third does not
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_during_training_is_one_line_naming_the_path(train, small_disk):
    out = small_disk / "run"
    res = train(out, "--max-steps", "40", "--checkpoint-every", "5")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[-1].startswith("prism train: error: no space left on device writing ") and "needed" in lines[-1]
    assert "Traceback" not in res.stderr and str(out) in lines[-1]


def test_disk_full_during_a_shard_build_is_one_line(small_disk, run_prism):
    res = run_prism("data", "build", "--family", "text_image", "--out", str(small_disk / "data"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("prism data build: error: no space left on device writing ")
    assert len(res.stderr.strip().splitlines()) == 1 and "needed" in res.stderr
    assert not [p for p in small_disk.iterdir()]  # the temporary directory is gone


def _mib(text: str, what: str) -> float:
    return float(re.search(rf"([0-9.]+) MiB {what}", text).group(1))


def test_disk_full_at_the_decoded_copy_counts_it_and_says_the_build_was_removed(tmp_path, run_prism):
    mount = tmp_path / "mid"
    _tmpfs(mount, "95m")  # the shards fit (about 85 MiB), not their decoded copy beside them (about 19 MiB more)
    try:
        res = run_prism("data", "build", "--family", "text_image", "--out", str(mount / "data"))
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        line = res.stderr.strip()
        assert line.startswith(f"prism data build: error: no space left on device writing {mount / 'data'}: ")
        assert _mib(line, "needed") > _mib(line, "free")  # the estimate includes the copy that did not fit
        assert line.endswith(f"the partial build was removed (no {mount / 'data'} was made)")
        assert not list(mount.iterdir())
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_in_write_atomic_keeps_the_old_file(small_disk):
    from prism.core.atomic import DiskFullError, write_text_atomic

    path = small_disk / "big.json"
    write_text_atomic(path, "old\n")
    with pytest.raises(DiskFullError, match=r"big.json: .* free, about 3.0 MiB needed"):
        write_text_atomic(path, "x" * (3 << 20))
    assert path.read_text() == "old\n" and sorted(p.name for p in small_disk.iterdir()) == ["big.json"]

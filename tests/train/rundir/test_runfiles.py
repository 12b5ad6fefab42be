"""Run-directory files: torn lines, truncation on resume, JSON without NaN."""

from __future__ import annotations

import json
import math

import numpy as np

from prism.core.atomic import json_safe, write_json_atomic
from prism.core.revision import git_rev
from prism.train.rundir import runfiles


def test_truncate_after_drops_later_rows_and_a_torn_line(tmp_path):
    path = tmp_path / "perf.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(1, 8)) + '{"step": 8, "lo')
    runfiles.truncate_after(path, 5)
    assert [r["step"] for r in runfiles.read_jsonl(path)] == [1, 2, 3, 4, 5]


def test_writer_makes_parseable_json_of_non_finite_values(tmp_path):
    writer = runfiles.JsonlWriter(tmp_path / "x.jsonl")
    writer.write({"step": 1, "loss": math.nan, "grad": math.inf})
    writer.close()
    assert json.loads((tmp_path / "x.jsonl").read_text()) == {"step": 1, "loss": "nan", "grad": "inf"}


def test_atomic_json_leaves_no_temporary_files_and_writes_non_finite_values_as_text(tmp_path):
    write_json_atomic(tmp_path / "metrics.json", {"status": "ok", "loss": math.nan})
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"status": "ok", "loss": "nan"}


def test_git_rev_is_resolved_once():
    assert git_rev() is git_rev()


def test_json_safe_turns_numpy_scalars_into_python_values():
    assert json_safe({"a": np.float64("nan"), "b": [np.int64(3)], "c": (1.5,)}) == {"a": "nan", "b": [3], "c": [1.5]}


def test_json_safe_writes_an_undetermined_estimate_as_null():
    """Fit results: a non-finite number means "not determined", so it is null, not a string."""
    assert json_safe({"ci": (0.4, float("inf")), "a": np.float64("nan")}, nonfinite="null") == {
        "ci": [0.4, None],
        "a": None,
    }

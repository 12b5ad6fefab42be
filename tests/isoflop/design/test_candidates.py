"""The plan's candidates: counted where no calibration exists, speeds interpolated where none was measured."""

from __future__ import annotations

import pytest

from prism.isoflop.design.candidates import INTERPOLATED, Candidate, interpolate_speeds, load_candidates

from ..conftest import write_calibration


def _cand(name, n, sps=None):
    return Candidate(name, "BASE", n, n, 6 * n * 64, 64, sps, "cpu on here" if sps else "")


def test_speeds_between_measured_sizes_are_log_log_interpolated_and_labelled():
    # 1e4 at 1000 samples/s, 1e6 at 10: halfway in log N is halfway in log speed, 100 samples/s.
    out = {c.backbone: c for c in interpolate_speeds([_cand("a", 1e4, 1000.0), _cand("b", 1e5), _cand("c", 1e6, 10.0)])}
    assert out["b"].samples_per_s == pytest.approx(100.0) and out["b"].speed_source == INTERPOLATED
    assert out["a"].samples_per_s == 1000.0 and not out["a"].speed_interpolated


def test_beyond_the_measured_sizes_a_size_runs_at_the_nearest_ones_flops_per_second():
    out = {c.backbone: c for c in interpolate_speeds([_cand("s", 1e3), _cand("m", 1e4, 1000.0), _cand("l", 1e5)])}
    flops_per_s = 1000.0 * 6 * 1e4 * 64
    for name in ("s", "l"):
        assert out[name].samples_per_s * out[name].flops_per_sample == pytest.approx(flops_per_s)
        assert out[name].speed_interpolated


def test_without_any_measured_speed_nothing_is_made_up():
    cands = [_cand("a", 1e4), _cand("b", 1e5)]
    assert interpolate_speeds(cands) == cands


def test_a_stale_calibration_is_still_refused_not_recounted(tmp_path):
    """A file made for another shape of the size (renamed since) names the command that remakes it."""
    from prism.core.errors import PrismError

    path = write_calibration(tmp_path, "text_image", "30k", "BASE", "e2e", 2e4)
    path.write_text(path.read_text().replace('"calibration_version"', '"d_model": 7, "calibration_version"'))
    with pytest.raises(PrismError, match="was made for another 30k"):
        load_candidates(tmp_path, "text_image", "e2e", ["30k"], ["BASE"])


def test_without_a_calibration_dir_the_sizes_must_be_named(tmp_path):
    from prism.core.errors import PrismError

    with pytest.raises(PrismError, match="give --backbones and --variants"):
        load_candidates(None, "text_image", "e2e", None, None)
    assert [c.backbone for c in load_candidates(None, "text_image", "e2e", ["30k"], ["BASE"])] == ["30k"]

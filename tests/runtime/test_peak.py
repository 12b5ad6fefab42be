import json
import time

import pytest

from prism.core.errors import PrismError
from prism.runtime import peak


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRISM_CACHE_DIR", str(tmp_path))
    return tmp_path / "peak.json"


def test_measure_small_matmul_is_positive():
    rec = peak.measure_peak("cpu", "fp32", sizes=(64, 128), min_seconds=0.005)
    assert set(rec["per_size"]) == {"64", "128"}
    assert rec["flops"] == max(rec["per_size"].values()) > 0


def test_each_timing_covers_enough_calls_to_fill_min_seconds():
    calls = []
    seconds = peak.timings(lambda: (calls.append(1), time.sleep(0.001)), min_seconds=0.004, repeats=3)
    assert len(seconds) == 3
    assert all(s >= 0.001 for s in seconds)  # per call, not per timing
    # Probes of 1, 2, ..., c calls (2c - 1 in all) until one fills 4 ms, then three timings of c.
    c, rest = divmod(len(calls) + 1, 5)
    assert rest == 0 and c >= 1 and c & (c - 1) == 0


def test_peak_is_cached_and_refresh_remeasures(cache, monkeypatch):
    calls = []

    def fake(device, dtype, sizes=None):
        calls.append((device, dtype))
        return {"flops": 1e9 * len(calls), "per_size": {"8": 1e9 * len(calls)}}

    monkeypatch.setattr(peak, "measure_peak", fake)
    assert peak.peak_flops("cpu", "fp32") == 1e9
    assert peak.peak_flops("cpu", "fp32") == 1e9  # from the cache
    assert len(calls) == 1
    data = json.loads(cache.read_text())
    assert list(data) == [peak.cache_key("cpu", "fp32")]
    assert peak.peak_record("cpu", "fp32", refresh=True)["flops"] == 2e9  # a higher re-measurement replaces
    assert peak.peak_flops("cpu", "bf16") == 3e9  # another dtype is another key
    assert len(json.loads(cache.read_text())) == 2
    assert not list(cache.parent.glob(".peak.*"))  # no temp file left behind


def test_key_depends_on_threads(monkeypatch):
    import torch

    n = torch.get_num_threads()
    k1 = peak.cache_key("cpu", "fp32")
    try:
        torch.set_num_threads(1 if n != 1 else 2)
        assert peak.cache_key("cpu", "fp32") != k1
    finally:
        torch.set_num_threads(n)
    assert "float32" in k1 and "torch=" in k1


def test_corrupt_cache_is_remeasured(cache, monkeypatch):
    cache.write_text("{not json")
    monkeypatch.setattr(peak, "measure_peak", lambda d, t, sizes=None: {"flops": 5.0, "per_size": {"8": 5.0}})
    assert peak.peak_flops("cpu", "fp32") == 5.0
    assert json.loads(cache.read_text())


def test_bad_dtype_and_device():
    with pytest.raises(PrismError, match="dtype"):
        peak.peak_flops("cpu", "int3")
    with pytest.raises(PrismError, match="device"):
        peak.peak_flops("nodevice", "fp32")


def test_refresh_never_lowers_the_peak(cache, monkeypatch):
    rates = iter([5e9, 1e9])
    monkeypatch.setattr(
        peak, "measure_peak", lambda d, t, sizes=None: {"flops": (f := next(rates)), "per_size": {"8": f}}
    )
    assert peak.peak_flops("cpu", "fp32") == 5e9
    rec = peak.peak_record("cpu", "fp32", refresh=True)  # measured 1e9 on a busy machine
    assert rec["flops"] == 5e9 and rec["kept_higher"] == 1e9
    assert "kept the cached peak" in peak.format_peak(rec)
    assert peak.peak_flops("cpu", "fp32") == 5e9

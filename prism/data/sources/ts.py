"""text_ts: sktime's bundled labelled series and statsmodels' bundled series as (3, 64) windows.

Series are resampled (linear) to 64 steps; a series with fewer than 3 channels
is zero-padded, one with more keeps its first 3. Long unlabelled series are cut
into non-overlapping 64-step windows; all windows of one series are one source
item, so a series never straddles the split. Every channel is z-normalised per
window; the captions' statistics are computed on the stored channel 0, so they
are readable from the array: trend, peaks, dominant period, range in sd.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import numpy as np

from prism.data.sources import Sample, bucket, package_versions

SOURCE = "sktime bundled classification series + statsmodels bundled series, windows of 3x64"
LENGTH = 64
CHANNELS = 3

# sktime loader -> (short name, {class label: caption word})
LABELLED = {
    "load_basic_motions": ("motion", None),  # labels are already words
    "load_gunpoint": ("gunpoint", {"1": "gun draw", "2": "pointing"}),
    "load_italy_power_demand": ("italy power", {"1": "winter day", "2": "summer day"}),
    "load_arrow_head": ("arrowhead", {"0": "avonlea", "1": "clovis", "2": "mixed"}),
    "load_osuleaf": ("osu leaf", "species {}"),
    "load_acsf1": ("appliance power", "class {}"),
}
# statsmodels data set -> (short name, columns)
UNLABELLED = {
    "co2": ("co2 weekly", ["co2"]),
    "sunspots": ("sunspots yearly", ["SUNACTIVITY"]),
    "nile": ("nile flow", ["volume"]),
    "elnino": ("el nino sst", ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]),
    "macrodata": ("us macro", ["realgdp", "realcons", "realinv"]),
}


def versions() -> dict[str, str]:
    return package_versions("sktime", "statsmodels", "numpy", "scipy")


def resample(x: np.ndarray, length: int = LENGTH) -> np.ndarray:
    """[C, T] -> [C, length] by linear interpolation."""
    t_old = np.linspace(0.0, 1.0, x.shape[1])
    t_new = np.linspace(0.0, 1.0, length)
    return np.stack([np.interp(t_new, t_old, row) for row in x])


def to_window(x: np.ndarray) -> np.ndarray:
    """Any [C, T] -> float32 [3, 64]: resampled, channels cut or zero-padded, z-normalised."""
    x = resample(np.asarray(x, np.float64)[:CHANNELS])
    mean = x.mean(axis=1, keepdims=True)
    std = x.std(axis=1, keepdims=True)
    x = np.where(std > 1e-9, (x - mean) / np.where(std > 1e-9, std, 1.0), 0.0)
    out = np.zeros((CHANNELS, LENGTH), np.float32)
    out[: x.shape[0]] = x
    return out


def stats_caption(window: np.ndarray) -> str:
    """Trend, peaks, dominant period and range of channel 0 (z-units)."""
    from scipy.signal import find_peaks  # noqa: PLC0415 lazy: scipy

    x = window[0].astype(np.float64)
    slope = float(np.polyfit(np.linspace(0.0, 1.0, LENGTH), x, 1)[0])
    trend = bucket(slope, (-1.0, 1.0), ("falling", "flat", "rising"))
    peaks = len(find_peaks(x, prominence=1.0)[0])
    power = np.abs(np.fft.rfft(x - x.mean()))[1:]
    period = round(LENGTH / (int(np.argmax(power)) + 1))
    span = round(float(x.max() - x.min()) * 2) / 2
    return f"{trend}, {peaks} peaks, period {period}, range {span:.1f} sd"


def labelled_series() -> Iterator[tuple[str, np.ndarray, str]]:
    """(source id, [C, T] array, label caption) for every bundled classification series."""
    import sktime.datasets as skd  # noqa: PLC0415 lazy: sktime

    for loader, (name, names) in LABELLED.items():
        X, y = getattr(skd, loader)(return_X_y=True, return_type="numpy3D")
        tag = name.replace(" ", "")
        for i, (x, label) in enumerate(zip(X, y)):
            label = str(label)
            word = label if names is None else (names.format(label) if isinstance(names, str) else names[label])
            yield f"{tag}{i:04d}", x, f"{name}: {word}"


def unlabelled_windows() -> Iterator[tuple[str, int, np.ndarray, str]]:
    """(series id, window number, [C, 64] array, name): non-overlapping windows of the statsmodels series."""
    import statsmodels.api as sm  # noqa: PLC0415 lazy: statsmodels

    for dataset, (name, columns) in UNLABELLED.items():
        frame = getattr(sm.datasets, dataset).load_pandas().data
        values = frame[columns].astype(float).interpolate(limit_direction="both").to_numpy()
        series = values.reshape(-1, 1) if dataset == "elnino" else values  # months in order
        series = series.T  # [C, T]
        for j in range(series.shape[1] // LENGTH):
            yield dataset, j, series[:, j * LENGTH : (j + 1) * LENGTH], name


def samples(seed: int) -> Iterator[Sample]:
    del seed  # fixed data; the writer decides split and order
    labelled = ((source, 0, x, label) for source, x, label in labelled_series())
    for source, window_no, x, label in chain(labelled, unlabelled_windows()):
        window = to_window(x)
        yield Sample(source, 2 * window_no, window, label)
        yield Sample(source, 2 * window_no + 1, window, stats_caption(window))

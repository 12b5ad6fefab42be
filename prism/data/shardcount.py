"""What a shard should hold, against what was read from it: the samples a broken shard lost.

Downloads break in ordinary ways: a shard cut short (a full disk, a killed copy), left at
0 bytes, or with bytes after its end-of-archive marker (two tars joined). The tar alone says
that a shard is cut, not how many samples the cut took; img2dataset writes beside each shard
`NNNNN_stats.json`, whose `successes` is the number of samples it wrote into `NNNNN.tar`.
Where that count is known the loss is exact; where it is not, a broken shard counts one lost
sample at least, so that the index's `max_bad_fraction` sees every broken shard.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

STATS_SUFFIX = "_stats.json"


@dataclass(frozen=True)
class Expected:
    """The samples a shard should hold, and the file beside it that says so."""

    samples: int
    source: str


def expected_samples(tar: Path) -> Expected | None:
    """img2dataset's count of the samples written into `tar` (`successes` of its `_stats.json`), or None.

    A stats file that does not read as such a count is no count: the shard is then judged
    by its tar structure alone.
    """
    stats = tar.with_name(tar.stem + STATS_SUFFIX)
    try:
        value = json.loads(stats.read_text())["successes"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    return Expected(value, stats.name)


@dataclass(frozen=True)
class Loss:
    """What a shard lost: `missing`, the samples gone beyond those it names (its bad samples), and
    `said`, the loss in words (how the shard breaks, what was readable, how many are lost)."""

    missing: int
    said: str


def shard_loss(tar: Path, good: int, bad: int, broken: str | None, partial: bool) -> Loss | None:
    """The samples missing from shard `tar`, or None when nothing is.

    `good`, `bad`: the samples read from it (`bad` holds the sample a cut interrupted when
    `partial`); `broken`: how its tar breaks off (None: read to its end-of-archive marker).
    With img2dataset's count beside the shard, the missing ones are the count less those read;
    without, a broken shard whose cut named no sample counts one.
    """
    expected = expected_samples(tar)
    read = good + bad
    if expected is not None:
        missing = max(expected.samples - read, 0)
        lost = missing + int(partial)
        how = f"{good} of the {expected.samples} samples its {expected.source} lists are readable, {lost} lost"
    else:
        missing = 1 if broken and not partial else 0
        how = (
            f"{good} samples readable, at least 1 lost (how many it held is unknown: "
            f"no {tar.stem}{STATS_SUFFIX} beside it)"
        )
    if not broken and not missing:
        return None
    state = f"is cut short or damaged ({broken})" if broken else "holds fewer samples than it should"
    return Loss(missing, f"{state}: {how}")

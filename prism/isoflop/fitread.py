"""fit/REGIME.json, the fit's results: its one writer (`write_fit`) and its one reader (`read_fit`).

The file is `FitResult.to_json()` as `prism isoflop fit` wrote it; every reader of a study's fit (the
plots, the curves, the summary, the answer page, `prism isoflop predict`, the comparison of two
studies, the next round's centre) takes the FitResult from here and so reads the file alike: a
missing, broken or foreign file is one PrismError naming it. `fit_from_json` is the same check on a
mapping already read (a previous round's prior.json may hold a fit under its regime's key).
"""

from __future__ import annotations

import json
from pathlib import Path

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.isoflop.fit.result import FitResult


class FitMissing(PrismError):
    """No fit at the path (the callers that can do without one catch this)."""


def write_fit(path: str | Path, result: FitResult) -> None:
    write_text_atomic(path, json.dumps(result.to_json(), indent=2) + "\n")


def read_fit(path: str | Path, missing: str = "`snakemake fit_FAMILY` writes it") -> FitResult:
    """The FitResult at `path`; `missing` says what makes one when there is none."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FitMissing(f"{path}: no fit; {missing}") from None
    except (OSError, ValueError) as err:
        raise PrismError(f"{path}: cannot read ({err}); make it with `prism isoflop fit`") from None
    return fit_from_json(data, path)


def is_fit_json(data: object) -> bool:
    """Whether `data` (a JSON value) is shaped as a fit's results: what tells a fit from another record."""
    return isinstance(data, dict) and "diagnostics" in data


def fit_from_json(data: object, path: str | Path) -> FitResult:
    """The FitResult a fit JSON read from `path` holds; anything else is a PrismError naming `path`."""
    if not is_fit_json(data):
        raise PrismError(f"{path}: not a fit JSON (no diagnostics); make it with `prism isoflop fit`")
    try:
        return FitResult.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise PrismError(f"{path}: unreadable fit ({type(err).__name__}: {err}); refit it") from None

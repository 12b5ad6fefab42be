"""Where a study's grids are centred: the predicted optimum N_opt(C) = k C^a and where it came from.

In order: an explicit prior (flags, the config's `plan.prior_*`), the centre of the plan already
written (so a study's trained runs never move), a previous round's `prior.json` or identifiable
fit, else the default prior. A previous round also lends the forecast its fitted loss surface
and measured noise.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from prism.core.errors import PrismError
from prism.isoflop.fitread import fit_from_json, is_fit_json
from prism.isoflop.planread import PlanUnreadable, plan_mapping
from prism.isoflop.records import SURFACE_KEYS
from prism.model.config import REGIMES

# Prior centre: N_opt = k C^a. a = 0.5 (Chinchilla); k = 0.1 puts N_opt at
# ~1e5 trainable parameters for 1e12 FLOPs (this project's CPU ladder) and ~7e10
# at Chinchilla's 5.8e23 (Hoffmann et al.: 70B).
DEFAULT_PRIOR_A = 0.5
DEFAULT_PRIOR_K = 0.1
# A previous round's fit (copied by the user) in the study dir centres the grid.
PRIOR_FILE = "prior.json"


@dataclass(frozen=True)
class Centre:
    """Where a budget's grid is centred: N_opt(C) = k C^a, and where that came from."""

    a: float
    k: float
    source: str
    # The loss surface (E, A, B, alpha, beta) the forecast simulates, where the centre's source has one.
    surface: dict[str, float] | None = None
    # The loss noise a previous round's fit measured (None: the forecast's relative default).
    noise: float | None = None

    def n_opt(self, budget: float) -> float:
        return self.k * budget**self.a


def find_centre(
    out: Path | None,
    study_dir: Path | None,
    family: str,
    regime: str,
    prior_a: float | None,
    prior_k: float | None,
    previous_round: Path | None = None,
) -> Centre:
    """Explicit prior > existing plan's centre > previous round's identifiable fit > default prior.

    An explicit prior with a previous round keeps the explicit centre (the grid does not move)
    and takes the previous round's surface and noise for the forecast: how a later round, or a
    rerun with another seed, is forecast on what an earlier one measured.
    """
    if prior_a is not None or prior_k is not None:
        centre = Centre(prior_a or DEFAULT_PRIOR_A, prior_k or DEFAULT_PRIOR_K, "prior (command line)")
        previous = _previous_round_centre(previous_round, family, regime) if previous_round else None
        if previous is not None and previous.surface is not None:
            return replace(
                centre,
                source=f"prior (command line); forecast on {previous.source}",
                surface=previous.surface,
                noise=previous.noise,
            )
        return centre
    if out is not None and out.is_file():
        try:
            c = (plan_mapping(out) or {})["centre"]
            return Centre(
                float(c["a"]), float(c["k"]), f"existing plan {out} ({c['source']})", _surface(c.get("surface"), out)
            )
        except (PlanUnreadable, KeyError, TypeError, ValueError):
            pass  # not a plan of ours: plan afresh
    if study_dir is not None:
        for path in (study_dir / PRIOR_FILE, study_dir / family / PRIOR_FILE):
            centre = _centre_from_file(path, regime)
            if centre is not None:
                return centre
    if previous_round is not None:
        centre = _previous_round_centre(previous_round, family, regime)
        if centre is not None:
            return centre
    return Centre(DEFAULT_PRIOR_A, DEFAULT_PRIOR_K, "default prior")


def _previous_round_centre(previous_round: Path, family: str, regime: str) -> Centre | None:
    """The centre (and surface, noise) of an earlier round's prior.json or identifiable fit."""
    previous_round = Path(previous_round)
    if not previous_round.is_dir():
        raise PrismError(f"plan.previous_round {previous_round}: no such folder")
    for path in (
        previous_round / PRIOR_FILE,
        previous_round / family / PRIOR_FILE,
        previous_round / "fit" / f"{regime}.json",
        previous_round / family / "fit" / f"{regime}.json",
    ):
        centre = _centre_from_file(path, regime)
        if centre is not None:
            return centre
    return None


def _centre_from_file(path: Path, regime: str) -> Centre | None:
    """A previous round's centre: `{"a": .., "k": ..}`, a fit JSON, or `{regime: fit JSON}`.

    The current round's own fit (`fit/{regime}.json`) is deliberately not read:
    re-centring on it would change the runs of budgets already trained.
    """
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PrismError(f"{path}: not JSON ({err}); it should hold a previous round's fit or {{a, k}}") from None
    if isinstance(data, dict) and regime in data and isinstance(data[regime], dict):
        data = data[regime]
    elif isinstance(data, dict) and data and set(data) <= set(REGIMES):
        return None  # a prior of other regimes only
    if isinstance(data, dict) and "a" in data and "k" in data:
        return Centre(float(data["a"]), float(data["k"]), f"{path}", _surface(data, path), _noise(data, path))
    if not is_fit_json(data):
        raise PrismError(f"{path}: neither {{a, k}} nor a fit JSON from `prism isoflop fit`")
    from prism.isoflop.design.forecast import prior_from_fit  # noqa: PLC0415 lazy: numpy

    prior = prior_from_fit(fit_from_json(data, path), f"previous fit {path}")
    if prior is None:
        return None
    surface = _surface(asdict(prior.surface), path) if prior.surface is not None else None
    return Centre(prior.a, prior.k, prior.source, surface, prior.noise)


def _noise(data: dict, path: Path) -> float | None:
    """The loss noise (std) the round measured, where the prior file records it."""
    noise = data.get("noise")
    if noise is None:
        return None
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not noise > 0:
        raise PrismError(f"{path}: noise must be a positive number (the loss noise the round measured), got {noise!r}")
    return float(noise)


def _surface(data: dict | None, path: Path) -> dict[str, float] | None:
    """The five surface parameters when `data` has them all (a fit's Approach 3, or a prior file)."""
    if not data or not all(data.get(key) is not None for key in SURFACE_KEYS):
        return None
    try:
        surface = {key: float(data[key]) for key in SURFACE_KEYS}
    except (TypeError, ValueError):
        raise PrismError(f"{path}: {', '.join(SURFACE_KEYS)} must be numbers") from None
    if surface["A"] <= 0 or surface["B"] <= 0 or surface["alpha"] <= 0 or surface["beta"] <= 0:
        raise PrismError(f"{path}: A, B, alpha and beta of a loss surface must be positive, got {surface}")
    return surface

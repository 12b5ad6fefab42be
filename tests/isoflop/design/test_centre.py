"""The grid's centre: explicit prior > the plan already written > a previous round > the default prior."""

from __future__ import annotations

import json

import pytest
import yaml

from prism.core.errors import PrismError
from prism.isoflop.design.centre import DEFAULT_PRIOR_A, DEFAULT_PRIOR_K, find_centre


def centre(out=None, study=None, prior_a=None, prior_k=None, previous_round=None):
    return find_centre(out, study, "text_image", "e2e", prior_a, prior_k, previous_round)


def test_the_default_prior_when_nothing_else_is_there(tmp_path):
    c = centre(out=tmp_path / "plan.yaml", study=tmp_path)
    assert (c.a, c.k, c.source) == (DEFAULT_PRIOR_A, DEFAULT_PRIOR_K, "default prior")


def test_a_previous_rounds_fit_centres_the_grid_and_this_rounds_own_fit_does_not(tmp_path):
    study = tmp_path / "study"
    (study / "fit").mkdir(parents=True)
    fit = {"diagnostics": {"identifiable": True}, "approach3": {"converged": True, "a": 0.5, "k": 0.3}}
    # this round's own fit does not move the grid (that would retrain planned budgets)
    (study / "fit" / "e2e.json").write_text(json.dumps(fit))
    assert centre(study=study).source == "default prior"
    # a previous round's fit, copied to prior.json, does
    (study / "prior.json").write_text(json.dumps(fit))
    c = centre(study=study)
    assert c.k == 0.3 and "previous fit" in c.source
    (study / "prior.json").write_text(json.dumps({"a": 0.45, "k": 0.25}))
    assert centre(study=study).a == 0.45
    # not identifiable: ignored
    fit["diagnostics"]["identifiable"] = False
    (study / "prior.json").write_text(json.dumps(fit))
    assert centre(study=study).source == "default prior"
    (study / "prior.json").write_text("{oops")
    with pytest.raises(PrismError, match="prior.json: not JSON"):
        centre(study=study)


def test_a_broken_fit_in_a_prior_file_is_named_not_a_traceback(tmp_path):
    # read as every fit is read (prism.isoflop.fitread): the file named, and what to do
    (tmp_path / "prior.json").write_text(json.dumps({"diagnostics": {"identifiable": "maybe"}, "approach2": 7}))
    with pytest.raises(PrismError, match=r"prior.json: unreadable fit .*refit it"):
        centre(study=tmp_path)


def test_the_plan_already_written_keeps_its_centre_unless_a_prior_is_given(tmp_path):
    out = tmp_path / "plan.yaml"
    out.write_text(yaml.safe_dump({"centre": {"a": 0.5, "k": 0.2, "source": "prior"}}))
    assert centre(out=out).k == 0.2
    assert centre(out=out, prior_k=0.1).k == 0.1
    out.write_text("not: [a plan")  # not a plan of ours: planned afresh
    assert centre(out=out).source == "default prior"


def test_an_explicit_prior_keeps_its_centre_and_forecasts_on_a_previous_rounds_surface(tmp_path):
    previous = tmp_path / "round1"
    previous.mkdir()
    surface = {"E": 1.8, "A": 400.0, "B": 400.0, "alpha": 0.34, "beta": 0.28}
    (previous / "prior.json").write_text(json.dumps({"a": 0.45, "k": 0.25, **surface}))
    c = centre(prior_a=0.5, prior_k=0.1, previous_round=previous)
    assert (c.a, c.k, c.surface) == (0.5, 0.1, surface)
    assert "forecast on" in c.source and c.noise is None
    # A round's measured noise recorded beside its surface is the noise the forecast assumes.
    (previous / "prior.json").write_text(json.dumps({"a": 0.45, "k": 0.25, **surface, "noise": 0.015}))
    assert centre(prior_a=0.5, prior_k=0.1, previous_round=previous).noise == 0.015
    (previous / "prior.json").write_text(json.dumps({"a": 0.45, "k": 0.25, **surface, "noise": -1}))
    with pytest.raises(PrismError, match="noise must be a positive number"):
        centre(prior_a=0.5, prior_k=0.1, previous_round=previous)
    # A prior of the e2e regime alone lends nothing to a study of another regime.
    (previous / "prior.json").write_text(json.dumps({"e2e": {"a": 0.45, "k": 0.25, **surface}}))
    assert centre(prior_a=0.5, prior_k=0.1, previous_round=previous).surface == surface
    assert find_centre(None, None, "text_image", "projector_only", 0.5, 0.1, previous).surface is None
    with pytest.raises(PrismError, match="no such folder"):
        centre(previous_round=tmp_path / "missing")

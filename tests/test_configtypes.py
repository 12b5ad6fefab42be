"""Nested --config values arrive as text; the workflow types them by its schema before validating."""

from __future__ import annotations

from pathlib import Path

from prism.configtypes import typed

SCHEMA = Path(__file__).resolve().parents[1] / "config" / "schema.yaml"


def test_text_becomes_the_type_the_schema_declares():
    # What Snakemake makes of --config 'train={"seed": 1}' 'data={"seed": 1, "lm_ratio": 0.5}' 'plan={...}'
    cli = {"train": {"seed": "1", "schedule": "wsd", "threads": "2"}, "data": {"seed": "1", "lm_ratio": "0.5"},
           "plan": {"global_batch": "null", "window": "0.42", "previous_round": "null", "prior_a": "0.53"},
           "calibrate": {"measure_throughput": "false"}, "budgets": ["2.5e11", "4e11"], "study_dir": "s1"}
    out = typed(cli, SCHEMA)
    assert out["train"] == {"seed": 1, "schedule": "wsd", "threads": 2}
    assert out["data"] == {"seed": 1, "lm_ratio": 0.5}
    assert out["plan"] == {"global_batch": None, "window": 0.42, "previous_round": None, "prior_a": 0.53}
    assert out["calibrate"] == {"measure_throughput": False}
    assert out["budgets"] == ["2.5e11", "4e11"] and out["study_dir"] == "s1"  # text is valid there


def test_what_does_not_read_as_the_type_is_left_for_the_schema_to_reject():
    out = typed({"train": {"seed": "one"}, "plan": {"window": "wide"}, "nonsense": {"x": "1"}}, SCHEMA)
    assert out == {"train": {"seed": "one"}, "plan": {"window": "wide"}, "nonsense": {"x": "1"}}

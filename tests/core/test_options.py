"""prism.core.options: one dataclass gives a verb's flags, its defaults and its config keys."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from prism.core.errors import PrismError
from prism.core.options import add_arguments, as_args, flag, from_mapping, option


@dataclass(frozen=True)
class Rule:
    rule: str = option("hand", "which rule", choices=("hand", "given"))
    lr_c: float = option(3e-3, "lr at the reference width", exclusive_minimum=0)
    margin: float = option(0.3, "decades beyond", minimum=0)
    strict: bool = option(False, "refuse, not warn")


def test_a_prefix_names_a_sections_fields_without_doubling_it():
    assert flag("min_steps") == "--min-steps"
    assert flag("rule", "lr_") == "--lr-rule" and flag("lr_c", "lr_") == "--lr-c"


def test_flags_written_with_a_prefix_and_names_parse_back_to_the_options():
    options = from_mapping(Rule, {"rule": "given", "lr_c": 1.5e-05, "strict": True}, "config tune")
    names = ("margin", "rule", "lr_c", "strict")
    flags = as_args(options, names, "lr_")
    assert flags == ["--lr-margin", "0.3", "--lr-rule", "given", "--lr-c", "1.5e-05", "--lr-strict"]  # names' order
    parser = argparse.ArgumentParser()
    add_arguments(parser, Rule, names, prefix="lr_")
    assert Rule(**vars(parser.parse_args(flags))) == options
    assert Rule(**vars(parser.parse_args([]))) == Rule()  # the defaults are the fields'


def test_a_value_out_of_range_names_its_key():
    with pytest.raises(PrismError, match="--lr-c must be > 0"):
        from_mapping(Rule, {"lr_c": 0.0}, "config tune")
    with pytest.raises(PrismError, match="unknown key"):
        from_mapping(Rule, {"lr": 1.0}, "config tune")

"""`prism isoflop calibrate`: the run settings its timed steps share with `prism train` are train's flags."""

from __future__ import annotations

import argparse

from prism.cli import build_parser
from prism.isoflop.design.calibrate import TIMED_RUN_SETTINGS


def subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions}


def test_calibrates_run_settings_are_trains_flags_with_their_choices_and_help():
    parser = build_parser()
    calibrate = options(subparser(parser, "isoflop", "calibrate"))
    train = options(subparser(parser, "train"))
    for name in TIMED_RUN_SETTINGS:
        mine, theirs = calibrate[name], train[name]
        assert mine.option_strings == theirs.option_strings
        assert (mine.choices, mine.type, mine.metavar) == (theirs.choices, theirs.type, theirs.metavar)
        assert mine.help.startswith(theirs.help.split(" (default")[0])


def test_calibrate_takes_trains_defaults():
    args = build_parser().parse_args(
        [
            "isoflop",
            "calibrate",
            "--family",
            "text_image",
            "--backbone",
            "30k",
            "--projector-variant",
            "BASE",
            "--out",
            "c.json",
        ]  # fmt: skip
    )
    assert (args.device, args.threads, args.precision, args.compile) == ("auto", None, "auto", "auto")

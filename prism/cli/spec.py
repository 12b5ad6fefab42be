"""The family-spec flags of the commands that make or count a family's samples (`prism data index|build`,
`prism isoflop calibrate|plan`): the shape flags and `--tokenizer`, or the spec of the data they are given."""

from __future__ import annotations

from dataclasses import fields

from prism.core.families import FamilySpec, ShapeOptions, resolve_spec
from prism.core.options import add_arguments
from prism.core.tokenizer import BYTES
from prism.data.manifest import data_spec


def add_spec_arguments(parser) -> None:
    """The shape flags (`ShapeOptions`) and `--tokenizer` of a command that makes or counts a family's samples."""
    group = parser.add_argument_group("family shape (config shapes.FAMILY; unset: the laptop default)")
    add_arguments(group, ShapeOptions)
    group.add_argument(
        "--tokenizer",
        default=None,
        metavar="FILE",
        help="the captions' tokenizer: 'bytes', or a Hugging Face tokenizers JSON file (default: bytes)",
    )


def spec_from_args(family: str, args, data=None) -> FamilySpec:
    """A command's spec from its shape flags and `--tokenizer`; with none of them, the spec of `data`
    (a data directory) where one is given. The command hands it to the library call it makes."""
    shape = {f.name: getattr(args, f.name, None) for f in fields(ShapeOptions)}
    tokenizer = getattr(args, "tokenizer", None)
    if data is not None and tokenizer is None and all(v is None for v in shape.values()):
        return data_spec(data, family)
    return resolve_spec(family, shape, tokenizer or BYTES)

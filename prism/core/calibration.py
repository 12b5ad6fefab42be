"""Calibration records: the file a calibration writes, read back and checked.

`prism isoflop calibrate` writes one JSON per (family, backbone, variant, regime);
the planner and the trainer read it here, so neither needs the calibration code
(which counts FLOPs with torch). Pure Python.
"""

from __future__ import annotations

import json
from pathlib import Path

from prism.core.errors import PrismError

CALIBRATION_VERSION = 1


def calibration_filename(family: str, backbone: str, variant: str, regime: str) -> str:
    return f"{family}__{backbone}__{variant}__{regime}.json"


def speed_filename(family: str, backbone: str, variant: str, regime: str) -> str:
    """The measured training speed, cached beside the calibration (a timing: it changes run to run,
    so it is kept out of the calibration that training runs depend on)."""
    return f"{family}__{backbone}__{variant}__{regime}.speed.json"


def calibrate_command(family: str, backbone: str, variant: str, regime: str, calibration_dir: str | Path) -> str:
    """The command that writes a calibration file (quoted in error messages)."""
    return (
        f"prism isoflop calibrate --backbone {backbone} --projector-variant {variant} "
        f"--family {family} --regime {regime} --calibration-dir {calibration_dir}"
    )


REQUIRED_KEYS = ("params_total", "params_trainable", "params_by_component", "flops_per_sample", "tokens_per_sample")


def load_calibration(
    calibration_dir: str | Path,
    family: str,
    backbone: str,
    variant: str,
    regime: str,
    shape: dict[str, int] | None = None,
) -> dict:
    """The calibration record for one (family, backbone, variant, regime), checked.

    Raises PrismError naming the file and the command that (re)makes it when the
    file is missing, unreadable, from another calibration version, for other names,
    or (given the backbone's `shape` now) for a backbone of another shape: the name
    was redefined since, and the record and any run trained on it are of the old model.
    """
    path = Path(calibration_dir) / calibration_filename(family, backbone, variant, regime)
    remake = calibrate_command(family, backbone, variant, regime, calibration_dir)
    if not path.is_file():
        raise PrismError(f"no calibration {path}; make it with: {remake}")
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise PrismError(f"cannot read calibration {path} ({err}); remake it with: {remake}") from None
    if not isinstance(record, dict):
        raise PrismError(f"calibration {path} is not a JSON object; remake it with: {remake}")
    if record.get("calibration_version") != CALIBRATION_VERSION:
        raise PrismError(
            f"calibration {path} has calibration_version {record.get('calibration_version')!r}, "
            f"this prism expects {CALIBRATION_VERSION}; remake it with: {remake}"
        )
    names = {"family": family, "backbone": backbone, "variant": variant, "regime": regime}
    wrong = {k: record.get(k) for k, v in names.items() if record.get(k) != v}
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if wrong or missing:
        what = f"keys {wrong} do not match its name" if wrong else f"it lacks {', '.join(missing)}"
        raise PrismError(f"calibration {path}: {what}; remake it with: {remake}")
    check_shape(record, path, backbone, shape, remake)
    return record


def check_shape(record: dict, path: Path, backbone: str, shape: dict | None, remake: str) -> None:
    """Refuse a record made for another shape of `backbone` (keys it does not record are not compared)
    or for another family shape or tokenizer (`family_spec`: a record without it is of the default)."""
    shape = dict(shape or {})
    if "family_spec" in shape and (spec := shape.pop("family_spec")) != record.get("family_spec"):
        raise PrismError(
            f"calibration {path} was made at {spec_words(record.get('family_spec'))}, the study's data at "
            f"{spec_words(spec)}; remake it with: {remake}{spec_flags_of(spec)} (in a study: run snakemake again)"
        )
    changed = [
        f"{key} {record[key]} (now {value})" for key, value in shape.items() if key in record and record[key] != value
    ]
    if changed:
        raise PrismError(
            f"calibration {path} was made for another {backbone}: {', '.join(changed)}; the backbone "
            f"was redefined since, so runs trained on this record are of the old model too. Remake "
            f"it with: {remake} (and retrain its runs)"
        )


def spec_words(record: dict | None) -> str:
    """A calibration's `family_spec` record in a few words (None: the family's laptop default)."""
    if not record:
        return "the family's default shape, bytes"
    shape = ", ".join(f"{k} {v}" for k, v in (record.get("shape") or {}).items())
    tokenizer = record.get("tokenizer")
    return f"{shape}, " + (f"tokenizer sha256 {str(tokenizer.get('sha256'))[:12]}" if tokenizer else "bytes")


def spec_flags_of(record: dict | None) -> str:
    """The calibrate flags of a `family_spec` record, each after a space (the tokenizer's file by name)."""
    if not record:
        return ""
    flags = "".join(f" --{k.replace('_', '-')} {v}" for k, v in (record.get("shape") or {}).items())
    return flags + (" --tokenizer TOKENIZER_FILE" if record.get("tokenizer") else "")


def load_calibration_file(
    path: str | Path, family: str, backbone: str, variant: str, regime: str, shape: dict[str, int] | None = None
) -> dict:
    """A calibration record given by file name (`prism train --calibration FILE`), checked.

    A file under its canonical name gets every check of `load_calibration`; one under
    another name (a hand-made record) must still name the run's model and give a
    positive `flops_per_sample`, the one figure a run's steps follow from.
    """
    path = Path(path)
    if path.name == calibration_filename(family, backbone, variant, regime):
        return load_calibration(path.parent, family, backbone, variant, regime, shape)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict):
        raise PrismError(f"calibration {path} is missing or not JSON; make it with `prism isoflop calibrate`")
    names = {"family": family, "backbone": backbone, "variant": variant, "regime": regime}
    for key, value in names.items():
        if record.get(key) != value:
            raise PrismError(f"calibration {path} is for {key} {record.get(key)!r}, the run is {value!r}")
    fps = record.get("flops_per_sample")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0:
        raise PrismError(f"calibration {path} has no positive flops_per_sample")
    check_shape(record, path, backbone, shape, "prism isoflop calibrate")
    return record

"""What the plan reads besides calibrations and speed files: the data's manifest (to refuse data
made at another shape or tokenizer) and a previous round's fitted lr rule."""

from __future__ import annotations

from pathlib import Path

from prism.core.families import FamilySpec, check_same_spec, family_spec, spec_from_manifest
from prism.core.studylayout import manifest_file
from prism.train.lr_rule import read_rule


def check_data_spec(family: str, data: str | Path | None, spec: FamilySpec | None = None) -> None:
    """Refuse data made at another shape or tokenizer than the plan's `spec` (a manifest without the
    fields: none to check)."""
    from prism.data.manifest import manifest_as_written  # noqa: PLC0415 lazy: the planner's imports stay numpy's

    if data is None or not manifest_file(data).is_file():
        return
    manifest = manifest_as_written(data)
    if isinstance(manifest, dict) and {"family", "modality_shape", "n_modality_tokens", "text_len"} <= manifest.keys():
        check_same_spec(family_spec(family, spec), spec_from_manifest(manifest, data), f"data {data}")


def lr_reference(previous_round: str | None, family: str) -> dict | None:
    """The previous round's fitted lr rule of `family` ({"file", "rule"}), or None where it has none."""
    if not previous_round:
        return None
    path = Path(previous_round) / family / "lr_rule.json"
    return {"file": str(path), "rule": read_rule(path).to_json()} if path.is_file() else None

"""What the plan reads besides calibrations and speed files: the data's manifest (to refuse data
made at another shape or tokenizer) and a previous round's fitted lr rule."""

from __future__ import annotations

import json
from pathlib import Path

from prism.core.families import FamilySpec, check_same_spec, family_spec, spec_from_manifest
from prism.train.lr_rule import read_rule


def check_data_spec(family: str, data: str | Path | None, spec: FamilySpec | None = None) -> None:
    """Refuse data made at another shape or tokenizer than the plan's `spec` (a manifest without the
    fields: none to check)."""
    path = Path(data, "manifest.json") if data is not None else None
    if path is None or not path.is_file():
        return
    manifest = json.loads(path.read_text())
    if isinstance(manifest, dict) and {"family", "modality_shape", "n_modality_tokens", "text_len"} <= manifest.keys():
        check_same_spec(family_spec(family, spec), spec_from_manifest(manifest, data), f"data {data}")


def lr_reference(previous_round: str | None, family: str) -> dict | None:
    """The previous round's fitted lr rule of `family` ({"file", "rule"}), or None where it has none."""
    if not previous_round:
        return None
    path = Path(previous_round) / family / "lr_rule.json"
    return {"file": str(path), "rule": read_rule(path).to_json()} if path.is_file() else None

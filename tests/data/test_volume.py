"""Epochs from a plan's tokens, and the default study's data volume."""

from __future__ import annotations

import json

import pytest

from prism.core.errors import PrismError
from prism.data.volume import MAX_EPOCHS, epochs, epochs_refusal, train_samples


def test_epochs_and_refusal(tmp_path):
    assert epochs(64 * 1000, 500, 64) == 2.0
    assert epochs_refusal("r", 3.9) is None and MAX_EPOCHS == 4.0
    assert "4.5 times" in epochs_refusal("15k-BASE-e2e-C1e13", 4.5)
    with pytest.raises(PrismError):
        epochs(1.0, 0, 64)
    (tmp_path / "manifest.json").write_text(json.dumps({"splits": {"train": {"samples": 77616}}}))
    assert train_samples(tmp_path) == 77616
    with pytest.raises(PrismError, match="build the data first"):
        train_samples(tmp_path / "missing")

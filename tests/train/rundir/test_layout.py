"""The kept checkpoints' paths: the workflow's inputs and `--init-from`/`--init-step` come from one spelling."""

from __future__ import annotations

import pytest

from prism.train.rundir.layout import filename, kept_checkpoint, kept_origin


def test_a_kept_checkpoint_is_named_by_run_and_step_and_read_back():
    path = kept_checkpoint("study/text_image/stable/t1/to-00000400", 400)
    assert path == "study/text_image/stable/t1/to-00000400/final/keep/step-00000400.pt"
    assert kept_origin(path) == ("study/text_image/stable/t1/to-00000400", 400)


def test_a_wildcard_step_is_kept_as_written():
    """A Snakemake output pattern names the step by its wildcard, already eight digits when matched."""
    assert kept_checkpoint("S/{family}/to-{end}", "{end}") == "S/{family}/to-{end}/final/keep/step-{end}.pt"
    assert filename(7) == "step-00000007.pt"


@pytest.mark.parametrize("path", ["run/final/step-00000001.pt", "run/final/keep/step-1.pt", "step-00000001.pt"])
def test_a_path_that_is_not_a_kept_checkpoint_is_refused(path):
    with pytest.raises(ValueError, match="not a kept checkpoint"):
        kept_origin(path)

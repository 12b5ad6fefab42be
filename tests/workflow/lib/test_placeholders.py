"""A cluster study still holding config/aurora.yaml's placeholder account says so on every call, a dry run's too."""

from __future__ import annotations

from prism.workflow.wiring import StudyWorkflow

from .conftest import FakeEngine


def test_a_placeholder_account_is_said_where_snakemake_runs(smoke_config):
    aurora = {"launcher": "aurora", "device": "cpu"}
    engine = FakeEngine()
    StudyWorkflow(smoke_config(train=aurora, cluster={"account": "FILL_IN_PROJECT"}), engine, lambda family: "")
    assert any("cluster.account: FILL_IN_PROJECT is a placeholder" in line for line in engine.said), engine.said
    for config in (smoke_config(train=aurora, cluster={"account": "myproject"}), smoke_config()):
        quiet = FakeEngine()
        StudyWorkflow(config, quiet, lambda family: "")
        assert not any("placeholder" in line for line in quiet.said), quiet.said

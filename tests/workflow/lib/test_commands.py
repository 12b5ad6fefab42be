"""prism.workflow.commands: each job's `prism` flags."""

from __future__ import annotations

import shlex

import pytest

from prism.workflow import commands
from prism.workflow.study import Study


def test_data_builds_offline_or_indexes_your_shards(smoke_config, tmp_path):
    study = Study(smoke_config())
    assert commands.data_command(study, "text_image")[:3] == ["build", "--family", "text_image"]
    assert commands.data_threads(study, "text_image") == 1
    study = Study(smoke_config(data={"shards": {"text_image": str(tmp_path)}}))
    args = commands.data_command(study, "text_image")
    assert args[:2] == ["index", str(tmp_path)] and "--eval-fraction" in args
    assert commands.data_threads(study, "text_image") == 8


def test_the_plan_command_passes_the_arguments_the_workflow_plans_with(smoke_config):
    study = Study(smoke_config())
    args = commands.plan_command(study, "text_image")
    planned = commands.plan_arguments(study, "text_image")
    assert args[args.index("--budgets") + 1] == "1e10,2e10"
    assert args[args.index("--data") + 1] == planned["data"] == study.data_dir("text_image")
    assert args[args.index("--backbones") + 1] == "30k,60k,120k"
    assert "--job-ranks" not in args  # a local study's jobs are one rank
    assert args[-2:] == ["--cooldown-fraction", str(study.train.cooldown_fraction)]


def test_the_training_command_takes_the_row_and_the_jobs_own_settings(smoke_config):
    study = Study(smoke_config())
    row = {
        "family": "text_image",
        "backbone": "30k",
        "variant": "BASE",
        "regime": "e2e",
        "budget": 1e10,
        "global_batch": 8,
    }
    words = shlex.split(commands.training_command(study, row, "d", "out", "c.json", warmup=5))
    assert words[words.index("--warmup") + 1] == "5" and words[words.index("--out") + 1] == "out"
    assert words[words.index("--budget") + 1] == "1e10"


def test_trackers_are_flags_only_when_on(smoke_config):
    assert commands.tracker_command(Study(smoke_config()), "text_image") == ""
    study = Study(smoke_config(train={"trackers": "tensorboard"}))
    words = shlex.split(commands.tracker_command(study, "text_image"))
    assert words[words.index("--tracker-group") + 1] == "study-text_image-e2e"


def test_the_summary_reads_fitted_families_only(smoke_config, tmp_path):
    study = Study(smoke_config())
    assert commands.summary_command(study) is None
    (tmp_path / "study" / "text_image" / "fit").mkdir(parents=True)
    assert commands.summary_command(study) == f"prism isoflop summary {tmp_path}/study/text_image"


def test_shape_flags_reach_the_calibrate_job_and_none_are_recorded_for_the_laptop_shape(smoke_config):
    from snakemake.persistence import UNREPRESENTABLE, PersistenceBase

    from prism.workflow.wiring import StudyWorkflow

    from .conftest import FakeEngine, wildcards

    serialise = PersistenceBase._serialize_param_builtin  # what Snakemake records of a param
    family = wildcards(family="text_image")
    flow = StudyWorkflow(smoke_config(), FakeEngine(), lambda family: "")
    empty = flow.spec_args(family)
    # Renders as nothing, and is left out of the job's record: a calibration made before the
    # rule had this param is not taken as changed (its runs would retrain).
    assert f"--no-measure-throughput{empty} --out" == "--no-measure-throughput --out"
    assert serialise(None, empty) is UNREPRESENTABLE
    shape = {"text_image": {"image_size": 64, "channels": 3, "patch": 8, "text_len": 12}}
    flow = StudyWorkflow(smoke_config(shapes=shape), FakeEngine(), lambda family: "")
    flags = flow.spec_args(family)
    assert shlex.split(flags) == ["--image-size", "64", "--channels", "3", "--patch", "8", "--text-len", "12"]
    assert serialise(None, flags) == repr(flags)  # recorded: changing the shape recalibrates
    assert flags.strip() in " ".join(flow.speed_args(family))
    # The in-process plan counts at the config's spec too: the rule's sizes, the plan's arguments.
    assert commands.plan_arguments(flow.study, "text_image")["spec"].n_modality_tokens == 64


def test_a_cluster_study_that_times_its_steps_prices_node_hours_from_them(smoke_config):
    """The aurora launcher's ranks a node go to the plan only when the speed jobs time a rank; the speed job
    times in the runs' precision (no flag for `auto`, so a default study's speed jobs are unchanged)."""
    cluster = {"train": {"launcher": "aurora"}, "cluster": {"ranks_per_node": 4}, "plan": {"global_batch": 8}}
    study = Study(smoke_config(**cluster))
    args = commands.plan_command(study, "text_image")
    assert (
        args[args.index("--ranks-per-node") + 1]
        == "4"
        == str(commands.plan_arguments(study, "text_image")["ranks_per_node"])
    )
    assert "--precision" not in commands.calibrate_flags(study, "text_image")
    untimed = Study(smoke_config(**cluster, calibrate={"measure_throughput": False}))
    assert "--ranks-per-node" not in commands.plan_command(untimed, "text_image")
    local = Study(smoke_config())
    assert "--ranks-per-node" not in commands.plan_command(local, "text_image")
    bf16 = Study(smoke_config(train={"precision": "bf16"}))
    assert commands.calibrate_flags(bf16, "text_image")[-2:] == ["--precision", "bf16"]


def test_the_tokenizer_file_is_an_input_of_the_data_and_calibrate_jobs_and_bytes_adds_none(smoke_config, bpe_file):
    """Edited in place, a tokenizer file re-indexes and recalibrates through Snakemake's own triggers;
    a default study (bytes) has no such input, so its jobs are those it always had."""
    from prism.workflow.wiring import StudyWorkflow

    from .conftest import FakeEngine, wildcards

    family = wildcards(family="text_image")
    flow = StudyWorkflow(smoke_config(), FakeEngine(), lambda family: "")
    assert flow.spec_inputs(family) == [] and flow.data_inputs(family) == []
    flow = StudyWorkflow(smoke_config(data={"tokenizer": str(bpe_file)}), FakeEngine(), lambda family: "")
    assert flow.spec_inputs(family) == [str(bpe_file.resolve())] == flow.data_inputs(family)


def test_tune_rules_reach_the_plan_only_when_a_study_sets_them(smoke_config):
    """The hand rule and today's batch leave the plan's command as it was; a batch law is passed where the plan
    chooses the batch, and a rule with a tokens exponent is taken per size under wsd (one lr a trajectory)."""
    import pytest

    from prism.core.errors import PrismError

    plain = commands.plan_command(Study(smoke_config()), "text_image")
    assert "--batch-law" not in plain and "--lr-rule" not in plain and "--lr-tokens" not in plain
    cosine = {"schedule": "cosine"}
    study = Study(smoke_config(train=cosine, plan={"global_batch": None}, tune={"batch_rule": "compute"}))
    args = commands.plan_command(study, "text_image")
    assert args[args.index("--batch-law") + 1 :][:2] == ["0.292", "0.3271"]
    assert commands.plan_arguments(study, "text_image")["batch_law"] == (0.292, 0.3271)
    with pytest.raises(PrismError, match="wsd trajectory serves all its budgets at one batch"):
        Study(smoke_config(train={"schedule": "wsd"}, tune={"batch_rule": "compute"}))
    given = {"rule": "given", "lr_q": 0.3}
    assert commands.plan_command(Study(smoke_config(train={"schedule": "wsd"}, tune=given)), "text_image")[-2:] == [
        "--lr-tokens",
        "size",
    ]
    assert "--lr-tokens" not in commands.plan_command(Study(smoke_config(train=cosine, tune=given)), "text_image")


def test_an_empty_shards_folder_stops_the_dry_run_naming_its_key(smoke_config, tmp_path):
    """Not 40 s into the real run, when its index fails: the folder is looked in while the DAG is built."""
    from prism.workflow.wiring import StudyWorkflow

    from .conftest import FakeEngine, wildcards

    empty = tmp_path / "shards"
    empty.mkdir()
    flow = StudyWorkflow(smoke_config(data={"shards": {"text_image": str(empty)}}), FakeEngine(), lambda f: "")
    with pytest.raises(SystemExit, match=rf"config data.shards.text_image: {empty} holds no .tar shards"):
        flow.data_inputs(wildcards(family="text_image"))
    (empty / "a.tar").write_bytes(b"")
    assert flow.data_inputs(wildcards(family="text_image")) == [str(empty)]


@pytest.mark.parametrize("rule", ["given", "fitted"])
def test_the_lr_rule_the_plan_job_passes_is_the_rule_the_plan_verb_reads(smoke_config, rule):
    """The rule's flags are generated from TuneOptions' fields and parsed by flags generated from the same
    fields: `prism isoflop plan` reads back the study's rule, whatever its values."""
    from prism.cli import build_parser
    from prism.isoflop.design.tuning import RULE_FLAGS

    tune = {"rule": rule, "lr_c": 1.5e-05, "lr_p": 0.75, "lr_q": 0.125, "margin": 0.45}
    study = Study(smoke_config(tune=tune))
    args = build_parser().parse_args(
        ["isoflop", "plan", "--family", "text_image", *commands.plan_command(study, "text_image")]
    )
    read = {name: getattr(args, name) for name in RULE_FLAGS}
    if rule == "given":  # the margin bounds a fitted rule's extrapolation only: a given rule's job leaves it out
        assert read == {**tune, "margin": 0.3}
    else:  # a fitted rule's values are in its file; the job passes the file and the margin
        assert read["rule"] == "fitted" and read["margin"] == 0.45
        assert args.lr_rule_file == study.lr_rule_file("text_image")


def test_the_tuning_fit_job_passes_the_bootstrap_the_tune_verb_reads(smoke_config):
    from prism.cli import build_parser
    from prism.workflow.tune import TuneStage

    tune = {"rule": "fitted", "bootstrap": 77, "seed": 5, "margin": 0.45}
    flags = TuneStage(Study(smoke_config(tune=tune)), None, None).fit_args(None)
    assert flags == ["--bootstrap", "77", "--seed", "5", "--margin", "0.45"]  # the job's command, as before
    args = build_parser().parse_args(["isoflop", "tune", "m.json", "--out", "r.json", *flags])
    assert (args.bootstrap, args.seed, args.margin) == (77, 5, 0.45)

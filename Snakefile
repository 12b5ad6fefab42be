# prism: IsoFLOP scaling studies as a DAG of file targets. Wiring only: the workflow's logic
# is the library's (prism.workflow, one object built in rules/common.smk), each stage in its
# own rules/*.smk, and every rule calls `prism <group> <verb>`.
#
#   snakemake --profile profiles/local fit_text_image   # the default study on this machine
#   snakemake --profile profiles/local -n fit_text_image --config 'budgets=[1.5e11,2.5e11,4e11,7e11,1.2e12,2e12,3.5e12]'
#   snakemake --profile profiles/aurora fit_text_image --configfile config/aurora.yaml   # PBS Pro

import sys
from functools import partial

from snakemake.utils import min_version, validate

from prism.core.configtypes import check, check_config_file, check_targets, typed
from prism.core.interrupt import stop_on_first_interrupt

min_version("9.0")

# A config file that does not parse stops here naming its line (Snakemake's error names no file).
check_config_file("config/config.yaml")
# One Ctrl-C stops the study, even while Snakemake runs one of its asyncio loops (prism/core/interrupt.py).
stop_on_first_interrupt()


configfile: "config/config.yaml"


# Nested --config values ('train={"seed": 1}') arrive as text: type them as the schema says.
config.update(typed(config, "config/schema.yaml"))


# A rejected value stops here in one line (the file or --config that set it, key, value, what is
# allowed); then Snakemake's own validation, which passes, fills in the schema's defaults.
check(config, "config/schema.yaml", ["config/config.yaml", *map(str, workflow.overwrite_configfiles or [])])
validate(config, "config/schema.yaml")
# `snakemake fit_F train.seed=1` (Hydra's style) would look for a file named so: say how to set it.
check_targets(sys.argv[1:])


report: "rules/report/workflow.rst"


include: "rules/common.smk"


# The terminal shows each step's progress and errors, not every job's block (the profiles' `quiet`).
ENGINE.terse_terminal()
# A pack (one group job of many runs) keeps going past a failed run when the call does (--keep-going).
ENGINE.keep_going_in_groups()
# The cluster profile's helpers (pbs_env.py, pbs_status.py, pbs_sidecar.py) run with this Python.
ENGINE.helpers_python()


include: "rules/data.smk"
include: "rules/calibrate.smk"
# A cluster study's probe: the real job body for a few minutes, before the plan prices the grid.
include: "rules/probe.smk"
include: "rules/plan.smk"
# Training: one job per planned run (cosine: rules/train.smk), or per model one stable
# trajectory cut at its branch points plus one cooldown branch per run (wsd: rules/wsd.smk);
# the schedule's object (prism.workflow.jobs) names its rules file.
include: SCHEDULE.rules_file
# The lr sweep before the grid and its fitted rule (tune.rule: fitted; nothing asks for it otherwise).
include: "rules/tune.smk"


include: "rules/collect.smk"
include: "rules/fit.smk"
include: "rules/plot.smk"
include: "rules/sweep.smk"


# On a cluster only training jobs and the timed steps (speed: they time a compute node's rank)
# are PBS jobs; everything else is cheap.
localrules:
    all,
    data,
    calibrate,
    plan,
    tune,
    collect,
    fit,
    plot,


rule all:
    input:
        lambda wildcards: [
            path for family in config["families"] for path in W.targets(family)
        ],
    default_target: True


# Named targets for every family: calibrate_F, plan_F, collect_F, fit_F, plot_F. Those
# after the plan also name every planned run's metrics.json: Snakemake does not rebuild
# a missing intermediate file when what follows it exists, so without this a deleted
# run directory would not be retrained; fit_F and plot_F name plan.yaml and runs.csv too, so
# that either one deleted is made again (and what reads it).
for _family in FAMILIES:

    rule:
        name:
            f"calibrate_{_family}"
        input:
            PLAN.input_files(_family),

    rule:
        name:
            f"plan_{_family}"
        input:
            S.plan_file(_family),

    rule:
        name:
            f"collect_{_family}"
        input:
            S.runs_csv(_family),
            partial(SCHEDULE.study_metrics, _family),

    # The study's results: the fit and its figures (so that `snakemake --report report.html
    # fit_F` shows the plots too).
    rule:
        name:
            f"fit_{_family}"
        input:
            S.fit_outputs(_family),
            S.plot_outputs(_family),
            S.study_records(_family),
            partial(SCHEDULE.study_metrics, _family),

    rule:
        name:
            f"plot_{_family}"
        input:
            S.plot_outputs(_family),
            S.study_records(_family),
            partial(SCHEDULE.study_metrics, _family),


    # Where the study stands while it runs (reads only its folder; it has no output, so it runs
    # every time). While another Snakemake runs the study: `snakemake --nolock status_F`.
    rule:
        name:
            f"status_{_family}"
        params:
            family_dir=partial(lambda wildcards, family: S.family_dir(family), family=_family),
        log:
            S.logfile("status", _family),
        localrule: True
        shell:
            "prism isoflop status {params.family_dir:q} > {log:q} 2>&1; cat {log:q}"


# Jobs that run here start their `prism` commands from one worker that imported torch once.
onstart:
    ENGINE.start_worker(config["worker"], S.logfile("worker"))


# The answer at the end: each fitted study's exponents, verdict, runs left out and figures.
# A summary that cannot be printed never fails the workflow (it only reads files).
onsuccess:
    if commands.summary_command(S):
        shell(commands.summary_command(S) + " || true")
    ENGINE.stop_worker()


onerror:
    ENGINE.stop_worker()

# What every training job shares, whichever rule trains it (train for cosine runs; wsd_segment
# and wsd_branch for wsd studies): its resources, which say where and how it runs and are no
# rerun triggers, and its shell line. The launcher renders the job's body into the run
# directory (`local`: the one `prism train` command; `aurora`: mpiexec over every node of the
# PBS job, with the DAOS mount when storage is daos), which then runs.


def training_resources(retrain):
    """The resources of a training job; `retrain` is the rule's PRISM_RETRAIN function. (A dict literal:
    `storage` at the start of a line is a Snakemake keyword.)"""
    return {
        "nodes": train_nodes,
        "procs_per_node": RANKS_PER_NODE,
        "walltime": train_walltime,
        "runtime": lambda wildcards: walltime_minutes(train_walltime(wildcards)),
        "launcher": TRAIN_OPTIONS.launcher,
        "storage": TRAIN_OPTIONS.storage,
        "strategy": TRAIN_OPTIONS.strategy,
        "device": TRAIN_OPTIONS.device,
        "account": config["cluster"]["account"],
        "queue": config["cluster"]["queue"],
        "filesystems": config["cluster"]["filesystems"],
        "place": config["cluster"]["place"],
        "retrain": retrain,
        "track": tracker_args,
    }


# The job body written by `--dry-run`, then run; a rule whose output a failed run still writes
# (a collapsed run's metrics.json) appends TRAINING_KEEPS_OUTPUT.
TRAINING_SHELL = (
    "prism train {params.run} {resources.track} --device {resources.device:q} --threads {threads}"
    " --strategy {resources.strategy:q} --launcher {resources.launcher:q} --nodes {resources.nodes:q}"
    " --procs-per-node {resources.procs_per_node:q}"
    " --storage {resources.storage:q} --dry-run > {params.body:q} 2> {log:q}"
    " && PRISM_RETRAIN={resources.retrain:q} bash {params.body:q} >> {log:q} 2>&1"
)
TRAINING_KEEPS_OUTPUT = " || test -f {output:q}"

# What every training job shares, whichever rule trains it (train for cosine runs; wsd_segment
# and wsd_branch for wsd studies): its resources (SCHEDULE.resources: where and how it runs, no
# rerun triggers) and its shell line. The launcher renders the job's body into the run
# directory (`local`: the one `prism train` command; `aurora`: mpiexec over every node of the
# PBS job, with the DAOS mount when storage is daos), which then runs.

# With cluster.pack a one-device job is one of a pack (one scheduler job, a Snakemake group: the
# rules' `group:`) and its body runs pinned to free devices of the node, as many as its ranks
# (`resources.pin`, empty otherwise: prism.launch.slots). Under Snakemake's Slurm executor the shell
# starts with the study's set-up lines (`resources.slurm_setup`, empty under any other executor:
# profiles/aurora's job script runs them).
#
# The job body written by `--dry-run`, then run unless the output is there: `--restore` has put back
# a finished run's records that Snakemake deleted to rerun it (a rebuilt input of the same content, a
# retried pack), so nothing is launched and no device held for it. A rule whose output a failed run
# still writes (a collapsed run's metrics.json) appends TRAINING_KEEPS_OUTPUT.
TRAINING_SHELL = (
    "{resources.slurm_setup}"
    "PRISM_RETRAIN={resources.retrain:q} prism train {params.run} {resources.track} --device {resources.device:q}"
    " --threads {threads}{resources.compile}"
    " --strategy {resources.strategy:q} --launcher {resources.launcher:q} --nodes {resources.nodes:q}"
    " --procs-per-node {resources.procs_per_node:q}"
    " --storage {resources.storage:q} --restore --dry-run > {params.body:q} 2> {log:q}"
    " && {{ test -f {output:q} || PRISM_RETRAIN={resources.retrain:q} PRISM_SLOT_DEVICES={resources.procs_per_node:q}"
    " {resources.pin}bash {params.body:q} >> {log:q} 2>&1; }}"
)
TRAINING_KEEPS_OUTPUT = " || test -f {output:q}"

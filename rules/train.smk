# Stage 3 (launch): one job per planned run. Only metrics.json (written last, atomically)
# is an output: the run directory with its checkpoints is not, so Snakemake never
# deletes it, and a killed or failed run resumes from its last checkpoint when rerun.
# To retrain a run from scratch, delete its directory.
#
# A rerun that Snakemake starts because the data or calibration files were rewritten with the
# same content (`--forcerun data`) restores the finished run's metrics.json from final/
# instead of retraining; `--forcerun train` retrains (PRISM_RETRAIN=1, see train_retrain).
#
# Rerun triggers are the data, the run's calibration and its plan row (params); where
# and how it runs (launcher, nodes, device, storage) are resources, so moving a study
# to the cluster or changing its node count retrains nothing.

from prism.isoflop.launch import run_args


rule train:
    input:
        unpack(train_inputs),
    output:
        f"{STUDY}/{{family}}/runs/{{run_id}}/metrics.json",
    log:
        logfile("train", "{family}", "{run_id}"),
    params:
        # The run's `prism train` flags from its plan row (the same mapping `prism isoflop launch` uses).
        run=lambda wildcards, input: run_args(
            plan_row(wildcards), data=input.data, out=f"{STUDY}/{wildcards.family}/runs/{wildcards.run_id}",
            calibration=input.calibration, seed=config["train"]["seed"], schedule=config["train"]["schedule"],
            warmup=WARMUP, eval_samples=config["train"]["eval_samples"],
            final_eval_samples=config["train"]["final_eval_samples"]),
        body=lambda wildcards: f"{STUDY}/{wildcards.family}/runs/{wildcards.run_id}/launch.sh",
    threads: config["train"]["threads"]
    # Longest runs first (steps stand in for time): the study ends sooner than when the
    # longest run happens to start last.
    priority: train_priority
    resources:
        nodes=train_nodes,
        walltime=train_walltime,
        runtime=lambda wildcards: walltime_minutes(train_walltime(wildcards)),
        launcher=config["train"]["launcher"],
        storage=config["train"]["storage"],
        strategy=config["train"]["strategy"],
        device=config["train"]["device"],
        account=config["cluster"]["account"],
        queue=config["cluster"]["queue"],
        filesystems=config["cluster"]["filesystems"],
        place=config["cluster"]["place"],
        retrain=train_retrain,
        track=tracker_args,
    # The launcher renders the job's body into the run directory (`local`: the one
    # `prism train` command; `aurora`: mpiexec over every node of the PBS job, with the
    # DAOS mount when storage is daos), which then runs. A run that ends `collapsed`
    # exits non-zero but writes metrics.json (status collapsed): a finished run, which
    # collect reports and the fit leaves out.
    #
    # Resuming is right only for the same inputs: `prism train` records a fingerprint of its
    # data manifest and calibration, and when Snakemake reruns it because they changed (new
    # data, a recalibrated model) it starts over instead of resuming.
    shell:
        "prism train {params.run} {resources.track} --device {resources.device:q} --threads {threads}"
        " --strategy {resources.strategy:q} --launcher {resources.launcher:q} --nodes {resources.nodes:q}"
        " --storage {resources.storage:q} --dry-run > {params.body:q} 2> {log:q}"
        " && PRISM_RETRAIN={resources.retrain:q} bash {params.body:q} >> {log:q} 2>&1 || test -f {output:q}"

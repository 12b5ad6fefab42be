# Stage 3 (launch): one job per planned run. Only metrics.json (written last, atomically)
# is an output: the run directory with its checkpoints is not, so Snakemake never
# deletes it, and a killed or failed run resumes from its last checkpoint when rerun.
# To retrain a run from scratch, delete its directory.
#
# A rerun that Snakemake starts because the data or calibration files were rewritten with the
# same content (`--forcerun data`) restores the finished run's metrics.json from final/
# instead of retraining; `--config retrain=true` (either schedule) or `--forcerun train`
# retrains (PRISM_RETRAIN=1, see JobSchedule.retraining in prism/workflow/jobs.py).
#
# Rerun triggers are the data, the run's calibration and its identity (a param: every value
# that decides what it computes, its plan row's and the library's defaults included,
# prism.train.identity); where and how it runs (launcher, nodes, device, storage) are
# resources, so moving a study to the cluster or changing its node count retrains nothing.

include: "training.smk"


rule train:
    input:
        unpack(SCHEDULE.train_inputs),
    output:
        S.run_metrics("{family}", "{run_id}"),
    log:
        S.logfile("train", "{family}", "{run_id}"),
    params:
        # The run's `prism train` flags from its plan row (the same mapping `prism isoflop launch` uses);
        # they read the job's input, so Snakemake does not compare them: the identity is the trigger.
        run=SCHEDULE.train_args,
        # Every value that decides what the run computes, defaults included (prism.train.identity): a
        # changed library default (the lr rule, the warm-up fraction) retrains, as a changed setting does.
        identity=SCHEDULE.identity_param(SCHEDULE.train_run, SCHEDULE.train_inputs),
        body=SCHEDULE.run_body,
    threads: S.train.threads
    # Longest runs first (steps stand in for time): the study ends sooner than when the
    # longest run happens to start last.
    priority: SCHEDULE.priority
    # cluster.pack: the job's pack (one scheduler job of one-device runs); None otherwise.
    group: SCHEDULE.group()
    resources:
        **SCHEDULE.resources(retrain=SCHEDULE.run_retrain),
    # The job body (rules/training.smk). A run that ends `collapsed` exits non-zero but
    # writes metrics.json (status collapsed): a finished run, which collect reports and the
    # fit leaves out.
    #
    # Resuming is right only for the same inputs: `prism train` records a fingerprint of its
    # data manifest and calibration, and when Snakemake reruns it because they changed (new
    # data, a recalibrated model) it starts over instead of resuming.
    shell:
        TRAINING_SHELL + TRAINING_KEEPS_OUTPUT

# Stage 3 for `train.schedule: wsd` (included instead of train.smk): every model of the
# plan trains ONE constant-rate trajectory, cut at its branch points, and every planned
# run is a cooldown branch off it (prism.isoflop.design.trajectories).
#
#   wsd_segment  trains a trajectory from one branch point to the next at the constant rate
#                (wsd with cooldown fraction 0); its output is the kept checkpoint at its end,
#                STUDY/F/stable/TRAJ/to-END/final/keep/step-END.pt (`--checkpoint-at END`)
#   wsd_branch   starts from the checkpoint at its cooldown start (`--init-from SEGMENT_DIR
#                --init-step START`) and ends at its budget:
#                STUDY/F/runs/RUN_ID/metrics.json, a run directory like a cosine run's
#                (eval.jsonl holds the stable evaluations up to the branch point too;
#                metrics.json's flops are the prefix + the cooldown), so collect, fit and
#                plot need nothing special.
#
# What the DAG does with a finished study:
# - a larger budget: one segment from the last point to the new one, and its branch;
# - a smaller budget: one segment up to the new point (from the point before it) and its
#   branch; later segments are not retrained: a segment's input is the point it STARTED
#   from (recorded in its run directory's config.yaml as init_from), not the point the
#   plan would now put before it, and inputs are `ancient()`, so a newly made earlier
#   point neither changes a segment's input set nor is newer than it;
# - a killed segment or branch resumes from its own checkpoints (`prism train` resumes
#   any run directory); on the cluster profile each segment and each branch is one PBS job.
#
# - a segment whose kept checkpoint is gone reruns: `prism train` puts it back from final/
#   (unchanged inputs), else trains the segment again from its start point (same weights);
# - `--config retrain=true` retrains every segment and branch (PRISM_RETRAIN=1); start points
#   are then plain inputs, so what follows a retrained segment reruns too.
#
# Rerun triggers as for `train`: the data, the calibration, and the params (the model, the
# batch, the warm-up, the cooldown fraction, the seed, and the run's identity: every value that
# decides what it computes, library defaults included, prism.train.identity).

include: "training.smk"


rule wsd_segment:
    input:
        unpack(SCHEDULE.segment_inputs),
    output:
        SCHEDULE.segment_output(),
    log:
        S.logfile("wsd", "{family}", "{traj}", "to-{end}"),
    wildcard_constraints:
        traj=SCHEDULE.traj_pattern,
        end=SCHEDULE.point_pattern,
    params:
        # Derived from the inputs (where it starts is an input, ancient, deliberately not a
        # rerun trigger: see the header) ...
        run=SCHEDULE.segment_args,
        body=SCHEDULE.segment_body,
        # ... and what makes it another segment (rerun triggers).
        backbone=SCHEDULE.traj_value("backbone"),
        variant=SCHEDULE.traj_value("variant"),
        regime=SCHEDULE.traj_value("regime"),
        global_batch=SCHEDULE.traj_value("global_batch"),
        warmup=SCHEDULE.traj_value("warmup"),
        seed=S.train.seed,
        # Every value that decides what it computes, defaults included (prism.train.identity); where
        # it started is the one its run directory recorded, so a finished segment's stays the same.
        identity=SCHEDULE.identity_param(SCHEDULE.segment_run, SCHEDULE.segment_inputs),
    threads: S.train.threads
    priority: SCHEDULE.segment_priority
    # cluster.pack: the job's pack (one scheduler job of one-device runs); None otherwise.
    group: SCHEDULE.group()
    resources:
        **SCHEDULE.resources(retrain=SCHEDULE.segment_retrain),
    shell:
        TRAINING_SHELL


rule wsd_branch:
    input:
        unpack(SCHEDULE.branch_inputs),
    output:
        S.run_metrics("{family}", "{run_id}"),
    log:
        S.logfile("train", "{family}", "{run_id}"),
    params:
        run=SCHEDULE.branch_args,
        body=SCHEDULE.run_body,
        backbone=SCHEDULE.row_value("backbone"),
        variant=SCHEDULE.row_value("variant"),
        regime=SCHEDULE.row_value("regime"),
        budget=SCHEDULE.run_budget,
        global_batch=SCHEDULE.row_value("global_batch"),
        warmup=SCHEDULE.branch_warmup,
        cooldown_fraction=SCHEDULE.cooldown_fraction,
        seed=S.train.seed,
        identity=SCHEDULE.identity_param(SCHEDULE.branch_run, SCHEDULE.branch_inputs),
    threads: S.train.threads
    priority: SCHEDULE.branch_priority
    # cluster.pack: the job's pack (one scheduler job of one-device runs); None otherwise.
    group: SCHEDULE.group()
    resources:
        **SCHEDULE.resources(retrain=SCHEDULE.run_retrain),
    # As `train`: a collapsed branch writes metrics.json (status collapsed) and exits non-zero.
    shell:
        TRAINING_SHELL + TRAINING_KEEPS_OUTPUT


# The agreement check: this (wsd) study's fit against a cosine study of the same grid,
#   snakemake --profile profiles/local fit_text_image --config study_dir=study-cosine 'train={"schedule": "cosine"}'
#   snakemake --profile profiles/local agreement_text_image --config compare_with=study-cosine
# (the second call trains the wsd study first when needed).


localrules:
    agreement,


rule agreement:
    input:
        unpack(SCHEDULE.agreement_inputs),
    output:
        S.agreement_file("{family}", "{regime}"),
    log:
        S.logfile("agreement", "{family}", "{regime}"),
    params:
        other=SCHEDULE.compared_study,
        study=lambda wildcards: STUDY,  # a function: lint wants no hard-coded path prefixes
        cooldown_fraction=SCHEDULE.cooldown_fraction,
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop compare --study-a {params.other:q} --study-b {params.study:q} --family {wildcards.family:q}"
        " --regime {wildcards.regime:q} --cooldown-fraction {params.cooldown_fraction:q} --out {output:q}"
        " > {log:q} 2>&1"


for _family in FAMILIES:

    rule:
        name:
            f"agreement_{_family}"
        input:
            S.agreement_file(_family, REGIME),

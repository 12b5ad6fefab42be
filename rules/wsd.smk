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
# batch, the warm-up, the cooldown fraction, the seed).

include: "wsd_common.smk"
include: "training.smk"


rule wsd_segment:
    input:
        unpack(segment_inputs),
    output:
        f"{STUDY}/{{family}}/stable/{{traj}}/to-{{end}}/final/keep/step-{{end}}.pt",
    log:
        logfile("wsd", "{family}", "{traj}", "to-{end}"),
    wildcard_constraints:
        traj=TRAJ_RE,
        end=POINT_RE,
    params:
        # Derived from the inputs (where it starts is an input, ancient, deliberately not a
        # rerun trigger: see the header) ...
        run=segment_args,
        body=lambda wildcards: f"{segment_dir(wildcards.family, wildcards.traj, wildcards.end)}/launch.sh",
        # ... and what makes it another segment (rerun triggers).
        backbone=traj_value("backbone"),
        variant=traj_value("variant"),
        regime=traj_value("regime"),
        global_batch=traj_value("global_batch"),
        warmup=traj_value("warmup"),
        seed=TRAIN_OPTIONS.seed,
    threads: TRAIN_OPTIONS.threads
    priority: _segment_priority
    resources:
        **training_resources(retrain=segment_retrain),
    shell:
        TRAINING_SHELL


rule wsd_branch:
    input:
        unpack(branch_inputs),
    output:
        f"{STUDY}/{{family}}/runs/{{run_id}}/metrics.json",
    log:
        logfile("train", "{family}", "{run_id}"),
    params:
        run=branch_args,
        body=lambda wildcards: f"{STUDY}/{wildcards.family}/runs/{wildcards.run_id}/launch.sh",
        backbone=row_value("backbone"),
        variant=row_value("variant"),
        regime=row_value("regime"),
        budget=lambda wildcards: budget_str(plan_row(wildcards)["budget"]),
        global_batch=row_value("global_batch"),
        warmup=lambda wildcards: wsd_run_trajectory(wildcards).warmup,
        cooldown_fraction=WSD_COOLDOWN,
        seed=TRAIN_OPTIONS.seed,
    threads: TRAIN_OPTIONS.threads
    priority: _branch_priority
    resources:
        **training_resources(retrain=train_retrain),
    # As `train`: a collapsed branch writes metrics.json (status collapsed) and exits non-zero.
    shell:
        TRAINING_SHELL + TRAINING_KEEPS_OUTPUT


# The agreement check: this (wsd) study's fit against a cosine study of the same grid,
#   snakemake fit_text_image --config study_dir=study-cosine 'train={"schedule": "cosine"}'
#   snakemake agreement_text_image --config compare_with=study-cosine
# (the second call trains the wsd study first when needed).


localrules:
    agreement,


rule agreement:
    input:
        unpack(agreement_inputs),
    output:
        f"{STUDY}/{{family}}/agreement/{{regime}}.md",
    log:
        logfile("agreement", "{family}", "{regime}"),
    params:
        other=lambda wildcards: str(config["compare_with"] or "").rstrip("/"),
        study=lambda wildcards: STUDY,  # a function: lint wants no hard-coded path prefixes
        cooldown_fraction=WSD_COOLDOWN,
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
            f"{STUDY}/{_family}/agreement/{REGIME}.md",

# Stage 2: the plan, a checkpoint: which runs (backbone x variant per budget) the
# study trains is known only once the calibrations exist. The budgets, candidates
# and batch are params, so changing them re-plans; the plan row of a run does not
# depend on the other budgets, so re-planning retrains nothing that was planned before.


checkpoint plan:
    input:
        study_calibrations,
    output:
        plan=f"{STUDY}/{{family}}/plan.yaml",
        csv=f"{STUDY}/{{family}}/plan.csv",
    log:
        logfile("plan", "{family}"),
    params:
        budgets=",".join(BUDGETS),
        backbones=",".join(config["backbones"]),
        variants=",".join(config["variants"]),
        regime=REGIME,
        calibration_dir=f"{STUDY}/calibration",
        # Optional planner flags: only those the config sets (null = the planner's default).
        options=lambda wildcards: plan_options(),
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop plan --family {wildcards.family:q} --budgets {params.budgets:q}"
        " --regime {params.regime:q} --backbones {params.backbones:q} --variants {params.variants:q}"
        " --calibration-dir {params.calibration_dir:q} {params.options:q} --out {output.plan:q} > {log:q} 2>&1"

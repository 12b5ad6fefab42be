# Stage 4: one CSV row per planned run (unfinished or collapsed runs get a row with their
# status and are never fitted); run directories the plan does not hold, or trained on
# other data or another calibration, are listed as `stale` and never fitted either.


rule collect:
    input:
        plan=f"{STUDY}/{{family}}/plan.yaml",
        metrics=planned_metrics,
    output:
        f"{STUDY}/{{family}}/runs.csv",
    log:
        logfile("collect", "{family}"),
    params:
        runs=lambda wildcards: f"{STUDY}/{wildcards.family}/runs",
        data=lambda wildcards: data_dir(wildcards.family),
        options=as_args(COLLECT_OPTIONS),
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop collect --runs-dir {params.runs:q} --plan {input.plan:q} --data {params.data:q}"
        " {params.options:q} --out {output:q} --force > {log:q} 2>&1"

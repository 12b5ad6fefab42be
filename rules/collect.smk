# Stage 4: one CSV row per planned run (unfinished or collapsed runs get a row with their
# status and are never fitted); run directories the plan does not hold, or trained on
# other data or another calibration, are listed as `stale` and never fitted either.


rule collect:
    input:
        plan=S.plan_file("{family}"),
        metrics=W.planned_metrics,
    output:
        S.runs_csv("{family}"),
    log:
        S.logfile("collect", "{family}"),
    params:
        runs=W.runs_dir,
        data=W.data_dir,
        options=commands.collect_flags(S),
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop collect --runs-dir {params.runs:q} --plan {input.plan:q} --data {params.data:q}"
        " {params.options:q} --out {output:q} --force > {log:q} 2>&1"

# Stage 4: one CSV row per run directory of the family (unfinished or collapsed runs
# get a row with their status and are never fitted).


rule collect:
    input:
        planned_metrics,
    output:
        f"{STUDY}/{{family}}/runs.csv",
    log:
        logfile("collect", "{family}"),
    params:
        outputs=lambda wildcards: f"{STUDY}/{wildcards.family}/runs",
        eval_window=config["collect"]["eval_window"],
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop collect --outputs {params.outputs:q} --csv {output:q}"
        " --eval-window {params.eval_window:q} --force > {log:q} 2>&1"

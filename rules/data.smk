# Stage 0: the webdataset shards of a family (`prism data build`, written atomically).


rule data:
    output:
        directory(f"{STUDY}/data/{{family}}"),
    log:
        logfile("data", "{family}"),
    params:
        seed=config["data"]["seed"],
        lm_ratio=config["data"]["lm_ratio"],
    threads: 1
    resources:
        nodes=1,
        walltime="00:30:00",
        runtime=30,
    shell:
        "prism data build --family {wildcards.family:q} --out {output:q} --seed {params.seed:q}"
        " --lm-ratio {params.lm_ratio:q}"
        " > {log:q} 2>&1"

# Stage 1: parameters and training FLOPs per sample of one (family, backbone, variant,
# regime), counted on the meta device: cheap, and the same on every machine. Beside it,
# when `calibrate.measure_throughput` is on, a few timed training steps where the training
# runs (`.speed.json`: this machine, or a compute node under a cluster profile), in the runs'
# precision: the plan turns them into each run's estimated wall time, and a cluster study's
# into node-hours and walltimes. The timing is its own file because it changes from one
# measurement to the next, and training depends on the calibration only. The tokenizer file
# (data.tokenizer) is an input of both: edited in place, it recalibrates (its embedding rows).


rule calibrate:
    input:
        W.spec_inputs,
    output:
        S.calibration_file("{family}", "{backbone}", "{variant}", "{regime}"),
    log:
        S.logfile("calibrate", "{family}__{backbone}__{variant}__{regime}"),
    params:
        spec=W.spec_args,
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop calibrate --family {wildcards.family:q} --backbone {wildcards.backbone:q}"
        " --projector-variant {wildcards.variant:q} --regime {wildcards.regime:q} --no-measure-throughput{params.spec}"
        " --out {output:q} > {log:q} 2>&1"


rule speed:
    input:
        W.spec_inputs,
    output:
        S.speed_file("{family}", "{backbone}", "{variant}", "{regime}"),
    log:
        S.logfile("speed", "{family}__{backbone}__{variant}__{regime}"),
    params:
        options=W.speed_args,
        device=S.train.device,
    # Timed with the threads a training run gets, in its precision, on its device: under a cluster
    # profile a short job on a compute node, where the training jobs run.
    threads: S.train.threads
    # cluster.pack: every speed job in one scheduler job, each on its own device (resources.pin).
    group: W.speed_group()
    resources:
        **W.speed_resources(),
    shell:
        "{resources.slurm_setup}{resources.pin}"
        "prism isoflop calibrate --family {wildcards.family:q} --backbone {wildcards.backbone:q}"
        " --projector-variant {wildcards.variant:q} --regime {wildcards.regime:q}"
        " --device {params.device:q} --threads {threads} {params.options:q} --out {output:q} > {log:q} 2>&1"

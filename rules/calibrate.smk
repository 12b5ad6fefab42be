# Stage 1: parameters and training FLOPs per sample of one (family, backbone, variant,
# regime), counted on the meta device: cheap, and the same on every machine.


rule calibrate:
    output:
        f"{STUDY}/calibration/{{family}}__{{backbone}}__{{variant}}__{{regime}}.json",
    log:
        logfile("calibrate", "{family}__{backbone}__{variant}__{regime}"),
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop calibrate --family {wildcards.family:q} --backbone {wildcards.backbone:q}"
        " --projector-variant {wildcards.variant:q} --regime {wildcards.regime:q} --out {output:q}"
        " > {log:q} 2>&1"

# Before the grid: a cluster study's probe (prism cluster probe, prism/launch/probe.py). Two short
# jobs in the debug queue run the real job body of the study's largest size that fits a node:
# eager and compiled, each stopped with SIGTERM (checkpointed), then the eager run resumed in a
# second job. Its record
# prices the plan (the loader, the collectives, start-up, compile), so the plan and every training
# job wait for it. `snakemake --profile profiles/aurora probe_F --configfile config/aurora.yaml`
# runs it alone.


rule probe:
    input:
        W.probe_inputs,
    output:
        probe_first_file(S, "{family}"),
    log:
        S.logfile("probe", "{family}"),
    params:
        args=W.probe_args,
    resources:
        **W.probe_resources(),
    shell:
        "prism cluster probe --part first {params.args:q} --out {output:q} > {log:q} 2>&1"


rule probe_resume:
    input:
        probe_first_file(S, "{family}"),
    output:
        probe_file(S, "{family}"),
    log:
        S.logfile("probe", "{family}.resume"),
    params:
        args=W.probe_args,
    resources:
        **W.probe_resources(),
    shell:
        "prism cluster probe --part resume {params.args:q} --first {input:q} --out {output:q} > {log:q} 2>&1"


for _family in FAMILIES:

    rule:
        name:
            f"probe_{_family}"
        input:
            probe_file(S, _family),

# Stage 6: the figures. Plotting options are params of this rule only, so changing
# them re-plots and nothing else.


rule plot:
    input:
        csv=f"{STUDY}/{{family}}/runs.csv",
        fit=f"{STUDY}/{{family}}/fit/{{regime}}.json",
    output:
        report(
            directory(f"{STUDY}/{{family}}/plots/{{regime}}"),
            patterns=["{name}.png"],
            caption="report/plots.rst",
            category="Plots",
            subcategory="{family}",
            labels={"family": "{family}", "regime": "{regime}", "figure": "{name}"},
        ),
    log:
        logfile("plot", "{family}", "{regime}"),
    params:
        options=as_args(PLOT_OPTIONS),
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop plot --csv {input.csv:q} --fit-json {input.fit:q} --family {wildcards.family:q}"
        " --regime {wildcards.regime:q} {params.options:q} --outdir {output:q} > {log:q} 2>&1"

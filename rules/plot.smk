# Stage 6: the figures. Plotting options are params of this rule only, so changing
# them re-plots and nothing else. Each figure is an output of its own (not the folder), so
# a deleted one is noticed and made again, and the report holds every one by name.


rule plot:
    input:
        csv=f"{STUDY}/{{family}}/runs.csv",
        fit=f"{STUDY}/{{family}}/fit/{{regime}}.json",
    output:
        isoflop_curves=plot_figure("isoflop_curves", "report/plots.rst"),
        scaling_laws=plot_figure("scaling_laws", "report/plots.rst"),
        approach3_fit=plot_figure("approach3_fit", "report/plots.rst"),
        training_curves=plot_figure("training_curves", "report/training_curves.rst"),
        # The report's first page (rules/report/workflow.rst includes it beside isoflop_curves.png).
        answer=f"{STUDY}/{{family}}/plots/{{regime}}/answer.html",
    log:
        logfile("plot", "{family}", "{regime}"),
    params:
        options=as_args(PLOT_OPTIONS),
        outdir=lambda wildcards: f"{STUDY}/{wildcards.family}/plots/{wildcards.regime}",
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop plot --csv {input.csv:q} --fit-json {input.fit:q} --family {wildcards.family:q}"
        " --regime {wildcards.regime:q} {params.options:q} --outdir {params.outdir:q} > {log:q} 2>&1"

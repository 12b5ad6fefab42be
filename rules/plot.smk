# Stage 6: the figures. Plotting options are params of this rule only, so changing
# them re-plots and nothing else. Each figure is an output of its own (not the folder), so
# a deleted one is noticed and made again, and the report holds every one by name.


rule plot:
    input:
        csv=S.runs_csv("{family}"),
        fit=S.fit_file("{family}", "{regime}", "json"),
    output:
        isoflop_curves=report(
            S.plot_figure("isoflop_curves"), caption="report/plots.rst", **S.figure_labels("isoflop_curves")
        ),
        scaling_laws=report(
            S.plot_figure("scaling_laws"), caption="report/plots.rst", **S.figure_labels("scaling_laws")
        ),
        approach3_fit=report(
            S.plot_figure("approach3_fit"), caption="report/plots.rst", **S.figure_labels("approach3_fit")
        ),
        training_curves=report(
            S.plot_figure("training_curves"), caption="report/training_curves.rst", **S.figure_labels("training_curves")
        ),
        # The report's first page (rules/report/workflow.rst includes it beside isoflop_curves.png).
        answer=S.plot_file("{family}", "{regime}", "answer.html"),
    log:
        S.logfile("plot", "{family}", "{regime}"),
    params:
        options=commands.plot_flags(S),
        outdir=W.plot_dir,
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop plot --csv {input.csv:q} --fit-json {input.fit:q} --family {wildcards.family:q}"
        " --regime {wildcards.regime:q} {params.options:q} --outdir {params.outdir:q} > {log:q} 2>&1"

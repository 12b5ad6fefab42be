# Stage 2: the plan: which runs (backbone x variant) each budget trains, their cost, and
# the identifiability forecast. A checkpoint for a new study only: once its inputs (the
# calibrations, and the speed files when measured) exist, prism.workflow.planfile computes the
# same plan with the same function, so the DAG knows the runs before this job has run.
# Its flags are params, so changing a budget, a candidate or a `plan:` key re-plans; the
# plan row of a run does not depend on the other budgets, so re-planning retrains nothing
# that was planned before.
#
# A plan that cannot answer its question (a refused budget, an UNDETERMINED forecast) fails
# this job without writing it, unless plan.allow_undetermined; the DAG of a study whose plan
# prism.workflow.planfile can compute waits for this job then, so nothing trains. The log's last line
# (the summary, or the line saying why it stopped and what to change) goes to the terminal.


checkpoint plan:
    input:
        W.plan_inputs,
    output:
        plan=S.plan_file("{family}"),
        csv=S.plan_table("{family}"),
    log:
        S.logfile("plan", "{family}"),
    params:
        flags=W.plan_args,
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism isoflop plan --family {wildcards.family:q} {params.flags:q} --out {output.plan:q} > {log:q} 2>&1"
        " || {{ tail -n 1 {log:q} >&2; exit 1; }}; tail -n 1 {log:q} >&2"

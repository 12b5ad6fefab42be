# Stage 2a (tune.rule: fitted): a short sweep of peak learning rate at a few widths spanning the
# grid (the smallest, or the first tune.long_sizes, also at the grid's length), then the lr rule fitted
# to it, which the plan reads (prism.isoflop.design.tuning). Each
# sweep run is an ordinary training job (the grid's shell line and resources: it runs on the
# cluster profile like them), resumable, and only metrics.json is its output.


rule tune_run:
    input:
        unpack(W.tune.run_inputs),
    output:
        S.tune_run_metrics("{family}", "{steps}", "{run_id}", "{lr}"),
    wildcard_constraints:
        lr=r"[0-9.]+(e-?[0-9]+)?",
        steps=r"[0-9]+",
    log:
        S.logfile("tune", "{family}", "s{steps}", "{run_id}", "lr{lr}"),
    params:
        run=W.tune.run_args,
        body=W.tune.run_body,
        identity=SCHEDULE.identity_param(W.tune.sweep_run, W.tune.run_inputs),
    threads: S.train.threads
    # With cluster.pack the sweep's runs are packed as the grid's (one scheduler job for a node's devices).
    group: W.tune.group()
    resources:
        **W.tune.run_resources(),
    shell:
        TRAINING_SHELL + TRAINING_KEEPS_OUTPUT


rule tune:
    input:
        W.tune.metrics,
    output:
        S.lr_rule_file("{family}"),
    log:
        S.logfile("tune", "{family}"),
    params:
        flags=W.tune.fit_args,
    threads: 1
    shell:
        "prism isoflop tune {params.flags:q} --out {output:q} {input:q} > {log:q} 2>&1"
        " || {{ tail -n 1 {log:q} >&2; exit 1; }}; tail -n 2 {log:q} >&2"

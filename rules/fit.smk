# Stage 5: N_opt(C), D_opt(C) (Approach 2 and 3, bootstrap intervals) and the verdict
# whether the study determines them.


rule fit:
    input:
        csv=W.fit_inputs,
    output:
        json=report(
            S.fit_file("{family}", "{regime}", "json"),
            caption="report/fit_json.rst",
            category="Fit",
            subcategory="{family}",
            labels={"family": "{family}", "regime": "{regime}", "file": "fit (JSON)"},
        ),
        md=report(
            S.fit_file("{family}", "{regime}", "md"),
            caption="report/fit_md.rst",
            category="Fit",
            subcategory="{family}",
            labels={"family": "{family}", "regime": "{regime}", "file": "fit (Markdown)"},
        ),
        html=report(
            S.fit_file("{family}", "{regime}", "html"),
            caption="report/fit_html.rst",
            category="Fit",
            subcategory="{family}",
            labels={"family": "{family}", "regime": "{regime}", "file": "fit (table)"},
        ),
    log:
        S.logfile("fit", "{family}", "{regime}"),
    params:
        options=commands.fit_flags(S),
        family_dir=W.family_dir,
    threads: 1
    resources:
        nodes=1,
        walltime="00:30:00",
        runtime=30,
    shell:
        "prism isoflop fit --csv {input.csv:q} --family {wildcards.family:q}"
        " --regime {wildcards.regime:q} {params.options:q}"
        " --output-json {output.json:q} --output-md {output.md:q} > {log:q} 2>&1"
        " && prism isoflop summary {params.family_dir:q} --html {output.html:q} >> {log:q} 2>&1"

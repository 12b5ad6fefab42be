# The per-modality throughput sweep: one job per (design, preset) cell, then one table.
#
#   snakemake --profile profiles/local sweep   # every cell of config `sweep:` on this machine
#   snakemake --profile profiles/aurora sweep --config 'sweep={"designs": ["PRISM-MODALITY-SMOKE-2N"]}'
#
# A cell (`prism sweep run-cell`) trains its preset padded and packed into
# SWEEP_DIR/<design>/<preset>/{padded,packed}/ and writes status.json last: that is the
# rule's only output, so a finished cell is never redone and a half-done one resumes.
# Each family's shards are their own rule's output and every cell gets its family's
# directory explicitly. On the cluster a cell is one PBS job of the design's node count;
# inside it the cell renders the aurora job body (mpiexec, DAOS mount) and runs it.

from prism.workflow.sweep import Sweep

SWEEP = Sweep(config)
SWEEP_DIR = SWEEP.dir


# Cheap steps run where Snakemake runs, also with the cluster profile.
localrules:
    sweep,
    sweep_data,
    sweep_aggregate,
    sweep_report,


rule sweep_data:
    output:
        directory(f"{SWEEP_DIR}/data/{{family}}-seed{{seed}}"),
    log:
        f"{SWEEP_DIR}/logs/data/{{family}}-seed{{seed}}.log",
    wildcard_constraints:
        seed=r"[0-9]+",
    threads: 1
    resources:
        nodes=1,
        walltime="00:30:00",
        runtime=30,
    shell:
        "prism data build --family {wildcards.family:q} --out {output:q} --seed {wildcards.seed:q}"
        " > {log:q} 2>&1"


rule sweep_cell:
    input:
        data=SWEEP.cell_data,
    output:
        f"{SWEEP_DIR}/{{design}}/{{preset}}/status.json",
    log:
        f"{SWEEP_DIR}/logs/{{design}}/{{preset}}.log",
    wildcard_constraints:
        design=SWEEP.design_pattern(),
        preset=SWEEP.preset_pattern(),
    params:
        outputs=lambda wildcards: SWEEP.outputs,  # a function: `snakemake --lint` wants no hard-coded path prefixes
        sweep_id=SWEEP.id,
        presets_file=SWEEP.presets_file,
        data_root=f"{SWEEP_DIR}/data",
    # One training process at a time per cell; it uses the machine's cores.
    threads: workflow.cores
    resources:
        nodes=SWEEP.nodes,
        walltime=SWEEP.walltime,
        runtime=SWEEP.runtime,
        storage=SWEEP.storage,
        account=config["cluster"]["account"],
        queue=config["cluster"]["queue"],
        filesystems=SWEEP.filesystems,
        place=config["cluster"]["place"],
        # The study's set-up lines and caches, the variables passed by name (no qsub -V).
        **W.job_environment(),
    shell:
        "prism sweep run-cell --preset {wildcards.preset:q} --design {wildcards.design:q}"
        " --sweep-id {params.sweep_id:q} --storage {resources.storage:q} --outputs {params.outputs:q}"
        " --data-root {params.data_root:q} --presets-file {params.presets_file:q} > {log:q} 2>&1"


rule sweep_aggregate:
    input:
        SWEEP.cells,
    output:
        csv=f"{SWEEP_DIR}/perf.csv",
        md=f"{SWEEP_DIR}/perf.md",
        png=f"{SWEEP_DIR}/perf.png",
    log:
        f"{SWEEP_DIR}/logs/aggregate.log",
    params:
        outputs=lambda wildcards: SWEEP_DIR,
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism perf aggregate --sweep-dir {params.outputs:q} --out {output.csv:q} --per-modality > {log:q} 2>&1"


# The results document (docs/results/per_modality_sweep.md is one): every preset of the sweep,
# padded and packed, with its commands, machine and dates.
rule sweep_report:
    input:
        SWEEP.cells,
    output:
        md=f"{SWEEP_DIR}/per_modality_sweep.md",
        png=f"{SWEEP_DIR}/per_modality_sweep.png",
    log:
        f"{SWEEP_DIR}/logs/report.log",
    params:
        outputs=lambda wildcards: SWEEP_DIR,
        presets=",".join(SWEEP.presets),
    threads: 1
    resources:
        nodes=1,
        walltime="00:10:00",
        runtime=10,
    shell:
        "prism perf report --sweep-dir {params.outputs:q} --out {output.md:q} --presets {params.presets:q}"
        " > {log:q} 2>&1"


rule sweep:
    input:
        rules.sweep_aggregate.output,
        rules.sweep_report.output,

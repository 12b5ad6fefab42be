# Stage 0: the webdataset shards of a family: the offline build (`prism data build`, written
# atomically), or, where `data.shards` names a folder of your own shards, their index
# (`prism data index`: the same manifest, the shards read where they lie). The folder is an
# input, so adding or replacing a shard re-indexes, and runs on the old index go stale; so is
# the tokenizer file (data.tokenizer), so one edited in place re-indexes too.
# When it fails (a shards folder that does not exist, too many bad samples), its log's last
# line, the one-line error, goes to the terminal; when it passes with broken shards (cut,
# empty: samples lost, within data.max_bad_fraction), their warnings do.


rule data:
    input:
        W.data_inputs,
    output:
        directory(S.data_dir("{family}")),
    log:
        S.logfile("data", "{family}"),
    params:
        args=W.data_args,
    # The index decodes shards in up to 8 processes (PRISM_INDEX_JOBS; `--cores` caps it); the build uses one.
    threads: W.data_threads
    # First of the jobs ready beside it (calibrate, speed): a wrong shards folder fails at once.
    priority: 1000000000
    resources:
        nodes=1,
        walltime="00:30:00",
        runtime=30,
    shell:
        "PRISM_INDEX_JOBS={threads} prism data {params.args:q} --out {output:q} > {log:q} 2>&1"
        " || {{ tail -n 1 {log:q} >&2; exit 1; }}; grep '^warning: shard .* lost' {log:q} >&2 || true"

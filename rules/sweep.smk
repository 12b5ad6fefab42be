# The per-modality throughput sweep (`prism sweep run`, `prism perf aggregate`).
# Owned by the sweep issue, which fills this file in; included by the Snakefile.

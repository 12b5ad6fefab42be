"""The workflow's logic: what the Snakefile and rules/*.smk call, testable without Snakemake.

- study: the validated config as the options dataclasses (parsed once) and every path of a study;
- commands: each job's `prism` flags (one function per command: add a flag there);
- plan: the plan's rows, computed in-process as `prism isoflop plan` computes them;
- resources: training jobs' nodes and walltimes, and what a plan's jobs request;
- schedule: cosine or wsd, the one object that knows which jobs a schedule trains;
- engine: the only module that touches Snakemake's internals (and the worker's lifecycle);
- wiring: `StudyWorkflow`, the one object the rules read.
"""

"""A run directory's lifecycle, in the order a run meets it.

- `lock`: one trainer per directory (`RUNDIR/.lock`, an exclusive `flock`).
- `finished`: a finished run is refused if asked to be another, restored if only its
  `metrics.json` was deleted, retrained only when asked.
- `resume`: resume from the newest checkpoint trained on the same inputs and settings,
  or start over; a wsd branch starts from its trajectory's checkpoint.
- `checkpoint`: the checkpoints themselves, written atomically, read with their checks.
- `runfiles`: the records (config.yaml, perf.jsonl, eval.jsonl, metrics.json written last).
"""

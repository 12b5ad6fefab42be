"""Aggregate perf.jsonl files (one per run) into CSV, Markdown and a chart."""

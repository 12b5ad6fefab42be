"""tools/bench_index.py: shards written by webdataset's TarWriter, indexed and verified."""

import ast
import re

from .conftest import load_tool


def test_bench_index_indexes_every_sample_it_wrote(capsys, tmp_path):
    tool = load_tool("bench_index")
    assert tool.write_shards(tmp_path / "s", 45, 20) > 0
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["00000.tar", "00001.tar", "00002.tar"]
    assert tool.main(["--samples", "60", "--per-shard", "30", "--repeats", "1"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("60 samples in 2 shards") and "index" in line and "verify" in line
    counts = ast.literal_eval(re.search(r"split (\{.*?\}):", line).group(1))
    assert sum(counts.values()) == 60


def test_bench_index_reports_the_peak_memory_of_one_index_process(capsys):
    tool = load_tool("bench_index")
    assert tool.main(["--samples", "40", "--per-shard", "20", "--rss"]) == 0
    line = capsys.readouterr().out
    peak = re.search(r"^40 samples in 2 shards .*: prism data index peak RSS (\d+) MiB", line)
    assert peak and int(peak.group(1)) > 0, line

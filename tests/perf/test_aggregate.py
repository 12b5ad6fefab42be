import csv
import json

import pytest

from prism.cli import main
from prism.core.errors import PrismError
from prism.perf.aggregate import aggregate, parse_filters
from prism.perf.reader import read_perf
from prism.perf.summary import steady_state, summarize_run


def _rows(n, sps, tps, mfu, layout="padded", family="text_image"):
    rows = []
    for step in range(1, n + 1):
        slow = step <= 2  # warm-up steps are much slower and must not count
        rows.append(
            {
                "step": step,
                "loss": 5.0 - 0.1 * step,
                "samples_per_s": sps / 10 if slow else sps,
                "tokens_per_s": (tps / 10 if slow else tps),
                "step_time_s": 0.1,
                "data_wait_s": 0.01,
                "mfu": mfu / 10 if slow else mfu,
                "peak_mem_bytes": 1000 + step,
                "strategy": "single",
                "world_size": 1,
                "device": "cpu",
                "family": family,
                "backbone": "30k",
                "layout": layout,
            }
        )
    return rows


def _write_cell(root, preset, layout, rows, extra_lines=()):
    d = root / "t1" / "SMOKE" / preset / layout
    d.mkdir(parents=True)
    (d.parent / "cell.json").write_text(json.dumps({"preset": preset, "design": "SMOKE", "sweep_id": "t1"}))
    lines = [json.dumps(r) for r in rows] + list(extra_lines)
    (d / "perf.jsonl").write_text("\n".join(lines) + "\n")
    return d


@pytest.fixture
def outputs(tmp_path):
    root = tmp_path / "out"
    _write_cell(root, "text_image", "padded", _rows(10, 100.0, 6400.0, 0.05))
    _write_cell(root, "text_image", "packed", _rows(10, 300.0, 6000.0, 0.12, layout="packed"))
    _write_cell(
        root,
        "text_ts",
        "padded",
        _rows(10, 50.0, 3200.0, 0.04, family="text_ts"),
        extra_lines=['{"step": 11, "samples_per_s": 5'],
    )  # truncated last line
    return root


def test_steady_state_drops_warmup():
    rows = _rows(10, 100.0, 6400.0, 0.05)
    steady = steady_state(list(reversed(rows)))
    assert [r["step"] for r in steady] == list(range(3, 11))
    rec = summarize_run(rows)
    assert rec["samples_per_s"] == 100.0 and rec["mfu"] == 0.05
    assert rec["tokens_per_sample"] == 64.0
    assert rec["final_loss"] == pytest.approx(4.0) and rec["peak_mem_bytes"] == 1010
    assert rec["steps_logged"] == 10 and rec["steps_used"] == 8 and rec["family"] == "text_image"


def test_truncated_line_reported_with_file_and_line(outputs, tmp_path, capsys):
    path = outputs / "t1/SMOKE/text_ts/padded/perf.jsonl"
    rows, bad = read_perf(path)
    assert len(rows) == 10 and [b.line for b in bad] == [11]
    res = aggregate(outputs, tmp_path / "perf.csv")
    err = capsys.readouterr().err
    assert f"{path}:11" in err
    ts = [r for r in res.records if r["preset"] == "text_ts"][0]
    assert ts["bad_lines"] == 1 and ts["samples_per_s"] == 50.0
    with open(tmp_path / "perf.csv") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 3 and "bad_lines" in table[0]
    assert (tmp_path / "perf.md").read_text().count("\n| ") == 3 + 1  # header + three runs
    assert (tmp_path / "perf.png").stat().st_size > 0


def test_filter_keeps_one_preset(outputs, tmp_path):
    res = aggregate(outputs, tmp_path / "p.csv", filters=["preset=text_image"])
    assert {r["preset"] for r in res.records} == {"text_image"} and len(res.records) == 2
    res = aggregate(outputs, tmp_path / "p.csv", filters=["preset=text_image", "layout=packed"])
    assert [r["layout"] for r in res.records] == ["packed"]
    res = aggregate(outputs, tmp_path / "p.csv", filters=["world_size=1.0"])  # numbers compare as numbers
    assert len(res.records) == 3


def test_bad_filter_key_lists_columns(outputs, tmp_path):
    with pytest.raises(PrismError, match=r"unknown filter key 'colour'.*preset.*samples_per_s"):
        aggregate(outputs, tmp_path / "p.csv", filters=["colour=red"])
    with pytest.raises(PrismError, match="key=value"):
        parse_filters(["preset"])
    with pytest.raises(PrismError, match="no run"):
        aggregate(outputs, tmp_path / "p.csv", filters=["preset=vla"])
    assert not (tmp_path / "p.csv").exists()


def test_per_modality_one_row_per_preset(outputs, tmp_path, capsys):
    rc = main(["perf", "aggregate", "--sweep-dir", str(outputs), "--out", str(tmp_path / "m.csv"), "--per-modality"])
    assert rc == 0
    with open(tmp_path / "m.csv") as fh:
        table = {r["preset"]: r for r in csv.DictReader(fh)}
    assert set(table) == {"text_image", "text_ts"}
    ti = table["text_image"]
    assert float(ti["samples_per_s"]) == 100.0  # the padded baseline
    assert float(ti["samples_per_s_packed"]) == 300.0
    assert float(ti["packing_speedup"]) == pytest.approx(3.0)
    assert float(ti["tokens_per_sample_packed"]) == pytest.approx(20.0)
    assert table["text_ts"]["packing_speedup"] == "" and table["text_ts"]["bad_lines"] == "1"
    png = tmp_path / "m.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "m.md").read_text()
    assert "| text_image |" in md and "3.00x" in md


def test_cli_errors_are_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["perf", "aggregate", "--sweep-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "no perf.jsonl" in err and "Traceback" not in err


def test_packed_samples_per_s_from_the_samples_counter():
    # prism train logs units (packed rows) per second; 4 samples per row in this run.
    rows = [
        {
            "step": s,
            "samples_per_s": 10.0,
            "step_time_s": 0.1,
            "samples": 4 * 1 * s,
            "tokens_per_s": 2560.0,
            "global_batch": 1,
            "layout": "packed",
        }
        for s in range(1, 11)
    ]
    rec = summarize_run(rows)
    assert rec["units_per_s"] == 10.0 and rec["samples_per_s"] == pytest.approx(40.0)
    assert rec["tokens_per_sample"] == pytest.approx(64.0)

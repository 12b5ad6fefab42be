"""`prism perf report`: the per-modality results document, on a fake sweep (nothing measured)."""

from __future__ import annotations

import json
import re

import pytest

from prism.cli import main
from prism.core.errors import PrismError
from prism.perf.report import COLUMNS, CPU_COLUMNS, write_report

PRESETS = ("text_graph", "text_image", "text_ts", "vla", "text_table", "text_video")


def _fake_cell(root, sweep_id, preset, sps, packed_gain, machine=True):
    """One finished cell as `prism sweep run` leaves it: cell.json, two perf.jsonl, status.json."""
    cell = root / sweep_id / "SMOKE" / preset
    for layout, rate in (("padded", sps), ("packed", sps * packed_gain)):
        d = cell / layout
        d.mkdir(parents=True)
        rows = [
            {
                "step": step,
                "samples_per_s": rate,
                "tokens_per_s": rate * (128 if layout == "padded" else 128 / packed_gain),
                "mfu": 0.1 * rate / sps,
                "step_time_s": 0.05,
                "cpu_time_s": 0.025,  # half the wall clock: another tenant held the core the rest
                "mfu_cpu": 0.2 * rate / sps,
                "family": preset,
                "layout": layout,
            }
            for step in range(5, 65, 5)
        ]
        (d / "perf.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (d / "cell.json").write_text(json.dumps({"layout": layout}))
    (cell / "cell.json").write_text(json.dumps({"preset": preset, "design": "SMOKE", "sweep_id": sweep_id}))
    status = {
        "preset": preset,
        "design": "SMOKE",
        "sweep_id": sweep_id,
        "storage": "local",
        "data": str(root / "data" / f"{preset}-seed0"),
        "design_settings": {"backbone": "30k", "max_steps": 60, "log_every": 5, "device": "cpu", "threads": 1},
        "finished_at": "2026-12-04T18:40:00+0000",
    }
    if machine:
        status["machine"] = {"host": "box", "cpu": "Some CPU", "cores": 2, "load_avg_1m": 3.5}
    (cell / "status.json").write_text(json.dumps(status))


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "sweeps"
    for i, sweep_id in enumerate(("r1", "r2")):
        for j, preset in enumerate(PRESETS):
            _fake_cell(root, sweep_id, preset, 100.0 * (j + 1) * (1 + 0.1 * i), 2.0)
    return root


def _tables(text: str) -> list[list[list[str]]]:
    """Each Markdown table of `text` as rows of cells (header and separator first)."""
    out, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(re.split(r"(?<!\\)\|", line.strip())[1:-1])
        elif current:
            out.append(current)
            current = []
    return out


def test_every_preset_given_is_a_row_of_consistent_tables(sweep, tmp_path):
    out = tmp_path / "results" / "per_modality_sweep.md"
    md, png = write_report(sweep, out, "prism perf report ...", presets=list(PRESETS), chart=False)
    assert png is None
    wall, cpu = _tables(md.read_text())
    for table, columns in ((wall, COLUMNS), (cpu, CPU_COLUMNS)):
        header, separator, rows = table[0], table[1], table[2:]
        assert len(header) == len(columns) and all(len(r) == len(header) for r in [separator, *rows])
        assert [r[0].strip() for r in rows] == list(PRESETS)  # the order given
        assert all(r[-1].strip() == "4" for r in rows)  # two repeats x two layouts
    header, rows = wall[0], wall[2:]
    assert header[1:3] == [" samples/s (padded) ", " samples/s (packed) "]
    assert {r[header.index(" packing speed-up ")].strip() for r in rows} == {"2.00x"}
    assert rows[0][1].strip() == "105.0"  # the median of 100 and 110
    header, rows = cpu[0], cpu[2:]
    assert {r[header.index(" packing speed-up by CPU time ")].strip() for r in rows} == {"2.00x"}
    assert rows[0][header.index(" samples/CPU-s (padded) ")].strip() == "210.0"  # half the wall clock's time
    assert rows[0][header.index(" samples/CPU-s spread (padded) ")].strip() == "10%"  # (220 - 200) / 210


def test_the_document_names_its_commands_machine_and_date(sweep, tmp_path):
    md, _ = write_report(sweep, tmp_path / "r.md", "prism perf report --sweep-dir S --out r.md", note="Loaded host.")
    text = md.read_text()
    assert "Written by `prism perf report --sweep-dir S --out r.md`" in text
    for sweep_id in ("r1", "r2"):
        command = f"--designs SMOKE --outputs {sweep} --sweep-id {sweep_id} --data-root {sweep / 'data'}"
        assert command in text
    assert "2026-12-04" in text and "box (Some CPU, 2 cores)" in text and "Loaded host." in text
    assert "spread" in text and "| 10% |" in text  # samples/s of r2 is 1.1x r1's: (110 - 100) / 105


def test_a_preset_asked_for_but_not_measured_is_named(sweep, tmp_path):
    with pytest.raises(PrismError, match="no run of preset\\(s\\) text_audio"):
        write_report(sweep, tmp_path / "r.md", "cmd", presets=["text_image", "text_audio"], chart=False)
    assert not (tmp_path / "r.md").exists()


def test_cli_writes_the_document_and_its_chart(sweep, tmp_path, capsys):
    out = tmp_path / "per_modality_sweep.md"
    assert main(["perf", "report", "--sweep-dir", str(sweep), "--out", str(out), "--presets", "vla,text_ts"]) == 0
    text = out.read_text()
    assert f"Written by `prism perf report --sweep-dir {sweep} --out {out} --presets vla,text_ts`" in text
    assert "![samples per CPU second and MFU by CPU time per preset, padded and packed](per_modality_sweep.png)" in text
    assert out.with_suffix(".png").stat().st_size > 0
    assert [r[0].strip() for r in _tables(text)[0][2:]] == ["vla", "text_ts"]
    assert f"wrote {out}" in capsys.readouterr().out

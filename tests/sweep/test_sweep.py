import csv
import json
import shlex

import pytest
import yaml

from prism.cli import main
from prism.core.errors import PrismError
from prism.sweep import cells as sc
from prism.sweep.presets import load, split_names

TINY = {
    "presets": {
        "text_image": {"family": "text_image", "data_seed": 0, "packed_seq_len": 128, "global_batch": 4},
        "text_graph": {"family": "text_graph", "data_seed": 0, "packed_seq_len": 128, "global_batch": 4},
    },
    "designs": {
        "TINY-1N": {"nodes": 1, "procs_per_node": 1, "backbone": "30k", "max_steps": 3, "log_every": 1, "threads": 1},
        "TINY-2N": {
            "nodes": 2,
            "procs_per_node": 12,
            "backbone": "1b",
            "max_steps": 4,
            "strategy": "ddp",
            "launcher": "aurora",
            "device": "xpu",
        },
    },
}


@pytest.fixture
def presets_file(tmp_path):
    path = tmp_path / "presets.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def test_repository_presets_cover_every_family():
    from prism.core.families import FAMILIES

    pf = load()
    assert {p.family for p in pf.presets.values()} == set(FAMILIES)
    assert pf.design("PRISM-MODALITY-SMOKE-1N").nodes == 1


def test_preset_file_errors_name_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"presets": {"x": {"family": "text_image", "colour": 1}}, "designs": {}}))
    with pytest.raises(PrismError, match=r"bad.yaml: preset 'x' has unknown key\(s\) colour"):
        load(bad)
    bad.write_text(yaml.safe_dump({"presets": {"x": {"family": "text_audio"}}, "designs": {}}))
    with pytest.raises(PrismError, match="unknown family"):
        load(bad)
    bad.write_text(yaml.safe_dump({"presets": {}, "designs": {"D": {"backbone": "30k", "max_steps": 1, "nodes": 2}}}))
    with pytest.raises(PrismError, match="launcher local runs one process"):
        load(bad)
    with pytest.raises(PrismError, match="unknown preset"):
        load().preset("text_audio")


def test_the_old_presets_path_says_where_they_moved(tmp_path):
    with pytest.raises(PrismError, match=r"experiments/modality_presets.yaml: .*moved to config/modality_presets.yaml"):
        load(tmp_path / "experiments" / "modality_presets.yaml")
    with pytest.raises(PrismError, match="; pass --presets-file$"):
        load(tmp_path / "elsewhere.yaml")


def test_cells_have_their_own_shards_and_env(presets_file, tmp_path):
    pf = load(presets_file)
    cells = sc.make_cells(pf, split_names("text_image,text_graph"), ["TINY-1N"], "t1", tmp_path / "out")
    a, b = cells
    assert a.dir == tmp_path / "out/t1/TINY-1N/text_image" and a.data_dir != b.data_dir
    for cell in cells:
        argv = sc.train_command(cell, "packed")
        assert argv[argv.index("--data") + 1] == str(cell.data_dir)
        assert argv[argv.index("--layout") + 1] == "packed" and argv[argv.index("--seq-len") + 1] == "128"
        env = sc.child_env(cell, {"WEBDATASET_LOCAL_PATH": str(a.data_dir), "PATH": "/bin"})
        assert env["WEBDATASET_LOCAL_PATH"] == str(cell.data_dir) and "PRISM_DATA_DIR" not in env
    with pytest.raises(PrismError, match="sweep-id"):
        sc.make_cells(pf, ["text_image"], ["TINY-1N"], "../up", tmp_path)


def test_cluster_design_renders_a_pbs_body(presets_file, tmp_path):
    (cell,) = sc.make_cells(load(presets_file), ["text_graph"], ["TINY-2N"], "t1", tmp_path, storage="daos")
    argv = sc.train_command(cell, "padded")
    body = (cell.run_dir("padded") / "launch.sh").read_text()
    assert argv[0] == "bash" and "#PBS -l select=2" in body and "launch-dfuse.sh" in body
    # The cell's own shards, staged into the DAOS container and read from there.
    assert "mpiexec -n 24" in body and f"prism/{str(cell.data_dir).lstrip('/')}" in body
    assert ' --data "$PRISM_DATA" ' in body
    assert "--global-batch 96" in body  # 4 rows per rank x 24 ranks


@pytest.mark.slow
def test_sweep_two_cells_isolated_and_aggregated(presets_file, tmp_path, monkeypatch, capsys):
    from prism.data.loader import ShardLoader

    out = tmp_path / "out"
    # A data variable naming the text_image shards must not leak into the text_graph cell.
    image_data = out / "t1" / "data" / "text_image-seed0"
    monkeypatch.setenv("WEBDATASET_LOCAL_PATH", str(image_data))
    rc = main(
        [
            "sweep",
            "run",
            "--preset",
            "text_image,text_graph",
            "--designs",
            "TINY-1N",
            "--storage",
            "local",
            "--sweep-id",
            "t1",
            "--outputs",
            str(out),
            "--presets-file",
            str(presets_file),
        ]
    )
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    aggregate = printed.out.strip().splitlines()[-1].strip()  # the command it prints to summarise the sweep
    for preset in ("text_image", "text_graph"):
        cell = out / "t1" / "TINY-1N" / preset
        assert json.loads((cell / "status.json").read_text())["status"] == "ok"
        for layout in ("padded", "packed"):
            cfg = yaml.safe_load((cell / layout / "config.yaml").read_text())
            assert cfg["data"] == str(out / "t1" / "data" / f"{preset}-seed0") and cfg["layout"] == layout
            manifest = json.loads((out / "t1" / "data" / f"{preset}-seed0" / "manifest.json").read_text())
            assert manifest["family"] == preset
            rows = [json.loads(line) for line in (cell / layout / "perf.jsonl").read_text().splitlines()]
            assert rows and {r["family"] for r in rows} == {preset} and {r["layout"] for r in rows} == {layout}
    # The loader itself refuses an explicit directory that disagrees with the variable.
    with pytest.raises(PrismError, match="WEBDATASET_LOCAL_PATH"):
        ShardLoader(out / "t1" / "data" / "text_graph-seed0", "train", global_batch=4)
    # A second call finds every cell done.
    assert (
        main(
            [
                "sweep",
                "run",
                "--preset",
                "text_image,text_graph",
                "--designs",
                "TINY-1N",
                "--sweep-id",
                "t1",
                "--outputs",
                str(out),
                "--presets-file",
                str(presets_file),
            ]
        )
        == 0
    )
    assert "nothing to do" in capsys.readouterr().out
    monkeypatch.delenv("WEBDATASET_LOCAL_PATH")
    assert aggregate.startswith("prism perf aggregate ")
    assert main(shlex.split(aggregate)[1:]) == 0
    with open(out / "t1" / "perf.csv") as fh:
        table = {r["preset"]: r for r in csv.DictReader(fh)}
    assert set(table) == {"text_image", "text_graph"}
    for r in table.values():
        assert float(r["samples_per_s_padded"]) > 0 and float(r["samples_per_s_packed"]) > 0
        assert 0 < float(r["mfu_padded"]) <= 1 and float(r["packing_speedup"]) > 0
        # Several whole samples share a 128-token packed row; a padded row is one 64-token sample.
        assert float(r["tokens_per_sample_packed"]) <= 64 and float(r["tokens_per_sample_padded"]) == 64
    assert (out / "t1" / "perf.png").stat().st_size > 0

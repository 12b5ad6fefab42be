"""rules/sweep.smk: the DAG of a sweep (a Snakemake dry run in a copy of the workflow; no training)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SWEEP = {
    "presets": ["text_image", "text_ts", "vla"],
    "designs": ["PRISM-MODALITY-SMOKE-1N", "PRISM-MODALITY-SMOKE-2N"],
    "storage": "daos",
    "id": "w1",
    "outputs": "sw",
    "presets_file": "config/modality_presets.yaml",
}


@pytest.mark.workflow
def test_sweep_dag_one_job_per_cell(tmp_path):
    shutil.copy2(REPO / "Snakefile", tmp_path / "Snakefile")
    for folder in ("rules", "config", "profiles"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump({**config, "sweep": SWEEP}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SNAKEMAKE_PROFILE", None)
    out = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "-n", "-p", "sweep"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    text = out.stdout
    assert out.returncode == 0, text
    assert text.count("rule sweep_cell:") == 6 and text.count("rule sweep_data:") == 3
    assert text.count("rule sweep_aggregate:") == 1
    assert "prism sweep run-cell --preset vla --design PRISM-MODALITY-SMOKE-2N --sweep-id w1 --storage daos" in text
    assert "--data-root sw/w1/data" in text and "sw/w1/PRISM-MODALITY-SMOKE-1N/text_ts/status.json" in text
    assert "prism perf aggregate --sweep-dir sw/w1 --out sw/w1/perf.csv --per-modality" in text
    assert (
        "prism perf report --sweep-dir sw/w1 --out sw/w1/per_modality_sweep.md --presets text_image,text_ts,vla" in text
    )
    # The 2-node design's cells ask PBS for two nodes and the DAOS filesystem.
    assert "nodes=2" in text and "filesystems=flare:home:daos_user_fs" in text

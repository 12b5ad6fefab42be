"""tools/bench_matmul.py: the BLAS's rate on a backbone's own matmul shapes, against the peak."""

from prism.model.config import BackboneConfig

from .conftest import load_tool

TINY = BackboneConfig("tiny", d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=48)


def test_the_shapes_are_the_blocks_weights_and_the_lm_head():
    tool = load_tool("bench_matmul")
    shapes = tool.projection_shapes(TINY)
    # Grouped-query attention: k and v have 2 heads of 8 features each beside q's 32.
    assert shapes == {"qkv": (32, 64), "o": (32, 32), "gate_up": (32, 96), "down": (48, 32), "lm_head": (32, 264)}
    block = sum(k * n for name, (k, n) in shapes.items() if name != "lm_head")
    assert block == TINY.block_params - 2 * TINY.d_model  # every weight but the two norms'


def test_each_projection_is_timed_in_its_three_orientations(capsys, monkeypatch):
    tool = load_tool("bench_matmul")
    monkeypatch.setattr(tool, "measure_peak", lambda device, dtype: {"flops": 1e12})
    monkeypatch.setattr(tool, "backbone_config", lambda name: TINY)
    assert tool.main(["--backbones", "tiny", "--rows", "64"]) == 0
    out = capsys.readouterr().out
    assert "tiny (d_model 32): a block's and the LM head's matmuls together" in out
    for name in ("qkv", "o", "gate_up", "down", "lm_head"):
        assert sum(line.split()[0] == name for line in out.splitlines()) == 3, name

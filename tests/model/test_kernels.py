"""The fused CPU kernels (prism/model/kernels): when they run, how they build, the fused loss.

Their values and gradients against the reference block: tests/model/test_block_forms.py."""

import os
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from prism.core.tokenizer import IGNORE
from prism.model import build_model, kernels
from prism.model.backbone import Backbone
from prism.model.config import BackboneConfig

pytestmark = pytest.mark.skipif(kernels.load() is None, reason="no C++ toolchain to build the kernels")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def backbone(**kw) -> Backbone:
    base = dict(name="tiny", d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, ffn_dim=80, vocab_size=264)
    return Backbone(BackboneConfig(**{**base, **kw}))


def test_a_second_backward_through_a_fused_block_is_an_error_naming_the_way_out():
    model = backbone()
    loss = model(torch.randint(0, 256, (2, 16))).sum()
    loss.backward(retain_graph=True)  # the block's backward consumes its saved activations
    with pytest.raises(RuntimeError, match="PRISM_CPU_KERNELS=0"):
        loss.backward()


def test_the_fused_loss_is_cross_entropy_over_labelled_positions():
    logits = torch.randn(300, 264, requires_grad=True)
    labels = torch.randint(0, 264, (300,))
    labels[::3] = IGNORE
    loss = kernels.cross_entropy(logits, labels, IGNORE)
    (grad,) = torch.autograd.grad(3 * loss, logits)
    ref = F.cross_entropy(logits, labels, ignore_index=IGNORE)
    (ref_grad,) = torch.autograd.grad(3 * ref, logits)
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(grad, ref_grad)
    assert grad[::3].abs().max() == 0  # unlabelled rows get no gradient


def test_a_batch_without_labels_has_a_nan_loss_as_cross_entropy_does():
    logits = torch.randn(4, 264)
    labels = torch.full((4,), IGNORE)
    assert kernels.cross_entropy(logits, labels, IGNORE).isnan()
    assert F.cross_entropy(logits, labels, ignore_index=IGNORE).isnan()


def test_a_label_outside_the_vocabulary_is_an_error_naming_it():
    with pytest.raises(RuntimeError, match="label 300 is out of range"):
        kernels.cross_entropy(torch.randn(4, 264), torch.tensor([1, 2, 300, 3]), IGNORE)


def test_other_dtypes_devices_and_switches_take_the_modules_path():
    assert not kernels.usable(torch.zeros(2, dtype=torch.bfloat16))
    assert not kernels.usable(torch.zeros(2, device="meta"))
    with kernels.disabled():
        assert not kernels.usable(torch.zeros(2))
    assert kernels.usable(torch.zeros(2))


def test_where_the_kernels_cannot_be_built_training_warns_once_and_uses_aten(monkeypatch):
    import torch.utils.cpp_extension

    def no_compiler(**_):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(torch.utils.cpp_extension, "load", no_compiler)
    monkeypatch.setattr(kernels, "_state", {"enabled": True, "taken": set(), "error": None})
    with pytest.warns(RuntimeWarning, match="could not be built .*no C\\+\\+ compiler.*ATen ops instead"):
        assert not kernels.usable(torch.zeros(2))
    model = backbone()
    tokens = torch.randint(0, 256, (2, 12))
    assert model(tokens).shape == (2, 12, 264)  # the modules' path, no second warning
    # Not silently: the run's record says which path ran and why.
    assert kernels.path_record() == {"kernel_path": "aten", "kernel_error": "RuntimeError: no C++ compiler"}


def test_the_path_a_run_took_is_recorded_from_its_own_steps(monkeypatch):
    monkeypatch.setattr(kernels, "_state", {**kernels._state, "taken": set()})
    kernels.usable(torch.zeros(2, device="meta"))  # FLOP counting: not a path
    assert kernels.path_record()["kernel_path"] is None
    backbone()(torch.randint(0, 256, (2, 12)))
    assert kernels.path_record()["kernel_path"] == "fused"
    with kernels.disabled():
        backbone()(torch.randint(0, 256, (2, 12)))
    assert kernels.path_record()["kernel_path"] == "fused+aten"
    kernels.reset_path()
    assert kernels.path_record()["kernel_path"] is None


def test_a_lock_left_by_a_killed_load_does_not_stop_the_next_one(tmp_path, monkeypatch):
    # torch's lock file outlives a process killed mid-load (a walltime, a cancelled job);
    # a later job must load the kernels, not wait on it forever.
    built = kernels.build_directory()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    cache = kernels.build_directory()
    shutil.copytree(built, cache)
    (cache / "lock").touch()
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "prism.model.kernels"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "fused CPU kernels ready" in done.stdout
    assert not (cache / "lock").exists()


def test_without_file_locks_the_load_goes_ahead_and_leaves_torchs_lock_alone(tmp_path, monkeypatch):
    def no_locks(*_):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(kernels.fcntl, "flock", no_locks)
    (tmp_path / "lock").touch()  # perhaps another process's, live: without our lock we cannot tell
    with kernels._exclusive(tmp_path):
        assert (tmp_path / "lock").exists()


def test_under_bf16_autocast_the_kernels_step_aside():
    """A mixed-precision step on a CPU takes the modules' path (the kernels are fp32): it trains
    instead of failing inside a kernel, and its gradients are fp32 like the weights."""
    model = build_model("text_image", "30k", "BASE", "e2e")
    from prism.model.accounting import example_batch

    tokens, modality, labels = example_batch(model, 64, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not kernels.usable(torch.zeros(2, 2))
        loss = model(tokens, modality, labels)
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert all(p.grad.dtype == torch.float32 for p in model.trainable_parameters())
    assert kernels.usable(torch.zeros(2, 2))

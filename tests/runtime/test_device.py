import pytest
import torch

from prism.core.errors import PrismError
from prism.runtime.device import device_name, max_memory_allocated, memory_capacity, resolve_device, synchronize


def test_auto_prefers_an_accelerator_then_cpu():
    dev = resolve_device("auto")
    if torch.cuda.is_available():
        assert dev.type == "cuda"
    elif hasattr(torch, "xpu") and torch.xpu.is_available():
        assert dev.type == "xpu"
    else:
        assert dev == torch.device("cpu")


def test_explicit_names():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("meta") == torch.device("meta")
    with pytest.raises(PrismError, match="unknown device 'tpu'; valid: auto, cpu, cuda, xpu"):
        resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a host without CUDA")
def test_unavailable_accelerator_is_a_user_error():
    with pytest.raises(PrismError, match="sees no CUDA device"):
        resolve_device("cuda")


def test_cpu_helpers():
    synchronize("cpu")
    assert max_memory_allocated("cpu") > 0
    assert memory_capacity("cpu") > 0
    assert device_name("cpu")

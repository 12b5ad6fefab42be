"""The PRISM model: backbone, encoders, projector, their composition and accounting.

Import `prism.model.config` for the registries without torch; `build_model` lives in
`prism.model.prism` (imported lazily here so the registries stay torch-free).
"""

from __future__ import annotations


def build_model(*args, **kwargs):
    from prism.model.prism import build_model as _build  # noqa: PLC0415 lazy: torch

    return _build(*args, **kwargs)

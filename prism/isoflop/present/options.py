"""The plots' settings (`prism isoflop plot` flags, the config's `plot:` section).

The fit's are `prism.isoflop.fit.fit.FitOptions`, beside the fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism.core.options import option


@dataclass(frozen=True)
class PlotOptions:
    """How the figures are drawn (changing these re-plots only)."""

    dpi: int = option(
        150, "resolution of the PNGs", metavar="DPI", minimum=50, doc="Resolution of the PNGs.", schema={"maximum": 600}
    )

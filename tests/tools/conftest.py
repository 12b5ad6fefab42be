"""Shared by the tests of the scripts in tools/ (benchmarks, the GPU check, the local scheduler)."""

import importlib.util
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"
# The scripts import their shared module (tools/benchlib.py) as a sibling, as `python tools/X.py` lets them.
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))


def load_tool(name: str):
    """tools/NAME.py as a module (tools/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""The launchers by name: the one place a launcher is registered, and where everything asks for one.

`register(launcher)` adds one (a `prism.launch.base.Launcher`), `get(name)` returns it (an unknown
name is an error naming the known ones), `names()` lists them in registration order. The built-in
launchers, `local`, `torchrun`, `aurora` and `slurm`, are registered below; `prism.train.options.LAUNCHERS`
(the `--launcher` choices of `prism train` and `prism isoflop launch`, the config's `train.launcher`)
reads `names()` each time it is asked, so a launcher registered later is a choice too
(tests/launch/test_registry.py registers one and prints its body with `prism train --dry-run`).
"""

from __future__ import annotations

from prism.core.errors import PrismError, check_name
from prism.launch.aurora import AURORA
from prism.launch.base import Launcher
from prism.launch.local import LOCAL
from prism.launch.slurm import SLURM
from prism.launch.torchrun import TORCHRUN
from prism.train.options import LAUNCHERS

_LAUNCHERS: dict[str, Launcher] = {}


def register(launcher: Launcher) -> Launcher:
    """Make `launcher` known by its name; a second launcher of a name is refused."""
    if not isinstance(launcher, Launcher):
        raise PrismError(f"{launcher!r} is not a launcher: subclass prism.launch.base.Launcher")
    name = getattr(launcher, "name", None)
    if not isinstance(name, str) or not name:
        raise PrismError(f"{launcher!r} has no name: set the class's `name`")
    if name in _LAUNCHERS and _LAUNCHERS[name] is not launcher:
        raise PrismError(f"launcher {name} is registered already ({_LAUNCHERS[name]!r})")
    _LAUNCHERS[name] = launcher
    return launcher


def unregister(name: str) -> None:
    """Forget the launcher `name` (a test's own launcher, after the test)."""
    _LAUNCHERS.pop(name, None)


def get(name: str) -> Launcher:
    """The launcher `name`; an unknown name is a PrismError listing the known ones."""
    return _LAUNCHERS[check_name("launcher", name, names())]


def names() -> tuple[str, ...]:
    return tuple(_LAUNCHERS)


for _launcher in (LOCAL, TORCHRUN, AURORA, SLURM):
    register(_launcher)
LAUNCHERS.read_from(names)

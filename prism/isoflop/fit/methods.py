"""The fit methods by name: the one place a method is registered, and where the fit asks for one.

`register(method)` adds one (a `prism.isoflop.fit.method.FitMethod`), `get(name)` returns it (an
unknown name is an error naming the known ones), `names()` lists them in registration order, which
is the order the fit runs them, their reasons are given and their intervals weighed: the fewest
assumptions first, since of methods that agree the verdict rests on the first that determines a
alone (`diagnostics.resting_on`). Approach 2 and Approach 3 are registered below; `METHODS` (the
`fit.method` choices: a method's name or "both") reads `names()` each time it is asked, so a method
registered later is a choice too (tests/isoflop/fit/test_methods.py registers one and sees the verdict
rest on it).
"""

from __future__ import annotations

from prism.core.errors import PrismError, check_name
from prism.core.names import LiveNames
from prism.isoflop.fit.approach2_method import APPROACH2
from prism.isoflop.fit.approach3_method import APPROACH3
from prism.isoflop.fit.method import BOTH, FitMethod, chosen

_METHODS: dict[str, FitMethod] = {}


def register(method: FitMethod) -> FitMethod:
    """Make `method` known by its name; a second method of a name is refused."""
    if not isinstance(method, FitMethod):
        raise PrismError(f"{method!r} is not a fit method: see prism.isoflop.fit.method.FitMethod")
    name = method.name
    if not isinstance(name, str) or not name or name == "both":
        raise PrismError(f"{method!r} needs a name (not 'both', which means {' and '.join(BOTH)})")
    if name in _METHODS and _METHODS[name] is not method:
        raise PrismError(f"fit method {name} is registered already ({_METHODS[name]!r})")
    _METHODS[name] = method
    return method


def unregister(name: str) -> None:
    """Forget the method `name` (a test's own method, after the test)."""
    _METHODS.pop(name, None)


def get(name: str) -> FitMethod:
    """The method `name`; an unknown name is a PrismError listing the known ones."""
    return _METHODS[check_name("fit method", name, names())]


def names() -> tuple[str, ...]:
    return tuple(_METHODS)


def selected(method: str) -> list[FitMethod]:
    """The methods the option's value `method` fits, in registration order."""
    wanted = chosen(method)
    return [m for name, m in _METHODS.items() if name in wanted]


def label(method: str) -> str:
    """The option's value in words ("Approach 2 and Approach 3" for both); an unknown name as written."""
    return " and ".join(_METHODS[n].label if n in _METHODS else n for n in chosen(method))


# The `fit.method` choices, read each time they are asked: every registered name, then "both".
METHODS = LiveNames(lambda: (*names(), "both"))

for _method in (APPROACH2, APPROACH3):
    register(_method)

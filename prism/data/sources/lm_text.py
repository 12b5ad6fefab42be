"""Language-model text for mixing in: the documentation installed with Python and numpy, in short passages.

The text is the interpreter's `pydoc_data.topics`, the docstrings of a fixed list
of stdlib modules (their classes, functions and methods), and numpy's public
docstrings (every public submodule), cut at word boundaries into passages of at
most `max_bytes` ASCII bytes; identical docstrings count once. About 2.8 MB of
text, 45,000 passages of 62 bytes, parsed in a second or two.

The passages are derived from the installed documentation on every build, never
read from a cache: no file (a stale or planted cache, wherever `PRISM_CACHE`
points) can change the bytes of a build. `passages_digest` is recorded in the
manifest, and `prism data verify` derives the passages again and compares.
These samples have no modality; they join the splits only when
`prism data build --lm-ratio R` asks for them (default 0).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
import warnings
from pathlib import Path

from prism.core.errors import PrismError
from prism.data.sources import package_versions

SOURCE = "pydoc_data.topics + stdlib docstrings of the running Python + numpy's public docstrings"
PACKAGES = ("numpy",)  # third-party documentation walked (public submodules); versions recorded
MODULES = (
    "abc",
    "argparse",
    "array",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "enum",
    "fractions",
    "functools",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "html",
    "io",
    "itertools",
    "json",
    "logging",
    "math",
    "operator",
    "os",
    "pathlib",
    "pickle",
    "queue",
    "random",
    "re",
    "shutil",
    "statistics",
    "string",
    "struct",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "typing",
    "unittest",
    "urllib.parse",
    "uuid",
    "zipfile",
)


def versions() -> dict[str, str]:
    return {"python": sys.version.split()[0], **package_versions(*PACKAGES)}


def documents() -> list[tuple[str, str]]:
    """(document id, text) in a fixed order, collected in a fresh interpreter.

    A fresh one because importing other packages edits docstrings in place (scipy
    appends an "Array API" section to `numpy.sinc`'s): the text must not depend on
    what the calling process happened to import before.
    """
    root = str(Path(__file__).resolve().parents[3])  # the directory holding the prism package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    code = (
        "import json, sys; from prism.data.sources.lm_text import collect_documents; "
        "json.dump(collect_documents(), sys.stdout)"
    )
    res = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if res.returncode:
        raise PrismError(f"collecting the LM text failed: {res.stderr.strip().splitlines()[-1:]}")
    return [(doc_id, text) for doc_id, text in json.loads(res.stdout)]


def collect_documents() -> list[tuple[str, str]]:
    """(document id, text) in a fixed order; a docstring seen before (re-exports, inherited) counts once."""
    from pydoc_data.topics import topics  # noqa: PLC0415 lazy: pydoc_data

    docs = [(f"topic-{name}", topics[name]) for name in sorted(topics)]
    with warnings.catch_warnings():  # deprecated aliases (typing.io, ...) warn when touched
        warnings.simplefilter("ignore")
        for mod_name in MODULES:
            docs += module_docs(importlib.import_module(mod_name), inspect, mod_name)
        for package in PACKAGES:
            for mod_name in public_modules(package):
                try:
                    module = importlib.import_module(mod_name)
                except Exception:  # noqa: BLE001 - an optional submodule whose dependency is absent
                    continue
                docs += module_docs(module, inspect, package)
    seen: set[str] = set()
    unique = []
    for doc_id, text in docs:
        if text not in seen:
            seen.add(text)
            unique.append((doc_id, text))
    return unique


def public_modules(package: str) -> list[str]:
    """`package` and its public submodules (no `_private`, tests or build helpers), sorted."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, package + ".", onerror=lambda name: None):
        parts = info.name.split(".")[1:]
        if any(p.startswith("_") or p in ("tests", "testing", "conftest", "setup", "distutils", "f2py") for p in parts):
            continue
        names.append(info.name)
    return sorted(names)


def module_docs(module, inspect, owner: str | None = None) -> list[tuple[str, str]]:
    """The docstrings of a module and of the classes (with their methods) and functions it defines.

    `owner`: a definition counts when its `__module__` starts with it (a package's
    re-exports); default the module itself.
    """
    owner = owner or module.__name__
    docs = [(f"mod-{module.__name__}", module.__doc__)] if module.__doc__ else []
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or not str(getattr(obj, "__module__", None) or "").startswith(owner):
            continue
        if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj) or callable(obj)):
            continue
        doc = inspect.getdoc(obj)
        if doc:
            docs.append((f"mod-{module.__name__}-{name}", doc))
        if inspect.isclass(obj):
            for attr, member in sorted(vars(obj).items()):
                if attr.startswith("_") or not (inspect.isfunction(member) or inspect.ismethoddescriptor(member)):
                    continue
                doc = inspect.getdoc(member)
                if doc:
                    docs.append((f"mod-{module.__name__}-{name}-{attr}", doc))
    return docs


def passages(text: str, max_bytes: int) -> list[str]:
    """Whitespace-normalised ASCII passages of at most `max_bytes`, cut between words."""
    words = re.sub(r"\s+", " ", text.encode("ascii", "ignore").decode()).strip().split(" ")
    out, cur = [], ""
    for word in words:
        word = word[:max_bytes]
        if cur and len(cur) + 1 + len(word) > max_bytes:
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        out.append(cur)
    return [p for p in out if len(p) >= 16]


def load_passages(max_bytes: int) -> list[tuple[str, str]]:
    """(document id, passage) pairs, derived from the installed documentation (never from a cache)."""
    return [(doc_id, p) for doc_id, text in documents() for p in passages(text, max_bytes)]


def passages_digest(items: list[tuple[str, str]]) -> str:
    """sha256 of the passages (ids and text, in order): what the manifest records and verify checks."""
    return hashlib.sha256(json.dumps([list(x) for x in items], separators=(",", ":")).encode()).hexdigest()

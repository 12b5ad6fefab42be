"""Language-model text for mixing in: Python's own documentation, split into short passages.

The text is the interpreter's `pydoc_data.topics` plus the docstrings of a fixed
list of stdlib modules, cut at word boundaries into passages of at most
`max_bytes` ASCII bytes. Parsing takes about a second, so the passages are
cached as JSON under ~/.cache/prism/ (keyed by Python version and passage
size). These samples have no modality; they join the training split only when
`prism data build --lm-ratio R` asks for them (default 0).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from prism.atomic import write_text_atomic

SOURCE = "pydoc_data.topics + stdlib docstrings of the running Python"
MODULES = (
    "abc", "argparse", "array", "base64", "bisect", "calendar", "collections", "contextlib",
    "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "enum", "fractions",
    "functools", "glob", "gzip", "hashlib", "heapq", "html", "io", "itertools", "json",
    "logging", "math", "operator", "os", "pathlib", "pickle", "queue", "random", "re",
    "shutil", "statistics", "string", "struct", "tarfile", "tempfile", "textwrap",
    "threading", "time", "typing", "unittest", "urllib.parse", "uuid", "zipfile",
)


def versions() -> dict[str, str]:
    return {"python": sys.version.split()[0]}


def cache_dir() -> Path:
    return Path(os.environ.get("PRISM_CACHE", Path.home() / ".cache" / "prism"))


def documents() -> list[tuple[str, str]]:
    """(document id, text) in a fixed order."""
    import importlib
    import inspect
    import warnings

    from pydoc_data.topics import topics

    docs = [(f"topic-{name}", topics[name]) for name in sorted(topics)]
    with warnings.catch_warnings():  # deprecated aliases (typing.io, ...) warn when touched
        warnings.simplefilter("ignore", DeprecationWarning)
        for mod_name in MODULES:
            docs += module_docs(importlib.import_module(mod_name), inspect)
    return docs


def module_docs(module, inspect) -> list[tuple[str, str]]:
    """The docstrings of a module and of the classes and functions it defines."""
    docs = [(f"mod-{module.__name__}", module.__doc__)] if module.__doc__ else []
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        doc = inspect.getdoc(obj) if (inspect.isclass(obj) or inspect.isfunction(obj)) else None
        if doc:
            docs.append((f"mod-{module.__name__}-{name}", doc))
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
    """(document id, passage) pairs, parsed once and cached."""
    path = cache_dir() / f"lm_text-py{sys.version_info.major}.{sys.version_info.minor}-{max_bytes}.json"
    if path.exists():
        try:
            return [tuple(x) for x in json.loads(path.read_text())]
        except (OSError, ValueError):
            pass  # a damaged cache is rebuilt below
    items = [(doc_id, p) for doc_id, text in documents() for p in passages(text, max_bytes)]
    write_text_atomic(path, json.dumps(items))
    return items

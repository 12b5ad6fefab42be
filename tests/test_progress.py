"""Progress shows on a terminal only: logs and CI keep the commands' own lines."""

from __future__ import annotations

import io

from prism.progress import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_when_not_a_terminal():
    stream = io.StringIO()
    assert list(progress(range(3), "indexing", stream=stream)) == [0, 1, 2]
    assert stream.getvalue() == ""


def test_counts_on_a_terminal_and_clears_its_line():
    stream = Terminal()
    assert list(progress(["a", "b"], "indexing train", stream=stream, bar=False)) == ["a", "b"]
    text = stream.getvalue()
    assert "\rindexing train: 0/2" in text and "\rindexing train: 1/2" in text
    assert text.endswith("\r\033[K")

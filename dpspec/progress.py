"""Progress for long work, without tying mechanisms to a user interface.

A mechanism calls `progress.report("block level", done, total)`; the CLI installs a reporter
that draws a line on standard error, tests and the Python API install none (reports are then
dropped). A context variable keeps concurrent compiles apart.
"""

from __future__ import annotations

import contextvars
import sys
import time
from contextlib import contextmanager
from typing import Callable

_reporter: contextvars.ContextVar[Callable[[str, int, int], None] | None] = contextvars.ContextVar(
    "dpspec_progress", default=None
)


def report(stage: str, done: int, total: int) -> None:
    """Tell whoever listens that `done` of `total` steps of `stage` are finished."""
    reporter = _reporter.get()
    if reporter is not None:
        reporter(stage, done, total)


@contextmanager
def reporting(reporter: Callable[[str, int, int], None] | None):
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


class StderrBar:
    """A one-line progress bar on standard error, redrawn at most ten times a second."""

    def __init__(self, stream=None, width: int = 30):
        self.stream = stream or sys.stderr
        self.width = width
        self.last = 0.0
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.stage = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = total and done >= total
        if not self.interactive:
            if stage != self.stage:  # in logs, one line per stage start and end
                self.stream.write(f"  {stage} ...\n")
                self.stage = stage
            if finished:
                self.stream.write(f"  {stage}: {total}/{total} done\n")
            return
        if not finished and now - self.last < 0.1:
            return
        self.last = now
        filled = int(self.width * done / total) if total else 0
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r  {stage:<24} [{bar}] {done}/{total}")
        if finished:
            self.stream.write("\n")
        self.stream.flush()

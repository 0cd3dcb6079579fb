"""The commands' terminal output: `echo` from `dpspec.report.terminal`, where plugins' commands get it too."""

from __future__ import annotations

from dpspec.report.terminal import echo

__all__ = ["echo"]

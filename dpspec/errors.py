"""User-facing errors.

Anything a user can cause (a bad spec, bad data, an impossible conversion) is raised as one
of these, so the CLI can print it without a traceback and exit with status 1.
"""
from __future__ import annotations

import attrs


class DpspecError(Exception):
    """Base class: an error the user must fix; never shown as a traceback."""


@attrs.frozen
class Diagnostic:
    """One problem at one place in a spec file."""

    message: str
    line: int | None = None
    column: int | None = None
    severity: str = "error"
    hint: str | None = None


class SpecError(DpspecError):
    """One or more problems in a .dps file, each with a location."""

    def __init__(self, diagnostics, path: str | None = None, text: str | None = None):
        if isinstance(diagnostics, (str, Diagnostic)):
            diagnostics = [diagnostics]
        self.diagnostics = [d if isinstance(d, Diagnostic) else Diagnostic(str(d)) for d in diagnostics]
        self.path = path
        self.text = text
        super().__init__(self.render())

    def render(self) -> str:
        from dpspec.language.diagnostics import render_diagnostics

        return render_diagnostics(self.diagnostics, self.path, self.text)


class DataError(DpspecError):
    """Confidential data that contradicts the domain: names file, table, column, rows, values."""


class ConversionError(DpspecError):
    """A budget conversion that does not exist (for example approximate DP to pure DP)."""


class MechanismError(DpspecError):
    """A mechanism could not run, or its output broke a guarantee (e.g. an invariant moved)."""

"""User-facing errors.

Anything a user can cause (a bad spec, bad data, an impossible conversion) is raised as one
of these, so the CLI can print it without a traceback and exit with status 1.
"""

from __future__ import annotations

import attrs

from dpspec import line_ends


class DpspecError(Exception):
    """Base class: an error the user must fix; never shown as a traceback."""


@attrs.frozen
class Diagnostic:
    """One problem at one place in a spec file.

    path (API 1.6): where in the mechanism block the problem is, as keys and list indices, e.g.
    ("tables", "t1", "details", 2); a plugin gives the path instead of a line, and the core
    (`dpspec.api.located`) fills in the line and column where that value is written."""

    message: str
    line: int | None = None
    column: int | None = None
    severity: str = "error"
    hint: str | None = None
    path: tuple = attrs.field(default=(), converter=tuple)


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
        return render_diagnostics(self.diagnostics, self.path, self.text)


class DataError(DpspecError):
    """Confidential data that contradicts the domain: names file, table, column, rows, values.

    Data that break a construct the spec writes (a structural zero, an invariant, an equality
    target) also cite where the spec writes it: `places` are Diagnostics whose message says what
    is written there ("the structural zero 'nurse_nva_0'"), `path` and `text` the spec's. The
    message then ends with one note per place (file:line:column, the line and a caret, as a
    SpecError shows its own); `diagnostics` gives the first place as the error's location and
    the others as notes, which `--json`'s error document carries as a SpecError's. A
    DataError without places is exactly what it was (its message alone, no diagnostics)."""

    def __init__(self, message: str, places=(), path: str | None = None, text: str | None = None):
        self.message = message
        self.places = [d if isinstance(d, Diagnostic) else Diagnostic(str(d)) for d in places]
        self.path = path
        self.text = text
        super().__init__(self.render())

    @property
    def diagnostics(self) -> list[Diagnostic] | None:
        located = [d for d in self.places if d.line is not None]
        if not located:
            return None
        first = located[0]
        return [
            Diagnostic(self.message, first.line, first.column, hint=f"{first.message} is written here"),
            *(Diagnostic(f"{d.message} is written here", d.line, d.column, severity="note") for d in located[1:]),
        ]

    def render(self) -> str:
        located = [
            Diagnostic(f"{d.message} is written here", d.line, d.column, severity="note")
            for d in self.places
            if d.line is not None
        ]
        if not located:
            return self.message
        return self.message + "\n" + render_diagnostics(located, self.path, self.text)


class ConversionError(DpspecError):
    """A budget conversion that does not exist (for example approximate DP to pure DP)."""


class MechanismError(DpspecError):
    """A mechanism could not run, or its output broke a guarantee (e.g. an invariant moved)."""


def render_diagnostics(diagnostics, path: str | None, text: str | None) -> str:
    """`FILE:LINE:COL: error: MESSAGE` with a caret excerpt, per diagnostic (an error renders itself,
    so this lives with the errors, below the language that raises them)."""
    lines = line_ends.lines(text) if text else []  # the lines the grammar counts
    out = []
    for d in sorted(diagnostics, key=lambda d: (d.line or 0, d.column or 0)):
        where = path or "<spec>"
        if d.line:
            where += f":{d.line}:{d.column or 1}"
        message = d.message
        if d.hint:
            message += f"; {d.hint}"
        out.append(f"{where}: {d.severity}: {message}")
        if d.line and 0 < d.line <= len(lines):
            source = lines[d.line - 1].replace("\t", " ")
            out.append(f"    {source}")
            out.append("    " + " " * max((d.column or 1) - 1, 0) + "^")
    return "\n".join(out)

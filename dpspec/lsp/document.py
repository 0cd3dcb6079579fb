"""One open document: its best IR and its problems, from dpspec's own parser and checker.

A half-typed file does not parse, yet the editor still wants its tables and columns: when the
whole text fails, the lines holding syntax errors (else their top-level sections) are blanked,
line numbers kept, and the rest is parsed again, so the line being typed does not hide the
others. The last spec that parsed is kept as a fallback for names.
"""

from __future__ import annotations

import os

import attrs

from dpspec import ir
from dpspec.errors import Diagnostic, DpspecError, SpecError, DataError
from dpspec.lsp import text as tx
from dpspec.language.parser import parse
from dpspec.contract import plugins
from dpspec.check.checker import check
from dpspec.budget.program import load_program
from dpspec.budget.bounds import bound_problems


@attrs.frozen
class Problem:
    """A diagnostic placed in this document (0-based line, columns [start, end))."""

    line: int
    start: int
    end: int
    message: str
    severity: str = "error"
    hint: str | None = None


@attrs.define
class Analysis:
    """A document's problems, and its IR for hovers and completion. When the text does not
    parse, the IR of the sections that do is recovered on first use, not before the
    diagnostics are published: typing must not wait for it."""

    text: str
    path: str | None
    parsed: bool  # the whole text parsed
    problems: list[Problem]
    good: ir.Spec | None = None  # this text's spec, else the last one that parsed
    _syntax: SpecError | None = None  # the syntax error to recover from
    _recovered: ir.Spec | None = None

    @property
    def spec(self) -> ir.Spec | None:
        """The whole text's IR, or the sections that parse, or the last spec that parsed."""
        if self.parsed:
            return self.good
        if self._syntax is not None:
            self._recovered, self._syntax = _salvage(self.text, self.path, self._syntax), None
        return self._recovered or self.good


def _parse(text: str, path: str | None) -> ir.Spec:

    return parse(text, path)


def _salvage(text: str, path: str | None, err: SpecError) -> ir.Spec | None:
    """The IR of what parses: first without the lines holding syntax errors (the line being
    typed), else without the sections holding them; line numbers are kept either way."""
    return _without(text, path, err, _error_lines) or _without(text, path, err, _error_sections)


def _error_lines(lines: list[str], errors) -> set[int]:
    """The line of each error, or the line before it when the error is the first token of its
    line: `table p unit person in` fails at the next line's `}`, yet the line being typed is
    the unfinished one."""
    out = set()
    for d in errors:
        line = d.line - 1
        if line >= len(lines):
            continue
        if not lines[line][: max((d.column or 1) - 1, 0)].strip():
            line = next((i for i in range(line - 1, -1, -1) if lines[i].strip()), line)
        out.add(line)
    return out


def _error_sections(lines: list[str], errors) -> set[int]:
    """Every line of the sections the errors are in (or trail: an unclosed brace fails at the end)."""
    spans = tx.sections("\n".join(lines))
    bad = {d.line - 1 for d in errors}
    hit = {max((s for s in spans if s.start <= b), key=lambda s: s.start, default=None) for b in bad} - {None}
    return {i for s in hit for i in range(s.start, s.end)}


def _without(text: str, path: str | None, err: SpecError, blank) -> ir.Spec | None:
    """Parse again with the lines `blank(lines, located errors)` emptied, a few rounds at most (a blanked part
    may have hidden an error after it)."""
    lines = text.split("\n")
    for _ in range(4):
        drop = blank(lines, [d for d in err.diagnostics if d.line]) - {i for i, line in enumerate(lines) if not line}
        if not drop:  # nothing left to blank (an error before the first section)
            return None
        for i in drop:
            lines[i] = ""
        try:
            return _parse("\n".join(lines), path)
        except SpecError as again:
            err = again
        except RecursionError:
            return None
    return None


def _placed(d: Diagnostic, text: str) -> Problem:
    if d.line is None:
        return Problem(0, 0, len(tx.line_of(text, 0)), d.message, d.severity, d.hint)
    line, column = d.line - 1, max((d.column or 1) - 1, 0)
    return Problem(line, column, tx.token_end(text, line, column), d.message, d.severity, d.hint)


def _include_line(text: str, path: str) -> tuple[int, int]:
    """(line, column) of the `include` naming `path` (a problem in an included spec shows there)."""
    name = os.path.basename(path)
    for i, line in enumerate(text.split("\n")):
        if "include" in line and name in line:
            return i, line.find('"') if '"' in line else line.find("include")
    return 0, 0


def _spec_problems(err: SpecError, text: str, path: str | None) -> list[Problem]:
    if err.path and (path is None or os.path.abspath(err.path) != os.path.abspath(path)):  # from an included spec
        line, column = _include_line(text, err.path)
        out = []
        for d in err.diagnostics:
            where = f"{os.path.basename(err.path)}:{d.line}: " if d.line else f"{os.path.basename(err.path)}: "
            out.append(Problem(line, column, tx.token_end(text, line, column), where + d.message, d.severity, d.hint))
        return out
    return [_placed(d, text) for d in err.diagnostics]


def plugin_problems(text: str) -> list[Problem]:
    """Plugins that failed to load, as warnings on every document's first line (the server stays up)."""

    width = len(tx.line_of(text, 0))
    out = [
        Problem(
            0,
            0,
            width,
            f"plugin '{name}' failed to load: {why}; its mechanisms, parameters and audit rules are unavailable",
            "warning",
        )
        for name, why in plugins.failures()
    ]
    try:
        plugins.mechanisms()
    except Exception as exc:  # two plugins registering one name, or a hook that raises
        out.append(Problem(0, 0, width, f"the mechanism plugins could not be listed: {exc}", "warning"))
    return out


def _check(spec: ir.Spec) -> tuple:
    """The spec's warnings (a missing data file); raises for its errors."""
    if spec.program is not None:
        load_program(spec)
        return ()

    return check(spec).warnings


def _bound_problems(spec: ir.Spec, text: str, path: str | None) -> list[Problem]:
    """Each declared budget bound the mechanism does not meet, at its line (as `dpspec check`).
    A budget that needs data the editor cannot read (no file yet) is not judged here."""

    try:
        found = bound_problems(spec)
    except DataError:
        return []
    return _spec_problems(SpecError(found, spec.path, spec.text), text, path) if found else []


def analyse(text: str, path: str | None, previous: ir.Spec | None = None) -> Analysis:
    """Parse and check `text`; never raises. `previous`: the last spec that parsed (fallback)."""
    problems = plugin_problems(text)
    try:
        spec = _parse(text, path)
    except SpecError as err:
        problems += _spec_problems(err, text, path)
        return Analysis(text, path, False, problems, previous, err)
    except RecursionError:
        problems.append(Problem(0, 0, 0, "the input is nested too deeply to process"))
        return Analysis(text, path, False, problems, previous)
    try:
        problems += [_placed(d, text) for d in _check(spec)]
        problems += _bound_problems(spec, text, path)
    except SpecError as err:
        problems += _spec_problems(err, text, path)
    except DpspecError as err:
        problems.append(Problem(0, 0, len(tx.line_of(text, 0)), str(err)))
    except Exception as exc:  # a bug in dpspec or a plugin's check(): shown, and the server lives on
        problems.append(
            Problem(
                0,
                0,
                len(tx.line_of(text, 0)),
                f"internal error while checking ({type(exc).__name__}: {exc}); "
                "this is a bug in dpspec or in a plugin, please report it",
            )
        )
    return Analysis(text, path, True, problems, spec)

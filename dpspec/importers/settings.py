"""One configuration setting with where it was read, and the account of those an importer did not apply.

An importer never drops a setting silently: each one it reads is either applied (it became part
of the spec), set aside as operational (it changes how a run is executed, logged or written, not
what is measured or how much noise it gets), or not understood. The last two are written into the
spec as comments, and the ones not understood are also printed on stderr, so a reader of either
sees what the spec does not say.
"""

from __future__ import annotations

import json
from fractions import Fraction

import attrs

from dpspec.errors import Diagnostic, SpecError


@attrs.frozen
class Setting:
    section: str  # as written
    key: str  # as written
    value: object
    file: str
    line: int | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def shown(self) -> str:
        value = self.value if isinstance(self.value, str) and self.section else _json(self.value)  # JSON as JSON
        value = " ".join(str(value).split())
        if len(value) > 160:
            value = value[:157] + "..."
        return f"[{self.section}] {self.key} = {value}" if self.section else f"{self.key} = {value}"


def _json(value) -> str:
    return json.dumps(value)


def problem(setting_or_file, message: str, key: str | None = None, line: int | None = None) -> SpecError:
    """A user error naming the configuration file and the key (and its line when known)."""
    if isinstance(setting_or_file, Setting):
        s = setting_or_file
        name = f"[{s.section}] {s.key}" if s.section else s.key
        return SpecError([Diagnostic(f"{name}: {message}", s.line, 1 if s.line else None)], s.file)
    name = f"{key}: " if key else ""
    return SpecError([Diagnostic(f"{name}{message}", line, 1 if line else None)], setting_or_file)


@attrs.define
class Account:
    """What an importer did with each setting it read."""

    operational: list = attrs.field(factory=list)  # (Setting, why)
    unknown: list = attrs.field(factory=list)  # (Setting, why)

    def set_aside(self, setting: Setting, why: str) -> None:
        self.operational.append((setting, why))

    def not_understood(self, setting: Setting, why: str = "not understood by this importer") -> None:
        self.unknown.append((setting, why))

    def comments(self) -> list[str]:
        out = []
        if self.unknown:
            out.append("# Settings this importer does not understand (NOT applied; check what each one does):")
            out += [f"#   {s.where()}: {s.shown()}  ({why})" for s, why in self.unknown]
        if self.operational:
            out.append("# Operational settings (how the run was executed, logged, solved or written; no bearing")
            out.append("# on the domain, unit, invariants, premetric or budget):")
            out += [f"#   {s.where()}: {s.shown()}" for s, _ in self.operational]
        return out

    def stderr_lines(self) -> list[str]:
        out = [
            f"warning: {s.where()}: {s.shown()}: {why}; kept as a comment in the spec, not applied"
            for s, why in self.unknown
        ]
        if self.operational:
            out.append(
                f"note: {len(self.operational)} operational setting(s) (logging, solver, paths, output) are listed "
                "as comments in the spec"
            )
        return out


def fraction(setting: Setting, text=None):
    """An exact number from '339/542', '0.1', '1e-10' or a JSON number (a float as its decimal)."""
    value = setting.value if text is None else text
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise problem(setting, f"expected a number, got {_json(value) if not isinstance(value, str) else value!r}")
    try:
        out = Fraction(repr(value)) if isinstance(value, float) else Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        raise problem(setting, f"cannot read {str(value).strip()!r} as a number") from None
    return out


def shown_fraction(value) -> str:
    """A Fraction as the spec writes it: a decimal when it has a short one, else num/den."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    twos = fives = 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    if d == 1 and max(twos, fives) <= 12:
        digits = max(twos, fives)
        text = f"{value.numerator * 10**digits // value.denominator}"
        sign = "-" if text.startswith("-") else ""
        text = text.lstrip("-").rjust(digits + 1, "0")
        return f"{sign}{text[:-digits]}.{text[-digits:]}".rstrip("0").rstrip(".")
    return f"{value.numerator}/{value.denominator}"

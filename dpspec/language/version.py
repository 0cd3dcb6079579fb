"""The .dps language's version: the optional first line `language 1.0`, and upgrades.

A file without the line is read as language 1.0, the version of dpspec 0.1's files, forever. A
minor version only adds constructs, so an older file means the same thing to a newer dpspec; a
file written for a newer version than this dpspec reads is refused with both versions named,
before its (perhaps unknown) constructs are parsed. `dpspec fmt --upgrade` rewrites a file to
the current version through `UPGRADES`, one step per version; none is needed yet, so today it
changes nothing, but the path exists before the first step does (docs/guides/compatibility.md).
"""

from __future__ import annotations

import re

from dpspec import line_ends
from dpspec._version import __version__

LANGUAGE_VERSION = "1.1"  # 1.1: `category values from "FILE"` and `public { keys "FILE" released ... }`
UNVERSIONED = "1.0"  # what a file without a version line is written in
_LINE = re.compile(r"language[ \t]+(\S+)")
_VERSION = re.compile(r"^(\d+)\.(\d+)$")

# version -> a function of the file's text upgrading it from that version to the next one
UPGRADES: dict = {}


def _parts(version: str) -> tuple[int, int]:
    m = _VERSION.match(version)
    return int(m.group(1)), int(m.group(2))


def declared(text: str) -> tuple[str, int] | None:
    """(version, line number) of the file's version line, if its first statement is one."""
    for number, line in enumerate(line_ends.lines(text), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        m = _LINE.match(stripped)
        return (m.group(1), number) if m else None
    return None


def version_problem(text: str) -> tuple[str, int] | None:
    """(message, line) when the file declares a version this dpspec cannot read, else None."""
    found = declared(text)
    if found is None:
        return None
    version, line = found
    if not _VERSION.match(version):
        return (
            f"'{version}' is not a language version: the first line `language MAJOR.MINOR` names the .dps "
            f"version a file is written in (this dpspec reads up to {LANGUAGE_VERSION})",
            line,
        )
    if _parts(version) > _parts(LANGUAGE_VERSION):
        return (
            f"this file is written in .dps language version {version}, newer than this dpspec ({__version__}) "
            f"reads (language version {LANGUAGE_VERSION}); upgrade dpspec to read it",
            line,
        )
    return None


def upgrade(text: str) -> str:
    """The file's text rewritten to LANGUAGE_VERSION, one step per version; unchanged when it is
    already current (every file today: the language has had one version)."""
    found = declared(text)
    version = found[0] if found else UNVERSIONED
    while _parts(version) < _parts(LANGUAGE_VERSION):
        step = UPGRADES.get(version)
        if step is None:  # no construct changed meaning between these versions
            break
        text, version = step(text)
    return text

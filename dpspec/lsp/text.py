"""Positions in a spec's text: words under the cursor, top-level sections, the enclosing braces.

The editor asks about half-typed text that does not parse, so these work on the raw text with
the same lexical rules as the grammar (strings, `#` and `//` comments, names), never the IR.
Lines and columns here are 0-based, as in LSP.
"""

from __future__ import annotations

import re

import attrs

from dpspec.language.parser import _SECTION_START  # the parser's own list of section keywords

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN_AT = re.compile(r'"(?:[^"\\\n]|\\.)*"?|[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9.eE+-]*|\S')
_SKIP_OR_BRACE = re.compile(r'"(?:[^"\\\n]|\\.)*"?|#[^\n]*|//[^\n]*|[{}]')


def line_of(text: str, line: int) -> str:
    lines = text.split("\n")
    return lines[line] if 0 <= line < len(lines) else ""


def offset_of(text: str, line: int, character: int) -> int:
    """The string offset of an LSP position, clamped to the text."""
    start = 0
    for _ in range(max(line, 0)):
        nl = text.find("\n", start)
        if nl < 0:
            return len(text)
        start = nl + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    return min(start + max(character, 0), end)


def word_at(text: str, line: int, character: int) -> tuple[str, int, int] | None:
    """(word, start, end) columns of the name under or just before the cursor."""
    source = line_of(text, line)
    for m in WORD.finditer(source):
        if m.start() <= character <= m.end():
            return m.group(), m.start(), m.end()
    return None


def string_at(text: str, line: int, character: int) -> str | None:
    """The body of the quoted string under the cursor."""
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', line_of(text, line)):
        if m.start() <= character <= m.end():
            return m.group(1).replace('\\"', '"').replace("\\\\", "\\")
    return None


def token_end(text: str, line: int, column: int) -> int:
    """Where the token starting at `column` ends (a diagnostic underlines the whole token)."""
    source = line_of(text, line)
    m = _TOKEN_AT.match(source, column) if column < len(source) else None
    if m is None:
        return max(len(source), column + 1) if column >= len(source) else column + 1
    return m.end()


def code_before(text: str, line: int, character: int) -> str:
    """The current line up to the cursor, its comment removed."""
    head = line_of(text, line)[:character]
    return re.sub(r'(#|//)[^"]*$', "", head)


@attrs.frozen
class Section:
    """One top-level section: its keyword and its lines [start, end) (trailing blanks dropped)."""

    keyword: str
    start: int
    end: int


def sections(text: str) -> list[Section]:
    """Top-level sections, each starting at a line that begins (column 1) with a section keyword,
    the rule the parser uses to resume after a syntax error."""
    lines = text.split("\n")
    starts = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _SECTION_START.match(line))]
    out = []
    for n, (start, keyword) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith(("#", "//"))):
            end -= 1
        out.append(Section(keyword, start, end))
    return out


def enclosing(text: str, offset: int) -> list[str]:
    """The headers of the braces open at `offset`, outermost first: for each `{`, the text of its
    line before it ("mechanism topdown", "table persons unit person in households by hh")."""
    stack: list[str] = []
    for m in _SKIP_OR_BRACE.finditer(text, 0, offset):
        token = m.group()
        if token == "{":
            line_start = text.rfind("\n", 0, m.start()) + 1
            header = text[line_start : m.start()]
            inner = max(header.rfind("{"), header.rfind("}"))
            stack.append(header[inner + 1 :].strip())
        elif token == "}" and stack:
            stack.pop()
    return stack

"""Syntax summaries read from `grammar/dps.lark`, so the language reference cannot drift from the parser.

The reference page names grammar rules in markers (`<!-- syntax: domain table column -->`);
each marker becomes the rules' own text. `uncovered` lists the rules no marker names, so the
build fails when a construct is added to the grammar without being documented.
"""

from __future__ import annotations

import re
from pathlib import Path

GRAMMAR = Path(__file__).resolve().parents[2] / "grammar" / "dps.lark"
MARKER = re.compile(r"^[ \t]*<!--\s*syntax:\s*([^>]*?)\s*-->[ \t]*$", re.M)  # alone on its line
_DEFINITION = re.compile(r"^[?!]?([A-Za-z_][A-Za-z0-9_]*)(\.[0-9]+)?\s*:(.*)$")


def read_rules(path: Path = GRAMMAR) -> dict[str, str]:
    """name -> its definition as written (aliases `-> x` and comments removed), in file order."""
    rules: dict[str, list[str]] = {}
    current = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = re.sub(r"\s*//.*$", "", raw).rstrip()
        if not line.strip() or line.lstrip().startswith("%"):
            current = None if not line.strip() else current
            continue
        match = _DEFINITION.match(line)
        if match and not raw[0].isspace():
            current = match.group(1)
            rules[current] = [match.group(3).strip()]
        elif current is not None and line.lstrip().startswith("|"):
            rules[current].append(line.strip())
    return {name: _clean(name, parts) for name, parts in rules.items()}


def _clean(name: str, parts: list[str]) -> str:
    parts = [re.sub(r"\s*->\s*[A-Za-z_]+\s*$", "", p) for p in parts]
    first, rest = parts[0], parts[1:]
    pad = " " * len(name)
    lines = [f"{name} : {first}" if first else f"{name} :"]
    lines += [f"{pad} {p}" for p in rest]
    return "\n".join(lines)


def summary(names: list[str], rules: dict[str, str] | None = None) -> str:
    """A fenced block holding the named rules' definitions; an unknown name is an error."""
    rules = rules if rules is not None else read_rules()
    missing = [n for n in names if n not in rules]
    if missing:
        raise ValueError(f"the grammar has no rule named {', '.join(missing)} (grammar/dps.lark)")
    body = "\n".join(rules[n] for n in names)
    return f"```text\n{body}\n```"


def expand(markdown: str, rules: dict[str, str] | None = None) -> str:
    """Replace every syntax marker with the rules it names."""
    rules = rules if rules is not None else read_rules()
    return MARKER.sub(lambda m: summary(m.group(1).split(), rules), markdown)


def uncovered(markdown: str, rules: dict[str, str] | None = None) -> list[str]:
    """Grammar rules and terminals that no marker in `markdown` names (`start` and the lexical
    terminals shared by every rule are covered by the page's lexical section marker too)."""
    rules = rules if rules is not None else read_rules()
    named = {n for m in MARKER.finditer(markdown) for n in m.group(1).split()}
    return [n for n in rules if n not in named]


def full_grammar_page(rules: dict[str, str] | None = None) -> str:
    """The whole grammar, rule by rule, as one generated page."""
    rules = rules if rules is not None else read_rules()
    return (
        "# Grammar\n\n"
        "Generated from `grammar/dps.lark`, the grammar the parser itself loads (Lark); "
        "the [language reference](reference.md) explains each construct. Terminals are in capitals; "
        "`?` marks an optional part, `*` any number, `+` one or more; comments start with `#` or `//`.\n\n"
        + summary(list(rules), rules)
        + "\n"
    )

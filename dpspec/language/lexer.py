"""A Pygments lexer for `.dps` files, so the documentation site (and any Pygments user) highlights specs.

Registered under the `pygments.lexers` entry point as `dps`; Markdown's ```dps fences find it
by that name. Its keywords are read from the grammar's own literals (`grammar/dps.lark`), so a
keyword added to the language is highlighted without touching this file.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from pygments.lexer import RegexLexer, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text


@functools.lru_cache(maxsize=1)
def grammar_keywords() -> tuple[str, ...]:
    """Every word the grammar spells out literally ("domain", "count", "hamming", ...)."""
    text = resources.files("dpspec.grammar").joinpath("dps.lark").read_text(encoding="utf-8")
    text = re.sub(r"//[^\n]*", "", text)
    found = set(re.findall(r'"([A-Za-z_]+)"', text))
    return tuple(sorted(found, key=lambda w: (-len(w), w)))


class DpsLexer(RegexLexer):
    """dpspec's specification language (`.dps`)."""

    name = "dpspec"
    aliases = ["dps", "dpspec"]
    filenames = ["*.dps"]
    mimetypes = ["text/x-dpspec"]
    url = "https://pypi.org/project/dpspec/"

    tokens = {
        "root": [
            (r"\s+", Text),
            (r"(#|//)[^\n]*", Comment.Single),
            (r'"([^"\\\n]|\\.)*"', String.Double),
            (words(grammar_keywords(), suffix=r"\b"), Keyword),
            (r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?", Number),
            (r"\.\.|<=|[<=>^*/+\-]", Operator),
            (r"[{}\[\](),:.]", Punctuation),
            (r"[A-Za-z_][A-Za-z0-9_]*", Name),
            (r".", Text),
        ],
    }

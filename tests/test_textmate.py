"""The TextMate grammar (editors/textmate/dps.tmLanguage.json) tokenizes every bundled spec as VS
Code would (vscode-textmate on Oniguruma, under node): no character is left unscoped or marked
invalid, and each keyword, string, number and comment that dpspec's own lexer (grammar/dps.lark)
finds gets the matching scope."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import lark
import pytest

pytestmark = pytest.mark.slow  # tokenizes every bundled spec under node

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TM = os.path.join(ROOT, "editors", "textmate")
GRAMMAR = os.path.join(TM, "dps.tmLanguage.json")
SPECS = sorted(glob.glob(os.path.join(ROOT, "specs", "**", "*.dps"), recursive=True))


@pytest.fixture(scope="module")
def tokens() -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.skip(
            "node is not installed: the TextMate grammar is checked with vscode-textmate under node "
            "(.ci/run installs nodejs and npm from Debian)"
        )
    if not os.path.isdir(os.path.join(TM, "node_modules", "vscode-textmate")):
        npm = shutil.which("npm")
        assert npm, "node is installed but npm is not: cannot install vscode-textmate (see .ci/run)"
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=TM, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [node, os.path.join(TM, "tokenize.js"), GRAMMAR, *SPECS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _dps_lexer() -> tuple[lark.Lark, list]:
    """The language's own grammar, keeping every token (keywords included) and the comments."""
    comments: list = []
    with open(os.path.join(ROOT, "grammar", "dps.lark"), encoding="utf-8") as fh:
        parser = lark.Lark(fh.read(), parser="lalr", keep_all_tokens=True, lexer_callbacks={"COMMENT": comments.append})
    return parser, comments


def _scopes_at(lines, line: int, start: int, end: int) -> list[list[str]]:
    return [scopes for a, b, scopes in lines[line] if a < end and b > start]


def test_every_bundled_spec_is_covered(tokens):
    assert len(SPECS) >= 30 and set(tokens) == set(SPECS)
    for path in SPECS:
        source = open(path, encoding="utf-8").read().split("\n")
        for n, (text, toks) in enumerate(zip(source, tokens[path])):
            for a, b, scopes in toks:
                where = f"{os.path.relpath(path, ROOT)}:{n + 1}:{a + 1} {text[a:b]!r}"
                assert not any(s.startswith("invalid") for s in scopes), where
                if text[a:b].strip():
                    assert len(scopes) > 1, f"{where}: no scope beyond source.dps"
            covered = sum(b - a for a, b, _ in toks)
            assert covered == len(text), f"{path}:{n + 1}: tokens cover {covered} of {len(text)} characters"


EXPECTED = {
    "STRING": "string.quoted.double.dps",
    "NUMBER": "constant.numeric.dps",
    "INT": "constant.numeric.dps",
    "RELATION": "constant.language.relation.dps",
    "PREMETRIC_KIND": "constant.language.premetric.dps",
    "COMMENT": "comment.line.",
}
KEYWORD_SCOPES = ("keyword.", "storage.type.dps", "constant.language.", "variable.language.")


def test_keywords_strings_numbers_and_comments_get_their_scopes(tokens):
    parser, comments = _dps_lexer()
    checked = {"keyword": 0, **{k: 0 for k in EXPECTED}}
    for path in SPECS:
        comments.clear()
        text = open(path, encoding="utf-8").read()
        tree = parser.parse(text)
        found = [t for t in tree.scan_values(lambda v: isinstance(v, lark.Token))] + list(comments)
        for tok in found:
            line, start = tok.line - 1, tok.column - 1
            spans = _scopes_at(tokens[path], line, start, start + len(str(tok).split("\n")[0]))
            where = f"{os.path.relpath(path, ROOT)}:{tok.line}:{tok.column} {str(tok)[:30]!r} ({tok.type})"
            assert spans, where
            pattern = parser.get_terminal(tok.type).pattern
            if tok.type in EXPECTED:
                want = EXPECTED[tok.type]
                assert all(any(s.startswith(want) for s in scopes) for scopes in spans), f"{where}: {spans}"
                checked[tok.type] += 1
            elif pattern.type == "str" and pattern.value.isalpha():  # a keyword of the language
                assert all(any(s.startswith(KEYWORD_SCOPES) for s in scopes) for scopes in spans), f"{where}: {spans}"
                checked["keyword"] += 1
    assert all(checked.values()), checked  # every kind occurs in the bundled specs


def test_the_vscode_extension_uses_this_grammar():
    ext = os.path.join(ROOT, "editors", "vscode")
    manifest = json.load(open(os.path.join(ext, "package.json"), encoding="utf-8"))
    [language] = manifest["contributes"]["languages"]
    [grammar] = manifest["contributes"]["grammars"]
    assert language["id"] == grammar["language"] == "dps" and ".dps" in language["extensions"]
    assert grammar["scopeName"] == json.load(open(GRAMMAR, encoding="utf-8"))["scopeName"] == "source.dps"
    with open(os.path.join(ext, grammar["path"]), encoding="utf-8") as a, open(GRAMMAR, encoding="utf-8") as b:
        assert a.read() == b.read()
    json.load(open(os.path.join(ext, language["configuration"]), encoding="utf-8"))
    assert os.path.isfile(os.path.join(ext, manifest["main"]))
    assert "vscode-languageclient" in manifest["dependencies"] and manifest["engines"]["vscode"]
    assert manifest["activationEvents"] == ["onLanguage:dps"]
    node = shutil.which("node")
    if node:  # the extension's script is valid JavaScript
        done = subprocess.run(
            [node, "--check", os.path.join(ext, manifest["main"])], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr

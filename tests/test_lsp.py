"""`dpspec lsp` driven as an editor drives it: a real client over stdio (tests/lsp_client.py)
speaks JSON-RPC with Content-Length framing to the `dpspec lsp` subprocess."""

from __future__ import annotations

import os

import pytest

from dpspec.contract import plugins
from dpspec.language.formatter import format_spec
from dpspec.language.parser import parse
from tests.key_files import keys_from
from tests.lsp_client import Client, uri

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")
SWAP = os.path.join(SPECS, "ma1940_swap.dps")
LARGEST = max(
    (os.path.join(d, f) for d, _, fs in os.walk(SPECS) for f in fs if f.endswith(".dps")), key=os.path.getsize
)


@pytest.fixture(scope="module")
def client():
    """One server for the module, as one editor session; it must shut down and exit cleanly."""
    c = Client(cwd=ROOT)
    c.capabilities = c.initialize(ROOT)["result"]["capabilities"]
    try:
        yield c
        assert c.close() == 0, c.stderr.decode(errors="replace")[-2000:]
        assert c.corrupted == []
    finally:
        c.kill()


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _pos(text: str, needle: str, offset: int = 0) -> dict:
    """The position of `needle` (plus `offset` characters) in `text`."""
    for i, line in enumerate(_lines(text)):
        if needle in line:
            return {"line": i, "character": line.index(needle) + offset}
    raise AssertionError(f"{needle!r} not in the text")


class _Doc:
    """One open document of the module's client, versioned as an editor versions it."""

    counter = 0

    def __init__(self, client, text: str, path: str = SWAP):
        _Doc.counter += 1
        self.client, self.version = client, 1  # a name of its own beside the spec, so includes resolve
        self.uri = uri(os.path.join(os.path.dirname(path), f"lsp_test_{_Doc.counter}_{os.path.basename(path)}"))
        self.text = text
        client.open(self.uri, text)
        self.diagnostics = client.diagnostics(self.uri, 1)

    def change(self, text: str) -> list:
        self.version += 1
        self.text = text
        self.client.change(self.uri, text, self.version)
        self.diagnostics = self.client.diagnostics(self.uri, self.version)
        return self.diagnostics

    def ask(self, method: str, needle: str | None = None, offset: int = 0, **extra):
        params = {"textDocument": {"uri": self.uri}, **extra}
        if needle is not None:
            params["position"] = _pos(self.text, needle, offset)
        reply = self.client.request(method, params)
        assert "error" not in reply, reply
        return reply["result"]


def _heavy_libraries(pid: int) -> list[str]:
    with open(f"/proc/{pid}/maps") as fh:
        maps = fh.read()
    return sorted(k for k in ("numpy", "pandas", "scipy", "pyarrow") if f"/{k}/" in maps)


def test_initialize_announces_the_features(client):
    for feature in (
        "hoverProvider",
        "completionProvider",
        "definitionProvider",
        "documentSymbolProvider",
        "documentFormattingProvider",
        "textDocumentSync",
    ):
        assert client.capabilities.get(feature), feature
    if os.path.exists(f"/proc/{client.proc.pid}/maps"):  # lazy imports: checking needs no array library
        assert _heavy_libraries(client.proc.pid) == []
        doc = _Doc(client, open(LARGEST).read(), LARGEST)
        assert doc.diagnostics == [] and _heavy_libraries(client.proc.pid) == []
        # nor does reading a zCDP budget line in plain words (the first hover a person makes)
        assert "an attacker's belief" in doc.ask("textDocument/hover", "budget rho", 2)["contents"]["value"]
        assert _heavy_libraries(client.proc.pid) == []


def test_diagnostics_are_the_checkers_at_the_right_ranges(client):
    text = (
        open(SWAP)
        .read()
        .replace("rate: 0.05", "rate: 1.5")
        .replace("count households by county, tenure", "count households by countyy, tenure")
    )
    doc = _Doc(client, text)
    by_message = {d["message"].split("\n")[0]: d for d in doc.diagnostics}
    rate = by_message["parameter 'rate': 1.5 is outside the allowed range [0, 1]"]
    assert rate["range"] == {"start": _pos(text, "rate: 1.5"), "end": _pos(text, "rate: 1.5", 4)}
    assert rate["severity"] == 1 and rate["source"] == "dpspec"
    county = by_message["unknown column 'countyy' in table 'households'"]
    assert "hint: did you mean 'county'?" in county["message"]
    assert county["range"]["start"]["line"] == _pos(text, "countyy")["line"]
    assert len(doc.diagnostics) == 2
    # fixing the text clears them
    assert doc.change(open(SWAP).read()) == []


def test_a_declared_bound_that_does_not_hold_is_an_error_at_the_budget_line(client):
    """As `dpspec check`: the budget is computed (swapping's b read from the data once, then kept)."""
    text = open(SWAP).read().replace("budget epsilon <= 16", "budget epsilon <= 10")
    doc = _Doc(client, text)
    [d] = doc.diagnostics
    assert d["message"].startswith("the declared bound 'epsilon <= 10' does not hold: the mechanism achieves 15.4294")
    assert d["range"]["start"] == _pos(text, "budget epsilon <= 10") and d["severity"] == 1
    assert doc.change(open(SWAP).read()) == []  # the bound of the bundled spec holds


def test_a_budget_too_small_for_the_exact_samplers_is_an_error_at_its_line(client):
    """As `dpspec check`: the noise scale the budget asks for is computed from the parameters."""
    path = os.path.join(SPECS, "acs_ma_hispanic_topdown.dps")
    good = open(path).read()
    text = good.replace("  rho: 0.1", "  rho: 1e-40", 1).replace("rho <= 0.1", "rho <= 1")
    doc = _Doc(client, text, path)
    [d] = doc.diagnostics
    assert d["message"].startswith("topdown: the noise of query") and "rho of at least about" in d["message"]
    assert d["range"]["start"] == _pos(text, "rho: 1e-40") and d["severity"] == 1
    assert doc.change(good) == []


def test_a_kng_mean_epsilon_no_dataset_could_draw_is_an_error_at_its_line(client):
    """The mean's scale depends on n from the data: the server, as `check`, refuses the worst case."""
    from tests.test_wasserstein_kng import MEAN

    good = MEAN.replace("CLASS", "independent").replace("MECH", "wasserstein_kng_mean")
    text = good.replace("  epsilon: 1\n", "  epsilon: 1e-20\n")
    doc = _Doc(client, text)
    [d] = doc.diagnostics
    assert d["message"].startswith("wasserstein_kng_mean: the mean's noise") and "widest at n = 1" in d["message"]
    assert d["range"]["start"] == _pos(text, "epsilon: 1e-20") and d["severity"] == 1
    assert doc.change(good) == []


def test_incremental_changes_are_applied(client):
    doc = _Doc(client, open(SWAP).read())
    at = _pos(doc.text, "0.05")
    doc.version += 1
    client.edit(doc.uri, (at["line"], at["character"]), (at["line"], at["character"] + 4), "1.5", doc.version)
    [d] = client.diagnostics(doc.uri, doc.version)
    assert d["message"] == "parameter 'rate': 1.5 is outside the allowed range [0, 1]"
    doc.version += 1
    client.edit(doc.uri, (at["line"], at["character"]), (at["line"], at["character"] + 3), "0.05", doc.version)
    assert client.diagnostics(doc.uri, doc.version) == []


def test_syntax_errors_are_located(client):
    text = open(SWAP).read().replace("  swap: county\n", "  swap: county: oops\n")
    doc = _Doc(client, text)
    [d] = doc.diagnostics
    assert d["message"].startswith("unexpected ':'")
    assert d["range"]["start"] == _pos(text, ": oops")


def test_columns_are_in_utf16_units(client):
    """LSP counts UTF-16 code units: a character beyond the BMP takes two."""
    text = open(SWAP).read().replace('spec "1940 Massachusetts household swapping"', 'spec "𝔘𝔘" stray')
    doc = _Doc(client, text)
    [d] = doc.diagnostics
    assert d["message"].startswith("unexpected 'stray'")
    assert d["range"]["start"] == {"line": _pos(text, "stray")["line"], "character": 12}  # 10 code points
    assert d["range"]["end"]["character"] == 17


def test_hover_answers_the_blocks_question(client):
    doc = _Doc(client, open(SWAP).read())
    domain = doc.ask("textDocument/hover", "domain census1940", 2)["contents"]
    assert domain["kind"] == "markdown" and "Who is protected?" in domain["value"]
    assert "one row per household" in domain["value"]
    unit = doc.ask("textDocument/hover", "unit households", 1)["contents"]["value"]
    assert "What is the unit of protection?" in unit and "changing one household" in unit
    budget = doc.ask("textDocument/hover", "budget epsilon", 1)["contents"]["value"]
    assert "How much protection?" in budget and "epsilon <= 16" in budget
    assert "belief" in budget and "posterior" in budget  # read in plain words, with its formula


def test_hover_reads_a_zcdp_budget_in_plain_words(client):
    text = open(os.path.join(SPECS, "pl94_production_topdown.dps")).read()
    doc = _Doc(client, text, os.path.join(SPECS, "pl94_production_topdown.dps"))
    reading = doc.ask("textDocument/hover", "budget rho", 8)["contents"]["value"]
    assert "rho" in reading and "at delta" in reading and "1% → at most" in reading


def test_hover_describes_a_parameter_from_the_plugin_schema(client):
    doc = _Doc(client, open(SWAP).read())
    rate = doc.ask("textDocument/hover", "rate: 0.05", 1)
    assert "range [0, 1]" in rate["contents"]["value"] and "mechanism `swap`" in rate["contents"]["value"]
    assert rate["range"]["start"] == _pos(doc.text, "rate: 0.05")
    mech = doc.ask("textDocument/hover", "mechanism swap", 11)["contents"]["value"]
    assert "Permutation swapping" in mech
    column = doc.ask("textDocument/hover", "size   : int", 1)["contents"]["value"]
    assert "int 1..20" in column
    assert doc.ask("textDocument/hover", "# The seed", 3) is None  # a comment: nothing to say


def _labels(result) -> list[str]:
    items = result["items"] if isinstance(result, dict) else result
    return [i["label"] for i in items]


def test_completion_offers_what_fits_the_place(client):
    base = open(SWAP).read()
    doc = _Doc(client, base.replace("mechanism swap {", "mechanism  {"))
    names = _labels(doc.ask("textDocument/completion", "mechanism  {", 10))
    assert sorted(names) == sorted(plugins.mechanisms())  # every installed plugin's mechanism
    doc.change(base.replace("budget epsilon <= 16", "budget epsilon <= 16\n"))
    assert {"spec", "domain", "invariants", "unit", "premetric", "budget"} <= set(
        _labels(doc.ask("textDocument/completion", position={"line": 41, "character": 0}))
    )
    doc.change(base.replace("premetric pure", "premetric "))
    assert _labels(doc.ask("textDocument/completion", "premetric ", 10)) == [
        "pure",
        "approximate",
        "zcdp",
        "renyi",
        "gdp",
    ]
    doc.change(base.replace("unit households : hamming", "unit households : "))
    assert _labels(doc.ask("textDocument/completion", "unit households : ", 18)) == ["hamming", "symdiff"]
    doc.change(base.replace("count households by county, tenure", "count households by "))
    assert _labels(doc.ask("textDocument/completion", "count households by ", 21)) == [
        "state",
        "county",
        "size",
        "tenure",
    ]
    doc.change(base.replace("  microdata households\n", "  microdata \n"))
    assert _labels(doc.ask("textDocument/completion", "  microdata ", 12)) == ["households"]


def test_completion_lists_a_mechanisms_parameters_and_their_values(client):
    base = open(SWAP).read()
    doc = _Doc(client, base.replace("  rate: 0.05\n", "  ra\n"))
    items = doc.ask("textDocument/completion", "  ra", 4)["items"]
    assert [i["label"] for i in items] == ["rate"]  # table, match and swap are set already
    assert "range [0, 1]" in items[0]["documentation"]["value"]
    doc.change(base.replace("  table: households", "  table: "))
    assert _labels(doc.ask("textDocument/completion", "  table: ", 9)) == ["households"]
    doc.change(base.replace("  swap: county", "  swap: "))
    assert "county" in _labels(doc.ask("textDocument/completion", "  swap: ", 8))


def test_go_to_definition_of_tables_columns_and_includes(client):
    doc = _Doc(client, open(SWAP).read())
    [table] = doc.ask("textDocument/definition", "unit households", 6)
    assert table["range"]["start"] == _pos(doc.text, "households unit household")
    [column] = doc.ask("textDocument/definition", "by county, tenure", 4)
    assert column["range"]["start"] == _pos(doc.text, "county : category")
    assert doc.ask("textDocument/definition", "premetric pure", 11) == []
    program = os.path.join(SPECS, "pl94_program", "program.dps")
    prog = _Doc(client, open(program).read(), program)
    [target] = prog.ask("textDocument/definition", "pl94_production_topdown", 3)
    assert target["uri"] == uri(os.path.join(SPECS, "pl94_production_topdown.dps"))
    assert prog.diagnostics == []  # the program composes: its included specs were checked
    included = prog.ask("textDocument/hover", "pl94_units_topdown", 2)["contents"]["value"]
    assert "-DP(" in included  # the included spec's title and notation


def test_a_problem_in_an_included_spec_shows_on_its_include_line(client, tmp_path):
    (tmp_path / "broken.dps").write_text(keys_from(open(SWAP).read(), SPECS).replace("rate: 0.05", "rate: 1.5"))
    program = tmp_path / "program.dps"
    text = 'program "two releases" {\n  include "broken.dps"\n}\n'
    program.write_text(text)
    client.open(uri(program), text)
    [d] = client.diagnostics(uri(program), 1)
    assert d["range"]["start"] == {"line": 1, "character": 10}
    assert "broken.dps:38: parameter 'rate': 1.5 is outside the allowed range" in d["message"]


def test_document_symbols_outline_the_spec(client):
    doc = _Doc(client, open(SWAP).read())
    symbols = doc.ask("textDocument/documentSymbol")
    assert [s["name"].split()[0] for s in symbols] == [
        "spec",
        "domain",
        "data",
        "invariants",
        "public",
        "unit",
        "premetric",
        "mechanism",
        "budget",
        "release",
    ]
    domain = symbols[1]
    [table] = domain["children"]
    assert table["name"] == "households" and [c["name"] for c in table["children"]] == [
        "state",
        "county",
        "size",
        "tenure",
    ]
    assert [p["name"] for p in symbols[7]["children"]] == ["table", "match", "swap", "rate"]


def test_formatting_is_dpspec_fmt(client):
    messy = open(SWAP).read().replace("premetric pure", "premetric    pure").replace("  rate: 0.05", "rate:5/100")
    doc = _Doc(client, messy)
    [edit] = doc.ask("textDocument/formatting", options={"tabSize": 2, "insertSpaces": True})
    assert edit["newText"] == format_spec(parse(messy))
    assert edit["range"]["start"] == {"line": 0, "character": 0}
    doc.change(format_spec(parse(messy)))
    assert doc.ask("textDocument/formatting", options={"tabSize": 2, "insertSpaces": True}) == []
    doc.change("domain d {")  # does not parse: nothing to format, and no error
    assert doc.ask("textDocument/formatting", options={"tabSize": 2, "insertSpaces": True}) == []


HALF_TYPED = [
    "",
    "d",
    "domain",
    "domain census {",
    "domain census {\n  table t unit person {\n    age: int 0..",
    "mechanism swap {\n  rate: 0.\n",
    "budget epsilon <=",
    "}}}}",
    "{" * 300,
    '"unterminated',
    "\x00\x01\x02 ü 𝔘 \t",
    "release { count households by",
    "unit households : hamming holds at most",
    "premetric approximate delta",
    "domain x {\n" * 40,
    "# only a comment",
    "budget epsilon <= 1e999999999",
    "budget rho <= 2^99999",
]


def test_half_typed_and_garbage_documents_never_break_the_server(client):
    base = open(SWAP).read()
    doc = _Doc(client, base)
    for n, text in enumerate(HALF_TYPED + [base[:k] for k in range(0, len(base), 97)]):
        diagnostics = doc.change(text)
        assert all(d["range"]["start"]["line"] >= 0 for d in diagnostics)
        end = {"line": text.count("\n"), "character": len(text.split("\n")[-1])}
        for method in ("textDocument/hover", "textDocument/completion", "textDocument/definition"):
            doc.ask(method, position=end)
            doc.ask(method, position={"line": 0, "character": 3})
        doc.ask("textDocument/documentSymbol")
        doc.ask("textDocument/formatting", options={"tabSize": 2, "insertSpaces": True})
    # a half-typed mechanism still completes from the last good domain
    doc.change(base)
    doc.change(base.replace("  swap: county\n", "  swap: \n").replace("budget epsilon <= 16", "budget eps"))
    assert "county" in _labels(doc.ask("textDocument/completion", "  swap: ", 8))
    assert doc.change(base) == []


@pytest.mark.slow  # the language server on a document of thousands of lines
def test_a_large_document(client):
    text = open(LARGEST).read()
    doc = _Doc(client, text, LARGEST)
    assert doc.diagnostics == []
    big = text + "\n" + "\n".join(f"# padding line {i}" for i in range(20_000))
    assert doc.change(big) == []
    assert len(doc.ask("textDocument/documentSymbol")) >= 8


def test_malformed_requests_get_errors_not_a_dead_server(client):
    bad = client.request("textDocument/hover", {"bogus": 1})
    assert bad["error"]["code"] == -32602  # invalid params
    assert client.request("dpspec/noSuchMethod", {})["error"]["code"] == -32601  # method not found
    client.send_raw(b"{this is not json")
    assert client.wait(None)["error"]["code"] == -32700  # parse error, id null
    client.send_raw(b'{"jsonrpc": "2.0", "id": "x", "method": "textDocument/completion", "params": null}')
    unknown = client.request(
        "textDocument/hover",
        {"textDocument": {"uri": "file:///never/opened.dps"}, "position": {"line": 99, "character": 99}},
    )
    assert "result" in unknown or "error" in unknown
    doc = _Doc(client, open(SWAP).read())  # still serving
    assert doc.diagnostics == []
    assert doc.ask("textDocument/hover", "domain census1940", 2) is not None


@pytest.mark.slow  # the language server on many mutated specs
def test_fuzzed_specs_never_break_the_analysis():
    """In-process, on scripts/fuzz.py's mutations of every bundled spec: each feature answers
    (possibly nothing) at every kind of place, and never raises."""
    import random

    from dpspec.lsp import complete, document, hover, navigate
    from tests.test_fuzz import fuzz

    rng = random.Random(26)
    for n in range(25):
        name = rng.choice(fuzz.SPECS)
        path = os.path.join(fuzz.SPECS_DIR, name)
        text = fuzz.mutate(fuzz.original(name), rng.choice(fuzz.KINDS), rng)
        a = document.analyse(text, path)
        assert a.parsed or a.problems, name
        lines = text.split("\n")
        for _ in range(4):
            line = rng.randrange(len(lines) + 1)
            character = rng.randrange(len(lines[line]) + 2) if line < len(lines) else 0
            hover.hover(text, a.spec, line, character)
            complete.complete(text, a.spec, line, character)
            navigate.definition(text, a.spec, path, line, character)
        navigate.symbols(text, a.spec)


PROBE = """
from fractions import Fraction
from dpspec.api import Mechanism, ParamSpec, ParameterSchema, hookimpl

class Probe(Mechanism):
    name = "lsp_probe"
    version = "0.1"
    description = "A third-party mechanism the language server has never heard of."
    parameters = ParameterSchema((
        ParamSpec("sharpness", "number", "how sharp the probe is", required=True, low=Fraction(1), high=Fraction(9)),
        ParamSpec("target", "table", "the probed table", required=True),
    ))

    def check(self, spec, params):
        print("a stray print on stdout", flush=True)  # must not corrupt the protocol's stream
        if params["sharpness"] == 7:
            raise RuntimeError("a bug in this plugin's check")
        return []

@hookimpl
def dpspec_mechanisms():
    return [Probe()]
"""


@pytest.mark.slow  # starts a second language server with test plugins
def test_third_party_parameters_and_a_broken_plugin(tmp_path):
    """A plugin installed beside dpspec is completed and described with no work in the server; a
    plugin that fails to import shows as a warning on the document, and the server lives on."""
    (tmp_path / "lsp_probe_plugin.py").write_text(PROBE)
    (tmp_path / "lsp_broken_plugin.py").write_text("raise ImportError('this plugin is broken on purpose')\n")
    dist = tmp_path / "dpspec_lsp_probe-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dpspec-lsp-probe\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dpspec]\nlsp_probe = lsp_probe_plugin\nlsp_broken = lsp_broken_plugin\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    c = Client(env=env, cwd=ROOT)
    try:
        c.initialize(ROOT)
        text = open(SWAP).read()
        text = text[: text.index("mechanism swap")] + "mechanism lsp_probe {\n  sh\n}\n"
        doc = _Doc(c, text)
        warnings = [d for d in doc.diagnostics if d["severity"] == 2]
        assert any(
            "plugin 'lsp_broken' failed to load" in d["message"] and "broken on purpose" in d["message"]
            for d in warnings
        )
        items = doc.ask("textDocument/completion", "  sh", 4)["items"]
        assert [i["label"] for i in items] == ["sharpness", "target"]
        assert "range [1, 9]" in items[0]["documentation"]["value"]
        doc.change(text.replace("  sh\n", "  sharpness: 12\n  target: households\n"))
        assert any("sharpness" in d["message"] and "[1, 9]" in d["message"] for d in doc.diagnostics)
        assert "how sharp the probe is" in doc.ask("textDocument/hover", "sharpness", 2)["contents"]["value"]
        doc.change(text.replace("  sh\n", "  sharpness: 7\n  target: households\n"))  # the plugin's check() raises
        assert any(
            "internal error while checking (RuntimeError: a bug in this plugin's check)" in d["message"]
            for d in doc.diagnostics
        )
        assert doc.ask("textDocument/hover", "sharpness", 2) is not None  # and the server still answers
        assert c.corrupted == []  # the plugin's print went to stderr, not into the protocol
        c.proc.stdin.close()  # the editor died without shutting the server down: it exits too
        assert c.proc.wait(20) == 0
    finally:
        c.kill()


def test_without_pygls_the_command_says_what_to_install(monkeypatch):
    import sys

    from click.testing import CliRunner

    from dpspec.cli.main import main

    monkeypatch.setitem(sys.modules, "pygls", None)  # as if pygls were not installed
    done = CliRunner().invoke(main, ["lsp"])
    assert done.exit_code == 1 and "pip install 'dpspec[lsp]'" in done.output


COMPLETIONS = [  # (text with | at the cursor, what must be offered, exactly or among others)
    ("budget |", ["epsilon", "rho", "delta", "mu"]),
    ("budget epsilon <= 1 |", ["with", "under", "by"]),
    ("budget epsilon <= 1 with |", ["epsilon", "rho", "delta", "mu"]),
    ("budget epsilon <= 1 under |", ["hamming", "symdiff"]),
    ("budget rho <= 1 by |", ["bs16", "cks20"]),
    ("premetric approximate |", ["delta", "on"]),
    ("tuned on |", ["confidential", "public", "synthetic", "none"]),
    ("domain d {\n  stage |\n}", ["raw", "collected", "edited", "imputed", "sampled", "tabulated", "finetuning"]),
    ("domain d {\n  |\n}", ["stage", "geography", "crosscut", "table"]),
    ("domain d {\n  table t unit person {\n    age: |\n  }\n}", ["category", "int", "bool"]),
    ("domain d {\n  table t unit person {\n    age: int 0..9 |\n  }\n}", ["nullable"]),
    ("domain d {\n  table t unit person {\n    a: category\n    b: category in |\n  }\n}", ["a"]),
    ("domain d {\n  table h unit household { hh: int 0..9 }\n  table p unit person in |\n}", ["h"]),
    ('program "p" {\n  |\n}', ["include", "parallel"]),
    ("invariants {\n  |\n}", ["count"]),
    ("public {\n  count t |\n}", ["by", "at"]),
    ("# a comment |", None),
    ('spec "a string |', []),
]


@pytest.mark.parametrize("marked, expected", COMPLETIONS)
def test_completion_contexts(marked, expected):
    """In-process: what each place of the language offers."""
    from dpspec.lsp import complete, document

    text = marked.replace("|", "")
    before = marked[: marked.index("|")]
    line, character = before.count("\n"), len(before.split("\n")[-1])
    labels = [i.label for i in complete.complete(text, document.analyse(text, None).spec, line, character)]
    if expected is None:
        assert "count" not in labels  # a comment is not code
    else:
        assert labels == expected


def test_hover_and_completion_know_the_declared_keys_words(client):
    base = open(SWAP).read()
    doc = _Doc(client, base)
    assert "declared public" in doc.ask("textDocument/hover", "values from", 2)["contents"]["value"]
    assert "never from the data" in doc.ask("textDocument/hover", '  keys "data/', 3)["contents"]["value"]
    doc.change(base.replace("    state  : category\n", "    state  : category \n"))
    assert _labels(doc.ask("textDocument/completion", "    state  : category ", 22)) == [
        "in",
        "values from",
        "nullable",
    ]
    doc.change(base.replace('  keys "data/ma1940', '  \n  keys "data/ma1940'))
    line = doc.text.splitlines().index("public {") + 1
    assert _labels(doc.ask("textDocument/completion", position={"line": line, "character": 2})) == ["count", "keys"]


def test_hover_and_completion_walk_topdowns_typed_recodes_queries_and_joint_tables():
    """In-process, on the bundled DHC households spec: TopDown's recodes, query shares and joint
    table are declared in its schema, so the language server knows their settings unaided."""
    from dpspec.lsp import complete, document
    from dpspec.lsp.hover import hover

    text = open(os.path.join(SPECS, "dhc_households_production_topdown_pr.dps")).read()
    lines = text.splitlines()

    def at(start, word, nth=1):
        line = [i for i, t in enumerate(lines) if t.strip().startswith(start)][nth - 1]
        return line, lines[line].index(word) + 1

    spec = document.analyse(text, None).spec
    line, col = at("of: tenvacgq", "of")
    assert "**of** (string; required), a setting of mechanism `topdown`" in hover(text, spec, line, col)
    line, col = at("detailed:", "detailed")  # a level's query share, inside its block of the queries
    assert "**detailed** (number)" in hover(text, spec, line, col)
    line, col = at("variables: sex, hhage", "variables")  # a joint table's own setting
    assert "**variables** (list of string; required)" in hover(text, spec, line, col)
    line, col = at("hhtype: [393]", "hhtype")  # a joint table's structural zero: one variable's categories
    assert "**hhtype** (list of number or string)" in hover(text, spec, line, col)
    blank = text.replace("      variables: sex, hhage", "      \n      variables: sex, hhage", 1)
    line = at("variables: sex, hhage", "variables")[0]
    labels = {i.label for i in complete.complete(blank, spec, line, 6)}
    assert {"table", "variables", "queries", "recodes", "structural_zeros"} <= labels
    blank = text.replace("      of: ten\n", "      \n      of: ten\n", 1)
    line = [i for i, t in enumerate(blank.splitlines()) if t.strip() == "of: ten"][0] - 1
    assert "of" in {i.label for i in complete.complete(blank, spec, line, 6)}  # a recode's own setting

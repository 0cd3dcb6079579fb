"""Parse .dps text into the IR.

Lark (LALR, contextual lexer) builds the parse tree from `grammar/dps.lark`; a Transformer turns
it into IR objects. Syntax errors become SpecError diagnostics with a plain-language list of
what was expected, never a Lark traceback.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import re
import sys
from fractions import Fraction
from importlib import resources

import attrs
import lark
from lark import Token, Transformer, v_args

from dpspec import ir, line_ends
from dpspec.language import eol_comments
from dpspec.errors import Diagnostic, SpecError
from dpspec.language.reading import NotRegularFile, open_regular
from dpspec.language.version import version_problem

MAX_BYTES = 5_000_000
MAX_NESTING = 50
MAX_NUMBER_BITS = 4096
MAX_DIGITS = 100  # digits in one number literal
MAX_EXPONENT = 400  # |e| in 1e400: beyond any meaningful parameter, and cheap to keep exact
MAX_MAGNITUDE = Fraction(int(sys.float_info.max))
MIN_MAGNITUDE = Fraction(1, 10**300)  # a non-zero parameter below this (rho = 1e-400) puts noise beyond floats


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    try:  # installed: the grammar ships inside the wheel as the dpspec.grammar package
        grammar = resources.files("dpspec.grammar").joinpath("dps.lark").read_text(encoding="utf-8")
    except ModuleNotFoundError:  # running from a source checkout
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # dpspec/language/ -> repo
        with open(os.path.join(here, "grammar", "dps.lark"), encoding="utf-8") as fh:
            grammar = fh.read()
    return lark.Lark(
        grammar,
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=False,
        lexer_callbacks={"COMMENT": _collect_comment},
        cache=_grammar_cache(grammar),
    )


def _grammar_cache(grammar: str):
    """Lark's analysed grammar, cached per user (building it is most of `dpspec check`'s time).

    The cache is a pickle, so it lives in the user's own cache folder (mode 0700), never in a
    shared temporary folder; its name carries the grammar's hash and lark's version."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "dpspec")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not os.access(folder, os.W_OK) or os.stat(folder).st_uid != os.getuid():
            return False
    except OSError:
        return False
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()[:16]
    return os.path.join(folder, f"grammar-{lark.__version__}-{digest}.cache")


_comments: list[Token] = []  # filled by the lexer during one parse (parsing is not reentrant)


def _collect_comment(token: Token) -> Token:
    _comments.append(token)
    return token


def _loc(meta) -> ir.Loc | None:
    if meta is None or getattr(meta, "empty", True):
        return None
    return ir.Loc(meta.line, meta.column)


def _tok_loc(tok: Token) -> ir.Loc:
    return ir.Loc(tok.line, tok.column)


def _string(tok: Token) -> str:
    body = str(tok)[1:-1]
    return body.replace('\\"', '"').replace("\\\\", "\\")


class _Section:
    """A top-level item tagged with the Spec field it fills."""

    def __init__(self, field: str, value, loc: ir.Loc | None, many: bool = False):
        self.field, self.value, self.loc, self.many = field, value, loc, many


@v_args(meta=True)
class _ToIR(Transformer):
    # ---- top level ----
    def start(self, meta, items):
        return items

    def language_line(self, meta, children):
        return _Section("language_version", str(children[0]), _loc(meta))

    def spec_title(self, meta, children):
        return _Section("title", _string(children[0]), _loc(meta))

    # ---- domain ----
    def domain(self, meta, children):
        name = str(children[0])
        rest = children[1:]
        description = None
        if rest and isinstance(rest[0], Token) and rest[0].type == "STRING":
            description = _string(rest[0])
            rest = rest[1:]
        stage = next((c[1] for c in rest if isinstance(c, tuple) and c[0] == "stage"), None)
        stages = [c for c in rest if isinstance(c, tuple) and c[0] == "stage"]
        geos = [c for c in rest if isinstance(c, ir.Geography)]
        tables = tuple(c for c in rest if isinstance(c, ir.Table))
        problems = []
        if len(stages) > 1:
            problems.append(Diagnostic("the domain declares its stage twice", stages[1][2].line, stages[1][2].column))
        if len(geos) > 1:
            problems.append(
                Diagnostic("the domain declares more than one geography", geos[1].loc.line, geos[1].loc.column)
            )
        # ---- geography components (crosscut) attach to the hierarchy ----
        cuts = [c for c in rest if isinstance(c, tuple) and c[0] == "crosscut"]
        if cuts and not geos:
            problems.append(
                Diagnostic("'crosscut' needs a geography hierarchy in the domain", cuts[0][2].line, cuts[0][2].column)
            )
        elif len(cuts) > 1:
            problems.append(Diagnostic("the domain declares 'crosscut' twice", cuts[1][2].line, cuts[1][2].column))
        elif cuts:
            geos[0] = attrs.evolve(geos[0], components=cuts[0][1], components_loc=cuts[0][2])
        same = [c for c in rest if isinstance(c, tuple) and c[0] == "same_as"]
        if len(same) > 1:
            problems.append(Diagnostic("the domain declares 'same as' twice", same[1][2].line, same[1][2].column))
        value = ir.Domain(
            name, description, stage, tables, geos[0] if geos else None, _loc(meta), same_as=same[0][1] if same else ()
        )
        section = _Section("domain", value, _loc(meta))
        section.problems = problems
        return section

    def stage(self, meta, children):
        return ("stage", str(children[0]), _loc(meta))

    def same_as(self, meta, children):
        return ("same_as", tuple(str(c) for c in children), _loc(meta))

    def crosscut(self, meta, children):
        return ("crosscut", tuple(str(c) for c in children), _loc(meta))

    def geography(self, meta, children):
        return ir.Geography(str(children[0]), tuple(str(c) for c in children[1:]), _loc(meta))

    def table(self, meta, children):
        name, unit = str(children[0]), str(children[1])
        parent = link = link_bound = None
        columns = []
        for c in children[2:]:
            if isinstance(c, tuple) and c and c[0] == "link":
                parent, link, link_bound = c[1], c[2], c[3]
            else:
                columns.append(c)
        return ir.Table(name, unit, tuple(columns), parent, link, _loc(meta), link_bound)

    def link(self, meta, children):
        bound = children[2] if len(children) > 2 else None
        return ("link", str(children[0]), str(children[1]), bound)

    def link_bound(self, meta, children):
        return int(children[0])

    def column(self, meta, children):
        nullable = any(isinstance(c, Token) and c.type == "NULLABLE" for c in children)
        return ir.Column(str(children[0]), children[1], nullable, _tok_loc(children[0]))

    def category_type(self, meta, children):
        keys = next((c[1] for c in children if isinstance(c, tuple) and c[0] == "keys_from"), None)
        names = [c for c in children if not isinstance(c, tuple)]
        return ir.ColumnType("category", parent=str(names[0]) if names else None, keys_from=keys)

    def key_source(self, meta, children):
        return ("keys_from", _string(children[0]))

    def enum_type(self, meta, children):
        return ir.ColumnType("enum", values=tuple(children))

    def int_type(self, meta, children):
        return ir.ColumnType("int", low=children[0], high=children[1])

    def bool_type(self, meta, children):
        return ir.ColumnType("bool")

    def pos_int(self, meta, children):
        return _whole(children[0], meta)

    def neg_int(self, meta, children):
        return -_whole(children[0], meta)

    def atom_name(self, meta, children):
        return str(children[0])

    def atom_string(self, meta, children):
        return _string(children[0])

    def atom_int(self, meta, children):
        return str(children[0])

    # ---- data ----
    def data_source(self, meta, children):
        return _Section(
            "data", ir.DataSource(str(children[0]), _string(children[1]), _loc(meta)), _loc(meta), many=True
        )

    # ---- where ----
    def count_query(self, meta, children):
        table = str(children[0])
        by, level = (), None
        for c in children[1:]:
            if isinstance(c, tuple) and c[0] == "by":
                by = c[1]
            elif isinstance(c, tuple) and c[0] == "at":
                level = c[1]
        return ir.CountQuery(table, by, level, _loc(meta))

    def by_clause(self, meta, children):
        return ("by", tuple(str(c) for c in children))

    def at_clause(self, meta, children):
        return ("at", str(children[0]))

    def invariants(self, meta, children):
        return _Section("invariants", tuple(children), _loc(meta), many=True)

    def public_item(self, meta, children):
        use = children[2] if len(children) > 2 else None
        return ir.PublicInfo(children[0], _string(children[1]), _loc(meta), use)

    def public_keys(self, meta, children):
        return ir.PublicKeys(_string(children[0]), _string(children[1]), _loc(meta))

    def public_use(self, meta, children):
        return str(children[0])

    def pufferfish(self, meta, children):
        return _Section("pufferfish", children[0], _loc(meta))

    def pufferfish_class(self, meta, children):
        return ir.Pufferfish(str(children[0]), tuple(children[1:]), _loc(meta))

    def public(self, meta, children):
        keys = tuple(c for c in children if isinstance(c, ir.PublicKeys))
        section = _Section(
            "public", tuple(c for c in children if not isinstance(c, ir.PublicKeys)), _loc(meta), many=True
        )
        section.extra = {"public_keys": keys}
        return section

    # ---- what ----
    def unit(self, meta, children):
        bound = children[2] if len(children) > 2 else None
        return _Section("unit", ir.Unit(str(children[0]), str(children[1]), bound, _tok_loc(children[0])), _loc(meta))

    def holds(self, meta, children):
        return ir.UnitBound(_whole(children[0], meta), str(children[1]))

    # ---- how ----
    def premetric(self, meta, children):
        kind = str(children[0])
        options, events = [], None
        for c in children[1:]:
            if isinstance(c, tuple) and c[0] == "events":
                events = c[1]
            else:
                options.append(c)
        return _Section("premetric", ir.Premetric(kind, tuple(options), events, _loc(meta)), _loc(meta))

    def premetric_option(self, meta, children):
        return (str(children[0]), children[1])

    def events(self, meta, children):
        return ("events", _string(children[0]))

    # ---- mechanism ----
    def mechanism(self, meta, children):
        return _Section("mechanism", ir.MechanismCall(str(children[0]), children[1], _loc(meta)), _loc(meta))

    def param_block(self, meta, children):
        return ir.ParamBlock(tuple(children), _loc(meta))

    def param(self, meta, children):
        return ir.Param(children[0], children[1], _loc(meta), getattr(meta, "value_positions", ()))

    def key(self, meta, children):
        return "*".join(str(c) for c in children)

    def key_string(self, meta, children):
        return _string(children[0])

    def string_value(self, meta, children):
        return _string(children[0])

    def name_list(self, meta, children):
        return tuple(ir.Name(str(c)) for c in children)

    def name_value(self, meta, children):
        return ir.Name(str(children[0]))

    def list_value(self, meta, children):
        items = []
        for c in children:
            if isinstance(c, tuple):
                items.extend(c)
            else:
                items.append(c)
        return tuple(items)

    # ---- arithmetic, exact ----
    def number(self, meta, children):
        return _literal(str(children[0]), meta)

    def neg(self, meta, children):
        return -children[0]

    def add(self, meta, children):
        return _bounded(children[0] + children[1], meta)

    def sub(self, meta, children):
        return _bounded(children[0] - children[1], meta)

    def mul(self, meta, children):
        return _bounded(children[0] * children[1], meta)

    def div(self, meta, children):
        if children[1] == 0:
            raise _ValueProblem("division by zero", meta)
        return _bounded(children[0] / children[1], meta)

    def pow(self, meta, children):
        base, exponent = children
        if exponent.denominator != 1 or abs(exponent) > 64:
            raise _ValueProblem("exponents must be whole numbers between -64 and 64", meta)
        if base == 0 and exponent < 0:
            raise _ValueProblem("division by zero", meta)
        bits = max(base.numerator.bit_length(), base.denominator.bit_length()) * abs(int(exponent))
        if bits > MAX_NUMBER_BITS:
            raise _ValueProblem("this number is too large to be a meaningful parameter", meta)
        return _bounded(base ** int(exponent), meta)

    # ---- how much ----
    def budget(self, meta, children):
        quantity, op, value = str(children[0]), str(children[1]), children[2]
        with_, relation, method = [], None, None
        for c in children[3:]:
            if c[0] == "with":
                with_.append((c[1], c[2]))
            elif c[0] == "under":
                relation = c[1]
            elif c[0] == "by":
                method = c[1]
        bound = ir.BudgetBound(quantity, op, value, tuple(with_), relation, method, _loc(meta))
        return _Section("budgets", (bound,), _loc(meta), many=True)

    def budget_with(self, meta, children):
        return ("with", str(children[0]), children[1])

    def budget_under(self, meta, children):
        return ("under", str(children[0]))

    def budget_method(self, meta, children):
        return ("by", str(children[0]))

    # ---- releases, tuning, programs ----
    def release(self, meta, children):
        return _Section("releases", tuple(children), _loc(meta), many=True)

    def release_microdata(self, meta, children):
        return ir.ReleaseItem("microdata", str(children[0]), None, _loc(meta))

    def release_count(self, meta, children):
        q = children[0]
        return ir.ReleaseItem("count", q.table, q, _loc(meta))

    def release_output(self, meta, children):
        return ir.ReleaseItem("output", str(children[0]), None, _loc(meta))

    def tuning(self, meta, children):
        note = _string(children[1]) if len(children) > 1 else None
        return _Section("tuning", ir.Tuning(str(children[0]), note, _loc(meta)), _loc(meta))

    def program(self, meta, children):
        return _Section("program", ir.Program(_string(children[0]), tuple(children[1:])), _loc(meta))

    def program_include(self, meta, children):
        return ir.ProgramPart((_string(children[0]),))

    def program_parallel(self, meta, children):
        label = next((c[1] for c in children if isinstance(c, tuple)), None)
        paths = tuple(p for c in children if isinstance(c, ir.ProgramPart) for p in c.paths)
        return ir.ProgramPart(paths, parallel=True, label=label)

    def parallel_label(self, meta, children):
        return ("label", _string(children[0]))

    def notes(self, meta, children):
        return _Section("notes", tuple(children), _loc(meta), many=True)

    def note(self, meta, children):
        key = ".".join(str(c) for c in children if c.type == "NAME")
        text = "\n".join(_string(c) for c in children if c.type == "STRING")
        return ir.Note(key, text, _loc(meta))


def _whole(token, meta) -> int:
    """A whole-number literal, refusing digit counts no parameter needs (and int() would reject)."""
    if len(token) > MAX_DIGITS:
        raise _ValueProblem(f"this number has {len(token)} digits; numbers in a spec have at most {MAX_DIGITS}", meta)
    return int(token)


def _literal(text: str, meta) -> Fraction:
    """An exact number literal, bounded before it is built: `1e-99999999` would take hours."""
    mantissa, _, exponent = text.lower().partition("e")
    digits = len(mantissa.replace(".", ""))
    if digits > MAX_DIGITS:
        raise _ValueProblem(f"this number has {digits} digits; numbers in a spec have at most {MAX_DIGITS}", meta)
    if exponent and (len(exponent.lstrip("+-").lstrip("0")) > 4 or abs(int(exponent)) > MAX_EXPONENT):
        raise _ValueProblem(
            f"the exponent of {text[:20]}{'...' if len(text) > 20 else ''} is too large; "
            f"numbers in a spec have exponents between -{MAX_EXPONENT} and {MAX_EXPONENT}",
            meta,
        )
    return _bounded(Fraction(text), meta)


def _bounded(value: Fraction, meta) -> Fraction:
    """Exact, but within floating point's range: budgets are accounted in floats downstream."""
    if (
        max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_NUMBER_BITS
        or abs(value) > MAX_MAGNITUDE
    ):
        raise _ValueProblem("this number is too large to be a meaningful parameter (at most about 1.8e308)", meta)
    if value and abs(value) < MIN_MAGNITUDE:
        raise _ValueProblem(
            "this number is too small to be a meaningful parameter (0, or at least 1e-300 in size)", meta
        )
    return value


class _ValueProblem(Exception):
    def __init__(self, message, meta):
        super().__init__(message)
        self.message = message
        self.meta = meta


_TERMINAL_NAMES = {
    "NAME": "a name",
    "STRING": "a quoted string",
    "INT": "a whole number",
    "NUMBER": "a number",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COLON": "':'",
    "COMMA": "','",
    "MORETHAN": "'>'",
    "RELATION": "a neighbor relation (hamming or symdiff)",
    "PREMETRIC_KIND": "a premetric (pure, approximate, zcdp, renyi or gdp)",
    "BOUND_OP": "'<=', '<' or '='",
    "NULLABLE": "'nullable'",
    "$END": "the end of the file",
}


def _describe_expected(expected) -> str:
    names = []
    for term in sorted(expected):
        if term in _TERMINAL_NAMES:
            names.append(_TERMINAL_NAMES[term])
            continue
        try:
            pattern = _parser().get_terminal(term).pattern
            if pattern.type == "str":
                names.append(f"'{pattern.value}'")
                continue
        except KeyError:
            pass
        names.append(term.lower())
    names = sorted(set(names))
    if len(names) > 16:
        return ", ".join(names[:16]) + ", ..."
    return ", ".join(names)


def _describe_token(token) -> str:
    if token.type == "$END":
        return "end of file"
    return f"'{str(token)[:30]}'"


def _syntax_diagnostic(err: lark.exceptions.LarkError) -> Diagnostic:
    if isinstance(err, lark.exceptions.UnexpectedToken):
        tok = err.token
        accepted = err.expected
        if getattr(err, "interactive_parser", None) is not None:
            try:  # the full set of terminals the parser state accepts, keywords included
                accepted = err.interactive_parser.accepts() or accepted
            except Exception:
                pass
        expected = _describe_expected(accepted)
        line = tok.line if tok.type != "$END" or tok.line else None
        return Diagnostic(
            f"unexpected {_describe_token(tok)}; expected {expected}",
            line or err.line,
            tok.column if tok.type != "$END" else err.column,
        )
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        char = err.char
        shown = repr(char) if not char.isprintable() else f"'{char}'"
        return Diagnostic(f"unexpected character {shown}", err.line, err.column)
    if isinstance(err, lark.exceptions.UnexpectedEOF):
        return Diagnostic(f"the file ends too early; expected {_describe_expected(err.expected)}")
    return Diagnostic(f"syntax error: {err}")


def read_source(path: str) -> str:
    """Read a spec file as UTF-8 text, turning every failure into a SpecError."""
    try:
        with open_regular(path) as fh:
            raw = fh.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise SpecError(f"the file is larger than {MAX_BYTES} bytes, the limit for a spec", path)
    except NotRegularFile:
        raise SpecError("not a regular file (a device, pipe or folder); a spec is read from a file", path) from None
    except OSError as exc:
        raise SpecError(f"cannot read the file: {exc.strerror or exc}", path) from None
    if b"\x00" in raw:
        raise SpecError("this is a binary file, not a .dps spec", path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError([Diagnostic(f"the file is not valid UTF-8 (byte {exc.start})", line, 1)], path) from None


def _nesting_problem(text: str) -> Diagnostic | None:
    depth = 0
    line = 1
    for ch in text:
        if ch in "{[(":
            depth += 1
            if depth > MAX_NESTING:
                return Diagnostic(f"brackets are nested more than {MAX_NESTING} deep", line, 1)
        elif ch in "}])":
            depth -= 1
        elif ch == "\n":
            line += 1
    return None


NOT_A_SPEC = (
    "this file is not a dpspec spec: it does not begin with a section (spec, program, domain, ...) "
    "or a comment; its contents are not shown"
)


def _at_first_token(text: str, err) -> bool:
    """Whether a syntax error sits on the file's first token (after blank and comment lines):
    then the file is not a spec, and echoing its first line could print a secret."""
    line, column = getattr(err, "line", None), getattr(err, "column", None)
    for number, content in enumerate(text.split("\n"), start=1):
        stripped = content.lstrip(" \t\r\ufeff")
        if stripped and not stripped.startswith("#"):
            return (line, column) == (number, len(content) - len(stripped) + 1)
    return False


_SECTION_WORDS = (
    "spec",
    "program",
    "domain",
    "data",
    "invariants",
    "unit",
    "premetric",
    "mechanism",
    "budget",
    "release",
    "public",
    "tuned",
    "notes",
)


def _misspelled_section(text: str, path: str | None) -> bool:
    """A .dps file whose first word is a near miss of a section keyword (`spex`): a spec with a
    typo, whose error (with its excerpt and suggestion) is worth showing."""
    word = re.match(r"\s*(?:#[^\n]*\n\s*)*([A-Za-z_]+)(?=[\s\"{])", text)
    return bool(
        (path is None or path.endswith(".dps"))
        and word
        and difflib.get_close_matches(word.group(1).lower(), _SECTION_WORDS, n=1, cutoff=0.7)
    )


MAX_TREE_DEPTH = 200  # a 500-term sum or 600 unary minus signs nest deeper than evaluation can follow


def _depth_problem(tree) -> Diagnostic | None:
    """The first place where the parse tree nests deeper than MAX_TREE_DEPTH, measured without
    recursion, so that a long expression is an error at its line and column, not a stack overflow."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            meta = getattr(node, "meta", None)
            line, column = (
                (getattr(meta, "line", None), getattr(meta, "column", None)) if meta is not None else (None, None)
            )
            return Diagnostic(
                f"this expression nests more than {MAX_TREE_DEPTH} levels deep (a very long sum or "
                "product, or many signs in a row), more than can be evaluated; write the value out",
                line,
                column,
            )
        stack.extend((child, depth + 1) for child in getattr(node, "children", ()) if isinstance(child, lark.Tree))
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_problem(text: str) -> Diagnostic | None:
    """Text handed to the API (never a file: read_source decodes strictly) with a lone surrogate
    cannot be hashed or written as UTF-8; say where, before anything else runs."""
    found = _SURROGATE.search(text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    return Diagnostic(
        "the text holds a character that is not valid Unicode (a lone surrogate, e.g. from bytes "
        "decoded with 'surrogateescape'); specs are UTF-8 text",
        line,
        found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1,
    )


_SECTION_START = re.compile(
    r"^(spec|domain|data|invariants|public|pufferfish|unit|premetric|mechanism|budget|release|tuned|program|notes)\b"
)
MAX_SYNTAX_ERRORS = 20


def _syntax_errors(text: str, first: lark.exceptions.LarkError) -> list[Diagnostic]:
    """The first syntax error, then one more per later section that fails on its own.

    After an error, parsing resumes at the next line that starts a top-level section (at
    column 1), so one typo does not hide the next section's problems nor cascade."""
    lines = text.split("\n")
    errors = [_syntax_diagnostic(first)]
    while len(errors) < MAX_SYNTAX_ERRORS:
        after = errors[-1].line
        if not after:
            break
        resume = next((i for i in range(after, len(lines)) if _SECTION_START.match(lines[i])), None)
        if resume is None:
            break
        try:
            _parser().parse("\n" * resume + "\n".join(lines[resume:]))
            break
        except lark.exceptions.LarkError as err:
            errors.append(_syntax_diagnostic(err))
    return errors


def parse(text: str, path: str | None = None) -> ir.Spec:
    """Parse a spec's text; raises SpecError with every problem found."""
    text = line_ends.normal(text)
    deep = _nesting_problem(text) or _surrogate_problem(text)
    if deep:
        raise SpecError([deep], path, text)

    newer = version_problem(text)  # before the grammar: a newer file may use constructs unknown here
    if newer:
        raise SpecError([Diagnostic(newer[0], newer[1], 1)], path, text)
    _comments.clear()
    try:
        tree = _parser().parse(text)
    except lark.exceptions.LarkError as err:
        if _at_first_token(text, err) and not _misspelled_section(text, path):  # /etc/passwd, a CSV: show nothing of it
            raise SpecError([Diagnostic(NOT_A_SPEC, 1, None)], path) from None
        raise SpecError(_syntax_errors(text, err), path, text) from None
    deep = _depth_problem(tree)
    if deep:
        raise SpecError([deep], path, text)
    _mark_value_positions(tree)
    comments, eol = eol_comments.split(_comments, text)
    try:
        sections = _ToIR().transform(tree)
    except lark.exceptions.VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, _ValueProblem):
            meta = inner.meta
            raise SpecError(
                [Diagnostic(inner.message, getattr(meta, "line", None), getattr(meta, "column", None))], path, text
            ) from None
        raise
    spans = [(child.meta.line, child.meta.end_line) for child in tree.children]
    spec = _assemble(sections, path, text, _attach_comments(comments, sections, spans))
    return attrs.evolve(spec, eol_comments=eol) if eol else spec


def _mark_value_positions(tree) -> None:
    """Keep, on each `param` node, where its value and a list's items are written (the transform
    sees only the values): the Param's `positions`, which locate a nested setting's error."""
    for node in tree.find_data("param"):
        if len(node.children) == 2:
            node.meta.value_positions = tuple(_positions(node.children[1]))


def _node_loc(node) -> ir.Loc | None:
    return _tok_loc(node) if isinstance(node, Token) else _loc(node.meta)


def _positions(node):
    loc = _node_loc(node)
    if loc is not None:
        yield (), loc
    if isinstance(node, lark.Tree) and node.data in ("list_value", "name_list"):
        for i, item in enumerate(_list_items(node)):
            yield (i,), item


def _list_items(node):
    """The places of a list's items as `list_value` flattens them (a name list, or a list inside
    the list, adds its items)."""
    for child in node.children:
        if isinstance(child, lark.Tree) and child.data in ("list_value", "name_list"):
            yield from _list_items(child)
        elif child is not None:
            loc = _node_loc(child)
            if loc is not None:
                yield loc


def _attach_comments(comments, sections, spans) -> tuple:
    """Each comment belongs to the first top-level section that ends at or after its line (so a
    comment inside or just before a section stays with it); later ones go to the end."""
    attached: dict[str, list[str]] = {}
    for line, text in comments:
        field = next((s.field for s, (_, end) in zip(sections, spans) if end >= line), ir.END_COMMENTS)
        attached.setdefault(field, []).append(text.rstrip())
    return tuple((field, tuple(lines)) for field, lines in attached.items())


_SINGLE = {
    "title": "spec title",
    "domain": "domain",
    "unit": "unit",
    "premetric": "premetric",
    "mechanism": "mechanism",
    "tuning": "tuning",
    "program": "program",
    "pufferfish": "pufferfish",
}


def _assemble(sections, path, text, comments=()) -> ir.Spec:
    fields: dict = {}
    problems: list[Diagnostic] = []
    for s in sections:
        problems.extend(getattr(s, "problems", []))
        if s.many:
            fields[s.field] = fields.get(s.field, ()) + (s.value if isinstance(s.value, tuple) else (s.value,))
        elif s.field in fields:
            loc = s.loc or ir.Loc(1, 1)
            problems.append(
                Diagnostic(f"a second {_SINGLE[s.field]} section; a spec has exactly one", loc.line, loc.column)
            )
        else:
            fields[s.field] = s.value
        for field, values in getattr(s, "extra", {}).items():  # a section that fills two fields (public)
            fields[field] = fields.get(field, ()) + values
    if problems:
        raise SpecError(problems, path, text)
    return ir.Spec(path=path, text=text, comments=comments, **fields)


def load_text_or_path(path_or_text: str) -> ir.Spec:
    """`dpspec.load`: a path to a .dps file, or the text of one."""
    if "\n" not in path_or_text and (path_or_text.endswith(".dps") or os.path.exists(path_or_text)):
        return parse(read_source(path_or_text), path_or_text)
    return parse(path_or_text, None)

"""Reading a registry entry: YAML with the line and column of every field, and validation
against the registry's own schema, so that every error names the field and where it is.

Errors are `SpecError`s on the entry file (file:line:col, a caret under the field), never a
traceback.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

import yaml

from dpspec.errors import Diagnostic, SpecError
from dpspec.language.exact_input import NumberProblem, exact_decimal, range_problem
from dpspec.language.reading import NotRegularFile, open_regular
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
_jsonschema = LazyModule("jsonschema", "_jsonschema", globals())

MAX_BYTES = 1 << 20
SCHEMA_FILE = "deployments-schema.yaml"


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    """The bundled registry schema (see dpspec/registry/schema/README.md)."""
    text = resources.files("dpspec.registry").joinpath("schema", SCHEMA_FILE).read_text(encoding="utf-8")
    return yaml.safe_load(text)


class _Loader(yaml.SafeLoader):
    """Safe YAML where dates stay strings (the registry's schema wants 'YYYY-MM-DD' strings and
    its own check rejects a YAML date), every mapping remembers where its keys are, and aliases
    (`*name`) are refused: no registry entry needs one, and nested aliases ("billion laughs")
    make a 1 KB file expand into gigabytes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"an alias (*{event.anchor}) refers to another node; "
                "aliases are not allowed in a registry entry (write the value out)",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        """A key given twice is refused, naming both lines (YAML readers keep the last one)."""
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"the key '{key.value}' is given twice in one mapping, at line {seen[key.value]} "
                            f"and at line {key.start_mark.line + 1}; keep one",
                            key.start_mark,
                        )
                    seen[key.value] = key.start_mark.line + 1
        return super().construct_mapping(node, deep)

    def construct_yaml_float(self, node):
        """A float as written: exact (`19.776` is 2472/125, not the nearest double), and refused when
        the double would say something else (`1.0e-400` read as 0, `1e999` as infinity)."""
        value = super().construct_yaml_float(node)
        problem = range_problem(node.value, value)
        if problem:
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        try:
            exact = exact_decimal(node.value)
        except NumberProblem:  # .inf, .nan, 1:30 (sexagesimal): what the double says is all there is
            return value
        return ExactFloat(value, exact)


class ExactFloat(float):
    """A YAML float that keeps the exact decimal it was written as (`.exact`, a Fraction)."""

    def __new__(cls, value: float, exact):
        out = super().__new__(cls, value)
        out.exact = exact
        return out


_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class Entry:
    """A parsed entry: the data, the source text and the position of every field."""

    def __init__(self, data, text: str, path: str | None, marks: dict[tuple, tuple[int, int]]):
        self.data, self.text, self.path, self.marks = data, text, path, marks

    def where(self, field: tuple) -> tuple[int | None, int | None]:
        """(line, column) of a field, or of its nearest present parent."""
        field = tuple(field)
        while field and field not in self.marks:
            field = field[:-1]
        return self.marks.get(field, (1, 1))

    def error(self, field: tuple, message: str, hint: str | None = None) -> SpecError:
        return errors(self, [(field, message, hint)])

    def get(self, *field, default=None):
        node = self.data
        for key in field:
            if not isinstance(node, dict) or key not in node:
                return default
            node = node[key]
        return node


def dotted(field) -> str:
    return ".".join(str(k) for k in field) or "(the entry)"


def errors(entry: Entry, problems) -> SpecError:
    """One SpecError listing (field, message, hint) problems, each located in the entry file."""
    diags = []
    for field, message, hint in problems:
        line, col = entry.where(field)
        diags.append(Diagnostic(f"{dotted(field)}: {message}", line, col, hint=hint))
    return SpecError(diags, entry.path, entry.text)


def _marks(node, path=(), out=None) -> dict:
    out = {} if out is None else out
    out.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = path + (key.value,)
            out[child] = (key.start_mark.line + 1, key.start_mark.column + 1)
            _marks(value, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            _marks(value, path + (i,), out)
    return out


def read_entry(path: str) -> Entry:

    try:
        with open_regular(path) as fh:  # a FIFO would block, a device would fill MAX_BYTES with junk
            raw = fh.read(MAX_BYTES + 1)
    except NotRegularFile:
        raise SpecError(
            "not a regular file (a device, pipe or folder); a registry entry is a YAML file", path
        ) from None
    except OSError as exc:
        raise SpecError(f"cannot read the registry entry: {exc.strerror or exc}", path) from None
    if len(raw) > MAX_BYTES:
        raise SpecError(f"the entry is larger than {MAX_BYTES} bytes", path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"the entry is not valid UTF-8 (byte {exc.start})", path) from None
    return parse_entry(text, path)


_ENTRY_KEY = re.compile(r"^(url_slug|deployment|status|tier)\s*:", re.MULTILINE)


def parse_entry(text: str, path: str | None = None) -> Entry:
    """Parse YAML text into an Entry; a YAML syntax error is located like any other. A file with
    none of an entry's top-level keys is not an entry (`/etc/passwd`): nothing of it is shown."""
    if not _ENTRY_KEY.search(text):
        raise SpecError(
            [
                Diagnostic(
                    "this file is not a registry entry: a registry entry is a YAML mapping with the "
                    "keys url_slug, status, tier and deployment at its top level, and this file has "
                    "none of them; its contents are not shown",
                    1,
                    None,
                )
            ],
            path,
        )
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError([Diagnostic(f"not valid YAML: {problem}", line, col)], path, text) from None
    except (ValueError, RecursionError):  # a number of 5,000 digits (int() refuses), or nesting beyond Python's stack
        huge = re.search(r"[0-9_]{4000,}", text)
        line, col = (
            (text.count("\n", 0, huge.start()) + 1, huge.start() - text.rfind("\n", 0, huge.start()))
            if huge
            else (1, 1)
        )
        what = "a number with thousands of digits" if huge else "nesting too deep to read"
        raise SpecError([Diagnostic(f"not a usable registry entry: {what}", line, col)], path, text) from None
    if not isinstance(data, dict):
        raise SpecError(
            [Diagnostic("a registry entry is a YAML mapping (url_slug, status, tier, deployment)", 1, 1)], path, text
        )
    return Entry(data, text, path, _marks(node) if node is not None else {})


def schema_problems(data) -> list[tuple[tuple, str, str | None]]:
    """(field, message, hint) for every violation of the registry schema, in file order."""
    validator = _jsonschema.Draft7Validator(schema(), format_checker=_jsonschema.Draft7Validator.FORMAT_CHECKER)
    out = []
    for err in validator.iter_errors(data):
        field = tuple(err.absolute_path)
        hint = None
        if err.validator == "additionalProperties":
            allowed = sorted(err.schema.get("properties", {}))
            extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
            for key in extra:
                out.append((field + (key,), f"unknown field '{key}'", "allowed here: " + ", ".join(allowed)))
            continue
        if err.validator == "required":
            out.append((field, err.message.replace("is a required property", "is required here"), None))
            continue
        if err.validator == "enum":
            hint = "one of: " + ", ".join(repr(v) for v in err.validator_value)
        out.append((field, err.message, hint))
    return out


def validate(entry: Entry) -> None:
    """Raise a located SpecError listing every schema violation."""
    problems = schema_problems(entry.data)
    if problems:
        problems.sort(key=lambda p: entry.where(p[0]))
        raise errors(entry, problems)

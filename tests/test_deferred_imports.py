"""Imports at the top, where readers and tools see them: no import statement inside a function
anywhere in dpspec/ or plugins/. A module that must not load something when it is imported (a
heavy library, an optional extra's, or one of our modules that would load one, close an import
cycle or burden a light start) names it at its top as `x = LazyModule("module", "x", globals())`
(dpspec.lazy), which tests/test_layers.py counts as an import of the module; names that only
annotations use go under `if TYPE_CHECKING:`. That the light starts stay light is
tests/test_startup.py's and tests/test_lsp.py's to prove (a fresh process each)."""

from __future__ import annotations

import ast
import functools
import os
import sys

from tests.test_layers import ROOT, _modules

OWN_TOPS = {"dpspec"} | {d for d in os.listdir(os.path.join(ROOT, "plugins")) if d.startswith("dpspec_")}
ARRAYS = {"numpy", "pandas", "scipy", "pyarrow", "jinja2"}  # what a light start must not load


def _all_modules() -> dict[str, str]:
    files = dict(_modules("dpspec"))
    for plugin in sorted(OWN_TOPS - {"dpspec"}):
        files.update(_modules(os.path.join("plugins", plugin)))
    return files


FILES = _all_modules()


def _sources() -> list[str]:
    """Every Python file under dpspec/ and plugins/ (the Tumult runner and conftest-like files too)."""
    out = []
    for top in ("dpspec", "plugins"):
        for folder, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            out += [os.path.join(folder, f) for f in sorted(names) if f.endswith(".py")]
    return out


def _type_checking(node) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def imports_in_functions(tree) -> list[int]:
    """The lines of the import statements inside a function body (not under `if TYPE_CHECKING:`)."""
    typing_only = {id(c) for n in ast.walk(tree) if _type_checking(n) for c in ast.walk(n)}
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found |= {
                c.lineno
                for c in ast.walk(n)
                if isinstance(c, (ast.Import, ast.ImportFrom)) and id(c) not in typing_only
            }
    return sorted(found)


def test_no_import_statement_inside_a_function():
    problems = []
    for path in _sources():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        problems += [f"{os.path.relpath(path, ROOT)}:{line}" for line in imports_in_functions(tree)]
    assert len(_sources()) > 300
    assert problems == [], (
        "import statements inside functions (move them to the module's top, or name the module "
        "there with LazyModule):\n" + "\n".join(problems)
    )


def empty_guarded_tries(tree) -> list[int]:
    """The lines of `try:` blocks that catch ImportError around nothing (`pass` alone): what is
    left when an import is moved out of its guard, so the guard no longer catches anything."""
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Try)
        and all(isinstance(b, ast.Pass) for b in n.body)
        and any("ImportError" in ast.unparse(h.type) for h in n.handlers if h.type is not None)
    ]


def test_no_import_guard_is_left_guarding_nothing():
    problems = []
    for path in _sources():
        with open(path, encoding="utf-8") as fh:
            problems += [f"{os.path.relpath(path, ROOT)}:{line}" for line in empty_guarded_tries(ast.parse(fh.read()))]
    assert problems == [], "a try catching ImportError around `pass` (read the LazyModule inside it):\n" + "\n".join(
        problems
    )
    assert empty_guarded_tries(ast.parse("try:\n    pass\nexcept ImportError:\n    x = 1\n")) == [1]  # a control
    assert empty_guarded_tries(ast.parse("try:\n    y = m.f\nexcept ImportError:\n    x = 1\n")) == []


def test_the_finder_sees_an_import_in_any_function_and_nothing_else():
    """A control: methods, nested and async functions are searched; the module's own imports,
    `if TYPE_CHECKING:` blocks and `require()` calls are not import statements in a function."""
    tree = ast.parse(
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import pandas\n"
        "def f():\n    require('pyspark', 'spark', 'the Spark engine')\n"
        "    def g():\n        import json\n"
        "class C:\n    def m(self):\n        from os import path\n"
        "async def h():\n    if TYPE_CHECKING:\n        import numpy\n    import math\n"
    )
    assert imports_in_functions(tree) == [8, 11, 15]


def _lazy_lines(path: str) -> list[tuple[int, str, ast.AST]]:
    """(line, why it is wrong or "", the call) for each LazyModule(...) call in a file."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    assigned = {
        id(stmt.value): stmt
        for stmt in tree.body
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    }
    out = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "LazyModule"):
            continue
        stmt = assigned.get(id(n))
        args = n.args
        if stmt is None:
            why = "not the value of a module-level `name = LazyModule(...)`"
        elif len(args) != 3 or not all(isinstance(a, ast.Constant) for a in args[:2]):
            why = 'not LazyModule("module", "name", globals())'
        elif args[1].value != stmt.targets[0].id:
            why = f"its alias {args[1].value!r} is not the name it is assigned to ({stmt.targets[0].id})"
        elif ast.unparse(args[2]) != "globals()":
            why = "its namespace is not globals()"
        elif args[0].value.split(".")[0] in OWN_TOPS and args[0].value not in FILES:
            why = f"there is no module {args[0].value}"
        else:
            why = ""
        out.append((n.lineno, why, n))
    return sorted(out, key=lambda row: row[0])


def test_every_lazy_module_is_a_module_level_name_of_itself():
    """`x = LazyModule("m", "x", globals())` at module level: the first read of an attribute
    replaces `x` in the module's globals by the module, which only works under its own name."""
    problems, count = [], 0
    for path in _sources():
        if path.endswith(os.path.join("dpspec", "lazy.py")):
            continue
        for line, why, _ in _lazy_lines(path):
            count += 1
            if why:
                problems.append(f"{os.path.relpath(path, ROOT)}:{line}: {why}")
    assert count > 100  # the deferred imports became these lines
    assert problems == [], "\n".join(problems)


def test_the_lazy_module_check_has_teeth(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "np = LazyModule('numpy', 'numpy', globals())\n"
        "def f():\n    x = LazyModule('pandas', 'x', globals())\n"
        "y = LazyModule('dpspec.no_such_module', 'y', globals())\n"
        "z = LazyModule('scipy', 'z', globals())\n"
    )
    whys = [why for _, why, _ in _lazy_lines(str(bad))]
    assert whys[0].startswith("its alias 'numpy'") and whys[1].startswith("not the value")
    assert whys[2] == "there is no module dpspec.no_such_module" and whys[3] == ""


def _api_table() -> dict[str, str]:
    """`from dpspec.api import X` loads the module X is served from (its name table)."""
    with open(FILES["dpspec.api"], encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    table = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("_WHERE", "_DEPRECATED") for t in node.targets
        ):
            for key, value in zip(node.value.keys, node.value.values):
                where = value.elts[0] if isinstance(value, ast.Tuple) else value
                table[key.value] = where.value
    return table


API = _api_table()


def _targets(node, module: str, path: str) -> tuple[set[str], set[str]]:
    """(own modules, third-party top-level names) one import statement loads."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return (
            {n for n in names if n.split(".")[0] in OWN_TOPS},
            {n.split(".")[0] for n in names if n.split(".")[0] not in OWN_TOPS},
        )
    base = node.module or ""
    if node.level:
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        base = anchor + ("." + base if base else "")
    if base.split(".")[0] not in OWN_TOPS:
        return set(), {base.split(".")[0]}
    own = set()
    for a in node.names:
        if base == "dpspec.api" and a.name in API:
            own.add(API[a.name])
        else:
            own.add(f"{base}.{a.name}" if f"{base}.{a.name}" in FILES else base)
    return own, set()


@functools.lru_cache(maxsize=1)
def _graph():
    """Per module: the own modules and third-party libraries its import statements load when it
    is imported (a LazyModule loads nothing then; `if TYPE_CHECKING:` never runs)."""
    edges, third = {}, {}
    for module, path in FILES.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        typing_only = {id(c) for n in ast.walk(tree) if _type_checking(n) for c in ast.walk(n)}
        own, libs = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in typing_only:
                o, t = _targets(node, module, path)
                own |= o
                libs |= {x for x in t if x not in sys.stdlib_module_names}
        parts = module.split(".")
        own |= {".".join(parts[:i]) for i in range(1, len(parts))}  # a module's packages run first
        edges[module] = {o for o in own if o in FILES and o != module}
        third[module] = libs
    return edges, third


def heavy_on_import(module: str) -> set[str]:
    """The third-party libraries importing `module` loads (the closure over import-time edges)."""
    edges, third = _graph()
    seen, todo, libs = {module}, [module], set()
    while todo:
        m = todo.pop()
        libs |= third.get(m, set())
        for n in edges.get(m, ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return libs


def test_what_every_start_imports_loads_no_array_library():
    """The static side of tests/test_startup.py: the CLI, the language server and each plugin's
    entry module (`dpspec --help` loads them all) load none of numpy, pandas, scipy, pyarrow,
    jinja2 through their import statements; TopDown's solver module does load scipy (a control)."""
    starts = ["dpspec.cli.main", "dpspec.lsp.server", *(p for p in OWN_TOPS if p != "dpspec")]
    assert {m: heavy_on_import(m) & ARRAYS for m in starts} == {m: set() for m in starts}
    assert "scipy" in heavy_on_import("dpspec_topdown.estimation.qp")
    assert API["Mechanism"] == "dpspec.contract.mechanism"


def test_a_lazy_module_imports_on_first_read_and_names_a_missing_extra():
    """The module's first attribute read imports it and puts it in the namespace in its stead; a
    module of an optional extra that is not installed raises MissingExtra naming the extra."""
    import pytest

    from dpspec.lazy import LazyModule, MissingExtra

    namespace = {}
    namespace["fr"] = LazyModule("fractions", "fr", namespace)
    assert namespace["fr"].Fraction(1, 2) == 0.5 and namespace["fr"] is sys.modules["fractions"]
    missing = LazyModule("dpspec_no_such_library", "x", {}, extra="spark", purpose="the Spark engine")
    with pytest.raises(MissingExtra, match=r"the Spark engine needs dpspec_no_such_library.*dpspec\[spark\]"):
        missing.anything
    with pytest.raises(ImportError):
        LazyModule("dpspec_no_such_library", "x", {}).anything

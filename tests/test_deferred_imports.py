"""Imports at the top, where readers and tools see them: an import of the project's own modules
inside a function is kept only when it defers a heavy third-party library (numpy, pandas, scipy,
a solver, jinja2...) that the importing module does not load already, so `dpspec --help` and
`dpspec check` stay light; when it sits in a package's `__init__.py`, which every import of a
module beneath it runs (the verbs of `dpspec/__init__.py` load the compiler only when called); or
when a module every start loads (the CLI, each plugin's entry module: `dpspec --help` loads them
all) defers a module a bare start does not need. Anything else belongs at module level."""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys

import pytest

from tests.test_layers import ROOT, _modules

LIGHT = {"lark", "attrs", "click", "pluggy", "typing_extensions", "__future__"}  # the start-up floor's
OWN_TOPS = {"dpspec"} | {d for d in os.listdir(os.path.join(ROOT, "plugins")) if d.startswith("dpspec_")}


def _all_modules() -> dict[str, str]:
    files = dict(_modules("dpspec"))
    for plugin in sorted(OWN_TOPS - {"dpspec"}):
        files.update(_modules(os.path.join("plugins", plugin)))
    return files


FILES = _all_modules()


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


def _deferred_nodes(tree) -> tuple[set[int], set[int]]:
    """Nodes that do not run on import: (inside a function, under `if TYPE_CHECKING:`, which
    names only what annotations use)."""
    late, typing_only = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            late |= {id(c) for c in ast.walk(n) if c is not n}
        elif isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING":
            typing_only |= {id(c) for c in ast.walk(n) if c is not n}
    return late, typing_only


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
    """Per module: own modules and heavy third-party libraries it loads on import, and its
    function-level imports of own modules (node, line)."""
    heavy_lib = lambda top: top not in LIGHT and top not in sys.stdlib_module_names  # noqa: E731
    edges, third, deferred = {}, {}, {}
    for module, path in FILES.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        later, typing_only = _deferred_nodes(tree)
        own, libs, late = set(), set(), []
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            o, t = _targets(node, module, path)
            if id(node) in typing_only:
                continue
            if id(node) in later:
                if o:
                    late.append((node, o))
            else:
                own |= o
                libs |= {x for x in t if heavy_lib(x)}
        parts = module.split(".")
        own |= {".".join(parts[:i]) for i in range(1, len(parts))}  # a module's packages run first
        edges[module] = {o for o in own if o in FILES and o != module}
        third[module], deferred[module] = libs, late
    return edges, third, deferred


def _heavy(edges, third) -> dict[str, set[str]]:
    """The heavy libraries importing each module loads (the closure over import-time edges)."""
    out = {}
    for start in edges:
        seen, todo, libs = {start}, [start], set()
        while todo:
            m = todo.pop()
            libs |= third.get(m, set())
            for n in edges.get(m, ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        out[start] = libs
    return out


@functools.lru_cache(maxsize=1)
def loaded_at_start() -> frozenset[str]:
    """The project's modules `dpspec --help` loads (in a fresh interpreter, this checkout first)."""
    code = (
        "import sys, io, contextlib\nfrom dpspec.cli.main import main\nsys.argv = ['dpspec', '--help']\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main()\n    except SystemExit:\n        pass\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "plugins"), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return frozenset(m for m in out.stdout.split() if m.split(".")[0] in OWN_TOPS)


def _closure(edges, module: str) -> set[str]:
    seen, todo = {module}, [module]
    while todo:
        for n in edges.get(todo.pop(), ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def unjustified_deferrals() -> list[str]:
    edges, third, deferred = _graph()
    heavy = _heavy(edges, third)
    start = loaded_at_start()
    problems = []
    for module, late in sorted(deferred.items()):
        if FILES[module].endswith("__init__.py"):
            continue  # a package's __init__ runs for every module beneath it: it stays light
        for node, targets in late:
            extra = set().union(*(heavy.get(t, set()) for t in targets)) - heavy[module]
            if module in start:  # a start loads this module: deferring what a bare start does not need is the point
                extra |= set().union(*(_closure(edges, t) for t in targets)) - start
            if not extra:
                problems.append(
                    f"{module}:{node.lineno} imports {', '.join(sorted(targets))} inside a function, "
                    f"but that loads nothing heavy {module} does not load already"
                )
    return problems


@pytest.mark.slow  # imports every module in fresh interpreters
def test_a_function_level_import_of_our_own_modules_defers_a_heavy_library():
    problems = unjustified_deferrals()
    assert problems == [], "\n".join(problems)


@pytest.mark.slow  # reads the import closure of every module
def test_the_check_sees_the_heavy_closure_and_the_apis_names():
    """Controls: the CLI loads no numpy on import (so its deferrals are justified), TopDown's
    solver module loads scipy, and `from dpspec.api import X` is followed to X's module."""
    edges, third, _ = _graph()
    heavy = _heavy(edges, third)
    assert "numpy" not in heavy["dpspec.cli.main"] and "pandas" not in heavy["dpspec.cli.main"]
    assert any("scipy" in libs for m, libs in heavy.items() if m.startswith("dpspec_topdown"))
    assert API["Mechanism"] == "dpspec.contract.mechanism"


def test_a_deferral_that_defers_nothing_heavy_is_found(monkeypatch):
    """Control: a module importing a light sibling inside a function is reported."""
    edges, third, deferred = _graph()
    module = "dpspec.verify.result"
    node = ast.parse("def f():\n    from dpspec.errors import DpspecError\n").body[0].body[0]
    fake = dict(deferred)
    fake[module] = [*deferred[module], (node, {"dpspec.errors"})]
    monkeypatch.setattr(sys.modules[__name__], "_graph", lambda: (edges, third, fake))
    assert any(p.startswith(f"{module}:2 imports dpspec.errors") for p in unjustified_deferrals())

"""The layers the imports show: no cycle between dpspec's packages nor between a plugin's modules,
the modules named by a module-level `LazyModule` included (an import made on first use is an
import all the same), and the order the architecture page draws."""

from __future__ import annotations

import ast
import copy
import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules(top: str) -> dict[str, str]:
    """Dotted module name -> file, for every module under the folder `top` (relative to ROOT)."""
    files = {}
    for folder, dirs, names in os.walk(os.path.join(ROOT, top)):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for f in sorted(names):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), os.path.join(ROOT, os.path.dirname(top)))
                name = rel[:-3].replace(os.sep, ".")
                files[name[: -len(".__init__")] if name.endswith(".__init__") else name] = os.path.join(folder, f)
    return files


def _imports(name: str, path: str, known) -> list[tuple[str, int]]:
    """Every module a module imports (at module level or inside a function), with its line; `from
    package import name` counts the submodule `name` when there is one, else the package."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = anchor + ("." + base if base else "")
            found += [(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base, node.lineno) for a in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, node.lineno))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "LazyModule"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, node.lineno))  # a deferred import is still an edge
    return found


def core_package(module: str) -> str | None:
    """The layer of a dpspec module: its sub-package (dpspec.check) or, for a module directly
    under dpspec (api, errors, ir, progress, ...), that module; `dpspec` itself is the verbs
    (dpspec.load, dpspec.compile); None outside dpspec."""
    parts = module.split(".")
    if parts[0] != "dpspec":
        return None
    return ".".join(parts[:2])


def _api_names(path: str) -> list[tuple[str, int]]:
    """The modules `dpspec.api` serves names from (its `_WHERE` table, imported on first use):
    edges as real as an import statement's."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("_WHERE", "_DEPRECATED") for t in node.targets
        ):
            for value in node.value.values:
                where = value.elts[0] if isinstance(value, ast.Tuple) else value
                found.append((where.value, value.lineno))
    assert found, "dpspec.api's name table was not found"
    return found


def core_graph() -> dict[str, dict[str, list[str]]]:
    """Package -> package it imports -> where (module:line), over every import in dpspec/ (read
    once per run: four tests ask; each gets its own copy)."""
    return copy.deepcopy(_core_graph())


@functools.cache
def _core_graph() -> dict[str, dict[str, list[str]]]:
    files = _modules("dpspec")
    graph: dict[str, dict[str, list[str]]] = {}
    for mod, path in files.items():
        src = core_package(mod)
        if src is None:
            continue
        graph.setdefault(src, {})
        for target, line in _imports(mod, path, files) + (_api_names(path) if mod == "dpspec.api" else []):
            dst = core_package(target)
            if dst and dst != src and (dst in graph or any(m == dst or m.startswith(dst + ".") for m in files)):
                graph[src].setdefault(dst, []).append(f"{mod}:{line}")
    return graph


def plugin_graph(plugin: str) -> dict[str, dict[str, list[str]]]:
    """Module -> module of the same plugin it imports -> where, over every import in the plugin."""
    files = _modules(os.path.join("plugins", plugin))

    def module_of(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name if name and name != plugin else None

    graph: dict[str, dict[str, list[str]]] = {}
    for mod, path in files.items():
        graph.setdefault(mod, {})
        for target, line in _imports(mod, path, files):
            dst = module_of(target)
            if dst and dst != mod:
                graph[mod].setdefault(dst, []).append(f"{mod}:{line}")
    return graph


def cycles(graph) -> list[set]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(n):
        index[n] = low[n] = len(index)
        stack.append(n)
        on.add(n)
        for m in sorted(graph.get(n, ())):
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in on:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            comp = set()
            while True:
                m = stack.pop()
                on.discard(m)
                comp.add(m)
                if m == n:
                    break
            if len(comp) > 1:
                out.append(comp)

    for n in sorted(graph):
        if n not in index:
            visit(n)
    return out


def _explain(graph, comp: set) -> str:
    return "; ".join(
        f"{a} -> {b} ({', '.join(graph[a][b][:3])})" for a in sorted(comp) for b in sorted(graph[a]) if b in comp
    )


PLUGINS = sorted(
    d
    for d in os.listdir(os.path.join(ROOT, "plugins"))
    if d.startswith("dpspec_") and os.path.isdir(os.path.join(ROOT, "plugins", d))
)


def test_the_cycle_finder_finds_a_cycle_and_nothing_else():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_counts_lazy_modules_and_the_apis_names():
    """Controls: dpspec/__init__.py names the compiler only through a LazyModule, and dpspec.api
    serves the samplers by name; both edges are seen."""
    graph = core_graph()
    assert "dpspec.run" in graph["dpspec"] and "dpspec.run" in graph["dpspec.api"]
    with open(os.path.join(ROOT, "dpspec", "__init__.py"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    assert all("LazyModule(" in lines[int(where.rsplit(":", 1)[1]) - 1] for where in graph["dpspec"]["dpspec.run"])
    assert len(graph) > 15 and "dpspec.errors" in graph["dpspec.check"]


def test_a_cycle_through_a_lazy_module_is_a_cycle(tmp_path):
    """A control: `x = LazyModule("m", ...)` is an edge to m (and `import` inside a function, which
    tests/test_deferred_imports.py forbids, would be one too), so two modules naming each other
    lazily are a cycle."""
    (tmp_path / "a.py").write_text('b = LazyModule("pkg.b", "b", globals())\n')
    (tmp_path / "b.py").write_text("from pkg import a\n")
    known = {"pkg.a", "pkg.b"}
    graph = {m: {t for t, _ in _imports(m, str(tmp_path / f"{m[4:]}.py"), known)} for m in known}
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}} and cycles(graph) == [{"pkg.a", "pkg.b"}]


def test_no_cycle_between_the_cores_packages():
    graph = core_graph()
    found = cycles(graph)
    assert found == [], "\n".join(_explain(graph, c) for c in found)


def test_no_cycle_between_a_plugins_modules():
    assert len(PLUGINS) >= 8 and "dpspec_topdown" in PLUGINS
    problems = []
    for plugin in PLUGINS:
        graph = plugin_graph(plugin)
        problems += [f"{plugin}: {_explain(graph, c)}" for c in cycles(graph)]
    assert problems == [], "\n".join(problems)


def drawn_layers() -> list[list[str]]:
    """The rows of the architecture page's layer diagram, from the top: package names per row."""
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as fh:
        text = fh.read()
    marker = "<!-- layers: from the top; checked by tests/test_layers.py -->"
    assert marker in text, "docs/architecture.md lost its layer diagram"
    block = text.split(marker, 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    rows = []
    for line in block.splitlines():
        names = line.split("  ", 1)[0].strip()  # the names, then (after two spaces) what they are
        if names:
            rows.append(["dpspec" if n == "dpspec" else f"dpspec.{n}" for n in names.split(" · ")])
    return rows


def _layering_problems(graph, rows) -> list[str]:
    row_of = {name: i for i, row in enumerate(rows) for name in row}
    problems = [f"{n} is not in the diagram" for n in sorted(graph) if n not in row_of]
    problems += [f"{n} is drawn but is no package of dpspec" for n in sorted(row_of) if n not in graph]
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if a in row_of and b in row_of and row_of[b] <= row_of[a]:
                where = "its own row" if row_of[b] == row_of[a] else "a row above it"
                problems.append(f"{a} imports {b}, in {where} ({', '.join(graph[a][b][:3])})")
    return problems


def test_the_architecture_page_draws_the_layers_the_imports_follow():
    """Every package of dpspec in one row of the diagram, and every import (inside functions
    too) going to a row below: the page states the order the code has."""
    rows = drawn_layers()
    assert len(rows) > 8 and rows[0] == ["dpspec"] and "dpspec.run" in rows[6]
    problems = _layering_problems(core_graph(), rows)
    assert problems == [], "\n".join(problems)


def test_the_layer_check_catches_an_import_up_or_across():
    """A control: an edge to the same row, one to a row above and a package left out are all named."""
    graph = {
        "dpspec.a": {"dpspec.b": ["x:1"]},
        "dpspec.b": {"dpspec.c": ["y:2"]},
        "dpspec.c": {"dpspec.a": ["z:3"]},
        "dpspec.d": {},
    }
    problems = _layering_problems(graph, [["dpspec.a"], ["dpspec.b", "dpspec.c"]])
    assert problems == [
        "dpspec.d is not in the diagram",
        "dpspec.b imports dpspec.c, in its own row (y:2)",
        "dpspec.c imports dpspec.a, in a row above it (z:3)",
    ]


def test_the_compiler_orchestrates_above_budget_and_audit():
    """The compiler imports the budget and audit stages, and neither reaches back to it."""
    graph = core_graph()
    assert {"dpspec.budget", "dpspec.audit", "dpspec.check", "dpspec.engine"} <= set(graph["dpspec.run"])
    assert "dpspec.run" not in graph["dpspec.budget"] and "dpspec.run" not in graph["dpspec.audit"]

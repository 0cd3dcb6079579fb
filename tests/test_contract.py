"""The contract owns its types; plugins use the public API; the plugin manager does not pull in
the report stage."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.test_layers import cycles as _cycles  # one strongly-connected-components finder for both import tests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_section_lives_with_the_contract_and_old_paths_still_work():
    from dpspec import api, contract, report

    assert report.Section is contract.Section is api.Section


def test_every_public_api_name_resolves():
    import dpspec.api as api

    for name in api.__all__:
        assert getattr(api, name) is not None, name


def test_plugin_manager_and_api_import_neither_the_report_nor_the_compiler():
    probe = "import sys, dpspec.contract.plugins, dpspec.api; print(sorted(m for m in ('dpspec.report', 'dpspec.run.compiler') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


TOP_LEVEL = {"load", "compile", "audit", "verify", "convert", "infer"}
_CORE_IMPORT = re.compile(r"^\s*(?:from\s+(dpspec(?:\.\w+)*)\s+import\s+(.+)|import\s+(dpspec(?:\.\w+)*))")


def core_imports_beyond_the_api(root: str) -> list[str]:
    """Each line under `root` that imports from dpspec other than `dpspec.api` (or plain `import dpspec`)."""
    offenders = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [
            d for d in dirs if d not in ("build", "__pycache__") and not d.endswith(".egg-info")
        ]  # build artifacts
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                for i, line in enumerate(open(path, encoding="utf-8"), 1):
                    m = _CORE_IMPORT.match(line)
                    if m and m.group(1) == "dpspec":  # the top-level verbs (load, compile, ...) are public
                        names = {n.split(" as ")[0].strip() for n in m.group(2).split("#")[0].strip("() \n").split(",")}
                        if names <= TOP_LEVEL:
                            continue
                    if m and (m.group(1) not in (None, "dpspec.api") or m.group(3) not in (None, "dpspec")):
                        offenders.append(f"{os.path.relpath(path, ROOT)}:{i}: {line.strip()}")
    return offenders


@pytest.mark.parametrize("root", ["plugins", "tests/thirdparty_plugin", "tests/engine_plugin"])
def test_plugins_import_only_the_public_api(root):
    offenders = core_imports_beyond_the_api(os.path.join(ROOT, root))
    assert not offenders, "plugins use dpspec.api, not core internals:\n" + "\n".join(offenders)


def test_the_import_check_would_notice_an_internal(tmp_path):
    (tmp_path / "p.py").write_text(
        "from dpspec.api import ir\nimport dpspec\n    from dpspec.run.noise import bernoulli\n"
        "from dpspec import ir\nimport dpspec.check.checker\nfrom dpspec import load, compile\n"
    )
    found = core_imports_beyond_the_api(str(tmp_path))
    assert [line.rsplit(": ", 1)[1] for line in found] == [
        "from dpspec.run.noise import bernoulli",
        "from dpspec import ir",
        "import dpspec.check.checker",
    ]


def test_report_model_does_not_reach_back_into_the_compiler():
    text = open(os.path.join(ROOT, "dpspec", "report", "model.py"), encoding="utf-8").read()
    assert "dpspec.run.compiler" not in text


def _core_import_graph() -> tuple[dict, dict]:
    """(module-level imports, all imports including those inside functions) between dpspec's own
    modules, read from the source. `dpspec/__init__.py` is left out: its verbs sit on top."""
    import ast

    files = {}
    for folder, _, names in os.walk(os.path.join(ROOT, "dpspec")):
        for f in names:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
                files[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(folder, f)

    def module_of(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name if name and name != "dpspec" else None

    top, every = {}, {}
    for mod, path in files.items():
        tree = ast.parse(open(path, encoding="utf-8").read())
        package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        top[mod], every[mod] = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = anchor + ("." + base if base else "")
                targets = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in filter(None, map(module_of, targets)):
                if t != mod:
                    every[mod].add(t)
                    if node in tree.body:
                        top[mod].add(t)
    return top, every


def test_the_core_imports_one_way():
    """No circle of imports among dpspec's modules, at module level nor inside functions."""
    top, every = _core_import_graph()
    assert len(top) > 60 and "dpspec.check.checker" in top["dpspec.budget.spec_account"]
    assert _cycles(top) == []
    assert _cycles(every) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]

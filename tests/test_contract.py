"""The contract owns its types; plugins use the public API; the plugin manager does not pull in
the report stage."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_section_lives_with_the_contract_and_old_paths_still_work():
    from dpspec import api, contract, report

    assert report.Section is contract.Section is api.Section


def test_every_public_api_name_resolves():
    import dpspec.api as api

    for name in api.__all__:
        assert getattr(api, name) is not None, name


def test_plugin_manager_and_api_import_neither_the_report_nor_the_compiler():
    probe = "import sys, dpspec.plugins, dpspec.api; print(sorted(m for m in ('dpspec.report', 'dpspec.compiler') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


TOP_LEVEL = {"load", "compile", "audit", "verify", "convert", "infer"}
_CORE_IMPORT = re.compile(r"^\s*(?:from\s+(dpspec(?:\.\w+)*)\s+import\s+(.+)|import\s+(dpspec(?:\.\w+)*))")


def core_imports_beyond_the_api(root: str) -> list[str]:
    """Each line under `root` that imports from dpspec other than `dpspec.api` (or plain `import dpspec`)."""
    offenders = []
    for folder, _, files in os.walk(root):
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
    (tmp_path / "p.py").write_text("from dpspec.api import ir\nimport dpspec\n    from dpspec.noise import bernoulli\n"
                                   "from dpspec import ir\nimport dpspec.checker\nfrom dpspec import load, compile\n")
    found = core_imports_beyond_the_api(str(tmp_path))
    assert [line.rsplit(": ", 1)[1] for line in found] == ["from dpspec.noise import bernoulli", "from dpspec import ir",
                                                            "import dpspec.checker"]


def test_report_model_does_not_reach_back_into_the_compiler():
    text = open(os.path.join(ROOT, "dpspec", "report", "model.py"), encoding="utf-8").read()
    assert "dpspec.compiler" not in text

"""The contract owns its types; plugins use the public API; the plugin manager does not pull in
the report stage."""
from __future__ import annotations

import os
import re
import subprocess
import sys

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


def test_built_in_plugins_use_no_core_internals():
    internal = re.compile(r"from dpspec\.(checker|data|compiler|report|parser|verify|inference)\b"
                          r"|import dpspec\.(checker|data|compiler|report|parser|verify|inference)\b")
    offenders = []
    for folder, _, files in os.walk(os.path.join(ROOT, "plugins")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                for i, line in enumerate(open(path, encoding="utf-8"), 1):
                    if internal.search(line):
                        offenders.append(f"{os.path.relpath(path, ROOT)}:{i}: {line.strip()}")
    assert not offenders, offenders


def test_report_model_does_not_reach_back_into_the_compiler():
    text = open(os.path.join(ROOT, "dpspec", "report", "model.py"), encoding="utf-8").read()
    assert "dpspec.compiler" not in text

"""The tree passes ruff's linter as pyproject.toml configures it (undefined and unused names,
statements that cannot be right), so a slip is caught by the suite, not by a reader; and it is
laid out as ruff's formatter lays it out, so a diff shows changes, not layout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (it comes with the test extra: pip install -e '.[test]')")
    return [found]


def test_the_tree_passes_the_linter():
    res = subprocess.run(
        [*_ruff(), "check", "--no-cache", "--output-format", "concise", str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_linter_would_fail_on_an_undefined_name(tmp_path):
    """The check above can fail: the same configuration refuses a file that uses an undefined name."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return undefined_name\n")
    res = subprocess.run(
        [*_ruff(), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1 and "F821" in res.stdout, res.stdout + res.stderr


def test_the_tree_is_formatted():
    res = subprocess.run(
        [*_ruff(), "format", "--check", "--no-cache", str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, "run `ruff format .`:\n" + res.stdout + res.stderr


def test_the_format_check_would_fail_on_a_file_laid_out_otherwise(tmp_path):
    """The check above can fail: the same configuration wants `x = [1,2]` written `x = [1, 2]`."""
    bad = tmp_path / "bad.py"
    bad.write_text("x = [1,2]\n")
    res = subprocess.run(
        [*_ruff(), "format", "--check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1, res.stdout + res.stderr

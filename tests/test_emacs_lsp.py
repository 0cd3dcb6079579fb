"""editors/emacs/dps-mode.el in Debian's Emacs (28 in Debian 12) with its elpa-eglot (Eglot
1.9), in batch: a .dps file opens in dps-mode, Eglot connects to the dpspec server, and a
diagnostic (through Flymake), a hover on a budget line and a formatting request come back."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from dpspec.language.formatter import format_spec
from dpspec.language.parser import parse
from tests import editor_session
from tests.editor_session import RATE_LINE, ROOT, SPEC

EMACS = shutil.which("emacs")


def _has_eglot() -> bool:
    probe = subprocess.run(
        [EMACS, "--batch", "--eval", "(progn (package-initialize) (require 'eglot))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return probe.returncode == 0


pytestmark = [
    pytest.mark.slow,  # starts Emacs and the language server
    pytest.mark.skipif(
        EMACS is None or not _has_eglot(),
        reason="emacs with eglot is not installed (Debian 12: apt-get install emacs-nox elpa-eglot)",
    ),
]


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    """What the driver saw in one batch Emacs session."""
    return editor_session.run(
        [EMACS, "--batch", "-l", str(ROOT / "tests" / "editors" / "emacs_driver.el")],
        tmp_path_factory.mktemp("emacs"),
        {"DPSPEC_EMACS_PLUGIN": str(ROOT / "editors" / "emacs")},
    )


def test_a_dps_file_opens_in_dps_mode_and_eglot_connects(session):
    assert session["mode"] == "dps-mode" and session["connected"]


def test_the_checkers_diagnostic_reaches_flymake_at_its_line(session):
    [rate] = [d for d in session["diagnostics"] if "parameter 'p'" in d["message"]]
    assert rate["line"] == RATE_LINE


def test_a_hover_on_the_budget_line_reads_the_bound(session):
    assert "How much protection?" in session["hover"] and "an attacker's belief" in session["hover"]


def test_formatting_replaces_the_buffer_with_dpspec_fmt(session):
    assert session["formatted"].rstrip("\n") == format_spec(parse(SPEC)).rstrip("\n")
    assert session["formatted"] != SPEC

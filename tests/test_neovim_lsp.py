"""editors/nvim in Debian's Neovim (0.7 in Debian 12), headless: a .dps buffer gets filetype
`dps`, the dpspec server attaches (vim.lsp.start_client on 0.7, vim.lsp.start later), and a
diagnostic, a hover on a budget line and a formatting request come back through the editor."""

from __future__ import annotations

import shutil

import pytest

from dpspec.language.formatter import format_spec
from dpspec.language.parser import parse
from tests import editor_session
from tests.editor_session import RATE_LINE, ROOT, SPEC

NVIM = shutil.which("nvim")
pytestmark = [
    pytest.mark.slow,  # starts Neovim and the language server
    pytest.mark.skipif(NVIM is None, reason="nvim is not installed (Debian: apt-get install neovim)"),
]


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    """What the driver saw in one headless Neovim session."""
    return editor_session.run(
        [NVIM, "--headless", "--clean", "-u", str(ROOT / "tests" / "editors" / "nvim_driver.lua")],
        tmp_path_factory.mktemp("nvim"),
        {"DPSPEC_NVIM_PLUGIN": str(ROOT / "editors" / "nvim")},
    )


def test_a_dps_file_gets_its_filetype_and_the_server_attaches(session):
    assert session["filetype"] == "dps"  # not 'conf', which 0.7 guesses from the '#' comment
    assert session["commentstring"] == "# %s"
    assert session["attached"]
    major, minor = (int(x) for x in session["version"].split(".")[:2])
    assert session["api"] == ("vim.lsp.start" if (major, minor) >= (0, 8) else "vim.lsp.start_client")


def test_the_checkers_diagnostic_reaches_the_buffer_at_its_line(session):
    [rate] = [d for d in session["diagnostics"] if "parameter 'p'" in d["message"]]
    assert rate["line"] == RATE_LINE and rate["severity"] == 1  # vim.diagnostic.severity.ERROR


def test_a_hover_on_the_budget_line_reads_the_bound(session):
    assert "How much protection?" in session["hover"] and "an attacker's belief" in session["hover"]


def test_formatting_replaces_the_buffer_with_dpspec_fmt(session):
    assert session["formatted"] == format_spec(parse(SPEC)).rstrip("\n")
    assert session["formatted"] != SPEC.rstrip("\n")  # the request had work to do

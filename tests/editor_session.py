"""One editor session for tests/test_neovim_lsp.py and tests/test_emacs_lsp.py: a small untidy
spec with a checker error, the driver (tests/editors/) run headless in a temporary git folder
(a project root, as a person's checkout is), and the JSON the driver wrote of what it saw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Written untidily (the formatter has work to do), with a parameter out of range. Its first line
# is a '#' comment: that is what makes Neovim 0.7 guess filetype 'conf' without an ftdetect.
SPEC = textwrap.dedent("""\
    # A spec for the editor tests.
    spec "Editor test"

    domain d "a test domain" {
      stage edited
      table persons unit person {
          DEYE : {1, 2}
      }
    }

    invariants { count persons }

    unit persons : hamming
    premetric pure
    mechanism randomized_response { table: persons  column: DEYE  positive: "1"  p: 1.5 }

    budget epsilon <= 1.1
    """)
RATE_LINE = next(i for i, line in enumerate(SPEC.splitlines()) if "p: 1.5" in line)


def server_command() -> str:
    """The dpspec beside this interpreter (the dev venv's), unless DPSPEC_LSP_CMD names another."""
    return os.environ.get("DPSPEC_LSP_CMD", os.path.join(os.path.dirname(sys.executable), "dpspec"))


def run(argv: list[str], work: Path, env: dict) -> dict:
    """Run one driver on `work`/small.dps; what it saw (it writes DPSPEC_EDITOR_OUT)."""
    spec = work / "small.dps"
    spec.write_text(SPEC, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    out = work / "seen.json"
    env = {
        **os.environ,
        "DPSPEC_EDITOR_OUT": str(out),
        "DPSPEC_LSP_CMD": server_command(),
        "HOME": str(work),
        "XDG_CONFIG_HOME": str(work / "config"),
        "XDG_DATA_HOME": str(work / "data"),
        "XDG_STATE_HOME": str(work / "state"),
        "XDG_CACHE_HOME": str(work / "cache"),
        **env,
    }
    proc = subprocess.run([*argv, str(spec)], cwd=work, env=env, capture_output=True, text=True, timeout=90)
    assert out.exists(), f"{argv[0]} exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    seen = json.loads(out.read_text(encoding="utf-8"))
    assert "error" not in seen, f"{seen['error']}\n{proc.stderr}"
    return seen

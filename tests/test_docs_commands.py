"""The docs' commands run as written: every ```console block of the docs and the README, from a
fresh shell, in a clean copy of the checkout, as a reader who follows the page in one terminal.

- The copy holds the tracked files only (`git ls-files`), with `.venv` linked to the virtual
  environment running the tests (no new one is built). The shell starts with no profile, a
  bare PATH (no `dpspec` on it) and only PYTHONPATH pointing into the copy, so that the copy's
  code runs whichever checkout the venv was installed from. So a page either activates the
  venv once (`$ source .venv/bin/activate`) or writes `.venv/bin/dpspec`.
- Each block starts at the copy's root, after the page's earlier `cd` and `source` lines: a page
  that stands elsewhere says so with a `$ cd DIR` line.
- Each `$ ` line must exit 0, or N when it ends with `  # exit N`.
- A block preceded by `<!-- not run: REASON -->` (a cluster, the network, an editor, more than
  about 20 seconds) is skipped with that reason, so `pytest -rs` lists every one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs import EXIT, FENCE, doc_files

pytestmark = pytest.mark.slow  # runs every console block of the docs from a fresh shell

ROOT = Path(__file__).resolve().parents[1]
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>.*?)\s*-->$")
CARRIED = re.compile(r"^(cd|source|\.)\s")  # lines whose effect lasts in the reader's terminal
SECONDS_PER_COMMAND = 60


def console_blocks():
    """(carried lines, [(command, exit code)], not-run reason) per ```console block, by page."""
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        carried: list[str] = []
        for m in FENCE.finditer(text):
            words = m.group("info").split()
            if not words or words[0] != "console":
                continue
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            marker = NOT_RUN.match(before)
            commands = []
            for line in m.group("body").splitlines():
                if line.startswith("$ "):
                    code = EXIT.search(line[2:])
                    commands.append((EXIT.sub("", line[2:]).strip(), int(code.group(1)) if code else 0))
            where = f"{path.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}"
            yield where, list(carried), commands, marker.group("reason") if marker else None
            carried += [c for c, _ in commands if CARRIED.match(c)]


def _params():
    for where, carried, commands, reason in console_blocks():
        marks = [pytest.mark.skip(reason=f"{where} not run: {reason}")] if reason is not None else []
        yield pytest.param(carried, commands, id=where, marks=marks)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The tracked files of this checkout, copied, with `.venv` linked to the running venv."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the docs' commands use a virtual environment; these tests run outside one")
    copy = tmp_path_factory.mktemp("checkout") / "dpspec"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    (copy / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return copy


def run_block(checkout: Path, carried: list[str], commands: list[tuple[str, int]]) -> list[str]:
    """Run one block in a fresh shell; the commands whose exit status is not the one shown."""
    work = checkout.parent
    codes = work / "codes"
    script = [f"exec 3>{codes}", f"cd {checkout}"]
    script += [f"{line} || exit 97" for line in carried]
    for command, _ in commands:
        script += [command, 'echo "$?" >&3']
    (work / "block.sh").write_text("\n".join(script) + "\n", encoding="utf-8")
    (work / "home").mkdir(exist_ok=True)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work / "home"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{checkout}{os.pathsep}{checkout / 'plugins'}",
        "TMPDIR": str(work),
    }
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", str(work / "block.sh")],
        stdin=subprocess.DEVNULL,
        env=env,
        capture_output=True,
        text=True,
        timeout=SECONDS_PER_COMMAND * len(commands) + 10,
    )
    got = [int(x) for x in codes.read_text().split()]
    wrong = [
        f"{command}: exit {got[i] if i < len(got) else 'none (the shell stopped)'}, shown as {code}"
        for i, (command, code) in enumerate(commands)
        if i >= len(got) or got[i] != code
    ]
    if wrong or proc.returncode not in (0, got[-1] if got else 0):
        wrong.append(
            f"shell exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
        )
    return wrong


@pytest.mark.parametrize("carried, commands", list(_params()))
def test_console_block_runs_as_written_from_a_fresh_shell(checkout, carried, commands):
    wrong = run_block(checkout, carried, commands)
    assert not wrong, "\n".join(wrong)


def test_blocks_not_run_say_why():
    """Each `<!-- not run: ... -->` gives its reason, and most blocks run."""
    blocks = list(console_blocks())
    skipped = [(where, reason) for where, _, _, reason in blocks if reason is not None]
    assert all(reason for _, reason in skipped), skipped
    assert len(skipped) <= len(blocks) // 4, skipped
    assert len(blocks) >= 15


def test_a_command_that_fails_is_reported_with_its_exit_status(checkout):
    """The harness has teeth: a wrong exit status, a page's `cd` and a bare `dpspec` outside the venv."""
    assert run_block(checkout, [], [("true", 0), ("exit 3  ", 0)])[0].startswith("exit 3  : exit none")
    assert run_block(checkout, [], [("false", 1), ("test -f README.md", 0)]) == []
    assert run_block(checkout, ["cd docs/tutorials"], [("test -f vision.dps", 0)]) == []
    assert run_block(checkout, [], [("command -v dpspec", 1)]) == []  # not on PATH until activated
    assert run_block(checkout, ["source .venv/bin/activate"], [("dpspec --version", 0)]) == []

"""The one way a benchmark publishes its result: a Markdown page under docs/performance/.

A script collects its rows as it prints them and calls `write(...)` at the end; the page says
which machine, when and with which command the figures were measured, so the documentation's
performance tables are always what a script last measured, never typed by hand. `--no-doc`
(added by `add_option`) leaves the page alone, e.g. for a trial run.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from pathlib import Path

PAGES = Path(__file__).resolve().parents[1] / "docs" / "performance"


def add_option(parser) -> None:
    parser.add_argument("--no-doc", action="store_true", help="do not write the result table to docs/performance/")


def _machine() -> str:
    try:
        load = ", load average %.1f" % os.getloadavg()[0]
    except OSError:
        load = ""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores{load}, Python {platform.python_version()}"


def _cell(value) -> str:
    return str(value).replace("|", "\\|")


def render(
    title: str,
    about: str,
    headers: list[str],
    rows: list[list],
    notes: list[str] = (),
    command: str | None = None,
    when: datetime.datetime | None = None,
) -> str:
    """The page's Markdown: title, what the script measures, the conditions, the table, notes."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    command = command or "python " + " ".join([f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    lines = [
        f"# {title}",
        "",
        about.strip(),
        "",
        f"Measured {when:%Y-%m-%d %H:%M} UTC on {_machine()}, by `{command}`. "
        "This page is written by the script; rerun it to refresh.",
        "",
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join("---" for _ in headers) + " |",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    if notes:
        lines += [""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def write(name: str, *args, enabled: bool = True, **kwargs) -> Path | None:
    """Write docs/performance/NAME.md (unless `enabled` is False) and say where."""
    if not enabled:
        return None
    path = PAGES / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(render(*args, **kwargs), encoding="utf-8")
    tmp.replace(path)
    print(f"wrote {path.relative_to(PAGES.parents[1])}")
    return path

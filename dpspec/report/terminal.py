"""Every command's output goes to the terminal through `echo`, which shows control characters as markers.

The core's commands and a plugin's (`dpspec.api.echo`) share it, so text is made safe at one place.

A spec's title, a category, a data value or a registry entry's field reaches the screen through
`audit`, `show`, `budget` and the error messages; raw, its escape sequences would hide the
findings after it or clear the screen. `echo` marks them (`dpspec.report.bidi.terminal_text`);
JSON output is ASCII with its controls already escaped, so it passes unchanged. Text that is a
file's content (`fmt`, `export` without `-o`) is kept byte for byte when it goes to a file or a
pipe, and marked only when it goes to a terminal.
"""

from __future__ import annotations

import sys

import click

from dpspec.report.bidi import terminal_text


def echo(message=None, err: bool = False, nl: bool = True, content: bool = False) -> None:
    """`click.echo` for every dpspec command. `content`: the text is a file's content, kept exact
    unless the stream is a terminal."""
    exact = content and not _is_terminal(err)
    if message is not None and not isinstance(message, (bytes, bytearray)) and not exact:
        message = terminal_text(message)
    click.echo(message, err=err, nl=nl, color=True if exact else None)  # (click strips ESC[...m off a pipe)


def _is_terminal(err: bool) -> bool:
    try:
        return (sys.stderr if err else sys.stdout).isatty()
    except (AttributeError, ValueError):
        return False

"""What a person meets first: the top-level help, each option's help and `dpspec plugins`, read
as a new user reads them (whole sentences, no Python values, every documented thing listed)."""

from __future__ import annotations

import click
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.contract.plugins import describe_mechanisms


def _commands(cmd=main, path=()):
    yield path, cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            yield from _commands(cmd.get_command(ctx, name), (*path, name))


def _listed(help_text: str) -> dict[str, str]:
    """The Commands section of a group's help: {name: its description, wrapped lines joined}."""
    rows: dict[str, str] = {}
    name = None
    for line in help_text.split("Commands:\n", 1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, text = line.strip().partition(" ")
            rows[name] = text.strip()
        elif line.strip() and name:
            rows[name] += " " + line.strip()
    return rows


def test_top_level_help_gives_each_command_its_first_sentence_whole():
    out = CliRunner().invoke(main, ["--help"]).output
    listed = _listed(out)
    ctx = click.Context(main)
    assert set(listed) == set(main.list_commands(ctx)) and "..." not in out.split("Commands:", 1)[1]
    for name, text in listed.items():
        assert text == main.get_command(ctx, name).get_short_help_str(limit=10_000), name
        assert text.endswith((".", ")")), f"{name}: {text!r} is not a whole sentence"


def test_every_json_option_has_help_text():
    bare = [
        " ".join(path)
        for path, cmd in _commands()
        for p in cmd.params
        if isinstance(p, click.Option) and "--json" in p.opts and not (p.help or "").strip()
    ]
    assert bare == []


def test_show_help_describes_what_it_prints():
    out = CliRunner().invoke(main, ["show", "--help"]).output
    for words in ("notation", "who is protected", "unit of protection", "mechanism", "reads no data"):
        assert words in out.replace("\n  ", " ").lower(), words


def test_plugins_text_lists_each_mechanisms_outputs_and_prints_no_python_none():
    out = CliRunner().invoke(main, ["plugins"]).output
    assert "None" not in out
    assert "[range" not in out  # open ends are words now: "at least 0"
    blocks = {}
    for line in out.splitlines():
        if not line.startswith(" "):
            current = line.split()[0]
            blocks[current] = []
        else:
            blocks[current].append(line.strip())
    for mech in describe_mechanisms():
        lines = blocks[mech["name"]]
        for name, doc in mech["outputs"].items():
            assert f"output {name}: {doc}" in lines, (mech["name"], name)
        if not mech["outputs"]:
            assert "outputs: none named in advance" in lines, mech["name"]

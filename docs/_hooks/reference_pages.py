"""Reference pages generated from dpspec itself: the command line, exit codes, mechanisms, audit
rules and the plugin API. Each reads what the code registers (the click group, the plugin
manager), so a command, mechanism or rule added by any installed plugin gets its page.

Hand-written additions live in `docs/_parts/`: `mechanisms/NAME.md` (what the mechanism proves,
its budget formula, bundled specs) and `rules/ID.md` (why it matters, the example pair, how to
fix). A built-in mechanism or rule without its part stops the build (`MissingPart`); a
third-party one gets a page from its own fields.
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
PARTS = DOCS / "_parts"
BUILTIN_PACKAGE = "dpspec"


class MissingPart(Exception):
    """A built-in mechanism or rule has no hand-written part: document it before building."""


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# ---- command line ------------------------------------------------------------------------


def _commands(group, ctx, prefix):
    import click

    for name in sorted(group.list_commands(ctx)):
        cmd = group.get_command(ctx, name)
        sub = click.Context(cmd, info_name=name, parent=ctx)
        yield f"{prefix} {name}", cmd, sub
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, sub, f"{prefix} {name}")


def _options_table(cmd, ctx) -> str:
    import click

    rows = []
    for param in cmd.get_params(ctx):
        if isinstance(param, click.Argument):
            rows.append((f"`{param.human_readable_name}`", "argument", "required" if param.required else "optional"))
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        opts, help_text = record
        rows.append((f"`{opts}`", "option", help_text or ""))
    if not rows:
        return ""
    lines = ["| parameter | kind | meaning |", "| --- | --- | --- |"]
    lines += [f"| {_cell(a)} | {b} | {_cell(c)} |" for a, b, c in rows]
    return "\n".join(lines)


def commands_reference() -> str:
    """Every command of the `dpspec` group, plugins' included, with its usage, help and options."""
    import click

    from dpspec.cli.main import main

    root = click.Context(main, info_name="dpspec")
    out = []
    for path, cmd, ctx in _commands(main, root, "dpspec"):
        usage = cmd.get_usage(ctx).replace("Usage: ", "", 1)
        help_text = (cmd.help or "").split("\f")[0].strip()
        origin = getattr(cmd.callback, "__module__", "") or ""
        added = "" if origin.startswith("dpspec.") else f"\n\nAdded by the plugin module `{origin.split('.')[0]}`."
        out.append(f"### `{path}`\n\n```text\n{usage}\n```\n\n{help_text}{added}\n\n{_options_table(cmd, ctx)}\n")
    return "\n".join(out)


def exit_codes_table() -> str:
    from dpspec.cli.errors import EXIT_CODES

    lines = ["| status | meaning |", "| ---: | --- |"]
    lines += [f"| {code} | {_cell(meaning)} |" for code, meaning in sorted(EXIT_CODES.items())]
    return "\n".join(lines)


# ---- JSON outputs -----------------------------------------------------------------------------

JSON_EXAMPLES = [
    ("dpspec show --json", ["show", "docs/tutorials/vision.dps", "--json"], None),
    ("dpspec budget --json", ["budget", "docs/tutorials/vision.dps", "--json"], None),
    ("dpspec audit --json", ["audit", "specs/audit/finer_unit.dps", "--json"], None),
    (
        "dpspec convert --json",
        ["convert", "rho=15.29", "--to", "approx", "--delta", "1e-10", "--method", "bs16", "--json"],
        None,
    ),
    ("dpspec plugins --json", ["plugins", "--json"], 1),  # the first mechanism only
]


def json_output(args: list[str]):
    """What `dpspec ARGS` prints, parsed, run from the repository root in this process."""
    import json
    import os

    from click.testing import CliRunner

    from dpspec.cli.main import main

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(here)
    return json.loads(result.stdout)


def json_examples() -> str:
    """Each command's real output on a bundled spec, produced when the site is built."""
    import json

    out = []
    for title, args, first in JSON_EXAMPLES:
        data = json_output(args)
        if first is not None:
            data = data[:first]
        out += [
            f"### `{title}`",
            "",
            f"`dpspec {' '.join(args)}`" + (" (the first entry)" if first else "") + ":",
            "",
            "```json",
            json.dumps(data, indent=2, ensure_ascii=False),
            "```",
            "",
        ]
    return "\n".join(out)


# ---- plugin API -----------------------------------------------------------------------------


def api_table() -> str:
    """Every name `dpspec.api` exports, with where it lives and the first line of its docstring."""
    import importlib

    from dpspec import api

    lines = ["| name | defined in | what it is |", "| --- | --- | --- |"]
    for name in api.__all__:
        where = api._WHERE.get(name, (api.__name__, name))  # names defined in dpspec.api itself
        module, attr = where if isinstance(where, tuple) else (where, name)
        obj = importlib.import_module(module)
        if attr is not None:
            obj = getattr(obj, attr)
        doc = (getattr(obj, "__doc__", None) or "").strip().split("\n\n")[0]
        doc = " ".join(doc.split())
        lines.append(f"| `{name}` | `{module}` | {_cell(doc)} |")
    return "\n".join(lines)


# ---- mechanisms ------------------------------------------------------------------------------


def _part(kind: str, name: str) -> str | None:
    path = PARTS / kind / f"{name}.md"
    return path.read_text(encoding="utf-8") if path.exists() else None


def _demote(markdown: str) -> str:
    """A part's own `# Title` becomes a section of the generated page."""
    return re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", markdown, flags=re.M)


_KEY_WORDS = {"levels": "LEVEL", "tables": "TABLE", "columns": "COLUMN", "names": "NAME", "choices": "KEY"}


def _type_text(p: dict) -> str:
    """A schema's type in words, nested ones spelled out ('map of levels to list of int')."""
    if p["type"] == "map":
        keys = ", ".join(p.get("choices", [])) if p.get("keys") == "choices" else p.get("keys") or "names"
        fields = [f["name"] for f in p.get("fields", ())]
        beside = f", with the setting{'s' if len(fields) > 1 else ''} {', '.join(fields)}" if fields else ""
        return f"map of {keys} to " + (_type_text(p["values"]) if "values" in p else "any value") + beside
    if p["type"] == "list":
        return "list of " + (_type_text(p["items"]) if "items" in p else "values")
    if p["type"] == "block" and p.get("fields"):
        return "block"
    if p["type"] == "either" and p.get("options"):
        return " or ".join(_type_text(o) for o in p["options"])
    return p["type"]


def _settings(params: list, prefix: str = ""):
    """(name as written in a spec, schema) of every parameter and nested setting, depth first:
    `tables.NAME.rho` for a block's setting inside a map keyed by names."""
    for p in params:
        name = f"{prefix}{p['name']}"
        yield name, p
        inner = p
        while True:
            if inner["type"] == "either":  # the settings of its block option, as a block writes them
                inner = next((o for o in inner.get("options", ()) if o["type"] in ("block", "map")), inner)
                if inner["type"] == "either":
                    break
            if inner["type"] == "map" and inner.get("fields"):  # a map's own settings, beside its keys
                yield from _settings(inner["fields"], name + ".")
            if inner["type"] not in ("map", "list") or not (inner.get("values") or inner.get("items")):
                break
            name += f".{_KEY_WORDS.get(inner.get('keys') or 'names')}" if inner["type"] == "map" else "[]"
            inner = inner.get("values") or inner.get("items")
        if inner["type"] == "block" and inner.get("fields"):
            yield from _settings(inner["fields"], name + ".")


def mechanism_pages() -> dict[str, str]:
    """'mechanisms/NAME.md' -> page, for every installed mechanism."""
    from dpspec.contract.plugins import describe_mechanisms

    pages = {}
    for m in describe_mechanisms():
        part = _part("mechanisms", m["name"])
        if part is None and m["package"] == BUILTIN_PACKAGE:
            raise MissingPart(
                f"built-in mechanism '{m['name']}' has no docs/_parts/mechanisms/{m['name']}.md "
                "(what it proves, its budget formula, its bundled specs: see docs/writing-docs.md)"
            )
        rows = [
            "| parameter | type | required | default | range or choices | meaning |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, p in _settings(m["parameters"]):
            bounds = p.get("range")
            allowed = (
                f"[{bounds[0] if bounds[0] is not None else '-inf'}, {bounds[1] if bounds[1] is not None else 'inf'}]"
                if bounds
                else ", ".join(p.get("choices", []))
                if p["type"] != "map"
                else ""
            )
            rows.append(
                f"| `{name}` | {_cell(_type_text(p))} | {'yes' if p['required'] else 'no'} | "
                f"{_cell(p.get('default', ''))} | {_cell(allowed)} | {_cell(p['doc'])} |"
            )
        outputs = ["| output | what it is |", "| --- | --- |"]
        outputs += [f"| `{name}` | {_cell(doc)} |" for name, doc in m["outputs"].items()]
        page = [
            f"# `{m['name']}`",
            "",
            f"{m['description']}",
            "",
            f"Version {m['version']}, from the package `{m['package']}` {m['package_version']}. "
            "The tables below are generated from the plugin's own parameter schema "
            f"(`dpspec plugins --json` shows the same).",
            "",
            "## Parameters",
            "",
            "\n".join(rows),
            "",
            "## Outputs",
            "",
            "\n".join(outputs) if m["outputs"] else "None declared.",
            "",
        ]
        if part is not None:
            page += [_demote(part)]
        else:
            page += [
                "*This mechanism comes from a third-party plugin; its page is generated from its own fields only.*"
            ]
        pages[f"mechanisms/{m['name']}.md"] = "\n".join(page).rstrip() + "\n"
    return pages


def mechanism_list() -> str:
    from dpspec.contract.plugins import describe_mechanisms

    return "\n".join(f"- [`{m['name']}`]({m['name']}.md): {m['description']}" for m in describe_mechanisms())


# ---- audit rules ----------------------------------------------------------------------------


_EXAMPLE = re.compile(r"^example:\s*(\S+)(?:\s+baseline:\s*(\S+))?\s*$", re.M)


def _rule_package(rule_obj) -> str:
    from dpspec.contract.plugins import manager, plugin_distribution

    for impl in manager().hook.dpspec_audit_rules.get_hookimpls():
        if any(r is rule_obj for r in (impl.function() or [])):
            return plugin_distribution(impl.plugin)[0]
    return "?"


@functools.lru_cache(maxsize=None)
def _findings(spec: str, baseline: str | None) -> tuple:
    """The audit of an example (several rules share one), once per build."""
    import dpspec

    return tuple(
        dpspec.audit(dpspec.load(str(ROOT / spec)), baseline=dpspec.load(str(ROOT / baseline)) if baseline else None)
    )


def _example_section(rule_id: str, spec: str, baseline: str | None) -> str:
    """The example pair as a diff against its baseline (or the spec alone), and what the audit
    says about it: run here, so an example that stops triggering its rule fails the build."""
    spec_path = ROOT / spec
    base_path = ROOT / baseline if baseline else None
    mine = [f for f in _findings(spec, baseline) if f.rule == rule_id]
    if not mine:
        raise MissingPart(
            f"audit rule '{rule_id}' does not fire on its example {spec}" + (f" against {baseline}" if baseline else "")
        )
    out = ["## Example", ""]
    command = f"dpspec audit {spec}" + (f" --baseline {baseline}" if baseline else "")
    if base_path:
        diff = difflib.unified_diff(
            base_path.read_text().splitlines(), spec_path.read_text().splitlines(), baseline, spec, lineterm="", n=2
        )
        out += [
            f"`{spec}` against its honest baseline `{baseline}` (a diff: `-` the baseline's lines, `+` the spec's):",
            "",
            "```diff",
            *diff,
            "```",
            "",
        ]
    else:
        out += [f"`{spec}`:", "", "```dps", spec_path.read_text().rstrip(), "```", ""]
    out += [f"`{command}` reports (computed when this page was built):", ""]
    out += [f"> **{f.severity}**: {f.message}" for f in mine]
    return "\n".join(out) + "\n"


def rule_pages() -> dict[str, str]:
    """'audit/ID.md' -> page, for every registered audit rule."""
    from dpspec.contract.plugins import audit_rules

    pages = {}
    for r in audit_rules():
        package = _rule_package(r)
        part = _part("rules", r.id)
        if part is None and package == BUILTIN_PACKAGE:
            raise MissingPart(
                f"built-in audit rule '{r.id}' has no docs/_parts/rules/{r.id}.md "
                "(why it matters, how to fix it, its example: see docs/writing-docs.md)"
            )
        needs = []
        if r.needs_baseline:
            needs.append("a `--baseline` spec")
        if r.needs_result:
            needs.append("the budget account (the spec must check and its data be readable)")
        page = [
            f"# `{r.id}`",
            "",
            f"**{r.title}.**",
            "",
            "| severity (at most) | needs | from |",
            "| --- | --- | --- |",
            f"| {r.severity} | {', '.join(needs) or 'the spec alone'} | `{package}` |",
            "",
            "## What it flags",
            "",
            r.description or "(the rule states no description)",
            "",
        ]
        if part is not None:
            match = _EXAMPLE.search(part)
            body = _EXAMPLE.sub("", part).strip()
            page += [_demote(body), ""]
            if match:
                page += [_example_section(r.id, match.group(1), match.group(2))]
        else:
            page += ["*This rule comes from a third-party plugin; its page is generated from its own fields only.*"]
        pages[f"audit/{r.id}.md"] = "\n".join(page).rstrip() + "\n"
    return pages


def rule_list() -> str:
    from dpspec.contract.plugins import audit_rules

    lines = ["| rule | severity | flags |", "| --- | --- | --- |"]
    lines += [f"| [`{r.id}`]({r.id}.md) | {r.severity} | {_cell(r.title)} |" for r in audit_rules()]
    return "\n".join(lines)


# ---- benchmark tables -----------------------------------------------------------------------


def performance_list() -> str:
    pages = sorted((DOCS / "performance").glob("bench_*.md"))
    if not pages:
        return "No benchmark has written its table yet."
    lines = []
    for page in pages:
        title = page.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
        lines.append(f"- [{title}]({page.name})")
    return "\n".join(lines)

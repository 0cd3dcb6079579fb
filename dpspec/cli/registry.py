"""`dpspec export --registry` and `dpspec import --registry`: specs to and from OpenDP
Deployments Registry entries (see `dpspec.registry`). Both validate against the registry's
schema and write atomically, or write nothing and exit 1 with located errors."""

from __future__ import annotations

import os

import click

from dpspec.cli.terminal import echo
from dpspec.cli.errors import friendly
from dpspec.errors import SpecError
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_input_guard = LazyModule("dpspec.publish.input_guard", "_input_guard", globals())
_atomic = LazyModule("dpspec.publish.atomic", "_atomic", globals())
_parser = LazyModule("dpspec.language.parser", "_parser", globals())
_opendp = LazyModule("dpspec.exporters.opendp", "_opendp", globals())
_run = LazyModule("dpspec.importers.run", "_run", globals())

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_output_set = LazyModule("dpspec.publish.output_set", "_output_set", globals())
_export = LazyModule("dpspec.registry.export", "_export", globals())
_entry = LazyModule("dpspec.registry.entry", "_entry", globals())
_importer = LazyModule("dpspec.registry.importer", "_importer", globals())


def _refuse_over_input(output: str | None, source: str, command: str) -> None:
    """Before any work: `-o` naming the file being read would replace it, and a file added to a
    compile's output set would break its manifest."""
    if output is not None:
        _input_guard.check_output_file(output, [source])
        _output_set.refuse_release_folder(os.path.dirname(os.path.abspath(output)), command)


def _write_or_print(text: str, output: str | None) -> None:
    if output is None:
        echo(text, nl=False, content=True)
        return

    _atomic.write_text(output, text)
    echo(f"wrote {output}", err=True)


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--registry", "registry", is_flag=True, help="Write an OpenDP Deployments Registry YAML entry.")
@click.option(
    "--opendp",
    "opendp",
    is_flag=True,
    help="Write a Python script that builds the mechanism as an OpenDP measurement and prints its privacy "
    "map (for mechanisms whose plugin can express it).",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write here instead of stdout.")
@friendly
def export_cmd(file, registry, opendp, output):
    """Export spec FILE as an OpenDP Deployments Registry entry (YAML, valid against its schema) or as
    an OpenDP script."""
    if registry == opendp:
        raise click.UsageError("say which format, once: --registry or --opendp")
    _refuse_over_input(output, file, "export")
    if opendp:
        _write_or_print(_opendp.opendp_script(file), output)
        return
    spec = _parser.parse(_parser.read_source(file), file)
    if spec.program is not None:
        raise SpecError("a program composes several releases; export each of its specs", file)
    _write_or_print(_export.entry_yaml(spec), output)


@click.command("import")
@click.argument("entry", type=click.Path(dir_okay=False))
@click.option("--registry", "registry", is_flag=True, help="ENTRY is an OpenDP Deployments Registry YAML entry.")
@click.option(
    "--das-config",
    "das",
    is_flag=True,
    help="ENTRY is a DAS .ini configuration (2020 P.L. 94-171 TopDown); its INCLUDE chain is followed.",
)
@click.option(
    "--safetab-p-config",
    "safetab_p",
    is_flag=True,
    help="ENTRY is a SafeTab-P config.json (Detailed DHC-A); the iteration files beside it are read.",
)
@click.option(
    "--safetab-h-config",
    "safetab_h",
    is_flag=True,
    help="ENTRY is a SafeTab-H config.json (Detailed DHC-B); the iteration files beside it are read.",
)
@click.option("--phsafe-config", "phsafe", is_flag=True, help="ENTRY is a PHSafe config.json (Supplemental DHC).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="The .dps file to write.")
@friendly
def import_cmd(entry, registry, das, safetab_p, safetab_h, phsafe, output):
    """Turn ENTRY (a registry entry or a production configuration) into a spec without data that
    check, budget and audit accept. Settings a configuration importer does not apply are listed
    in the spec as comments and on stderr."""
    chosen = [
        name
        for name, on in (
            ("--registry", registry),
            ("--das-config", das),
            ("--safetab-p-config", safetab_p),
            ("--safetab-h-config", safetab_h),
            ("--phsafe-config", phsafe),
        )
        if on
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "say which format, once: --registry, --das-config, --safetab-p-config, "
            "--safetab-h-config or --phsafe-config" + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    _refuse_over_input(output, entry, "import")
    if registry:
        _write_or_print(_importer.import_text(_entry.read_entry(entry)), output)
        return

    text, notes, files = _run.import_config(chosen[0].strip("-").removesuffix("-config"), entry, output)
    for line in notes:
        echo(line, err=True)
    inputs = [
        entry,
        *(
            os.path.join(os.path.dirname(os.path.abspath(entry)), f)
            for f in os.listdir(os.path.dirname(os.path.abspath(entry)))
        ),
    ]
    for path in _run.write_set(output, text, files, inputs):
        echo(f"wrote {path}", err=True)


def register(group: click.Group) -> None:
    group.add_command(export_cmd)
    group.add_command(import_cmd)


__all__ = ["register", "export_cmd", "import_cmd"]

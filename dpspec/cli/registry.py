"""`dpspec export --registry` and `dpspec import --registry`: specs to and from OpenDP
Deployments Registry entries (see `dpspec.registry`). Both validate against the registry's
schema and write atomically, or write nothing and exit 1 with located errors."""
from __future__ import annotations


import click

from dpspec.cli.terminal import echo
from dpspec.cli.errors import friendly


def _refuse_over_input(output: str | None, source: str, command: str) -> None:
    """Before any work: `-o` naming the file being read would replace it, and a file added to a
    compile's output set would break its manifest."""
    if output is not None:
        import os

        from dpspec.publish.input_guard import check_output_file
        from dpspec.publish.output_set import refuse_release_folder

        check_output_file(output, [source])
        refuse_release_folder(os.path.dirname(os.path.abspath(output)), command)


def _write_or_print(text: str, output: str | None) -> None:
    if output is None:
        echo(text, nl=False, content=True)
        return
    from dpspec.publish.atomic import write_text

    write_text(output, text)
    echo(f"wrote {output}", err=True)


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--registry", "registry", is_flag=True, required=True,
              help="Write an OpenDP Deployments Registry YAML entry (the only export format).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write here instead of stdout.")
@friendly
def export_cmd(file, registry, output):
    """Export spec FILE as an OpenDP Deployments Registry entry (YAML, valid against its schema)."""
    from dpspec.errors import SpecError
    from dpspec.language.parser import parse, read_source
    from dpspec.registry.export import entry_yaml

    if not registry:
        raise click.UsageError("say which format: --registry")
    _refuse_over_input(output, file, "export")
    spec = parse(read_source(file), file)
    if spec.program is not None:
        raise SpecError("a program composes several releases; export each of its specs", file)
    _write_or_print(entry_yaml(spec), output)


@click.command("import")
@click.argument("entry", type=click.Path(dir_okay=False))
@click.option("--registry", "registry", is_flag=True, required=True,
              help="ENTRY is an OpenDP Deployments Registry YAML entry (the only import format).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="The .dps file to write.")
@friendly
def import_cmd(entry, registry, output):
    """Turn registry ENTRY into a spec without data that check, budget and audit accept."""
    from dpspec.registry.entry import read_entry
    from dpspec.registry.importer import import_text

    if not registry:
        raise click.UsageError("say which format: --registry")
    _refuse_over_input(output, entry, "import")
    _write_or_print(import_text(read_entry(entry)), output)


def register(group: click.Group) -> None:
    group.add_command(export_cmd)
    group.add_command(import_cmd)


__all__ = ["register", "export_cmd", "import_cmd"]

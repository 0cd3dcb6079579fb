"""`dpspec certificate verify DIR`: a compile's set checked against its certificate.json, byte for byte."""

from __future__ import annotations

import sys

import click

from dpspec.cli.errors import friendly
from dpspec.cli.terminal import echo
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_certificate = LazyModule("dpspec.publish.certificate", "_certificate", globals())


@click.group("certificate")
def certificate_cmd():
    """Check the certificate a compile writes beside its release (certificate.json)."""


@certificate_cmd.command("verify")
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False))
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Also check that this spec file is, byte for byte, the one the set was compiled from.",
)
@friendly
def verify_certificate_cmd(folder, spec_path):
    """Refuse DIR (exit 1) if any file differs from its certificate: a changed byte in any file of the set,
    a file missing or added, an edited certificate, or an installed plugin whose files differ from those
    that ran."""
    problems, notes = _certificate.verify_certificate(folder, spec_path)
    for note in notes:
        echo(f"note: {note}", err=True)
    if problems:
        for p in problems:
            echo(f"error: {p}", err=True)
        echo(f"{folder}: REFUSED: {len(problems)} problem(s) against its certificate", err=True)
        sys.exit(1)
    echo(f"{folder}: certificate verified (every file, every plugin)")

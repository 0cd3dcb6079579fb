"""The `dpspec` command line.

Exit codes: 0 success; 1 a spec, data, budget or audit failure the user must fix; 2 a usage
error (click's own); 3 an internal error (a bug in dpspec or a plugin, see `dpspec.cli.errors`). Errors a user can cause are printed as messages, never as tracebacks.
"""
from __future__ import annotations

import json
import os
import sys

import click

from dpspec import ir
from dpspec.cli.errors import fail as _fail, friendly
from dpspec.cli.engine import engine_option, master_option
from dpspec.errors import DpspecError
from dpspec.cli.verify import verification_option, verify_cmd


def _load(path: str) -> ir.Spec:
    from dpspec.language.parser import parse, read_source

    return parse(read_source(path), path)


def _dump(data) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpspec")
def main():
    """dpspec: declare, compile and audit differential privacy specifications."""


@main.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@friendly
def check_cmd(files):
    """Check spec FILES: names, types, ranges, mechanism parameters, invariants."""
    from dpspec.check.checker import check

    failed = 0
    for path in files:
        try:
            spec = _load(path)
            if spec.program is None:
                check(spec)
            else:
                from dpspec.budget.program import load_program

                load_program(spec)
        except DpspecError as exc:
            click.echo(str(exc), err=True)
            failed += 1
        except RecursionError:
            click.echo(f"{path}: error: the input is nested too deeply to process", err=True)
            failed += 1
        else:
            click.echo(f"{path}: ok")
    if failed:
        sys.exit(1)


@main.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="The IR as JSON (stable, documented in docs/reference/json.md).")
@friendly
def show_cmd(file, as_json):
    """Show a spec's intermediate representation."""
    spec = _load(file)
    if as_json:
        _dump(ir.to_jsonable(spec))
        return
    from dpspec.language.describe import describe_spec

    click.echo(describe_spec(spec))


@main.command("fmt")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--write", is_flag=True, help="Rewrite FILE in place (atomically).")
@click.option("--check", "check_only", is_flag=True, help="Exit 1 if FILE is not in canonical form.")
@friendly
def fmt_cmd(file, write, check_only):
    """Print a spec in canonical form."""
    from dpspec.publish.atomic import write_text
    from dpspec.language.formatter import format_spec

    spec = _load(file)
    text = format_spec(spec)
    if check_only:
        if text != spec.text:
            _fail(f"{file}: not in canonical form (run dpspec fmt --write)")
        return
    if write:
        if text != spec.text:
            write_text(file, text)
        return
    click.echo(text, nl=False)


@main.command("compile")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "outdir", type=click.Path(file_okay=False), help="Output directory (default: out/<spec name>).")
@click.option("--seed", type=int, default=None, help="Make the run reproducible (voids the protection; the audit says so).")
@click.option("--runs", type=click.IntRange(1, 10_000), default=1, help="Repeat the mechanism to measure utility (internal report).")
@verification_option
@engine_option
@master_option
@friendly
def compile_cmd(file, outdir, seed, runs, engine_name, spark_master, verify_file=None):
    """Check FILE, run its mechanism on its data, write the release and the reports."""
    from dpspec.run.compiler import compile_spec
    from dpspec.publish.output import write_result

    spec = _load(file)
    outdir = outdir or os.path.join("out", os.path.splitext(os.path.basename(file))[0])
    from dpspec.cli.engine import engine_for, engine_note
    from dpspec.publish.input_guard import check_output_target, input_paths
    from dpspec.run.progress import StderrBar, reporting

    from dpspec.publish.output_set import claimed_target, refuse_release_folder

    check_output_target(outdir, input_paths(spec) + ([verify_file] if verify_file else []))  # before the run
    refuse_release_folder(outdir, "compile", itself=False)  # never a set nested inside another release
    if verify_file:  # a `dpspec verify --json` result (issue 14), read before the run so a bad file fails fast
        from dpspec.verify.finding import load_for, with_finding

        verified = load_for(verify_file, spec)
    click.echo(f"compiling {file} ...", err=True)
    with claimed_target(outdir, "compile"):  # a second writer into the same folder is refused, not interleaved
        with reporting(StderrBar()), engine_for(engine_name, spark_master) as engine:
            result = compile_spec(spec, seed=seed, runs=runs, engine=engine)
            if note := engine_note(result, engine_name):
                click.echo(note, err=True)
            if verify_file:  # the verification result becomes a finding
                result.audit_outcome = with_finding(result.audit_outcome, verified)
                result.findings = list(result.audit_outcome.findings)
            written = write_result(result, outdir)  # while the engine runs: it may stream the release
    ledger = result.ledger
    click.echo(f"mechanism: {result.mechanism.name} {result.mechanism.version}")
    if ledger.declared is not None:
        from dpspec.budget.budget_text import budget_line

        click.echo(f"budget in the spec's flavor: {budget_line(ledger.declared.to_json())}")
    elif ledger.problem:
        click.echo(f"budget: cannot be expressed in the spec's flavor: {ledger.problem}")
    for check in ledger.bounds:
        state = "holds" if check.holds else "EXCEEDED"
        click.echo(f"declared bound {check.bound.describe()}: {state} (achieved {check.achieved:.6g}; {check.currency})")
    if seed is not None:
        click.echo(f"warning: run with the known seed {seed}: anyone with the seed can remove the noise; not for publication", err=True)
    for name, info in written["outputs"].items():
        click.echo(f"wrote {os.path.join(outdir, info['file'])} ({info['rows']} rows)")
    for kind in ("html", "markdown", "json", "internal_html", "internal_markdown"):
        if kind in written:
            click.echo(f"wrote {os.path.join(outdir, written[kind])}")
    click.echo(f"wrote {os.path.join(outdir, written['manifest'])}")
    critical = [f for f in result.findings if getattr(f, "severity", "") == "critical"]
    for f in sorted(result.findings, key=lambda f: {"critical": 0, "warning": 1, "info": 2}.get(f.severity, 3)):
        click.echo(f"[{f.severity}] {f.rule}: {f.message}")
    if critical or not ledger.bounds_hold:
        sys.exit(1)


@main.command("budget")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.option("--delta", type=float, default=None, help="delta for conversions to approximate DP (default: the spec's, else 1e-10).")
@click.option("--conversion", type=click.Choice(["bs16", "cks20"]), default="cks20", show_default=True,
              help="zCDP to approximate DP conversion.")
@friendly
def budget_cmd(file, as_json, delta, conversion):
    """The budget a spec's mechanism achieves, in the paper's notation and in other currencies."""
    from dpspec.budget.budget_report import budget_summary, budget_text

    spec = _load(file)
    summary = budget_summary(spec, delta=delta, method=conversion)
    if as_json:
        _dump(summary)
    else:
        click.echo(budget_text(summary))
    if not summary["bounds_hold"]:
        if not as_json:
            click.echo("error: a declared budget bound is exceeded", err=True)
        sys.exit(1)


@main.command("convert")
@click.argument("params", nargs=-1, required=True)
@click.option("--to", "to", type=click.Choice(["pure", "approx", "zcdp", "renyi", "gdp"]), default=None)
@click.option("--delta", type=float, default=None)
@click.option("--epsilon", type=float, default=None, help="target epsilon (for delta at a given epsilon)")
@click.option("--alpha", type=float, default=None)
@click.option("--method", type=click.Choice(["bs16", "cks20"]), default="cks20", show_default=True)
@click.option("--from-unit", type=click.Choice(["hamming", "symdiff"]), default=None)
@click.option("--to-unit", type=click.Choice(["hamming", "symdiff"]), default=None)
@click.option("--group", type=click.IntRange(1), default=None, help="group privacy: a unit holding at most K finer units")
@click.option("--json", "as_json", is_flag=True)
@friendly
def convert_cmd(params, to, delta, epsilon, alpha, method, from_unit, to_unit, group, as_json):
    """Convert a budget, e.g. `dpspec convert rho=15.29 --to approx --delta 1e-10 --method bs16`."""
    from dpspec.budget import convert_request

    values = {}
    for item in params:
        if "=" not in item:
            raise click.UsageError(f"expected NAME=VALUE, got {item!r}")
        key, _, value = item.partition("=")
        values[key.strip()] = value.strip()
    out = convert_request(values, to=to, delta=delta, epsilon=epsilon, alpha=alpha, method=method,
                          from_unit=from_unit, to_unit=to_unit, group=group)
    if as_json:
        _dump(out)
        return
    skip = {"premetric", "method", "citation"}
    figures = ", ".join(f"{k} = {v}" for k, v in out.items() if k not in skip)
    click.echo(f"{out.get('premetric', '')}: {figures}")
    if out.get("method"):
        click.echo(f"method: {out['method']}")
    if out.get("citation"):
        click.echo(f"source: {out['citation']}")


@main.command("audit")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--baseline", type=click.Path(dir_okay=False), default=None, help="Compare against this spec.")
@click.option("-o", "--output", "outdir", type=click.Path(file_okay=False), default=None, help="Write the audit report here.")
@click.option("--json", "as_json", is_flag=True)
@verification_option
@friendly
def audit_cmd(file, baseline, outdir, as_json, verify_file=None):
    """Flag privacy theatrics in a spec (optionally against a baseline spec)."""
    from dpspec.cli.audit import run_audit_command

    code = run_audit_command(file, baseline, outdir, as_json, verify_file=verify_file)
    sys.exit(code)


@main.command("plugins")
@click.option("--json", "as_json", is_flag=True)
@friendly
def plugins_cmd(as_json):
    """List the installed mechanism plugins and their parameters."""
    from dpspec.contract.plugins import describe_mechanisms

    mechs = describe_mechanisms()
    if as_json:
        _dump(mechs)
        return
    for m in mechs:
        click.echo(f"{m['name']} {m['version']}  ({m['package']} {m['package_version']})")
        click.echo(f"    {m['description']}")
        for p in m["parameters"]:
            extra = []
            if p.get("required"):
                extra.append("required")
            if "default" in p:
                extra.append(f"default {p['default']}")
            if "range" in p:
                extra.append(f"range {p['range']}")
            if "choices" in p:
                extra.append("one of " + ", ".join(p["choices"]))
            suffix = f" [{'; '.join(extra)}]" if extra else ""
            click.echo(f"    {p['name']} ({p['type']}){suffix}: {p['doc']}")


@main.command("lsp")
@friendly
def lsp_cmd():
    """Serve the Language Server Protocol over stdin/stdout, for editors (needs the `lsp` extra)."""
    try:
        from dpspec.lsp.server import main as serve
    except ImportError as exc:
        _fail(f"dpspec lsp needs pygls: pip install 'dpspec[lsp]' ({exc})")
    serve()


main.add_command(__import__("dpspec.cli.infer", fromlist=["infer_cmd"]).infer_cmd)  # `dpspec infer` (seed 2)


def _add_plugin_commands():
    from dpspec.contract.plugins import failures, manager

    for impl in manager().hook.dpspec_cli.get_hookimpls():
        try:
            impl.function(group=main)
        except Exception as exc:  # a broken third-party plugin must not break the core commands
            click.echo(f"warning: plugin '{impl.plugin_name}' failed to add its commands: {exc}", err=True)
    for name, why in failures():
        click.echo(f"warning: plugin '{name}' failed to load: {why}", err=True)


main.add_command(verify_cmd)  # dpspec verify (dpspec/cli/verify.py)
_add_plugin_commands()
__import__("dpspec.cli.registry", fromlist=["register"]).register(main)  # export/import --registry (OpenDP Deployments Registry)

if __name__ == "__main__":
    main()

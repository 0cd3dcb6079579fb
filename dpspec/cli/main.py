"""The `dpspec` command line.

Exit codes: 0 success; 1 a spec, data, budget or audit failure the user must fix; 2 a usage
error (click's own); 3 an internal error (a bug in dpspec or a plugin, see `dpspec.cli.errors`). Errors a user can cause are printed as messages, never as tracebacks.
"""

from __future__ import annotations

import json
import os
import re
import sys

import attrs
import click

from dpspec.cli.terminal import echo
from dpspec import ir
from dpspec.cli.errors import friendly, error_document
from dpspec.cli.engine import engine_option, master_option, engine_for, engine_note
from dpspec.errors import DpspecError, DataError, render_diagnostics
from dpspec.cli.verify import verification_option, verify_cmd
from dpspec.report.bidi import terminal_text
from dpspec.check.checker import check
from dpspec.progress import StderrBar, reporting
from dpspec.budget.premetrics import InvalidBudget, to_exact
from dpspec.budget import convert_request
from dpspec.contract.plugins import deprecations, describe_mechanisms, failures, manager
from dpspec.lazy import require, LazyModule
from dpspec.language.diagnostics import unknown

# imported on first use: `dpspec --help` loads this module, not them
_parser = LazyModule("dpspec.language.parser", "_parser", globals())
_schemas = LazyModule("dpspec.schemas", "_schemas", globals())
_bounds = LazyModule("dpspec.budget.bounds", "_bounds", globals())
_program = LazyModule("dpspec.budget.program", "_program", globals())
_sarif = LazyModule("dpspec.report.sarif", "_sarif", globals())
_describe = LazyModule("dpspec.language.describe", "_describe", globals())
_atomic = LazyModule("dpspec.publish.atomic", "_atomic", globals())
_formatter = LazyModule("dpspec.language.formatter", "_formatter", globals())
_version = LazyModule("dpspec.language.version", "_version", globals())
_compile_json = LazyModule("dpspec.cli.compile_json", "_compile_json", globals())
_input_guard = LazyModule("dpspec.publish.input_guard", "_input_guard", globals())
_budget_text = LazyModule("dpspec.budget.budget_text", "_budget_text", globals())
_budget_report = LazyModule("dpspec.budget.budget_report", "_budget_report", globals())
_audit = LazyModule("dpspec.cli.audit", "_audit", globals())

# imported on first use: at import they would load numpy, pandas, scipy, pyarrow, pygls with this module
_certificate = LazyModule("dpspec.publish.certificate", "_certificate", globals())
_compiler = LazyModule("dpspec.run.compiler", "_compiler", globals())
_output = LazyModule("dpspec.publish.output", "_output", globals())
_limits = LazyModule("dpspec.check.limits", "_limits", globals())
_output_set = LazyModule("dpspec.publish.output_set", "_output_set", globals())
_finding = LazyModule("dpspec.verify.finding", "_finding", globals())
_server = LazyModule("dpspec.lsp.server", "_server", globals())


def _load(path: str) -> ir.Spec:
    return _parser.parse(_parser.read_source(path), path)


def _load_text(text: str, path: str) -> ir.Spec:
    return _parser.parse(text, path)


def _dump(kind: str, data) -> None:
    """A JSON document of format `kind`, stamped with its version (`dpspec.schemas`)."""
    echo(json.dumps(_schemas.versioned(kind, data), indent=2, sort_keys=False, default=str))


class _Group(click.Group):
    """dpspec's command group: a usage error (exit 2) of a command run with `--json` is also a
    JSON document on stdout, like every other failure of one (`dpspec.cli.errors.fail`)."""

    def format_commands(self, ctx, formatter):
        """Each command's first sentence whole, wrapped under its name: click cuts it to one line
        ("Flag privacy theatrics in a spec (optionally against a..."), mid-sentence."""
        rows = [
            (name, cmd.get_short_help_str(limit=10_000))
            for name in self.list_commands(ctx)
            if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx):
        protected = getattr(ctx, "_protected_args", None)  # click >= 8.2 names it so; older: protected_args
        words = [*(protected if protected is not None else ctx.protected_args), *ctx.args]  # invoke consumes them
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            _mark_controls(exc)
            if not isinstance(exc, click.UsageError):
                raise
            if isinstance(exc, click.NoSuchOption) and exc.option_name == "--format" and exc.ctx is not None:
                exc = click.UsageError(
                    f"`dpspec {exc.ctx.info_name}` has no findings to write as SARIF or in another "
                    "format: --format is for `dpspec check` (its problems) and `dpspec audit` (its "
                    "findings)",
                    exc.ctx,
                )
            if "--json" in words:
                message = f"Error: {exc.format_message()}"  # as click prints it on stderr
                echo(json.dumps(error_document(message, exc.exit_code), indent=2))
            raise exc


def _mark_controls(exc: click.ClickException) -> None:
    """click prints a bad argument as typed (a path holding ESC[2J): its message too goes through
    the terminal's marking."""

    shown = exc.format_message
    exc.format_message = lambda: terminal_text(shown())


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpspec")
def main():
    """dpspec: declare, compile and audit differential privacy specifications."""


def _bounds_hold(path: str, spec: ir.Spec, required: bool) -> None:
    """Raise a SpecError at each declared bound the mechanism does not meet. Data the budget needs
    but that cannot be read fails only when the bounds were asked for (`--bounds`); else a note."""
    try:
        _bounds.require_bounds(spec)
    except DataError as exc:
        if required:
            raise
        echo(
            f"{path}: note: the declared budget bounds were not checked: the budget needs the data, "
            f"which cannot be read ({exc})",
            err=True,
        )


FORMAT_SARIF = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "sarif"]),
    default="text",
    show_default=True,
    help="sarif: SARIF 2.1.0 on stdout, for code-scanning tools.",
)


@main.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--bounds/--no-bounds",
    default=None,
    help="Each spec's budget is computed and a declared bound "
    "(`budget epsilon <= ...`) that does not hold fails the check, at the bound's line. --bounds also fails "
    "when the budget needs data that cannot be read (by default a note says the bounds went unchecked); "
    "--no-bounds checks names and types only, reading no data.",
)
@FORMAT_SARIF
@friendly
def check_cmd(files, bounds, output_format):
    """Check spec FILES: names, types, ranges, mechanism parameters, invariants."""

    failures = []
    for path in files:
        stage = "parse-error"
        try:
            spec = _load(path)
            stage = "check-error"
            if spec.program is None:
                checked = check(spec)
                if checked.warnings:
                    echo(render_diagnostics(checked.warnings, spec.path, spec.text), err=True)
            else:
                _program.load_program(spec)
            if bounds is not False:
                _bounds_hold(path, spec, required=bool(bounds))
        except DpspecError as exc:
            stage = getattr(exc, "rule", stage)
            echo(str(exc), err=True)
            failures.append((path, stage, exc))
        except RecursionError:
            message = "error: the input is nested too deeply to process"
            echo(f"{path}: {message}", err=True)
            failures.append((path, stage, message))
        else:
            if output_format == "text":
                echo(f"{path}: ok")
    if output_format == "sarif":
        echo(json.dumps(_sarif.check_log(failures), indent=2))
    if failures:
        sys.exit(1)


@main.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="The IR as JSON (stable, documented in docs/reference/json.md).")
@friendly
def show_cmd(file, as_json):
    """Show what a spec declares, in words: its notation and the five questions.

    Prints the spec's one-line notation (the paper's), then who is protected, where protection
    extends, the unit of protection, how change is measured and how much protection, then its
    mechanism with its parameters and what it releases. It parses the spec and reads no data
    (`dpspec check` checks it); with --json, the whole intermediate representation as parsed.
    """
    spec = _load(file)
    if as_json:
        _dump("spec", ir.to_jsonable(spec))
        return

    echo(_describe.describe_spec(spec))


@main.command("fmt")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--write", is_flag=True, help="Rewrite FILE in place (atomically).")
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="Exit 1 if FILE is not in canonical form (with --upgrade: not at the current language version).",
)
@click.option(
    "--upgrade",
    is_flag=True,
    help="Rewrite FILE to the current .dps language version, keeping its layout "
    "(nothing to change yet: the language has one version).",
)
@friendly
def fmt_cmd(files, write, check_only, upgrade):
    """Print a spec in canonical form (or, with --upgrade, at the current language version).

    Several FILES need --check or --write (as a pre-commit hook gives them)."""
    if len(files) > 1 and not (check_only or write):
        raise click.UsageError(
            "several files: add --check or --write (printing them one after another would make one file of many)"
        )
    failed = [file for file in files if not _fmt_one(file, write, check_only, upgrade)]
    if failed:
        sys.exit(1)


def _fmt_one(file: str, write: bool, check_only: bool, upgrade: bool) -> bool:
    """One file of `dpspec fmt`; False when --check finds it not in form (or it cannot be read)."""
    try:
        raw = _parser.read_source(file)  # compared as read: a CRLF or bare-CR file is not in canonical form
        spec = _load_text(raw, file)
    except DpspecError as exc:
        echo(str(exc), err=True)
        return False
    if upgrade:
        text = _version.upgrade(spec.text)
        _load_text(text, file)  # an upgrade step that broke the file is a bug, never written
        howto = f"not at .dps language version {_version.LANGUAGE_VERSION} (run dpspec fmt --upgrade --write)"
    else:
        text = _formatter.format_spec(spec)
        howto = "not in canonical form (run dpspec fmt --write)"
    if check_only:
        if text != raw:
            echo(f"{file}: {howto}", err=True)
            return False
        return True
    if write:
        if text != raw:
            _atomic.write_text(file, text)
        return True
    echo(text, nl=False, content=True)
    return True


@main.command("compile")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "outdir",
    type=click.Path(file_okay=False),
    help="Output directory (default: out/<spec name>; beside the spec's folder when run from inside it).",
)
@click.option(
    "--seed", type=int, default=None, help="Make the run reproducible (voids the protection; the audit says so)."
)
@click.option(
    "--runs",
    type=click.IntRange(1, 10_000),
    default=1,
    help="Repeat the mechanism to measure utility (internal report).",
)
@click.option(
    "--max-data-bytes",
    "max_data",
    default=None,
    metavar="SIZE",
    help="Refuse a data source holding more than SIZE bytes (uncompressed; e.g. 500M, 8G; default 64G).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout (format `compile`: the files "
    "written, the budget, warnings and findings); a failure is the `error` document, with the same exit code.",
)
@click.option(
    "--sign",
    "signers",
    multiple=True,
    metavar="NAME:ROLE",
    help="Record a sign-off in certificate.json (repeat for several people), e.g. 'A. Reviewer:Privacy officer'.",
)
@click.option(
    "--allow-critical",
    is_flag=True,
    help="Exit 0 although the audit has a critical finding (a known seed, "
    "say): the reports then say which critical findings this compile was allowed to pass. An exceeded "
    "declared bound still exits 1.",
)
@verification_option
@engine_option
@master_option
@friendly
def compile_cmd(
    file,
    outdir,
    seed,
    runs,
    engine_name,
    spark_master,
    verify_file=None,
    max_data=None,
    as_json=False,
    allow_critical=False,
    signers=(),
):
    """Check FILE, run its mechanism on its data, write the release, the reports and the certificate."""
    try:
        signed = [_certificate.parse_signer(s) for s in signers]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sign") from None

    try:
        limit = None if max_data is None else _limits.parse_size(max_data)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-data-bytes") from None
    notes = []  # what stderr says as a warning or note: --json's `warnings` too
    _warn_deprecated_imports(notes)
    spec = _load(file)

    if not outdir:  # from inside the spec's folder the default moves beside it, never among the inputs
        outdir, moved = _input_guard.default_output(
            file, _input_guard.input_paths(spec) + ([verify_file] if verify_file else [])
        )
        if moved:
            notes.append(f"note: {moved}")
            echo(notes[-1], err=True)

    _input_guard.check_output_target(
        outdir, _input_guard.input_paths(spec) + ([verify_file] if verify_file else [])
    )  # before the run
    _output_set.refuse_release_folder(outdir, "compile", itself=False)  # never a set nested inside another release
    if verify_file:  # a `dpspec verify --json` result, read before the run so a bad file fails fast
        verified = _finding.load_for(verify_file, spec)
    echo(f"compiling {file} ...", err=True)
    with (
        _output_set.claimed_target(outdir, "compile"),
        _compile_json.native_stdout_to_stderr(as_json),
    ):  # one writer per folder
        with (
            reporting(StderrBar()),
            engine_for(engine_name, spark_master) as engine,
            _limits.data_limit(limit),
            _compile_json.shown_warnings(notes),
        ):
            result = _compiler.compile_spec(spec, seed=seed, runs=runs, engine=engine)
            if note := engine_note(result, engine_name):
                notes.append(note)
                echo(note, err=True)
            if verify_file:  # the verification result becomes a finding
                outcome = _finding.with_finding(result.audit_outcome, verified)
                result = attrs.evolve(result, audit_outcome=outcome, findings=list(outcome.findings))
            if allow_critical:  # said in the reports, which are written next
                result = attrs.evolve(
                    result, allowed_critical=tuple(f.rule for f in result.findings if f.severity == "critical")
                )
            written = _output.write_result(result, outdir, signed)  # while the engine runs: it may stream the release
    ledger = result.ledger
    if seed is not None:
        notes.append(
            f"warning: run with the known seed {seed}: anyone with the seed can remove the noise; not for publication"
        )
        echo(notes[-1], err=True)
    critical = [f for f in result.findings if getattr(f, "severity", "") == "critical"]
    if critical and allow_critical:
        notes.append(
            f"warning: --allow-critical: exit 0 despite {len(critical)} critical finding(s) "
            f"({', '.join(f.rule for f in critical)}); the reports say so"
        )
        echo(notes[-1], err=True)
    code = 1 if (critical and not allow_critical) or not ledger.bounds_hold else 0
    if as_json:
        _dump("compile", _compile_json.compile_document(file, outdir, result, written, notes, code))
        sys.exit(code)
    echo(f"mechanism: {result.mechanism.name} {result.mechanism.version}")
    if ledger.declared is not None:
        echo(f"budget in the spec's flavor: {_budget_text.budget_line(ledger.declared.to_json())}")
    elif ledger.problem:
        echo(f"budget: cannot be expressed in the spec's flavor: {ledger.problem}")
    for bound_check in ledger.bounds:
        state = "holds" if bound_check.holds else "EXCEEDED"
        echo(
            f"declared bound {bound_check.bound.describe()}: {state} (achieved {float(bound_check.achieved):.6g}; {bound_check.currency})"
        )
    for name, info in written["outputs"].items():
        echo(f"wrote {os.path.join(outdir, info['file'])} ({info['rows']} rows)")
    for kind in _compile_json.REPORT_KINDS:
        if kind in written:
            echo(f"wrote {os.path.join(outdir, written[kind])}")
    echo(f"wrote {os.path.join(outdir, written['manifest'])}")
    echo(f"wrote {os.path.join(outdir, written['certificate'])}")
    for f in sorted(result.findings, key=lambda f: {"critical": 0, "warning": 1, "info": 2}.get(f.severity, 3)):
        echo(f"[{f.severity}] {f.rule}: {f.message}")
    if code:
        sys.exit(code)


def _exact(param, value):
    """A budget number given on the command line, read exactly ('1e-10' is 10^-10, not the double
    nearest it), so the budget path gets the number the user wrote."""
    if value is None:
        return None

    try:
        return to_exact(value, param.name)
    except InvalidBudget as exc:
        raise click.BadParameter(str(exc)) from None


@main.command("budget")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout (format `budget`: the "
    "notation, the budget and its steps, conversions and bounds); a failure is the `error` document.",
)
@click.option(
    "--delta",
    type=str,
    default=None,
    callback=lambda c, p, v: _exact(p, v),
    help="delta for conversions to approximate DP (default: the spec's, else 1e-10).",
)
@click.option(
    "--conversion",
    type=click.Choice(["bs16", "cks20"]),
    default="cks20",
    show_default=True,
    help="zCDP to approximate DP conversion.",
)
@click.option(
    "--per-attribute",
    is_flag=True,
    help="Require the per-attribute and per-geography budgets (an error for a mechanism without attribute structure).",
)
@friendly
def budget_cmd(file, as_json, delta, conversion, per_attribute):
    """The budget a spec's mechanism achieves, in the paper's notation and in other currencies."""
    spec = _load(file)
    summary = _budget_report.budget_summary(spec, delta=delta, method=conversion, per_attribute=per_attribute)
    if as_json:
        _dump("budget", summary)
    else:
        echo(_budget_report.budget_text(summary))
    if not summary["bounds_hold"]:
        if not as_json:
            echo("error: a declared budget bound is exceeded", err=True)
        sys.exit(1)


@main.command("convert")
@click.argument("params", nargs=-1, required=True)
@click.option("--to", "to", type=click.Choice(["pure", "approx", "zcdp", "renyi", "gdp"]), default=None)
@click.option("--delta", type=str, default=None, callback=lambda c, p, v: _exact(p, v))
@click.option(
    "--epsilon",
    type=str,
    default=None,
    callback=lambda c, p, v: _exact(p, v),
    help="target epsilon (for delta at a given epsilon)",
)
@click.option("--alpha", type=str, default=None, callback=lambda c, p, v: _exact(p, v))
@click.option("--method", type=click.Choice(["bs16", "cks20"]), default="cks20", show_default=True)
@click.option("--from-unit", type=click.Choice(["hamming", "symdiff"]), default=None)
@click.option("--to-unit", type=click.Choice(["hamming", "symdiff"]), default=None)
@click.option(
    "--group", type=click.IntRange(1), default=None, help="group privacy: a unit holding at most K finer units"
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout (format `conversion`: "
    "the converted budget, its premetric, the method and its citation); a failure is the `error` document.",
)
@friendly
def convert_cmd(params, to, delta, epsilon, alpha, method, from_unit, to_unit, group, as_json):
    """Convert a budget to another currency, unit or group size.

    For example `dpspec convert rho=15.29 --to approx --delta 1e-10 --method bs16`."""

    values = {}
    for item in params:
        if "=" not in item:
            raise click.UsageError(f"expected NAME=VALUE, got {item!r}")
        key, _, value = item.partition("=")
        if "=" in value or re.search(r",\s*[A-Za-z]", value):  # rho=1,epsilon=2: two parameters in one argument
            raise click.UsageError(
                f"{item!r} holds more than one parameter; give each as its own NAME=VALUE "
                f"argument, separated by spaces: {' '.join(p.strip() for p in item.split(','))}"
            )
        if key.strip() in values:
            raise click.UsageError(f"{key.strip()} is given twice; give each parameter once")
        values[key.strip()] = value.strip()
    out = convert_request(
        values,
        to=to,
        delta=delta,
        epsilon=epsilon,
        alpha=alpha,
        method=method,
        from_unit=from_unit,
        to_unit=to_unit,
        group=group,
    )
    if as_json:
        _dump("conversion", out)
        return

    skip = {"premetric", "method", "citation"}
    figures = ", ".join(f"{k} = {_budget_text.budget_figure(v)}" for k, v in out.items() if k not in skip)
    echo(f"{out.get('premetric', '')}: {figures}")
    if out.get("method"):
        echo(f"method: {out['method']}")
    if out.get("citation"):
        echo(f"source: {out['citation']}")


@main.command("audit")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--baseline", type=click.Path(dir_okay=False), default=None, help="Compare against this spec.")
@click.option(
    "-o", "--output", "outdir", type=click.Path(file_okay=False), default=None, help="Write the audit report here."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the audit as one JSON document on stdout (format "
    "`findings` 2.0: an object whose `findings` list gives each rule, severity, message and evidence).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "sarif", "json-list"]),
    default=None,
    help="text (default), json (as --json), sarif: SARIF 2.1.0 for code-scanning tools, or json-list: "
    "deprecated, the bare list of findings format 1.0 (use --json).",
)
@verification_option
@friendly
def audit_cmd(file, baseline, outdir, as_json, output_format, verify_file=None):
    """Flag privacy theatrics in a spec (optionally against a baseline spec)."""
    if as_json and output_format not in (None, "json"):
        raise click.UsageError(f"--json and --format {output_format} ask for two formats; give one")
    code = _audit.run_audit_command(
        file, baseline, outdir, "json" if as_json else (output_format or "text"), verify_file=verify_file
    )
    sys.exit(code)


@main.command("schema")
@click.argument("kind", required=False)
@friendly
def schema_cmd(kind):
    """Print the JSON Schema of a JSON output KIND (without KIND: every kind and its format version)."""
    if kind is None:
        for name, version in sorted(_schemas.FORMAT_VERSIONS.items()):
            echo(f"{name} {version}  {_schemas.schema(name)['title']}")
        return
    if kind not in _schemas.FORMAT_VERSIONS:
        message, hint = unknown("JSON format", kind, _schemas.FORMAT_VERSIONS)
        raise click.BadParameter(message + (f"; {hint}" if hint else ""), param_hint="KIND")
    echo(json.dumps(_schemas.schema(kind), indent=2))


def _warn_deprecated_imports(into: list | None = None) -> None:
    """Once per plugin: the 0.1 import paths it still uses, each with the import to use instead
    (also appended to `into`, when given: `compile --json` lists them)."""

    for name, messages in deprecations().items():
        for message in messages:
            line = f"warning: plugin '{name}': DeprecationWarning: {message}"
            echo(line, err=True)
            if into is not None:
                into.append(line)


@main.command("plugins")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout (format `plugins`: each "
    "mechanism with its version, package, parameters and outputs).",
)
@friendly
def plugins_cmd(as_json):
    """List the installed mechanism plugins and their parameters."""

    _warn_deprecated_imports()
    mechs = describe_mechanisms()
    if as_json:
        _dump("plugins", mechs)
        return
    for m in mechs:
        echo(f"{m['name']} {m['version']}  ({m['package']} {m['package_version']})")
        echo(f"    {m['description']}")
        for p in m["parameters"]:
            extra = []
            if p.get("required"):
                extra.append("required")
            if "default" in p:
                extra.append(f"default {p['default']}")
            if "range" in p:
                extra.append(_range_text(*p["range"]))
            if "choices" in p:
                extra.append("one of " + ", ".join(p["choices"]))
            suffix = f" [{'; '.join(extra)}]" if extra else ""
            echo(f"    {p['name']} ({p['type']}){suffix}: {p['doc']}")
        if not m["outputs"]:
            echo("    outputs: none named in advance")
        for name, doc in m["outputs"].items():
            echo(f"    output {name}: {doc}")


def _range_text(low, high) -> str:
    """A parameter's range in words; an open end (None in the JSON) is not printed."""
    if low is None and high is None:
        return "any value"
    if high is None:
        return f"at least {low}"
    if low is None:
        return f"at most {high}"
    return f"from {low} to {high}"


@main.command("lsp")
@friendly
def lsp_cmd():
    """Serve the Language Server Protocol over stdin/stdout, for editors (needs the `lsp` extra)."""

    require("pygls", "lsp", "dpspec lsp")
    require("lsprotocol", "lsp", "dpspec lsp")

    _server.main()


main.add_command(__import__("dpspec.cli.infer", fromlist=["infer_cmd"]).infer_cmd)  # `dpspec infer` (seed 2)


def _with_error_handling(command: click.Command) -> None:
    """Wrap a plugin's command (and a group's subcommands) in `friendly`: plugins need no CLI helper."""
    if command.callback is not None and not getattr(command.callback, "_dpspec_friendly", False):
        command.callback = friendly(command.callback)
        command.callback._dpspec_friendly = True
    for sub in getattr(command, "commands", {}).values():
        _with_error_handling(sub)


def _add_plugin_commands():

    for impl in manager().hook.dpspec_cli.get_hookimpls():
        before = dict(main.commands)
        try:
            impl.function(group=main)
        except Exception as exc:  # a broken third-party plugin must not break the core commands
            echo(f"warning: plugin '{impl.plugin_name}' failed to add its commands: {exc}", err=True)
        for name, command in main.commands.items():
            if before.get(name) is not command:
                _with_error_handling(command)
    for name, why in failures():
        echo(f"warning: plugin '{name}' failed to load: {why}", err=True)


main.add_command(verify_cmd)  # dpspec verify (dpspec/cli/verify.py)
main.add_command(
    __import__("dpspec.cli.certificate", fromlist=["certificate_cmd"]).certificate_cmd
)  # dpspec certificate verify
main.add_command(__import__("dpspec.cli.sweep", fromlist=["sweep_cmd"]).sweep_cmd)  # dpspec sweep
_add_plugin_commands()
__import__("dpspec.cli.registry", fromlist=["register"]).register(
    main
)  # export/import --registry (OpenDP Deployments Registry)

if __name__ == "__main__":
    main()

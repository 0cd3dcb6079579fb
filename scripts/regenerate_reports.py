"""Regenerate `reports/` from every spec in `specs/` (the public reports only).

Each spec `specs/<dir>/<name>.dps` gets `reports/<dir>/<name>/report.{html,md,json}`. A spec
that checks and whose data is present is compiled (its mechanism runs, so the report shows the
release); one that does not check, or a program, gets an audit report from the spec alone. When
`<name>.baseline.dps` sits next to it, the report compares against that baseline. Internal
reports (utility against the confidential data) are never written here.

    python scripts/regenerate_reports.py            # all specs
    python scripts/regenerate_reports.py specs/audit/clean.dps ...

`reports/fingerprints.json` records, for each report, a SHA-256 of everything it was made from
(the spec, its baseline, included specs, data files, and dpspec's own code and templates), so
tests/test_report_regenerate.py regenerates only the reports whose inputs changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "plugins"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from dpspec.publish.atomic import write_text  # noqa: E402
from dpspec.errors import DpspecError  # noqa: E402
from dpspec.language.parser import load_text_or_path  # noqa: E402

PUBLIC_KINDS = ("html", "markdown", "json")


def baseline_for(path: Path) -> Path | None:
    if path.name.endswith(".baseline.dps"):
        return None
    candidate = path.with_name(path.name[: -len(".dps")] + ".baseline.dps")
    return candidate if candidate.exists() else None


def compiled_or_none(spec):
    """A compiled result when the spec checks and its data can be read, else None (and why)."""
    from dpspec.check.checker import check
    from dpspec.run.compiler import compile_spec

    if spec.program is not None:
        return None, "a program (audit report of its composition)"
    try:
        check(spec)
    except DpspecError:
        return None, "does not check (audit report from the spec alone)"
    try:
        return compile_spec(spec, audit=False), "compiled"
    except DpspecError as exc:
        return None, f"not compiled: {str(exc).splitlines()[0]}"


CODE_DIRS = ("dpspec", "plugins", "grammar")
CODE_SUFFIXES = (".py", ".lark", ".html", ".md", ".j2", ".css", ".js", ".toml")
FINGERPRINTS = "fingerprints.json"


def code_digest(root: Path = ROOT) -> str:
    """One hash of dpspec's code, plugins, grammar, templates and pyproject (what renders a report)."""
    h = hashlib.sha256()
    files = [root / "pyproject.toml"] + sorted(
        p
        for d in CODE_DIRS
        for p in (root / d).rglob("*")
        if p.is_file() and p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts
    )
    for f in files:
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _inputs(path: Path, seen: set) -> list[Path]:
    """The spec file, its baseline, included specs and data files, as far as they can be found."""
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    out = [path]
    base = baseline_for(path)
    if base:
        out += _inputs(base, seen)
    if infer_sidecar(path).is_file():
        out.append(infer_sidecar(path))
    try:
        spec = load_text_or_path(str(path))
    except DpspecError:
        return out
    for source in spec.data:
        data = Path(source.path) if Path(source.path).is_absolute() else path.parent / source.path
        if data.is_file():
            out.append(data)
    if spec.program is not None:
        for part in spec.program.parts:
            for rel in part.paths:
                out += _inputs((path.parent / rel).resolve(), seen)
    return out


def infer_sidecar(path: Path) -> Path:
    """`<name>.infer.json` beside a spec: the seed and target of its bundled `dpspec infer` example."""
    return path.with_name(path.name[: -len(".dps")] + ".infer.json")


INFER_FILES = ("report.html", "report.md", "result.json")


def fingerprint(path: Path, code: str) -> str:
    h = hashlib.sha256(code.encode())
    for f in _inputs(path.resolve(), set()):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def regenerate(path: Path, specs_dir: Path, reports_dir: Path) -> tuple[Path, str, str | None]:
    from dpspec.audit import audit
    from dpspec.report import render_all

    spec = load_text_or_path(str(path))
    result, how = compiled_or_none(spec)
    base_path = baseline_for(path)
    baseline = load_text_or_path(str(base_path)) if base_path else None
    outcome = audit(spec, result, baseline)
    rendered = render_all(result, spec=spec, baseline=baseline, outcome=outcome)
    rel = path.relative_to(specs_dir)
    outdir = reports_dir / rel.parent / rel.name[: -len(".dps")]
    for kind in PUBLIC_KINDS:
        filename, text = rendered[kind]
        write_text(str(outdir / filename), text)
    infer_example(path, outdir)
    return outdir, how, outcome.worst


def infer_example(path: Path, outdir: Path) -> None:
    """When `<name>.infer.json` sits next to the spec, compile it with the seed given there into a
    scratch directory and write `dpspec infer`'s report for the given target into outdir/infer
    (seeded twice, so the committed report is reproducible; the scratch release is discarded)."""
    import json
    import tempfile

    sidecar = infer_sidecar(path)
    if not sidecar.exists():
        return
    import dpspec
    from dpspec.inference.report import report_files
    from dpspec.publish.output import write_result

    example = json.loads(sidecar.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as scratch:
        write_result(dpspec.compile(str(path), seed=example["compile_seed"]), scratch)
        result = dpspec.infer(
            str(path),
            scratch,
            example["target"],
            draws=example.get("draws", 2000),
            seed=example["seed"],
            prior=example.get("prior"),
        )
        for filename, text in report_files(result, with_draws=False).values():  # the public reports only, no set
            write_text(str(outdir / "infer" / filename), text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", help="spec files (default: every .dps under specs/)")
    parser.add_argument("--specs-dir", default=str(ROOT / "specs"))
    parser.add_argument("--reports-dir", default=str(ROOT / "reports"))
    args = parser.parse_args(argv)
    specs_dir, reports_dir = Path(args.specs_dir).resolve(), Path(args.reports_dir).resolve()
    paths = [Path(p).resolve() for p in args.specs] or sorted(specs_dir.rglob("*.dps"))
    failures = 0
    code = code_digest()
    prints_path = reports_dir / FINGERPRINTS
    prints = json.loads(prints_path.read_text()) if prints_path.exists() and args.specs else {}
    index = [
        "# Reports generated from `specs/`",
        "",
        "Regenerate with `python scripts/regenerate_reports.py`. Public reports only.",
        "",
        "| spec | report | how | most severe finding |",
        "| --- | --- | --- | --- |",
    ]
    for path in paths:
        start = time.perf_counter()
        try:
            outdir, how, worst = regenerate(path, specs_dir, reports_dir)
        except DpspecError as exc:
            failures += 1
            print(f"FAILED {path}: {exc}", file=sys.stderr)
            continue
        rel_spec = path.relative_to(specs_dir)
        prints[str(rel_spec)] = fingerprint(path, code)
        rel_report = outdir.relative_to(reports_dir) / "report.html"
        index.append(f"| `{rel_spec}` | [{rel_report}]({rel_report}) | {how} | {worst or 'none'} |")
        print(f"{rel_spec}: {how}; most severe finding: {worst or 'none'} ({time.perf_counter() - start:.1f} s)")
    if not args.specs:
        write_text(str(reports_dir / "README.md"), "\n".join(index) + "\n")
    write_text(str(prints_path), json.dumps(dict(sorted(prints.items())), indent=1) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

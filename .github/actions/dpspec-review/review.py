"""The dpspec review step: audit every changed spec against its base version, in Markdown.

    python review.py --base origin/main [--fail-on critical] [--summary FILE] [SPEC ...]

Without SPEC arguments the specs are the .dps files `git diff BASE...HEAD` adds, modifies or
renames. Each one's base version (`git show BASE:path`) is written beside it for the run, so its
data paths resolve as the spec's own do, and `dpspec audit SPEC --baseline BASE -o DIR` writes
the comparison; its report.md is appended to the summary (GitHub's $GITHUB_STEP_SUMMARY). A spec
new in this change is audited alone. Exit 1 when a finding reaches --fail-on, 2 on a usage or git
error. Standard library only: it runs wherever dpspec is on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

RANK = {"critical": 0, "warning": 1, "info": 2}


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def changed_specs(base: str) -> list[str]:
    out = git("diff", "--name-only", "--diff-filter=AMR", f"{base}...HEAD", "--", "*.dps")
    return [line for line in out.splitlines() if line.strip()]


def base_text(base: str, path: str) -> str | None:
    """The spec as it was at BASE, or None when it is new."""
    rel = git("ls-files", "--full-name", "--", path).strip() or path
    done = subprocess.run(["git", "show", f"{base}:{rel}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def audit(path: str, baseline: str | None, dpspec: str) -> tuple[list[dict], str, str]:
    """(findings, report.md, stderr) of `dpspec audit`; findings empty when it failed."""
    with tempfile.TemporaryDirectory() as out:
        report = os.path.join(out, "report")
        cmd = [dpspec, "audit", path, "--json", "-o", report] + (["--baseline", baseline] if baseline else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        try:
            doc = json.loads(done.stdout)
        except ValueError:
            doc = None
        # findings 2.0 is an object holding `findings`; 1.0 (an older dpspec) a bare list
        findings = doc.get("findings") if isinstance(doc, dict) else doc
        if not isinstance(findings, list):  # an error document (or nothing): the audit did not run
            return [], "", doc.get("error", done.stderr) if isinstance(doc, dict) else done.stderr
        with open(os.path.join(report, "report.md"), encoding="utf-8") as fh:
            return findings, fh.read(), done.stderr


def review(specs: list[str], base: str, dpspec: str = "dpspec") -> tuple[str, list[dict], list[str]]:
    """(Markdown summary, every finding with its spec, specs that could not be audited)."""
    parts = [f"# dpspec review against `{base}`\n"]
    if not specs:
        parts.append("No .dps spec changed.\n")
    all_findings, failed = [], []
    for path in specs:
        old = base_text(base, path)
        folder, name = os.path.split(path)
        baseline = None
        if old is not None:
            baseline = os.path.join(folder, f".{name[:-4]}.base-{os.getpid()}.dps")
            with open(baseline, "w", encoding="utf-8") as fh:
                fh.write(old)
        try:
            findings, markdown, errors = audit(path, baseline, dpspec)
        finally:
            if baseline:
                os.remove(baseline)
        what = f"against its version at `{base}`" if old is not None else "new in this change: audited alone"
        parts.append(f"## `{path}` ({what})\n")
        if not markdown:
            failed.append(path)
            parts.append(f"The audit could not run:\n\n```text\n{errors.strip()}\n```\n")
            continue
        counts = {s: sum(f["severity"] == s for f in findings) for s in RANK}
        parts.append(" · ".join(f"{n} {s}" for s, n in counts.items()) + "\n")
        parts.append(_summary(markdown))
        all_findings += [{**f, "spec": path} for f in findings]
    return "\n".join(parts), all_findings, failed


# the report's sections a reviewer needs first; the whole report follows, folded
FIRST = ("The specification in one line", "Comparison with the baseline", "Audit findings")


def _summary(markdown: str) -> str:
    """The comparison, findings and one-line spec of a report.md, then the whole report folded
    (a report whose headings changed is shown whole)."""
    sections, current = [], None
    for line in markdown.splitlines():
        if line.startswith("## "):
            current = [line]
            sections.append(current)
        elif current is not None:
            current.append(line)
    chosen = [s for s in sections if s[0][3:].startswith(FIRST)]
    demoted = "\n".join("##" + line if line.startswith("#") else line for line in markdown.splitlines())
    if not chosen:
        return demoted + "\n"
    first = "\n".join("##" + line if line.startswith("#") else line for s in chosen for line in s)
    return f"{first}\n\n<details><summary>The whole audit report</summary>\n\n{demoted}\n\n</details>\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", help="specs to review (default: the .dps files changed since BASE)")
    parser.add_argument("--base", required=True, help="the commit or branch to compare against")
    parser.add_argument("--fail-on", choices=["critical", "warning", "never"], default="critical")
    parser.add_argument("--summary", default=None, help="append the Markdown here (default: print it)")
    parser.add_argument("--dpspec", default="dpspec", help="the dpspec executable")
    args = parser.parse_args(argv)
    specs = args.specs or changed_specs(args.base)
    markdown, findings, failed = review(specs, args.base, args.dpspec)
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as fh:
            fh.write(markdown)
    else:
        sys.stdout.write(markdown)
    limit = RANK.get(args.fail_on, -1)
    blocking = [f for f in findings if RANK[f["severity"]] <= limit]
    for f in blocking:
        print(f"{f['spec']}: [{f['severity']}] {f['rule']}: {f['message']}", file=sys.stderr)
    return 1 if blocking or failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""What stating the householder-elderly variable and the 522-value household type costs the DHC
households production spec.

The bundled US spec (specs/dhc_households_production_topdown.dps) states production's elderly
variable (4 levels, Constraints_DHCH.py:9-10) and its structural zeros (hh_elderly and the elderly
parts of living_alone, size2, size3 and size4, Constraints_DHCH.py:87-193), on production's
household type hhtype_dhch (522 values). This script compiles a copy without the elderly variable
(the variable and every zero that names it taken out) and the spec as bundled, one after the other
in one process on the bundled data, and prints each run's total time and, per level, the nodes,
the largest node's variables and the least-squares seconds: the nation node's fit, one problem over
every household cell outside the zeros, is where the time goes.

With --against REF it first compiles the spec and the bundled data as they were at the git
revision REF (for instance the commit before a change to the household type), in the same process.

    python benchmarks/bench_dhch_elderly.py [--pr] [--against REF]
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = {
    "us": os.path.join(ROOT, "specs", "dhc_households_production_topdown.dps"),
    "pr": os.path.join(ROOT, "specs", "dhc_households_production_topdown_pr.dps"),
}

# a structural zero of the households: its name line, its cell lines, its closing brace
ZERO = re.compile(r"        \w+: \{  #[^\n]*\n(?:          [^\n]*\n)+        \}\n")


def without_elderly(text: str) -> str:
    """The spec text without the elderly variable and the zeros that name it. (No query of the
    strategy then equals `detailed`: the household type is finer than the recode
    DetailedCoupleTypeMultGenDetOwnChildSize the largest query crosses.)"""
    text, n1 = re.subn(r"    elderly    : int 0\.\.3\n", "", text)
    text, n2 = re.subn(
        r"variables: sex, hhage, hisp, race, elderly, ten,", "variables: sex, hhage, hisp, race, ten,", text
    )
    text, n3 = ZERO.subn(lambda m: "" if "elderly:" in m.group(0) else m.group(0), text)
    if (n1, n2) != (1, 1) or "elderly:" in text or n3 == 0:
        sys.exit("the bundled spec changed shape: update bench_dhch_elderly.py")
    return text


def at_revision(ref: str, spec: str, work: str) -> str:
    """The spec and the bundled DHC data as they were at git revision `ref`, written under `work`."""

    def show(path: str) -> bytes:
        return subprocess.run(["git", "-C", ROOT, "show", f"{ref}:{path}"], check=True, capture_output=True).stdout

    data = os.path.join(work, "data", "dhc")
    os.makedirs(data, exist_ok=True)
    names = subprocess.run(
        ["git", "-C", ROOT, "ls-tree", "--name-only", f"{ref}:specs/data/dhc"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in names:
        with open(os.path.join(data, name), "wb") as f:
            f.write(show(f"specs/data/dhc/{name}"))
    path = os.path.join(work, "spec.dps")
    with open(path, "wb") as f:
        f.write(show(os.path.relpath(spec, ROOT)))
    return path


def run(path: str) -> None:
    import dpspec

    t0 = time.perf_counter()
    result = dpspec.compile(path, seed=1)
    total = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  total {total:.1f} s, peak memory of the process so far {peak:.0f} MB")
    for level, t in result.release.facts["timings"].items():
        print(
            f"  {level:<11} nodes {t.get('nodes', 0):>3}  largest node {t.get('max_variables', 0):>8,} variables  "
            f"least squares {t.get('qp_seconds', 0.0):6.1f} s  level {t.get('solve_seconds', 0.0):6.1f} s"
        )


def main() -> None:
    args = sys.argv[1:]
    spec = SPECS["pr" if "--pr" in args else "us"]
    against = args[args.index("--against") + 1] if "--against" in args else None
    work = tempfile.mkdtemp(prefix="bench_dhch_")
    try:
        print(f"{os.path.basename(spec)}, load average {os.getloadavg()[0]:.1f}")
        if against:
            before = os.path.join(work, "before")
            path = at_revision(against, spec, before)
            print(f"as bundled at {against}")
            run(path)
        shutil.copytree(os.path.join(ROOT, "specs", "data", "dhc"), os.path.join(work, "data", "dhc"))
        text = open(spec, encoding="utf-8").read()
        for name, body in (
            ("without elderly and its zeros", without_elderly(text)),
            ("as bundled (elderly stated)", text),
        ):
            path = os.path.join(work, "spec.dps")
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
            print(name)
            run(path)
        print(f"peak memory of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

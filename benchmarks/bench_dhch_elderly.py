"""What stating the householder-elderly variable costs the DHC households production spec.

The bundled US spec (specs/dhc_households_production_topdown.dps) states production's elderly
variable (4 levels, Constraints_DHCH.py:9-10) and its structural zeros (hh_elderly and the elderly
parts of living_alone, size2, size3 and size4, Constraints_DHCH.py:87-193). This script compiles
a copy without them (the variable and every zero that names it taken out, and the one query
that then equals the detailed histogram folded into it) and the spec as
bundled, one after the other in one process on the bundled data, and prints each run's total
time and, per level, the nodes, the largest node's variables and the least-squares seconds: the
nation node's fit, one problem over every household cell outside the zeros, is where the time
goes.

    python benchmarks/bench_dhch_elderly.py [--pr]
"""
from __future__ import annotations

import os
import re
import resource
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = {"us": os.path.join(ROOT, "specs", "dhc_households_production_topdown.dps"),
         "pr": os.path.join(ROOT, "specs", "dhc_households_production_topdown_pr.dps")}

# a structural zero of the households: its name line, its cell lines, its closing brace
ZERO = re.compile(r"        \w+: \{  #[^\n]*\n(?:          [^\n]*\n)+        \}\n")
# without elderly, this query of the strategy is the households' detailed histogram itself
SAME = "sex * hisp * ten * race * hhage * couple * multig * ownchild * size"
SHARES = re.compile(r" {10}" + re.escape(SAME) + r": (\S+)\n((?: {10}[^\n]*\n)*?) {10}detailed: (\S+)\n")


def without_elderly(text: str) -> str:
    """The spec text without the elderly variable and the zeros that name it. The query that
    then equals `detailed` is folded into it: one measurement with the two shares' sum (two
    Gaussian measurements of one query carry what one with the summed rho does)."""
    from fractions import Fraction

    text, n1 = re.subn(r"    elderly    : int 0\.\.3\n", "", text)
    text, n2 = re.subn(r"variables: sex, hhage, hisp, race, elderly, ten,", "variables: sex, hhage, hisp, race, ten,", text)
    text, n3 = ZERO.subn(lambda m: "" if "elderly:" in m.group(0) else m.group(0), text)
    text, n4 = SHARES.subn(lambda m: f"{m.group(2)}          detailed: {Fraction(m.group(1)) + Fraction(m.group(3))}\n", text)
    text, n5 = re.subn(re.escape(f'"households: {SAME}", '), "", text)
    if (n1, n2) != (1, 1) or "elderly:" in text or n4 == 0 or n5 != n4 or SAME in text.split('spec "')[1]:
        sys.exit("the bundled spec changed shape: update bench_dhch_elderly.py")
    return text


def run(path: str) -> None:
    import dpspec

    t0 = time.perf_counter()
    result = dpspec.compile(path, seed=1)
    total = time.perf_counter() - t0
    print(f"  total {total:.1f} s")
    for level, t in result.release.facts["timings"].items():
        print(f"  {level:<11} nodes {t.get('nodes', 0):>3}  largest node {t.get('max_variables', 0):>8,} variables  "
              f"least squares {t.get('qp_seconds', 0.0):6.1f} s  level {t.get('solve_seconds', 0.0):6.1f} s")


def main() -> None:
    spec = SPECS["pr" if "--pr" in sys.argv[1:] else "us"]
    work = tempfile.mkdtemp(prefix="bench_dhch_")
    try:
        shutil.copytree(os.path.join(ROOT, "specs", "data", "dhc"), os.path.join(work, "data", "dhc"))
        text = open(spec, encoding="utf-8").read()
        print(f"{os.path.basename(spec)}, load average {os.getloadavg()[0]:.1f}")
        for name, body in (("without elderly and its zeros", without_elderly(text)), ("as bundled (elderly stated)", text)):
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

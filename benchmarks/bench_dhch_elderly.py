"""What stating the householder-elderly variable would cost the DHC households production spec.

The bundled US spec (specs/dhc_households_production_topdown.dps) leaves production's elderly
variable (4 levels, Constraints_DHCH.py:9-10) and its structural zeros out. This script compiles
the spec as bundled and a copy that states them (the variable, hh_elderly and the elderly parts of
living_alone, size2, size3 and size4, Constraints_DHCH.py:87-193, on the bundled households, which
respect them), one after the other in one process, and prints each run's total time and, per
level, the nodes, the largest node's variables and the least-squares seconds: the nation node's fit
is where the time goes.

    python benchmarks/bench_dhch_elderly.py
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
SPEC = os.path.join(ROOT, "specs", "dhc_households_production_topdown.dps")

# production's elderly zeros (Constraints_DHCH.py line: cells), on hhage (9 groups, hhage.py),
# elderly (0 none 60+, 1 60-64, 2 65-74, 3 75+, hhelderly.py) and the household-type factors
ELDERLY_ZEROS = {
    "hh_elderly_eld3": {"hhage": [7, 8], "elderly": [0, 1, 2]},  # 191
    "hh_elderly_2": {"hhage": [6], "elderly": [0, 1]},  # 192
    "hh_elderly_3": {"hhage": [5], "elderly": [0]},  # 193
    "living_alone_eld0": {"size": [1], "hhage": [0, 1, 2, 3, 4], "elderly": [1, 2, 3]},  # 87
    "living_alone_eld1": {"size": [1], "hhage": [5], "elderly": [0, 2, 3]},  # 88
    "living_alone_eld2": {"size": [1], "hhage": [6], "elderly": [0, 1, 3]},  # 89
    "living_alone_eld3": {"size": [1], "hhage": [7, 8], "elderly": [0, 1, 2]},  # 90
    "size2_le25_eld3": {"size": [2], "couple": [1, 2], "hhage": [0], "elderly": [3]},  # 112
    "size3_le25_eld3": {"size": [3], "couple": [1, 2], "ownchild": [1, 2, 3], "hhage": [0], "elderly": [3]},  # 121
    "size3_eld0": {"size": [3], "ownchild": [3], "hhage": [0, 1, 2, 3, 4], "elderly": [1, 2, 3]},  # 132
    "size3_eld1": {"size": [3], "ownchild": [3], "hhage": [5], "elderly": [0, 2, 3]},  # 133
    "size3_eld2": {"size": [3], "ownchild": [3], "hhage": [6], "elderly": [0, 1, 3]},  # 134
    "size3_eld3": {"size": [3], "ownchild": [3], "hhage": [7, 8], "elderly": [0, 1, 2]},  # 135
    "size4_le25_eld3": {"size": [4], "couple": [1, 2], "ownchild": [3], "hhage": [0], "elderly": [3]},  # 151
}


def with_elderly(text: str) -> str:
    """The spec text with the elderly variable and its zeros stated."""
    zeros = "".join(f"        {name}: {{\n" + "".join(f"          {v}: [{', '.join(map(str, vals))}]\n"
                                                   for v, vals in cells.items()) + "        }\n"
                    for name, cells in ELDERLY_ZEROS.items())
    text, n1 = re.subn(r"(    race       : int 0\.\.6\n)", r"\1    elderly    : int 0..3\n", text)
    text, n2 = re.subn(r"variables: sex, hhage, hisp, race, ten,", "variables: sex, hhage, hisp, race, elderly, ten,", text)
    text, n3 = re.subn(r"(      structural_zeros: \{\n)", lambda m: m.group(1) + zeros, text)
    if (n1, n2, n3) != (1, 1, 1):
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
    work = tempfile.mkdtemp(prefix="bench_dhch_")
    try:
        shutil.copytree(os.path.join(ROOT, "specs", "data", "dhc"), os.path.join(work, "data", "dhc"))
        text = open(SPEC, encoding="utf-8").read()
        for name, body in (("as bundled (no elderly)", text), ("with elderly and its zeros", with_elderly(text))):
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

"""Write tests/unit_durations.json: each scheduling unit's seconds in the last full run.

The scheduler in tests/conftest.py hands out the longest unit first. It reads the durations of
the previous run from pytest's cache; a fresh clone (CI's) has none, and without them the long
units may start last. This file is what it uses then. Run it after a full `pytest -q`:

    .venv/bin/python scripts/record_unit_durations.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import DURATIONS_KEY, UNIT_DURATIONS, _spark_tests, unit_totals  # noqa: E402


def main() -> int:
    cache = ROOT / ".pytest_cache" / "v" / DURATIONS_KEY
    if not cache.exists():
        print(f"no durations at {cache}: run the whole suite first (pytest -q)", file=sys.stderr)
        return 1
    totals = unit_totals(json.loads(cache.read_text()), _spark_tests())
    Path(UNIT_DURATIONS).write_text(json.dumps(totals, indent=1) + "\n")
    print(f"{len(totals)} units, {sum(totals.values()):.0f} s of test time -> {UNIT_DURATIONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

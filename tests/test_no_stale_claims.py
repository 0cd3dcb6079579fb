"""No stale claims (issue 30): a reader relies on every status line ("still open", "not yet",
"TODO", "known bug") and every measured figure (seconds, megabytes, ratios to a floor) in the
README and the docs. Each such paragraph must be listed in `tests/claims.json` with its
evidence: a file of the repository (a test that pins a behaviour, the benchmark script that
measures a figure) and, optionally, a string that file must contain. Paragraphs are matched
by their words, not by position, so the check follows the README into any new shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = Path(__file__).with_name("claims.json")

STATUS = re.compile(
    r"\b(still open|not yet|TODO|FIXME|XXX|known bugs?|coming soon|work in progress|TBD|"
    r"to be (?:done|fixed)|temporarily)\b",
    re.IGNORECASE,
)
# a measured time, size or ratio: "7.1 s", "1.0 GB", "520 MB", "1.89x the floor", "x9.5 the time"
FIGURE = re.compile(
    r"\b\d[\d,]*(?:\.\d+)?\s?(?:ms|s|min|KB|MB|GB|KiB|MiB|GiB)\b(?!-)|"
    r"\b\d+(?:\.\d+)?x (?:the|that) floor|\bx\d+(?:\.\d+)? the time"
)


WRITTEN_BY_SCRIPT = "This page is written by the script"


def documents() -> list[Path]:
    """README and docs pages, less the benchmark pages a script writes (their figures are its output)."""
    docs = sorted((ROOT / "docs").rglob("*.md")) if (ROOT / "docs").is_dir() else []
    return [
        p for p in [ROOT / "README.md", *docs] if p.is_file() and WRITTEN_BY_SCRIPT not in p.read_text(encoding="utf-8")
    ]


def paragraphs(text: str) -> list[str]:
    """Blocks between blank lines, outside fenced code (a command's output is not a claim)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [" ".join(block.split()) for block in re.split(r"\n\s*\n", text) if block.strip()]


def claims() -> list[dict]:
    return json.loads(CLAIMS.read_text(encoding="utf-8"))


def hits() -> list[tuple[str, str, str]]:
    """(document, kind, paragraph) for every paragraph holding a status phrase or a figure."""
    out = []
    for doc in documents():
        for para in paragraphs(doc.read_text(encoding="utf-8")):
            if STATUS.search(para):
                out.append((doc.relative_to(ROOT).as_posix(), "status", para))
            elif FIGURE.search(para):
                out.append((doc.relative_to(ROOT).as_posix(), "figure", para))
    return out


def test_every_status_line_and_measured_figure_is_listed_with_evidence():
    listed = claims()
    missing = []
    for doc, kind, para in hits():
        entry = next((c for c in listed if c["kind"] == kind and " ".join(c["claim"].split()) in para), None)
        if entry is None:
            missing.append(f"{doc}: {kind}: {para[:160]}")
    assert not missing, (
        "claims without evidence (add them to tests/claims.json with the file that backs "
        "them, or correct the text):\n" + "\n".join(missing)
    )


@pytest.mark.parametrize("entry", claims(), ids=lambda c: c["claim"][:40])
def test_the_evidence_of_each_listed_claim_exists(entry):
    assert entry["kind"] in ("status", "figure") and entry["claim"].strip()
    evidence = ROOT / entry["evidence"]
    assert evidence.is_file(), f"{entry['evidence']} does not exist"
    if entry.get("contains"):
        assert entry["contains"] in evidence.read_text(encoding="utf-8"), (entry["evidence"], entry["contains"])


def test_the_scan_sees_a_stale_claim():
    text = "Intro.\n\nThe recode bug is still open.\n\n```\nTODO in a code block\n```\n\nIt took 3.5 s and 120 MB.\n"
    paras = paragraphs(text)
    assert [bool(STATUS.search(p)) for p in paras] == [False, True, False]
    assert [bool(FIGURE.search(p)) for p in paras] == [False, False, True]
    assert not FIGURE.search("a 5% rate, 10M persons, 2 cores, version 1.0")

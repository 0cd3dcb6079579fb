"""The HTML report in a real headless browser: it renders the key sections, escapes what it
must, and makes no request to any host (checked in Chromium's own network log, with a page
that does leak as the control). The screenshot is kept under tests/artifacts/."""
from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dpspec.run.compiler import compile_spec
from dpspec.language.parser import load_text_or_path
from dpspec.report import render_all

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ROOT / "specs" / "audit"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian package 'chromium')"),
]


def chromium(url: str, profile: Path, *extra: str, timeout: int = 60) -> subprocess.CompletedProcess:
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
            # Nothing may reach the network from the test, even the browser's own housekeeping.
            "--host-resolver-rules=MAP * ~NOTFOUND", *extra, url]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True)


def page_requests(netlog: Path) -> list[str]:
    """URLs the page itself asked for (the browser's own requests have no origin initiator)."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        url = params.get("url")
        if event["type"] == start and url and params.get("initiator") != "not an origin":
            if not url.startswith(("file:", "data:")):
                urls.append(url)
    return urls


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.text, self.refs, self._skip = [], [], 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("style", "script")
        self.refs += [v or "" for k, v in attrs if k in ("src", "href", "xlink:href", "action", "srcset")]

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "script")

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The richest example: a compiled swap with a baseline, findings of several severities."""
    result = compile_spec(load_text_or_path(str(AUDIT / "added_invariants.dps")), audit=False)
    html = render_all(result, baseline=load_text_or_path(str(AUDIT / "added_invariants.baseline.dps")))["html"][1]
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(html, encoding="utf-8")
    return path


def test_the_report_renders_its_key_sections(report, tmp_path):
    dom = chromium(report.as_uri(), tmp_path / "profile", "--dump-dom").stdout
    parser = _Text()
    parser.feed(dom)
    text = " ".join(" ".join(parser.text).split())
    for heading in ("The specification in one line", "The five questions", "Invariants: what is published exactly",
                    "Budget", "Ledger: from the mechanism's flavor to the spec's", "Declared bounds",
                    "Audit findings (most severe first)", "Comparison with the baseline", "Provenance"):
        assert heading in text, heading
    assert "5.25-DP(X_edited(survey_households), D[block×size×tenure], d_Hamming(household), MULT)" in text
    assert "public report" in text.lower() and "For publication" in text
    assert "added-invariants" in text and "count households by block, size, tenure" in text
    assert "Who is protected?" in text and "How much protection?" in text
    assert "bs16" in text and "cks20" in text
    assert all(ref.startswith(("#", "data:")) for ref in parser.refs)
    assert "<svg" in dom


def test_the_report_makes_no_request(report, tmp_path):
    netlog = tmp_path / "netlog.json"
    chromium(report.as_uri(), tmp_path / "profile", f"--log-net-log={netlog}", "--dump-dom")
    assert page_requests(netlog) == []


def test_the_request_detector_sees_a_leaking_page(tmp_path):
    leak = tmp_path / "leak.html"
    leak.write_text('<html><body><img src="https://example.invalid/beacon.png"></body></html>')
    netlog = tmp_path / "netlog.json"
    chromium(leak.as_uri(), tmp_path / "profile", f"--log-net-log={netlog}", "--dump-dom")
    assert page_requests(netlog) == ["https://example.invalid/beacon.png"]


def test_screenshot(report, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-added-invariants.png"
    shot.unlink(missing_ok=True)
    chromium(report.as_uri(), tmp_path / "profile", f"--screenshot={shot}", "--window-size=1100,2600",
             "--hide-scrollbars")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank page compresses far smaller


# ---- SafeTab (issue 9): both production specs compiled, public and internal reports ----------


@pytest.mark.parametrize("name", ["safetab_p_production", "safetab_h_production"])
def test_safetab_reports_render_without_requests(name, tmp_path):
    result = compile_spec(load_text_or_path(str(ROOT / "specs" / f"{name}.dps")), seed=3, runs=2)
    files = render_all(result)
    texts = {}
    for kind in ("html", "internal_html"):
        path = tmp_path / f"{kind}.html"
        path.write_text(files[kind][1], encoding="utf-8")
        netlog = tmp_path / f"{kind}-netlog.json"
        dom = chromium(path.as_uri(), tmp_path / f"profile-{kind}", f"--log-net-log={netlog}", "--dump-dom").stdout
        assert page_requests(netlog) == []
        parser = _Text()
        parser.feed(dom)
        texts[kind] = " ".join(" ".join(parser.text).split())
    public, internal = texts["html"], texts["internal_html"]
    assert "SafeTab: adaptive design and expected error per table size" in public
    assert "noise sd per cell" in public and "Fan-out per iteration level" in public
    assert "realized error" not in public.lower()  # computed against the confidential data
    assert "SafeTab: realized error by level and table size" in internal
    if name == "safetab_h_production":
        assert "public-information" in public and "SafeTab-P" in public
    else:
        assert "Stage 1 measures each group's total with 0.1 of its budget" in public

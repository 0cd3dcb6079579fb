"""The HTML report in a real headless browser: it renders the key sections, escapes what it
must, and makes no request to any host (checked in Chromium's own network log, with a page
that does leak as the control). The screenshot is kept under tests/artifacts/."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape
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
    pytest.mark.slow,  # starts headless Chromium
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian package 'chromium')"),
]


def chromium(url: str, profile: Path, *extra: str, timeout: int = 60) -> subprocess.CompletedProcess:
    args = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        # Nothing may reach the network from the test, even the browser's own housekeeping.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        *extra,
        url,
    ]
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
    for heading in (
        "The specification in one line",
        "The five questions",
        "Invariants: what is published exactly",
        "Budget",
        "Ledger: from the mechanism's flavor to the spec's",
        "Declared bounds",
        "Audit findings (most severe first)",
        "Comparison with the baseline",
        "Provenance",
    ):
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
    chromium(
        report.as_uri(), tmp_path / "profile", f"--screenshot={shot}", "--window-size=1100,2600", "--hide-scrollbars"
    )
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


# ---- issue 30: the report fits the page at a desktop's and a phone's width and in print ------

# A copy of the report gets a script (its CSP forbids scripts, so the copy drops the CSP) that
# lists every element reaching past the viewport's right edge, and every box whose content is
# clipped sideways (a table hidden behind a scrollbar counts as not fitting).
_MEASURE = """<script>
addEventListener('load', () => {
  const w = document.documentElement.clientWidth, bad = [];
  for (const el of document.querySelectorAll('main *')) {
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    if (r.width === 0 || s.display === 'none' || el.closest('thead')) continue;
    if (r.right > w + 1) bad.push('past edge: ' + el.tagName + ' ' + (el.textContent || '').trim().slice(0, 40));
    if (s.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1)
      bad.push('clipped: ' + el.tagName + ' ' + (el.textContent || '').trim().slice(0, 40));
  }
  const out = document.createElement('pre');
  out.id = 'fit-result';
  out.textContent = JSON.stringify({width: w, page: document.documentElement.scrollWidth, bad: bad});
  document.body.appendChild(out);
});
</script>"""


def measured_fit(html: str, tmp_path: Path, width: int, print_css: bool = False) -> dict:
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    if print_css:  # the print rules applied on screen at the printable width of a page
        html = html.replace("@media print", "@media all")
    # Headless Chromium will not make a window narrower than 500 px, so the page is measured in
    # a frame of the wanted width (its own viewport: media queries see that width).
    frame = html.replace("</body>", _MEASURE + "</body>").replace("&", "&amp;").replace('"', "&quot;")
    wrapper = (
        f'<html><body style="margin:0"><iframe id="f" style="border:0;width:{width}px;height:2000px" '
        f'srcdoc="{frame}"></iframe><script>'
        "document.getElementById('f').addEventListener('load', e => { const r = e.target.contentDocument"
        ".getElementById('fit-result'); const out = document.createElement('pre'); out.id = 'fit-result';"
        " out.textContent = r ? r.textContent : 'null'; document.body.appendChild(out); });</script></body></html>"
    )
    path = tmp_path / f"fit-{width}-{print_css}.html"
    path.write_text(wrapper, encoding="utf-8")
    dom = chromium(
        path.as_uri(),
        tmp_path / f"profile-{width}-{print_css}",
        "--window-size=1400,2200",
        "--hide-scrollbars",
        "--dump-dom",
        "--virtual-time-budget=5000",
    ).stdout
    found = re.findall(r'<pre id="fit-result">(.*?)</pre>', dom, re.S)
    assert found and found[-1] != "null", "the measuring script did not run"
    fit = json.loads(unescape(found[-1]))
    assert fit["width"] == width
    return fit


@pytest.fixture(scope="module")
def swap_report_html() -> str:
    """The public report with the most public facts and tables: a swap against a baseline."""
    result = compile_spec(load_text_or_path(str(AUDIT / "added_invariants.dps")), audit=False, seed=1)
    return render_all(result, baseline=load_text_or_path(str(AUDIT / "added_invariants.baseline.dps")))["html"][1]


# 1280 px: a desktop; 390 px: a phone; 739 px: a Letter page less Chromium's default margins, with
# the print rules (A4's 718 px is close enough to share the result).
@pytest.mark.parametrize("width, print_css", [(1280, False), (390, False), (739, True)])
def test_the_report_fits_the_page(swap_report_html, tmp_path, width, print_css):
    fit = measured_fit(swap_report_html, tmp_path, width, print_css)
    assert fit["bad"] == [] and fit["page"] <= fit["width"], fit


def test_the_measure_sees_a_table_that_does_not_fit(tmp_path):
    wide = "<table><tr>" + "".join(f"<td>column{i:02d}_without_breaks</td>" for i in range(12)) + "</tr></table>"
    html = f'<html><body><main><div style="overflow-x:auto">{wide}</div></main></body></html>'
    fit = measured_fit(html, tmp_path, 390)
    assert any(b.startswith("clipped: DIV") for b in fit["bad"])


def test_the_report_prints_to_pdf(swap_report_html, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(swap_report_html, encoding="utf-8")
    pdf = tmp_path / "report.pdf"
    chromium(page.as_uri(), tmp_path / "profile-pdf", f"--print-to-pdf={pdf}", "--no-pdf-header-footer")
    data = pdf.read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", data))
    assert data[:5] == b"%PDF-" and pages >= 2, pages  # the whole report, over several pages


# ---- the verdict is on the first screen (issue 42): a reader sees how strong the protection is
# before anything else, and "all bounds hold" never stands in for it

_FIRST_SCREEN = """<script>
addEventListener('load', () => {
  const v = document.getElementById('verdict'), r = v ? v.getBoundingClientRect() : null;
  const firstH2 = document.querySelector('h2'), h = firstH2 ? firstH2.getBoundingClientRect() : null;
  const out = document.createElement('pre');
  out.id = 'screen-result';
  out.textContent = JSON.stringify({width: innerWidth, height: innerHeight, top: r && r.top, bottom: r && r.bottom,
                                    text: v && v.innerText, first_h2: h && h.top});
  document.body.appendChild(out);
});
</script>"""


def first_screen(html: str, tmp_path: Path, width: int, height: int) -> dict:
    """Where the verdict box sits in a viewport of width x height (measured inside a frame of that size)."""
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    frame = html.replace("</body>", _FIRST_SCREEN + "</body>").replace("&", "&amp;").replace('"', "&quot;")
    wrapper = (
        f'<html><body style="margin:0"><iframe id="f" style="border:0;width:{width}px;height:{height}px" '
        f'srcdoc="{frame}"></iframe><script>'
        "document.getElementById('f').addEventListener('load', e => { const r = e.target.contentDocument"
        ".getElementById('screen-result'); const out = document.createElement('pre'); out.id = 'screen-result';"
        " out.textContent = r ? r.textContent : 'null'; document.body.appendChild(out); });</script></body></html>"
    )
    path = tmp_path / f"screen-{width}.html"
    path.write_text(wrapper, encoding="utf-8")
    dom = chromium(
        path.as_uri(),
        tmp_path / f"profile-screen-{width}",
        "--window-size=1400,1000",
        "--hide-scrollbars",
        "--dump-dom",
        "--virtual-time-budget=5000",
    ).stdout
    found = re.findall(r'<pre id="screen-result">(.*?)</pre>', dom, re.S)
    assert found and found[-1] != "null", "the measuring script did not run"
    return json.loads(unescape(found[-1]))


@pytest.fixture(scope="module")
def ma1940_report_html() -> str:
    """The bundled 1940 swap, compiled as a custodian would (fresh entropy): epsilon = 15.43 per household."""
    result = compile_spec(load_text_or_path(str(ROOT / "specs" / "ma1940_swap.dps")))
    return render_all(result)["html"][1]


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_the_swap_reports_weak_protection_on_its_first_screen(ma1940_report_html, tmp_path, width, height):
    screen = first_screen(ma1940_report_html, tmp_path, width, height)
    assert screen["width"] == width and screen["top"] is not None, screen
    assert 0 <= screen["top"] and screen["bottom"] <= height, screen  # the whole verdict, without scrolling
    assert screen["bottom"] <= screen["first_h2"], screen  # above every section
    text = " ".join(screen["text"].split())
    assert text.startswith("Weak protection for one household:") and "to over 99.99%" in text, text
    assert "All bounds the spec declares hold" in text and text.index("Weak protection") < text.index("All bounds")


def test_the_first_screen_measure_sees_a_verdict_pushed_below_the_fold(ma1940_report_html, tmp_path):
    pushed = ma1940_report_html.replace(
        '<section class="verdict-box', '<div style="height:2000px"></div><section class="verdict-box', 1
    )
    screen = first_screen(pushed, tmp_path, 1280, 800)
    assert screen["top"] > 800

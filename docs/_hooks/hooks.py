"""mkdocs hooks: generated pages and the navigation that picks up every guide.

- `index.md` is README.md (links into `docs/` made relative), so the front page has one source.
- Reference pages (mechanisms, audit rules, the grammar) are generated from dpspec itself.
- Markers in hand-written pages (`<!-- dpspec:NAME -->`, `<!-- syntax: RULE ... -->`) are
  filled in from the code; the language reference must name every grammar rule.
- Every `guides/*.md` page, from any branch, joins the Guides section with no nav edit.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import grammar_doc  # noqa: E402
import reference_pages  # noqa: E402

DOCS = HERE.parent
ROOT = DOCS.parent
REFERENCE_PAGE = "language/reference.md"
# Preferred order of guides; others follow alphabetically. `editors.md` is the editor-support page.
GUIDE_ORDER = [
    "editors.md",
    "output-sets.md",
    "engines.md",
    "inference.md",
    "verification.md",
    "registry.md",
    "safety.md",
]

MARKERS = {
    "cli": reference_pages.commands_reference,
    "exit-codes": reference_pages.exit_codes_table,
    "api": reference_pages.api_table,
    "json-examples": reference_pages.json_examples,
    "mechanism-list": reference_pages.mechanism_list,
    "rule-list": reference_pages.rule_list,
    "performance-list": reference_pages.performance_list,
}
_MARKER = re.compile(r"^[ \t]*<!--\s*dpspec:([a-z-]+)\s*-->[ \t]*$", re.M)  # alone on its line
_NO_CHECK = re.compile(r"^(\s*```+\s*dps)\s+no-check\s*$", re.M)


def readme_page() -> str:
    """README.md as the site's front page: its `docs/...` links made relative to docs/."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/", "](", text)


def generated_pages() -> dict[str, str]:
    """Every page the build writes itself (path under docs/ -> Markdown)."""
    pages = {"index.md": readme_page(), "language/grammar.md": grammar_doc.full_grammar_page()}
    pages.update(reference_pages.mechanism_pages())
    pages.update(reference_pages.rule_pages())
    return pages


def fill_markers(markdown: str, src_path: str) -> str:
    """Replace `dpspec:` and `syntax:` markers; the reference page must cover the whole grammar."""
    if src_path == REFERENCE_PAGE:
        missing = grammar_doc.uncovered(markdown)
        if missing:
            raise ValueError(
                f"docs/{REFERENCE_PAGE} documents no syntax for grammar rules: {', '.join(missing)} "
                f"(name each in a marker such as <!-- syntax: {' '.join(missing)} --> beside the text "
                "that explains it)"
            )
    markdown = grammar_doc.expand(markdown)

    def fill(match):
        name = match.group(1)
        if name not in MARKERS:
            raise ValueError(f"docs/{src_path}: unknown marker dpspec:{name}")
        return MARKERS[name]()

    markdown = _MARKER.sub(fill, markdown)
    return _NO_CHECK.sub(r"\1", markdown)  # `no-check` tells the docs tests, not the highlighter


# ---- mkdocs events ---------------------------------------------------------------------------


def on_files(files, config):
    from mkdocs.structure.files import File

    for path, content in generated_pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    _extend_nav(config, files)
    return files


def _section(nav, title):
    for entry in nav:
        if isinstance(entry, dict) and title in entry:
            return entry[title]
    section: list = []
    nav.append({title: section})
    return section


def _listed(section) -> set[str]:
    out = set()
    for entry in section:
        out.update(entry.values() if isinstance(entry, dict) else [entry])
    return out


def _extend_nav(config, files):
    nav = config["nav"]
    if nav is None:
        return
    pages = sorted(f.src_uri for f in files if f.src_uri.endswith(".md"))

    def add(title, folder, order=()):
        section = _section(nav, title)
        listed = _listed(section)
        found = [p for p in pages if p.startswith(folder + "/") and p not in listed]
        rank = {name: i for i, name in enumerate(order)}
        found.sort(key=lambda p: (rank.get(p[len(folder) + 1 :], len(rank)), p))
        section.extend(found)

    add("Guides", "guides", GUIDE_ORDER)
    add("Mechanisms", "mechanisms")
    add("Audit rules", "audit")
    add("Performance", "performance")


def on_page_markdown(markdown, page, config, files):
    return fill_markers(markdown, page.file.src_uri)

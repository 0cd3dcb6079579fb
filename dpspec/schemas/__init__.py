"""The versions and JSON Schemas of every JSON document dpspec writes.

Archives outlive the tool that wrote them: each document names its format's version
(`format_version`, "MAJOR.MINOR") and the schema for that version ships here, as
`<kind>.schema.json`. A minor version only adds (a new optional key); a major version may remove
or change, and a reader refuses a document from a newer major version with both versions named
(docs/guides/compatibility.md). tests/test_schemas.py pins each schema's hash to its version, so a
schema cannot change without its version moving.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from dpspec._version import __version__
from dpspec.errors import DataError
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
jsonschema = LazyModule("jsonschema", "jsonschema", globals())

# kind -> the version of its format written today
FORMAT_VERSIONS = {
    "spec": "1.0",  # dpspec show --json (the IR)
    "budget": "1.1",  # dpspec budget --json (a spec or a program; 1.1: exact companions)
    "findings": "2.0",  # dpspec audit --json (an object; 1.0, a list, by the deprecated --format json-list)
    "verification": "1.0",  # dpspec verify --json (read back by --verify FILE)
    "inference": "1.1",  # dpspec infer --json, and result.json of its output set (1.1: power, with --power)
    "conversion": "1.1",  # dpspec convert --json
    "plugins": "1.2",  # dpspec plugins --json (a list; each mechanism carries the version; 1.1: nested parameters; 1.2: either's options)
    "manifest": "1.0",  # manifest.json of every output set (compile, audit, infer)
    "report": "1.1",  # report.json of compile and audit (1.1: verdict, gate, nist, glossary, certificate, exact companions)
    "error": "1.0",  # what every --json command prints on stdout when it fails
    "compile": "1.1",  # dpspec compile --json (what it wrote, its budget, warnings; 1.1: allowed_critical, exact companions)
    "replay": "1.0",  # dpspec verify --replay --json (differences between neighbours' runs)
    "certificate": "1.0",  # certificate.json of every compile (dpspec certificate verify DIR)
}
# documents that are lists: a list has no room for a key, so each item carries the version
LISTS = {"plugins"}
# (kind, version) -> the schema file of a format still written one version behind, on request
# (a deprecated option that names its replacement), until the kind's next major version
LEGACY = {("findings", "1.0"): "findings.1.0.legacy.json"}


def version(kind: str) -> str:
    return FORMAT_VERSIONS[kind]


def versioned(kind: str, data):
    """`data` stamped with its format version (first key), or each item of a list document."""
    stamp = {"format_version": FORMAT_VERSIONS[kind]}
    if kind in LISTS:
        return [{**stamp, **item} for item in data]
    return {**stamp, **data}


def legacy_list(kind: str, version: str, items: list) -> list:
    """A list document of an earlier format still written on request (`LEGACY`): each item stamped."""
    if (kind, version) not in LEGACY:
        raise KeyError(f"no earlier {kind} format {version} is written")
    return [{"format_version": version, **item} for item in items]


@functools.lru_cache(maxsize=None)
def schema(kind: str, version: str | None = None) -> dict:
    """The JSON Schema of `kind`'s current format (or of an earlier `version` still written), as shipped."""
    if kind not in FORMAT_VERSIONS:
        raise KeyError(f"no JSON format named {kind!r}; known: {', '.join(sorted(FORMAT_VERSIONS))}")
    name = f"{kind}.schema.json"
    if version is not None and version != FORMAT_VERSIONS[kind]:
        if (kind, version) not in LEGACY:
            raise KeyError(f"no schema of {kind} format {version} ships with this dpspec")
        name = LEGACY[(kind, version)]
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


def problems(kind: str, document, version: str | None = None) -> list[str]:
    """Every way `document` breaks `kind`'s schema ("" paths mean the top), empty if it is valid."""
    validator = jsonschema.Draft202012Validator(schema(kind, version))
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    ]


def newer_than_known(kind: str, document) -> str | None:
    """The document's format version when its major version is newer than this dpspec reads, else None."""
    found = document.get("format_version") if isinstance(document, dict) else None
    if not isinstance(found, str):
        return None  # written before formats carried versions (dpspec 0.1): version 1.0's content
    try:
        major = int(found.split(".")[0])
    except ValueError:
        return found
    return found if major > int(FORMAT_VERSIONS[kind].split(".")[0]) else None


def refuse_newer(kind: str, document, path: str, error=None) -> None:
    """Raise `error` (a DpspecError class) naming both versions when `document` is from a newer format."""
    found = newer_than_known(kind, document)
    if found is not None:
        raise (error or DataError)(
            f"{path}: written in {kind} format version {found}, newer than this dpspec ({__version__}) reads "
            f"(format version {FORMAT_VERSIONS[kind]}); upgrade dpspec to read it"
        )

"""The DAS's hierarchical `.ini` files read as the production code reads them: `INCLUDE =` chains.

The rules (das_framework/ctools/hierarchical_configparser.py in the published code): an
`INCLUDE = FILE` in the `[DEFAULT]` section reads every section of FILE as base definitions; one
in any other section reads only that section of FILE; the including file's settings shadow the
included ones; paths are relative to the including file's folder; included files may include
others. Section and option names are case-insensitive, and `[DEFAULT]` settings apply to every
section. Unlike the original, a missing target and a cycle are errors that name the file, the
section and the line of the `INCLUDE`.
"""

from __future__ import annotations

import os
import re

from dpspec.importers.settings import Setting, problem

_SECTION = re.compile(r"^\[([^\]]*)\]:?\s*$")
_OPTION = re.compile(r"^([^=:\s][^=:]*?)\s*[=:]\s*(.*)$")
DEFAULT = "default"
MAX_BYTES = 4 << 20  # a configuration file is a few kilobytes; refuse a device or a huge file


class Config:
    """The flattened configuration: {section (lower case): {key (lower case): Setting}}."""

    def __init__(self, sections: dict, files: list[str], names: dict):
        self.sections = sections
        self.files = files  # every file read, the root first
        self.names = names  # section -> a Setting holding where it is first written

    def get(self, section: str, key: str) -> Setting | None:
        """A setting of `section`, or of [DEFAULT] when the section does not set it."""
        found = self.sections.get(section.lower(), {}).get(key.lower())
        return found if found is not None else self.sections.get(DEFAULT, {}).get(key.lower())

    def items(self):
        for section, opts in self.sections.items():
            for key, setting in opts.items():
                yield section, key, setting


def _read_lines(path: str, shown: str, include: Setting | None):
    if not os.path.exists(path):
        if include is not None:
            raise problem(include, f"the included file {include.value!r} does not exist (looked for {path})")
        raise problem(shown, "the configuration file does not exist")
    if not os.path.isfile(path):
        raise problem(include if include is not None else shown, f"{path} is not a regular file")
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise problem(shown, f"larger than {MAX_BYTES} bytes: not a DAS configuration file")
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise problem(shown, f"not UTF-8 text (byte {exc.start})") from None


def _parse(path: str, shown: str, include: Setting | None) -> dict:
    """{section: {key: Setting}} of one file, its own lines only (INCLUDE settings kept)."""
    sections: dict[str, dict] = {}
    current, last = None, None
    for n, raw in enumerate(_read_lines(path, shown, include), 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if raw[:1].isspace() and last is not None:  # a continuation line of a multi-line value
            last_setting = sections[current][last]
            sections[current][last] = Setting(
                last_setting.section,
                last_setting.key,
                f"{last_setting.value}\n{stripped}",
                last_setting.file,
                last_setting.line,
            )
            continue
        m = _SECTION.match(stripped)
        if m:
            name = m.group(1).strip()
            if name.lower() in sections:
                raise problem(shown, f"section [{name}] appears twice", line=n)
            current, last = name.lower(), None
            sections[current] = {}
            sections[current]["\0name"] = Setting(name, "", None, shown, n)
            continue
        m = _OPTION.match(stripped)
        if m is None or current is None:
            raise problem(shown, f"cannot read line {n} ({stripped[:60]!r}): expected [SECTION] or KEY = VALUE", line=n)
        key, value = m.group(1).strip(), m.group(2).strip()
        section_name = sections[current]["\0name"].section
        if key.lower() in sections[current] and key.lower() != "include":
            first = sections[current][key.lower()]
            if " ".join(str(first.value).split()) != " ".join(value.split()):  # the same value twice is harmless
                raise problem(
                    Setting(section_name, key, value, shown, n),
                    f"set twice in the same section, to different values ({first.value!r} at line "
                    f"{first.line}, {value!r} here)",
                )
            continue
        if key.lower() == "include":
            sections[current].setdefault("\0includes", []).append(Setting(section_name, key, value, shown, n))
        else:
            sections[current][key.lower()] = Setting(section_name, key, value, shown, n)
            last = key.lower()
    return sections


def read(path: str) -> Config:
    files: list[str] = []
    sections = _read(os.path.abspath(path), path, None, (), files)
    out = {name: {k: v for k, v in opts.items() if not k.startswith("\0")} for name, opts in sections.items()}
    names = {name: opts["\0name"] for name, opts in sections.items() if "\0name" in opts}
    return Config(out, files, names)


def _read(path: str, shown: str, include: Setting | None, stack: tuple, files: list) -> dict:
    if path in stack:
        chain = " > ".join(os.path.basename(p) for p in (*stack, path))
        raise problem(include, f"INCLUDE cycle: {chain}")
    files.append(shown)
    own = _parse(path, shown, include)
    here = os.path.dirname(path)
    merged: dict[str, dict] = {}

    def base(target: Setting, only: str | None):
        rel = str(target.value).split(";")[0].strip()
        inc_path = os.path.abspath(os.path.join(here, rel))
        inc_shown = os.path.join(os.path.dirname(shown), rel) if shown else rel
        included = _read(inc_path, os.path.normpath(inc_shown), target, (*stack, path), files)
        return included if only is None else {only: included.get(only, {})}

    # [DEFAULT] includes first: they bring every section of the included file.
    for target in own.get(DEFAULT, {}).get("\0includes", []):
        for name, opts in base(target, None).items():
            merged.setdefault(name, {}).update({k: v for k, v in opts.items() if k not in merged.get(name, {})})
    # Then each section's own includes, then the section's own settings, which shadow everything.
    for name, opts in own.items():
        if name == DEFAULT:
            continue
        for target in opts.get("\0includes", []):
            for k, v in base(target, name).get(name, {}).items():
                merged.setdefault(name, {})[k] = v
    for name, opts in own.items():
        target = merged.setdefault(name, {})
        for k, v in opts.items():
            if k != "\0includes":
                target[k] = v
    for opts in merged.values():
        opts.pop("\0includes", None)
    return merged

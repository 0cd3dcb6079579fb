"""Reading a Tumult-era `config.json` (SafeTab-P, SafeTab-H, PHSafe) with each key's line, and typed access."""

from __future__ import annotations

import json
import os
import re

from dpspec.importers.settings import Setting, fraction, problem

MAX_BYTES = 4 << 20


def read(path: str) -> dict[str, Setting]:
    """{key: Setting} of the top-level object; a value's line is where its key is written."""
    if not os.path.isfile(path):
        raise problem(
            path, "the configuration file does not exist" if not os.path.exists(path) else "not a regular file"
        )
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise problem(path, f"larger than {MAX_BYTES} bytes: not a production config.json")
    try:
        text = data.decode("utf-8")
        obj = json.loads(text)
    except UnicodeDecodeError as exc:
        raise problem(path, f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise problem(path, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    if not isinstance(obj, dict):
        raise problem(path, "expected a JSON object of settings at the top level")
    lines = {}
    for n, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r'"((?:[^"\\]|\\.)*)"\s*:', line):
            lines.setdefault(m.group(1), n)
    return {k: Setting("", k, v, path, lines.get(k)) for k, v in obj.items()}


def number(s: Setting, low=None, high=None):
    value = s.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise problem(s, f"expected a number, got {json.dumps(value)}")
    out = fraction(s)
    if low is not None and out < low or high is not None and out > high:
        raise problem(s, f"{json.dumps(value)} is outside [{low}, {high}]")
    return out


def integer(s: Setting, low=None):
    if isinstance(s.value, bool) or not isinstance(s.value, int):
        raise problem(s, f"expected a whole number, got {json.dumps(s.value)}")
    if low is not None and s.value < low:
        raise problem(s, f"expected at least {low}, got {s.value}")
    return s.value


def boolean(s: Setting) -> bool:
    if not isinstance(s.value, bool):
        raise problem(s, f"expected true or false, got {json.dumps(s.value)}")
    return s.value


def text(s: Setting, choices=None) -> str:
    if not isinstance(s.value, str):
        raise problem(s, f"expected a string, got {json.dumps(s.value)}")
    if choices is not None and s.value not in choices:
        raise problem(s, f"expected one of {', '.join(choices)}, got {s.value!r}")
    return s.value


def strings(s: Setting) -> list[str]:
    if not isinstance(s.value, list) or not all(isinstance(v, str) for v in s.value):
        raise problem(s, f"expected a list of strings, got {json.dumps(s.value)[:80]}")
    return list(s.value)


def child(s: Setting, key: str) -> Setting:
    return Setting("", f"{s.key}.{key}", s.value[key], s.file, s.line)

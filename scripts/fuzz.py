#!/usr/bin/env python3
"""Fuzz dpspec as a hostile user would: mutations of every bundled spec through the API and the CLI.

    python scripts/fuzz.py                      # 100,000 cases, counts by outcome and mutation
    python scripts/fuzz.py --cases 2000 --seed 7 --cli-every 10 --save fuzz-failures/

Each case takes a bundled spec, applies one mutation (byte flips, truncations, huge numbers,
odd data and include paths, line deletions and duplications), then parses, checks, formats,
describes, accounts and exports it (registry YAML) through the Python API, and every
`--verify-every`th case also runs `dpspec verify` on it with a few runs; every `--cli-every`th
case also runs `dpspec check/show/fmt/budget` on it. Other cases fuzz the newer commands' inputs
instead of a spec: mutated registry entries (`import --registry`), `convert` parameters with huge
or odd numbers, mutated `verify --json` results (as `--verify FILE` reads them), and `infer`'s
target, prior and draws against a release compiled once, and hostile data sources (odd Parquet
types, partitioned folders with links, loops, devices and pipes, ragged rows and duplicated CSV
headers, YAML alias bombs: `make_data_case`); specs with other line ends (LF, CRLF, bare CR: the same
meaning), terminal escapes in quoted text (no command prints one raw), keys given twice,
malformed language-server frames (`run_frames`) and doctored release numbers. An outcome is `ok`, `user-error` (a
DpspecError, exit 1 or 2) or `internal` (any other exception, exit 3, or a traceback): the goal
is zero internal.
Specs whose budget needs their data are accounted once in `--data-every` cases (loading the
1940 households takes a second). tests/test_fuzz.py runs the same engine with hypothesis.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import glob
import os
import random
import re
import shutil
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SPECS_DIR = os.path.join(ROOT, "specs")
SPECS = sorted(os.path.relpath(p, SPECS_DIR) for p in glob.glob(os.path.join(SPECS_DIR, "**", "*.dps"), recursive=True))

HUGE_NUMBERS = [
    "9" * 5000,
    "1e999",
    "1e-99999999",
    "1e" + "9" * 5000,
    "0." + "1" * 300,
    "10^64*10^64*10^64*10^64*10^64",
    "(10^64)^64",
    "1e308*10",
    "1e-400",
    "2^-64^64",
    "99999999999999999999999",
    "0",
    "-1",
    "1/0",
    "inf",
    "nan",
    "1000",
    "1e-20",
    "1e-40",
    "5e-34",
    "1e-33",
    "123456789012345678901/1000",
]  # legal but extreme budgets: work, or refused as the user's
ODD_PATHS = [
    "/dev/zero",
    "/dev/null",
    "/dev/stdin",
    "/dev/urandom",
    "/",
    ".",
    "",
    "..",
    "/proc/self/status",
    "/proc/self/mem",
    "nonexistent.csv",
    "nonexistent.dps",
    "a" * 5000,
    "x\x00y.csv",
    "../" * 40 + "etc/passwd",
    "~/x.csv",
    "data",
    "data/",
    "program.dps",
    "../acs_program/program.dps",
    "\\\\server\\share.csv",
    "é.csv",
    "x.parquet",
]
KINDS = [
    "flip",
    "truncate",
    "huge",
    "path",
    "delete_line",
    "duplicate_line",
    "splice",
    "insert_junk",
    "line_ends",
    "escapes",
    "duplicate_key",
]
_NUMBER = re.compile(r"(?<![\w.])\d+(\.\d+)?([eE][+-]?\d+)?")
_STRING = re.compile(r'"[^"\n]*"')
_JUNK = [
    "{",
    "}",
    "(",
    ")",
    ":",
    ",",
    "..",
    "^",
    "/",
    "*",
    "-",
    "<=",
    "\n",
    "\t",
    "#",
    '"',
    "by",
    "in",
    "with",
    "\x00",
    "\ufeff",
    "é",
]


ESCAPES = ["\x1b[8m", "\x1b[2J", "\x1b]0;x\x07", "\x9b31m", "\x08", "\x07", "\x1b[1A\x1b[K", "\u202e"]


def mutate(text: str, kind: str, rng: random.Random) -> str:
    """One mutation of a spec's text."""
    if not text:
        return text
    if kind == "line_ends":  # old Mac (bare CR), Windows (CRLF) or a mix: the same text to the language
        ends = rng.choice([["\r"], ["\r\n"], ["\n", "\r", "\r\n"]])
        return "".join(
            part + (rng.choice(ends) if i < text.count("\n") else "") for i, part in enumerate(text.split("\n"))
        )
    if kind == "escapes":  # terminal escape sequences inside quoted text (a title, a category, a note)
        spots = list(_STRING.finditer(text))
        if not spots:
            return text
        m = rng.choice(spots)
        at = rng.randint(m.start() + 1, m.end() - 1)
        return text[:at] + rng.choice(ESCAPES) + text[at:]
    if kind == "duplicate_key":  # a `key: value` line given twice with another value (YAML, JSON, parameters)
        keyed = [m for m in re.finditer(r"^([ \t]*\"?[A-Za-z_]+\"?[ \t]*:[ \t]*)([^\n]*)$", text, re.MULTILINE)]
        if not keyed:
            return text
        m = rng.choice(keyed)
        value = rng.choice(["0.001", "1.0e-400", "1.0e+999", m.group(2)])
        return text[: m.end()] + "\n" + m.group(1) + value + text[m.end() :]
    if kind == "flip":
        raw = bytearray(text.encode("utf-8"))
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return raw.decode("utf-8", "surrogateescape")
    if kind == "truncate":
        return text[: rng.randrange(len(text))]
    if kind == "huge":
        spots = list(_NUMBER.finditer(text))
        if not spots:
            return text
        m = rng.choice(spots)
        return text[: m.start()] + rng.choice(HUGE_NUMBERS) + text[m.end() :]
    if kind == "path":
        spots = list(_STRING.finditer(text))
        if not spots:
            return text
        m = rng.choice(spots)
        return text[: m.start()] + '"' + rng.choice(ODD_PATHS) + '"' + text[m.end() :]
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    if kind == "delete_line":
        return "\n".join(lines[:i] + lines[i + 1 :])
    if kind == "duplicate_line":
        return "\n".join(lines[: i + 1] + lines[i:])
    if kind == "splice":
        j = rng.randrange(len(lines))
        return "\n".join(lines[:i] + [lines[j]] + lines[i:])
    pos = rng.randrange(len(text) + 1)
    return text[:pos] + rng.choice(_JUNK) + text[pos:]


def original(name: str) -> str:
    with open(os.path.join(SPECS_DIR, name), encoding="utf-8") as fh:
        return fh.read()


def run_api(text: str, path: str, with_data: bool) -> str:
    """'ok', 'user-error' or 'internal: ...' for one mutated spec through the Python API."""
    return _outcome(_api_steps, text, path, with_data)


def _api_steps(text, path, with_data):
    from dpspec.budget.budget_report import budget_summary
    from dpspec.check.checker import check
    from dpspec.language.describe import describe_spec
    from dpspec.language.formatter import format_spec
    from dpspec.language.parser import parse

    spec = parse(text, path)
    format_spec(spec)
    describe_spec(spec)
    if spec.program is None:
        checked = check(spec)
        _export(spec)
        if getattr(checked.mechanism, "needs_data_for_budget", False) and not with_data:
            return
    budget_summary(spec)


def _export(spec):
    """`dpspec export --registry`: a spec without the registry's notes is a user error, never a
    crash; that user error (most specs lack the notes) does not stop the other steps."""
    from dpspec.errors import DpspecError
    from dpspec.registry.export import entry_yaml

    try:
        entry_yaml(spec)
    except DpspecError:
        pass


# A user error whose message carries a Python exception's name: plugin code crashed and a
# wrapper (verify's) reported it as exit 1. Counted apart, so such bugs are seen, not hidden.
_MASKED = re.compile(
    r"\b(KeyError|TypeError|AttributeError|IndexError|ValueError|ZeroDivisionError|NameError|"
    r"AssertionError|RuntimeError|NotImplementedError|OverflowError|RecursionError): "
)


def _outcome(step, *args) -> str:
    """'ok', 'user-error', 'plugin-crash: ...' or 'internal: ...' for one call."""
    from dpspec.errors import DpspecError

    try:
        step(*args)
    except DpspecError as exc:
        return f"plugin-crash: {str(exc)[:300]}" if _MASKED.search(str(exc)) else "user-error"
    except Exception as exc:  # noqa: BLE001 - the point: anything else is a bug
        return f"internal: {type(exc).__name__}: {str(exc)[:200]}\n{traceback.format_exc(limit=-3)}"
    return "ok"


def run_verify(text: str, path: str, seed: int) -> str:
    """`dpspec verify` with a few runs on a mutated spec."""
    from dpspec.language.parser import parse
    from dpspec.verify import verify

    return _outcome(lambda: verify(parse(text, path), runs=20, seed=seed))


# ---- the newer commands' other inputs --------------------------------------------------------
ENTRIES = sorted(os.path.relpath(p, SPECS_DIR) for p in glob.glob(os.path.join(SPECS_DIR, "registry", "*.yaml")))
SUBJECTS = [
    "spec",
    "entry",
    "convert",
    "verify-json",
    "infer",
    "writer",
    "data",
    "line-ends",
    "frames",
    "release",
    "check-agrees",
]
CONVERT_KEYS = ["epsilon", "epsilon", "rho", "rho", "mu", "mu", "delta", "alpha", "eps", "", "x"]
CONVERT_VALUES = (
    HUGE_NUMBERS
    + [
        "1",
        "0.5",
        "1e-10",
        "3/4",
        "1/3",
        "-0",
        "1e-320",
        "0x10",
        "1_000",
        " ",
        "é",
        "1,5",
        "1e-9999",
        "1,epsilon=2",
        "1.0e-400",
        "1e+999",
    ]
    + ["1", "2.5", "0.01"] * 8
)
INFER_TARGETS = ["count persons by DEYE"] * 5 + [
    "count persons",
    "count persons by DEYE, PUMA",
    "count households by DEYE",
]


def run_entry(text: str, path: str) -> str:
    """A mutated registry entry through `dpspec import --registry`'s steps, then check."""

    def steps():
        from dpspec.check.checker import check
        from dpspec.language.parser import parse
        from dpspec.registry.entry import parse_entry
        from dpspec.registry.importer import import_text

        check(parse(import_text(parse_entry(text, path)), path[:-5] + ".dps"))

    return _outcome(steps)


def convert_case(rng: random.Random) -> tuple[dict, dict]:
    params = {rng.choice(CONVERT_KEYS): rng.choice(CONVERT_VALUES) for _ in range(rng.choice([1, 1, 1, 2, 3]))}
    options = {}
    if rng.random() < 0.5:
        options["to"] = rng.choice(["pure", "approx", "zcdp", "renyi", "gdp"])
    for key in ("delta", "epsilon", "alpha"):
        if rng.random() < 0.3:
            options[key] = float(rng.choice(["1e-10", "0.5", "1e308", "1e-320", "0", "-1", "inf", "nan", "2", "1"]))
    if rng.random() < 0.2:
        options["from_unit"], options["to_unit"] = rng.choice(
            [("hamming", "symdiff"), ("symdiff", "hamming"), ("hamming", None)]
        )
    if rng.random() < 0.2:
        options["group"] = rng.choice([1, 2, 10**6, 10**400])
    options["method"] = rng.choice(["cks20", "bs16"])
    return params, options


def run_convert(params: dict, options: dict) -> str:
    from dpspec.budget import convert_request

    return _outcome(lambda: convert_request(params, **options))


_VERIFY_JSON: list[str] = []


def verify_json() -> str:
    """A real `dpspec verify --json` result (made once) for the fuzzer to mutate."""
    if not _VERIFY_JSON:
        import json

        from dpspec.language.parser import parse
        from dpspec.verify import verify

        spec = parse(original("acs_ma_vision_rr.dps"), os.path.join(SPECS_DIR, "acs_ma_vision_rr.dps"))
        _VERIFY_JSON.append(json.dumps(verify(spec, runs=200, seed=1).to_json(), indent=2))
    return _VERIFY_JSON[0]


def run_verify_json(text: str, tmp: str) -> str:
    """A mutated verification result read as `--verify FILE` reads it, and made a finding."""

    def steps():
        from dpspec.verify.finding import finding
        from dpspec.verify.result import load_json

        path = os.path.join(tmp, "verify.json")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
        finding(load_json(path))

    return _outcome(steps)


_RELEASE: dict = {}


def release(tmp: str, spec: str = "acs_ma_vision_rr.dps") -> str:
    """A release of a bundled spec (randomized response unless named), compiled once (seeded) for `infer` to read."""
    key = "path" if spec == "acs_ma_vision_rr.dps" else spec
    if key not in _RELEASE:
        import dpspec
        from dpspec.publish.output import write_result

        _RELEASE[key] = os.path.join(tmp, "release" if key == "path" else "release-" + spec.replace(".dps", ""))
        write_result(dpspec.compile(os.path.join(SPECS_DIR, spec), seed=1), _RELEASE[key])
    return _RELEASE[key]


# (spec, infer target, {table its likelihood reads: the columns a value is doctored in}) of the
# releases whose published tables are doctored: records (randomized response) and measurements
RELEASED = [
    ("acs_ma_vision_rr.dps", "count persons by DEYE", {"responses.csv": ["DEYE"], "estimate.csv": None}),
    ("acs_ma_hispanic_topdown.dps", "count persons by PUMA, HISP", {"measurements.csv": ["cell", "value", "variance"]}),
]


def infer_case(rng: random.Random, tmp: str) -> dict:
    kind = rng.choice(KINDS)
    prior = rng.choice(
        [
            None,
            "dirichlet-multinomial",
            "dirichlet-multinomial:" + rng.choice(CONVERT_VALUES),
            rng.choice(ODD_PATHS),
            "prior.csv",
        ]
    )
    if prior == "prior.csv":
        prior = os.path.join(tmp, "prior.csv")
        with open(prior, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(mutate("DEYE,alpha\n1,1\n2,1\n", kind, rng))
    target = rng.choice(INFER_TARGETS)
    return {
        "target": mutate(target, kind, rng) if rng.random() < 0.3 else target,
        "prior": prior,
        "draws": rng.choice([10, 20] * 6 + [0, -5, 10**7, 10**400]),
        "method": rng.choice(["rejection", "importance", "rejection", "importance", "exact"]),
        "rate": rng.random() < 0.2,
        "seed": rng.randrange(2**32),
    }


def run_infer(args: dict, tmp: str) -> str:
    from dpspec.inference import infer

    spec = os.path.join(SPECS_DIR, "acs_ma_vision_rr.dps")
    return _outcome(lambda: infer(spec, release(tmp), max_proposals=2000, **args))


def mirror(tmp: str) -> None:
    """A copy of specs/ made of symlinks, so a mutated spec written there finds its data and includes."""
    folders = sorted({os.path.dirname(s) for s in SPECS})
    for folder in folders:
        os.makedirs(os.path.join(tmp, folder), exist_ok=True)
    for folder in folders:
        for name in os.listdir(os.path.join(SPECS_DIR, folder)):
            link = os.path.join(tmp, folder, name)
            if not os.path.lexists(link):  # spec folders are real; everything else links back
                os.symlink(os.path.join(SPECS_DIR, folder, name), link)


def run_cli(text: str, name: str, tmp: str, with_data: bool) -> str:
    """The same through `dpspec check/show/fmt/budget`: exit 3 or a traceback is internal."""
    from click.testing import CliRunner

    from dpspec.cli.main import main

    path = os.path.join(tmp, os.path.dirname(name), "__fuzz__.dps")
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text)
    commands = [["check", path], ["show", path], ["fmt", path]]
    if with_data or "swap" not in text:
        commands.append(["budget", path])
    worst = "ok"
    for args in commands:
        result = CliRunner().invoke(main, args)
        if (
            result.exit_code not in (0, 1, 2)
            or "Traceback" in result.output
            or (result.exception is not None and not isinstance(result.exception, SystemExit))
        ):
            return f"internal: dpspec {args[0]} exit {result.exit_code}: {result.output[-300:]}"
        if args[0] != "fmt" and any(ch in result.output for ch in TERMINAL_CONTROLS):  # fmt's is the file's content
            return f"internal: dpspec {args[0]} printed a raw control character: {result.output[-300:]!r}"
        if result.exit_code:
            worst = "user-error"
    return worst


TERMINAL_CONTROLS = "\x1b\x9b\x9d\x07\x08\r\u202e"


def run_line_ends(name: str, rng: random.Random) -> str:
    """A bundled spec with other line ends must mean what it means with LF: the same formatted
    text (a bare CR once made a `#` comment swallow the rest of the file)."""

    def steps():
        from dpspec.language.formatter import format_spec
        from dpspec.language.parser import parse

        path = os.path.join(SPECS_DIR, name)
        text = original(name)
        if format_spec(parse(mutate(text, "line_ends", rng), path)) != format_spec(parse(text, path)):
            raise AssertionError(f"{name} means something else with other line ends")

    return _outcome(steps)


BAD_FRAMES = [
    b"Content-Length: abc\r\n\r\n",
    b"Content-Length: -1\r\n\r\n",
    b"Content-Type: x\r\n\r\n",
    b"",
    b"Content-Length: 1000000000000\r\n\r\n",
    b"Content-Length: " + b"9" * 40 + b"\r\n\r\n",
    b"Content-Length 12\r\n\r\n",
    b"\xff\xfe\r\n\r\n",
    b"X" * 9000,
]


def run_frames(rng: random.Random) -> str:
    """Malformed language-server frames, then a good one: each bad one is a parse error, and the
    good one after it is read (the server resynchronises; no frame is held in memory whole)."""
    import io
    import json

    from dpspec.lsp.framing import FrameProblem, Frames

    good = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "shutdown"}).encode()
    bad = [
        rng.choice(BAD_FRAMES) + rng.choice([good, b'{"jsonrpc": "2.0"}', b"", b"\x00" * 10])
        for _ in range(rng.randint(1, 3))
    ]
    stream = io.BytesIO(b"".join(bad) + b"Content-Length: %d\r\n\r\n" % len(good) + good)

    def steps():
        frames = Frames(stream)
        got = []
        while (frame := frames.next()) is not None:
            got.append(frame)
        if not got or got[-1] != good:
            raise AssertionError(f"the good frame after {bad!r} was not read: {got!r}")
        if not any(isinstance(f, FrameProblem) for f in got):
            raise AssertionError(f"no parse error for {bad!r}")

    return _outcome(steps)


def run_release_values(rng: random.Random, tmp: str) -> str:
    """A release whose published tables were doctored (NaN, infinity, 10^20, a column dropped, every
    row repeated, a variance made smaller): `infer` must refuse it as a user error before sampling."""
    import pandas as pd

    from dpspec.inference import infer

    spec, target, tables = rng.choice(RELEASED)
    with _scratch_cwd(tmp) as here:
        copy = os.path.join(here, "release")
        shutil.copytree(release(tmp, spec), copy)
        change = rng.choice(["value", "value", "drop-column"] + (["repeat-rows", "tiny"] if "topdown" in spec else []))
        name = "measurements.csv" if change == "tiny" else rng.choice(sorted(tables))
        frame = pd.read_csv(os.path.join(copy, name), keep_default_na=False, dtype=str)
        row = rng.randrange(len(frame))
        column = (
            "variance"
            if change == "tiny"
            else rng.choice(list(frame.columns) if change == "drop-column" or tables[name] is None else tables[name])
        )
        if change == "drop-column" and name == "estimate.csv":  # not read by the likelihood: a value instead
            change = "value"
        if change == "drop-column":  # the schema check names it before any likelihood reads the table
            frame = frame.drop(columns=[column])
        elif change == "repeat-rows":  # each measured cell once
            frame = pd.concat([frame] * rng.choice([2, 50]), ignore_index=True)
        else:
            frame.loc[row, column] = rng.choice(
                ["nan", "inf", "-inf", "1e20", "100000000000000000000"]
                if change == "value"
                else ["1e-06", "0", "-1", "0.5"]
            )
        frame.to_csv(os.path.join(copy, name), index=False)
        outcome = _outcome(lambda: infer(os.path.join(SPECS_DIR, spec), copy, target=target, draws=10, seed=1))
    return f"internal: a doctored release was accepted ({change}, {name}, {column})" if outcome == "ok" else outcome


GRID_KNG = ("wasserstein_kng_mean", "wasserstein_kng_slope")


def run_check_agrees(rng: random.Random, tmp: str) -> str:
    """A budget near the samplers' limit on a mechanism whose noise depends on the data (the K-norm
    gradient mean and slope) or on a fan-out (SafeTab-H): what `check` accepts, `compile` must draw,
    never refuse as too wide to draw."""
    import dpspec
    from dpspec.api import check
    from dpspec.errors import DpspecError
    from dpspec.language.parser import parse
    from tests.test_wasserstein_kng import MEAN, SLOPE

    value = rng.choice(["1e-20", "1e-16", "5e-16", "1e-15", "2e-14", "1e-14", "1", "1000"])
    with _scratch_cwd(tmp) as here:
        name = rng.choice([*GRID_KNG, "safetab_h"])
        if name == "safetab_h":
            text = original("safetab_h_production.dps").replace('"data/', f'"{SPECS_DIR}/data/')
            text = text.replace("total_rho: 8.895302", "").replace(
                "level1: 0.006915", f"level1: {rng.choice(['5e-34', '1e-33', '8e-34', '9e-34'])}", 1
            )
        else:
            text = MEAN.replace("CLASS", "independent") if name == GRID_KNG[0] else SLOPE.replace("INTERCEPT", "0")
            text = (
                text.replace("MECH", name)
                .replace("  epsilon: 1\n", f"  epsilon: {value}\n")
                .replace("budget epsilon <= 1", "")
            )
            with open(os.path.join(here, "people.csv"), "w", encoding="utf-8") as fh:
                fh.write("age\n4\n12\n" if name == GRID_KNG[0] else "x,y\n1,3\n2,-1\n")
            text = text.replace("unit people", 'data people from "people.csv"\nunit people')
        path = os.path.join(here, "agree.dps")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        checked = _outcome(lambda: check(parse(text, path)))
        if checked != "ok":
            return checked
        refused = []

        def run():
            try:
                dpspec.compile(path, seed=1)
            except DpspecError as exc:
                refused.append(str(exc))
                raise

        outcome = _outcome(run)
    if refused and ("cannot be drawn" in refused[0] or "beyond the 64-bit" in refused[0]):
        return f"internal: check accepted what compile refused to draw: {refused[0][:200]}"
    return outcome


WRITERS = [
    "export",
    "import",
    "audit",
    "infer",
    "audit",
    "export",
    "import",
    "infer",
    "compile",
    "compile-full-disk",
    "audit-full-disk",
]
# Devices only through links made in the scratch folder: if a guard ever broke, a rename would
# replace the link there, never the machine's /dev/null (which a run as root once did).
ODD_OUTPUTS = [
    "link-to-dev-null",
    "link-to-dev-zero",
    "fifo",
    "/proc/x",
    "/proc/self/status",
    "/proc/x/y",
    ".",
    "",
    "out",
    "out/sub/deep",
    "a" * 300,
    "é/ü",
    "existing-file",
    "link-to-copy",
    "spec-folder",
    "release",
    "release/sub",
    "~",
    "-",
    "--help",
    "/sys/kernel",
]


# (no NUL byte: a shell cannot pass one, and click's own path check raises on it before dpspec runs)


def writer_case(rng: random.Random) -> tuple[str, str]:
    command = rng.choice(WRITERS)
    return command, "elsewhere" if command.endswith("-full-disk") else rng.choice(ODD_OUTPUTS)


@contextlib.contextmanager
def _scratch_cwd(tmp: str):
    """Work in a fresh folder under tmp (relative outputs such as '.' land there), then go back."""
    before = os.getcwd()
    here = tempfile.mkdtemp(dir=tmp)
    os.chdir(here)
    try:
        yield here
    finally:
        os.chdir(before)
        shutil.rmtree(here, ignore_errors=True)


@contextlib.contextmanager
def _full_disk(on: bool):
    """Every file an output set stages meets ENOSPC, as on a full disk."""
    if not on:
        yield
        return
    import errno

    import dpspec.publish.output_set as output_set

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    saved = output_set.stage_text, output_set.write_manifest
    output_set.stage_text = output_set.write_manifest = full
    try:
        yield
    finally:
        output_set.stage_text, output_set.write_manifest = saved


def run_writer(command: str, output: str, tmp: str) -> str:
    """One writing command (`export/import/audit/infer/compile -o`) aimed at an odd output path,
    from a scratch working folder: exit 3 or a traceback is internal."""
    from click.testing import CliRunner

    from dpspec.cli.main import main

    rr = os.path.join(SPECS_DIR, "acs_ma_vision_rr.dps")
    rel = release(tmp)
    runner = CliRunner()
    with _scratch_cwd(tmp) as here:
        with open("existing-file", "w") as fh:
            fh.write("keep me\n")
        shutil.copy(rr, "copy.dps")
        os.symlink(os.path.join(SPECS_DIR, "data"), "data")  # so that `compile copy.dps` reaches the writing
        os.symlink(os.path.join(here, "copy.dps"), "link-to-copy")
        os.symlink("/dev/null", "link-to-dev-null")
        os.symlink("/dev/zero", "link-to-dev-zero")
        os.mkfifo("fifo")
        out = {
            "spec-folder": here,
            "release": rel,
            "release/sub": os.path.join(rel, "sub"),
            "elsewhere": os.path.join(tmp, "elsewhere-" + os.path.basename(here)),
        }.get(output, output)
        full = command.endswith("-full-disk")  # every file of the set meets ENOSPC: the machine's, not a bug
        command = command.removesuffix("-full-disk")
        args = {
            "export": ["export", "--registry", os.path.join(SPECS_DIR, "registry", "dhc_persons.dps")],
            "import": ["import", "--registry", os.path.join(SPECS_DIR, ENTRIES[0])],
            "audit": ["audit", "copy.dps"],
            "infer": ["infer", rr, rel, "--target", "count persons by DEYE", "--draws", "10", "--seed", "1"],
            "compile": ["compile", "copy.dps", "--seed", "1"],
        }[command] + ["-o", out]
        with _full_disk(full):
            result = runner.invoke(main, args)
        if full and (result.exit_code != 1 or "No space left" not in result.output or os.path.lexists(out)):
            return f"internal: dpspec {command} -o {output!r} on a full disk: exit {result.exit_code}: {result.output[-300:]}"
        if (
            result.exit_code not in (0, 1, 2)
            or "Traceback" in result.output
            or (result.exception is not None and not isinstance(result.exception, SystemExit))
        ):
            return f"internal: dpspec {command} -o {output!r} exit {result.exit_code}: {result.output[-300:]}"
        kept = [os.path.islink(n) for n in ("link-to-copy", "link-to-dev-null", "link-to-dev-zero")]
        kept.append(not glob.glob("/dev/.*dpspec-lock"))  # nothing may appear beside a device
        named = output == "existing-file"  # export/import may replace the file they are told to write
        with open("existing-file") as fh:
            existing = fh.read()
        if (existing != "keep me\n" and not named) or not all(kept) or not os.path.exists("fifo"):
            return f"internal: dpspec {command} -o {output!r} changed a file it did not name"
    return "user-error" if result.exit_code else "ok"


# ---- hostile data files (issue 29) ------------------------------------------------------------
# Each generator makes a small data source in a scratch folder, and says whether dpspec must
# refuse it (a DataError) or read it. Reading it on the local path, on the engine path and
# fingerprinting it must agree with that: accepting a source that must be refused (a loop read
# twice, a device, a ragged row) is as much a bug as a crash, and is counted as internal.
DATA_SPEC = """spec "fuzzed data"
domain survey "a small survey" {
  stage edited
  table people unit person {
    region   : category
    district : category in region
    age      : int 0..120
    smoker   : bool
    status   : {single, married, "N"}
  }
}
data people from "SOURCE"
invariants {
  count people
}
unit people : hamming
premetric pure
mechanism randomized_response { table: people  column: smoker  p: 3/4 }
budget epsilon <= 1.1
"""
DATA_KINDS = [
    "parquet-type",
    "parquet-type",
    "folder-link",
    "folder-loop",
    "folder-device",
    "folder-fifo",
    "ragged-csv",
    "duplicate-header",
    "alias-bomb",
    "bidi-report",
    "csv-long-record",
    "csv-bomb",
    "parquet-over-limit",
    "uri-folder-type",
]
# The declared limits the limit cases run under (small, so that a case stays fast): a record of
# at most RECORD_LIMIT bytes, a source of at most DATA_LIMIT bytes.
RECORD_LIMIT, DATA_LIMIT = 1024, 16 << 10
BIDI = ["\u202e", "\u202d", "\u202a", "\u202b", "\u202c", "\u2066", "\u2067", "\u2068", "\u2069", "\u200f", "\u061c"]


def _odd_arrays(rng: random.Random, n: int):
    """An Arrow array of a type no declared kind accepts (dates, decimals, bytes, lists, structs...)."""
    import datetime
    import decimal

    import pyarrow as pa

    odd = [
        pa.array([datetime.date(2000, 1, 1)] * n, pa.date32()),
        pa.array([decimal.Decimal("3")] * n, pa.decimal128(5, 0)),
        pa.array([b"single"] * n, pa.binary()),
        pa.array([b"\xff\xfe"] * n, pa.large_binary()),
        pa.array([["single"]] * n, pa.list_(pa.string())),
        pa.array([[1, 2]] * n, pa.list_(pa.int64())),
        pa.array([datetime.datetime(2000, 1, 1)] * n, pa.timestamp("us")),
        pa.array([{"a": 1}] * n),
        pa.array([datetime.timedelta(1)] * n, pa.duration("s")),
        pa.array([datetime.time(1)] * n, pa.time32("s")),
    ]
    return rng.choice(odd)


def _people_table(n: int, region: str | None = None):
    import pyarrow as pa

    cols = {
        "district": [(region or "north")[0] + "1"] * n,
        "age": [20 + i % 80 for i in range(n)],
        "smoker": [i % 2 == 0 for i in range(n)],
        "status": ["single", "married", "N"] * (n // 3) + ["N"] * (n % 3),
    }
    if region is None:
        cols = {"region": ["north"] * n, **cols}
    return pa.table(cols)


def _partition_folder(here: str) -> str:
    import pyarrow.parquet as pq

    folder = os.path.join(here, "people")
    for region in ("north", "south"):
        os.makedirs(os.path.join(folder, f"region={region}"))
        pq.write_table(_people_table(4, region), os.path.join(folder, f"region={region}", "part.parquet"))
    return folder


def make_data_case(kind: str, rng: random.Random, here: str) -> tuple[str, bool, int]:
    """Write a spec and its hostile source into `here`: (spec path, must be refused, rows if read)."""
    import pyarrow.parquet as pq

    source, refused, rows = "people/", True, 8
    if kind == "parquet-type":
        array = _odd_arrays(rng, 4)
        table = _people_table(4)
        column = rng.choice(["district", "age", "smoker", "status"])
        table = table.set_column(table.schema.get_field_index(column), column, array)
        if rng.random() < 0.5:
            pq.write_table(table, os.path.join(here, "people.parquet"))
            source = "people.parquet"
        else:
            folder = _partition_folder(here)
            pq.write_table(table.drop(["region"]), os.path.join(folder, "region=north", "odd.parquet"))
    elif kind == "parquet-over-limit":  # footers declaring more than DATA_LIMIT in the declared columns
        big = _people_table(3000)
        if rng.random() < 0.5:
            pq.write_table(
                big, os.path.join(here, "people.parquet"), row_group_size=rng.choice([500, 3000]), use_dictionary=False
            )  # plain: 24 KB of ages alone
            source = "people.parquet"
        else:
            folder = _partition_folder(here)
            for n in range(rng.randint(1, 3)):
                pq.write_table(
                    _people_table(1500, "north"),
                    os.path.join(folder, "region=north", f"more{n}.parquet"),
                    use_dictionary=False,
                )
    elif kind == "uri-folder-type":  # a file:// folder (the hdfs:// / s3a:// path): fine first file, odd later one
        folder = _partition_folder(here)
        table = _people_table(4, "south")
        column = rng.choice(["district", "age", "smoker", "status"])
        table = table.set_column(table.schema.get_field_index(column), column, _odd_arrays(rng, 4))
        pq.write_table(table, os.path.join(folder, "region=south", rng.choice(["part-9.parquet", "zz.parquet"])))
        source = "file://" + os.path.abspath(folder) + "/"
    elif kind in ("csv-long-record", "csv-bomb"):
        import gzip

        lines = ["region,district,age,smoker,status"] + [f"north,n1,{20 + i % 80},true,single" for i in range(8)]
        if kind == "csv-long-record":
            i = rng.randrange(1, len(lines))
            long = rng.choice(
                [
                    "x" * (RECORD_LIMIT + rng.randint(1, 5000)),  # one long line
                    '"' + "line\n" * (RECORD_LIMIT // 5 + rng.randint(1, 500)) + '"',  # a quoted field over many lines
                    '"' + "open quote\n" * rng.randint(200, 2000),
                ]
            )  # a quote never closed
            lines[i] = lines[i].rsplit(",", 1)[0] + "," + long
            body = ("\n".join(lines) + "\n").encode()
            source = "people.csv"
        else:  # a few KB that inflate past DATA_LIMIT
            many = [f"north,n1,{20 + i % 80},true,single" for i in range(rng.randint(4000, 40000))]
            body = gzip.compress(("\n".join(lines[:1] + many) + "\n").encode())
            source = "people.csv.gz"
        with open(os.path.join(here, source), "wb") as fh:
            fh.write(body)
    elif kind.startswith("folder-"):
        folder = _partition_folder(here)
        spot = rng.choice([folder, os.path.join(folder, "region=north")])
        if kind == "folder-link":  # a partition kept elsewhere: read once, as any other
            elsewhere = os.path.join(here, "store", "region=west")
            os.makedirs(elsewhere)
            pq.write_table(_people_table(3, "west"), os.path.join(elsewhere, "part.parquet"))
            os.symlink(elsewhere, os.path.join(folder, "region=west"))
            refused, rows = False, 11
        elif kind == "folder-loop":
            target = rng.choice(["..", ".", folder, os.path.join(folder, "region=south")])
            os.symlink(target, os.path.join(spot, rng.choice(["loop", "region=east", "x.parquet"])))
        elif kind == "folder-device":
            os.symlink(
                rng.choice(["/dev/zero", "/dev/urandom", "/dev/null", "/dev/full"]),
                os.path.join(spot, rng.choice(["dev.parquet", "region=east"])),
            )
        else:
            os.mkfifo(os.path.join(spot, rng.choice(["pipe.parquet", "region=east"])))
    else:
        lines = ["region,district,age,smoker,status"] + [f"north,n1,{20 + i},true,single" for i in range(8)]
        i = rng.randrange(1, len(lines))
        if kind == "ragged-csv":
            lines[i] += "," * rng.randint(1, 3) + rng.choice(["", "x", "=1+1", rng.choice(BIDI)])
        else:
            names = lines[0].split(",")
            dup = rng.choice(names)
            lines = [lines[0] + "," + dup] + [line + ",x" for line in lines[1:]]
        with open(os.path.join(here, "people.csv"), "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        source = "people.csv"
    path = os.path.join(here, "spec.dps")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(DATA_SPEC.replace("SOURCE", source))
    return path, refused, rows


def run_data(kind: str, rng: random.Random, tmp: str) -> str:
    """One hostile data source read on both paths and fingerprinted: 'user-error' when it must be
    refused and is, 'ok' when it must be read and is (with the right number of rows)."""
    if kind == "bidi-report":
        return run_bidi_report(rng, tmp)
    if kind == "alias-bomb":
        depth = rng.randint(2, 9)
        text = "url_slug: bomb\na0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"a{d}: &a{d} [{', '.join(['*a' + str(d - 1)] * 9)}]\n" for d in range(1, depth)
        )
        outcome = run_entry(text, os.path.join(tmp, "bomb.yaml"))
        return outcome if outcome != "ok" else "internal: an alias bomb was accepted"

    def steps():
        import dpspec
        from dpspec.check.data import load_table
        from dpspec.check.sources import source_sha256
        from dpspec.engine.loading import load_engine_table
        from dpspec.engine.local import LocalEngine

        spec = dpspec.load(path)
        source = spec.data[0]
        full = source.path if "://" in source.path else os.path.join(spec.base_dir, source.path)
        if kind.startswith(("folder", "parquet", "uri")) or source.path.endswith(".parquet"):
            got = len(load_engine_table(spec, source, LocalEngine()))
            if got != rows:
                raise AssertionError(f"the engine path read {got} rows, not {rows}")
        got = len(load_table(spec, source))
        if got != rows:
            raise AssertionError(f"the local path read {got} rows, not {rows}")
        source_sha256(full)

    from dpspec.check import limits

    with _scratch_cwd(tmp) as here:
        path, refused, rows = make_data_case(kind, rng, here)
        record = limits.MAX_RECORD_BYTES
        limits.MAX_RECORD_BYTES = RECORD_LIMIT
        try:
            with limits.data_limit(DATA_LIMIT if kind in ("csv-bomb", "parquet-over-limit") else None):
                outcome = _outcome(steps)
        finally:
            limits.MAX_RECORD_BYTES = record
    if refused and outcome == "ok":
        return f"internal: hostile data ({kind}) was read instead of refused"
    if not refused and outcome == "user-error":
        return f"internal: good data ({kind}) was refused"
    return outcome


def run_bidi_report(rng: random.Random, tmp: str) -> str:
    """Bidi controls in a spec's text fields and in data values, compiled and reported: any control
    that reaches a report form (HTML, Markdown, JSON) is a bug (it reorders the report's words)."""
    from dpspec.report.bidi import BIDI_CONTROLS

    def sprinkle(text: str) -> str:
        """Controls inside the quoted texts a reader sees (the title, the domain's description)."""
        for _ in range(rng.randint(1, 4)):
            quoted = [
                m
                for m in _STRING.finditer(text)
                if m.group() in ('"fuzzed data"', '"a small survey"', '"north"') or any(ch in m.group() for ch in BIDI)
            ]
            m = rng.choice(quoted)
            at = rng.randint(m.start() + 1, m.end() - 1)
            text = text[:at] + rng.choice(BIDI) + text[at:]
        return text

    def steps():
        import dpspec
        from dpspec.report import render_all

        for kind, (name, content) in render_all(dpspec.compile(dpspec.load(path), seed=1)).items():
            if any(ch in content for ch in BIDI_CONTROLS):
                raise AssertionError(f"a bidi control reached {name}")

    with _scratch_cwd(tmp) as here:
        region = sprinkle('"north"').strip('"')  # one region (its district n1 lies in one region only)
        rows = ["region,district,age,smoker,status"] + [
            f"{region},n1,{20 + i},{'true' if i % 2 else 'false'},single" for i in range(6)
        ]
        with open(os.path.join(here, "people.csv"), "w", encoding="utf-8") as fh:
            fh.write("\n".join(rows) + "\n")
        path = os.path.join(here, "spec.dps")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(sprinkle(DATA_SPEC.replace("SOURCE", "people.csv")))
        outcome = _outcome(steps)
    return outcome


def subject(index: int, infer_every: int) -> str:
    """What case `index` fuzzes: mostly specs; every 10th a registry entry, every 10th convert,
    every 20th a verification result, every `infer_every`th infer's arguments, every 100th a
    writing command aimed at an odd output path, every 100th a budget near the samplers' limit
    whose check and compile must agree."""
    if infer_every > 0 and index % infer_every == infer_every - 1:
        return "infer"
    if index % 100 == 42:
        return "writer"
    if index % 50 == 17:
        return "data"
    if index % 100 == 71:
        return "release"
    if index % 100 == 89:
        return "check-agrees"
    if index % 50 == 29:
        return "frames"
    if index % 50 == 37:
        return "line-ends"
    return {3: "entry", 6: "convert"}.get(index % 10, "verify-json" if index % 20 == 9 else "spec")


def case(
    index: int, seed: int, tmp: str | None, cli_every: int, data_every: int, verify_every: int = 0, infer_every: int = 0
):
    """(input, kind, text, outcome) for case `index` of a run with `seed`: reproducible alone."""
    rng = random.Random(f"{seed}:{index}")
    what = subject(index, infer_every if tmp is not None else 0)
    if what == "entry":
        name, kind = rng.choice(ENTRIES), rng.choice(KINDS)
        text = mutate(original(name), kind, rng)
        return name, kind, text, run_entry(text, os.path.join(SPECS_DIR, name))
    if what == "convert":
        params, options = convert_case(rng)
        return "convert", "params", repr((params, options)), run_convert(params, options)
    if what == "verify-json" and tmp is not None:
        kind = rng.choice(KINDS)
        text = mutate(verify_json(), kind, rng)
        return "verify.json", kind, text, run_verify_json(text, tmp)
    if what == "infer":
        args = infer_case(rng, tmp)
        return "infer", "args", repr(args), run_infer(args, tmp)
    if what == "data" and tmp is not None:
        kind = rng.choice(DATA_KINDS)
        return "data", kind, kind, run_data(kind, rng, tmp)
    if what == "line-ends":
        name = rng.choice(SPECS)
        return name, "line_ends", name, run_line_ends(name, rng)
    if what == "frames":
        return "lsp", "frames", "frames", run_frames(rng)
    if what == "check-agrees" and tmp is not None:
        return "check-agrees", "check-agrees", "check-agrees", run_check_agrees(rng, tmp)
    if what == "release" and tmp is not None:
        return "release", "release", "release", run_release_values(rng, tmp)
    if what == "writer" and tmp is not None:
        command, output = writer_case(rng)
        return command, "output", repr(output), run_writer(command, output, tmp)
    name, kind = rng.choice(SPECS), rng.choice(KINDS)
    text = mutate(original(name), kind, rng)
    with_data = data_every > 0 and index % data_every == 0
    outcome = run_api(text, os.path.join(SPECS_DIR, name), with_data)
    if verify_every > 0 and index % verify_every == 0 and not outcome.startswith("internal"):
        outcome = worse(outcome, run_verify(text, os.path.join(SPECS_DIR, name), index))
    if tmp is not None and cli_every > 0 and index % cli_every == 0 and not outcome.startswith("internal"):
        outcome = worse(outcome, run_cli(text, name, tmp, with_data))
    return name, kind, text, outcome


LABELS = ("ok", "user-error", "plugin-crash", "internal")


def label(outcome: str) -> str:
    return next(lab for lab in LABELS if outcome.startswith(lab))


def worse(a: str, b: str) -> str:
    return max(a, b, key=lambda o: LABELS.index(label(o)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cli-every", type=int, default=20, help="run the CLI on every Nth case (0: never)")
    ap.add_argument("--data-every", type=int, default=50, help="account data-dependent budgets every Nth case")
    ap.add_argument(
        "--verify-every", type=int, default=25, help="run `verify` (20 runs) on every Nth spec case (0: never)"
    )
    ap.add_argument(
        "--infer-every", type=int, default=200, help="fuzz `infer`'s arguments in every Nth case (0: never)"
    )
    ap.add_argument("--save", default=None, help="folder to write each internal error's spec and message into")
    ap.add_argument("--report-every", type=int, default=5000)
    args = ap.parse_args(argv)
    outcomes, by_kind, internal = collections.Counter(), collections.Counter(), collections.Counter()
    by_subject = collections.Counter()
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="dpspec-fuzz-") as tmp:
        mirror(tmp)
        for i in range(args.cases):
            name, kind, text, outcome = case(
                i, args.seed, tmp, args.cli_every, args.data_every, args.verify_every, args.infer_every
            )
            lab = label(outcome)
            outcomes[lab] += 1
            by_kind[kind, lab] += 1
            by_subject[subject(i, args.infer_every), lab] += 1
            if lab in ("internal", "plugin-crash"):
                first = outcome.split("\n")[0][:160]
                internal[lab, first] += 1
                if args.save:
                    os.makedirs(args.save, exist_ok=True)
                    with open(
                        os.path.join(args.save, f"case-{i}.dps"), "w", encoding="utf-8", errors="surrogateescape"
                    ) as fh:
                        fh.write(text)
                    with open(os.path.join(args.save, f"case-{i}.txt"), "w", encoding="utf-8") as fh:
                        fh.write(f"spec {name}, mutation {kind}, seed {args.seed}, case {i}\n{outcome}\n")
            if (i + 1) % args.report_every == 0:
                print(f"{i + 1} cases, {time.time() - start:.0f} s: {dict(outcomes)}", flush=True)
    print(
        f"\n{args.cases} cases in {time.time() - start:.0f} s (seed {args.seed}): "
        + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    )
    for kind in [*KINDS, "params", "args", "output", "frames", "release", "check-agrees", *dict.fromkeys(DATA_KINDS)]:
        print(f"  {kind:15s} " + ", ".join(f"{lab} {by_kind[kind, lab]}" for lab in LABELS))
    for what in SUBJECTS:
        print(f"  {what:15s} " + ", ".join(f"{lab} {by_subject[what, lab]}" for lab in LABELS))
    for (lab, message), n in internal.most_common():
        print(f"  {lab} x{n}: {message}")
    return 1 if outcomes["internal"] else 0


if __name__ == "__main__":
    sys.exit(main())

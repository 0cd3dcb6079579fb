#!/usr/bin/env python3
"""Fuzz dpspec as a hostile user would: mutations of every bundled spec through the API and the CLI.

    python scripts/fuzz.py                      # 100,000 cases, counts by outcome and mutation
    python scripts/fuzz.py --cases 2000 --seed 7 --cli-every 10 --save fuzz-failures/

Each case takes a bundled spec, applies one mutation (byte flips, truncations, huge numbers,
odd data and include paths, line deletions and duplications), then parses, checks, formats,
describes and accounts it through the Python API; every `--cli-every`th case also runs
`dpspec check/show/fmt/budget` on it. An outcome is `ok`, `user-error` (a DpspecError, exit 1
or 2) or `internal` (any other exception, exit 3, or a traceback): the goal is zero internal.
Specs whose budget needs their data are accounted once in `--data-every` cases (loading the
1940 households takes a second). tests/test_fuzz.py runs the same engine with hypothesis.
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import random
import re
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SPECS_DIR = os.path.join(ROOT, "specs")
SPECS = sorted(os.path.relpath(p, SPECS_DIR) for p in glob.glob(os.path.join(SPECS_DIR, "**", "*.dps"), recursive=True))

HUGE_NUMBERS = ["9" * 5000, "1e999", "1e-99999999", "1e" + "9" * 5000, "0." + "1" * 300, "10^64*10^64*10^64*10^64*10^64",
                "(10^64)^64", "1e308*10", "1e-400", "2^-64^64", "99999999999999999999999", "0", "-1", "1/0", "inf", "nan"]
ODD_PATHS = ["/dev/zero", "/dev/null", "/dev/stdin", "/dev/urandom", "/", ".", "", "..", "/proc/self/status", "/proc/self/mem",
             "nonexistent.csv", "nonexistent.dps", "a" * 5000, "x\x00y.csv", "../" * 40 + "etc/passwd", "~/x.csv",
             "data", "data/", "program.dps", "../acs_program/program.dps", "\\\\server\\share.csv", "é.csv", "x.parquet"]
KINDS = ["flip", "truncate", "huge", "path", "delete_line", "duplicate_line", "splice", "insert_junk"]
_NUMBER = re.compile(r"(?<![\w.])\d+(\.\d+)?([eE][+-]?\d+)?")
_STRING = re.compile(r'"[^"\n]*"')
_JUNK = ["{", "}", "(", ")", ":", ",", "..", "^", "/", "*", "-", "<=", "\n", "\t", "#", '"', "by", "in", "with", "\x00", "\ufeff", "é"]


def mutate(text: str, kind: str, rng: random.Random) -> str:
    """One mutation of a spec's text."""
    if not text:
        return text
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
        return text[: m.start()] + rng.choice(HUGE_NUMBERS) + text[m.end():]
    if kind == "path":
        spots = list(_STRING.finditer(text))
        if not spots:
            return text
        m = rng.choice(spots)
        return text[: m.start()] + '"' + rng.choice(ODD_PATHS) + '"' + text[m.end():]
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    if kind == "delete_line":
        return "\n".join(lines[:i] + lines[i + 1:])
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
    from dpspec.errors import DpspecError

    try:
        _api_steps(text, path, with_data)
    except DpspecError:
        return "user-error"
    except Exception as exc:  # noqa: BLE001 - the point: anything else is a bug
        return f"internal: {type(exc).__name__}: {str(exc)[:200]}\n{traceback.format_exc(limit=-3)}"
    return "ok"


def _api_steps(text, path, with_data):
    from dpspec.budget_report import budget_summary
    from dpspec.checker import check
    from dpspec.describe import describe_spec
    from dpspec.formatter import format_spec
    from dpspec.parser import parse

    spec = parse(text, path)
    format_spec(spec)
    describe_spec(spec)
    if spec.program is None:
        checked = check(spec)
        if getattr(checked.mechanism, "needs_data_for_budget", False) and not with_data:
            return
    budget_summary(spec)


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

    from dpspec.cli import main

    path = os.path.join(tmp, os.path.dirname(name), "__fuzz__.dps")
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text)
    commands = [["check", path], ["show", path], ["fmt", path]]
    if with_data or "swap" not in text:
        commands.append(["budget", path])
    worst = "ok"
    for args in commands:
        result = CliRunner().invoke(main, args)
        if result.exit_code not in (0, 1, 2) or "Traceback" in result.output or (
                result.exception is not None and not isinstance(result.exception, SystemExit)):
            return f"internal: dpspec {args[0]} exit {result.exit_code}: {result.output[-300:]}"
        if result.exit_code:
            worst = "user-error"
    return worst


def case(index: int, seed: int, tmp: str | None, cli_every: int, data_every: int):
    """(spec, kind, text, outcome) for case `index` of a run with `seed`: reproducible alone."""
    rng = random.Random(f"{seed}:{index}")
    name, kind = rng.choice(SPECS), rng.choice(KINDS)
    text = mutate(original(name), kind, rng)
    with_data = data_every > 0 and index % data_every == 0
    outcome = run_api(text, os.path.join(SPECS_DIR, name), with_data)
    if tmp is not None and cli_every > 0 and index % cli_every == 0 and not outcome.startswith("internal"):
        outcome = run_cli(text, name, tmp, with_data)
    return name, kind, text, outcome


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cli-every", type=int, default=20, help="run the CLI on every Nth case (0: never)")
    ap.add_argument("--data-every", type=int, default=50, help="account data-dependent budgets every Nth case")
    ap.add_argument("--save", default=None, help="folder to write each internal error's spec and message into")
    ap.add_argument("--report-every", type=int, default=5000)
    args = ap.parse_args(argv)
    outcomes, by_kind, internal = collections.Counter(), collections.Counter(), collections.Counter()
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="dpspec-fuzz-") as tmp:
        mirror(tmp)
        for i in range(args.cases):
            name, kind, text, outcome = case(i, args.seed, tmp, args.cli_every, args.data_every)
            label = "internal" if outcome.startswith("internal") else outcome
            outcomes[label] += 1
            by_kind[kind, label] += 1
            if label == "internal":
                first = outcome.split("\n")[0][:160]
                internal[first] += 1
                if args.save:
                    os.makedirs(args.save, exist_ok=True)
                    with open(os.path.join(args.save, f"case-{i}.dps"), "w", encoding="utf-8", errors="surrogateescape") as fh:
                        fh.write(text)
                    with open(os.path.join(args.save, f"case-{i}.txt"), "w", encoding="utf-8") as fh:
                        fh.write(f"spec {name}, mutation {kind}, seed {args.seed}, case {i}\n{outcome}\n")
            if (i + 1) % args.report_every == 0:
                print(f"{i + 1} cases, {time.time() - start:.0f} s: {dict(outcomes)}", flush=True)
    print(f"\n{args.cases} cases in {time.time() - start:.0f} s (seed {args.seed}): " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    for kind in KINDS:
        print(f"  {kind:15s} " + ", ".join(f"{label} {by_kind[kind, label]}" for label in ("ok", "user-error", "internal")))
    for message, n in internal.most_common():
        print(f"  internal x{n}: {message}")
    return 1 if outcomes["internal"] else 0


if __name__ == "__main__":
    sys.exit(main())

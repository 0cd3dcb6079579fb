#!/usr/bin/env python3
"""`dpspec lsp` latency: didChange -> publishDiagnostics on the largest bundled spec (issue 26's
goal: within 300 ms), against the floor, the bare parse + check of the same text in-process, timed right after each
change so that the shared machine's load weighs on both alike.

    python benchmarks/bench_lsp.py [--changes 60]

The server runs as an editor runs it (a subprocess spoken to over stdio, tests/lsp_client.py).
Each change sends the whole text and waits for the diagnostics of that version; the edits cycle
through a valid edit, a checker error (a parameter out of range) and a half-typed line (a syntax
error, which the server also salvages section by section). Peak memory is the server's VmHWM.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.lsp_client import Client, uri  # noqa: E402


def largest_spec() -> str:
    found = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(ROOT, "specs")) for f in fs if f.endswith(".dps")]
    return max(found, key=os.path.getsize)


def variants(text: str) -> list[tuple[str, str]]:
    """(kind, text): a valid edit, a checker error, a half-typed line, each a little different."""
    budget = re.search(r"^budget .*$", text, re.M)
    out = []
    for i in range(1, 4):
        valid = text + f"\n# edit {i}\n"
        error = text.replace(budget.group(), budget.group()) + f"\nbudget delta <= 2.{i}\n"  # delta must be < 1
        half = text + f"\nrelease {{\n  count {'x' * i} by"
        out += [("valid", valid), ("checker error", error), ("half-typed", half)]
    return out


def floor(text: str, path: str) -> float:
    """The bare parse + check of one text in this process (seconds)."""
    from dpspec.check.checker import check
    from dpspec.errors import SpecError
    from dpspec.language.parser import parse

    t = time.perf_counter()
    try:
        check(parse(text, path))
    except SpecError:
        pass
    return time.perf_counter() - t


def peak_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None


def summary(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"{name:28s} n={len(times):3d}  median {statistics.median(times) * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=60)
    args = ap.parse_args()
    path = largest_spec()
    text = open(path, encoding="utf-8").read()
    texts = variants(text)
    print(f"spec: {os.path.relpath(path, ROOT)} ({len(text)} bytes, {text.count(chr(10))} lines)")

    t0 = time.perf_counter()
    client = Client(cwd=ROOT)
    client.initialize(ROOT)
    started = time.perf_counter() - t0
    doc = uri(path)
    t = time.perf_counter()
    client.open(doc, text)
    client.diagnostics(doc, 1)
    first = time.perf_counter() - t
    for _, body in texts:  # the floor's imports and caches, once
        floor(body, path)
    latencies: dict = {}
    base: dict = {}
    for n in range(args.changes):  # each change, then its floor at once: the machine's load hits both alike
        kind, body = texts[n % len(texts)]
        t = time.perf_counter()
        client.change(doc, body, n + 2)
        client.diagnostics(doc, n + 2)
        latencies.setdefault(kind, []).append(time.perf_counter() - t)
        base.setdefault(kind, []).append(floor(body, path))
    peak = peak_kib(client.proc.pid)
    status = client.close()

    print(f"server start to initialized: {started:.3f} s; first diagnostics after didOpen: {first * 1000:.1f} ms")
    every = [x for v in latencies.values() for x in v]
    for kind, times in latencies.items():
        print(summary(f"didChange ({kind})", times))
    print(summary("didChange (all)", every))
    floors = [x for v in base.values() for x in v]
    for kind, times in base.items():
        print(summary(f"floor parse+check ({kind})", times))
    print(summary("floor parse+check (all)", floors))
    ratio = statistics.median(every) / statistics.median(floors)
    print(f"ratio to the floor (medians): {ratio:.2f}x")
    if peak:
        print(f"server peak memory (VmHWM): {peak / 1024:.1f} MiB")
    print(f"floor process peak memory (ru_maxrss): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")
    ordered = sorted(every)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    print(
        f"goal: diagnostics within 300 ms of a change (p95): {'met' if p95 < 0.3 else 'NOT met'} "
        f"(worst {max(every) * 1000:.1f} ms); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"server exit status {status}"
    )


if __name__ == "__main__":
    main()

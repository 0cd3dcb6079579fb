#!/usr/bin/env python3
"""How fast dpspec refuses what it must not read or cannot reach: devices and pipes named as
inputs, a hostile verification file, a YAML alias bomb, an unreachable location or Spark master.

    python benchmarks/bench_refusals.py [--repeat 3]

The tests prove that each is refused with a clear error and nothing written (tests/test_hostile_commands.py,
tests/test_hostile_data.py, tests/test_source_uris.py, tests/test_engine.py); a refusal that never
ended would fail them at the suite's timeout. How long a refusal takes depends on the machine and
its load, so the time is measured here, with the bound each refusal is meant to stay within (a
device is refused before it is read, a bomb before it is expanded, an unreachable host within the
connection's timeout). The figure is the worst of --repeat runs; the script exits 1 when one is
over its bound.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import doc_table

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

from click.testing import CliRunner  # noqa: E402

from dpspec.cli.main import main  # noqa: E402

SPECS = ROOT / "specs"
RR = str(SPECS / "acs_ma_vision_rr.dps")
# A YAML alias bomb ("billion laughs"): nine levels of nine aliases each.
BOMB = "url_slug: bomb\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
)


def _cli(*args) -> None:
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exit_code in (1, 2) and "Traceback" not in res.output, res.output


def release_table_on_a_device(tmp: Path) -> None:
    from dpspec.inference.release import InferError, load_release

    (tmp / "manifest.json").write_text(json.dumps({"outputs": {"t": {"file": "t.csv"}}}))
    os.symlink("/dev/zero", tmp / "t.csv")
    try:
        load_release(str(tmp))
    except InferError:
        return
    raise AssertionError("a release table on /dev/zero was read")


def registry_entry(odd: str):
    def case(tmp: Path) -> None:
        path = {"/dev/zero": "/dev/zero", "fifo": str(tmp / "fifo"), "folder": str(tmp)}[odd]
        if odd == "fifo":
            os.mkfifo(path)
        _cli("import", "--registry", path, "-o", tmp / "x.dps")
        assert not (tmp / "x.dps").exists()

    return case


def verification_file(content):
    def case(tmp: Path) -> None:
        from dpspec.verify.miniature import VerifyError
        from dpspec.verify.result import load_json

        path = "/dev/zero"
        if content is not None:
            path = str(tmp / "v.json")
            Path(path).write_bytes(content if isinstance(content, bytes) else content.encode())
        try:
            load_json(path)
        except VerifyError:
            return
        raise AssertionError("a hostile verification file was accepted")

    return case


def safetab_tables_on_devices(tmp: Path) -> None:
    from dpspec_safetab.iterations import IterationTable

    from dpspec.errors import DataError

    try:
        IterationTable.load(str(tmp), {"codes": "/dev/zero", "iterations": "/dev/zero", "mapping": "/dev/zero"})
    except DataError:
        return
    raise AssertionError("SafeTab read a table from /dev/zero")


def alias_bomb(tmp: Path) -> None:
    (tmp / "bomb.yaml").write_text(BOMB)
    _cli("import", "--registry", tmp / "bomb.yaml", "-o", tmp / "x.dps")


def unreachable_location(tmp: Path) -> None:
    from dpspec.errors import DataError
    from tests.test_source_uris import compile_from

    for name, source in (("hdfs", "hdfs://namenode.invalid:8020/census/persons/"), ("scheme", "nosuch://x/y/")):
        try:
            compile_from(tmp, source, name)
        except DataError as err:
            assert "cannot reach this location" in str(err), err
        else:
            raise AssertionError(f"{source} was reached")


def unreachable_spark_master(tmp: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = CliRunner().invoke(
        main,
        ["compile", RR, "-o", str(tmp / "out"), "--engine", "spark", "--spark-master", f"spark://127.0.0.1:{port}"],
    )
    assert res.exit_code == 2 and "cannot reach the Spark master" in res.output, res.output


def _spark_usable() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    from dpspec.engine.spark import find_java

    return find_java() is not None


CASES = [  # (what is refused, the bound in seconds, the case)
    ("a release table that is /dev/zero (`infer`)", 5, release_table_on_a_device),
    ("a registry entry that is /dev/zero (`import`)", 10, registry_entry("/dev/zero")),
    ("a registry entry that is a FIFO (`import`)", 10, registry_entry("fifo")),
    ("a registry entry that is a folder (`import`)", 10, registry_entry("folder")),
    ("a verification file that is /dev/zero", 10, verification_file(None)),
    ("a verification file holding a 5,000-digit number", 10, verification_file('{"verdict": ' + "9" * 5000 + "}")),
    ("a verification file nested 100,000 deep", 10, verification_file("[" * 100_000)),
    ("a verification file that is not UTF-8", 10, verification_file(b"\xff\xfe")),
    ("SafeTab's iteration tables on /dev/zero", 5, safetab_tables_on_devices),
    ("a registry entry that is a YAML alias bomb (`import`)", 5, alias_bomb),
    ("a source on an unreachable host and on an unknown scheme", 60, unreachable_location),
    ("a compile on an unreachable Spark master", 15, unreachable_spark_master),
]


def main_() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    doc_table.add_option(ap)
    args = ap.parse_args()
    rows, over = [], []
    for what, bound, case in CASES:
        if case is unreachable_spark_master and not _spark_usable():
            print(f"{what:60s} skipped: no pyspark or no Java")
            continue
        worst = 0.0
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                case(Path(tmp))
                worst = max(worst, time.perf_counter() - start)
        verdict = "within" if worst < bound else "OVER"
        print(f"{what:60s} {worst:7.3f} s  ({verdict} {bound} s)")
        rows.append([what, f"{worst:.3f}", bound, verdict])
        if worst >= bound:
            over.append(what)
    doc_table.write(
        "bench_refusals",
        "Refusals",
        "How long dpspec takes to refuse an input it must not read or a place it cannot reach; "
        "the worst of the runs, against the bound each refusal is meant to stay within. The "
        "refusals themselves (the error, nothing written) are tested in the suite.",
        ["refused", "worst seconds", "bound (s)", "verdict"],
        rows,
        enabled=not args.no_doc,
    )
    if over:
        print("over the bound: " + "; ".join(over))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main_())

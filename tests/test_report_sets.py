"""`audit -o` and `infer -o` write one output set each, as compile does: manifest with the SHA-256
of every file, all or nothing under SIGKILL, a lock against a second writer, inputs untouched."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import time

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.publish.output_set import verify_set
from tests.conftest import SPECS
from tests.test_output_set import _hidden, _spawn

AUDIT = os.path.join(SPECS, "audit", "added_invariants.dps")
BASELINE = os.path.join(SPECS, "audit", "added_invariants.baseline.dps")
TARGET = ["--target", "count persons by DEYE"]


def digest(folder) -> dict:
    return {
        os.path.relpath(os.path.join(d, f), folder): hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest()
        for d, _, files in os.walk(folder)
        for f in files
    }


@pytest.fixture(scope="module")
def rr(tmp_path_factory):
    """The randomized-response spec in a folder of its own (data linked beside it) and a seeded release."""
    import dpspec
    from dpspec.publish.output import write_result

    base = tmp_path_factory.mktemp("rr")
    folder = base / "spec"  # the release goes beside it: never inside a folder holding an input
    (folder / "data" / "acs").mkdir(parents=True)
    shutil.copy(os.path.join(SPECS, "acs_ma_vision_rr.dps"), folder / "rr.dps")
    os.symlink(os.path.join(SPECS, "data", "acs", "ma2019.csv"), folder / "data" / "acs" / "ma2019.csv")
    write_result(dpspec.compile(str(folder / "rr.dps"), seed=1), str(base / "release"))
    return str(folder / "rr.dps"), str(base / "release")


def _infer(rr, out, seed=1, *extra):
    spec, release = rr
    return ["infer", spec, release, *TARGET, "--draws", "20", "--seed", str(seed), "-o", str(out), *extra]


def _run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _manifest(out) -> dict:
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.slow  # an audit and an inference written
@pytest.mark.parametrize("command", ["audit", "infer"])
def test_the_manifest_lists_every_file_with_its_sha256(rr, tmp_path, command):
    out = tmp_path / "out"
    res = _run(["audit", AUDIT, "--baseline", BASELINE, "-o", out] if command == "audit" else _infer(rr, out))
    assert res.exit_code in (0, 1) and "Traceback" not in res.output, res.output
    man = _manifest(out)
    assert man["command"] == command
    assert set(man["files"]) == set(os.listdir(out)) - {"manifest.json"} == set(man["reports"].values())
    for name, entry in man["files"].items():
        data = (out / name).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    assert verify_set(str(out)) == []
    if command == "audit":
        assert (
            man["spec"]["path"] == "added_invariants.dps" and man["baseline"]["path"] == "added_invariants.baseline.dps"
        )
        assert {"report.html", "report.md", "report.json"} == set(man["files"])
    else:
        assert {"report.html", "report.md", "result.json", "draws.csv"} == set(man["files"])
        assert (
            man["release"]["manifest_sha256"]
            == hashlib.sha256(open(os.path.join(rr[1], "manifest.json"), "rb").read()).hexdigest()
        )
        assert man["seed"] == 1 and man["target"] == "count persons by DEYE"
    (out / "report.md").write_text("tampered\n")
    assert verify_set(str(out)) == ["altered: report.md"]


@pytest.mark.slow  # an audit and an inference written twice each
def test_a_rerun_replaces_its_own_set_and_cleans_leftovers(rr, tmp_path):
    out = tmp_path / "out"
    assert _run(_infer(rr, out, seed=1)).exit_code == 0
    first = _manifest(out)["files"]
    (tmp_path / ".out.dpspec-new-crashed").mkdir()  # what a killed run leaves
    (tmp_path / ".out.dpspec-new-crashed" / "draws.csv").write_text("half")
    (tmp_path / ".out.dpspec-old-crashed").mkdir()
    assert _run(_infer(rr, out, seed=2)).exit_code == 0
    assert _manifest(out)["files"] != first and verify_set(str(out)) == []
    assert _hidden(tmp_path) == []


@pytest.mark.parametrize("first, second", [("audit", "infer"), ("infer", "audit"), ("audit", "compile")])
def test_one_command_never_replaces_another_commands_set(rr, tmp_path, first, second):
    out = tmp_path / "out"
    args = {"audit": ["audit", rr[0], "-o", out], "infer": _infer(rr, out), "compile": ["compile", rr[0], "-o", out]}
    assert _run(args[first]).exit_code in (0, 1)
    before = digest(out)
    res = _run(args[second])
    assert res.exit_code == 1 and f"holds the output set of `dpspec {first}`" in res.output, res.output
    assert digest(out) == before


def test_nothing_is_written_below_an_audit_set(rr, tmp_path):
    assert _run(["audit", rr[0], "-o", tmp_path / "out"]).exit_code in (0, 1)
    before = digest(tmp_path / "out")
    res = _run(_infer(rr, tmp_path / "out" / "sub"))
    assert res.exit_code == 1 and "which holds the output set of `dpspec audit`" in res.output, res.output
    assert digest(tmp_path / "out") == before


def test_an_audit_set_is_not_a_release(rr, tmp_path):
    assert _run(["audit", rr[0], "-o", tmp_path / "out"]).exit_code in (0, 1)
    res = _run(["infer", rr[0], tmp_path / "out", *TARGET])
    assert res.exit_code == 1 and "holds the reports of `dpspec audit`, not a release" in res.output, res.output


@pytest.mark.parametrize("command", ["audit", "infer"])
@pytest.mark.parametrize("where", ["spec folder", "inside the spec folder", "around the data folder"])
def test_output_in_or_around_an_input_folder_is_refused_with_the_input_intact(rr, command, where):
    spec, release = rr
    base = os.path.dirname(spec)
    out = {
        "spec folder": base,
        "inside the spec folder": os.path.join(base, "reports"),
        "around the data folder": os.path.join(base, "data"),
    }[where]
    before = digest(base), sorted(os.listdir(base))
    res = _run(["audit", spec, "-o", out] if command == "audit" else _infer(rr, out))
    assert res.exit_code == 1 and "refusing" in res.output and "Traceback" not in res.output, res.output
    assert (digest(base), sorted(os.listdir(base))) == before  # inputs byte-identical; no lock, no staging folder


@pytest.mark.parametrize("command", ["audit", "infer"])
def test_a_held_lock_refuses_a_second_writer(rr, tmp_path, command):
    import fcntl

    out = tmp_path / "out"
    fd = os.open(tmp_path / ".out.dpspec-lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        res = _run(["audit", rr[0], "-o", out] if command == "audit" else _infer(rr, out))
    finally:
        os.close(fd)
    assert res.exit_code == 1 and "is writing to" in res.output, res.output
    assert not out.exists()


def _wait_for(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


# A writer that, once its set is staged and the lock held, waits for the file GO before swapping it in.
_HELD = """\
import os, sys, time
import dpspec.publish.output_set as s
swap = s._swap_in
def held(*args):
    while not os.path.exists({go!r}):
        time.sleep(0.01)
    swap(*args)
s._swap_in = held
from dpspec.cli.main import main
main(sys.argv[1:])
"""


@pytest.mark.slow  # concurrent writers in subprocesses
@pytest.mark.parametrize("command", ["audit", "infer"])
def test_two_concurrent_writers_one_refused(rr, tmp_path, command):
    """The first holds the lock (kept waiting before its swap); the second, run meanwhile, is
    refused; then the first completes its set."""
    out, go = tmp_path / "out", tmp_path / "go"
    driver = tmp_path / "held.py"
    driver.write_text(_HELD.format(go=str(go)))
    args = [str(a) for a in (["audit", rr[0], "-o", out] if command == "audit" else _infer(rr, out))]
    first = _spawn([str(driver), *args])
    try:
        _wait_for(lambda: any(".out.dpspec-new-" in n for n in os.listdir(tmp_path)) or first.poll() is not None)
        assert first.poll() is None, first.communicate()
        second = _spawn(["-m", "dpspec.cli.main", *args])
        _, err = second.communicate(timeout=120)
        assert second.returncode == 1 and "is writing to" in err, err
        go.write_text("")
        first.communicate(timeout=120)
        assert first.returncode in (0, 1)  # audit: 1 when a finding is critical
    finally:
        go.write_text("")
        first.kill()
        first.communicate()
    assert _manifest(out)["command"] == command and verify_set(str(out)) == [] and _hidden(tmp_path) == []


# A writer slowed while it writes and swaps its set, saying WRITING when it starts, so that the
# kills land where a set could be torn (the minutes before, spent computing, could tear nothing).
_WRITING = """\
import sys, time
import dpspec.publish.output_set as s
stage, fsync, swap = s.stage_text, s._fsync, s._swap_in
def stage_text(*args):
    if not getattr(s, "said", False):
        s.said = True
        print("WRITING", flush=True)
    time.sleep(0.02)
    stage(*args)
s.stage_text = stage_text
s._fsync = lambda *a: (time.sleep(0.03), fsync(*a))
s._swap_in = lambda *a: (time.sleep(0.05), swap(*a), time.sleep(0.05))
from dpspec.cli.main import main
main(sys.argv[1:])
"""


@pytest.mark.slow  # runs in subprocesses killed at random moments
@pytest.mark.parametrize("command", ["audit", "infer"])
def test_sigkill_at_random_moments_leaves_the_old_or_the_new_set(rr, tmp_path, command):
    """Old and new sets differ (infer: another seed; audit: against a baseline), so a mix shows.
    The sets are made in-process; the killed runs are subprocesses, killed while they write."""
    out = tmp_path / "out"
    driver = tmp_path / "writing.py"
    driver.write_text(_WRITING)
    if command == "audit":
        old, new = ["audit", AUDIT, "-o", out], ["audit", AUDIT, "--baseline", BASELINE, "-o", out]
    else:
        old, new = _infer(rr, out, seed=1), _infer(rr, out, seed=2)

    def run(args, kill_after=None):
        p = _spawn([str(driver), *map(str, args)])
        assert p.stdout.readline().strip() == "WRITING"
        start = time.perf_counter()
        if kill_after is not None:
            time.sleep(kill_after)
            p.send_signal(signal.SIGKILL)
        p.communicate(timeout=120)
        return p.returncode, time.perf_counter() - start

    assert _run(new).exit_code in (0, 1)
    new_files = _manifest(out)["files"]
    code, duration = run(old)
    assert code in (0, 1)
    old_files = _manifest(out)["files"]
    assert old_files != new_files
    for seed in range(3):  # each killed run writes the set not there now, so a mix of the two would show
        present = _manifest(out)["files"]  # one random moment in each third of the writing phase:
        moment = (seed + random.Random(seed).random()) / 3 * duration
        run(new if present == old_files else old, moment)
        assert out.is_dir(), f"seed {seed}: the target vanished"
        assert verify_set(str(out)) == [], f"seed {seed}: a mixed or partial set"
        assert _manifest(out)["files"] in (old_files, new_files), f"seed {seed}: neither the old set nor the new"
    assert _run(new).exit_code in (0, 1)  # the next run cleans whatever the kills left
    assert _manifest(out)["files"] == new_files and _hidden(tmp_path) == []

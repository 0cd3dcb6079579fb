"""All-or-nothing output sets: manifest with SHA-256 of every file, swap-in, leftovers, lock, SIGKILL."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.publish.output_set import verify_set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _compile(spec, out, *extra):
    return CliRunner().invoke(main, ["compile", str(spec), "-o", str(out), *extra])


def _hidden(parent):
    return sorted(
        n for n in os.listdir(parent) if any(k in n for k in (".dpspec-new-", ".dpspec-old-", ".dpspec-parts-"))
    )


def test_manifest_lists_every_file_with_its_sha256(small_spec, tmp_path):
    out = tmp_path / "out"
    assert _compile(small_spec, out).exit_code == 0
    man = json.loads((out / "manifest.json").read_text())
    # the certificate, written last, covers the manifest (tests/test_certificate.py)
    assert set(man["files"]) == set(os.listdir(out)) - {"manifest.json", "certificate.json"}
    assert {"responses.csv", "estimate.csv", "report.html", "report.md", "report.json"} <= set(man["files"])
    assert verify_set(str(out)) == []
    (out / "responses.csv").write_text("tampered\n")
    assert verify_set(str(out)) == ["altered: responses.csv"]


def test_release_files_keep_one_format_whatever_the_row_count():
    import pandas as pd

    from dpspec.publish.output import _table_filename

    assert _table_filename("t", pd.DataFrame({"a": range(3)})) == "t.csv"
    assert _table_filename("t", pd.DataFrame({"a": range(600_000)})) == "t.csv"


def test_recompile_swaps_the_whole_set_and_leaves_nothing_behind(small_spec, tmp_path):
    out = tmp_path / "out"
    assert _compile(small_spec, out).exit_code == 0
    (tmp_path / ".out.dpspec-new-crashed").mkdir()  # what a killed compile leaves
    (tmp_path / ".out.dpspec-new-crashed" / "responses.csv").write_text("half")
    (tmp_path / ".out.dpspec-old-crashed").mkdir()
    (tmp_path / ".out.dpspec-parts-crashed").mkdir()  # a killed compile's scratch folder of part files
    (tmp_path / ".out.dpspec-parts-crashed" / "part-00000.csv").write_text("1,2\n")
    first = (out / "manifest.json").read_text()
    assert _compile(small_spec, out).exit_code == 0
    assert (out / "manifest.json").read_text() != first
    assert verify_set(str(out)) == []
    assert _hidden(tmp_path) == []


def test_interrupted_fallback_swap_is_undone_on_the_next_run(small_spec, tmp_path):
    from dpspec.publish.output_set import target_lock

    out = tmp_path / "out"
    assert _compile(small_spec, out).exit_code == 0
    os.rename(out, tmp_path / ".out.dpspec-old-x")  # killed between the two renames
    with target_lock(str(out)):
        assert verify_set(str(out)) == []
    assert _hidden(tmp_path) == []


def test_a_folder_with_foreign_files_is_not_replaced(small_spec, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    result = _compile(small_spec, out)
    assert result.exit_code == 1 and "not part of a dpspec output set (thesis.tex)" in result.output
    assert os.listdir(out) == ["thesis.tex"]


def test_failed_compile_keeps_the_old_set(small_spec, tmp_path):
    out = tmp_path / "out"
    assert _compile(small_spec, out).exit_code == 0
    before = (out / "manifest.json").read_text()
    (small_spec.parent / "people.csv").write_text("region,district,age,smoker,status\nnorth,n1,999,true,N\n")
    assert _compile(small_spec, out).exit_code == 1
    assert (out / "manifest.json").read_text() == before and verify_set(str(out)) == []
    assert _hidden(tmp_path) == []


def test_a_held_lock_refuses_a_second_compile(small_spec, tmp_path):
    import fcntl

    out = tmp_path / "out"
    fd = os.open(tmp_path / ".out.dpspec-lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = _compile(small_spec, out)
    finally:
        os.close(fd)
    assert result.exit_code == 1 and "is writing to" in result.output
    assert not out.exists()
    assert _compile(small_spec, out).exit_code == 0  # released: the next one goes through


def test_no_lock_file_is_left_beside_the_output_folder_when_a_run_ends(small_spec, tmp_path):
    out = tmp_path / "out"
    (tmp_path / ".out.dpspec-lock").write_bytes(b"")  # what a killed run (or an older dpspec) left
    before = set(os.listdir(tmp_path))
    assert _compile(small_spec, out).exit_code == 0
    assert set(os.listdir(tmp_path)) == before - {".out.dpspec-lock"} | {"out"}
    from dpspec.publish.output_set import target_lock

    with pytest.raises(RuntimeError), target_lock(str(tmp_path / "failed")):
        assert (tmp_path / ".failed.dpspec-lock").exists()  # held while the run lasts
        raise RuntimeError("a run that fails after taking the lock")
    assert not any(n.endswith(".dpspec-lock") for n in os.listdir(tmp_path))


_CONTENDER = textwrap.dedent("""
    import os, sys
    from dpspec.publish.output_set import OutputSetError, target_lock
    out, inside, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    held = 0
    for _ in range(rounds):
        try:
            with target_lock(out):
                os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # fails if another holds it too
                held += 1
                os.unlink(inside)
        except OutputSetError:
            pass
    print(held)
""")


@pytest.mark.slow  # many runs in subprocesses racing for the lock
def test_the_lock_is_never_held_twice_while_runs_remove_its_file(tmp_path):
    """Three processes take and release the lock as fast as they can: each removes the lock file
    before releasing it, none may hold the lock while another does (a second holder would find
    the first one's marker), and nothing is left. The race is rare here; the test above forces it."""
    procs = [_spawn(["-c", _CONTENDER, str(tmp_path / "out"), str(tmp_path / "inside"), "300"]) for _ in range(3)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [r[1][-2000:] for r in results]
    assert sum(int(r[0]) for r in results) > 0
    assert os.listdir(tmp_path) == []


def test_a_run_whose_lock_file_is_replaced_before_it_locks_it_locks_the_new_file(tmp_path, monkeypatch):
    """The race that removing the lock file opens, made to happen: between this run's open and its
    flock, the previous holder removes the file and a third run creates it anew. Holding the old,
    nameless file would let the third run in beside this one; this run must hold the named file."""
    import fcntl

    from dpspec.publish.output_set import target_lock

    lock, real, calls = tmp_path / ".out.dpspec-lock", fcntl.flock, []

    def flock(fd, operation):
        if not calls:
            lock.unlink()
            lock.write_bytes(b"")
        calls.append(fd)
        return real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    with target_lock(str(tmp_path / "out")):
        assert len(calls) == 2  # it took the lock again, on the file now at the name
        other = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                real(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the third run would: refused
        finally:
            os.close(other)
    assert not lock.exists()


def _spawn(args, **kw):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.path.join(ROOT, "plugins"))
    return subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


@pytest.mark.slow  # concurrent compiles in subprocesses
def test_concurrent_compiles_into_one_folder(small_spec, tmp_path):
    out = tmp_path / "out"
    procs = [_spawn(["-m", "dpspec.cli.main", "compile", str(small_spec), "-o", str(out)]) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    codes = [c for c, _ in results]
    assert 0 in codes and set(codes) <= {0, 1}, results
    for code, err in results:
        if code == 1:
            assert "is writing to" in err
    assert verify_set(str(out)) == [] and _hidden(tmp_path) == []


# A compile whose writing phase is slowed down, so that kills land while the set is written
# and swapped; it says READY once imported, so the kill times measure the compile itself.
_SLOW = textwrap.dedent("""\
    import sys, time
    import dpspec.publish.output_set as s
    fsync, swap = s._fsync, s._swap_in
    s._fsync = lambda *a: (time.sleep(0.03), fsync(*a))
    s._swap_in = lambda *a: (time.sleep(0.05), swap(*a), time.sleep(0.05))
    from dpspec.cli.main import main
    print("READY", flush=True)
    main(sys.argv[1:])
    """)


@pytest.mark.slow  # compiles in subprocesses killed at random moments
def test_sigkill_at_random_moments_leaves_the_old_or_the_new_set(small_spec, tmp_path):
    out = tmp_path / "out"
    driver = tmp_path / "slow_compile.py"
    driver.write_text(_SLOW)
    args = [str(driver), "compile", str(small_spec), "-o", str(out)]

    def run(kill_after=None):
        p = _spawn(args)
        assert p.stdout.readline().strip() == "READY"
        start = time.perf_counter()
        if kill_after is None:
            p.communicate(timeout=120)
        else:
            time.sleep(kill_after)
            p.send_signal(signal.SIGKILL)
            p.communicate(timeout=120)
        return p.returncode, time.perf_counter() - start

    code, duration = run()
    assert code == 0
    manifests = {(out / "manifest.json").read_text()}
    for seed in range(5):
        code, _ = run(random.Random(seed).uniform(0, duration))
        assert out.is_dir(), f"seed {seed}: the target vanished"
        assert verify_set(str(out)) == [], f"seed {seed}: a mixed or partial set"
        manifests.add((out / "manifest.json").read_text())
    assert run()[0] == 0  # the next run cleans whatever the kills left
    assert verify_set(str(out)) == [] and _hidden(tmp_path) == []


@pytest.mark.parametrize("kind", ["new", "old"])
def test_leftover_names_belong_to_their_own_target_only(small_spec, tmp_path, kind):
    (tmp_path / f".other.dpspec-{kind}-x").mkdir()
    assert _compile(small_spec, tmp_path / "out").exit_code == 0
    assert (tmp_path / f".other.dpspec-{kind}-x").exists()

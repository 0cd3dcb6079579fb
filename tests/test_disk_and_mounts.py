"""A full disk under `compile -o` or `audit -o` is the machine's state, not a bug (exit 1, nothing
left behind), and the output guard compares folders by device and inode, so a second mount of
the spec's folder cannot take the output among the inputs."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def spec(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(os.path.join(ROOT, "specs", "acs_ma_vision_rr.dps"), folder / "rr.dps")
    (folder / "data").symlink_to(os.path.join(ROOT, "specs", "data"))
    return folder / "rr.dps"


@pytest.mark.parametrize("command", ["compile", "audit"])
def test_a_full_disk_is_a_user_facing_error_with_nothing_left_behind(spec, tmp_path, monkeypatch, command):
    import dpspec.publish.output_set as output_set

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output_set, "stage_text", full)
    monkeypatch.setattr(output_set, "write_manifest", full)
    before = sorted(os.listdir(tmp_path))
    seed = ["--seed", "1"] if command == "compile" else []
    res = CliRunner().invoke(main, [command, str(spec), *seed, "-o", str(tmp_path / "out")])
    assert res.exit_code == 1, res.output
    assert "No space left on device" in res.output and "internal error" not in res.output, res.output
    assert sorted(os.listdir(tmp_path)) == before  # no output folder, no staged copy, no lock


def test_an_output_through_a_link_to_the_spec_folder_is_refused_by_identity(spec, tmp_path):
    from dpspec.publish.input_guard import UnsafeOutputError, _check_identity

    (tmp_path / "again").symlink_to(spec.parent)
    with pytest.raises(UnsafeOutputError, match="same folder reached by another path"):
        _check_identity(str(tmp_path / "again" / "out"), [str(spec)], [])


def test_an_output_through_a_second_mount_of_the_spec_folder_is_refused(spec, tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("no private mount namespace here (unshare -m needs root)")
    again = tmp_path / "again"
    again.mkdir()
    script = (
        f"mount --bind {spec.parent} {again} && exec {sys.executable} -m dpspec.cli compile {spec} --seed 1 "
        f"-o {again}/out"
    )
    res = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "plugins")])},
    )
    assert res.returncode == 1 and "refusing" in (res.stdout + res.stderr), res.stdout + res.stderr
    assert sorted(os.listdir(spec.parent)) == ["data", "rr.dps"]  # nothing written among the inputs


def test_a_sweep_grid_of_a_trillion_points_is_refused_before_it_is_built(spec, tmp_path):
    axes = [f"--vary={name}=0.001:1:0.001" for name in ("p", "q", "r", "s")]  # 1,000 values each: 10^12 points
    for extra in ([], ["--yes"]):
        res = CliRunner().invoke(main, ["sweep", str(spec), *axes, *extra, "-o", str(tmp_path / "sweep")])
        assert res.exit_code == 1 and "1,000,000,000,000 points" in res.output, res.output
        assert "MemoryError" not in res.output and not (tmp_path / "sweep").exists()


def test_a_parquet_footer_declaring_many_rows_is_refused_before_reading(tmp_path, monkeypatch):
    """A constant column of many rows is a few bytes of run-length encoding: its encoded size
    passes the limit, its rows do not (500 million of them once climbed to 2.65 GB)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpspec.check import limits
    from dpspec.check.data import load_table
    from dpspec.errors import DataError
    from dpspec.language.parser import parse

    n = 400_000
    pq.write_table(
        pa.table(
            {
                "region": ["north"] * n,
                "district": ["n1"] * n,
                "age": [30] * n,
                "smoker": [True] * n,
                "status": ["single"] * n,
            }
        ),
        tmp_path / "people.parquet",
    )
    text = _FUZZ.DATA_SPEC.replace("SOURCE", "people.parquet")
    (tmp_path / "spec.dps").write_text(text)
    spec = parse(text, str(tmp_path / "spec.dps"))
    assert os.path.getsize(tmp_path / "people.parquet") < 64 << 10
    with limits.data_limit(1 << 20):  # the footer's encoded sizes are far below a MiB, its 2 million values above
        with pytest.raises(DataError, match="400,000 rows"):
            load_table(spec, spec.data[0])
    monkeypatch.setattr(limits, "available_memory", lambda: 10 << 20)  # 16 MB once read: more than this "machine" has
    with pytest.raises(DataError, match="free memory"):
        load_table(spec, spec.data[0])


def _fuzz():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dpspec_fuzz_limits", os.path.join(ROOT, "scripts", "fuzz.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FUZZ = _fuzz()


@pytest.mark.slow  # mounts a file system in a subprocess
def test_an_empty_mount_point_as_output_says_it_is_a_mount(spec, tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("no private mount namespace here (unshare -m needs root)")
    volume = tmp_path / "volume"
    volume.mkdir()
    script = f"mount -t tmpfs none {volume} && exec {sys.executable} -m dpspec.cli compile {spec} --seed 1 -o {volume}"
    res = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "plugins")])},
    )
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "is a mount point" in out and f"-o {volume}/compile-output" in out, out
    assert "Device or resource busy" not in out and "internal error" not in out

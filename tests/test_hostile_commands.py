"""The commands added after the first hardening pass hold as `compile` does: `infer -o`,
`export -o` and `import -o` never write over, into or around what they read, and every file
they (or `--verify`, a release, SafeTab's tables) read is a regular file of bounded size."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")
ENTRY = sorted(glob.glob(os.path.join(SPECS, "registry", "*.yaml")))[0]
TARGET = ["--target", "count persons by DEYE"]


def digest(folder) -> dict:
    return {
        os.path.relpath(os.path.join(d, f), folder): hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest()
        for d, _, files in os.walk(folder)
        for f in files
    }


@pytest.fixture
def spec_and_release(tmp_path):
    """A spec with its data in a folder of its own, and a folder standing for its release."""
    shutil.copy(os.path.join(SPECS, "acs_ma_vision_rr.dps"), tmp_path / "rr.dps")
    data = tmp_path / "data" / "acs"
    data.mkdir(parents=True)
    os.symlink(os.path.join(SPECS, "data", "acs", "ma2019.csv"), data / "ma2019.csv")
    release = tmp_path / "release"
    release.mkdir()
    (release / "manifest.json").write_text('{"dpspec_version": "x", "outputs": {}}')
    (release / "report.html").write_text("<p>the release's own report</p>")
    return str(tmp_path / "rr.dps"), release


@pytest.mark.parametrize("where", ["release", "release/sub", ".", "data", "data/acs"])
def test_infer_output_in_or_around_an_input_is_refused_before_sampling(spec_and_release, where):
    spec, release = spec_and_release
    base = os.path.dirname(spec)
    before = digest(base)
    res = CliRunner().invoke(main, ["infer", spec, str(release), *TARGET, "-o", os.path.join(base, where)])
    assert res.exit_code == 1, res.output
    assert "refusing" in res.output and "Traceback" not in res.output
    assert digest(base) == before  # nothing written, nothing moved


def test_infer_output_over_a_prior_file_is_refused(spec_and_release, tmp_path_factory):
    spec, release = spec_and_release
    elsewhere = tmp_path_factory.mktemp("prior")
    (elsewhere / "prior.csv").write_text("DEYE,alpha\n1,1\n")
    res = CliRunner().invoke(
        main, ["infer", spec, str(release), *TARGET, "--prior", str(elsewhere / "prior.csv"), "-o", str(elsewhere)]
    )
    assert res.exit_code == 1 and "prior.csv" in res.output and "refusing" in res.output, res.output


def test_infer_reads_no_release_table_that_is_a_device(tmp_path):
    from dpspec.inference.release import InferError, load_release

    (tmp_path / "manifest.json").write_text(json.dumps({"outputs": {"t": {"file": "t.csv"}}}))
    os.symlink("/dev/zero", tmp_path / "t.csv")
    with pytest.raises(InferError, match="not a regular file"):  # how fast: benchmarks/bench_refusals.py
        load_release(str(tmp_path))


@pytest.mark.parametrize("how", ["same", "link"])
def test_export_over_its_own_spec_is_refused(tmp_path, how):
    spec = tmp_path / "rr.dps"
    shutil.copy(os.path.join(SPECS, "acs_ma_vision_rr.dps"), spec)
    before = spec.read_bytes()
    out = tmp_path / "rr.dps"
    if how == "link":
        out = tmp_path / "link.dps"
        os.symlink(spec, out)
    res = CliRunner().invoke(main, ["export", "--registry", str(spec), "-o", str(out)])
    assert res.exit_code == 1 and "refusing to write over an input" in res.output, res.output
    assert spec.read_bytes() == before


def test_import_over_its_own_entry_is_refused(tmp_path):
    entry = tmp_path / "entry.yaml"
    shutil.copy(ENTRY, entry)
    before = entry.read_bytes()
    res = CliRunner().invoke(main, ["import", "--registry", str(entry), "-o", str(entry)])
    assert res.exit_code == 1 and "refusing to write over an input" in res.output, res.output
    assert entry.read_bytes() == before
    ok = CliRunner().invoke(main, ["import", "--registry", str(entry), "-o", str(tmp_path / "new.dps")])
    assert ok.exit_code == 0 and (tmp_path / "new.dps").exists(), ok.output  # the guard refuses only the input


@pytest.mark.parametrize("odd", ["/dev/zero", "fifo", "folder"])
def test_import_reads_only_a_regular_entry(tmp_path, odd):
    path = {"/dev/zero": "/dev/zero", "fifo": str(tmp_path / "fifo"), "folder": str(tmp_path)}[odd]
    if odd == "fifo":
        os.mkfifo(path)  # opening a FIFO for reading would wait for a writer forever
    res = CliRunner().invoke(main, ["import", "--registry", path, "-o", str(tmp_path / "x.dps")])
    assert res.exit_code in (1, 2) and "Traceback" not in res.output, res.output
    assert not (tmp_path / "x.dps").exists()  # how fast: benchmarks/bench_refusals.py


@pytest.mark.parametrize("content", [None, '{"verdict": ' + "9" * 5000 + "}", "[" * 100_000, b"\xff\xfe"])
def test_a_hostile_verification_file_is_a_user_error(tmp_path, content):
    from dpspec.verify.miniature import VerifyError
    from dpspec.verify.result import load_json

    path = "/dev/zero"
    if content is not None:
        path = str(tmp_path / "v.json")
        with open(path, "wb") as fh:
            fh.write(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(VerifyError):  # how fast: benchmarks/bench_refusals.py
        load_json(path)


def test_compile_reads_the_verification_file_before_running(tmp_path):
    """A bad --verify file fails the compile at once, before the mechanism runs and writes nothing."""
    res = CliRunner().invoke(
        main,
        ["compile", os.path.join(SPECS, "acs_ma_vision_rr.dps"), "--verify", "/dev/zero", "-o", str(tmp_path / "out")],
    )
    assert res.exit_code == 1 and "not a regular file" in res.output, res.output
    assert "compiling" not in res.output and not (tmp_path / "out").exists()


def test_safetab_tables_that_are_devices_are_data_errors(tmp_path):
    from dpspec_safetab.iterations import IterationTable

    from dpspec.errors import DataError

    with pytest.raises(DataError, match="not a regular file"):  # how fast: benchmarks/bench_refusals.py
        IterationTable.load(str(tmp_path), {"codes": "/dev/zero", "iterations": "/dev/zero", "mapping": "/dev/zero"})


def _fake_release(folder):
    folder.mkdir()
    (folder / "report.html").write_text("<p>the release's report</p>")
    (folder / "manifest.json").write_text(
        json.dumps({"dpspec_version": "x", "outputs": {}, "files": {"report.html": {}}})
    )
    return folder


@pytest.mark.parametrize("where", ["spec folder", "other release"])
def test_audit_output_beside_its_spec_or_over_a_release_is_refused(spec_and_release, tmp_path_factory, where):
    spec, _ = spec_and_release
    base = os.path.dirname(spec)
    target = base if where == "spec folder" else str(_fake_release(tmp_path_factory.mktemp("o") / "rel"))
    before = digest(base), digest(target)
    res = CliRunner().invoke(main, ["audit", spec, "-o", target])
    assert res.exit_code == 1 and ("refusing" in res.output or "holds a release" in res.output), res.output
    assert (digest(base), digest(target)) == before


def test_audit_output_into_a_fresh_folder_is_written(spec_and_release, tmp_path_factory):
    spec, _ = spec_and_release
    out = tmp_path_factory.mktemp("audit") / "out"
    res = CliRunner().invoke(main, ["audit", spec, "-o", str(out)])
    assert res.exit_code in (0, 1) and "refusing" not in res.output and (out / "report.html").exists(), res.output


def test_infer_output_over_another_release_is_refused(spec_and_release, tmp_path_factory):
    spec, release = spec_and_release
    other = _fake_release(tmp_path_factory.mktemp("o") / "rel")
    before = digest(other)
    res = CliRunner().invoke(main, ["infer", spec, str(release), *TARGET, "-o", str(other)])
    assert res.exit_code == 1 and "holds a release" in res.output, res.output
    assert digest(other) == before


@pytest.mark.parametrize("tier", ["9" * 5000, "³", "three"])
def test_export_of_an_odd_tier_note_is_a_located_error(tier):
    """Found by scripts/fuzz.py: int() of a 5,000-digit tier note crashed `dpspec export`."""
    import re

    from dpspec.errors import SpecError
    from dpspec.language.parser import parse
    from dpspec.registry.export import entry_yaml

    path = os.path.join(SPECS, "registry", "dhc_persons.dps")
    text = open(path, encoding="utf-8").read()
    assert re.search(r'tier: "3"', text)
    with pytest.raises(SpecError, match="tier"):
        entry_yaml(parse(text.replace('tier: "3"', f'tier: "{tier}"'), path))


@pytest.mark.parametrize(
    "command",
    [
        ["compile", os.path.join(SPECS, "acs_ma_vision_rr.dps"), "-o", "/proc/no/such/folder"],
        ["audit", os.path.join(SPECS, "acs_ma_vision_rr.dps"), "-o", "/proc/no/such/folder"],
        ["export", "--registry", os.path.join(SPECS, "registry", "dhc_persons.dps"), "-o", "/proc/no/such/entry.yaml"],
        ["import", "--registry", ENTRY, "-o", "/proc/no/such/spec.dps"],
    ],
)
def test_an_output_path_the_system_refuses_is_a_user_error(command):
    """A folder that cannot be made (here under /proc), a read-only disk or a full one is the
    user's to fix: exit 1 naming the path, not exit 3 "internal error"."""
    res = CliRunner().invoke(main, command)
    assert res.exit_code == 1 and "/proc/no" in res.output and "internal error" not in res.output, res.output


def test_an_os_error_without_a_path_is_still_internal(monkeypatch, tmp_path):
    import errno

    import dpspec.run.compiler

    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "input/output error")

    monkeypatch.setattr(dpspec.run.compiler, "compile_spec", broken)
    res = CliRunner().invoke(main, ["compile", os.path.join(SPECS, "acs_ma_vision_rr.dps"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 3 and "internal error (OSError)" in res.output, res.output


def test_infer_report_of_a_release_without_post_processing(tmp_path):
    """Found by fuzz.py's writers: `infer -o` crashed rendering a randomized-response release
    (no post-processed table, so no contraction details) with exit 3."""
    import dpspec
    from dpspec.publish.output import write_result

    write_result(dpspec.compile(os.path.join(SPECS, "acs_ma_vision_rr.dps"), seed=1), str(tmp_path / "rel"))
    res = CliRunner().invoke(
        main,
        [
            "infer",
            os.path.join(SPECS, "acs_ma_vision_rr.dps"),
            str(tmp_path / "rel"),
            *TARGET,
            "--draws",
            "10",
            "--seed",
            "1",
            "-o",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "out" / "report.html").exists() and (tmp_path / "out" / "report.md").exists()


def test_fuzzed_writers_aimed_at_odd_outputs_never_crash(tmp_path):
    """Each writing command once at each odd output path of scripts/fuzz.py (a sample, to stay fast)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("dpspec_fuzz", os.path.join(ROOT, "scripts", "fuzz.py"))
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    for i, output in enumerate(fuzz.ODD_OUTPUTS):
        command = ["export", "import", "audit", "infer"][i % 4]
        outcome = fuzz.run_writer(command, output, str(tmp_path))
        assert not outcome.startswith("internal"), outcome


@pytest.mark.parametrize("kind", ["link to /dev/null", "fifo", "folder"])
def test_an_atomic_write_never_replaces_a_device_pipe_or_folder(tmp_path, kind):
    """Renaming a new file over `-o /dev/null` replaced the machine's /dev/null when run as root
    (found by fuzz.py's writers). Tested through a link, so a regression could only replace the link."""
    from dpspec.publish.atomic import NotAFileTarget, write_text

    target = tmp_path / "target"
    if kind == "link to /dev/null":
        os.symlink("/dev/null", target)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    with pytest.raises(NotAFileTarget, match="not a regular file"):
        write_text(str(target), "x")
    assert os.path.islink(target) == (kind == "link to /dev/null") and not list(tmp_path.glob(".tmp-*"))
    res = CliRunner().invoke(
        main, ["export", "--registry", os.path.join(SPECS, "registry", "dhc_persons.dps"), "-o", str(target)]
    )
    assert res.exit_code in (1, 2) and ("not a regular file" in res.output or "is a directory" in res.output), (
        res.output
    )


def test_an_atomic_write_through_a_link_replaces_the_file_it_names(tmp_path):
    from dpspec.publish.atomic import write_text

    (tmp_path / "real.txt").write_text("old")
    os.symlink(tmp_path / "real.txt", tmp_path / "link.txt")
    write_text(str(tmp_path / "link.txt"), "new")
    assert os.path.islink(tmp_path / "link.txt") and (tmp_path / "real.txt").read_text() == "new"


@pytest.mark.parametrize("command", ["audit", "compile", "export"])
def test_nothing_is_written_below_a_compile_release(spec_and_release, tmp_path_factory, command):
    spec, _ = spec_and_release
    release = _fake_release(tmp_path_factory.mktemp("o") / "rel")
    before = digest(release)
    out = str(release / "sub" / ("x.yaml" if command == "export" else ""))
    args = {
        "audit": ["audit", spec, "-o", out],
        "compile": ["compile", spec, "-o", out],
        "export": ["export", "--registry", os.path.join(SPECS, "registry", "dhc_persons.dps"), "-o", out],
    }[command]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "release written by `dpspec compile`" in res.output, res.output
    assert digest(release) == before and not (release / "sub").exists()


@pytest.mark.parametrize("text", ["url_slug: " + "9" * 5000, "[" * 100_000])
def test_a_registry_entry_with_a_huge_number_or_deep_nesting_is_a_located_error(text):
    """Found by fuzz.py at 100,000 cases: PyYAML's int() of a 5,000-digit number crashed import."""
    from dpspec.errors import SpecError
    from dpspec.registry.entry import parse_entry

    with pytest.raises(SpecError, match="not a usable registry entry|not valid YAML|not a registry entry") as err:
        parse_entry(text, "entry.yaml")
    assert err.value.diagnostics[0].line == 1


def test_compile_into_a_device_leaves_no_lock_file_beside_it(tmp_path):
    """`compile -o /dev/null` was refused, but only after creating /dev/.null.dpspec-lock."""
    os.symlink("/dev/null", tmp_path / "dn")
    res = CliRunner().invoke(main, ["compile", os.path.join(SPECS, "acs_ma_vision_rr.dps"), "-o", str(tmp_path / "dn")])
    assert res.exit_code == 1 and "not a folder" in res.output, res.output
    assert not os.path.exists("/dev/.null.dpspec-lock") and sorted(os.listdir(tmp_path)) == ["dn"]


def test_tiny_prior_concentrations_draw_valid_dirichlet_rows():
    """Found by fuzz.py: --prior dirichlet-multinomial:1e-320 made every gamma draw underflow to 0
    and numpy's binomial crash on NaN (exit 3). Concentrations below 1e-300 are refused; rows that
    underflow above it are drawn again in log space, where each is one-hot with probability
    alpha_i / sum(alpha) (fixed seed; 4 standard errors)."""
    import numpy as np

    from dpspec.inference.prior import _redraw_underflowed

    rng = np.random.default_rng(2024)
    n = 20_000
    for scale in (1e-300, 1e-100, 1e-8):
        a = np.array([scale, 2 * scale, 0.0])
        theta = rng.gamma(np.where(a > 0, a, 1.0), size=(n, 3)) * (a > 0)
        _redraw_underflowed(theta, a, rng)
        theta /= theta.sum(axis=1, keepdims=True)
        assert not np.isnan(theta).any() and np.all(theta[:, 2] == 0)
        se = np.sqrt(1 / 3 * 2 / 3 / n)
        assert abs(theta[:, 0].mean() - 1 / 3) < 4 * se, (scale, theta[:, 0].mean())


def test_a_prior_concentration_below_floats_is_a_user_error(tmp_path):
    import dpspec
    from dpspec.inference import InferError
    from dpspec.publish.output import write_result

    spec = os.path.join(SPECS, "acs_ma_vision_rr.dps")
    write_result(dpspec.compile(spec, seed=1), str(tmp_path / "rel"))
    with pytest.raises(InferError, match="between 1e-300 and 1e300"):
        dpspec.infer(
            spec, str(tmp_path / "rel"), "count persons by DEYE", prior="dirichlet-multinomial:1e-320", draws=20
        )
    ok = dpspec.infer(
        spec, str(tmp_path / "rel"), "count persons by DEYE", prior="dirichlet-multinomial:1e-300", draws=20, seed=1
    )
    assert ok.samples.shape[0] == 20

"""Inputs are sacred: a compile refuses any output folder that could write over, move or sit among
its inputs (the folder holding an input, anything inside it, anything around it)."""

from __future__ import annotations

import hashlib
import os

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main


def _state(folder):
    """Every file under `folder` with its digest: the input must come out byte-identical."""
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            path = os.path.join(root, f)
            out[os.path.relpath(path, folder)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


@pytest.fixture
def spec_with_data_folder(tmp_path):
    """A spec in tmp/specs reading tmp/specs/data/people.csv (like the bundled layout)."""
    from tests.conftest import SMALL_CSV, SMALL_SPEC

    data = tmp_path / "specs" / "data"
    data.mkdir(parents=True)
    (data / "people.csv").write_text(SMALL_CSV)
    spec = tmp_path / "specs" / "small.dps"
    spec.write_text(SMALL_SPEC.replace('"people.csv"', '"data/people.csv"'))
    return spec


@pytest.mark.parametrize("target", ["specs/data", "specs", ".", "specs/data/release", "specs/out"])
def test_compile_into_an_input_folder_is_refused_and_inputs_stay_identical(spec_with_data_folder, tmp_path, target):
    before = _state(tmp_path)
    result = CliRunner().invoke(main, ["compile", str(spec_with_data_folder), "-o", str(tmp_path / target)])
    assert result.exit_code == 1, result.output
    assert "refusing to write" in result.output and "input" in result.output
    assert "Traceback" not in result.output
    assert _state(tmp_path) == before  # nothing written, nothing moved


def test_symlinked_output_folder_pointing_at_the_data_is_refused(spec_with_data_folder, tmp_path):
    link = tmp_path / "innocent"
    link.symlink_to(tmp_path / "specs" / "data", target_is_directory=True)
    before = _state(tmp_path / "specs")
    result = CliRunner().invoke(main, ["compile", str(spec_with_data_folder), "-o", str(link)])
    assert result.exit_code == 1 and "refusing to write" in result.output
    assert _state(tmp_path / "specs") == before


def test_symlinked_data_file_protects_the_folder_it_points_into(tmp_path):
    from tests.conftest import SMALL_CSV, SMALL_SPEC

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "people.csv").write_text(SMALL_CSV)
    work = tmp_path / "work"
    work.mkdir()
    (work / "people.csv").symlink_to(vault / "people.csv")
    (work / "small.dps").write_text(SMALL_SPEC)
    result = CliRunner().invoke(main, ["compile", str(work / "small.dps"), "-o", str(vault)])
    assert result.exit_code == 1 and "refusing to write" in result.output
    assert _state(vault) == {"people.csv": hashlib.sha256(SMALL_CSV.encode()).hexdigest()}


def test_api_write_result_refuses_too(spec_with_data_folder, tmp_path):
    import dpspec
    from dpspec.publish.input_guard import UnsafeOutputError
    from dpspec.publish.output import write_result

    spec = dpspec.load(str(spec_with_data_folder))
    result = dpspec.compile(spec, seed=1)
    before = _state(tmp_path)
    with pytest.raises(UnsafeOutputError):
        write_result(result, str(tmp_path / "specs" / "data"))
    assert _state(tmp_path) == before


def test_an_input_file_as_output_folder_is_refused(spec_with_data_folder, tmp_path):
    from dpspec.publish.input_guard import UnsafeOutputError, check_output_target

    data = str(tmp_path / "specs" / "data" / "people.csv")
    with pytest.raises(UnsafeOutputError, match="is the input"):
        check_output_target(data, [str(spec_with_data_folder), data])


def test_a_separate_output_folder_is_fine(spec_with_data_folder, tmp_path):
    result = CliRunner().invoke(main, ["compile", str(spec_with_data_folder), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "responses.csv").exists()


# ---- issue 30: a refusal suggests a folder that works; the default moves beside the spec ------


@pytest.mark.parametrize("target", ["specs/data", "specs", ".", "specs/data/release", "specs/out"])
def test_a_refused_output_folder_comes_with_one_that_is_accepted(spec_with_data_folder, tmp_path, target, monkeypatch):
    monkeypatch.chdir(tmp_path / "specs")
    result = CliRunner().invoke(main, ["compile", str(spec_with_data_folder), "-o", str(tmp_path / target)])
    assert result.exit_code == 1
    suggestion = result.output.rsplit("for example -o ", 1)[1].split()[0]
    assert not os.path.isabs(suggestion) and not suggestion.startswith(os.pardir + os.sep + os.pardir)
    accepted = CliRunner().invoke(main, ["compile", str(spec_with_data_folder), "-o", suggestion])
    assert accepted.exit_code == 0, accepted.output
    assert os.path.isfile(os.path.join(suggestion, "manifest.json"))
    assert os.path.realpath(suggestion).startswith(str(tmp_path.resolve()))


def test_the_default_output_from_inside_the_specs_folder_lands_beside_it(spec_with_data_folder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path / "specs")
    before = _state(tmp_path / "specs")
    result = CliRunner().invoke(main, ["compile", "small.dps"])
    assert result.exit_code == 0, result.output
    assert "the default output folder out/small lies among the inputs" in result.output
    assert (tmp_path / "out" / "small" / "manifest.json").is_file()
    assert _state(tmp_path / "specs") == before  # nothing written among the inputs


def test_the_default_output_from_elsewhere_is_unchanged(spec_with_data_folder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["compile", "specs/small.dps"])
    assert result.exit_code == 0 and "lies among the inputs" not in result.output
    assert (tmp_path / "out" / "small" / "manifest.json").is_file()


def test_an_import_over_its_own_entry_suggests_a_file_beside_it(tmp_path):
    import shutil

    from tests.conftest import SPECS

    entry = tmp_path / "entry.yaml"
    shutil.copy(os.path.join(SPECS, "registry", "pl94_persons.yaml"), entry)
    res = CliRunner().invoke(main, ["import", "--registry", str(entry), "-o", str(entry)])
    assert res.exit_code == 1
    suggestion = res.output.rsplit("for example -o ", 1)[1].split()[0]
    assert suggestion == str(tmp_path / "entry-new.yaml")
    ok = CliRunner().invoke(main, ["import", "--registry", str(entry), "-o", suggestion])
    assert ok.exit_code == 0, ok.output

"""`dpspec compile --json`: one `compile` document on stdout saying what the compile wrote (its
files, the budget report.json carries, warnings and findings), valid against its shipped schema;
a failure is the `error` document with each located problem, and the exit codes are those of a
compile without --json (issue 24, "No CLI command runs TopDown with --json")."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from tests.test_schemas import assert_valid
from tests.test_topdown_located_data_errors import SPEC as TOPDOWN, _at, _persons


def _compile(*args):
    result = CliRunner().invoke(main, ["compile", *map(str, args)])
    return result, json.loads(result.stdout)


def test_a_compile_prints_its_document_and_writes_what_it_lists(small_spec, tmp_path):
    out = tmp_path / "release"
    result, doc = _compile(small_spec, "-o", out, "--json")
    assert result.exit_code == 0, result.stderr
    assert_valid("compile", doc)
    assert doc["exit_code"] == 0 and doc["seed"] is None and doc["command"] == "compile"
    assert doc["spec"]["path"] == str(small_spec) and doc["output_directory"] == str(out)
    # every file of the set is listed, and every listed file exists
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {os.path.basename(f["path"]) for f in doc["files"]}
    assert listed == {*manifest["files"], "manifest.json", "certificate.json"}  # the certificate covers the manifest
    assert all(os.path.isfile(f["path"]) for f in doc["files"])
    rows = {f["name"]: f["rows"] for f in doc["files"] if f["kind"] == "release"}
    assert rows == {name: info["rows"] for name, info in manifest["outputs"].items()}
    # the budget is the one report.json carries, and the line the command prints without --json
    assert doc["budget"] == json.loads((out / "report.json").read_text())["budget"]
    plain = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(tmp_path / "plain")])
    assert f"budget in the spec's flavor: {doc['budget_line']}" in plain.stdout
    assert "mechanism:" not in result.stdout  # stdout holds the document alone


def test_a_seeded_compile_lists_the_warning_and_the_critical_finding_and_exits_1(small_spec, tmp_path):
    result, doc = _compile(small_spec, "-o", tmp_path / "release", "--seed", "42", "--json")
    assert result.exit_code == 1 and doc["exit_code"] == 1  # the release is written: the compile document
    assert_valid("compile", doc)
    assert doc["seed"] == 42
    assert [w for w in doc["warnings"] if "known seed 42" in w]
    assert {"rule": "known-seed", "severity": "critical"}.items() <= next(
        f for f in doc["findings"] if f["rule"] == "known-seed"
    ).items()
    assert "known seed 42" in result.stderr  # stderr says it as before


def test_a_topdown_compile_whose_data_break_a_structural_zero_is_a_located_error_document(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    persons = _persons()
    persons.loc[7, ["hhgq", "votingage"]] = [2, 0]  # a record in nurse_nva_0
    persons.to_parquet(folder / "persons.parquet")
    persons[["state", "county", "block", "hhgq"]].to_parquet(folder / "pl94.parquet")
    path = folder / "s.dps"
    from tests.topdown_geography import write_declared

    text = write_declared(path, TOPDOWN)  # its geography declared from the data beside it, on the same lines
    result, doc = _compile(path, "-o", tmp_path / "release", "--json")
    assert result.exit_code == 1 and doc["exit_code"] == 1
    assert_valid("error", doc)
    first = doc["diagnostics"][0]
    assert (first["file"], first["line"], first["column"], first["severity"]) == (
        str(path),
        *_at(text, "nurse_nva_0:"),
        "error",
    )
    assert "break the structural zero 'nurse_nva_0': 1 record, e.g. in block " in first["message"]
    assert first["hint"] == "the structural zero 'nurse_nva_0' is written here"
    assert doc["error"].splitlines()[0] in result.stderr
    assert not (tmp_path / "release").exists()  # nothing written


def test_a_spec_error_is_the_error_document_at_the_invariants_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    text = TOPDOWN.replace(
        "  count persons by block, hhgq\n", "  count persons by block, hhgq\n  count persons by county, votingage\n"
    )
    path = folder / "s.dps"
    path.write_text(text)
    result, doc = _compile(path, "-o", tmp_path / "release", "--json")
    assert result.exit_code == 1
    assert_valid("error", doc)
    nest = [d for d in doc["diagnostics"] if "does not nest" in d["message"]]
    assert [(d["file"], d["line"], d["column"]) for d in nest] == [
        (str(path), *_at(text, "count persons by county, votingage"))
    ]


def test_a_usage_error_is_the_error_document_with_exit_2(small_spec):
    result, doc = _compile(small_spec, "--runs", "0", "--json")
    assert result.exit_code == 2 and doc["exit_code"] == 2
    assert_valid("error", doc)


def test_without_json_the_compile_prints_as_before(small_spec, tmp_path):
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(tmp_path / "release")])
    assert result.exit_code == 0
    assert result.stdout.startswith("mechanism: ") and "wrote " in result.stdout


@pytest.mark.slow  # a compile in a subprocess whose native code prints
def test_stdout_holds_the_document_alone_when_native_code_prints(tmp_path):
    """HiGHS prints a banner on file descriptor 1 the first time it runs in a process; a TopDown
    compile under --json in its own process must still print nothing but the document there."""
    import subprocess
    import sys

    spec = os.path.join(os.path.dirname(__file__), os.pardir, "specs", "pl94_units_topdown.dps")
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dpspec.cli.main import main; main()",
            "compile",
            "--json",
            "--seed",
            "1",
            "-o",
            str(tmp_path / "out"),
            spec,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr  # a known seed is a critical finding; the release is written
    doc = json.loads(run.stdout)
    assert doc["command"] == "compile" and doc["mechanism"]["name"] == "topdown"
    assert "HiGHS" in run.stderr  # the banner went to stderr, not away

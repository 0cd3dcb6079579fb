"""certificate.json (issue 42): each compile certifies its set, and `dpspec certificate verify`
refuses a changed byte in any file, an edited certificate, a missing or added file, and a plugin
whose installed files differ from those that ran. No secret is written into it."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from dpspec import schemas
from dpspec.cli.main import main
from dpspec.publish.certificate import _self_hash


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def certified(small_spec, tmp_path, monkeypatch):
    monkeypatch.setenv("DPSPEC_TEST_SECRET", "hunter2-do-not-write")
    out = tmp_path / "release"
    done = run(
        "compile",
        small_spec,
        "-o",
        out,
        "--seed",
        "7",
        "--allow-critical",
        "--sign",
        "Ada Reviewer:Chief privacy officer",
        "--sign",
        "B. Second:Statistician",
    )
    assert done.exit_code == 0, done.output
    return out


def test_a_compile_writes_a_valid_certificate_without_secrets(certified, small_spec):
    text = (certified / "certificate.json").read_text()
    cert = json.loads(text)
    assert not schemas.problems("certificate", cert)
    assert cert["sign_off"] == [
        {"name": "Ada Reviewer", "role": "Chief privacy officer"},
        {"name": "B. Second", "role": "Statistician"},
    ]
    assert cert["random_source"]["seeded"] is True and "seed" not in cert["random_source"]
    assert cert["started_at"] <= cert["finished_at"] and cert["started_at"].endswith("Z")
    assert cert["budgets"]["bounds"][0]["limit"] == "11/10"  # exact, as the spec wrote it
    assert cert["allowed_critical"] == ["known-seed"]
    assert {p["name"] for p in cert["plugins"]} >= {"randomized_response", "swap", "audit"}
    assert next(p for p in cert["plugins"] if p["name"] == "randomized_response")["mechanism_ran"]
    assert set(cert["files"]) == set(os.listdir(certified)) - {"certificate.json"}
    for secret in ("hunter2-do-not-write", str(small_spec.parent), str(certified), '"seed": 7'):
        assert secret not in text, secret
    report = (certified / "report.json").read_text()  # the reports stay reproducible: no times in them
    assert cert["started_at"] not in report and "Ada Reviewer" not in report
    assert run("certificate", "verify", certified).exit_code == 0


def test_verify_refuses_a_one_byte_change_in_any_file(certified):
    names = sorted(os.listdir(certified))
    assert "manifest.json" in names and "report.html" in names
    for name in names:
        path = certified / name
        data = path.read_bytes()
        i = len(data) // 2
        while not chr(
            data[i]
        ).isalnum():  # a letter or digit: still JSON, so the hash check (not the parser) must catch it
            i += 1
        path.write_bytes(data[:i] + bytes([data[i] ^ 1]) + data[i + 1 :])
        result = run("certificate", "verify", certified)
        path.write_bytes(data)
        assert result.exit_code == 1, name
        expected = (
            "certificate.json was changed after it was written" if name == "certificate.json" else f"changed: {name}"
        )
        assert expected in result.stderr, (name, result.stderr)
    assert run("certificate", "verify", certified).exit_code == 0  # the control: restored, accepted


def test_verify_refuses_a_hand_edited_certificate_and_missing_or_added_files(certified):
    path = certified / "certificate.json"
    original = path.read_text()
    cert = json.loads(original)
    cert["sign_off"][0]["name"] = "Someone Else"
    path.write_text(json.dumps(cert, indent=2))
    assert "was changed after it was written" in run("certificate", "verify", certified).stderr
    path.write_text(original)
    (certified / "extra.csv").write_text("a\n")
    assert "not certified: extra.csv" in run("certificate", "verify", certified).stderr
    (certified / "extra.csv").unlink()
    (certified / "estimate.csv").unlink()
    result = run("certificate", "verify", certified)
    assert result.exit_code == 1 and "missing: estimate.csv" in result.stderr


def test_verify_refuses_a_plugin_whose_installed_files_differ(certified):
    """A certificate (consistently re-hashed) naming other plugin files than those installed."""
    path = certified / "certificate.json"
    cert = json.loads(path.read_text())
    plugin = next(p for p in cert["plugins"] if p["mechanism_ran"])
    plugin["files_sha256"] = "0" * 64
    cert["certificate_sha256"] = _self_hash(cert)
    path.write_text(json.dumps(cert))
    result = run("certificate", "verify", certified)
    assert result.exit_code == 1
    assert "plugin 'randomized_response': its installed files differ from those that ran" in result.stderr
    assert "was changed after" not in result.stderr


def test_verify_checks_the_spec_bytes_when_given(certified, small_spec, tmp_path):
    assert run("certificate", "verify", certified, "--spec", small_spec).exit_code == 0
    other = tmp_path / "other.dps"
    other.write_bytes(small_spec.read_bytes() + b"\n")
    result = run("certificate", "verify", certified, "--spec", other)
    assert result.exit_code == 1 and "not the spec this set was compiled from" in result.stderr


@pytest.mark.parametrize(
    "value, words",
    [
        ("", "expected NAME:ROLE"),
        (":Officer", "the name before ':' is empty"),
        ("Ada:", "the role after ':' is empty"),
        ("Ada\x1b[2J:Officer", "printable"),
    ],
)
def test_a_bad_sign_off_is_a_usage_error_before_anything_runs(small_spec, tmp_path, value, words):
    result = run("compile", small_spec, "-o", tmp_path / "out", "--sign", value)
    assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


def test_verify_of_a_folder_without_a_certificate_is_a_clear_error(tmp_path):
    result = run("certificate", "verify", tmp_path)
    assert result.exit_code == 1 and "no certificate.json" in result.stderr and "Traceback" not in result.output
    (tmp_path / "certificate.json").write_text("{not json")
    result = run("certificate", "verify", tmp_path)
    assert result.exit_code == 1 and "unreadable certificate" in result.stderr
    result = run("certificate", "verify", tmp_path / "nope")
    assert result.exit_code in (1, 2) and "Traceback" not in result.output

"""Every JSON document dpspec writes names its format version and is valid against the JSON
Schema shipped for that version (issue 27 item 2); JSON always means JSON, failures included
(issue 30 item 2); a schema cannot change without its version moving (the pins below)."""

from __future__ import annotations

import glob
import hashlib
import json
import os

import jsonschema
import pytest
from click.testing import CliRunner

from dpspec import schemas
from dpspec.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")

# (kind, version) -> SHA-256 of the schema's canonical JSON. Changing a schema means adding its
# new version here (and to dpspec.schemas.FORMAT_VERSIONS), never editing a pin: a document of
# a published version must stay valid against the schema it was published with.
PINS = {
    ("budget", "1.0"): "e3117a01fd59833a340c36674e5443dbf6152b848683dbc95f6fe1445e90b212",
    (
        "budget",
        "1.1",
    ): "48060a2b2de3b69575d1ad7af78c06bcfacae179a8fb09db36be618ed979142a",  # exact companions (budget path exact)
    ("certificate", "1.0"): "74a43422bd7f42a10ee7a454bf05a20c53cb03525c4f5a4df2fe934606a3014d",
    ("compile", "1.0"): "73ed7288c4f36734a88f0adab1e9773c0f43a1be6474672f6be7619291a36204",
    (
        "compile",
        "1.1",
    ): "86329528e225d46a74625dc72ce645ee8c528986d450b35cc8061d619543cb4c",  # allowed_critical; exact companions
    ("conversion", "1.0"): "6b642fd14480c4408a4f9f7d34f0cd89bb813ec13de2164d1236ee588c1c4527",
    (
        "conversion",
        "1.1",
    ): "5db4fac53722602dbfe0d186b1b2f3e36a46522985d87f22fa39a434c05b4215",  # exact companions (budget path exact)
    ("error", "1.0"): "31c2a3aa1a9aa5ef24123d58f05b6b38edf922a6a83a2fb99372d25339c06813",
    ("findings", "1.0"): "b6f795c6cadacf085840a398d6b95993f704b92c0f95dcb7091bf0fb5c1f9aba",
    ("findings", "2.0"): "815e9c98edd817d10869af9864c727acedb30cd6a960a2377b4cfc916c4b6ddf",
    ("inference", "1.0"): "b22f4adb2da6e28489d1ba8712ae9831a31c4dc43ffeb9c98c08619b6c1f3cba",
    ("inference", "1.1"): "5c0997d77f33ea030dd9fcadd6ce05830129e502f18f652918de2f6c0d04ae97",  # power (infer --power)
    ("manifest", "1.0"): "60a4043326971b7ea05f96236ecb275960a62f2e74602bfa59515bf5eff00e67",
    ("plugins", "1.0"): "444c28f1d7c8fdb2c0c98bcb44a67e74d3b822a1b53b2c1c7c3b65b42bd32f22",
    (
        "plugins",
        "1.1",
    ): "b1985d21e29c88dc093d1e9df3789a6071357d0dd508ff03c72108f42fd86178",  # nested parameters: fields, keys, values, items, table_param
    (
        "plugins",
        "1.2",
    ): "26cd9c006a61acb5c0bdfd938bd9240312a9129332995a5cbd47961e7c1afe48",  # a parameter's options (the type either)
    ("replay", "1.0"): "71591ed1e542e18918ab2f805ca25e84e9db91904f64bbc9a52a581a8769c464",
    ("report", "1.0"): "d7efad7b3bc966f327fa9725370443e2ad7fbd89632f1753ef604870c87f0d5d",
    (
        "report",
        "1.1",
    ): "d62f4a932c66a1667ac90f64c4c6d85bc44f54f0412e3f0b33d054ca9279023b",  # verdict, gate, nist, glossary, certificate; exact companions
    ("spec", "1.0"): "18caf31409a8efb790eb4a2abf9a647765d41ddb4f4c4a9f10ea16824df327a0",
    ("verification", "1.0"): "31b7e507cfcbb423bfa67ed74c5dfe593e61e8759aa53e90066929c0fd2903d7",
}


def canonical_hash(schema: dict) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def assert_valid(kind: str, document) -> None:
    found = schemas.problems(kind, document)
    assert not found, f"{kind}: " + "; ".join(found[:5])


def run(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.mark.parametrize("kind", sorted(schemas.FORMAT_VERSIONS))
def test_each_schema_is_a_valid_schema_pinned_to_its_version(kind):
    schema = schemas.schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    version = schemas.FORMAT_VERSIONS[kind]
    declared = (schema.get("items") or schema)["properties"]["format_version"]["const"]
    assert declared == version, f"{kind}.schema.json says {declared}, dpspec writes {version}"
    assert schema["$id"].endswith(f":{kind}:{version}")
    assert (kind, version) in PINS, f"a new format version {kind} {version}: pin its schema in PINS"
    assert canonical_hash(schema) == PINS[(kind, version)], (
        f"{kind}.schema.json changed without a format version change: bump FORMAT_VERSIONS['{kind}'] "
        "(minor for an added key, major for anything else) and pin the new version"
    )


def test_the_shipped_schemas_are_exactly_the_known_formats():
    shipped = {
        os.path.basename(p)[: -len(".schema.json")]
        for p in glob.glob(os.path.join(ROOT, "dpspec", "schemas", "*.schema.json"))
    }
    assert shipped == set(schemas.FORMAT_VERSIONS)
    legacy = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "dpspec", "schemas", "*.json"))} - {
        f"{k}.schema.json" for k in shipped
    }
    assert legacy == set(schemas.LEGACY.values())


@pytest.mark.parametrize("kind, version", sorted(schemas.LEGACY))
def test_a_format_still_written_one_version_behind_keeps_its_published_schema(kind, version):
    schema = schemas.schema(kind, version)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"].endswith(f":{kind}:{version}") and version != schemas.FORMAT_VERSIONS[kind]
    assert canonical_hash(schema) == PINS[(kind, version)]


def test_a_change_to_a_schema_is_caught_by_its_pin():
    schema = json.loads(json.dumps(schemas.schema("budget")))
    schema["required"].append("something_new")
    assert canonical_hash(schema) != PINS[("budget", "1.0")]


BUNDLED = sorted(glob.glob(os.path.join(SPECS, "*.dps")) + glob.glob(os.path.join(SPECS, "*", "*.dps")))


@pytest.mark.slow  # `show --json` of every bundled spec
def test_show_json_of_every_bundled_spec():
    for path in BUNDLED:
        assert_valid("spec", run("show", "--json", path))


@pytest.mark.parametrize(
    "name",
    [
        "acs_ma_vision_rr.dps",
        "pl94_program/program.dps",
        "census2020/program.dps",
        "registry/dhc_persons.dps",
        "safetab_p_production.dps",
    ],
)
def test_budget_json(name):
    doc = run("budget", "--json", os.path.join(SPECS, name))
    assert doc["format_version"] == schemas.version("budget")
    assert_valid("budget", doc)


def test_audit_json_with_and_without_a_baseline():
    audit = os.path.join(SPECS, "audit")
    for args, code in [
        (("redenomination.dps", "--baseline", "redenomination.baseline.dps"), 0),
        (("undeclared_invariants.dps",), 1),
        (("clean.dps",), 0),
    ]:
        paths = [os.path.join(audit, a) if a.endswith(".dps") else a for a in args]
        doc = run("audit", "--json", *paths, code=code)
        assert_valid("findings", doc)
        assert doc["format_version"] == schemas.version("findings") == "2.0" and isinstance(doc["findings"], list)
        listed = CliRunner().invoke(main, ["audit", "--format", "json-list", *paths])
        assert listed.exit_code == code
        old = json.loads(listed.stdout)  # the deprecated 1.0 list, valid against its published schema
        assert not schemas.problems("findings", old, "1.0") and all(f["format_version"] == "1.0" for f in old)
        assert [{k: v for k, v in f.items() if k != "format_version"} for f in old] == doc["findings"]
        assert "DeprecationWarning" in listed.stderr and "--json" in listed.stderr


def test_convert_and_plugins_json():
    assert_valid(
        "conversion", run("convert", "rho=15.29", "--to", "approx", "--delta", "1e-10", "--method", "bs16", "--json")
    )
    assert_valid("conversion", run("convert", "epsilon=1", "--to", "zcdp", "--json"))
    listed = run("plugins", "--json")
    assert_valid("plugins", listed)
    assert {m["format_version"] for m in listed} == {schemas.version("plugins")}


def test_compile_verify_infer_and_audit_sets(small_spec, tmp_path):
    """Every file of every output set: manifest.json, report.json, result.json, and the
    verification result that `--verify` reads back."""
    verified = run("verify", small_spec, "--runs", "200", "--seed", "1", "--json", code=0)
    assert_valid("verification", verified)
    vfile = small_spec.parent / "verify.json"  # an input: never inside the output folders
    vfile.write_text(json.dumps(verified))
    release = tmp_path / "release"
    done = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(release), "--verify", str(vfile)])
    assert done.exit_code == 0, (done.stdout, done.stderr)
    assert_valid("manifest", json.loads((release / "manifest.json").read_text()))
    assert_valid("report", json.loads((release / "report.json").read_text()))
    assert_valid("certificate", json.loads((release / "certificate.json").read_text()))
    infer_set = tmp_path / "infer"
    doc = run(
        "infer",
        small_spec,
        release,
        "--target",
        "count people by smoker",
        "--draws",
        "100",
        "--seed",
        "1",
        "--json",
        "-o",
        infer_set,
    )
    assert_valid("inference", doc)
    assert_valid("inference", json.loads((infer_set / "result.json").read_text()))
    assert_valid("manifest", json.loads((infer_set / "manifest.json").read_text()))
    audit_set = tmp_path / "audit"
    run("audit", small_spec, "-o", audit_set, "--json")
    man = json.loads((audit_set / "manifest.json").read_text())
    assert_valid("manifest", man) or man["command"] == "audit"
    assert_valid("report", json.loads((audit_set / "report.json").read_text()))


def test_every_bundled_report_and_result_is_valid():
    """reports/ as committed (regenerated by scripts/regenerate_reports.py)."""
    found = glob.glob(os.path.join(ROOT, "reports", "**", "report.json"), recursive=True)
    assert len(found) > 20
    for path in found:
        assert_valid("report", json.load(open(path, encoding="utf-8")))
    for path in glob.glob(os.path.join(ROOT, "reports", "**", "result.json"), recursive=True):
        assert_valid("inference", json.load(open(path, encoding="utf-8")))


# ---- JSON always means JSON (issue 30 item 2): the failure is a document on stdout, same exit code


@pytest.mark.parametrize(
    "args, code",
    [
        (["budget", "--json", os.path.join(SPECS, "audit", "undeclared_invariants.dps")], 1),  # a spec error, located
        (["show", "--json", "no/such/spec.dps"], 1),
        (["budget", "--json", "--delta", "not-a-number", os.path.join(SPECS, "acs_ma_vision_rr.dps")], 2),  # usage
        (["convert", "rho=-1", "--to", "approx", "--json"], 1),
        (
            [
                "audit",
                "--json",
                os.path.join(SPECS, "acs_ma_vision_rr.dps"),
                "--verify",
                os.path.join(SPECS, "acs_ma_hispanic_topdown.infer.json"),
            ],
            1,
        ),
        (
            [
                "infer",
                "--json",
                os.path.join(SPECS, "acs_ma_vision_rr.dps"),
                "no/such/release",
                "--target",
                "count persons",
            ],
            1,
        ),
        (["verify", "--json", "no/such/spec.dps"], 1),
    ],
)
def test_a_failing_json_command_prints_an_error_document(args, code):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    doc = json.loads(result.stdout)
    assert_valid("error", doc)
    assert doc["exit_code"] == code and doc["error"] and doc["diagnostics"]
    assert doc["error"].splitlines()[0] in result.stderr  # stderr keeps the message for humans


def test_a_spec_error_document_locates_each_problem():
    path = os.path.join(SPECS, "audit", "undeclared_invariants.dps")
    doc = json.loads(CliRunner().invoke(main, ["budget", "--json", path]).stdout)
    (diag,) = doc["diagnostics"]
    assert diag["file"] == path and diag["line"] > 0 and diag["column"] > 0 and "invariants" in diag["message"]


def test_without_json_nothing_is_printed_on_stdout_on_failure():
    result = CliRunner().invoke(main, ["budget", os.path.join(SPECS, "audit", "undeclared_invariants.dps")])
    assert result.exit_code == 1 and result.stdout == ""


def test_a_result_file_from_a_newer_format_is_refused_naming_both_versions(small_spec, tmp_path):
    verified = run("verify", small_spec, "--runs", "50", "--seed", "1", "--json", code=0)
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**verified, "format_version": "2.0"}))
    result = CliRunner().invoke(main, ["audit", str(small_spec), "--verify", str(future)])
    assert result.exit_code == 1
    assert (
        "format version 2.0" in result.stderr and f"(format version {schemas.version('verification')})" in result.stderr
    )
    broken = tmp_path / "broken.json"
    broken.write_text('{"verdict": ')
    result = CliRunner().invoke(main, ["audit", str(small_spec), "--verify", str(broken)])
    assert result.exit_code == 1 and "invalid JSON" in result.stderr


def test_a_malformed_or_newer_release_manifest_is_refused_by_infer(small_spec, tmp_path):
    release = tmp_path / "release"
    release.mkdir()
    (release / "manifest.json").write_text('{"command": "compile", "outputs": ')
    result = CliRunner().invoke(main, ["infer", str(small_spec), str(release), "--target", "count people", "--json"])
    assert result.exit_code == 1 and "unreadable manifest" in result.stderr
    assert_valid("error", json.loads(result.stdout))
    (release / "manifest.json").write_text(json.dumps({"format_version": "7.2", "command": "compile", "outputs": {}}))
    result = CliRunner().invoke(main, ["infer", str(small_spec), str(release), "--target", "count people"])
    assert result.exit_code == 1
    assert (
        "manifest format version 7.2" in result.stderr
        and f"(format version {schemas.version('manifest')})" in result.stderr
    )


def test_dpspec_schema_prints_each_shipped_schema():
    listed = CliRunner().invoke(main, ["schema"])
    assert listed.exit_code == 0
    assert [line.split()[:2] for line in listed.stdout.splitlines()] == [
        [k, v] for k, v in sorted(schemas.FORMAT_VERSIONS.items())
    ]
    for kind in schemas.FORMAT_VERSIONS:
        assert run("schema", kind) == schemas.schema(kind)
    wrong = CliRunner().invoke(main, ["schema", "budgt"])
    assert wrong.exit_code == 2 and "did you mean 'budget'" in wrong.stderr

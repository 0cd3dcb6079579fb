"""`dpspec import --das-config / --safetab-p-config / --safetab-h-config / --phsafe-config` on the
Census Bureau's real production files (tests/production_configs, see its PROVENANCE.md): the
specs check, audit, and have the published budgets of the bundled production specs."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.language.parser import parse, read_source

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "production_configs"
PL94 = CONFIGS / "das" / "pl94" / "person_US.ini"
SAFETAB_P = CONFIGS / "safetab_p" / "NMFv7-2020" / "config.json"
SAFETAB_H = CONFIGS / "safetab_h" / "NMFv5" / "config.json"
PHSAFE = CONFIGS / "phsafe" / "NMFv8" / "us" / "config.json"
DHC = CONFIGS / "das" / "dhc"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def imported(tmp_path, flag, config, name="imported.dps"):
    out = tmp_path / name
    result = run("import", flag, config, "-o", out)
    assert result.exit_code == 0, result.output
    return out, result


def budget_json(spec):
    result = run("budget", "--json", spec)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def native_rho(spec) -> float:
    return budget_json(spec)["native"]["budget"]["rho"]


def mechanism_params(path):
    spec = parse(read_source(str(path)), str(path))
    return _plain(spec.mechanism.params)


def _plain(value):
    """A parameter block as dicts, lists and values, without locations (two files compare equal)."""
    from dpspec.ir import ParamBlock

    if isinstance(value, ParamBlock):
        return {p.name: _plain(p.value) for p in value.params}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value) if not isinstance(value, (Fraction, str, int)) else value


# ---- P.L. 94-171 (DAS .ini with its INCLUDE chain) -------------------------------------------


def test_the_pl94_us_persons_file_gives_rho_293764_over_114921_and_epsilon_17_14(tmp_path):
    spec, result = imported(tmp_path, "--das-config", PL94)
    text = spec.read_text()
    assert "rho: 293764/114921" in text and "budget rho <= 293764/114921" in text
    doc = budget_json(spec)
    assert doc["native"]["budget"]["rho"] == pytest.approx(float(Fraction(293764, 114921)), rel=1e-12)
    cks = [c for c in doc["conversions"] if c["method"] == "cks20" and c["delta"] == 1e-10]
    assert round(cks[0]["epsilon"], 2) == 17.14
    assert run("check", spec).exit_code == 0
    assert run("audit", spec).exit_code == 0


def test_the_pl94_import_states_the_bundled_production_strategy_exactly(tmp_path):
    spec, _ = imported(tmp_path, "--das-config", PL94)
    mine, bundled = mechanism_params(spec), mechanism_params(ROOT / "specs" / "pl94_production_topdown.dps")
    for key in (
        "rho",
        "levels",
        "queries",
        "estimation",
        "rounding",
        "pass_tolerance",
        "recodes",
        "structural_zeros",
        "constraints",
        "variables",
    ):
        assert mine[key] == bundled[key], key
    assert mine["spine"]["bypass"] == bundled["spine"]["bypass"]
    assert native_rho(spec) == native_rho(ROOT / "specs" / "pl94_production_topdown.dps")


def test_the_include_chain_is_followed_and_every_setting_not_applied_is_listed(tmp_path):
    spec, result = imported(tmp_path, "--das-config", PL94)
    text = spec.read_text()
    assert "person_US.ini > " in text and "person_default.ini > " in text and "prod_default.ini" in text
    # prod_default.ini (two INCLUDEs up) sets these; none is applied, each is said so twice
    for setting in ("only_dyadic_rationals = False", "reload_noisy = 0", "minimalSchema = hhgq"):
        assert setting in text
        assert setting in result.stderr and "not applied" in result.stderr
    assert "threads_block = 4" in text  # operational: a comment in the spec, counted on stderr
    assert "operational setting(s)" in result.stderr


def test_a_section_include_reads_only_that_section_and_local_settings_shadow(tmp_path):
    from dpspec.importers import ini

    (tmp_path / "base.ini").write_text("[budget]\nglobal_scale = 1/2\nstrategy = A\n[writer]\nx = 1\n")
    (tmp_path / "top.ini").write_text("[budget]\nINCLUDE = base.ini\nstrategy = B\n")
    config = ini.read(str(tmp_path / "top.ini"))
    assert config.get("budget", "global_scale").value == "1/2"
    assert config.get("budget", "strategy").value == "B"
    assert "writer" not in config.sections
    (tmp_path / "top2.ini").write_text("[DEFAULT]\nINCLUDE = base.ini\n[budget]\nstrategy = C\n")
    config = ini.read(str(tmp_path / "top2.ini"))
    assert config.get("writer", "x").value == "1" and config.get("budget", "strategy").value == "C"


# ---- DHC (DAS .ini; levels and total read from the strategy) ----------------------------------


def exact_rho(doc) -> Fraction:
    """The budget's rho exactly: its exact companion where the JSON float is not exact."""
    budget = doc["budget"]
    return Fraction(budget["rho_exact"]) if "rho_exact" in budget else Fraction(repr(budget["rho"]))


def allocation(doc):
    """Every measured query's exact rho, by level and query."""
    return sorted((r["level"], r["query"], Fraction(r.get("rho_exact", repr(r["rho"])))) for r in doc["allocation"])


@pytest.mark.slow  # imports a DAS strategy file, then checks and audits the spec it gives and the bundled one
@pytest.mark.parametrize(
    "config,bundled,rho",
    [
        ("person_US.ini", "dhc_persons_production_topdown.dps", Fraction(24811, 5000)),
        ("person_PR.ini", "dhc_persons_production_topdown_pr.dps", Fraction(24811, 5000)),
        ("unit_US.ini", "dhc_households_production_topdown.dps", Fraction(15401, 2000)),
        ("unit_PR.ini", "dhc_households_production_topdown_pr.dps", Fraction(15401, 2000)),
    ],
)
def test_a_dhc_file_gives_the_bundled_specs_exact_rho(tmp_path, config, bundled, rho):
    spec, result = imported(tmp_path, "--das-config", DHC / config)
    mine, theirs = budget_json(spec), budget_json(ROOT / "specs" / bundled)
    assert exact_rho(mine) == exact_rho(theirs) == rho
    assert allocation(mine) == allocation(theirs)  # every level's and query's rho, exactly
    params, bundled_params = mechanism_params(spec), mechanism_params(ROOT / "specs" / bundled)
    keys = ("levels", "queries", "variables", "structural_zeros", "pass_tolerance")
    if "joint" in bundled_params:  # units and households: the household histogram is a joint table
        keys = ("levels", "queries", "variables", "cross_constraints")
        for key in ("variables", "queries", "structural_zeros"):
            assert params["joint"]["households"][key] == bundled_params["joint"]["households"][key], key
    for key in keys:
        assert params[key] == bundled_params[key], key
    assert params["spine"]["bypass"] == bundled_params["spine"]["bypass"]
    assert run("check", spec).exit_code == 0
    assert run("audit", spec).exit_code == 0


def test_the_dhc_import_says_which_settings_it_did_not_apply(tmp_path):
    spec, result = imported(tmp_path, "--das-config", DHC / "person_US.ini")
    text = spec.read_text()
    # production ignores these (geolevel_names is empty): listed, not silently dropped
    for setting in ("global_scale = 254/485", "geolevel_budget_prop = 20/1000"):
        assert setting in text and setting in result.stderr
    assert "not read by the DAS: geolevel_names is empty" in result.stderr
    # the post-processing design this importer does not state
    for key in (
        "postprocess_only_constr_names",
        "conditional_constr_names",
        "require_feasible_postproc_dim",
        "use_postprocess_heuristics",
        "require_feasible_secondary_dim",
        "minimalschema",
    ):
        assert f"{key} = " in text, key
        assert key in result.stderr and "not applied" in result.stderr, key
    for name in ("pl94", "hhgq_total_ub", "hhgq_total_lb"):
        assert f"constraint {name} (at Block, State, US" in result.stderr and "is NOT applied" in result.stderr
    assert "NOT written: the ordering's constrain-to lists" in text


def test_the_dhc_units_import_says_which_settings_it_did_not_apply(tmp_path):
    spec, result = imported(tmp_path, "--das-config", DHC / "unit_US.ini")
    text = spec.read_text()
    assert "constraint h1 (at Block, State, US" in result.stderr and "is NOT applied" in result.stderr
    assert "invariant tot at Block" in result.stderr  # households per block: not stated, and said so
    for key in ("dataindnpass_tolerancetype = opt_tol", "opt_tol_slack = 0.01"):
        assert key in text and key in result.stderr
    assert "count units by block, gqhh_vect" in text


def test_an_unknown_dhc_strategy_lists_the_known_ones(tmp_path):
    src = tmp_path / "dhc"
    shutil.copytree(DHC, src)
    _edit(
        src / "person_US.ini",
        "strategy = test_strategy_dhcp_20220922_exp_iteration_23_1",
        "strategy = test_strategy_dhcp_20220922_exp_iteration_99",
    )
    _refused(
        tmp_path,
        "--das-config",
        src / "person_US.ini",
        "person_US.ini",
        "[budget] strategy",
        "test_strategy_dhcp_20220922_exp_iteration_99",
        "test_strategy_dhcp_20220922_exp_iteration_23_1",
        "ProductionCandidate20210527US_mult8_add02_dsepJune3",
    )


def test_a_dhc_per_query_budget_override_is_refused(tmp_path):
    src = tmp_path / "dhc"
    shutil.copytree(DHC, src)
    _edit(src / "person_US.ini", "privacy_framework = zcdp", "privacy_framework = zcdp\nUS_detailed = 1/100")
    _refused(tmp_path, "--das-config", src / "person_US.ini", "US_detailed", "per-query budget override")


# ---- SafeTab-P, SafeTab-H, PHSafe (config.json) ----------------------------------------------


def test_the_safetab_p_file_gives_rho_4_944_as_the_bundled_spec(tmp_path):
    spec, result = imported(tmp_path, "--safetab-p-config", SAFETAB_P)
    assert native_rho(spec) == pytest.approx(4.944, abs=1e-12)
    assert native_rho(spec) == native_rho(ROOT / "specs" / "safetab_p_production.dps")
    assert (
        budget_json(spec)["budget"]["rho"] == budget_json(ROOT / "specs" / "safetab_p_production.dps")["budget"]["rho"]
    )
    assert "total_rho: 4.944" in spec.read_text()
    for table in ("codes", "iterations", "code_to_iteration"):
        assert (tmp_path / f"imported.{table}.parquet").is_file()
    assert run("audit", spec).exit_code == 0


def test_the_safetab_p_iteration_tables_equal_the_bundled_conversion(tmp_path):
    import pandas as pd

    imported(tmp_path, "--safetab-p-config", SAFETAB_P)
    for table in ("codes", "iterations", "code_to_iteration"):
        mine = pd.read_parquet(tmp_path / f"imported.{table}.parquet")
        bundled = pd.read_parquet(ROOT / "specs" / "data" / "safetab" / f"{table}.parquet")
        pd.testing.assert_frame_equal(mine.astype(str), bundled.astype(str), check_dtype=False)


def test_the_safetab_h_file_gives_the_bundled_budget(tmp_path):
    spec, _ = imported(tmp_path, "--safetab-h-config", SAFETAB_H)
    assert native_rho(spec) == pytest.approx(8.895302, abs=1e-12)
    assert native_rho(spec) == native_rho(ROOT / "specs" / "safetab_h_production.dps")
    assert run("audit", spec).exit_code == 0


def test_the_phsafe_file_gives_the_bundled_budget(tmp_path):
    spec, _ = imported(tmp_path, "--phsafe-config", PHSAFE)
    assert native_rho(spec) == pytest.approx(1.257281, abs=1e-12)
    assert native_rho(spec) == native_rho(ROOT / "specs" / "sdhc_production.dps")
    assert (
        mechanism_params(spec)["privacy_budget"]
        == mechanism_params(ROOT / "specs" / "sdhc_production.dps")["privacy_budget"]
    )
    assert run("audit", spec).exit_code == 0


def test_an_unknown_json_key_is_a_comment_and_a_warning(tmp_path):
    cfg = json.loads(PHSAFE.read_text())
    cfg["noise_mechanism"] = "laplace"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg, indent=2))
    spec, result = imported(tmp_path, "--phsafe-config", path, "out.dps")
    assert 'noise_mechanism = "laplace"' in spec.read_text()
    assert "noise_mechanism" in result.stderr and "not applied" in result.stderr


# ---- bad input: a clear error naming the file and key, exit 1, nothing written ----------------


def _das_copy(tmp_path):
    dst = tmp_path / "das"
    shutil.copytree(CONFIGS / "das", dst)
    return dst


def _edit(path: Path, old: str, new: str):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _refused(tmp_path, flag, config, *needles):
    out = tmp_path / "out" / "spec.dps"
    out.parent.mkdir(exist_ok=True)
    result = run("import", flag, config, "-o", out)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    for needle in needles:
        assert needle in result.output, result.output
    assert list(out.parent.iterdir()) == []  # nothing written, not even the tables
    return result.output


def test_an_unknown_section_is_refused(tmp_path):
    das = _das_copy(tmp_path)
    _edit(das / "pl94" / "person_US.ini", "[writer]", "[budgett]\nx = 1\n\n[writer]")
    _refused(tmp_path, "--das-config", das / "pl94" / "person_US.ini", "person_US.ini", "unknown section [budgett]")


def test_a_missing_include_target_is_refused(tmp_path):
    das = _das_copy(tmp_path)
    _edit(das / "pl94" / "person_US.ini", "INCLUDE = person_default.ini", "INCLUDE = person_defaults.ini")
    _refused(
        tmp_path,
        "--das-config",
        das / "pl94" / "person_US.ini",
        "person_US.ini",
        "INCLUDE",
        "person_defaults.ini",
        "does not exist",
    )


def test_an_include_cycle_is_refused(tmp_path):
    das = _das_copy(tmp_path)
    _edit(das / "prod_default.ini", "[logging]", "[DEFAULT]\nINCLUDE = pl94/person_US.ini\n\n[logging]")
    _refused(
        tmp_path,
        "--das-config",
        das / "pl94" / "person_US.ini",
        "INCLUDE cycle",
        "person_US.ini > person_default.ini > prod_default.ini > person_US.ini",
    )


def test_level_shares_that_do_not_sum_to_1_are_refused(tmp_path):
    das = _das_copy(tmp_path)
    _edit(das / "pl94" / "person_US.ini", "165/4099", "166/4099")
    _refused(
        tmp_path,
        "--das-config",
        das / "pl94" / "person_US.ini",
        "person_US.ini",
        "geolevel_budget_prop",
        "sum to 4100/4099, not 1",
    )


def test_an_unknown_strategy_is_refused_with_the_known_ones(tmp_path):
    das = _das_copy(tmp_path)
    _edit(das / "pl94" / "person_US.ini", "_mult8_add02_dsepJune3", "_mult8_add09_dsepJune3")
    _refused(
        tmp_path,
        "--das-config",
        das / "pl94" / "person_US.ini",
        "person_US.ini",
        "[budget] strategy",
        "ProductionCandidate20210527US_mult8_add09_dsepJune3",
        "knows ProductionCandidate20210527US_mult8_add02_dsepJune3",
    )


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("privacy_budget_p_level_2_usa", "2.134", "expected a number"),
        ("max_race_codes", 8.5, "expected a whole number"),
        ("thresholds_p", [1, 2], "expected an object"),
        ("privacy_defn", "puredp", "expected one of zcdp"),
    ],
)
def test_a_safetab_json_with_wrong_types_is_refused(tmp_path, key, value, needle):
    src = tmp_path / "cfg"
    shutil.copytree(SAFETAB_P.parent, src)
    cfg = json.loads((src / "config.json").read_text())
    cfg[key] = value
    (src / "config.json").write_text(json.dumps(cfg, indent=2))
    _refused(tmp_path, "--safetab-p-config", src / "config.json", "config.json", key, needle)


def test_a_phsafe_json_with_a_wrong_type_deep_inside_is_refused(tmp_path):
    cfg = json.loads(PHSAFE.read_text())
    cfg["privacy_budget"]["PH2"]["usa_*"] = "0.002619"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg, indent=2))
    _refused(tmp_path, "--phsafe-config", path, "config.json", "privacy_budget.PH2.usa_*", "expected a number")


def test_a_safetab_directory_without_its_iteration_files_is_refused(tmp_path):
    src = tmp_path / "cfg"
    src.mkdir()
    shutil.copy(SAFETAB_P, src / "config.json")
    _refused(tmp_path, "--safetab-p-config", src / "config.json", "race-and-ethnicity-codes.txt", "iteration file")


def test_one_format_must_be_named(tmp_path):
    result = run("import", PL94, "-o", tmp_path / "x.dps")
    assert result.exit_code == 2 and "say which format" in result.output
    result = run("import", "--das-config", "--phsafe-config", PL94, "-o", tmp_path / "x.dps")
    assert result.exit_code == 2 and not (tmp_path / "x.dps").exists()


# ---- a description without data is checked; once it reads records, its geography must be declared ----


def test_an_imported_spec_given_data_must_declare_its_geography(tmp_path):
    spec, _ = imported(tmp_path, "--das-config", PL94)
    text = spec.read_text().replace("invariants {", 'data persons from "persons.parquet"\n\ninvariants {', 1)
    spec.write_text(text)
    result = run("check", spec)
    assert result.exit_code == 1 and "has no declared values" in result.output


@pytest.mark.parametrize(
    "flag,config,tables",
    [
        (
            "--das-config",
            PL94,
            {
                "persons": "pl94_synthetic/pl94_synthetic.parquet",
                "facilities": "pl94_synthetic/pl94_synthetic_facilities.parquet",
            },
        ),
        ("--safetab-p-config", SAFETAB_P, {"persons": "safetab/persons.parquet"}),
    ],
)
def test_records_handed_to_a_description_in_memory_are_refused_without_declared_geography(
    tmp_path, flag, config, tables
):
    """The check lets a spec without data leave its geography undeclared; the run never does."""
    import pandas as pd

    import dpspec
    from dpspec.errors import DpspecError

    spec, _ = imported(tmp_path, flag, config)
    data = {t: pd.read_parquet(ROOT / "specs" / "data" / p) for t, p in tables.items()}
    with pytest.raises(DpspecError, match="not declared"):
        dpspec.compile(dpspec.load(str(spec)), data=data, seed=1)

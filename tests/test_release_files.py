"""A release read by `dpspec infer` is validated before any draw: each measured cell once, every
published number finite and in range, the variance column present. A doctored release is a user
error naming what is wrong, never a posterior 50 times too sure, nor an internal error."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

import dpspec
from dpspec.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "specs", "acs_ma_hispanic_topdown.dps")
TARGET = ["--target", "count persons by PUMA, HISP", "--draws", "20", "--seed", "1"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    from dpspec.publish.output import write_result

    out = tmp_path_factory.mktemp("rel") / "release"
    write_result(dpspec.compile(SPEC, seed=5), str(out))
    return out


def _doctored(release, tmp_path, change):
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    file = copy / manifest["outputs"]["measurements"]["file"]
    frame = pd.read_csv(file, keep_default_na=False)
    change(frame).to_csv(file, index=False)
    return copy


def _repeat(frame):
    return pd.concat([frame] * 50, ignore_index=True)


def _set(column, value):
    def change(frame):
        frame[column] = frame[column].astype(object)
        frame.loc[0, column] = value
        return frame

    return change


@pytest.mark.parametrize(
    "change, says",
    [
        (_repeat, "both hold the cell"),
        (_set("value", "inf"), "finite"),
        (_set("value", "nan"), "finite"),
        (_set("variance", "nan"), "finite"),
        (_set("cell", "100000000000000000000"), "finite"),
        (lambda frame: frame.drop(columns=["variance"]), "has no column 'variance'"),
        (_set("variance", "1e-06"), "not the value the spec implies"),
    ],
)
def test_a_doctored_release_is_refused_before_sampling(release, tmp_path, change, says):
    copy = _doctored(release, tmp_path, change)
    res = CliRunner().invoke(main, ["infer", SPEC, str(copy), *TARGET])
    assert res.exit_code == 1, res.output
    assert says in res.output and "internal error" not in res.output, res.output


def test_the_release_as_written_is_accepted(release):
    res = CliRunner().invoke(main, ["infer", SPEC, str(release), *TARGET])
    assert res.exit_code == 0, res.output


# ---- a release keyed by declared cells: each declared cell once, none left out ----------------------


@pytest.fixture(scope="module")
def counts_release(tmp_path_factory):
    from dpspec.publish.output import write_result
    from tests.test_wasserstein import INFER

    src = tmp_path_factory.mktemp("src")
    rows = ["county,died"] + ["Cameron,True"] + ["Cameron,False"] * 2 + ["Erie,True"] * 3 + ["Erie,False"] * 30
    (src / "cases.csv").write_text("\n".join(rows) + "\n")
    (src / "s.dps").write_text(INFER)
    out = tmp_path_factory.mktemp("rel") / "release"
    write_result(dpspec.compile(str(src / "s.dps"), seed=5), str(out))
    return src / "s.dps", out


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda frame: frame.iloc[1:], "without the declared key county='Cameron'"),
        (
            lambda frame: pd.concat([frame, frame.iloc[:1]], ignore_index=True),
            "both hold the cell {'county': 'Cameron'}",
        ),
        (lambda frame: frame.drop(columns=["cases"]), "has no column 'cases'"),
        (lambda frame: frame.assign(county=["Cameron", "Elsewhere"]), "which is not declared"),
    ],
)
def test_a_release_of_declared_cells_holds_each_once_and_none_other(counts_release, tmp_path, change, says):
    spec, release = counts_release
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    file = copy / json.loads((copy / "manifest.json").read_text())["outputs"]["counts"]["file"]
    change(pd.read_csv(file, keep_default_na=False)).to_csv(file, index=False)
    res = CliRunner().invoke(
        main,
        [
            "infer",
            str(spec),
            str(copy),
            "--target",
            "count cases by county, died",
            "--draws",
            "20",
            "--seed",
            "1",
            "--method",
            "importance",
        ],
    )
    assert res.exit_code == 1 and "internal error" not in res.output, res.output
    assert says in " ".join(res.output.split()) and file.name in res.output, res.output
    ok = CliRunner().invoke(
        main,
        [
            "infer",
            str(spec),
            str(release),
            "--target",
            "count cases by county, died",
            "--draws",
            "20",
            "--seed",
            "1",
            "--method",
            "importance",
        ],
    )
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize(
    "k, n, says",
    [
        (50, 40, "column 'k', row 2"),
        (-1, 40, "column 'k', row 2"),
        (3.5, 40, "column 'k', row 2"),
        (3, "x", "column 'n', row 2"),
    ],
)
def test_a_kng_rate_holds_a_grid_index_within_its_public_n(k, n, says):
    """The K-norm rate's likelihood reads k and n: k a whole number on 0..n, n a whole number."""
    from dpspec.api import check, parse
    from dpspec.inference.release import InferError, LoadedRelease, validate_release
    from tests.test_wasserstein import KNG

    checked = check(parse(KNG.replace("MECH", "wasserstein_kng")))
    manifest = {"outputs": {"rate": {"file": "rate.csv"}}}

    def validate(frame):
        validate_release(
            LoadedRelease("rel", manifest, {"rate": frame}), checked.mechanism, checked.spec, checked.params
        )

    validate(pd.DataFrame({"k": [3], "n": [40], "rate": [3 / 40]}))  # as compile writes it
    with pytest.raises(InferError) as exc:
        validate(pd.DataFrame({"k": [k], "n": [n], "rate": [0.1]}))
    assert says in str(exc.value) and "rate.csv" in str(exc.value)
    with pytest.raises(InferError, match="has no column 'n'"):
        validate(pd.DataFrame({"k": [3], "rate": [0.1]}))


@pytest.mark.slow  # compiles and writes a TopDown release on the bypass spine
def test_a_bypass_spines_class_variances_are_implied_and_a_smaller_one_is_not(tmp_path):
    """Under the optimized spine a bypassed unit's class spends more of rho: its measurements have a
    variance of their own, which the allocation implies too; a variance made smaller is refused."""
    from dpspec.api import check
    from dpspec.inference.release import InferError, load_release, validate_release
    from dpspec.publish.output import write_result

    path = os.path.join(ROOT, "specs", "pl94_units_topdown.dps")
    out = tmp_path / "release"
    write_result(dpspec.compile(path, seed=1), str(out))
    checked = check(dpspec.load(path))
    frame = pd.read_csv(out / "measurements.csv")
    assert frame.groupby(["level", "query"])["variance"].nunique().max() == 2  # the classes are there
    validate_release(load_release(str(out)), checked.mechanism, checked.spec, checked.params)
    frame.loc[3, "variance"] = frame.loc[3, "variance"] / 2
    frame.to_csv(out / "measurements.csv", index=False)
    with pytest.raises(InferError, match="column 'variance', row 5: .* is not the value the spec implies"):
        validate_release(load_release(str(out)), checked.mechanism, checked.spec, checked.params)


# ---- TopDown's measurements: every declared row, none deleted ------------------------------------

NATIONAL = os.path.join(ROOT, "specs", "acs_national_topdown.dps")
NATIONAL_TARGET = ["--target", "count persons by state, votingage", "--draws", "20", "--seed", "1"]


@pytest.fixture(scope="module")
def national_release(tmp_path_factory):
    from dpspec.publish.output import write_result

    out = tmp_path_factory.mktemp("rel") / "release"
    write_result(dpspec.compile(NATIONAL, seed=5), str(out))
    return out


def _drop(level, geocode, query, cell):
    def change(frame):
        hit = (
            (frame["level"] == level)
            & (frame["geocode"].astype(str) == geocode)
            & (frame["query"] == query)
            & (frame["cell"] == cell)
        )
        assert hit.sum() == 1
        return frame[~hit]

    return change


def test_a_topdown_release_with_a_measurement_row_deleted_is_refused_naming_the_cell(national_release, tmp_path):
    """The measurements' rows are declared from the spec (each level's units times each query's
    cells): a release missing one was once read as less evidence, silently."""
    copy = _doctored(national_release, tmp_path, _drop("puma", "06-07502", "hhgq", 1))
    res = CliRunner().invoke(main, ["infer", NATIONAL, str(copy), *NATIONAL_TARGET])
    assert res.exit_code == 1 and "internal error" not in res.output, res.output
    said = " ".join(res.output.split())
    assert "lacks the declared key level='puma', geocode='06-07502', query='hhgq', cell=1" in said, res.output
    assert "measurements.csv" in said


@pytest.mark.slow  # writes a TopDown release and reads back every declared row
def test_a_topdown_release_as_written_holds_every_declared_row(national_release):
    res = CliRunner().invoke(main, ["infer", NATIONAL, str(national_release), *NATIONAL_TARGET])
    assert res.exit_code == 0, res.output


def test_a_topdown_release_with_a_row_of_an_undeclared_unit_is_refused(national_release, tmp_path):
    def change(frame):
        extra = frame.iloc[-1:].copy()
        extra["geocode"] = "99-99999"
        return pd.concat([frame, extra], ignore_index=True)

    copy = _doctored(national_release, tmp_path, change)
    res = CliRunner().invoke(main, ["infer", NATIONAL, str(copy), *NATIONAL_TARGET])
    assert res.exit_code == 1 and "geocode='99-99999'" in res.output and "is not declared" in res.output, res.output


@pytest.mark.slow  # compiles and writes TopDown releases on two spines
def test_the_declared_rows_follow_the_aian_and_bypass_spine_and_a_deleted_parts_row_is_refused(tmp_path):
    """pl94_units: states split into AIAN and non-AIAN parts, single-child units bypassed; the
    rows declared from the spec are the release's exactly, and a part's row deleted is named."""
    from dpspec.api import check
    from dpspec.inference.release import InferError, load_release, validate_release
    from dpspec.publish.output import write_result

    path = os.path.join(ROOT, "specs", "pl94_units_topdown.dps")
    out = tmp_path / "release"
    write_result(dpspec.compile(path, seed=1), str(out))
    checked = check(dpspec.load(path))
    frame = pd.read_csv(out / "measurements.csv", keep_default_na=False)
    declared = checked.mechanism.release_columns(checked.spec, checked.params)["measurements"].declared_rows()
    assert len(declared) == len(frame)
    part = frame[frame["geocode"].astype(str).str.endswith("/AIAN")].iloc[0]
    frame.drop(index=part.name).to_csv(out / "measurements.csv", index=False)
    with pytest.raises(
        InferError, match=f"lacks the declared key level='{part['level']}', geocode='{part['geocode']}'"
    ):
        validate_release(load_release(str(out)), checked.mechanism, checked.spec, checked.params)


def test_geocodes_read_back_as_numbers_compare_with_their_declared_text():
    """A CSV reader takes a column of codes such as '01', '06' for numbers (1, 6): the declared
    text is compared as numbers then, and a missing code is still named as declared."""
    from dpspec.errors import MechanismError
    from dpspec.run.key_check import check_declared_rows

    declared = pd.DataFrame({"geocode": pd.Categorical(["01", "01", "06", "06"]), "cell": [0, 1, 0, 1]})
    read = pd.DataFrame({"geocode": [1, 1, 6, 6], "cell": [0, 1, 0, 1]})
    check_declared_rows(read, ("geocode", "cell"), declared, "m.csv", "refused")
    with pytest.raises(MechanismError, match="lacks the declared key geocode='06', cell=1"):
        check_declared_rows(read.iloc[:3], ("geocode", "cell"), declared, "m.csv", "refused")
    with pytest.raises(MechanismError, match="row 6: key geocode=7, cell=0 is not declared"):
        check_declared_rows(
            pd.concat([read, pd.DataFrame({"geocode": [7], "cell": [0]})]),
            ("geocode", "cell"),
            declared,
            "m.csv",
            "refused",
        )


def test_under_the_gq_blockgroups_spine_the_rows_are_not_declared():
    """The one case the spec alone cannot say: `spine: { gq_blockgroups: ... }` splits block groups
    by the facilities table's counts, so the release check compares the measurements' columns,
    cells and variances there, not their rows (stated in docs/guides/safety.md)."""
    from dpspec.api import check

    checked = check(dpspec.load(os.path.join(ROOT, "specs", "pl94_production_topdown.dps")))
    assert checked.mechanism.release_columns(checked.spec, checked.params)["measurements"].declared_rows() is None

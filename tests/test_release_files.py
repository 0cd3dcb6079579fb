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


@pytest.mark.parametrize("change, says", [
    (_repeat, "both hold the cell"),
    (_set("value", "inf"), "finite"),
    (_set("value", "nan"), "finite"),
    (_set("variance", "nan"), "finite"),
    (_set("cell", "100000000000000000000"), "finite"),
    (lambda frame: frame.drop(columns=["variance"]), "has no column 'variance'"),
    (_set("variance", "1e-06"), "not the value the spec implies"),
])
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


@pytest.mark.parametrize("change, says", [
    (lambda frame: frame.iloc[1:], "without the declared key county='Cameron'"),
    (lambda frame: pd.concat([frame, frame.iloc[:1]], ignore_index=True), "both hold the cell {'county': 'Cameron'}"),
    (lambda frame: frame.drop(columns=["cases"]), "has no column 'cases'"),
    (lambda frame: frame.assign(county=["Cameron", "Elsewhere"]), "which is not declared"),
])
def test_a_release_of_declared_cells_holds_each_once_and_none_other(counts_release, tmp_path, change, says):
    spec, release = counts_release
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    file = copy / json.loads((copy / "manifest.json").read_text())["outputs"]["counts"]["file"]
    change(pd.read_csv(file, keep_default_na=False)).to_csv(file, index=False)
    res = CliRunner().invoke(main, ["infer", str(spec), str(copy), "--target", "count cases by county, died",
                                    "--draws", "20", "--seed", "1", "--method", "importance"])
    assert res.exit_code == 1 and "internal error" not in res.output, res.output
    assert says in " ".join(res.output.split()) and file.name in res.output, res.output
    ok = CliRunner().invoke(main, ["infer", str(spec), str(release), "--target", "count cases by county, died",
                                   "--draws", "20", "--seed", "1", "--method", "importance"])
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("k, n, says", [(50, 40, "column 'k', row 2"), (-1, 40, "column 'k', row 2"),
                                        (3.5, 40, "column 'k', row 2"), (3, "x", "column 'n', row 2")])
def test_a_kng_rate_holds_a_grid_index_within_its_public_n(k, n, says):
    """The K-norm rate's likelihood reads k and n: k a whole number on 0..n, n a whole number."""
    from dpspec.api import check, parse
    from dpspec.inference.release import InferError, LoadedRelease, validate_release
    from tests.test_wasserstein import KNG

    checked = check(parse(KNG.replace("MECH", "wasserstein_kng")))
    manifest = {"outputs": {"rate": {"file": "rate.csv"}}}

    def validate(frame):
        validate_release(LoadedRelease("rel", manifest, {"rate": frame}), checked.mechanism, checked.spec, checked.params)

    validate(pd.DataFrame({"k": [3], "n": [40], "rate": [3 / 40]}))  # as compile writes it
    with pytest.raises(InferError) as exc:
        validate(pd.DataFrame({"k": [k], "n": [n], "rate": [0.1]}))
    assert says in str(exc.value) and "rate.csv" in str(exc.value)
    with pytest.raises(InferError, match="has no column 'n'"):
        validate(pd.DataFrame({"k": [3], "rate": [0.1]}))


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

"""The 2020 production P.L. 94-171 person strategy: recodes, per-level query shares, and the
allocation `dpspec budget --json` reports, recomputed here independently from the published
fractions (DAS_2020_Redistricting_Production_Code, strategy
ProductionCandidate20210527US_mult8_add02_dsepJune3)."""

import json
import os
from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.check.checker import check
from dpspec.cli.main import main
from dpspec.errors import SpecError
from dpspec.language.parser import parse
from dpspec_topdown.measurement.histogram import Recode, Schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "specs", "pl94_production_topdown.dps")

QUERIES = [
    "total",
    "cenrace",
    "hispanic",
    "votingage",
    "hhinstlevels",
    "hhgq",
    "hispanic * cenrace",
    "votingage * cenrace",
    "votingage * hispanic",
    "votingage * hispanic * cenrace",
    "detailed",
]
# (numerator, denominator) per query above, per level; the US level has no 'total' query.
PUBLISHED = {
    "nation": [
        None,
        (52, 4097),
        (26, 4097),
        (26, 4097),
        (26, 4097),
        (26, 4097),
        (130, 4097),
        (130, 4097),
        (26, 4097),
        (26, 241),
        (189, 241),
    ],
    "state": [
        (3773, 4097),
        (6, 4097),
        (6, 4097),
        (6, 4097),
        (6, 4097),
        (6, 4097),
        (12, 4097),
        (12, 4097),
        (6, 4097),
        (2, 241),
        (230, 4097),
    ],
    "county": [
        (3126, 4097),
        (10, 4097),
        (10, 4097),
        (10, 4097),
        (10, 4097),
        (10, 4097),
        (28, 4097),
        (28, 4097),
        (10, 4097),
        (101, 4097),
        (754, 4097),
    ],
    "tract": [
        (1567, 4102),
        (4, 2051),
        (5, 4102),
        (5, 4102),
        (5, 4102),
        (5, 4102),
        (1933, 4102),
        (10, 2051),
        (5, 4102),
        (67, 4102),
        (241, 2051),
    ],
    "blockgroup": [
        (1705, 4099),
        (3, 4099),
        (3, 4099),
        (3, 4099),
        (3, 4099),
        (3, 4099),
        (1055, 4099),
        (9, 4099),
        (3, 4099),
        (24, 4099),
        (1288, 4099),
    ],
    "block": [
        (5, 4097),
        (9, 4097),
        (5, 4097),
        (5, 4097),
        (5, 4097),
        (5, 4097),
        (21, 4097),
        (21, 4097),
        (5, 4097),
        (71, 4097),
        (3945, 4097),
    ],
}
GEOLEVEL = {
    "nation": F(104, 4099),
    "state": F(1440, 4099),
    "county": F(447, 4099),
    "tract": F(687, 4099),
    "blockgroup": F(1256, 4099),
    "block": F(165, 4099),
}
RHO = 1 / F(339, 542) ** 2  # global_scale = 339/542


def _budget_json(path=SPEC):
    result = CliRunner().invoke(main, ["budget", "--json", path])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_production_allocation_recomputed_from_the_fractions():
    summary = _budget_json()
    rows = summary["allocation"]
    expected = []
    for level, shares in PUBLISHED.items():
        assert sum(F(*s) for s in shares if s) == 1, level
        for query, s in zip(QUERIES, shares):
            if s is None:
                continue
            rho_q = RHO * GEOLEVEL[level] * F(*s)
            expected.append((level, query, rho_q, 2 / (2 * rho_q)))  # hamming: s² = 2
    assert [(r["level"], r["query"]) for r in rows] == [(lv, q) for lv, q, _, _ in expected]
    for row, (level, query, rho_q, var) in zip(rows, expected):
        assert F(row["rho_exact"]) == rho_q, (level, query)
        assert row["rho"] == pytest.approx(float(rho_q), rel=1e-15)
        # sigma² is used exactly, or rounded up by less than 2**-24 relative (dpspec.run.noise)
        assert var <= F(row["sigma2_exact"]) <= var * (1 + F(1, 2**24)), (level, query)
        assert row["variance"] == pytest.approx(float(var), rel=1e-7)
    assert sum(F(r["rho_exact"]) for r in rows) == RHO
    assert summary["budget"]["rho"] == pytest.approx(2.556225581, abs=1e-9)
    assert summary["bounds_hold"]
    # the headline published figures
    state_total = next(r for r in rows if r["level"] == "state" and r["query"] == "total")
    assert F(state_total["rho_exact"]) == RHO * F(1440, 4099) * F(3773, 4097)


def _spec_text(recode_body, queries=None):
    text = open(SPEC).read()
    start = text.index("  recodes: {")
    end = text.index("  levels: {")
    text = text[:start] + "  recodes: {\n    hhinstlevels: {\n" + recode_body + "\n    }\n  }\n" + text[end:]
    if queries is not None:
        start = text.index("  queries: {")
        end = text.index("budget rho")
        text = text[:start] + queries + "\n}\n\n" + text[end:]
    return text


def _check_text(tmp_path, text):
    path = tmp_path / "spec.dps"
    path.write_text(text)
    # the data path is relative to the spec: point it back at the bundled data
    text = text.replace('"data/pl94_synthetic/', '"' + os.path.join(ROOT, "specs", "data", "pl94_synthetic") + "/")
    path.write_text(text)
    return check(parse(text, str(path)))


def test_recode_that_does_not_partition_is_a_spec_error(tmp_path):
    overlap = (
        "      of: hhgq\n      household: [0, 1]\n      institutional: [1, 2, 3, 4]\n      noninstitutional: [5, 6, 7]"
    )
    with pytest.raises(SpecError, match=r"does not partition 'hhgq': '1' is in both 'household' and 'institutional'"):
        _check_text(tmp_path, _spec_text(overlap))
    gap = "      of: hhgq\n      household: [0]\n      institutional: [1, 2, 3]\n      noninstitutional: [5, 6, 7]"
    with pytest.raises(SpecError, match=r"categories \['4'\] are in no group"):
        _check_text(tmp_path, _spec_text(gap))
    unknown = (
        "      of: hhgq\n      household: [0, 9]\n      institutional: [1, 2, 3, 4]\n      noninstitutional: [5, 6, 7]"
    )
    with pytest.raises(SpecError, match="lists 9, which is not a category"):
        _check_text(tmp_path, _spec_text(unknown))


def test_shares_not_summing_to_one_name_the_level(tmp_path):
    text = open(SPEC).read().replace("      detailed: 3945/4097", "      detailed: 3944/4097")
    with pytest.raises(SpecError, match="query shares at level 'block'.*sum to 4096/4097"):
        _check_text(tmp_path, text)


def test_recode_groups_cells_like_its_definition():
    schema = Schema.from_variables({"hhgq": list(range(8)), "votingage": [0, 1]}).with_recodes(
        [Recode.build("hhinstlevels", "hhgq", list(range(8)), {"hh": [0], "inst": [1, 2, 3, 4], "non": [5, 6, 7]})]
    )
    g = schema.groups(["hhinstlevels"])
    cells_hhgq = np.repeat(np.arange(8), 2)  # C order: hhgq major, votingage minor
    assert g.tolist() == [0 if h == 0 else 1 if h <= 4 else 2 for h in cells_hhgq]
    joint = schema.groups(["votingage", "hhinstlevels"])  # canonical order: hhinstlevels, votingage
    assert schema.canonical(["votingage", "hhinstlevels"]) == ("hhinstlevels", "votingage")
    assert joint.tolist() == [g[c] * 2 + c % 2 for c in range(16)]
    assert schema.marginal_size(["hhinstlevels", "votingage"]) == 6
    with pytest.raises(SpecError, match="twice"):
        schema.canonical(["hhgq", "hhinstlevels"])
    # the recode marginal of a histogram equals a group-by of the recoded records
    rng = np.random.default_rng(0)
    records = pd.DataFrame({"hhgq": rng.integers(0, 8, 500), "votingage": rng.integers(0, 2, 500)})
    cells = schema.cell_index(records)
    counts = np.bincount(g[cells], minlength=3)
    by = schema.factor_values("hhinstlevels", records["hhgq"]).value_counts()
    assert counts.tolist() == [by.get("hh", 0), by.get("inst", 0), by.get("non", 0)]


UNITS_SPEC = os.path.join(ROOT, "specs", "pl94_units_topdown.dps")


def test_units_release_has_the_production_budget_and_certificate_epsilon():
    summary = _budget_json(UNITS_SPEC)
    rho = F(3379, 12343) ** 2  # global_scale = 12343/3379
    assert sum(F(r["rho_exact"]) for r in summary["allocation"]) == rho
    assert [r["level"] for r in summary["allocation"]] == ["nation", "state", "county", "tract", "blockgroup", "block"]
    shares = [F(1, 205), F(1, 205), F(7, 82), F(364, 1025), F(1759, 4100), F(99, 820)]
    assert sum(shares) == 1
    assert [F(r["rho_exact"]) for r in summary["allocation"]] == [rho * s for s in shares]
    cks = next(c for c in summary["conversions"] if c["method"] == "cks20")
    # the production certificate prints the implied epsilon 1455307/588081 (2.4747) at delta 1e-10
    assert cks["epsilon"] == pytest.approx(1455307 / 588081, abs=5e-4)


@pytest.mark.slow  # a production units release
def test_units_release_keeps_housing_units_per_block(tmp_path):
    from dpspec.run.compiler import compile_spec

    result = compile_spec(parse(open(UNITS_SPEC).read(), UNITS_SPEC), seed=4, audit=False)
    units = pd.read_parquet(os.path.join(ROOT, "specs", "data", "pl94_synthetic", "pl94_synthetic_units.parquet"))
    out = result.published["units"].to_pandas()  # streamed; small here
    a = units.groupby("block", observed=True).size()
    b = out.groupby("block", observed=True).size()
    b.index = b.index.astype(str)
    a.index = a.index.astype(str)
    assert a.sort_index().equals(b.sort_index())
    assert set(out["h1"].astype(int)) <= {0, 1}

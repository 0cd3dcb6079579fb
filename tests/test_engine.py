"""The execution-engine contract on the local engine: keyed streams, canonical units, CLI errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.engine import ENGINES, EngineRun, LocalEngine, UnitFailed, get_engine, streams
from dpspec.engine.base import unit_stream


def first_draws(run_key, keys, n=1):
    return np.array([streams.unit_rng(run_key, k).integers(0, 1 << 63, n) for k in keys])


# ---- keyed streams --------------------------------------------------------------------------


def test_same_run_key_and_unit_key_give_the_same_stream():
    a = streams.unit_rng(2026, ("swap", ("MA", 3))).integers(0, 1 << 62, 100)
    b = streams.unit_rng(2026, ("swap", ("MA", np.int64(3)))).integers(0, 1 << 62, 100)
    assert np.array_equal(a, b)


def test_key_encoding_is_injective_on_lookalikes():
    lookalikes = [1, "1", (1,), ((1,),), ("ab", "c"), ("a", "bc"), True, 1.5, None, "", (), b"1", -1, 256, 255]
    encoded = [streams.encode_key(k) for k in lookalikes]
    assert len(set(encoded)) == len(lookalikes)
    assert streams.encode_key(3.0) == streams.encode_key(3) == streams.encode_key(np.int32(3))


def test_unit_keys_are_typed():
    with pytest.raises(TypeError, match="unit key"):
        streams.encode_key(object())


def test_distinct_keys_and_run_keys_give_distinct_streams():
    keys = [("stratum", i) for i in range(5000)] + [("node", i) for i in range(5000)]
    draws = first_draws(1, keys)[:, 0]
    assert len(set(draws.tolist())) == len(keys)
    assert not np.array_equal(first_draws(1, keys[:50]), first_draws(2, keys[:50]))


def test_streams_of_neighbouring_keys_look_independent():
    """First draws across 4000 keys are uniform (chi-square), and adjacent keys' streams are
    uncorrelated; a shared or shifted stream would fail both (fixed run key: deterministic)."""
    u = np.array([streams.unit_rng(99, ("cell", i)).random() for i in range(4000)])
    observed = np.histogram(u, bins=20, range=(0, 1))[0]
    chi2 = float(((observed - 200) ** 2 / 200).sum())
    assert chi2 < 43.8  # the 0.999 quantile of chi-square with 19 degrees of freedom
    x = streams.unit_rng(99, ("cell", 0)).random(20_000)
    for other in [("cell", 1), ("cell", "0"), ("Cell", 0)]:
        y = streams.unit_rng(99, other).random(20_000)
        assert abs(np.corrcoef(x, y)[0, 1]) < 4 / np.sqrt(20_000)
    shifted = streams.unit_rng(99, ("cell", 1)).random(20_001)[1:]
    assert abs(np.corrcoef(x, shifted)[0, 1]) < 4 / np.sqrt(20_000)


def test_stage_is_part_of_the_stream_key():
    a = unit_stream(5, "level 1", ("25",)).integers(0, 1 << 62, 4)
    b = unit_stream(5, "level 2", ("25",)).integers(0, 1 << 62, 4)
    assert not np.array_equal(a, b)


def test_run_key_is_the_seed_or_fresh_entropy():
    assert streams.new_run_key(17) == 17
    assert streams.new_run_key(None) != streams.new_run_key(None)
    assert streams.derive_run_key(17, ("repeat", 1)) != streams.derive_run_key(17, ("repeat", 2))


# ---- map over units of work -----------------------------------------------------------------


def shuffle_within(key, rows, rng):
    """A swap-like unit: permute `value` within the stratum, keep everything else."""
    out = rows.copy()
    out["value"] = rng.permutation(rows["value"].to_numpy())
    return out


def people(n=600, seed=0):
    gen = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "state": pd.Categorical(gen.choice(["MA", "RI", "CT"], n)),
            "size": gen.integers(1, 5, n).astype("int32"),
            "value": gen.integers(0, 1000, n),
            "flag": gen.random(n) < 0.5,
        }
    )


def test_map_groups_does_not_depend_on_row_order():
    run = EngineRun(LocalEngine(), 11)
    frame = people()
    a = run.map_groups(frame, ["state", "size"], shuffle_within, stage="swap")
    b = run.map_groups(frame.sample(frac=1, random_state=3), ["state", "size"], shuffle_within, stage="swap")
    assert a.to_csv(index=False) == b.to_csv(index=False)
    c = EngineRun(LocalEngine(), 12).map_groups(frame, ["state", "size"], shuffle_within, stage="swap")
    assert a.to_csv(index=False) != c.to_csv(index=False)


def test_map_groups_keeps_each_unit_inside_its_stratum():
    frame = people()
    out = EngineRun(LocalEngine(), 1).map_groups(frame, ["state", "size"], shuffle_within, stage="swap")
    assert list(out.dtypes.astype(str)) == ["object", "int64", "int64", "bool"]
    key = ["state", "size"]
    before = frame.astype({"state": str}).groupby(key)["value"].apply(sorted)
    after = out.groupby(key)["value"].apply(sorted)
    assert before.equals(after)  # a permutation within every stratum, nothing crossed strata
    assert (out[key].to_numpy() == out.sort_values(key, kind="mergesort")[key].to_numpy()).all()


def test_unit_output_schema_and_failure_names_the_key():
    run = EngineRun(LocalEngine(), 1)
    sizes = run.map_groups(
        people(), ["state"], lambda k, rows, rng: pd.DataFrame({"n": [len(rows)]}), stage="n", schema={"n": "int64"}
    )
    assert sizes["n"].sum() == 600 and len(sizes) == 3

    def fails_on_ri(key, rows, rng):
        if key == ("RI",):
            raise ValueError("bad stratum")
        return rows

    with pytest.raises(UnitFailed, match=r"n: the unit of work \('RI',\) failed: ValueError: bad stratum"):
        run.map_groups(people(), ["state"], fails_on_ri, stage="n")


def test_count_and_parquet_partitioned_directory(tmp_path):
    frame = people()
    engine = LocalEngine()
    counts = engine.count(frame, ["state"])
    assert counts["count"].tolist() == frame["state"].value_counts().sort_index().tolist()
    frame.astype({"state": str}).to_parquet(tmp_path / "people", partition_cols=["state"])
    table = engine.read_parquet(str(tmp_path / "people"))
    assert engine.count(table, ["state"]).equals(counts)
    with pytest.raises(Exception, match="no such Parquet"):
        engine.read_parquet(str(tmp_path / "missing"))


# ---- the compiler and the command line ------------------------------------------------------


def test_the_engine_names_match():
    from dpspec.cli.engine import ENGINES as CLI_ENGINES

    assert CLI_ENGINES == ENGINES
    assert get_engine(None).name == "local"
    with pytest.raises(ValueError, match="unknown engine"):
        get_engine("dask")


def test_a_plugin_using_the_engine_compiles_reproducibly(tmp_path, stratified_plugin):
    import dpspec
    from tests.conftest import write_stratified_case

    path = write_stratified_case(str(tmp_path))
    a = dpspec.compile(path, seed=3)
    b = dpspec.compile(path, seed=3, engine="local")
    assert a.engine == "local"
    assert a.published["histogram"].to_csv(index=False) == b.published["histogram"].to_csv(index=False)
    assert len(a.published["histogram"]) == 50  # 25 regions x smoker true/false


def test_existing_plugins_keep_their_run_signature(small_spec):
    import dpspec
    from dpspec.engine import accepts_engine
    from dpspec.contract.plugins import mechanism

    assert not accepts_engine(mechanism("randomized_response"))
    result = dpspec.compile(str(small_spec), seed=1, engine=LocalEngine())
    assert result.engine == "local"


def run_cli(*args):
    from dpspec.cli.main import main

    return CliRunner().invoke(main, list(args))


def test_cli_spark_without_pyspark_says_how_to_install(small_spec, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pyspark", None)  # import pyspark fails
    res = run_cli("compile", str(small_spec), "-o", str(tmp_path / "out"), "--engine", "spark")
    assert res.exit_code == 2
    assert "pip install 'dpspec[spark]'" in res.output and "Java" in res.output
    assert not (tmp_path / "out").exists()


def test_cli_spark_without_java_says_how_to_install(small_spec, tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    res = run_cli("compile", str(small_spec), "-o", str(tmp_path / "out"), "--engine", "spark")
    assert res.exit_code == 2
    assert "Java 17 runtime" in res.output and "Traceback" not in res.output


def test_cli_unreachable_master_is_a_clear_error(small_spec, tmp_path):
    """How fast it is said (before any JVM starts): benchmarks/bench_refusals.py."""
    import socket

    pytest.importorskip("pyspark")
    from dpspec.engine.spark import find_java

    if find_java() is None:
        pytest.skip("no Java runtime")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_cli(
        "compile",
        str(small_spec),
        "-o",
        str(tmp_path / "out"),
        "--engine",
        "spark",
        "--spark-master",
        f"spark://127.0.0.1:{port}",
    )
    assert res.exit_code == 2
    assert f"cannot reach the Spark master spark://127.0.0.1:{port}" in res.output


def test_master_urls_are_checked():
    from dpspec.engine.base import EngineUnavailable
    from dpspec.engine.spark import master_addresses, probe_master

    assert master_addresses("local[2]") == []
    assert master_addresses("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert master_addresses("k8s://https://api.example:6443") == [("api.example", 6443)]
    for bad in ("spark://nohost", "mesos://x:1", "http://x"):
        with pytest.raises(EngineUnavailable):
            master_addresses(bad)
    with pytest.raises(EngineUnavailable, match="waited at most 0.5 s"):
        probe_master("spark://192.0.2.1:7077", timeout=0.5)  # TEST-NET-1: never answers


def test_cli_spark_master_needs_the_spark_engine(small_spec, tmp_path):
    res = run_cli("compile", str(small_spec), "-o", str(tmp_path / "out"), "--spark-master", "local[2]")
    assert res.exit_code == 2 and "--spark-master needs --engine spark" in res.output


def test_cli_says_when_a_mechanism_ignores_the_chosen_engine(small_spec, tmp_path, spark_session):
    # (spark_session: this compile starts Spark in this process, so it runs where and when the
    # other Spark tests do, and joins the session they share)
    res = run_cli(
        "compile",
        str(small_spec),
        "-o",
        str(tmp_path / "out"),
        "--seed",
        "1",
        "--engine",
        "spark",
        "--spark-master",
        "local[1]",
    )
    assert "does not use the execution engine yet; it ran in this process, not on spark" in res.output
    assert (tmp_path / "out" / "manifest.json").exists()


def compile_failing_unit(tmp_path, *engine_args):
    """The CLI on a spec whose stratum r7 fails: exit 1, the key named, no output set."""
    from tests.conftest import write_stratified_case

    path = write_stratified_case(str(tmp_path))
    text = open(path).read().replace("scale: 2 }", 'scale: 2  fail_on: "r7" }')
    open(path, "w").write(text)
    res = run_cli("compile", path, "-o", str(tmp_path / "out"), "--seed", "1", *engine_args)
    assert res.exit_code == 1
    assert (
        "stratified histogram: the unit of work ('r7',) failed: RuntimeError: this stratum was told to fail"
        in res.output
    )
    assert "Traceback" not in res.output
    assert not (tmp_path / "out").exists()


def test_a_failed_unit_leaves_no_output_set(tmp_path, stratified_plugin):
    compile_failing_unit(tmp_path)


@pytest.mark.slow  # starts a process pool
def test_a_process_pool_gives_the_same_bytes():
    frame = people(n=3000)
    alone = EngineRun(LocalEngine(), 8).map_groups(frame, ["state", "size"], shuffle_within, stage="swap")
    pooled = EngineRun(LocalEngine(processes=2), 8).map_groups(frame, ["state", "size"], shuffle_within, stage="swap")
    assert pooled.to_csv(index=False) == alone.to_csv(index=False)

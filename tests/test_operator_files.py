"""Files as the operator left them (issue 29): a replaced file keeps its mode and owner, a
hard-linked one is refused, and an output path whose link changes during the run never lands
an output set anywhere it was not checked."""

from __future__ import annotations

import os
import stat

import pytest
from click.testing import CliRunner

import dpspec
import dpspec.publish.output as publish_output
from dpspec.cli.main import main
from tests.conftest import SMALL_SPEC

UNFORMATTED = SMALL_SPEC.replace("  count people", "        count people")


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_fmt_write_keeps_a_0600_spec_0600_and_its_owner(tmp_path):
    spec = tmp_path / "s.dps"
    spec.write_text(UNFORMATTED)
    os.chmod(spec, 0o600)
    owner = os.stat(spec).st_uid, os.stat(spec).st_gid
    result = CliRunner().invoke(main, ["fmt", "--write", str(spec)])
    assert result.exit_code == 0, result.output
    assert spec.read_text() != UNFORMATTED and _mode(spec) == 0o600
    assert (os.stat(spec).st_uid, os.stat(spec).st_gid) == owner


def test_fmt_write_refuses_a_hard_linked_spec_and_leaves_both_names_alone(tmp_path):
    spec = tmp_path / "s.dps"
    spec.write_text(UNFORMATTED)
    os.link(spec, tmp_path / "other-name.dps")
    result = CliRunner().invoke(main, ["fmt", "--write", str(spec)])
    assert result.exit_code == 1 and "has 2 hard links" in result.output
    assert spec.read_text() == UNFORMATTED == (tmp_path / "other-name.dps").read_text()
    assert os.stat(spec).st_ino == os.stat(tmp_path / "other-name.dps").st_ino


@pytest.mark.parametrize("linked", [False, True])
def test_export_o_keeps_mode_or_refuses_a_hard_link(tmp_path, linked):
    from tests.conftest import SPECS

    out = tmp_path / "entry.yaml"
    out.write_text("old\n")
    os.chmod(out, 0o640)
    if linked:
        os.link(out, tmp_path / "twin.yaml")
    result = CliRunner().invoke(
        main, ["export", "--registry", os.path.join(SPECS, "registry", "dhc_persons.dps"), "-o", str(out)]
    )
    if linked:
        assert result.exit_code == 1 and "hard links" in result.output
        assert out.read_text() == "old\n"
    else:
        assert result.exit_code == 0, result.output
        assert out.read_text() != "old\n" and _mode(out) == 0o640


def test_a_new_output_file_gets_the_usual_mode(tmp_path):
    from dpspec.publish.atomic import _umask, write_text

    write_text(str(tmp_path / "new.txt"), "x")
    assert _mode(tmp_path / "new.txt") == 0o666 & ~_umask()


# ---- an output path that changes during the run -------------------------------------------------


def _flipping_case(tmp_path):
    """(result, the link -o names, the safe folder it names, the data folder)."""
    data = tmp_path / "in"
    data.mkdir()
    from tests.conftest import SMALL_CSV

    (data / "people.csv").write_text(SMALL_CSV)
    (data / "small.dps").write_text(SMALL_SPEC)
    safe = tmp_path / "safe"
    safe.mkdir()
    link = tmp_path / "out"
    link.symlink_to(safe)
    return dpspec.compile(dpspec.load(str(data / "small.dps")), seed=1), link, safe, data


def _flip(link, to):
    tmp = link.parent / ".flip"
    tmp.symlink_to(to)
    os.replace(tmp, link)


def test_a_link_flipped_to_the_data_folder_while_staging_publishes_nothing(tmp_path, monkeypatch):
    import dpspec.report

    from dpspec.publish.output import write_result
    from dpspec.publish.output_set import OutputSetError

    result, link, safe, data = _flipping_case(tmp_path)
    before = sorted(os.listdir(data))
    render = dpspec.report.render_all

    def flipping(*args, **kw):  # the reports are rendered while the set is staged
        _flip(link, data)
        return render(*args, **kw)

    monkeypatch.setattr(publish_output, "render_all", flipping)  # where write_result calls it
    with pytest.raises(OutputSetError, match="a link in it changed during the run"):
        write_result(result, str(link))
    assert sorted(os.listdir(data)) == before and os.listdir(safe) == []
    assert not [n for n in os.listdir(tmp_path) if ".dpspec-new-" in n]  # the staged set was removed


def test_a_link_flipped_right_after_the_check_is_caught_on_the_folder_written(tmp_path, monkeypatch):
    import dpspec.publish.input_guard as guard

    from dpspec.publish.input_guard import UnsafeOutputError
    from dpspec.publish.output import write_result

    result, link, safe, data = _flipping_case(tmp_path)
    before = sorted(os.listdir(data))
    check = guard.check_output_target
    calls = []

    def flip_after_first_check(outdir, inputs, folders=()):
        calls.append(outdir)
        check(outdir, inputs, folders)
        if len(calls) == 1:
            _flip(link, data)

    monkeypatch.setattr(publish_output, "check_output_target", flip_after_first_check)  # where write_result calls it
    with pytest.raises(UnsafeOutputError, match="refusing to write there"):
        write_result(result, str(link))
    assert calls[-1] == str(data)  # the guard saw the folder the path now leads to
    assert sorted(os.listdir(data)) == before and os.listdir(safe) == []


def test_an_unchanged_link_still_publishes_into_the_folder_it_names(tmp_path):
    from dpspec.publish.output import write_result

    result, link, safe, _ = _flipping_case(tmp_path)
    write_result(result, str(link))
    assert "manifest.json" in os.listdir(safe)


def _folder_flip_case(tmp_path):
    """(result, -o path, the real folder it lies in, the data folder): the run will replace the
    real folder by a link to the data folder, as a hostile user of a shared parent could."""
    result, _, _, data = _flipping_case(tmp_path)
    real = tmp_path / "shared"
    real.mkdir()
    return result, real / "out", real, data


def _replace_by_link(folder, to):
    moved = folder.parent / (folder.name + ".moved")
    os.rename(folder, moved)
    folder.symlink_to(to)
    return moved


def test_a_parent_folder_replaced_by_a_link_while_staging_writes_nothing_into_the_data(tmp_path, monkeypatch):
    """Every write goes through the handles opened at the start: the staged files never follow
    the new link into the data folder, and the changed path is refused before the swap."""
    import dpspec.report

    from dpspec.publish.output import write_result
    from dpspec.publish.output_set import OutputSetError

    result, out, real, data = _folder_flip_case(tmp_path)
    before = sorted(os.listdir(data))
    render, moved = dpspec.report.render_all, []

    def flipping(*args, **kw):  # the release tables are staged already; the reports follow
        moved.append(_replace_by_link(real, data))
        return render(*args, **kw)

    monkeypatch.setattr(publish_output, "render_all", flipping)  # where write_result calls it
    with pytest.raises(OutputSetError, match="a link in it changed during the run"):
        write_result(result, str(out))
    assert sorted(os.listdir(data)) == before  # not even a hidden staged folder
    assert [n for n in os.listdir(moved[0]) if not n.endswith("-lock")] == []  # the staged set was removed


def test_a_parent_folder_replaced_by_a_link_at_the_swap_lands_the_set_where_it_was_checked(tmp_path, monkeypatch):
    """No window: a change after the last look at the path (right before the swap) moves
    nothing into the data folder; the set is published, whole, in the folder the guard checked."""
    import dpspec.publish.output_set as output_set

    from dpspec.publish.output import write_result
    from dpspec.publish.output_set import verify_set

    result, out, real, data = _folder_flip_case(tmp_path)
    before = sorted(os.listdir(data))
    swap, moved = output_set._swap_in, []

    def flip_then_swap(*args):
        moved.append(_replace_by_link(real, data))
        return swap(*args)

    monkeypatch.setattr(output_set, "_swap_in", flip_then_swap)
    write_result(result, str(out))
    assert sorted(os.listdir(data)) == before
    assert verify_set(str(moved[0] / "out")) == []
    assert not [n for n in os.listdir(moved[0]) if ".dpspec-new-" in n or ".dpspec-old-" in n]


# ---- deeply nested expressions: an error with a location ------------------------------------------


@pytest.mark.parametrize(
    "expression, line",
    [
        ("+".join(["1/1000"] * 500), 20),
        ("-" * 600 + "1", 20),
        ("(" + "\n+".join(["1/1000"] * 500) + ")", None),
        ("\n+".join(["1/1000"] * 500), None),
    ],
)
def test_a_deeply_nested_expression_is_an_error_at_its_line_and_column(tmp_path, expression, line):
    from dpspec.errors import SpecError

    (tmp_path / "s.dps").write_text(SMALL_SPEC.replace("budget epsilon <= 1.1", f"budget epsilon <= {expression}"))
    with pytest.raises(SpecError) as err:
        dpspec.load(str(tmp_path / "s.dps"))
    (diag,) = err.value.diagnostics
    assert "nests more than 200 levels deep" in diag.message and diag.line is not None and diag.column is not None
    assert diag.line == line if line is not None else diag.line > 20
    result = CliRunner().invoke(main, ["check", str(tmp_path / "s.dps")])
    assert result.exit_code == 1 and f"s.dps:{diag.line}:{diag.column}: error" in result.output


def test_a_long_but_ordinary_sum_is_still_read(tmp_path):
    (tmp_path / "s.dps").write_text(
        SMALL_SPEC.replace("budget epsilon <= 1.1", "budget epsilon <= " + "+".join(["1/100"] * 110))
    )
    from fractions import Fraction

    assert dpspec.load(str(tmp_path / "s.dps")).budgets[0].value == Fraction(11, 10)


def test_python_m_dpspec_cli_runs_the_command_line():
    """How a cluster harness or a scheduler without the `dpspec` script starts a compile."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "dpspec.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "compile" in done.stdout, done.stderr

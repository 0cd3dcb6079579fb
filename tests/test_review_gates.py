"""Review gates (issue 27 item 3): the repository's .pre-commit-hooks.yaml run by pre-commit on a
temporary repository, offline (the hooks use the dpspec installed here: `language: system`), and
the reusable CI action's script on a base and a head version of a spec."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import SMALL_CSV, SMALL_SPEC

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def sh(*args, cwd, env=None, check=True):
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **GIT_ENV, **(env or {})},
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def canonical(text: str) -> str:
    from dpspec.language.formatter import format_spec
    from dpspec.language.parser import parse

    return format_spec(parse(text))


@pytest.fixture
def repo(tmp_path):
    """A hooks repository holding this checkout's .pre-commit-hooks.yaml, and a project using it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    shutil.copy(os.path.join(ROOT, ".pre-commit-hooks.yaml"), hooks)
    sh("git", "init", "-q", cwd=hooks)
    sh("git", "add", ".", cwd=hooks)
    sh("git", "commit", "-q", "-m", "hooks", cwd=hooks)
    rev = sh("git", "rev-parse", "HEAD", cwd=hooks).stdout.strip()
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    (project / "specs" / "people.csv").write_text(SMALL_CSV)
    (project / "specs" / "small.dps").write_text(canonical(SMALL_SPEC))
    hook_ids = ("dpspec-check", "dpspec-fmt", "dpspec-budget-bounds")
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hooks}\n    rev: {rev}\n    hooks:\n"
        + "".join(f"      - id: {h}\n        language: system\n" for h in hook_ids)
    )
    sh("git", "init", "-q", cwd=project)
    sh("git", "add", ".", cwd=project)
    return project


def pre_commit(project, *args, check=True):
    env = {"PATH": BIN + os.pathsep + os.environ.get("PATH", ""), "PRE_COMMIT_HOME": str(project.parent / "cache")}
    return sh(os.path.join(BIN, "pre-commit"), *args, cwd=project, env=env, check=check)


def commit(project, message):
    env = {"PATH": BIN + os.pathsep + os.environ.get("PATH", ""), "PRE_COMMIT_HOME": str(project.parent / "cache")}
    done = sh("git", "commit", "-m", message, cwd=project, env=env, check=False)
    return done.returncode, done.stdout + done.stderr


def verdicts(out: str) -> dict:
    """hook name -> Passed/Failed, from pre-commit's report lines."""
    return {line.split("..")[0].strip(): line.rsplit(".", 1)[-1].strip() for line in out.splitlines() if "...." in line}


@pytest.mark.slow  # starts pre-commit in a fresh repository: about 5 s
def test_pre_commit_runs_the_hooks_and_blocks_a_bad_spec(repo):
    pre_commit(repo, "install")
    code, out = commit(repo, "a good spec")
    assert code == 0, out
    names = ("dpspec check", "dpspec fmt --check", "dpspec budget bounds")
    assert {n: verdicts(out).get(n) for n in names} == dict.fromkeys(names, "Passed"), out
    spec = repo / "specs" / "small.dps"
    spec.write_text(spec.read_text().replace("budget epsilon <= 1.1", "budget epsilon <=   1"))  # over, and untidy
    (repo / "specs" / "broken.dps").write_text('spec "broken"\nmechanism nowhere { }\n')
    sh("git", "add", ".", cwd=repo)
    code, out = commit(repo, "a bad spec")
    assert code != 0  # the commit is refused
    assert {n: verdicts(out).get(n) for n in names} == dict.fromkeys(names, "Failed"), out
    assert "the declared bound 'epsilon <= 1' does not hold" in out
    assert "specs/small.dps: not in canonical form" in out and "unknown mechanism 'nowhere'" in out


# ---- the reusable CI action (.github/actions/dpspec-review) ---------------------------------

ACTION = os.path.join(ROOT, ".github", "actions", "dpspec-review")


def load_review():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dpspec_review_action", os.path.join(ACTION, "review.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_action_is_a_composite_running_the_review_script():
    import yaml

    with open(os.path.join(ACTION, "action.yml"), encoding="utf-8") as fh:
        action = yaml.safe_load(fh)
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) >= {"base-ref", "fail-on"}
    run = "\n".join(step.get("run", "") for step in action["runs"]["steps"])
    assert 'review.py" --base "$BASE_REF"' in run and '--summary "$GITHUB_STEP_SUMMARY"' in run
    assert all(step.get("shell") == "bash" for step in action["runs"]["steps"] if "run" in step)


@pytest.mark.slow  # two git checkouts and compiles: about 4 s
def test_the_review_compares_each_changed_spec_with_its_base_version(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    (project / "specs" / "people.csv").write_text(SMALL_CSV)
    (project / "specs" / "small.dps").write_text(SMALL_SPEC)
    (project / "specs" / "untouched.dps").write_text(SMALL_SPEC)
    sh("git", "init", "-q", cwd=project)
    sh("git", "add", ".", cwd=project)
    sh("git", "commit", "-q", "-m", "base", cwd=project)
    base = sh("git", "rev-parse", "HEAD", cwd=project).stdout.strip()
    spec = project / "specs" / "small.dps"
    spec.write_text(spec.read_text().replace("  count people\n", "  count people\n  count people by region\n"))
    (project / "specs" / "new.dps").write_text(SMALL_SPEC)
    sh("git", "add", ".", cwd=project)
    sh("git", "commit", "-q", "-m", "head", cwd=project)
    review = load_review()
    monkeypatch.chdir(project)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    assert review.changed_specs(base) == ["specs/new.dps", "specs/small.dps"]  # not the untouched one
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps' summary\n")
    dpspec = os.path.join(BIN, "dpspec")
    code = review.main(["--base", base, "--summary", str(summary), "--fail-on", "warning", "--dpspec", dpspec])
    text = summary.read_text()
    assert code == 1  # added-invariants is a warning
    assert text.startswith("earlier steps' summary\n# dpspec review against")  # appended, never replaced
    changed = text[text.index("## `specs/small.dps` (against its version at") :]
    assert "Comparison with the baseline" in changed and "added-invariants" in changed
    assert "count people by region" in changed and "<details>" in changed
    new = text[
        text.index("## `specs/new.dps` (new in this change: audited alone)") : text.index("## `specs/small.dps`")
    ]
    assert "Comparison with the baseline" not in new
    assert sorted(os.listdir(project / "specs")) == [
        "new.dps",
        "people.csv",
        "small.dps",
        "untouched.dps",
    ]  # no leftovers
    findings = [{"spec": "specs/small.dps", "rule": "added-invariants", "severity": "warning", "message": "m"}]
    monkeypatch.setattr(review, "review", lambda specs, base, dpspec: ("", findings, []))
    for fail_on, expected in [("critical", 0), ("warning", 1), ("never", 0)]:
        assert (
            review.main(["specs/small.dps", "--base", base, "--summary", str(summary), "--fail-on", fail_on])
            == expected
        )
    monkeypatch.undo()
    monkeypatch.chdir(project)
    broken = project / "specs" / "new.dps"
    broken.write_text("not a spec\n")
    markdown, findings, failed = review.review(["specs/new.dps"], base, dpspec)
    assert failed == ["specs/new.dps"] and "The audit could not run" in markdown and "unexpected" in markdown
    with pytest.raises(SystemExit, match="error: git"):
        review.changed_specs("no-such-ref")

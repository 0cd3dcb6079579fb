"""What users install is what is tested: the wheel and the sdist are built from a clean copy of
this checkout, installed into fresh virtual environments that cannot see the checkout, and from
there every module imports, every command answers `--help`, and one real command of each kind runs.

The fresh environments install the package with `--no-deps`; a `.pth` file then puts this
interpreter's site-packages *after* the environment's own, so the dependencies are found without
a download while `dpspec` and its plugins can only come from the installed wheel (a `.pth` file's
folders are not scanned for further `.pth` files, so the development install's editable finder
stays inactive). Commands run from a temporary folder with PYTHONPATH unset.
"""

from __future__ import annotations

import json
import os
import sysconfig
import shutil
import site
import subprocess
import sys
import tarfile
import textwrap

import pytest

from tests.lsp_client import Client

pytestmark = pytest.mark.slow  # builds a wheel and an sdist and installs each into a fresh virtual environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")
RR = os.path.join(SPECS, "acs_ma_vision_rr.dps")

# Where each source folder lands in an installed tree: the project's layout (pyproject's package-dir).
LAYOUT = {
    "dpspec": "dpspec",
    "grammar": "dpspec/grammar",
    **{
        f"plugins/{name}": name
        for name in sorted(os.listdir(os.path.join(ROOT, "plugins")))
        if name.startswith("dpspec_") and os.path.isfile(os.path.join(ROOT, "plugins", name, "__init__.py"))
    },
}
# Folders that are build output or local state, never sources of a package.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "out",
    "site",
    "*.egg-info",
    "__pycache__",
    "node_modules",
    ".pytest_cache",
    ".hypothesis",
    "artifacts",
    "reports",
    "*.pyc",
)


def source_files() -> dict[str, str]:
    """Every file the package must carry, as {path in an installed tree: path in the checkout}."""
    found = {}
    for src, dest in LAYOUT.items():
        top = os.path.join(ROOT, src)
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith((".pyc", ".pyo")):
                    continue
                rel = os.path.relpath(os.path.join(folder, name), top)
                found[os.path.normpath(os.path.join(dest, rel)).replace(os.sep, "/")] = os.path.join(folder, name)
    return found


def module_names() -> list[str]:
    """The dotted name of every module of the source tree, as an installed package names it."""
    names = []
    for installed in source_files():
        if installed.endswith(".py"):
            parts = installed[:-3].split("/")
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


class Installed:
    """A fresh virtual environment holding one installed dpspec, and the means to run it."""

    def __init__(self, venv: str, work: str):
        self.venv, self.work = venv, work
        self.bin = os.path.join(venv, "bin")
        self.python = os.path.join(self.bin, "python")
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONUSERBASE")
        }
        self.env["PATH"] = self.bin + os.pathsep + os.environ.get("PATH", "")
        self.env["PYTHONNOUSERSITE"] = "1"

    def run(self, *argv, timeout=120, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(argv), cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout, **kw
        )

    def dpspec(self, *args, **kw) -> subprocess.CompletedProcess:
        return self.run(os.path.join(self.bin, "dpspec"), *args, **kw)

    def probe(self, script: str, *args) -> dict:
        """Run `script` in the environment's interpreter; it prints one JSON document."""
        res = self.run(self.python, "-c", textwrap.dedent(script), *args)
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout.strip().splitlines()[-1])


def _clean_copy(dest: str) -> str:
    """The checkout's sources, without build output: a stale build/ folder cannot leak into a wheel."""
    shutil.copytree(ROOT, dest, ignore=_NOT_SOURCES, symlinks=True)
    return dest


def _install(wheel: str, venv: str, work: str) -> Installed:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            os.path.join(venv, "bin", "python"),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            wheel,
        ],
        check=True,
    )
    here = Installed(venv, work)
    purelib = here.probe("import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))")
    deps = [p for p in site.getsitepackages() if os.path.isdir(p)]
    with open(os.path.join(purelib, "zz_dependencies.pth"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(deps) + "\n")
    here.site = purelib
    return here


def _build_wheel(source: str, outdir: str) -> str:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "-w",
            outdir,
            source,
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = [os.path.join(outdir, n) for n in os.listdir(outdir) if n.startswith("dpspec-") and n.endswith(".whl")]
    return wheel


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The wheel and the sdist, each built once from a clean copy of the checkout."""
    top = tmp_path_factory.mktemp("built")
    source = _clean_copy(str(top / "src"))
    wheel = _build_wheel(source, str(top / "wheel"))
    os.makedirs(top / "sdist")
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))",
            str(top / "sdist"),
        ],
        cwd=source,
        capture_output=True,
        text=True,
        check=True,
    )
    sdist = os.path.join(top / "sdist", res.stdout.strip().splitlines()[-1])
    return {"wheel": wheel, "sdist": sdist, "top": top}


@pytest.fixture(scope="session")
def from_wheel(built, tmp_path_factory):
    work = tmp_path_factory.mktemp("wheel-work")
    return _install(built["wheel"], str(built["top"] / "venv-wheel"), str(work))


@pytest.fixture(scope="session")
def from_sdist(built, tmp_path_factory):
    """Installed from the sdist alone: it is unpacked and built in a folder of pip's own."""
    work = tmp_path_factory.mktemp("sdist-work")
    wheel = _build_wheel(built["sdist"], str(built["top"] / "wheel-from-sdist"))
    return _install(wheel, str(built["top"] / "venv-sdist"), str(work))


# ---- the installed tree ----------------------------------------------------------------------


def test_the_installed_package_is_the_wheel_not_the_checkout(from_wheel):
    found = from_wheel.probe("""
        import json, os, sys
        import dpspec, dpspec_rr
        print(json.dumps({"dpspec": dpspec.__file__, "plugin": dpspec_rr.__file__,
                          "path": [os.path.realpath(p) for p in sys.path],
                          "finders": [type(f).__module__ + "." + type(f).__name__ for f in sys.meta_path]}))
    """)
    assert found["dpspec"].startswith(from_wheel.site + os.sep)
    assert found["plugin"].startswith(from_wheel.site + os.sep)
    root = os.path.realpath(ROOT)
    deps = os.path.realpath(
        sysconfig.get_paths()["purelib"]
    )  # the dependencies' site-packages (may sit in the checkout's .venv)
    assert not any((p == root or p.startswith(root + os.sep)) and p != deps for p in found["path"]), found["path"]
    assert not any("editable" in f.lower() for f in found["finders"]), found["finders"]


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_every_source_file_is_installed_when_built_as_a_wheel_or_an_sdist(kind, request):
    installed = request.getfixturevalue(f"from_{kind}")
    missing = [rel for rel in source_files() if not os.path.isfile(os.path.join(installed.site, rel))]
    assert missing == [], f"the {kind} does not install: {missing}"


def test_the_sdist_carries_the_grammar_templates_schemas_and_every_package_file(built):
    with tarfile.open(built["sdist"]) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    wanted = {os.path.relpath(src, ROOT).replace(os.sep, "/") for src in source_files().values()}
    assert {
        "grammar/dps.lark",
        "dpspec/templates/report.html.j2",
        "dpspec/schemas/compile.schema.json",
        "dpspec/registry/schema/deployments-schema.yaml",
        "plugins/dpspec_swap/schemas/epsilon.schema.json",
        "pyproject.toml",
        "README.md",
    } <= names | wanted
    assert sorted(wanted - names) == []


def test_every_module_of_the_source_tree_imports_from_the_installed_package(from_wheel):
    found = from_wheel.probe(
        """
        import importlib, importlib.util, json, sys
        failed, outside = {}, []
        for name in sys.argv[1:]:
            try:  # a __main__ is found, not run (running it is running the command)
                module = importlib.util.find_spec(name) if name.endswith(".__main__") else importlib.import_module(name)
            except BaseException as exc:
                failed[name] = f"{type(exc).__name__}: {exc}"
                continue
            where = getattr(module, "origin", None) or getattr(module, "__file__", None) or ""
            if not where.startswith(sys.prefix + "/"):
                outside.append(name)
        print(json.dumps({"failed": failed, "outside": outside}))
    """,
        *module_names(),
    )
    assert found == {"failed": {}, "outside": []}


# ---- the commands ----------------------------------------------------------------------------


def test_every_command_answers_help_from_the_installed_package(from_wheel):
    found = from_wheel.probe("""
        import json
        import click
        from click.testing import CliRunner
        from dpspec.cli.main import main

        def walk(cmd, path):
            yield path
            if isinstance(cmd, click.Group):
                ctx = click.Context(cmd)
                for name in cmd.list_commands(ctx):
                    yield from walk(cmd.get_command(ctx, name), path + [name])

        answers = {}
        for path in walk(main, []):
            res = CliRunner().invoke(main, path + ["--help"])
            answers[" ".join(path)] = [res.exit_code, res.output[:200]]
        print(json.dumps(answers))
    """)
    assert {"check", "budget", "compile", "sweep", "swap", "swap epsilon", "lsp"} <= set(found)
    bad = {path: out for path, out in found.items() if out[0] != 0 or not out[1].startswith("Usage:")}
    assert bad == {}
    res = from_wheel.dpspec("--help")
    assert res.returncode == 0 and "sweep" in res.stdout, res.stderr


def _check_budget_compile(installed: Installed) -> None:
    res = installed.dpspec("check", RR)
    assert res.returncode == 0 and res.stdout.strip().endswith(": ok"), res.stdout + res.stderr
    res = installed.dpspec("budget", RR)
    assert res.returncode == 0 and "epsilon = 1.0986" in res.stdout, res.stdout + res.stderr
    out = os.path.join(installed.work, "compiled")
    res = installed.dpspec("compile", RR, "-o", out)
    assert res.returncode == 0, res.stdout + res.stderr
    for name in ("manifest.json", "report.html", "internal-report.html"):
        assert os.path.isfile(os.path.join(out, name)), name


def test_check_budget_and_compile_run_from_the_installed_wheel(from_wheel):
    _check_budget_compile(from_wheel)


def test_check_budget_and_compile_run_from_the_installed_sdist(from_sdist):
    _check_budget_compile(from_sdist)


def test_sweep_runs_from_the_installed_package(from_wheel):
    out = os.path.join(from_wheel.work, "swept")
    res = from_wheel.dpspec("sweep", RR, "--vary", "p=0.6,0.7", "-o", out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert os.path.isfile(os.path.join(out, "report.md"))


def test_swap_epsilon_runs_from_the_installed_package(from_wheel):
    res = from_wheel.dpspec("swap", "epsilon", "--b", "264331", "--rate", "0.05", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    (row,) = json.loads(res.stdout)
    assert row["b"] == 264331 and row["epsilon"] > 0


def test_the_language_server_initializes_and_shuts_down_from_the_installed_package(from_wheel):
    client = Client(argv=[os.path.join(from_wheel.bin, "dpspec"), "lsp"], env=from_wheel.env, cwd=from_wheel.work)
    try:
        capabilities = client.initialize(from_wheel.work)["result"]["capabilities"]
        assert capabilities["hoverProvider"]
        assert client.close() == 0, client.stderr.decode(errors="replace")[-2000:]
    finally:
        client.kill()

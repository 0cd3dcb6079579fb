"""dpspec: a declarative language and compiler for differential privacy specifications.

The Python API mirrors the command line:

    spec = dpspec.load("specs/acs_ma_vision_rr.dps")    # a path, or the text of a spec
    result = dpspec.compile(spec, seed=None)            # outputs as DataFrames, ledger, findings
    findings = dpspec.audit(spec, baseline=None)
    summary = dpspec.budget(spec)                       # as `dpspec budget --json`
    check = dpspec.verify(spec, runs=20_000)            # empirical lower bound vs the claimed budget
    dpspec.convert({"rho": 15.29}, to="approx", delta=1e-10, method="bs16")
"""

from __future__ import annotations

from dpspec._version import __version__  # noqa: F401 - dpspec.__version__
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_parser = LazyModule("dpspec.language.parser", "_parser", globals())

# imported on first use: loaded while this package starts, a subpackage would lose its name to a verb here
_compiler = LazyModule("dpspec.run.compiler", "_compiler", globals())
_audit = LazyModule("dpspec.audit", "_audit", globals())
_verify = LazyModule("dpspec.verify", "_verify", globals())
_budget_report = LazyModule("dpspec.budget.budget_report", "_budget_report", globals())
_budget = LazyModule("dpspec.budget", "_budget", globals())
_notebook = LazyModule("dpspec.notebook", "_notebook", globals())

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_inference = LazyModule("dpspec.inference", "_inference", globals())

__import__("dpspec.legacy", fromlist=["install"]).install()  # dpspec 0.1's import paths, deprecated


def load(path_or_text: str):
    """Parse a spec from a file path or from its text (raises SpecError)."""
    return _parser.load_text_or_path(path_or_text)


def compile(spec, data=None, seed=None, runs: int = 1, engine=None):  # noqa: A001 - the product's verb
    """Check, run and account a spec in memory; `dpspec.publish.output.write_result` writes it.

    engine: "local" (default), "spark", or a `dpspec.engine` engine (e.g. SparkEngine("spark://host:7077"))."""
    _notebook_display()
    if isinstance(spec, str):
        spec = load(spec)
    return _compiler.compile_spec(spec, data=data, seed=seed, runs=runs, engine=engine)


def audit(spec, baseline=None, result=None, **kwargs):
    """Privacy-theatrics findings for a spec, optionally against a baseline spec (a list, which a
    notebook shows as the audit report)."""
    _notebook_display()
    if isinstance(spec, str):
        spec = load(spec)
    if isinstance(baseline, str):
        baseline = load(baseline)
    return _audit.run_audit(spec, result=result, baseline=baseline, **kwargs)


def verify(spec, runs=None, seed=None, confidence: float = 0.95):
    """Test the spec's mechanism empirically against its claimed budget (`dpspec verify`)."""
    if isinstance(spec, str):
        spec = load(spec)
    return _verify.verify(spec, runs=runs or _verify.DEFAULT_RUNS, seed=seed, confidence=confidence)


def budget(spec, delta: float | None = None, conversion: str = "cks20") -> dict:
    """The budget a spec's mechanism achieves, as `dpspec budget --json` gives it (a dict; in a
    notebook it shows the spec's report)."""
    _notebook_display()
    if isinstance(spec, str):
        spec = load(spec)
    return _budget_report.BudgetSummary(_budget_report.budget_summary(spec, delta=delta, method=conversion), spec)


def convert(params: dict, **options) -> dict:
    """Budget conversions, as `dpspec convert`: returns the resulting parameters."""
    return _budget.convert_request(params, **options)


def infer(spec, release_dir: str, target: str, **options):
    """Posterior of `target` given a compiled release and the public information (`dpspec infer`)."""
    _notebook_display()
    return _inference.infer(spec, release_dir, target, **options)


def _notebook_display() -> None:
    """Results, audits, budgets and inference results show as their reports in Jupyter: the
    report stage attaches `_repr_html_` to them (dpspec.notebook), so no stage below it
    knows about reports."""
    _notebook.install()


VERBS = {"audit": audit, "budget": budget}  # the subpackages of the same names call these (dpspec.verbs)
__import__("dpspec.verbs", fromlist=["VERBS"]).VERBS.update(VERBS)

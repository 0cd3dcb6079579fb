"""The plugin manager: loads every module of the `dpspec` entry-point group through pluggy."""

from __future__ import annotations

import functools
import warnings
from importlib import metadata

import pluggy

from dpspec.contract import hookspecs, versions, Section, BudgetSection
from dpspec.errors import SpecError
from dpspec.language.diagnostics import unknown
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
_markupsafe = LazyModule("markupsafe", "_markupsafe", globals())


class PluginLoadError(Exception):
    pass


_distributions: dict[int, tuple[str, str]] = {}
_failures: list[tuple[str, str]] = []
_deprecations: dict[str, list[str]] = {}


@functools.lru_cache(maxsize=1)
def manager() -> pluggy.PluginManager:
    """Every plugin of the `dpspec` entry-point group, each loaded on its own: one that fails to
    import is recorded (see `failures()`) and the others still work."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for ep in metadata.entry_points(group=hookspecs.PROJECT):
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            with warnings.catch_warnings(record=True) as caught:  # 0.1 import paths: one report per plugin
                warnings.simplefilter("always", DeprecationWarning)
                plugin = ep.load()
            refused = versions.served(getattr(plugin, versions.DECLARATION, versions.OLDEST_SERVED))
            if refused:
                _failures.append((ep.name, refused))
                continue
            pm.register(plugin, name=ep.name)
        except Exception as exc:  # a broken third-party package must not take dpspec down
            declared = versions.declared_in_source(ep.module)  # a plugin for a newer API may not import here
            refused = versions.served(declared) if declared is not None else None
            _failures.append((ep.name, refused or f"{type(exc).__name__}: {exc}"))
            continue
        found = [
            str(w.message)
            for w in caught
            if issubclass(w.category, DeprecationWarning)
            and str(w.message).startswith(("`from dpspec.", "dpspec.api."))
        ]
        if found:
            _deprecations[ep.name] = list(dict.fromkeys(found))
        dist = getattr(ep, "dist", None)
        if dist is not None:
            _distributions[id(plugin)] = (dist.metadata["name"], dist.version)
    return pm


def failures() -> list[tuple[str, str]]:
    """(entry point, error) for every plugin that could not be loaded."""
    manager()
    return list(_failures)


def deprecations() -> dict[str, list[str]]:
    """entry point -> the deprecated imports its plugin made while loading (each named once)."""
    manager()
    return {k: list(v) for k, v in _deprecations.items()}


def plugin_distribution(plugin) -> tuple[str, str]:
    """(package name, version) of the distribution that registered a plugin module."""
    manager()
    return _distributions.get(id(plugin), ("?", "?"))


@functools.lru_cache(maxsize=1)
def mechanisms() -> dict:
    """name -> Mechanism, from every plugin; a name registered twice is an error."""
    found: dict = {}
    pm = manager()
    for impl in pm.hook.dpspec_mechanisms.get_hookimpls():
        for mech in impl.function() or []:
            if mech.name in found:
                raise PluginLoadError(f"two plugins register a mechanism named '{mech.name}'")
            mech._dpspec_package = plugin_distribution(impl.plugin)
            found[mech.name] = mech
    return found


def mechanism(name: str):
    mechs = mechanisms()
    if name not in mechs:
        message, hint = unknown("mechanism", name, mechs)
        broken = [f"{n} ({why})" for n, why in failures()]
        if broken:
            message += "; plugins that failed to load: " + ", ".join(broken)
        raise SpecError([message + (f"; {hint}" if hint else "")])
    return mechs[name]


def audit_rules() -> list:
    rules = []
    for group in manager().hook.dpspec_audit_rules():
        rules.extend(group or [])
    return rules


def report_sections(result) -> list:
    """Every plugin's sections; a plugin that fails gets a section saying so, not a lost report."""
    sections = []
    for impl in manager().hook.dpspec_report_sections.get_hookimpls():
        try:
            sections.extend(impl.function(result=result) or [])
        except Exception as exc:  # one broken plugin must not take the whole report down
            name = getattr(impl.plugin, "__name__", impl.plugin_name)
            message = f"The plugin {name} failed to produce its report section ({type(exc).__name__}: {exc})."
            sections.append(
                Section(
                    f"Section from {name} unavailable",
                    html=f"<p>{_markupsafe.escape(message)}</p>",
                    markdown=message,
                    data={"error": message},
                )
            )
    return sections


def report_budget(spec, mechanism, params):
    """The `BudgetSection` of the spec's mechanism (the first plugin's that gives one), or None; a
    plugin that fails gets a section saying so, not a lost report."""

    try:
        section = manager().hook.dpspec_report_budget(spec=spec, mechanism=mechanism, params=params)
    except Exception as exc:  # one broken plugin must not take the whole report down
        message = (
            f"A plugin failed to say how mechanism '{mechanism.name}' spends its budget ({type(exc).__name__}: {exc})."
        )
        return BudgetSection(data={"error": message}, markdown="{{ d.error }}\n\n", html="<p>{{ d.error }}</p>\n")
    if section is not None and not isinstance(section, BudgetSection):
        message = f"A plugin's dpspec_report_budget returned {type(section).__name__}, not a dpspec.api.BudgetSection."
        return BudgetSection(data={"error": message}, markdown="{{ d.error }}\n\n", html="<p>{{ d.error }}</p>\n")
    return section


def describe_mechanisms() -> list[dict]:
    out = []
    for name, mech in sorted(mechanisms().items()):
        package, package_version = getattr(mech, "_dpspec_package", ("?", "?"))
        out.append(
            {
                "name": name,
                "version": mech.version,
                "package": package,
                "package_version": package_version,
                "description": mech.description,
                "parameters": mech.parameters.to_json(),
                "outputs": dict(mech.outputs),
            }
        )
    return out


def entry_points() -> list[str]:
    return sorted(ep.name for ep in metadata.entry_points(group=hookspecs.PROJECT))

"""certificate.json: what a compile ran, on what, with which exact budget, when, signed by whom, and every file it wrote.

The Census Bureau's certificates of disclosure avoidance for the 2020 products state the
configuration, the code versions, the exact budgets and who signed off. A compile's certificate
does the same, so that it can be checked later: `dpspec certificate verify DIR` recomputes the
hash of every file of the set (the manifest included) and of every installed plugin's files, and
the certificate's own hash, and refuses the set when any differs. The certificate is the last file
of a set, written after the manifest it covers; it is the only file of the set that holds times.

Nothing secret is written: no seed (only whether there was one), no environment, and no path,
only file names; the git commit is dpspec's own, when dpspec runs from a git checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from fractions import Fraction

from dpspec._version import __version__
from dpspec.errors import DataError
from dpspec.publish.output_set import CERTIFICATE, stage_text
from dpspec.report.exact import exact_budgets, rational
from dpspec.contract import plugins
from dpspec import ir
from dpspec.report.model import seed_policy
from dpspec.schemas import versioned, refuse_newer

_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo")


class CertificateError(DataError):
    """A certificate or its set that cannot be read, or that does not match: the user's to fix (exit 1)."""


def _files_of(module) -> list[str]:
    """The source files of a module's top-level package (every file of its folder, no caches), or
    the module's own file when it is not in a package: a plugin's helpers count as much as its entry."""
    top = sys.modules.get(getattr(module, "__name__", "").split(".")[0], module)
    path = getattr(top, "__file__", None)
    if not path:
        return []
    if os.path.basename(path) != "__init__.py":
        return [path]
    root, out = os.path.dirname(path), []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        out += [os.path.join(folder, f) for f in sorted(files) if not f.endswith(_SKIP_SUFFIXES)]
    return out


def files_sha256(module) -> tuple[str, int]:
    """(SHA-256 over the files' names, relative to their package's folder, and bytes; how many files)."""
    files = _files_of(module)
    if not files:
        return hashlib.sha256().hexdigest(), 0
    base = os.path.dirname(files[0])
    h = hashlib.sha256()
    for path in files:
        with open(path, "rb") as fh:
            h.update(os.path.relpath(path, base).replace(os.sep, "/").encode() + b"\0" + fh.read() + b"\0")
    return h.hexdigest(), len(files)


def installed_plugins(ran: str | None = None) -> list[dict]:
    """Every loaded plugin: its entry point, module, distribution, and the hash of its installed files.
    `ran` names the mechanism that ran; its plugin is marked (the others' audit rules and report
    sections ran too)."""

    pm = plugins.manager()
    running = None
    if ran is not None:
        for impl in pm.hook.dpspec_mechanisms.get_hookimpls():
            if any(getattr(m, "name", None) == ran for m in (impl.function() or [])):
                running = impl.plugin_name
    out = []
    for name, module in sorted(pm.list_name_plugin(), key=lambda item: item[0]):
        if module is None:
            continue
        package, package_version = plugins.plugin_distribution(module)
        digest, count = files_sha256(module)
        out.append(
            {
                "name": name,
                "module": getattr(module, "__name__", str(module)),
                "package": package,
                "package_version": package_version,
                "files": count,
                "files_sha256": digest,
                "mechanism_ran": name == running,
            }
        )
    return out


def git_commit() -> dict | None:
    """dpspec's own git commit when it runs from a checkout (and whether tracked files were changed)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    top = os.path.dirname(here)
    if not os.path.exists(os.path.join(top, ".git")):
        return None
    try:
        commit = subprocess.run(["git", "-C", top, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", top, "diff", "--quiet", "HEAD", "--", "dpspec", "plugins", "grammar"],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "tracked_changes": dirty.returncode == 1}


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _spec_bytes_sha256(spec) -> str:
    """The spec file's bytes as read from disk (its text, UTF-8, when it has no file)."""
    if spec.path and os.path.isfile(spec.path):
        return _file_sha256(spec.path)
    return hashlib.sha256((spec.text or "").encode("utf-8")).hexdigest()


def _self_hash(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k != "certificate_sha256"}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()


def certificate(result, staged: str, signers=()) -> dict:
    """The certificate of a staged set (every file already written, the manifest last)."""

    spec = result.spec
    mech = result.mechanism
    source = {
        k: v for k, v in seed_policy(result.seed, result.mechanism).items() if k != "seed"
    }  # never the seed itself
    doc = versioned(
        "certificate",
        {
            "command": "compile",
            "spec": {
                "file": os.path.basename(spec.path) if spec.path else None,
                "title": spec.title,
                "bytes_sha256": _spec_bytes_sha256(spec),
                "text_sha256": result.spec_hash,
            },
            "dpspec": {"version": __version__, "git": git_commit(), "files_sha256": files_sha256(ir)[0]},
            "plugins": installed_plugins(mech.name),
            "mechanism": {
                "name": mech.name,
                "version": mech.version,
                "parameters": {
                    k: rational(v) if isinstance(v, (int, float, Fraction)) else rational(ir.to_jsonable(v))
                    for k, v in result.checked.params.items()
                },
            },
            "budgets": exact_budgets(result),
            "data": {os.path.basename(k.rstrip("/")): {"sha256": v} for k, v in sorted(result.data_hashes.items())},
            "random_source": source,
            "runs": result.runs,
            "engine": result.engine,
            "allowed_critical": list(result.allowed_critical),
            "findings": [{"rule": f.rule, "severity": f.severity} for f in result.findings],
            "started_at": result.started_at,
            "finished_at": result.finished_at,
            "sign_off": [{"name": name, "role": role} for name, role in signers],
            "files": {
                name: {
                    "sha256": _file_sha256(os.path.join(staged, name)),
                    "bytes": os.path.getsize(os.path.join(staged, name)),
                }
                for name in sorted(os.listdir(staged))
                if name != CERTIFICATE
            },
        },
    )
    doc["certificate_sha256"] = _self_hash(doc)
    return doc


def write_certificate(result, staged: str, signers=()) -> None:

    stage_text(
        staged,
        CERTIFICATE,
        json.dumps(certificate(result, staged, signers), indent=2, sort_keys=True, ensure_ascii=False) + "\n",
    )


def parse_signer(value: str) -> tuple[str, str]:
    """NAME:ROLE of `--sign`; a ValueError in words for an empty or unprintable part."""
    name, sep, role = value.partition(":")
    name, role = name.strip(), role.strip()
    if not sep:
        raise ValueError(f"expected NAME:ROLE (for example 'Ada Lovelace:Chief Privacy Officer'), got {value!r}")
    if not name:
        raise ValueError(f"the name before ':' is empty in {value!r}")
    if not role:
        raise ValueError(f"the role after ':' is empty in {value!r}")
    if any(not ch.isprintable() for ch in name + role) or len(name) > 200 or len(role) > 200:
        raise ValueError("a name or role must be printable text of at most 200 characters")
    return name, role


def _read(folder: str) -> dict:

    if not os.path.isdir(folder):
        raise CertificateError(f"{folder}: not a folder (give the output folder of a `dpspec compile`)")
    path = os.path.join(folder, CERTIFICATE)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise CertificateError(
            f"{folder}: no {CERTIFICATE} (a set written before certificates existed, or not a compile's output folder)"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CertificateError(f"{path}: unreadable certificate ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        raise CertificateError(f"{path}: not a dpspec certificate (no `files`)")
    refuse_newer("certificate", doc, path, CertificateError)
    return doc


def verify_certificate(folder: str, spec_path: str | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes) of a certified set: problems refuse it; notes say what differs harmlessly."""
    doc = _read(folder)
    problems, notes = [], []
    if doc.get("certificate_sha256") != _self_hash(doc):
        problems.append(f"{CERTIFICATE} was changed after it was written (its own hash does not match)")
    listed = doc["files"]
    present = {n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))} - {CERTIFICATE}
    problems += [f"missing: {n}" for n in sorted(set(listed) - present)]
    problems += [f"not certified: {n} (a file added to the set)" for n in sorted(present - set(listed))]
    for name in sorted(set(listed) & present):
        entry = listed[name]
        if not isinstance(entry, dict) or _file_sha256(os.path.join(folder, name)) != entry.get("sha256"):
            problems.append(f"changed: {name} (its SHA-256 is not the certified one)")
    installed = {p["name"]: p for p in installed_plugins()}
    for p in doc.get("plugins") or []:
        now = installed.get(p.get("name"))
        if now is None:
            problems.append(f"plugin '{p.get('name')}' ran but is not installed now")
        elif now["files_sha256"] != p.get("files_sha256"):
            problems.append(
                f"plugin '{p.get('name')}': its installed files differ from those that ran "
                f"(SHA-256 {now['files_sha256'][:12]}..., certified {str(p.get('files_sha256'))[:12]}...)"
            )
    version = (doc.get("dpspec") or {}).get("version")
    if version != __version__:
        notes.append(f"written by dpspec {version}; this is dpspec {__version__}")
    if spec_path is not None:
        with open(spec_path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        if digest != (doc.get("spec") or {}).get("bytes_sha256"):
            problems.append(f"{os.path.basename(spec_path)}: not the spec this set was compiled from (SHA-256 differs)")
    return problems, notes

"""The second Python that runs Tumult Analytics: finding it, and running the runner in it."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

from dpspec.api import MechanismError

ENV = "DPSPEC_TUMULT_PYTHON"
VENV = ".venv-tumult"
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
HOW = (
    f"create it with: python3.11 -m venv {VENV} && {VENV}/bin/pip install 'tmlt.analytics==0.21.*' "
    f"(beside the spec or a folder above it), or point {ENV} at a Python that has Tumult Analytics 0.21"
)


def find(base_dir: str) -> str:
    """$DPSPEC_TUMULT_PYTHON, else `.venv-tumult/bin/python` in the spec's folder or a folder above
    it, else in the current directory; a MechanismError saying how to make one when there is none.

    Why a second interpreter: Tumult Analytics 0.21 pins pandas < 2 and pyspark < 3.6, which dpspec's
    own environment (pandas >= 2.1, pyspark 4) cannot hold."""
    if os.environ.get(ENV):
        path = os.environ[ENV]
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise MechanismError(f"tumult: {ENV} is {path!r}, which is not an executable Python; {HOW}")
        return path
    folder = os.path.abspath(base_dir)
    tried = []
    while True:
        tried.append(folder)
        candidate = os.path.join(folder, VENV, "bin", "python")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    candidate = os.path.join(os.getcwd(), VENV, "bin", "python")
    if os.path.isfile(candidate):
        return candidate
    raise MechanismError(
        f"tumult: the tumult mechanism runs Tumult Analytics 0.21 in a second Python, and none was "
        f"found ({ENV} is not set and there is no {VENV} in {tried[0]}, the folders above it or "
        f"the current directory); {HOW}"
    )


def run(python: str, request: dict, frame, timeout: float | None = None) -> dict:
    """Write the table to a temporary Parquet file (never beside the inputs), run the runner in
    `python` on the request, and return its answer; a MechanismError when the runner fails."""
    with tempfile.TemporaryDirectory(prefix="dpspec-tumult-") as tmp:
        data = os.path.join(tmp, "table.parquet")
        frame.to_parquet(data, index=False)
        req_path, ans_path = os.path.join(tmp, "request.json"), os.path.join(tmp, "answer.json")
        with open(req_path, "w") as f:
            json.dump({**request, "data": data}, f)
        env = {**os.environ, "PYSPARK_PYTHON": python}
        env.pop("PYTHONPATH", None)  # dpspec's own path must not shadow the Tumult interpreter's packages
        try:
            proc = subprocess.run(
                [python, RUNNER, req_path, ans_path],
                capture_output=True,
                text=True,
                env=env,
                check=False,
                timeout=timeout,
                cwd=tmp,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MechanismError(f"tumult: could not run {python}: {exc}") from None
        if not os.path.isfile(ans_path):
            tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-8:])
            raise MechanismError(
                f"tumult: the Tumult interpreter {python} exited with status {proc.returncode} and no "
                f"answer; {HOW}\n{tail}"
            )
        with open(ans_path) as f:
            answer = json.load(f)
    if not answer.get("ok"):
        kind, message = answer.get("kind"), answer.get("message", "")
        if kind == "install":
            raise MechanismError(f"tumult: {python} cannot run Tumult Analytics: {message}; {HOW}")
        if kind == "internal":
            raise MechanismError(
                f"tumult: Tumult Analytics failed in {python}: {message}\n{answer.get('traceback', '')}"
            )
        raise MechanismError(f"tumult: {message}")
    return answer

"""A small LSP client over stdio, as an editor speaks it: JSON-RPC messages framed by
Content-Length headers, requests matched to responses by id, notifications queued.
Used by tests/test_lsp.py and benchmarks/bench_lsp.py."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path


def uri(path) -> str:
    return Path(os.path.abspath(path)).as_uri()


class Client:
    def __init__(self, argv=None, env=None, cwd=None):
        argv = argv or [os.path.join(os.path.dirname(sys.executable), "dpspec"), "lsp"]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd
        )
        self.responses: dict = {}
        self.notifications: queue.Queue = queue.Queue()
        self.lock = threading.Condition()
        self.next_id = 0
        self.stderr = b""
        self.corrupted: list[bytes] = []  # lines on stdout that are not protocol headers
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    # ---- framing ----
    def _drain_stderr(self):
        self.stderr = self.proc.stderr.read()

    def _read(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    with self.lock:
                        self.lock.notify_all()
                    return
                line = line.strip()
                if not line:
                    break
                name, colon, value = line.decode("ascii", "replace").partition(":")
                if not colon or not name or " " in name:  # not a header: the stream is corrupt
                    self.corrupted.append(line)
                elif name.lower() == "content-length":
                    length = int(value)
            message = json.loads(out.read(length))
            if "id" in message and "method" not in message:
                with self.lock:
                    self.responses[message["id"]] = message
                    self.lock.notify_all()
            elif "method" in message and "id" in message:  # a request from the server: answer null
                self.send_raw({"jsonrpc": "2.0", "id": message["id"], "result": None})
            else:
                self.notifications.put(message)

    def send_raw(self, message) -> None:
        body = message if isinstance(message, bytes) else json.dumps(message).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    # ---- requests and notifications ----
    def request_async(self, method: str, params=None) -> int:
        self.next_id += 1
        self.send_raw({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def wait(self, ident, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        with self.lock:
            while ident not in self.responses:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(f"no response to request {ident}; server exit {self.proc.poll()}")
                self.lock.wait(left)
            return self.responses.pop(ident)

    def request(self, method: str, params=None, timeout: float = 20.0) -> dict:
        return self.wait(self.request_async(method, params), timeout)

    def notify(self, method: str, params=None) -> None:
        self.send_raw({"jsonrpc": "2.0", "method": method, "params": params})

    def notification(self, method: str, timeout: float = 20.0, where=lambda m: True) -> dict:
        """The next notification `method` that satisfies `where` (others are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.notifications.get(timeout=max(deadline - time.monotonic(), 0.001))
            if message.get("method") == method and where(message["params"]):
                return message["params"]

    def diagnostics(self, doc_uri: str, version=None, timeout: float = 20.0) -> list:
        return self.notification(
            "textDocument/publishDiagnostics",
            timeout,
            lambda p: p["uri"] == doc_uri and (version is None or p.get("version") == version),
        )["diagnostics"]

    # ---- the editor's life cycle ----
    def initialize(self, root: str) -> dict:
        result = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": uri(root),
                "capabilities": {
                    "textDocument": {
                        "hover": {"contentFormat": ["markdown", "plaintext"]},
                        "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
                    }
                },
            },
        )
        self.notify("initialized", {})
        return result

    def open(self, doc_uri: str, text: str, version: int = 1) -> None:
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": doc_uri, "languageId": "dps", "version": version, "text": text}},
        )

    def change(self, doc_uri: str, text: str, version: int) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": doc_uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def edit(self, doc_uri: str, start: tuple[int, int], end: tuple[int, int], text: str, version: int) -> None:
        """An incremental change: replace the range [start, end) (line, character) by `text`."""
        rng = {"start": {"line": start[0], "character": start[1]}, "end": {"line": end[0], "character": end[1]}}
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": doc_uri, "version": version}, "contentChanges": [{"range": rng, "text": text}]},
        )

    def close(self, timeout: float = 20.0) -> int:
        """shutdown, exit; the server's exit status."""
        self.request("shutdown")
        self.notify("exit")
        try:
            return self.proc.wait(timeout)
        finally:
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

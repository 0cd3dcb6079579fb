"""The language server never goes deaf: a malformed Content-Length, a message without one, or a
frame of 10^12 bytes is answered with JSON-RPC's parse error, and the next request is answered
as usual; a bare-CR document is read by its lines."""

from __future__ import annotations

import json
import os

import pytest

from tests.lsp_client import Client, uri

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RR = os.path.join(ROOT, "specs", "acs_ma_vision_rr.dps")


@pytest.fixture
def client():
    c = Client(cwd=ROOT)
    c.initialize(ROOT)
    try:
        yield c
    finally:
        c.kill()


def _write(client, raw: bytes) -> None:
    client.proc.stdin.write(raw)
    client.proc.stdin.flush()


def _parse_error(client) -> dict:
    message = client.wait(None, timeout=20)
    assert message["error"]["code"] == -32700, message
    return message


BODY = json.dumps({"jsonrpc": "2.0", "method": "$/nothing", "params": {}}).encode()


@pytest.mark.slow  # starts a language server per frame
@pytest.mark.parametrize(
    "frame",
    [
        b"Content-Length: abc\r\n\r\n" + BODY,  # not a number
        b"Content-Length: -5\r\n\r\n" + BODY,
        b"Content-Type: application/json\r\n\r\n" + BODY,  # no Content-Length at all
        BODY,  # no header
        b"Content-Length: 1000000000000\r\n\r\n" + BODY,  # 10^12 bytes announced: refused, not allocated
    ],
)
def test_a_malformed_frame_gets_a_parse_error_and_the_server_keeps_answering(client, frame):
    _write(client, frame)
    assert "Parse error" in _parse_error(client)["error"]["message"]
    assert client.request("shutdown", timeout=20)["result"] is None  # resynchronised: the next frame is read
    client.notify("exit")
    assert client.proc.wait(20) == 0
    assert b"MemoryError" not in client.stderr


def test_a_bare_cr_document_gets_its_diagnostic_on_its_line(client):
    text = open(RR, encoding="utf-8").read().replace("unit persons : hamming", "unit persons : hamming ]")
    line = text[: text.index("unit persons")].count("\n")
    doc = uri(os.path.join(ROOT, "specs", "lsp_framing_cr.dps"))
    client.open(doc, text.replace("\n", "\r"))
    diagnostics = client.diagnostics(doc, 1)
    assert [d["range"]["start"]["line"] for d in diagnostics] == [line], diagnostics

"""The language server's framing: `Content-Length` frames read so that no input makes it deaf.

pygls' own loop waits for a `Content-Length` line that matches exactly; after one malformed
header, or a message sent without one, every later header is read glued to the previous body and
never matches again, and a `Content-Length` of 10^12 is read into memory. Here each malformed
frame is answered at once with JSON-RPC's parse error (id null) and the reader resynchronises
at the next `Content-Length:` it sees; a frame above MAX_FRAME bytes is refused the same way,
without reading it into memory. Reads take what the pipe holds (never wait for a newline), so a
headerless message is answered as soon as it arrives.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import threading

from dpspec.lazy import LazyModule

# an optional extra's library, imported on first use (MissingExtra names the extra)
_exceptions = LazyModule("pygls.exceptions", "_exceptions", globals(), extra="lsp", purpose="dpspec lsp")
_io_ = LazyModule("pygls.io_", "_io_", globals(), extra="lsp", purpose="dpspec lsp")

log = logging.getLogger("dpspec.lsp")

MAX_FRAME = 64 << 20  # a spec is at most a few MB; a frame larger than this is not an editor's
MAX_HEADER = 8192
_MARK = b"content-length:"
_NAME = re.compile(rb"[A-Za-z][A-Za-z0-9-]*")


class FrameProblem(str):
    """Why the bytes just read are not a frame (answered with a parse error, then skipped)."""


class Frames:
    """Frames from a binary stream: `next()` is a body (bytes), a FrameProblem, or None at the end."""

    def __init__(self, stream):
        self.stream = stream
        try:
            self.fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self.fd = None
        self.buf = bytearray()
        self.eof = False
        self.resync = False  # skipping to the next Content-Length after a bad frame

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = (
            os.read(self.fd, 1 << 16)
            if self.fd is not None
            else (self.stream.read1(1 << 16) if hasattr(self.stream, "read1") else self.stream.read(1))
        )
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _skip_to_mark(self) -> bool:
        """Drop bytes up to the next `Content-Length:`; False when more bytes are needed."""
        at = self.buf.lower().find(_MARK)
        if at < 0:
            del self.buf[: max(len(self.buf) - len(_MARK) + 1, 0)]
            return False
        del self.buf[:at]
        self.resync = False
        return True

    def _bad(self, why: str) -> FrameProblem:
        self.resync = True
        log.warning("dpspec lsp: %s; skipping to the next Content-Length header", why)
        return FrameProblem(why)

    def next(self):
        while True:
            if self.resync and not self._skip_to_mark():
                if not self._more():
                    return None
                continue
            while self.buf[:1] in (b"\r", b"\n", b" ", b"\t"):
                del self.buf[:1]
            if not self.buf:
                if not self._more():
                    return None
                continue
            name = _NAME.match(self.buf)
            if name is None or (name.end() < len(self.buf) and self.buf[name.end()] != ord(":")):
                return self._bad("a message without a Content-Length header")
            end, gap = self.buf.find(b"\r\n\r\n"), 4
            if end < 0:
                end, gap = self.buf.find(b"\n\n"), 2
            if end < 0:
                if len(self.buf) > MAX_HEADER:
                    return self._bad(f"a header of more than {MAX_HEADER} bytes")
                if not self._more():
                    return None
                continue
            header = bytes(self.buf[:end])
            del self.buf[: end + gap]
            length = None
            for line in header.splitlines():
                key, colon, value = line.partition(b":")
                if colon and key.strip().lower() == b"content-length":
                    value = value.strip()
                    length = int(value) if value.isdigit() and len(value) <= 20 else -1
            if length is None:
                return self._bad("a header without Content-Length")
            if length < 0:
                return self._bad(f"a malformed Content-Length ({header[:80]!r})")
            if length > MAX_FRAME:
                return self._bad(f"a frame of {length:,} bytes, above the limit of {MAX_FRAME:,}")
            while len(self.buf) < length:
                if not self._more():
                    return None
            body = bytes(self.buf[:length])
            del self.buf[:length]
            return body


def serve(server, stdin, stdout) -> None:
    """Run `server` (a pygls LanguageServer) over these binary streams until exit or end of input."""
    server._stop_event = threading.Event()
    server.protocol.set_writer(_io_.StdoutWriter(stdout))
    frames = Frames(stdin)
    code = 0

    async def loop():
        running = asyncio.get_running_loop()
        while not server._stop_event.is_set():
            frame = await running.run_in_executor(None, frames.next)
            if frame is None:
                log.info("dpspec lsp: the input ended")
                return
            if isinstance(frame, FrameProblem):
                server.protocol._send_data(
                    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {frame}"}}
                )
                continue
            try:
                server.protocol.handle_message(json.loads(frame, object_hook=server.protocol.structure_message))
            except (SystemExit, KeyboardInterrupt):
                raise
            except Exception as exc:  # noqa: BLE001 - one bad message never stops the server
                log.exception("dpspec lsp: unable to handle a message")
                server.report_server_error(exc, _exceptions.JsonRpcException)

    try:
        asyncio.run(loop())
    except BrokenPipeError:
        log.error("dpspec lsp: the connection to the client is lost; shutting down")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    if code:
        sys.exit(code)

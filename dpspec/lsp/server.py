"""The LSP wiring: pygls features that call the analysis modules and turn their answers into
lsprotocol types. Every handler is guarded: a failure inside dpspec or a plugin answers with an
empty result (and a log message), never a dead server."""

from __future__ import annotations

import functools
import json
import logging
import sys
from importlib.metadata import version

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path, from_fs_path

from dpspec import line_ends
from dpspec.lsp import complete as completion, document, hover as hovering, navigate, warm, text as tx
from dpspec.language.formatter import format_spec
from dpspec.lsp.framing import serve

log = logging.getLogger("dpspec.lsp")

SEVERITY = {
    "error": lsp.DiagnosticSeverity.Error,
    "warning": lsp.DiagnosticSeverity.Warning,
    "info": lsp.DiagnosticSeverity.Information,
}
ITEM_KIND = {
    "keyword": lsp.CompletionItemKind.Keyword,
    "mechanism": lsp.CompletionItemKind.Module,
    "parameter": lsp.CompletionItemKind.Property,
    "table": lsp.CompletionItemKind.Struct,
    "column": lsp.CompletionItemKind.Field,
    "value": lsp.CompletionItemKind.EnumMember,
}
SYMBOL_KIND = {
    "section": lsp.SymbolKind.Namespace,
    "table": lsp.SymbolKind.Struct,
    "column": lsp.SymbolKind.Field,
    "parameter": lsp.SymbolKind.Property,
}


class Protocol(LanguageServerProtocol):
    """pygls drops a request whose params do not fit the method's type; answer it with the
    JSON-RPC error instead, so the editor is not left waiting."""

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                self._send_response(data["id"], error=exc.to_response_error())
            raise


class DpsServer(LanguageServer):
    """Keeps each open document's latest analysis (and the last spec that parsed, for names)."""

    def __init__(self):
        super().__init__(
            "dpspec",
            version("dpspec"),
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            protocol_cls=Protocol,
        )
        self.analyses: dict[str, document.Analysis] = {}
        self.hovers: dict[tuple, lsp.Hover | None] = {}  # (uri, line, character) -> answer, for the current text

    def report_server_error(self, error: Exception, source) -> None:
        """A message that is not JSON gets JSON-RPC's parse error (id null), then pygls' notice."""
        if isinstance(error, json.JSONDecodeError) or isinstance(error.__cause__, json.JSONDecodeError):
            self.protocol._send_data(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {error}"}}
            )
        super().report_server_error(error, source)

    def analysis(self, uri: str) -> document.Analysis:
        doc = self.workspace.get_text_document(uri)
        known = self.analyses.get(uri)
        if known is not None and known.text == line_ends.normal(doc.source):
            return known
        return self.refresh(uri)

    def refresh(self, uri: str) -> document.Analysis:
        doc = self.workspace.get_text_document(uri)
        previous = self.analyses.get(uri)
        path = to_fs_path(uri) if uri.startswith("file:") else None
        result = document.analyse(line_ends.normal(doc.source), path, previous.good if previous else None)
        self.analyses[uri] = result
        self.hovers = {key: answer for key, answer in self.hovers.items() if key[0] != uri}
        return result


class _Lines:
    """A document's lines split as the parser splits them (at newlines only), with the codec the
    client negotiated: the analysis counts code points, LSP clients UTF-16 units by default."""

    def __init__(self, ls: DpsServer, text: str):
        self.codec, self.lines = ls.workspace.position_codec, text.split("\n")


def _range(doc: _Lines | None, line: int, start: int, end_line: int, end: int) -> lsp.Range:
    if doc is None:
        return lsp.Range(lsp.Position(line, start), lsp.Position(end_line, end))
    to_client = doc.codec.position_to_client_units
    return lsp.Range(to_client(doc.lines, lsp.Position(line, start)), to_client(doc.lines, lsp.Position(end_line, end)))


def _position(ls: DpsServer, text: str, params) -> tuple[int, int]:
    """The request's position in code points."""
    pos = ls.workspace.position_codec.position_from_client_units(text.split("\n"), params.position)
    return pos.line, pos.character


def _diagnostic(doc, p: document.Problem) -> lsp.Diagnostic:
    message = p.message + (f"\nhint: {p.hint}" if p.hint else "")
    return lsp.Diagnostic(
        range=_range(doc, p.line, p.start, p.line, max(p.end, p.start)),
        message=message,
        severity=SEVERITY.get(p.severity, lsp.DiagnosticSeverity.Error),
        source="dpspec",
        data={"hint": p.hint} if p.hint else None,
    )


def guarded(empty):
    """Answer `empty` (and log why) if the handler fails: the server outlives any bug."""

    def wrap(handler):
        @functools.wraps(handler)
        def run(ls, params):
            try:
                return handler(ls, params)
            except Exception:
                log.exception("dpspec lsp: %s failed", handler.__name__)
                return empty

        return run

    return wrap


server = DpsServer()


def publish(ls: DpsServer, uri: str, version: int | None = None) -> None:
    result = ls.refresh(uri)
    doc = _Lines(ls, result.text)
    ls.text_document_publish_diagnostics(
        lsp.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=[_diagnostic(doc, p) for p in result.problems]
        )
    )


@server.feature(lsp.INITIALIZED)
@guarded(None)
def initialized(ls: DpsServer, params: lsp.InitializedParams):
    warm.start()


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
@guarded(None)
def did_open(ls: DpsServer, params: lsp.DidOpenTextDocumentParams):
    publish(ls, params.text_document.uri, params.text_document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
@guarded(None)
def did_change(ls: DpsServer, params: lsp.DidChangeTextDocumentParams):
    publish(ls, params.text_document.uri, params.text_document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
@guarded(None)
def did_save(ls: DpsServer, params: lsp.DidSaveTextDocumentParams):
    publish(ls, params.text_document.uri)  # included specs may have changed on disk


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
@guarded(None)
def did_close(ls: DpsServer, params: lsp.DidCloseTextDocumentParams):
    ls.analyses.pop(params.text_document.uri, None)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
@guarded(None)
def hover(ls: DpsServer, params: lsp.HoverParams):
    a = ls.analysis(params.text_document.uri)
    line, character = _position(ls, a.text, params)
    key = (params.text_document.uri, line, character)
    if key not in ls.hovers:  # an editor asks again as the mouse rests: once per document version
        ls.hovers[key] = _hover(ls, a, line, character)
    return ls.hovers[key]


def _hover(ls: DpsServer, a: document.Analysis, line: int, character: int) -> lsp.Hover | None:
    markdown = hovering.hover(a.text, a.spec, line, character, a.path)
    if not markdown:
        return None
    hit = tx.word_at(a.text, line, character)
    rng = _range(_Lines(ls, a.text), line, hit[1], line, hit[2]) if hit else None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=markdown), range=rng)


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=[" ", ":", ","]))
@guarded(lsp.CompletionList(is_incomplete=False, items=[]))
def complete(ls: DpsServer, params: lsp.CompletionParams):
    a = ls.analysis(params.text_document.uri)
    items = completion.complete(a.text, a.spec, *_position(ls, a.text, params))
    return lsp.CompletionList(
        is_incomplete=False,
        items=[
            lsp.CompletionItem(
                label=i.label,
                kind=ITEM_KIND.get(i.kind),
                detail=i.detail or None,
                documentation=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=i.doc) if i.doc else None,
            )
            for i in items
        ],
    )


def _location(uri: str, doc: _Lines, place: navigate.Place) -> lsp.Location:
    if place.path:  # the start of another file
        return lsp.Location(uri=from_fs_path(place.path), range=_range(None, 0, 0, 0, 0))
    return lsp.Location(uri=uri, range=_range(doc, place.line, place.start, place.line, place.end))


@server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
@guarded([])
def definition(ls: DpsServer, params: lsp.DefinitionParams):
    a = ls.analysis(params.text_document.uri)
    places = navigate.definition(a.text, a.spec, a.path, *_position(ls, a.text, params))
    return [_location(params.text_document.uri, _Lines(ls, a.text), p) for p in places]


def _symbol(doc, s: navigate.Symbol) -> lsp.DocumentSymbol:
    sel = s.selection
    return lsp.DocumentSymbol(
        name=s.name,
        kind=SYMBOL_KIND.get(s.kind, lsp.SymbolKind.Object),
        detail=s.detail or None,
        range=_range(doc, *s.range),
        selection_range=_range(doc, sel.line, sel.start, sel.line, sel.end),
        children=[_symbol(doc, c) for c in s.children],
    )


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@guarded([])
def symbols(ls: DpsServer, params: lsp.DocumentSymbolParams):
    a = ls.analysis(params.text_document.uri)
    doc = _Lines(ls, a.text)
    return [_symbol(doc, s) for s in navigate.symbols(a.text, a.spec)]


@server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
@guarded([])
def formatting(ls: DpsServer, params: lsp.DocumentFormattingParams):
    """`dpspec fmt` of the whole document; nothing while it does not parse."""

    a = ls.analysis(params.text_document.uri)
    if not a.parsed or a.spec is None:
        return []
    formatted = format_spec(a.spec)
    if formatted == a.text:
        return []
    lines = a.text.split("\n")
    return [lsp.TextEdit(range=_range(_Lines(ls, a.text), 0, 0, len(lines) - 1, len(lines[-1])), new_text=formatted)]


def main() -> None:
    """Serve over stdin/stdout until the client says exit (or its pipe closes)."""
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")  # to stderr: stdout is the protocol
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a plugin's stray print() must not corrupt the protocol's stream

    serve(server, sys.stdin.buffer, protocol_out)  # pygls' start_io goes deaf after one malformed frame

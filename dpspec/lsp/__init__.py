"""`dpspec lsp`: a language server for .dps files (pygls on lsprotocol, over stdio).

Everything it says comes from dpspec itself: diagnostics from the parser and checker, hovers from
`dpspec show`'s plain-language answers and the plugins' parameter schemas, formatting from
`dpspec fmt`. The analysis modules (`text`, `document`, `hover`, `complete`, `navigate`) are
plain functions of a document's text, so they are tested without a client; `server` wires them
to LSP and is the only module that imports pygls.
"""

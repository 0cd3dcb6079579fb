// The dpspec extension: the .dps grammar comes from package.json; this starts `dpspec lsp` (the
// language server shipped with dpspec) over stdio through vscode-languageclient.
"use strict";
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("dpspec");
  const command = config.get("server.command", "dpspec");
  const args = config.get("server.args", ["lsp"]);
  const serverOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "dps" },
      { scheme: "untitled", language: "dps" },
    ],
  };
  client = new LanguageClient("dpspec", "dpspec language server", serverOptions, clientOptions);
  context.subscriptions.push(client);
  return client.start().catch((err) => {
    vscode.window.showErrorMessage(
      `dpspec: could not start '${command} ${args.join(" ")}' (${err.message}); ` +
        "install dpspec with the lsp extra (pip install 'dpspec[lsp]') or set dpspec.server.command."
    );
  });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };

-- Drives editors/nvim as a person's Neovim does, headless: open a .dps file, wait for the
-- server's diagnostics, hover a budget line, format the buffer; writes what it saw as JSON to
-- $DPSPEC_EDITOR_OUT and quits. Run by tests/test_neovim_lsp.py:
--   nvim --headless --clean -u tests/editors/nvim_driver.lua FILE.dps
local out = {}
local function finish()
  local fh = io.open(os.getenv("DPSPEC_EDITOR_OUT"), "w")
  fh:write(vim.fn.json_encode(out))
  fh:close()
  vim.cmd("qall!")
end

local function clients(buf)
  if vim.lsp.get_clients then return vim.lsp.get_clients({ bufnr = buf }) end -- 0.10 and later
  local found = {}
  for _, c in pairs(vim.lsp.buf_get_clients(buf)) do table.insert(found, c) end
  return found
end

local ok, err = pcall(function()
  vim.opt.runtimepath:prepend(os.getenv("DPSPEC_NVIM_PLUGIN"))
  vim.g.dpspec_lsp_cmd = { os.getenv("DPSPEC_LSP_CMD"), "lsp" }
  vim.cmd("filetype plugin on")
  vim.cmd("edit " .. vim.fn.fnameescape(vim.fn.argv(0)))
  local buf = vim.api.nvim_get_current_buf()
  out.filetype = vim.bo[buf].filetype
  out.commentstring = vim.bo[buf].commentstring
  out.api = vim.lsp.start and "vim.lsp.start" or "vim.lsp.start_client"
  out.version = tostring(vim.version().major) .. "." .. vim.version().minor .. "." .. vim.version().patch

  out.attached = vim.wait(20000, function() return #clients(buf) > 0 end, 50)
  if not out.attached then return end
  local client = clients(buf)[1]

  vim.wait(20000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
  out.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(out.diagnostics, { line = d.lnum, col = d.col, message = d.message, severity = d.severity })
  end

  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local budget_line
  for i, text in ipairs(lines) do
    if text:match("^budget") then budget_line = i - 1 break end
  end
  local started = vim.loop.hrtime()
  local hover = vim.lsp.buf_request_sync(buf, "textDocument/hover",
    { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = budget_line, character = 2 } }, 20000)
  out.hover_ms = (vim.loop.hrtime() - started) / 1e6
  for _, reply in pairs(hover or {}) do
    if reply.result then out.hover = reply.result.contents.value end
    if reply.err then out.hover_error = vim.inspect(reply.err) end
  end

  local edits = vim.lsp.buf_request_sync(buf, "textDocument/formatting",
    { textDocument = { uri = vim.uri_from_bufnr(buf) }, options = { tabSize = 2, insertSpaces = true } }, 20000)
  for _, reply in pairs(edits or {}) do
    if reply.result then vim.lsp.util.apply_text_edits(reply.result, buf, client.offset_encoding) end
  end
  out.formatted = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
end)
if not ok then out.error = tostring(err) end
finish()

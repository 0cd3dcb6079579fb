-- dpspec's language server for .dps buffers, on Neovim 0.7 and later.
--
-- Neovim 0.8 added vim.lsp.start (which reuses a running client for the same root); on 0.7
-- the client is started once per root with vim.lsp.start_client and each buffer attached with
-- vim.lsp.buf_attach_client. The command is, in order: setup({ cmd = ... }), the global
-- g:dpspec_lsp_cmd (a list, or a string naming the dpspec executable), then "dpspec lsp".
local M = { config = {}, clients = {} }

function M.setup(opts)
  M.config = vim.tbl_extend("force", M.config, opts or {})
end

local function command()
  local cmd = M.config.cmd or vim.g.dpspec_lsp_cmd or { "dpspec", "lsp" }
  if type(cmd) == "string" then
    cmd = { cmd, "lsp" }
  end
  return cmd
end

local function root_of(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  local dir = name ~= "" and vim.fn.fnamemodify(name, ":p:h") or vim.fn.getcwd()
  local git = vim.fn.finddir(".git", dir .. ";")
  if git ~= "" then
    return vim.fn.fnamemodify(git, ":p:h:h")
  end
  git = vim.fn.findfile(".git", dir .. ";") -- a worktree or a submodule has a .git file
  return git ~= "" and vim.fn.fnamemodify(git, ":p:h") or dir
end

function M.attach(buf)
  local config = { name = "dpspec", cmd = command(), root_dir = root_of(buf) }
  if vim.lsp.start then -- Neovim 0.8 and later
    return vim.api.nvim_buf_call(buf, function() return vim.lsp.start(config) end)
  end
  local id = M.clients[config.root_dir]
  if id == nil or vim.lsp.get_client_by_id(id) == nil or vim.lsp.client_is_stopped(id) then
    id = vim.lsp.start_client(config)
    M.clients[config.root_dir] = id
  end
  if id ~= nil then
    vim.lsp.buf_attach_client(buf, id)
  end
  return id
end

return M

-- A .dps buffer: '#' comments, and the dpspec language server attached.
vim.bo.commentstring = "# %s"
vim.bo.comments = ":#"
require("dpspec").attach(vim.api.nvim_get_current_buf())

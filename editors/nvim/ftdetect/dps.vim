" .dps files are dpspec specifications. Set (not setf): Neovim 0.7's filetype.vim would
" otherwise give them 'conf' for their '#' comments, and filetype.lua (0.8+) knows no 'dps'.
autocmd BufRead,BufNewFile *.dps set filetype=dps

;;; dps-mode.el --- Major mode for dpspec's .dps specification files -*- lexical-binding: t -*-

;; Works with Emacs 28 and Debian's elpa-eglot package (Eglot 1.9), and with the Eglot built
;; into Emacs 29 and later.  Put this file on `load-path' and (require 'dps-mode).  The server
;; command is `dps-mode-server-command'; give the full path of a virtual environment's
;; `dpspec' there.

;;; Code:

(defgroup dps nil
  "Editing dpspec specifications."
  :group 'languages)

(defcustom dps-mode-server-command '("dpspec" "lsp")
  "The command that starts dpspec's language server."
  :type '(repeat string)
  :group 'dps)

(defconst dps-mode--keywords
  '("spec" "program" "language" "domain" "stage" "geography" "table" "unit" "data" "from"
    "invariants" "public" "pufferfish" "premetric" "mechanism" "budget" "release" "tuned"
    "notes" "include" "count" "by" "output" "in" "values" "keys" "released" "with" "holds")
  "Words that open a section or a clause of a .dps file.")

(defvar dps-mode-syntax-table
  (let ((table (make-syntax-table)))
    (modify-syntax-entry ?# "<" table)
    (modify-syntax-entry ?\n ">" table)
    (modify-syntax-entry ?_ "_" table)
    (modify-syntax-entry ?\" "\"" table)
    table)
  "Syntax of .dps files: `#' comments to the end of the line, double-quoted strings.")

;;;###autoload
(define-derived-mode dps-mode prog-mode "dps"
  "Major mode for dpspec's .dps specification files."
  :syntax-table dps-mode-syntax-table
  (setq-local comment-start "# ")
  (setq-local comment-start-skip "#+\\s-*")
  (setq-local font-lock-defaults
              `(((,(regexp-opt dps-mode--keywords 'words) . font-lock-keyword-face)))))

;;;###autoload
(add-to-list 'auto-mode-alist '("\\.dps\\'" . dps-mode))

(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs `(dps-mode . ,(lambda (&rest _) dps-mode-server-command))))

(provide 'dps-mode)
;;; dps-mode.el ends here

;;; emacs_driver.el --- drives editors/emacs/dps-mode.el with Eglot, in batch -*- lexical-binding: t -*-
;; Open a .dps file, connect Eglot to the dpspec server, wait for a diagnostic, hover a budget
;; line, format the buffer; write what was seen as JSON to $DPSPEC_EDITOR_OUT.  Run by
;; tests/test_emacs_lsp.py:  emacs --batch -l tests/editors/emacs_driver.el FILE.dps
(require 'json)
(require 'package)
(package-initialize)  ; Debian's elpa-eglot lives in the system's package directory
(add-to-list 'load-path (getenv "DPSPEC_EMACS_PLUGIN"))
(require 'dps-mode)
(require 'eglot)
(setq dps-mode-server-command (list (getenv "DPSPEC_LSP_CMD") "lsp"))

(defvar driver-seen nil)
(defun driver-note (key value) (push (cons key value) driver-seen))
(defun driver-wait (predicate seconds)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (funcall predicate)))

(condition-case err
    (progn
      (find-file (car command-line-args-left))
      (setq command-line-args-left nil)
      (driver-note 'mode (symbol-name major-mode))
      (driver-note 'emacs emacs-version)
      (driver-note 'eglot (let ((desc (cadr (assq 'eglot package-alist))))
                            (if desc (package-version-join (package-desc-version desc)) "built-in")))
      (call-interactively #'eglot)
      (driver-note 'connected (and (driver-wait #'eglot-current-server 20) t))
      (driver-wait (lambda () (progn (flymake-start) (flymake-diagnostics))) 20)
      (driver-note 'diagnostics (vconcat (mapcar (lambda (d) (list (cons 'line (1- (line-number-at-pos (flymake-diagnostic-beg d))))
                                                                    (cons 'message (flymake-diagnostic-text d))))
                                                 (flymake-diagnostics))))
      (goto-char (point-min))
      (re-search-forward "^budget")
      (beginning-of-line)
      (forward-char 2)
      (let ((hover (jsonrpc-request (eglot-current-server) :textDocument/hover (eglot--TextDocumentPositionParams))))
        (driver-note 'hover (plist-get (plist-get hover :contents) :value)))
      (eglot-format-buffer)
      (driver-note 'formatted (buffer-substring-no-properties (point-min) (point-max))))
  (error (driver-note 'error (format "%S" err))))

(with-temp-file (getenv "DPSPEC_EDITOR_OUT")
  (insert (json-encode driver-seen)))
(kill-emacs 0)

"""All-or-nothing output sets: a release and its reports appear together or not at all.

A compile writes its whole set into a fresh hidden folder beside the target and then swaps it in
with one atomic exchange of the two folders (`renameat2(RENAME_EXCHANGE)` on Linux; two renames
elsewhere, undone on the next run if interrupted between them). So after any interruption, even
SIGKILL, the target holds the complete old set or the complete new one, never a mix; the
leftovers are removed by the next compile into that target. A lock file beside the target
(`flock`, released by the kernel when the process dies) refuses a second concurrent compile; the
run removes it as it ends.

Everything beside and in the target is done relative to ONE opened handle of the target's parent
folder (`os.open(..., O_DIRECTORY | O_NOFOLLOW)`, then `mkdir`, `open` and `rename` with
`dir_fd=`), and the staged set is written through a handle of its own folder, so a link in the
`-o` path that is changed during the run cannot redirect any write: the set lands in the folder
the input guard checked, or nowhere.

Parts of a table that other processes write (a streamed table's `write_parts`: the engine's
workers format their own rows) go to a scratch folder made beside the staged one through the same
parent handle (`scratch_beside`), never into the staged folder, and are joined into the staged
file by the driver; the scratch folder is removed when the set is written or abandoned (and, after
a SIGKILL, by the next compile into that target).

`dpspec audit -o` and `dpspec infer -o` write their reports the same way; each manifest names
the command that wrote it (`command`, "compile" when absent), and a folder holding one command's
set is never replaced by another command's.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import secrets
import shutil
import stat as statmod
from contextlib import contextmanager

from dpspec.publish.atomic import _umask
from dpspec.check.data import file_sha256 as sha256_file
from dpspec.errors import DpspecError
from dpspec.schemas import versioned

MANIFEST = "manifest.json"
CERTIFICATE = "certificate.json"  # a compile's, written after the manifest it covers (`dpspec.publish.certificate`)
_NEW, _OLD, _LOCK, _PARTS = ".dpspec-new-", ".dpspec-old-", ".dpspec-lock", ".dpspec-parts-"
_held: dict[str, int] = {}  # target -> how many nested holders in this process
_staging: dict[
    str, tuple
] = {}  # a staged path `output_set` yielded -> (its parent's handle and path, the target's name)


class OutputSetError(DpspecError):
    """The target folder cannot take an output set (busy, not a folder, foreign files)."""


def _target(outdir: str) -> str:
    return os.path.realpath(outdir)


def _sibling(target: str, kind: str) -> str:
    return os.path.join(os.path.dirname(target), "." + os.path.basename(target) + kind)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _fd_path(fd: int) -> str | None:
    """The folder an open handle is (Linux's /proc), None where the system cannot say."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _open_folder(path: str, outdir: str, dir_fd: int | None = None) -> int:
    """A handle of the folder `path` (never through a link in its last part); refused if a link
    earlier in the path led it elsewhere than `path` between resolving and opening."""
    try:
        fd = os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise OutputSetError(f"error: cannot open the folder of the output path {outdir}: {exc.strerror}") from None
    real = _fd_path(fd) if dir_fd is None else None
    if real is not None and real != path:
        os.close(fd)
        raise OutputSetError(
            f"error: the output path {outdir} led to {path} and then to {real} (a link in it changed "
            "during the run); nothing was published. Name a folder whose path holds no link that "
            "others can change"
        )
    return fd


def _staged_path(fd: int, fallback: str) -> str:
    """A path that writes through the staged folder's handle (/proc/self/fd/N), wherever its
    name's folders may have been moved or relinked since; the plain path where there is no /proc."""
    via = f"/proc/self/fd/{fd}"
    return via if _fd_path(fd) is not None and os.path.isdir(via) else fallback


@contextmanager
def target_lock(outdir: str):
    """Hold the target's lock (re-entrant within this process); refuse if another process holds it."""
    target = _target(outdir)
    if target in _held:
        _held[target] += 1
        try:
            yield
        finally:
            _held[target] -= 1
        return
    if os.path.lexists(target) and not os.path.isdir(target):  # before a lock file appears beside, say, /dev/null
        raise OutputSetError(f"error: the output path {outdir} exists and is not a folder")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    parent = _open_folder(os.path.dirname(target), outdir)
    lock = os.path.basename(_sibling(target, _LOCK))
    try:
        fd = _lock_file(parent, lock, outdir)
    except BaseException:
        os.close(parent)
        raise
    _held[target] = 1
    try:
        _recover(parent, os.path.basename(target))
        yield
    finally:
        del _held[target]
        try:  # removed while still held, so no run is left holding a lock on a file no longer there
            os.unlink(lock, dir_fd=parent)
        except FileNotFoundError:
            pass
        os.close(fd)
        os.close(parent)


def _lock_file(parent: int, lock: str, outdir: str) -> int:
    """A handle holding the lock file `lock` (in the folder `parent`), refused if another process
    holds it. A holder removes the file before releasing it, so a run that got the lock of a
    file since removed takes it again on the file now at that name; the name is never left behind."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=parent)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputSetError(
                f"error: another dpspec compile, audit or infer is writing to {outdir}; wait for it "
                "or choose another output folder"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            named = os.stat(lock, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            named = None
        held = os.fstat(fd)
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)  # the file was removed (and perhaps re-created) between open and lock: again


def _leftovers(parent: int, name: str, kind: str) -> list[str]:
    """Names beside the target (in the folder `parent` is a handle of) left by an interrupted run."""
    prefix = "." + name + kind
    return sorted(n for n in os.listdir(parent) if n.startswith(prefix))


def _exists(parent: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _remove(parent: int, name: str) -> None:
    """Remove a leftover folder (or whatever was put in its place) beside the target."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if statmod.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=parent, ignore_errors=True)
        else:
            os.unlink(name, dir_fd=parent)
    except OSError:
        pass


def _recover(parent: int, name: str) -> None:
    """Under the lock: finish or undo what an interrupted compile left beside the target."""
    old = _leftovers(parent, name, _OLD)
    if old and not _exists(parent, name):  # killed between the two fallback renames
        newest = max(old, key=lambda n: os.stat(n, dir_fd=parent, follow_symlinks=False).st_mtime)
        os.rename(newest, name, src_dir_fd=parent, dst_dir_fd=parent)
    for leftover in _leftovers(parent, name, _NEW) + _leftovers(parent, name, _OLD) + _leftovers(parent, name, _PARTS):
        _remove(parent, leftover)


def _manifest(target: str) -> dict | None:
    """A previous set's manifest, or None if the folder holds no dpspec set."""
    try:
        with open(os.path.join(target, MANIFEST), encoding="utf-8") as fh:
            man = json.load(fh)
    except (OSError, ValueError):
        return None
    return man if isinstance(man, dict) and "dpspec_version" in man else None


def _set_command(man: dict) -> str:
    """Which command wrote a set: compile's manifests from before audit and infer wrote sets name none."""
    return str(man.get("command", "compile"))


def _set_files(target: str) -> set | None:
    """The file names a previous set's manifest lists, or None if the folder holds no dpspec set."""
    man = _manifest(target)
    if man is None:
        return None
    names = set(man.get("files", {}))
    names |= {v["file"] for v in man.get("outputs", {}).values() if isinstance(v, dict) and "file" in v}
    names |= {v for v in man.get("reports", {}).values() if isinstance(v, str)}
    return names | {MANIFEST, CERTIFICATE}


def _written_by(command: str) -> str:
    return "a release written by `dpspec compile`" if command == "compile" else f"the output set of `dpspec {command}`"


def refuse_release_folder(outdir: str, command: str, itself: bool = True) -> None:
    """Never write into an output set, nor below one: the set's files are exactly those its
    manifest lists. `itself=False` (a command replacing its own previous set) checks only the
    folders above `outdir`; `output_set` then refuses a set another command wrote."""
    folder = _target(outdir)
    if not itself:
        folder = os.path.dirname(folder)
    while True:
        man = _manifest(folder) if os.path.isdir(folder) else None
        if man is not None:
            where = "holds" if folder == _target(outdir) else f"is inside {folder}, which holds"
            raise OutputSetError(
                f"error: {outdir} {where} {_written_by(_set_command(man))}; writing the files of "
                f"`dpspec {command}` there would break that set's manifest. Choose another folder"
            )
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def check_replaceable(outdir: str, command: str = "compile") -> None:
    """The target must be new, empty, or a previous output set of `command`: a swap replaces the whole folder."""
    target = _target(outdir)
    if not os.path.lexists(target):
        return
    if not os.path.isdir(target):
        raise OutputSetError(f"error: the output path {outdir} exists and is not a folder")
    if os.path.ismount(target):  # a container volume: the kernel will not swap a mount point away ("busy")
        raise OutputSetError(
            f"error: the output folder {outdir} is a mount point (a volume mounted there); dpspec swaps a whole new "
            "folder in at the end, so the whole set appears at once or not at all, and a mount point cannot be "
            f"swapped. Give a folder inside it, for example -o {os.path.join(outdir, command + '-output')}"
        )
    present = set(os.listdir(target))
    if not present:
        return
    man = _manifest(target)
    if man is not None and _set_command(man) != command:
        raise OutputSetError(
            f"error: the output folder {outdir} holds {_written_by(_set_command(man))}; "
            f"`dpspec {command}` would replace it. Choose another folder"
        )
    known = _set_files(target)
    foreign = sorted(present - known) if known is not None else sorted(present)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" (and {len(foreign) - 5} more)" if len(foreign) > 5 else "")
        raise OutputSetError(
            f"error: the output folder {outdir} holds files that are not part of a dpspec output set ({shown}); "
            f"`dpspec {command}` replaces the whole folder, so choose a new or empty folder"
        )


@contextmanager
def claimed_target(outdir: str | None, command: str):
    """For a whole run: hold the target's lock and make sure it can take `command`'s set, so a
    second writer or an unusable folder is refused before the work, not after. No-op without a target."""
    if outdir is None:
        yield
        return
    with target_lock(outdir):
        check_replaceable(outdir, command)
        yield


def file_entries(folder: str) -> dict:
    """{name: {sha256, bytes}} for every file in a staged set (the manifest's `files`)."""
    out = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        out[name] = {"sha256": sha256_file(path), "bytes": os.path.getsize(path)}
    return out


def stage_text(staged: str, filename: str, text: str) -> None:
    """One text file of a set being staged (UTF-8, `\\n` line ends whatever the platform)."""
    with open(os.path.join(staged, filename), "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def write_manifest(staged: str, man: dict) -> None:
    """Last file of a staged set: `man` with `files`, every other file's SHA-256 and size."""

    man = versioned("manifest", {**man, "files": file_entries(staged)})
    stage_text(staged, MANIFEST, json.dumps(man, indent=2, sort_keys=True) + "\n")


def _fsync(path: str, dir_fd: int | None = None) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2


def _exchange(parent: int, a: str, b: str) -> bool:
    """Atomically swap two names in the folder `parent` is a handle of (Linux renameat2); False
    where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(parent, os.fsencode(a), parent, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)


def _swap_in(parent: int, staged: str, name: str) -> None:
    """Make the staged folder `staged` the target `name`, both names in the folder `parent` is a handle of."""
    if not _exists(parent, name):
        os.rename(staged, name, src_dir_fd=parent, dst_dir_fd=parent)
        return
    if _exchange(parent, staged, name):
        _remove(parent, staged)  # `staged` now holds the old set
        return
    old = "." + name + _OLD + secrets.token_hex(6)
    os.rename(name, old, src_dir_fd=parent, dst_dir_fd=parent)
    os.rename(staged, name, src_dir_fd=parent, dst_dir_fd=parent)
    _remove(parent, old)


def _make_staged(parent: int, name: str) -> str:
    """A fresh private folder beside the target for the new set; returns its name."""
    while True:
        staged = "." + name + _NEW + secrets.token_hex(6)
        try:
            os.mkdir(staged, 0o700, dir_fd=parent)
            return staged
        except FileExistsError:
            continue


@contextmanager
def output_set(outdir: str, command: str = "compile", guard=None):
    """Yield an empty staging folder; when the block succeeds, it becomes `outdir` in one swap.

    If the block fails, the staging folder is removed and `outdir` keeps its previous set.
    `guard(path)` (the input guard) is run on the folder the path resolves to, the one written.
    Every step goes through one handle of that folder's parent (checked to be the folder the
    guard judged), and the yielded path writes through a handle of the staged folder: a link in the path
    changed during the run cannot redirect the set. A change that is noticed before the swap
    (the path no longer leads to the folder written) still refuses the set, to tell the operator."""
    target = _target(outdir)
    folder, name = os.path.dirname(target), os.path.basename(target)
    if guard is not None:
        guard(target)
    with claimed_target(outdir, command):
        parent = _open_folder(folder, outdir)
        staged = sfd = None
        try:
            staged = _make_staged(parent, name)
            sfd = _open_folder(staged, outdir, dir_fd=parent)
            path = _staged_path(sfd, os.path.join(folder, staged))
            _staging[path] = (parent, folder, name)
            try:
                yield path
            finally:
                del _staging[path]
            if _target(outdir) != target:  # a link in the path was changed while the set was staged
                raise OutputSetError(
                    f"error: the output path {outdir} led to {target} when the run began and leads to "
                    f"{_target(outdir)} now (a link in it changed during the run); nothing was "
                    "published. Name a folder whose path holds no link that others can change"
                )
            os.fchmod(sfd, 0o777 & ~_umask())  # made 0700; a set gets the usual mode
            for entry in os.listdir(sfd):
                _fsync(entry, sfd)
            os.fsync(sfd)
            _swap_in(parent, staged, name)
            staged = None
            os.fsync(parent)
        except BaseException:
            if staged is not None:
                _remove(parent, staged)
            raise
        finally:
            if sfd is not None:
                os.close(sfd)
            os.close(parent)


class Scratch:
    """A scratch folder beside a staged set: `path` writes through its handle from any process of
    this user on this machine (/proc/PID/fd/N: a link in the output path changed during the run
    cannot redirect a part), `fd` is that handle in this process."""

    def __init__(self, path: str, fd: int):
        self.path, self.fd = path, fd


def _shared_path(fd: int, fallback: str) -> str:
    """A path through this process's handle `fd` that other processes can open too; the plain
    path where the system has no /proc."""
    via = f"/proc/{os.getpid()}/fd/{fd}"
    return via if _fd_path(fd) is not None and os.path.isdir(via) else fallback


@contextmanager
def scratch_beside(staged: str):
    """A fresh private folder beside the staged set `staged` (a path `output_set` yielded), made,
    opened and removed through the set's parent handle, for part files other processes write
    and the driver joins into the staged files (`table_csv.write_table_csv`). Removed when the
    block ends, whether the set is written or not."""
    try:
        parent, folder, name = _staging[staged]
    except KeyError:
        raise ValueError(f"{staged} is not a staged output set of this process") from None
    while True:
        scratch = "." + name + _PARTS + secrets.token_hex(6)
        try:
            os.mkdir(scratch, 0o700, dir_fd=parent)
            break
        except FileExistsError:
            continue
    fd = None
    try:
        fd = _open_folder(scratch, name, dir_fd=parent)
        yield Scratch(_shared_path(fd, os.path.join(folder, scratch)), fd)
    finally:
        if fd is not None:
            os.close(fd)
        _remove(parent, scratch)


def verify_set(outdir: str) -> list[str]:
    """Problems with a written set (missing, extra or altered files); empty when it is whole."""
    with open(os.path.join(outdir, MANIFEST), encoding="utf-8") as fh:
        files = json.load(fh).get("files", {})
    present = set(os.listdir(outdir)) - {MANIFEST, CERTIFICATE}
    problems = [f"missing {n}" for n in sorted(set(files) - present)]
    problems += [f"not in the manifest: {n}" for n in sorted(present - set(files))]
    problems += [
        f"altered: {n}"
        for n in sorted(set(files) & present)
        if sha256_file(os.path.join(outdir, n)) != files[n]["sha256"]
    ]
    return problems

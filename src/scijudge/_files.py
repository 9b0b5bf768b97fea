"""Output files every command writes: never over one of its inputs, and whole or not at all.

``refuse_overwrite`` is the one check that an output path is none of a command's inputs (the same file by any
name: a symlink, a hard link, ``./x`` and ``x``; a run store's ``-wal``/``-shm``/``.lock`` files count as the
store). ``atomic_output`` writes to a temporary file in the output's folder and renames it over the output
only when everything was written, so a failure (a corrupt row, a full disk, Ctrl-C) never leaves a partial
file and never harms the file that was there before. The standard library has the pieces (``tempfile``,
``os.replace``); this module puts them together once, with the file mode a plain ``open`` would have given.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from scijudge.errors import InputError

STORE_SIBLINGS = ("-wal", "-shm", "-journal", ".lock")
"""Files SQLite and the writer lock keep beside a run store: writing over one of them harms the store."""


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return a.resolve() == b.resolve()


def clashes(out: str | Path, inputs: Iterable[str | Path | None], *, stores: Iterable[str | Path] = ()) -> Path | None:
    """The input (or run store) that ``out`` names too, if any."""
    target = Path(out)
    for given in inputs:
        if given is not None and _same(target, Path(given)):
            return Path(given)
    for store in stores:
        path = Path(store)
        if _same(target, path) or any(_same(target, path.with_name(path.name + s)) for s in STORE_SIBLINGS):
            return path
    return None


def refuse_overwrite(out: str | Path, inputs: Iterable[str | Path | None] = (), *, stores: Iterable[str | Path] = (),
                     field: str = "out") -> None:
    """Raise a one-line ``InputError`` when the output ``out`` is one of the command's ``inputs`` or one of the run
    ``stores`` it reads (or a file SQLite keeps beside one): no command writes over what it reads. ``field`` is the
    option (its parameter name: the CLI shows it as typed, ``--out``)."""
    stores = list(stores)
    found = clashes(out, inputs, stores=stores)
    if found is not None:
        what = "the run store" if any(_same(found, Path(s)) for s in stores) else "the input"
        raise InputError(f"the output {out} is {what} {found} this command reads: writing it would destroy it; "
                         "choose another output path", field=field)


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}
_UMASK: int | None = None
_UMASK_LOCK = threading.Lock()


def _mode() -> int:
    """The mode ``open(path, "w")`` gives a new file (0o666 less the umask); mkstemp's would be 0o600."""
    global _UMASK
    with _UMASK_LOCK:
        if _UMASK is None:
            _UMASK = os.umask(0o022)
            os.umask(_UMASK)
    return 0o666 & ~_UMASK


@contextmanager
def atomic_output(path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8",
                  newline: str | None = None) -> Iterator[IO[Any]]:
    """Open ``path`` for writing (``mode`` "w" or "wb"), through a temporary file in its folder that replaces
    ``path`` only when the block ends without an error; on any error (Ctrl-C included) the temporary file is
    removed and ``path`` is as it was. Creates the folder. The new file gets the mode ``open`` would give it (an
    existing file's mode is kept)."""
    target = Path(path)
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_output writes text ('w') or bytes ('wb'), not {mode!r}")
    if target.is_dir():
        raise InputError("expected an output file, got a folder", file=target)
    if target.exists() and not target.is_file():  # a terminal, a pipe (/dev/stdout): nothing to rename over
        binary = mode == "wb"
        with target.open(mode, encoding=None if binary else encoding, newline=None if binary else newline) as handle:
            yield handle
        return
    if target.is_symlink():  # write the file the link names, and keep the link
        target = Path(os.path.realpath(target))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as exc:
        above = next((p for p in target.parents if p.exists()), None)
        if above is not None and not above.is_dir():  # `--out report/` given an existing file: say which
            raise InputError(f"cannot write {target.name} into {above}: it is a file, not a folder; choose another "
                             "output folder", file=above) from None
        raise InputError(f"cannot write the output ({exc.strerror or exc})", file=target) from None
    try:
        try:
            os.chmod(temp, target.stat().st_mode & 0o7777 if target.exists() else _mode())
        except OSError:  # pragma: no cover - a file system without modes
            pass
        binary = mode == "wb"
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else newline) as handle:
            yield handle
        os.replace(temp, target)
    except BaseException as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if isinstance(exc, OSError) and (exc.filename == temp or (exc.filename is None and exc.errno in _WRITE_ERRNOS)):
            raise InputError(f"cannot write the output ({exc.strerror or exc}); nothing was written to it",
                             file=target) from None
        raise


def csv_error(exc: Exception, file: Path, what: str) -> InputError:
    """A CSV reader's failure (pandas' parser, an empty file, bytes that are not UTF-8) as one line in this
    project's words, naming the line where the parser says which one."""
    import re

    text = str(exc)
    found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", text)
    if found:
        return InputError(f"expected {found[1]} cells, found {found[3]}", file=file, line=int(found[2]))
    if isinstance(exc, UnicodeDecodeError):
        return InputError(f"not {what}: not UTF-8 text", file=file)
    if "No columns to parse" in text:
        return InputError(f"not {what}: an empty file", file=file)
    return InputError(f"not {what} (a row the CSV reader cannot split into cells)", file=file)


def check_output_folder(folder: str | Path) -> None:
    """Refuse, before anything is computed, an output folder that is a file (or lies under one): the same line
    ``atomic_output`` would give once the work is done."""
    target = Path(folder)
    above = next((p for p in (target, *target.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        raise InputError(f"cannot write into {target}: {above} is a file, not a folder; choose another output "
                         "folder", file=above)


def write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> None:
    """``Path.write_text`` through ``atomic_output``."""
    with atomic_output(path, encoding=encoding) as handle:
        handle.write(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    """``Path.write_bytes`` through ``atomic_output``."""
    with atomic_output(path, "wb") as handle:
        handle.write(data)

"""The one-writer lock of a run store: ``<store>.lock`` holds the writer's PID under an exclusive advisory lock,
which the OS drops when that process dies (so a killed run never leaves a stale lock)."""

from __future__ import annotations

import os
from pathlib import Path

from scijudge.errors import RunBusyError, StoreWriteError


class WriterLock:
    """An exclusive lock file ``<store>.lock`` holding the writer's PID; the OS drops it when that process dies.

    ``release`` removes the file while still holding the lock. A process that opened the file just before it was
    removed may still get the lock, but on a file no longer at that path: after locking, the path must still be
    the file locked (same device and inode), otherwise it starts over on the path's new file. So one writer at a
    time holds the lock on the file the path names, and a clean run leaves no lock file behind.
    """

    def __init__(self, store: Path) -> None:
        self.path = store.with_name(store.name + ".lock")
        self._fd = -1
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks; one writer is not enforced
            self._fd = _open(self.path, store)
            return
        while True:
            fd = _open(self.path, store)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise RunBusyError(f"run store {store} is being written by another process (pid {holder}); wait "
                                   "for it to finish or stop it, or use another --run file") from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # locked a file its last writer had just removed: lock the one at the path now
        self._fd = fd
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            try:
                if _same_file(self._fd, self.path):
                    self.path.unlink()  # still locked: nobody else can hold the lock on this file now
            except OSError:
                try:
                    os.ftruncate(self._fd, 0)  # cannot remove it (read-only folder): leave it empty
                except OSError:
                    pass
            finally:
                os.close(self._fd)  # closing drops the flock
                self._fd = -1


def _open(path: Path, store: Path) -> int:
    """Open (or create) the lock file; a read-only file system or folder is one line (the store cannot be written)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreWriteError(f"cannot write the run store {store} (its lock file {path.name}: "
                              f"{exc.strerror or exc}); reading it works: export, calibrate") from None


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the open file ``fd`` (not removed, not replaced)."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def writer_active(store: Path) -> bool:
    """Whether a process holds the store's writer lock now (a run is writing it): the lock file opened read-only and
    tested with a shared, non-blocking lock that is dropped at once. Creates and changes nothing."""
    path = store.with_name(store.name + ".lock")
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
    except (ImportError, OSError):  # no lock file: no writer (or no advisory locks here to tell)
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock, if it was taken
    return False

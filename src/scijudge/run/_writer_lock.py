"""The one-writer lock of a run store: ``<store>.lock`` holds the writer's PID under an exclusive advisory lock,
which the OS drops when that process dies (so a killed run never leaves a stale lock)."""

from __future__ import annotations

import os
from pathlib import Path

from scijudge.errors import RunBusyError, StoreWriteError


class WriterLock:
    """An exclusive lock file ``<store>.lock`` holding the writer's PID; the OS drops it when that process dies."""

    def __init__(self, store: Path) -> None:
        self.path = store.with_name(store.name + ".lock")
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a read-only file system or folder: the store cannot be written either
            raise StoreWriteError(f"cannot write the run store {store} (its lock file {self.path.name}: "
                                  f"{exc.strerror or exc}); reading it works: export, calibrate") from None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks; one writer is not enforced
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            self._fd = -1
            raise RunBusyError(f"run store {store} is being written by another process (pid {holder}); wait for "
                               "it to finish or stop it, or use another --run file") from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            try:
                os.ftruncate(self._fd, 0)
            finally:
                os.close(self._fd)  # closing drops the flock
                self._fd = -1

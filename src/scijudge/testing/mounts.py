"""A real read-only file system for tests of stores on read-only media: a tmpfs mounted at a folder, filled, then
remounted read-only (Linux, as root; ``mount_unavailable`` says why not elsewhere)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def mount_unavailable() -> str | None:
    """Why no tmpfs can be mounted here (None where it can be tried)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a read-only file system needs root"
    return None


class ReadOnlyMount:
    """A tmpfs at ``folder``: write into it, then ``freeze()`` remounts it read-only."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def freeze(self) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(self.folder)], check=True, capture_output=True)
        try:
            (self.folder / ".probe").write_text("x")
        except OSError:
            return
        raise RuntimeError(f"{self.folder} is still writable after remount,ro")


@contextmanager
def tmpfs(folder: Path, size: str = "16m") -> Iterator[ReadOnlyMount]:
    """Mount a tmpfs at ``folder`` (created) for the block; raises OSError with mount's reason where it fails."""
    folder.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if made.returncode != 0:
        raise OSError(f"cannot mount a tmpfs: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield ReadOnlyMount(folder)
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)

"""Run ``scijudge`` commands as a user would, in subprocesses (for tests of the command line)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path


def run_commands(commands: list[list[str]], cwd: Path, env: dict[str, str]) -> list[subprocess.CompletedProcess]:
    """Run independent CLI commands side by side (each is mostly interpreter start-up); results in order."""
    running = [(args, subprocess.Popen([sys.executable, "-m", "scijudge", *args], cwd=cwd, env=env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)) for args in commands]
    done = []
    for args, process in running:
        stdout, stderr = process.communicate(timeout=180)
        done.append(subprocess.CompletedProcess(args, process.returncode, stdout, stderr))
    return done


def stored_ok_items(run: Path) -> set[str]:
    """Item ids with an ok judgment in a run store that a CLI process may still be writing (read as plain SQLite,
    so a test can poll it while the process runs; empty before the store and its tables exist)."""
    if not run.exists():
        return set()
    try:
        with sqlite3.connect(run) as db:
            return {row[0] for row in db.execute("SELECT item_id FROM judgments WHERE status = 'ok'")}
    except sqlite3.OperationalError:  # the CLI has created the file but not yet its tables
        return set()

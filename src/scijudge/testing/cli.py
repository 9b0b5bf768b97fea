"""Run ``scijudge`` commands as a user would, in subprocesses (for tests of the command line)."""

from __future__ import annotations

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

"""Print one command the README gives, so that .ci/run runs exactly what a new user is told to run.

Usage: python3 .ci/readme_command.py setup|test
  setup: the one command of the first ```bash block under "## Set up and run the main job"
  test:  the first command of the first ```bash block under "## Run the tests" (its trailing comment dropped)
"""

import re
import sys
from pathlib import Path

HEADINGS = {"setup": "## Set up and run the main job", "test": "## Run the tests"}


def first_block(readme: str, heading: str) -> list[str]:
    """The lines of the first ```bash block after ``heading``."""
    start = readme.index(heading + "\n") if heading + "\n" in readme else readme.index(heading)
    match = re.search(r"```bash\n(.*?)```", readme[start:], flags=re.S)
    if match is None:
        raise SystemExit(f"README.md: no ```bash block under {heading!r}")
    return [line for line in match.group(1).splitlines() if line.strip()]


def main() -> None:
    which = sys.argv[1]
    lines = first_block(Path("README.md").read_text(encoding="utf-8"), HEADINGS[which])
    if which == "setup":
        if len(lines) != 1:
            raise SystemExit(f"README.md: the set-up block must be one command, found {len(lines)} lines")
        print(lines[0].strip())
    else:
        print(re.sub(r"\s+#.*$", "", lines[0]).strip())


if __name__ == "__main__":
    main()

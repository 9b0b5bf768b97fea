"""``python -m scijudge`` runs the CLI."""

from scijudge.cli import main

main()

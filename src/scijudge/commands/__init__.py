"""One module per CLI command (``scijudge.cli`` registers them); the consoles they print to and the words they
use for the library's messages are public here for the CLI itself."""

from scijudge.commands._console import console, in_cli_words, run_as_console_script

__all__ = ["console", "in_cli_words", "run_as_console_script"]

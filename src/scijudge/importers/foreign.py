"""One entry point for other tools' result files: ``read_foreign(path, fmt)`` picks the reader (or sniffs it)."""

from __future__ import annotations

from pathlib import Path

from scijudge.errors import InputError
from scijudge.importers._interop import ForeignImport
from scijudge.importers.sniff import DAMAGED, FORMATS, LM_EVAL_RESULTS, sniff

FILE_FORMATS = tuple(f for f in FORMATS if f != "mlflow")
EXPECTED = {"inspect": "an inspect_ai log (.eval zip or .json document)",
            "promptfoo": "a promptfoo output file (promptfoo eval -o out.json or out.jsonl)",
            "deepeval": "a DeepEval test run (.deepeval/.latest_test_run.json or test_run_*.json)",
            "lm-eval": "an lm-eval samples file (samples_<task>_<date>.jsonl, written with --log_samples)"}
"""What ``--from NAME`` expects, in words (for the message when the file is something else)."""


def read_foreign(path: str | Path, fmt: str | None = None, *, include_deterministic: bool = False) -> ForeignImport:
    """Judgments of an inspect_ai, promptfoo, DeepEval or lm-eval file; ``fmt`` None recognises it by content.

    With ``fmt`` given and the file's content recognisably something else (or damaged), the error names the
    format expected and what was found, in one line.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", file=path)
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}", file=path)
    if fmt == "mlflow":
        raise InputError("MLflow is read from a tracking store: --from mlflow --tracking-uri URI --experiment NAME",
                         file=path)
    sniffed = sniff(path)
    found = fmt or sniffed.format
    if sniffed.format == DAMAGED:
        raise InputError((sniffed.problem or "damaged") + (f" (expected {EXPECTED[fmt]})" if fmt else ""), file=path)
    if found == LM_EVAL_RESULTS:
        raise InputError("an lm-eval results file holds aggregates only: import its samples_<task>_<date>.jsonl "
                         "(written with --log_samples)", file=path)
    if found not in FILE_FORMATS:
        raise InputError(f"not a file of {', '.join(FILE_FORMATS)}: found {sniffed.found}", file=path)
    if fmt is not None and sniffed.format not in (None, fmt) and sniffed.format != LM_EVAL_RESULTS:
        raise InputError(f"--from {fmt} expects {EXPECTED[fmt]}, found {sniffed.found}", file=path)
    try:
        return _read(path, found, include_deterministic)
    except InputError as exc:
        if fmt is None or sniffed.format == fmt:
            raise
        why = "" if sniffed.found.startswith(("JSON Lines", "text")) else f" ({exc.reason})"
        raise InputError(f"--from {fmt} expects {EXPECTED[fmt]}, found {sniffed.found}{why}",
                         file=path) from None


def _read(path: Path, found: str, include_deterministic: bool) -> ForeignImport:
    if found == "inspect":
        from scijudge.importers.inspect_ai import read_inspect

        return read_inspect(path, include_deterministic=include_deterministic)
    if found == "promptfoo":
        from scijudge.importers.promptfoo import read_promptfoo

        return read_promptfoo(path, include_deterministic=include_deterministic)
    if found == "deepeval":
        from scijudge.importers.deepeval import read_deepeval

        return read_deepeval(path, include_deterministic=include_deterministic)
    from scijudge.importers.lm_eval import read_lm_eval

    return read_lm_eval(path)

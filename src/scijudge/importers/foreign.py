"""One entry point for other tools' result files: ``read_foreign(path, fmt)`` picks the reader (or sniffs it)."""

from __future__ import annotations

from pathlib import Path

from scijudge.errors import InputError
from scijudge.importers._interop import ForeignImport
from scijudge.importers.sniff import FORMATS, LM_EVAL_RESULTS, sniff_format

FILE_FORMATS = tuple(f for f in FORMATS if f != "mlflow")


def read_foreign(path: str | Path, fmt: str | None = None, *, include_deterministic: bool = False) -> ForeignImport:
    """Judgments of an inspect_ai, promptfoo, DeepEval or lm-eval file; ``fmt`` None recognises it by content."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", file=path)
    found = fmt or sniff_format(path)
    if found == LM_EVAL_RESULTS:
        raise InputError("an lm-eval results file holds aggregates only: import its samples_<task>_<date>.jsonl "
                         "(written with --log_samples)", file=path)
    if found == "mlflow":
        raise InputError("MLflow is read from a tracking store: --from mlflow --tracking-uri URI --experiment NAME",
                         file=path, field="from")
    if found not in FILE_FORMATS:
        raise InputError(f"not a file of {', '.join(FILE_FORMATS)}" if fmt is None else
                         f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}", file=path, field="from")
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

"""Which tool wrote a results file, from its content alone (no extension needed).

Order: a zip with ``header.json`` / ``_journal/start.json`` is an inspect ``.eval`` log; a first line that is an
lm-eval sample is an lm-eval samples file; a whole JSON document is an inspect ``.json`` log, a promptfoo output
file, a DeepEval test run or an lm-eval results file, in that order. Anything else is None: the generic
JSONL/CSV importer (with ``--map``) reads it. MLflow is never sniffed (it is a tracking URI, not a file).
"""

from __future__ import annotations

import json
from pathlib import Path

from scijudge.importers import deepeval, inspect_ai, lm_eval, promptfoo

FORMATS = ("inspect", "mlflow", "promptfoo", "deepeval", "lm-eval")
"""The names ``import-judgments --from`` takes."""
LM_EVAL_RESULTS = "lm-eval-results"
"""What an lm-eval results file sniffs as: aggregates only, its samples file holds the judgments."""


def sniff_format(path: str | Path) -> str | None:
    """``inspect``, ``promptfoo``, ``deepeval``, ``lm-eval``, ``lm-eval-results`` or None, from the content."""
    path = Path(path)
    if not path.is_file():
        return None
    data = path.read_bytes()
    if data.startswith(b"PK\x03\x04"):
        return "inspect" if inspect_ai.is_eval_zip(data, path) else None
    try:
        content = data.decode("utf-8-sig").lstrip()
    except UnicodeDecodeError:
        return None
    if not content.startswith("{"):
        return None
    try:
        if lm_eval.is_sample_line(json.loads(content.split("\n", 1)[0])):
            return "lm-eval"
    except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deeply, the generic path says so
        pass
    try:
        doc = json.loads(content)  # bare NaN allowed: inspect writes it
    except (json.JSONDecodeError, RecursionError):
        return None
    if inspect_ai.is_json_log(doc):
        return "inspect"
    if promptfoo.is_promptfoo(doc):
        return "promptfoo"
    if deepeval.test_run_of(doc) is not None:
        return "deepeval"
    if lm_eval.is_results_file(doc):
        return LM_EVAL_RESULTS
    return None

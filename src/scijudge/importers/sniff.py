"""Which tool wrote a results file, from its content alone (no extension needed), and what is wrong with it.

Order: a zip with ``header.json`` / ``_journal/start.json`` is an inspect ``.eval`` log; a first line that is an
lm-eval sample is an lm-eval samples file, one that is a promptfoo result a ``promptfoo eval -o out.jsonl`` file; a
document that opens the way inspect_ai writes its ``EvalLog`` (``version``, ``status``, then ``eval`` with ``task``
and an id) is an inspect ``.json`` log, recognised from its first kilobytes without parsing the rest (inspect's
reader parses it once); any other whole JSON document is a promptfoo output file, a DeepEval test run or an lm-eval
results file, in that order, parsed once (the reader reuses it). Anything else is None: the generic JSONL/CSV
importer (with ``--map``) reads it. MLflow is never sniffed (it is a tracking URI, not a file).

A file that is recognisably damaged or of no known kind in a way the line-by-line reader would only repeat (an empty
file, a zip that is not an inspect log or is cut short, a JSON document cut short) is ``DAMAGED``, with the one
line that says so (``Sniffed.problem``).
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from scijudge.importers import _interop, deepeval, inspect_ai, lm_eval, promptfoo

FORMATS = ("inspect", "mlflow", "promptfoo", "deepeval", "lm-eval")
"""The names ``import-judgments --from`` takes."""
LM_EVAL_RESULTS = "lm-eval-results"
"""What an lm-eval results file sniffs as: aggregates only, its samples file holds the judgments."""
DAMAGED = "damaged"
"""What a file sniffs as when it cannot be read as anything: ``Sniffed.problem`` says why, in one line."""
_PREFIX = 16384
_INSPECT_OPENING = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:\s*"[a-z_]+"\s*,\s*"eval"\s*:\s*\{')
_INSPECT_IDS = re.compile(rb'"(eval_id|run_id|task_id)"\s*:')


@dataclass(frozen=True)
class Sniffed:
    """What a file is: a format name (or None: generic JSONL/CSV), and for ``DAMAGED`` the problem, in words."""

    format: str | None
    problem: str | None = None
    found: str = ""  # what the content looks like, in words (for "expected X, found Y" messages)


def sniff_format(path: str | Path) -> str | None:
    """``inspect``, ``promptfoo``, ``deepeval``, ``lm-eval``, ``lm-eval-results``, ``damaged`` or None."""
    return sniff(path).format


def sniff(path: str | Path) -> Sniffed:
    """The format of ``path`` from its content, with a description of what was found."""
    path = Path(path)
    if not path.is_file():
        return Sniffed(None, found="no file")
    with path.open("rb") as handle:
        head = handle.read(_PREFIX)
        if b"\n" not in head.lstrip()[:_PREFIX - 1]:
            head += handle.readline()  # a first line longer than the prefix: all of it (a line is read whole)
        head += handle.readline()  # the line cut at the prefix's end, whole (the second line of JSONL)
    if not head.strip():
        return Sniffed(DAMAGED, "empty file: nothing to import" if not head else "file holds only blank space",
                       found="an empty file")
    if head.startswith(b"PK\x03\x04"):
        return _zip(path)
    if _INSPECT_OPENING.match(head) and b'"task"' in head and _INSPECT_IDS.search(head):
        return Sniffed("inspect", found="an inspect_ai .json log")
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = head[:-4].decode("utf-8-sig", errors="replace")  # a character cut at the prefix's end
    content = text.lstrip()
    if not content.startswith("{"):
        return Sniffed(None, found="text that is not JSON (CSV or other)")
    first = _first_value(content)
    if first is not None:
        if lm_eval.is_sample_line(first):
            return Sniffed("lm-eval", found="an lm-eval samples file")
        if promptfoo.is_result_line(first):
            return Sniffed("promptfoo", found="a promptfoo -o out.jsonl file")
    if "\n" in content.strip() and _first_value(content.split("\n", 1)[1].lstrip()) is not None:
        return Sniffed(None, found="JSON Lines (one object per line)")  # a bad first line: the reader names it
    data = path.read_bytes()
    try:
        doc = _interop.load_json(data, path)
    except _interop.InputError as exc:
        if first is not None:  # a one-line file whose line is a complete object, then junk: JSONL, read by line
            return Sniffed(None, found="JSON Lines")
        where = f" at line {exc.line}" if exc.line else ""
        lines = data.count(b"\n") + 1
        return Sniffed(DAMAGED, f"a JSON document that cannot be read: {exc.reason}{where} (of {lines} lines; "
                                "damaged or cut short?)",
                       found="a damaged JSON document")
    _interop.remember_document(path, data, doc)
    if inspect_ai.is_json_log(doc):
        return Sniffed("inspect", found="an inspect_ai .json log")
    if promptfoo.is_promptfoo(doc):
        return Sniffed("promptfoo", found="a promptfoo output file")
    if deepeval.test_run_of(doc) is not None:
        return Sniffed("deepeval", found="a DeepEval test run")
    if lm_eval.is_results_file(doc):
        return Sniffed(LM_EVAL_RESULTS, found="an lm-eval results file")
    if isinstance(doc, dict):
        return Sniffed(None, found=f"a JSON object with keys {', '.join(list(map(str, doc))[:6])}")
    return Sniffed(None, found=f"a JSON {type(doc).__name__}")


def _first_value(content: str) -> object | None:
    """The first line as a JSON object, or None when it is not a complete one."""
    line = content.split("\n", 1)[0]
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _zip(path: Path) -> Sniffed:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        return Sniffed(DAMAGED, f"a zip archive that cannot be opened ({exc}): an inspect_ai .eval log cut short "
                                "or damaged?", found="a damaged zip archive")
    if inspect_ai.EVAL_ZIP_MEMBERS & names:
        return Sniffed("inspect", found="an inspect_ai .eval log")
    shown = ", ".join(sorted(names)[:5]) or "nothing"
    return Sniffed(DAMAGED, f"a zip archive that is not an inspect_ai .eval log (no header.json or "
                            f"_journal/start.json; it holds {shown})", found="a zip archive of another kind")

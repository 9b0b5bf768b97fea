"""What every reader of another tool's results shares: a row, the import it yields, and the path to records.

Readers (``inspect_ai``, ``mlflow``, ``promptfoo``, ``deepeval``, ``lm_eval``) turn a tool's file into
:class:`ForeignRow` values, one per judgment, each naming its position in the file (``samples[2].scores.qa``,
``results.results[4].gradingResult.componentResults[1]``, ``line 7``). :func:`collect` turns them into run-store
records through the generic importer (``judgments_from_records``, the one validation path), so a foreign
judgment is checked exactly like a row of a JSONL file; bad rows become one-line errors naming file and position.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.importers.judgments import ImportedJudgments, judgments_from_records
from scijudge.labels import HumanLabel

INTEROP_EXTRA_HINT = "pip install 'scijudge[interop]'"
"""How to get the optional readers/writers (inspect_ai, mlflow)."""


@dataclass
class ForeignRow:
    """One judgment read from another tool, before validation.

    ``score`` None and ``verdict`` None is an abstention (``reason`` says why); ``error`` set makes it a bad row.
    ``llm_judged`` False marks a deterministic metric (string match, exact match), skipped unless asked for.
    ``skip`` set (a kind, e.g. ``corpus-level``) counts the row in ``skipped`` as ``<judge> (<kind>)``, always.
    ``answered_by`` names the model (or provider) whose answer was judged: it is part of the judgment's identity,
    so the item becomes ``<item_id>|<answered_by>`` (two solver models graded by one judge are two judgments).
    """

    item_id: Any
    judge: Any
    model: Any
    position: str
    score: float | None = None
    verdict: str | None = None
    rationale: str | None = None
    reason: str | None = None
    part: str = ""
    line: int | None = None
    llm_judged: bool = True
    error: str | None = None
    answered_by: str | None = None
    skip: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)


ANSWER_SEPARATOR = "|"
"""Between an item and the model that answered it in an imported item id (``q1|openai/gpt-4o``)."""


def answered_item(item_id: Any, answered_by: str | None) -> Any:
    """The item id of a judgment of ``answered_by``'s answer to ``item_id`` (unchanged when no model is known)."""
    if item_id is None or not answered_by:
        return item_id
    return f"{item_id}{ANSWER_SEPARATOR}{answered_by}"


@dataclass
class ForeignImport(ImportedJudgments):
    """Records read from another tool's results, with the tool's own summary counts and any human labels."""

    format: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    labels: list[HumanLabel] = field(default_factory=list)
    label_sources: list[str] = field(default_factory=list)
    scales: dict[str, list[Any]] = field(default_factory=dict)
    companions: list[dict[str, Any]] = field(default_factory=list)
    """Other files the import read (lm-eval's results file, where the model name comes from), with their hashes."""

    def meta(self) -> dict[str, Any]:
        """Run-level record of this import: the generic one plus the format, what was skipped, other files read."""
        out = super().meta()
        out.update(format=self.format, skipped=dict(self.skipped), labels=len(self.labels))
        if self.companions:
            out["companions"] = list(self.companions)
        return out


def file_bytes(path: str | Path) -> tuple[Path, bytes, str]:
    """(absolute path, content, sha256) of a file that must exist: the absolute path is what an import records, so
    that two spellings of one file's path are one source."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", file=path)
    data = path.read_bytes()
    return path.resolve(), data, hashlib.sha256(data).hexdigest()


_REMEMBERED: list[tuple[tuple[str, int, int], Any]] = []
"""The last document ``sniff`` parsed, keyed by (path, size, content hash): its reader takes it from here."""


def _document_key(path: Path, data: bytes) -> tuple[str, int, int]:
    return str(Path(path).resolve()), len(data), hash(data)


def remember_document(path: Path, data: bytes, doc: Any) -> None:
    """Keep the document just parsed from ``data`` for the reader that comes next (one document at a time)."""
    _REMEMBERED[:] = [(_document_key(path, data), doc)]


def forget_document() -> None:
    """Drop the remembered document (a reader that parses the file its own way)."""
    _REMEMBERED.clear()


def load_json(data: bytes, path: Path) -> Any:
    """A whole JSON document (bare NaN allowed, as inspect writes it); an error names the line.

    The document ``sniff`` parsed from the same bytes is taken as is: a large file is parsed once.
    """
    if _REMEMBERED and _REMEMBERED[0][0] == _document_key(path, data):
        return _REMEMBERED.pop()[1]
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=path, line=exc.lineno) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", file=path) from None


def expect_object(value: Any, path: Path, where: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an error naming where it should have been one."""
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object, got {type(value).__name__}", file=path, field=where)
    return value


def obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (for optional nested objects)."""
    return value if isinstance(value, dict) else {}


def number(value: Any) -> tuple[float | None, str | None]:
    """(score, error): numbers as floats, None/NaN as no score, booleans and other values as a bad row."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return None, f"score {value!r} is a boolean, not a number"
    if isinstance(value, (int, float)):
        return (None, None) if math.isnan(value) else (float(value), None)
    return None, f"score {value!r} is not a number"


def text(value: Any) -> str | None:
    """A rationale or reason as text (None when absent or empty)."""
    if value is None:
        return None
    out = value if isinstance(value, str) else json.dumps(value, default=str)
    return out if out.strip() else None


def scale_of(scores: Iterable[float]) -> list[Any]:
    """A calibration scale that fits the scores: a grid when they sit on 0/0.5/1, else continuous over [0, 1]."""
    values = {float(s) for s in scores}
    if not values:
        return [0.0, 1.0, 1.0]
    if values <= {0.0, 1.0}:
        return [0.0, 1.0, 1.0]
    if values <= {0.0, 0.5, 1.0}:
        return [0.0, 1.0, 0.5]
    lo, hi = min(0.0, min(values)), max(1.0, max(values))
    if all(v.is_integer() for v in values):
        return [lo, hi, 1.0]
    return [lo, hi, 0.1, "continuous"]


def _where(row: ForeignRow, source: str) -> str:
    """The reason of an abstention that gave none: the row's file line (not its ordinal) and position."""
    line = f" line {row.line}" if row.line is not None else ""
    return f"no score or verdict in {source}{line} ({row.position})"


def collect(
    rows: Iterable[ForeignRow],
    *,
    source: str,
    sha256: str,
    fmt: str,
    summary: Mapping[str, Any] | None = None,
    include_deterministic: bool = False,
) -> ForeignImport:
    """Validate foreign rows into records (through ``judgments_from_records``) and bad rows by position.

    Deterministic rows (``llm_judged`` False) are counted in ``skipped`` unless ``include_deterministic``.
    """
    out = ForeignImport(source=source, sha256=sha256, format=fmt, summary=dict(summary or {}))
    kept: list[ForeignRow] = []
    for row in rows:
        out.n_rows += 1
        if row.skip is not None:
            name = f"{row.judge} ({row.skip})"
            out.skipped[name] = out.skipped.get(name, 0) + 1
            continue
        if row.error is not None:
            out.errors.append(InputError(row.error, file=source, line=row.line, field=row.position))
            continue
        if not row.llm_judged and not include_deterministic:
            name = str(row.judge)
            out.skipped[name] = out.skipped.get(name, 0) + 1
            continue
        kept.append(row)
    records: list[tuple[int, Mapping[str, Any]]] = [
        (n, {"item_id": answered_item(r.item_id, r.answered_by), "judge": r.judge, "model": r.model, "score": r.score, "verdict": r.verdict,
             "rationale": r.rationale, "part": r.part,
             "reason": r.reason or _where(r, source) if r.score is None and r.verdict is None else r.reason})
        for n, r in enumerate(kept, 1)]
    imported = judgments_from_records(records, source=source, sha256=sha256)
    by_number = dict(enumerate(kept, 1))
    for error in imported.errors:
        row = by_number[error.line or 0]
        where = row.position + (f".{error.field}" if error.field else "")
        out.errors.append(InputError(error.reason, file=source, line=row.line, field=where))
    for result in imported.results:
        provenance = dict(result.result or {})
        row = by_number[int(provenance["line"])]
        provenance.update(line=row.line, position=row.position, format=fmt, **row.provenance)
        if row.answered_by:
            provenance.update(sample_id=str(row.item_id), answered_by=row.answered_by)
        result.result = provenance
        out.results.append(result)
    scores: dict[str, list[float]] = {}
    for result in out.results:
        if result.score is not None:
            scores.setdefault(result.judge, []).append(result.score)
    out.scales = {judge: scale_of(values) for judge, values in scores.items()}
    return out

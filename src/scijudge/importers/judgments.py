"""Judgments made elsewhere (released rating files, other tools' logs) as run-store records.

A file (JSONL or CSV) or a DataFrame with one judgment per row: ``item_id``, ``judge``, ``model`` and
``score`` or ``verdict``; optionally ``part``, ``family``, ``rationale``, ``confidence``, ``endpoint``,
``reason``, and for perturbed answers ``variant_of`` (the original item's id), ``level`` (``subtle``,
``extreme`` or any name; ``original`` or empty marks an original) and ``changed`` (false: the variant's text
equals the original's, so robustness leaves it out). A row with neither score nor verdict is
an abstention with a reason. Bad rows are collected with their line and field, never guessed at. Every
record carries where it came from (``result.imported_from``, ``result.sha256``, ``result.line``).

Importers return records and never open a run store: the ``import-judgments`` command writes them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.records import JudgeResult

IMPORTED_SPEC_HASH = "imported"
"""spec_hash of imported rows: they come from no scijudge spec, so they never share a key with one."""
REQUIRED_FIELDS = ("item_id", "judge", "model")
OPTIONAL_FIELDS = ("score", "verdict", "part", "family", "rationale", "confidence", "endpoint", "reason",
                   "variant_of", "level", "changed")
ORIGINAL_LEVELS = frozenset({"", "original", "benign", "none"})
DEFAULT_FAMILY = "imported"


@dataclass
class ImportedJudgments:
    """What a file or frame yields: records to store, bad rows (one line each), and the source's identity."""

    results: list[JudgeResult] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    source: str = ""
    sha256: str = ""
    n_rows: int = 0

    @property
    def n_abstained(self) -> int:
        return sum(1 for r in self.results if r.status == "abstained")

    @property
    def n_variants(self) -> int:
        return sum(1 for r in self.results if (r.result or {}).get("variant_of"))

    def meta(self) -> dict[str, Any]:
        """Run-level record of this import (file, hash, counts) for ``Run.set_meta``."""
        return {"file": self.source, "sha256": self.sha256, "rows": self.n_rows, "imported": len(self.results),
                "abstained": self.n_abstained, "bad_rows": len(self.errors)}


def parse_mapping(pairs: list[str] | None) -> dict[str, str]:
    """``["rating=score", "llm=model"]`` → ``{"rating": "score", "llm": "model"}`` (source column → field)."""
    out: dict[str, str] = {}
    known = set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS)
    for pair in pairs or []:
        source, sep, target = pair.partition("=")
        source, target = source.strip(), target.strip()
        if not sep or not source or not target:
            raise InputError(f"expected SOURCE=FIELD, got {pair!r}", field="map")
        if target not in known:
            raise InputError(f"unknown field {target!r} in {pair!r}: use one of {', '.join(sorted(known))}",
                             field="map")
        out[source] = target
    return out


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _number(value: Any, name: str, source: str, line: int) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} {value!r} is not a number", file=source, line=line, field=name) from None
    if not math.isfinite(number):
        raise InputError(f"{name} {value!r} is not a finite number", file=source, line=line, field=name)
    return number


def _flag(value: Any, source: str, line: int) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InputError(f"changed {value!r} is not true/false", file=source, line=line, field="changed")


def _record(row: Mapping[str, Any], source: str, sha: str, line: int) -> JudgeResult:
    """One row → one JudgeResult; raises an InputError naming the line and field."""
    values = {}
    for name in REQUIRED_FIELDS:
        if _missing(row.get(name)):
            raise InputError(f"missing {name}", file=source, line=line, field=name)
        values[name] = _text(row[name])
    item_id = values["item_id"]
    level = "" if _missing(row.get("level")) else _text(row["level"])
    variant_of = "" if _missing(row.get("variant_of")) else _text(row["variant_of"])
    if level.lower() in ORIGINAL_LEVELS:
        if variant_of:
            raise InputError(f"variant_of {variant_of!r} given for an original (level {level or 'empty'!r}); "
                             "give the variant's level", file=source, line=line, field="level")
        level = ""
    elif not variant_of or variant_of == item_id:
        # long format: the original and its variants share an id, told apart by level
        variant_of, item_id = item_id, f"{item_id}::{level}"
    provenance: dict[str, Any] = {"imported_from": source, "sha256": sha, "line": line}
    if variant_of:
        provenance.update(variant_of=variant_of, level=level)
        if not _missing(row.get("changed")):
            provenance["changed"] = _flag(row["changed"], source, line)
    endpoint = None if _missing(row.get("endpoint")) else _text(row["endpoint"])
    extra: dict[str, Any] = {}
    if endpoint is not None:
        if "endpoint" in JudgeResult.model_fields:  # the store knows endpoints: keep it where it belongs
            extra["endpoint"] = endpoint
        else:
            provenance["endpoint"] = endpoint
    confidence = None
    if not _missing(row.get("confidence")):
        confidence = _number(row["confidence"], "confidence", source, line)
        if not 0.0 <= confidence <= 1.0:
            raise InputError(f"confidence {confidence:g} is outside [0, 1]", file=source, line=line, field="confidence")
    score = None if _missing(row.get("score")) else _number(row["score"], "score", source, line)
    verdict = None if _missing(row.get("verdict")) else _text(row["verdict"])
    if score is not None and verdict is not None:
        raise InputError("give a score or a verdict, not both", file=source, line=line, field="verdict")
    common = dict(item_id=item_id, judge=values["judge"], model=values["model"],
                  part="" if _missing(row.get("part")) else _text(row["part"]),
                  family=DEFAULT_FAMILY if _missing(row.get("family")) else _text(row["family"]),
                  spec_hash=IMPORTED_SPEC_HASH, result=provenance, **extra)
    rationale = None if _missing(row.get("rationale")) else str(row["rationale"])
    if score is None and verdict is None:
        reason = None if _missing(row.get("reason")) else str(row["reason"])
        return JudgeResult(status="abstained", reason=reason or f"no score or verdict in {source} line {line}",
                           rationale=rationale, **common)
    return JudgeResult(status="ok", score=score, verdict=verdict, confidence=confidence, rationale=rationale,
                       **common)


def judgments_from_records(
    rows: list[tuple[int, Mapping[str, Any]]], *, source: str, sha256: str = "", mapping: Mapping[str, str] | None = None
) -> ImportedJudgments:
    """Records from (line, row) pairs; column names are first renamed by ``mapping`` (source → field)."""
    mapping = dict(mapping or {})
    out = ImportedJudgments(source=source, sha256=sha256, n_rows=len(rows))
    for line, raw in rows:
        row = {mapping.get(k, k): v for k, v in raw.items()} if mapping else raw
        try:
            out.results.append(_record(row, source, sha256, line))
        except InputError as exc:
            out.errors.append(exc)
    return out


def judgments_from_frame(
    frame: Any, *, mapping: Mapping[str, str] | None = None, source: str = "(DataFrame)", first_line: int = 1
) -> ImportedJudgments:
    """The Python equivalent of ``import-judgments``: one DataFrame row per judgment → records.

    Row numbers in error messages start at ``first_line`` (a CSV's first data row is line 2).
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    renamed = frame.rename(columns=dict(mapping or {}))
    missing = [c for c in REQUIRED_FIELDS if c not in renamed.columns]
    if missing:
        raise InputError(f"no column {missing[0]!r} (columns: {', '.join(map(str, frame.columns))}); "
                         "rename with --map SOURCE=FIELD", file=source, field=missing[0])
    if "score" not in renamed.columns and "verdict" not in renamed.columns:
        raise InputError("needs a 'score' or a 'verdict' column; rename with --map SOURCE=FIELD", file=source,
                         field="score")
    digest = hashlib.sha256(pd.util.hash_pandas_object(frame.astype(str), index=False).to_numpy().tobytes()).hexdigest()
    records = renamed.to_dict(orient="records")
    return judgments_from_records(list(enumerate(records, first_line)), source=source, sha256=digest)


def load_judgments(path: str | Path, *, mapping: Mapping[str, str] | None = None) -> ImportedJudgments:
    """Read a JSONL or CSV file of judgments (by extension; ``.csv``/``.tsv`` or else JSONL)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", file=path)
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=path) from None
    if path.suffix.lower() in (".csv", ".tsv"):
        return _from_csv(text, path, sha, mapping, "\t" if path.suffix.lower() == ".tsv" else ",")
    rows: list[tuple[int, Mapping[str, Any]]] = []
    bad: list[InputError] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append(InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=path, line=number))
            continue
        if not isinstance(obj, dict):
            bad.append(InputError(f"expected a JSON object, got {type(obj).__name__}", file=path, line=number))
            continue
        rows.append((number, obj))
    _check_columns([k for _, r in rows[:1] for k in r], mapping, path)
    out = judgments_from_records(rows, source=str(path), sha256=sha, mapping=mapping)
    out.errors = sorted(bad + out.errors, key=lambda e: e.line or 0)
    out.n_rows += len(bad)
    return out


def _check_columns(columns: list[str], mapping: Mapping[str, str] | None, path: Path) -> None:
    """Fail once, early, when the first row shows a required column is absent (not once per row)."""
    if not columns:
        return
    names = {(mapping or {}).get(c, c) for c in columns}
    missing = [c for c in REQUIRED_FIELDS if c not in names]
    if missing:
        raise InputError(f"no field {missing[0]!r} (the first row has: {', '.join(columns)}); "
                         "rename with --map SOURCE=FIELD", file=path, field=missing[0])


def _from_csv(text: str, path: Path, sha: str, mapping: Mapping[str, str] | None, sep: str) -> ImportedJudgments:
    import io

    import pandas as pd

    try:
        frame = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, skip_blank_lines=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"cannot be read as CSV: {exc}".splitlines()[0], file=path) from None
    _check_columns(list(frame.columns), mapping, path)
    if "score" not in {(mapping or {}).get(c, c) for c in frame.columns} and \
            "verdict" not in {(mapping or {}).get(c, c) for c in frame.columns}:
        raise InputError("needs a 'score' or a 'verdict' column; rename with --map SOURCE=FIELD", file=path,
                         field="score")
    records = frame.to_dict(orient="records")
    rows = [(number, r) for number, r in enumerate(records, 2) if any(str(v).strip() for v in r.values())]
    return judgments_from_records(rows, source=str(path), sha256=sha, mapping=mapping)

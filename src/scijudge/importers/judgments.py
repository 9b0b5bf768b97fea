"""Judgments made elsewhere (released rating files, other tools' logs) as run-store records.

A file (JSONL or CSV) or a DataFrame with one judgment per row: ``item_id``, ``judge``, ``model`` and
``score`` or ``verdict``; optionally ``part``, ``family``, ``rationale``, ``confidence``, ``endpoint``,
``reason``, what ``scijudge export`` writes beside them (``probs``: a decision judgment's level probabilities,
``decoding``, ``tokens_in``, ``tokens_out``: kept, so an export imports back whole), and for perturbed answers
``variant_of`` (the original item's id), ``level`` (``subtle``,
``extreme`` or any name; ``original`` or empty marks an original) and ``changed`` (false: the variant's text
equals the original's, so robustness leaves it out). A row with neither score nor verdict is
an abstention with a reason. Bad rows are collected with their line and field, never guessed at: a score
that is a boolean or not a finite number (JSON ``NaN`` as CSV ``nan``), a second row for the same (item,
judge, part, model, endpoint). Every record carries where it came from (``result.imported_from``,
``result.sha256``, ``result.line``). Line numbers are the file's lines (a CSV field may span several).

Files are read as a stream (``read_judgments``): rows become record dicts one at a time, so an import of any
size takes flat memory. Importers return records and never open a run store: the ``import-judgments``
command writes them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import IO, Any

from scijudge.errors import InputError
from scijudge.records import Columns, JudgeResult, Same

IMPORTED_SPEC_HASH = "imported"
"""spec_hash of imported rows: they come from no scijudge spec, so they never share a key with one."""
REQUIRED_FIELDS = ("item_id", "judge", "model")
OPTIONAL_FIELDS = ("score", "verdict", "part", "family", "rationale", "confidence", "endpoint", "reason",
                   "variant_of", "level", "changed", "probs", "decoding", "tokens_in", "tokens_out")
ORIGINAL_LEVELS = frozenset({"", "original", "benign", "none"})
DEFAULT_FAMILY = "imported"
_GROUP = ("item_id", "judge", "part", "model", "endpoint")
CHUNK_ROWS = 5000
"""Rows per ``Columns`` chunk of a stream."""
_group_of = itemgetter(*_GROUP)


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


class JudgmentStream:
    """Rows read one at a time as record dicts (``JudgeResult.model_dump(mode="json")``'s shape, validated
    here), with the bad rows and counts gathered on the way. Iterate once; then ``finish()`` checks what can
    only be checked at the end (every ``--map`` source column was seen) and raises if it fails."""

    def __init__(self, rows: Iterable[tuple[int, Mapping[str, Any]]], *, source: str, sha256: str = "",
                 mapping: Mapping[str, str] | None = None, check_columns: bool = False) -> None:
        self.source, self.sha256 = source, sha256
        self.errors: list[InputError] = []
        self.n_rows = self.n_imported = self.n_abstained = self.n_variants = 0
        self._rows = rows
        self._mapping = dict(mapping or {})
        self._check_columns = check_columns  # JSONL: sources of the mapping must appear somewhere
        self._seen_sources: set[str] = set()
        self._first_line: dict[tuple[str, ...], int] = {}
        self._created_at = datetime.now(UTC).isoformat(timespec="seconds")
        self._header: list[str] | None = None  # set: rows are lists of values under this header (CSV)

    def bad(self, error: InputError) -> None:
        """Count a row that could not be read at all (not JSON, not UTF-8)."""
        self.n_rows += 1
        self.errors.append(error)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for chunk in self.chunks():
            yield from chunk.dumps()

    def chunks(self, size: int = CHUNK_ROWS) -> Iterator[Columns]:
        """The records as ``Columns`` chunks of up to ``size`` rows, in the file's order (what iterating
        yields, one dump per row). A chunk of common rows (``_plain_chunk``) is built column by column; any
        other row by row (``_record``), its bad rows gathered."""
        batch: list[tuple[int, Mapping[str, Any]]] = []
        for pair in self._rows:
            batch.append(pair)
            if len(batch) >= size:
                yield from self._chunk(batch)
                batch = []
        if batch:
            yield from self._chunk(batch)

    def _chunk(self, batch: list[tuple[int, Mapping[str, Any]]]) -> Iterator[Columns]:
        self.n_rows += len(batch)
        lines = [line for line, _ in batch]
        if self._header is not None:  # CSV records: lists under one header (already renamed)
            header, records = self._header, [record for _, record in batch]
            by_name = dict(zip(header, zip(*records)))  # a name given twice: its last column, as a dict keeps
            empty = (None,) * len(records)
            chunk = None if not _RARE_FIELDS.isdisjoint(by_name) else _plain_chunk(
                lines, lambda name: by_name.get(name, empty), self.source, self.sha256, self._created_at)
            rows: list[Mapping[str, Any]] | None = None  # as dicts only if read row by row below
        else:
            given = self._renamed(batch) if self._mapping else [row for _, row in batch]  # read, never changed
            chunk = None if not all(_RARE_FIELDS.isdisjoint(row) for row in given) else _plain_chunk(
                lines, lambda name: [row.get(name) for row in given], self.source, self.sha256, self._created_at)
            rows = given
        if chunk is not None and self._first_of_groups(chunk, lines):
            self.n_imported += chunk.n
            self.n_abstained += chunk.n - chunk.column("status").count("ok")
            yield chunk
            return
        if rows is None:
            rows = [dict(zip(header, record)) for record in records]
        dumps = []
        for line, row in zip(lines, rows):
            try:
                dump = _record(row, self.source, self.sha256, line, self._created_at)
                first = self._first_line.setdefault(_group_of(dump), line)
                if first != line:
                    raise InputError(f"a second judgment of item {dump['item_id']!r} by judge {dump['judge']!r} "
                                     f"and model {dump['model']!r} (the first is on line {first}); one row per "
                                     "(item, judge, part, model, endpoint)", file=self.source, line=line,
                                     field="item_id")
            except InputError as exc:
                self.errors.append(exc)
                continue
            self.n_imported += 1
            self.n_abstained += dump["status"] == "abstained"
            self.n_variants += bool(dump["result"].get("variant_of"))
            dumps.append(dump)
        if dumps:
            yield Columns.of(dumps)

    def _renamed(self, batch: list[tuple[int, Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
        """The rows with ``--map`` applied (a source column and its target both present: an error)."""
        mapping = self._mapping
        conflicts = [(s, t) for s, t in mapping.items() if t not in mapping]  # a target also present as is
        rows: list[Mapping[str, Any]] = []
        for line, raw in batch:
            if self._check_columns:
                self._seen_sources.update(s for s in mapping if s in raw)
            for source, target in conflicts:
                if source in raw and target in raw:
                    raise _conflict(source, target, self.source, line)
            rows.append({mapping.get(k, k): v for k, v in raw.items()})
        return rows

    def _first_of_groups(self, chunk: Columns, lines: list[int]) -> bool:
        """Record the line of each group of a plain chunk; False (nothing recorded) when a group was seen
        before or comes twice: the chunk is then read row by row, which names each duplicate."""
        new = dict(zip(zip(*(chunk.column(c) for c in _GROUP)), lines))
        if len(new) < chunk.n or not self._first_line.keys().isdisjoint(new):
            return False
        self._first_line.update(new)
        return True

    def finish(self) -> None:
        """Raise when a ``--map`` source column appeared in no row; sort the bad rows by line."""
        if self._check_columns:
            unseen = [s for s in self._mapping if s not in self._seen_sources]
            if unseen and self.n_rows:
                raise InputError(f"--map {unseen[0]}={self._mapping[unseen[0]]}: no row has a field "
                                 f"{unseen[0]!r}", file=self.source, field="map")
        self.errors.sort(key=lambda e: e.line or 0)

    def meta(self) -> dict[str, Any]:
        """Run-level record of this import (file, hash, counts) for ``Run.set_meta``."""
        return {"file": self.source, "sha256": self.sha256, "rows": self.n_rows, "imported": self.n_imported,
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
        if source in out and out[source] != target:
            raise InputError(f"column {source!r} is mapped twice ({out[source]!r} and {target!r})", field="map")
        other = next((s for s, t in out.items() if t == target and s != source), None)
        if other is not None:
            raise InputError(f"two columns are mapped to {target!r}: {other!r} and {source!r}; map one only",
                             field="map")
        out[source] = target
    return out


def _conflict(source: str, target: str, file: str, line: int | None) -> InputError:
    return InputError(f"column {source!r} is mapped to {target!r}, but there is a column {target!r} too: drop "
                      f"one, or map {target!r} to another field", file=file, line=line, field=target)


def _text(value: Any, name: str, source: str, line: int) -> str:
    if value.__class__ is str:
        return value.strip()
    if isinstance(value, bool) or isinstance(value, (dict, list)) or \
            (isinstance(value, float) and not math.isfinite(value)):
        raise InputError(f"{name} {value!r} is not text", file=source, line=line, field=name)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _number(value: Any, name: str, source: str, line: int) -> float:
    if isinstance(value, bool):
        raise InputError(f"{name} {json.dumps(value)} is a boolean, not a number", file=source, line=line, field=name)
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


def _record(row: Mapping[str, Any], source: str, sha: str, line: int, created_at: str) -> dict[str, Any]:
    """One row → one record dict in ``JudgeResult.model_dump(mode="json")``'s shape; raises an InputError
    naming the line and field."""
    given = _present(row)
    values = {}
    for name in REQUIRED_FIELDS:
        value = given.get(name)
        if value is None:
            raise InputError(f"missing {name}", file=source, line=line, field=name)
        values[name] = value.strip() if value.__class__ is str else _text(value, name, source, line)
    text: dict[str, str | None] = dict.fromkeys(_TEXT_FIELDS)
    for name in _TEXT_FIELDS:
        if name in given:
            value = given[name]
            text[name] = value.strip() if value.__class__ is str else _text(value, name, source, line)
    item_id = values["item_id"]
    level, variant_of = text["level"] or "", text["variant_of"] or ""
    if level and level.lower() in ORIGINAL_LEVELS:
        level = ""
    if not level:
        if variant_of:
            raise InputError(f"variant_of {variant_of!r} given for an original (level {text['level'] or 'empty'!r}); "
                             "give the variant's level", file=source, line=line, field="level")
    elif not variant_of or variant_of == item_id:
        # long format: the original and its variants share an id, told apart by level
        variant_of, item_id = item_id, f"{item_id}::{level}"
    provenance: dict[str, Any] = {"imported_from": source, "sha256": sha, "line": line}
    if variant_of:
        provenance.update(variant_of=variant_of, level=level)
        changed = given.get("changed")
        if changed is not None:
            provenance["changed"] = _flag(changed, source, line)
    confidence = given.get("confidence")
    if confidence is not None:
        confidence = _number(confidence, "confidence", source, line)
        if not 0.0 <= confidence <= 1.0:
            raise InputError(f"confidence {confidence:g} is outside [0, 1]", file=source, line=line, field="confidence")
    score = given.get("score")
    if score is not None:
        score = _number(score, "score", source, line)
    verdict = text["verdict"]
    if score is not None and verdict is not None:
        raise InputError("give a score or a verdict, not both", file=source, line=line, field="verdict")
    rationale = given.get("rationale")
    rationale = None if rationale is None else str(rationale)
    kept = _kept(given, source, line)
    dump = dict(_TEMPLATE, item_id=item_id, judge=values["judge"], model=values["model"], part=text["part"] or "",
                family=text["family"] or DEFAULT_FAMILY, spec_hash=IMPORTED_SPEC_HASH, endpoint=text["endpoint"] or "",
                result=provenance, rationale=rationale, created_at=created_at, attempts=[])
    if score is None and verdict is None:
        reason = given.get("reason")
        reason = None if reason is None else str(reason)
        dump.update(status="abstained", reason=reason or f"no score or verdict in {source} line {line}")
    else:
        dump.update(status="ok", score=score, verdict=verdict, confidence=confidence)
    dump.update(kept)
    return dump


def _kept(given: Mapping[str, Any], source: str, line: int) -> dict[str, Any]:
    """The fields of an exported judgment an import keeps: ``probs`` (level -> probability in [0, 1], a mapping
    or its JSON text, as a CSV export writes it), ``decoding`` (text), ``tokens_in``/``tokens_out`` (counts)."""
    kept: dict[str, Any] = {}
    probs = given.get("probs")
    if probs is not None:
        if isinstance(probs, str):
            try:
                probs = json.loads(probs)
            except ValueError:
                probs = None
        if not isinstance(probs, dict) or not all(
                isinstance(p, (int, float)) and not isinstance(p, bool) and 0.0 <= p <= 1.0 for p in probs.values()):
            raise InputError("probs must map each level to a probability in [0, 1] (e.g. {\"1\": 0.2, \"2\": 0.8})",
                             file=source, line=line, field="probs")
        kept["probs"] = {str(k): float(p) for k, p in probs.items()}
    if "decoding" in given:
        kept["decoding"] = _text(given["decoding"], "decoding", source, line) if not isinstance(
            given["decoding"], str) else given["decoding"]
    for name in ("tokens_in", "tokens_out"):
        if name in given:
            count = _number(given[name], name, source, line)
            if count < 0 or count != int(count):
                raise InputError(f"{name} {count:g} is not a count", file=source, line=line, field=name)
            kept[name] = int(count)
    return kept


_TEXT_FIELDS = ("level", "variant_of", "endpoint", "verdict", "part", "family")
_RARE_FIELDS = frozenset(_TEXT_FIELDS) | {"changed", "reason", "probs", "decoding", "tokens_in", "tokens_out"}
_NUMBER_KINDS = frozenset({str, int, float})


def _plain_chunk(lines: list[int], column: Callable[[str], Sequence[Any]], source: str, sha: str,
                 created_at: str) -> Columns | None:
    """The records of these rows column by column (``column(name)``: the rows' values of a field, None where
    absent), when every row is a common one (the caller checked that no row has a field of ``_RARE_FIELDS``):
    item, judge and model non-blank text; score and confidence absent, blank or finite numbers (confidence in
    [0, 1]). None otherwise: the rows are then read one by one by ``_record``, which gives the same records and
    names each bad row (``tests/importers/test_import_fast_path.py`` compares the two on every kind of row)."""
    texts: list[list[str]] = []
    for name in REQUIRED_FIELDS:
        given = column(name)
        if not all(v.__class__ is str for v in given):
            return None
        stripped = [str(v).strip() for v in given]
        if not all(stripped):
            return None
        texts.append(stripped)
    scores = _numbers(column("score"))
    confidences = _numbers(column("confidence"))
    if scores is None or confidences is None or not all(c is None or 0.0 <= c <= 1.0 for c in confidences):
        return None
    rationales = [None if v is None or (v.__class__ is str and (not v or v.isspace())) else str(v)
                  for v in column("rationale")]
    ok = [score is not None for score in scores]
    values: dict[str, list[Any] | Same] = {name: Same(default) for name, default in _TEMPLATE.items()}
    values.update(
        item_id=texts[0], judge=texts[1], model=texts[2], family=Same(DEFAULT_FAMILY),
        spec_hash=Same(IMPORTED_SPEC_HASH), rationale=rationales, created_at=Same(created_at), attempts=Same([]),
        result=[{"imported_from": source, "sha256": sha, "line": line} for line in lines], score=scores,
        status=["ok" if good else "abstained" for good in ok],
        confidence=[c if good else None for c, good in zip(confidences, ok)])
    if not all(ok):
        values["reason"] = [None if good else f"no score or verdict in {source} line {line}"
                            for good, line in zip(ok, lines)]
    return Columns(len(lines), values)


def _numbers(values: Sequence[Any]) -> list[float | None] | None:
    """``_number`` of each given value (absent or blank: None); None when one is not a finite number."""
    kinds = set(map(type, values))
    if kinds <= _NUMBER_KINDS:  # nothing blank, no bool: all at once (a blank or bad text raises, read below)
        try:
            numbers: list[float | None] = list(map(float, values))
        except ValueError:
            pass
        else:
            return numbers if all(map(math.isfinite, numbers)) else None  # type: ignore[arg-type]
    out: list[float | None] = []
    for value in values:
        if value is None or (value.__class__ is str and (not value or value.isspace())):
            out.append(None)
            continue
        if value.__class__ is bool:
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(number):
            return None
        out.append(number)
    return out


_FIELDS = frozenset((*REQUIRED_FIELDS, *OPTIONAL_FIELDS))


def _present(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's known fields that hold a value: absent, None and blank text are missing. One pass over the
    row (a CSV row has one cell per column) costs less than looking up each of the 14 fields in it."""
    out = {}
    for name, value in row.items():
        if value is None or name not in _FIELDS or (value.__class__ is str and (not value or value.isspace())):
            continue
        out[name] = value
    return out


# Every field of a JudgeResult dump at its default; _record fills in what a row gives.
_TEMPLATE: dict[str, Any] = {
    name: info.get_default(call_default_factory=True) for name, info in JudgeResult.model_fields.items()
    if not info.is_required()}


def _results(stream: JudgmentStream) -> ImportedJudgments:
    """Consume a stream into typed results (the Python API: small enough to hold)."""
    results = [JudgeResult.model_validate(dump) for dump in stream]
    stream.finish()
    return ImportedJudgments(results=results, errors=stream.errors, source=stream.source, sha256=stream.sha256,
                             n_rows=stream.n_rows)


def judgments_from_records(
    rows: list[tuple[int, Mapping[str, Any]]], *, source: str, sha256: str = "", mapping: Mapping[str, str] | None = None
) -> ImportedJudgments:
    """Records from (line, row) pairs; column names are first renamed by ``mapping`` (source → field)."""
    return _results(JudgmentStream(rows, source=source, sha256=sha256, mapping=mapping))


def judgments_from_frame(
    frame: Any, *, mapping: Mapping[str, str] | None = None, source: str = "(DataFrame)", first_line: int = 1
) -> ImportedJudgments:
    """The Python equivalent of ``import-judgments``: one DataFrame row per judgment → records.

    Row numbers in error messages start at ``first_line`` (a CSV's first data row is line 2). Missing cells
    (NaN, None) are missing values.
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    _check_header([str(c) for c in frame.columns], mapping, source, kind="column")
    digest = hashlib.sha256(pd.util.hash_pandas_object(frame.astype(str), index=False).to_numpy().tobytes()).hexdigest()
    records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    return judgments_from_records(list(enumerate(records, first_line)), source=source, sha256=digest, mapping=mapping)


def read_judgments(path: str | Path, *, mapping: Mapping[str, str] | None = None) -> JudgmentStream:
    """A JSONL or CSV file of judgments (by extension; ``.csv``/``.tsv`` or else JSONL) as a stream of records.

    Raises (before any row is read) when the file is missing, or when a CSV header lacks a required column or
    names a mapped column twice; bad rows are collected in the stream's ``errors``.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", file=path)
    with path.open("rb") as handle:
        if handle.read(16) == b"SQLite format 3\x00":  # one line, not one "not UTF-8" bad row per line
            raise InputError("an SQLite file (a run store?), not JSONL or CSV judgments: `scijudge export` writes a "
                             "store's judgments as JSONL", file=path)
    sha = _file_sha256(path)
    if path.suffix.lower() in (".csv", ".tsv"):
        return csv_stream(path, sha, mapping, "\t" if path.suffix.lower() == ".tsv" else ",")
    stream = JudgmentStream((), source=str(path), sha256=sha, mapping=mapping, check_columns=True)
    stream._rows = _jsonl_rows(path, stream)
    return stream


def load_judgments(path: str | Path, *, mapping: Mapping[str, str] | None = None) -> ImportedJudgments:
    """Read a JSONL or CSV file of judgments into typed results (``read_judgments`` streams instead)."""
    return _results(read_judgments(path, mapping=mapping))


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _jsonl_rows(path: Path, stream: JudgmentStream) -> Iterator[tuple[int, Mapping[str, Any]]]:
    fast_loads: Any = None  # orjson (a dependency of DSPy) reads a line several times faster
    try:
        import orjson

        fast_loads = orjson.loads
    except ImportError:  # pragma: no cover
        pass
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if not line.strip():
                continue
            obj = None
            if fast_loads is not None:
                try:
                    obj = fast_loads(line)
                except ValueError:  # orjson's JSONDecodeError: json says what is wrong (and reads NaN)
                    obj = None
            try:
                if obj is None:
                    obj = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                stream.bad(InputError(f"not UTF-8 (byte {exc.start} of the line)", file=path, line=number))
                continue
            except json.JSONDecodeError as exc:
                stream.bad(InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=path, line=number))
                continue
            except RecursionError:
                stream.bad(InputError("JSON nested too deeply to read", file=path, line=number))
                continue
            if not isinstance(obj, dict):
                stream.bad(InputError(f"expected a JSON object, got {type(obj).__name__}", file=path, line=number))
                continue
            yield number, obj


def _check_header(columns: list[str], mapping: Mapping[str, str] | None, source: str | Path, *,
                  kind: str = "field") -> None:
    """Fail once, early, on what the header shows: a required column absent, a mapped column absent or
    present under its target name too, neither score nor verdict."""
    mapping = mapping or {}
    for source_column, target in mapping.items():
        if source_column not in columns:
            raise InputError(f"--map {source_column}={target}: no {kind} {source_column!r} (the {kind}s are: "
                             f"{', '.join(columns)})", file=source, field="map")
        if target in columns and target not in mapping:
            raise _conflict(source_column, target, str(source), None)
    names = {mapping.get(c, c) for c in columns}
    missing = [c for c in REQUIRED_FIELDS if c not in names]
    if missing:
        raise InputError(f"no {kind} {missing[0]!r} ({kind}s: {', '.join(columns)}); rename with --map SOURCE=FIELD",
                         file=source, field=missing[0])
    if "score" not in names and "verdict" not in names:
        raise InputError(f"needs a 'score' or a 'verdict' {kind}; rename with --map SOURCE=FIELD", file=source,
                         field="score")


# --- CSV and TSV judgment files ---------------------------------------------------------------------------
def csv_stream(path: Path, sha: str, mapping: Mapping[str, str] | None, sep: str) -> JudgmentStream:
    """A CSV or TSV judgment file as a ``JudgmentStream``: records as lists under one header (renamed once by the
    mapping), each with the line it starts on (a quoted field may span several lines)."""
    import csv

    handle = path.open("r", encoding="utf-8-sig", newline="")
    reader = csv.reader(handle, delimiter=sep)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        handle.close()
        raise InputError("cannot be read as CSV: the file is empty", file=path) from None
    except (csv.Error, UnicodeDecodeError) as exc:
        handle.close()
        raise InputError(f"cannot be read as CSV: {exc}", file=path, line=1) from None
    try:
        _check_header(header, mapping, path)
    except InputError:
        handle.close()
        raise
    stream = JudgmentStream((), source=str(path), sha256=sha)  # renamed once, in the header
    stream._header = [(mapping or {}).get(name, name) for name in header]
    stream._rows = _csv_records(handle, reader, header, path, stream)  # type: ignore[assignment]
    return stream


def _csv_records(handle: IO[str], reader: Any, header: list[str], path: Path,
                 stream: JudgmentStream) -> Iterator[tuple[int, list[str]]]:
    import csv

    width = len(header)
    end = reader.line_num
    with handle:
        while True:
            start = end + 1  # a record's own first line: quoted fields may span several
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise InputError(f"cannot be read as CSV: {exc}", file=path, line=start) from None
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 (byte {exc.start} of a block near line {start})", file=path) from None
            end = reader.line_num
            if not "".join(record).strip():
                continue
            if len(record) != width:
                if len(record) > width:
                    stream.bad(InputError(f"{len(record)} fields, the header has {width}", file=path, line=start))
                    continue
                record += [""] * (width - len(record))
            yield start, record

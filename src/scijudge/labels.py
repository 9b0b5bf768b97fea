"""Human labels: the reference that judges are calibrated and optimized against, and their loaders."""

from __future__ import annotations

import csv
import io
import math
from itertools import islice, repeat
from pathlib import Path
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from scijudge._bulk import collector_paused, text_array
from scijudge.errors import InputError, from_validation_error
from scijudge.vocab import is_finite

LABEL_COLUMNS: tuple[str, ...] = ("item_id", "judge", "part", "score", "verdict", "annotator", "rationale", "source")
LABEL_SOURCES: tuple[str, ...] = ("expert", "crowd", "human", "llm", "unknown")
"""Where a label came from (``human``: a person of unknown expertise, as MLflow records human feedback); agreement
with ``llm`` labels is agreement with another model, never calibration against humans."""
HUMAN_SOURCES: frozenset[str] = frozenset({"expert", "crowd", "human", "unknown"})
CHECKLIST_JUDGE = "researchrubrics.checklist"
"""The judge of a ResearchRubrics verdict file's rows (``importers.researchrubrics.CHECKLIST_JUDGE``)."""
VERDICT_FILE_COLUMNS: dict[str, str] = {"sample_id": "item_id", "criterion": "part"}
"""A ResearchRubrics human-verdict file (``{sample_id, criterion, verdict, annotator}``) read as labels: the
criterion (its text, its id or its 1-based position in the task) is the label's ``part``."""


class HumanLabel(BaseModel):
    """One annotator's score or verdict for one (item, judge) pair.

    ``judge`` is the judge name (rubric) the label refers to, e.g. ``yescieval.qa.correctness``
    or ``researchrubrics.checklist``; ``part`` narrows it inside an item (a checklist criterion id),
    empty for whole-item judges. Exactly one of ``score`` / ``verdict`` is set.
    """

    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(min_length=1)
    judge: str = Field(min_length=1)
    part: str = ""
    score: float | None = None
    verdict: str | None = None
    annotator: str | None = None
    rationale: str | None = None
    comment: str | None = Field(default=None, description="A reviewer's free-text note on the label (`scijudge view`).")
    source: Literal["expert", "crowd", "human", "llm", "unknown"] = Field(
        default="unknown", description="Who labelled: expert, crowd, human (a person), llm (another model) or unknown.")
    labelled_at: str | None = Field(default=None, description="When the label was given (ISO 8601; `scijudge view`).")
    _origin: tuple[str, int] | None = PrivateAttr(default=None)

    @field_validator("score", mode="before")
    @classmethod
    def _real_number(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"score must be a number, not {str(value).lower()}")
        if isinstance(value, (int, float)) and not is_finite(value):
            raise ValueError("score must be a finite number")
        return value

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict_text(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"verdict must be text, got {type(value).__name__} (use 'score' for numbers)")
        return value

    @model_validator(mode="after")
    def _one_of_score_or_verdict(self) -> HumanLabel:
        if (self.score is None) == (self.verdict is None):
            raise ValueError("exactly one of 'score' or 'verdict' must be given")
        return self

    @property
    def origin(self) -> tuple[str, int] | None:
        """(file, line) this label was read from, when it came from a file."""
        return self._origin


def _verdict_file_row(obj: dict[str, Any]) -> dict[str, Any]:
    """A ResearchRubrics verdict row as a label row (no ``item_id`` but a ``sample_id``); others unchanged."""
    if not isinstance(obj, dict) or "item_id" in obj or "sample_id" not in obj:
        return obj
    row = {VERDICT_FILE_COLUMNS.get(k, k): v for k, v in obj.items()}
    row.setdefault("judge", CHECKLIST_JUDGE)
    if isinstance(row.get("part"), int) and not isinstance(row.get("part"), bool):
        row["part"] = str(row["part"])  # a position in the task
    return row


def _validate(obj: dict[str, Any], *, path: Path, line: int) -> HumanLabel:
    obj = _verdict_file_row(obj)
    try:
        label = HumanLabel.model_validate(obj)
    except ValidationError as exc:
        error = from_validation_error(exc, file=path, line=line)
        if error.field is None and "score" in error.reason:  # the model-level one-of check has no field
            error = InputError(error.reason, file=path, line=line, field="score")
        raise error from None
    label._origin = (str(path), line)
    return label


def _jsonl_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) of every label line of a JSONL file; a bad line raises its InputError."""
    from scijudge.data import iter_jsonl

    for line, obj in iter_jsonl(path):
        if isinstance(obj, InputError):
            raise obj
        yield line, obj


def _jsonl_label_columns(path: Path) -> tuple[list[list[Any]], list[int]]:
    """The ``LABEL_COLUMNS`` values and lines of every label of a JSONL file, read as ``_jsonl_objects`` and
    ``_validate`` read them, several times faster.

    orjson reads the lines first, a chunk at a time, and its reading is kept only for plainly valid labels (flat
    text and a score or verdict), where the two decoders agree. A chunk of nothing else is checked and taken
    column by column (``_plain_chunk``); any other chunk goes line by line (``_label_line``), so a blank, malformed
    or unusual line is read by ``json``, and taken or refused with the same message, exactly as before.
    """
    loads: Any = None
    try:
        from orjson import loads
    except ImportError:  # pragma: no cover - orjson comes with DSPy
        pass
    columns: list[list[Any]] = [[] for _ in LABEL_COLUMNS]
    lines: list[int] = []
    same: dict[Any, Any] = {}  # one text object per distinct item, judge and annotator, not one per row
    with path.open("rb") as handle:
        number = 1
        while raws := list(islice(handle, _CHUNK_LINES)):
            plain = _plain_chunk(raws, loads, same) if loads is not None else None
            if plain is not None:
                for column, values in zip(columns, plain):
                    column.extend(values)
                lines.extend(range(number, number + len(raws)))
            else:
                for at, raw in enumerate(raws, start=number):
                    row = _label_line(raw, at, path, loads)
                    if row is not None:
                        for column, value in zip(columns, row):
                            column.append(value)
                        lines.append(at)
            number += len(raws)
    return columns, lines


_CHUNK_LINES = 4096


def _plain_chunk(raws: list[bytes], loads: Any, same: dict[Any, Any]) -> list[list[Any]] | None:
    """The columns of a chunk of JSONL lines when every line is a plainly valid label (what ``_plain_values``
    accepts, checked a column at a time), else None. orjson reads an integer beyond 64 bits as a float where
    json keeps it exact, so a chunk with a score beyond 2**53 is left to ``_label_line`` too."""
    try:
        objs = [loads(raw) for raw in raws]
    except ValueError:  # orjson.JSONDecodeError, a blank line among them: json decides, line by line
        return None
    if set(map(type, objs)) != {dict} or not all(map(_FIELD_SET.issuperset, objs)):
        return None

    def column(name: str, default: Any = None) -> list[Any]:
        return list(map(dict.get, objs, repeat(name), repeat(default)))

    items, judges, parts = column("item_id"), column("judge"), column("part", "")
    if set(map(type, items)) | set(map(type, judges)) | set(map(type, parts)) != {str} \
            or "" in items or "" in judges:
        return None
    scores, verdicts = column("score"), column("verdict")
    score_types, verdict_types = set(map(type, scores)), set(map(type, verdicts))
    if score_types <= _NUMBER and verdict_types == _NONE:
        if not all(map(math.isfinite, scores)) or min(scores) < -(2**53) or max(scores) > 2**53:
            return None
        scores = list(map(float, scores))
    elif not (score_types == _NONE and verdict_types == {str}):
        return None
    annotators, rationales, sources = column("annotator"), column("rationale"), column("source", "unknown")
    if not set(map(type, annotators)) | set(map(type, rationales)) | set(map(type, column("labelled_at"))) \
            | set(map(type, column("comment"))) <= _TEXT_OR_NONE \
            or set(map(type, sources)) != {str} or not set(sources) <= _SOURCE_SET:
        return None
    keep = same.setdefault
    return [list(map(keep, items, items)), list(map(keep, judges, judges)), parts, scores, verdicts,
            list(map(keep, annotators, annotators)), rationales, sources]  # LABEL_COLUMNS order


_NUMBER, _NONE, _TEXT_OR_NONE = frozenset({int, float}), frozenset({type(None)}), frozenset({str, type(None)})
_SOURCE_SET = frozenset(LABEL_SOURCES)


def _label_line(raw: bytes, number: int, path: Path, loads: Any) -> tuple[Any, ...] | None:
    """The ``LABEL_COLUMNS`` values of one JSONL line (None when blank); a bad line raises its InputError."""
    from scijudge.data import jsonl_line

    if loads is not None:
        try:
            first = loads(raw)
        except ValueError:  # orjson.JSONDecodeError: json decides what is wrong
            first = None
        if first.__class__ is dict:
            values = _plain_values(first)
            if values is not None and not (values[3] is not None and abs(values[3]) > 2**53):
                return values
    obj = jsonl_line(raw, number, path)
    if obj is None:
        return None
    if isinstance(obj, InputError):
        raise obj
    plain = _plain_values(obj)
    return plain if plain is not None else _dumped(_validate(obj, path=path, line=number))


def _is_jsonl(path: Path) -> bool:
    return path.exists() and path.suffix.lower() in _JSONL_SUFFIXES


_JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")


def _csv_objects(path: Path, delimiter: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) of every label row of a CSV/TSV file, cells stripped and scores read as numbers."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=path) from exc
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise InputError("empty file: expected a header row", file=path, line=1) from None
    verdict_file = "sample_id" in header and "item_id" not in header
    if verdict_file:
        header = [VERDICT_FILE_COLUMNS.get(h, h) for h in header]
    unknown = [h for h in header if h not in LABEL_COLUMNS]
    if unknown:
        raise InputError(f"unknown column (expected some of {', '.join(LABEL_COLUMNS)})", file=path, line=1,
                         field=unknown[0])
    for required in ("item_id",) if verdict_file else ("item_id", "judge"):
        if required not in header:
            raise InputError("required column is missing", file=path, line=1, field=required)
    if "score" not in header and "verdict" not in header:
        raise InputError("need a 'score' or a 'verdict' column", file=path, line=1, field="score")
    start = reader.line_num + 1
    for row in reader:
        line = start
        start = reader.line_num + 1
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise InputError(f"expected {len(header)} cells, found {len(row)}", file=path, line=line)
        obj: dict[str, Any] = {}
        for name, cell in zip(header, row):
            cell = cell.strip()
            if cell == "":
                continue
            if name == "score":
                try:
                    obj[name] = float(cell)
                except ValueError:
                    raise InputError(f"not a number: {cell!r}", file=path, line=line, field="score") from None
            else:
                obj[name] = cell
        if verdict_file and "judge" not in obj:
            obj["judge"] = CHECKLIST_JUDGE
        yield line, obj


def _label_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) of every label in a JSONL or CSV/TSV file, by its suffix; not yet validated."""
    if not path.exists():
        raise InputError("labels file not found", file=path)
    suffix = path.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        return _jsonl_objects(path)
    if suffix in (".csv", ".tsv"):
        return _csv_objects(path, "\t" if suffix == ".tsv" else ",")
    raise InputError(f"unknown labels format {suffix or '(no suffix)'!r}: use .jsonl or .csv", file=path)


def _check_duplicates(labels: list[HumanLabel], path: Path | None = None) -> None:
    seen: dict[tuple[str, str, str, str], HumanLabel] = {}
    for label in labels:
        key = (label.item_id, label.judge, label.part, label.annotator or "")
        if key in seen:
            first, origin = seen[key].origin, label.origin
            raise _duplicate(key, first[1] if first else None, origin[0] if origin else path,
                             origin[1] if origin else None)
        seen[key] = label


def _duplicate(key: tuple[str, str, str, str], first_line: int | None, file: Any, line: int | None) -> InputError:
    """The error for a second label by one annotator of one (item, judge, part); ``key`` ends with the annotator."""
    item, judge, part, annotator = key
    who = f"annotator {annotator!r}" if annotator else "an unnamed annotator"
    return InputError(f"duplicate label: {who} already labelled item {item!r}, judge {judge!r}"
                      + (f", part {part!r}" if part else "")
                      + (f" (first at line {first_line})" if first_line is not None else ""),
                      file=file, line=line, field="annotator")


def load_labels(path: str | Path) -> list[HumanLabel]:
    """Read human labels from JSONL (one object per line) or CSV/TSV with the same column names.

    Columns: ``item_id, judge, part?, score | verdict, annotator?, rationale?``; a ResearchRubrics verdict file
    (``sample_id, criterion, verdict, annotator?``) is read too, as labels of the checklist judge whose part is
    the criterion (text, id or 1-based position; ``calibrate`` resolves it). Errors name the file, the
    line and the field; two labels by the same annotator for one (item, judge, part) are an error.
    """
    path = Path(path)
    labels = [_validate(obj, path=path, line=line) for line, obj in _label_objects(path)]
    if not labels:
        raise InputError("no labels in file", file=path)
    _check_duplicates(labels, path)
    return labels


def labels_to_frame(labels: list[HumanLabel]) -> Any:
    """Labels as a pandas DataFrame, one row per label, with ``source_file``/``source_line`` when known and the
    label's provenance as ``label_source`` (judgment frames use ``source`` for the run a judgment came from)."""
    _check_duplicates(labels)
    rows = []
    for label in labels:
        origin = label.origin
        rows.append((*_dumped(label), origin[0] if origin else None, origin[1] if origin else None))
    return _frame(rows)


def _dumped(label: HumanLabel) -> tuple[Any, ...]:
    row = label.model_dump()
    return tuple(row[c] for c in LABEL_COLUMNS)


def _frame(rows: list[Any], by_column: bool = False) -> Any:
    """The labels frame from rows of the ``LABEL_COLUMNS`` values, then source file and line (or from those
    columns, ``by_column``: no 2-D array of objects on the way)."""
    import pandas as pd

    names = [*(c if c != "source" else "label_source" for c in LABEL_COLUMNS), "source_file", "source_line"]
    if by_column:
        rows = [text if (text := text_array(values)) is not None else values for values in rows]
    frame = pd.DataFrame(dict(zip(names, rows)) if by_column else rows, columns=names)
    frame["score"] = frame["score"].astype(float)
    frame["source_line"] = frame["source_line"].astype("Int64")
    return frame


def load_labels_frame(path: str | Path) -> Any:
    """``labels_to_frame(load_labels(path))`` without a HumanLabel per row: the same frame and the same errors,
    several times faster and smaller on large files.

    A row whose values are plainly valid (text where text is due, a finite number or a verdict, a known source)
    is taken as it is, which is what ``HumanLabel`` would make of it; any other row goes through ``HumanLabel``
    itself, so it is read, or refused with the same message, exactly as ``load_labels`` does.
    """
    path = Path(path)
    name = str(path)
    with collector_paused():
        columns = _label_columns(path)
    lines = columns.pop()
    annotators = [a or "" for a in columns[5]]
    frame = _frame([*columns, [name] * len(lines), lines], by_column=True)
    keys = frame[["item_id", "judge", "part"]].assign(annotator=annotators)  # _check_duplicates' check, by pandas
    if keys.duplicated().any():  # the first repeated label, named as _check_duplicates names it
        seen: dict[tuple[str, str, str, str], int] = {}
        for key_line in zip(columns[0], columns[1], columns[2], annotators, lines):
            key, line = key_line[:4], key_line[4]
            if key in seen:
                raise _duplicate(key, seen[key], name, line)
            seen[key] = line
    return frame


def labels_frame_of(labels: Any) -> Any:
    """Labels as a frame, from what a caller has: a path (``load_labels_frame``), a list of ``HumanLabel`` or a
    frame (copied, never modified); anything else is one error."""
    import pandas as pd

    if isinstance(labels, (str, Path)):
        return load_labels_frame(labels)
    if isinstance(labels, list) and (not labels or isinstance(labels[0], HumanLabel)):
        return labels_to_frame(labels)
    if isinstance(labels, pd.DataFrame):
        return labels.copy()
    raise InputError(f"labels must be a path, HumanLabels or a DataFrame, got {type(labels).__name__}",
                     field="labels")


def _label_columns(path: Path) -> list[list[Any]]:
    """The ``LABEL_COLUMNS`` values of every label in ``path``, column by column, then their lines."""
    if _is_jsonl(path):
        columns, lines = _jsonl_label_columns(path)
    else:
        records: list[tuple[Any, ...]] = []
        lines = []
        same: dict[Any, Any] = {}  # one text object per distinct item, judge and annotator, not one per row
        for line, obj in _label_objects(path):
            values = _plain_values(obj)
            if values is None:
                values = _dumped(_validate(obj, path=path, line=line))
            records.append(tuple(same.setdefault(v, v) if k in (0, 1, 5) else v for k, v in enumerate(values)))
            lines.append(line)
        columns = [list(column) for column in zip(*records)]
    if not lines:
        raise InputError("no labels in file", file=path)
    return [*columns, lines]


def _plain_values(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    """``HumanLabel.model_validate(obj).model_dump()`` values when ``obj`` is plainly valid, else None (unsure)."""
    if not obj.keys() <= _FIELD_SET:
        return None
    item_id, judge, part = obj.get("item_id"), obj.get("judge"), obj.get("part", "")
    if type(item_id) is not str or type(judge) is not str or type(part) is not str or not item_id or not judge:
        return None
    score, verdict = obj.get("score"), obj.get("verdict")
    if type(score) is float:
        if not math.isfinite(score):
            return None
    elif type(score) is int and -(2**53) <= score <= 2**53:
        score = float(score)
    elif score is not None:
        return None
    if (score is None) == (verdict is None) or type(verdict) not in _TEXT_OR_NONE:
        return None
    annotator, rationale, source = obj.get("annotator"), obj.get("rationale"), obj.get("source", "unknown")
    if type(annotator) not in _TEXT_OR_NONE or type(rationale) not in _TEXT_OR_NONE or type(source) is not str \
            or type(obj.get("labelled_at")) not in _TEXT_OR_NONE or type(obj.get("comment")) not in _TEXT_OR_NONE \
            or source not in LABEL_SOURCES:
        return None
    return item_id, judge, part, score, verdict, annotator, rationale, source  # LABEL_COLUMNS order


_FIELD_SET = frozenset(HumanLabel.model_fields)


def provenance_note(frame: Any) -> tuple[str, bool]:
    """What the labels are, for reports (``"labels: 40 expert, 12 crowd"``), and whether any came from a model.

    Agreement with ``llm`` labels is agreement with another model, never calibration against humans: callers say
    so whenever the second value is true.
    """
    if "label_source" not in getattr(frame, "columns", ()):
        return "labels: source not recorded", False
    counts = frame["label_source"].fillna("unknown").value_counts()
    # "unknown" is the value a label gets when its file says nothing of its source: say so in words
    text = "labels: " + ", ".join(f"{int(n)} (label source not recorded)" if source == "unknown" else f"{int(n)} {source}"
                                  for source, n in counts.items())
    return text, bool(counts.get("llm", 0))

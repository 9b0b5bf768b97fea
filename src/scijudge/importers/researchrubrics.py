"""ResearchRubrics tasks, reports and human verdicts, read into scijudge items and labels.

The public task file (ScaleAI ResearchRubrics, 2025) is JSONL, one task per line::

    {"prompt": ..., "sample_id": ..., "domain": ..., "conceptual_breadth": ..., "logical_nesting": ...,
     "exploration": ..., "rubrics": [{"criterion": ..., "weight": 4.0, "axis": "Explicit Criteria"}, ...]}

Negative weights mark penalty criteria (a fault the report should not show). Reports come as a folder of
``<sample_id>.md`` files (``.txt`` for text extracted from PDFs), or as a JSONL of ``{sample_id, report}``.
Every mismatch is reported: a report without a task is an error (a listed skip with ``skip_invalid``) and a
task without a report is always listed in the skipped list, never silently dropped.

A criterion's id (the run store's ``part``) is a short hash of its whitespace-normalised text, so ids stay the
same when a task's criteria are reordered and human verdicts can name a criterion by id or by text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from scijudge.data import Item, Skipped, iter_jsonl, read_records
from scijudge.errors import InputError, from_validation_error
from scijudge.labels import HumanLabel
from scijudge.spec.rubric_criteria import AXES, Criterion, criterion_id, normalise_text
from scijudge.vocab import CRITERION_VERDICTS, canonical_verdict

CHECKLIST_JUDGE = "researchrubrics.checklist"
REPORT_SUFFIXES: tuple[str, ...] = (".md", ".markdown", ".txt")
VERDICTS: tuple[str, ...] = CRITERION_VERDICTS
_ID_PATTERN = re.compile(r"^c[0-9a-f]{10}$")


class _DuplicateCriterion(ValueError):
    """Two criteria of one task with the same (normalised) text."""

    def __init__(self, index: int, first: int) -> None:
        super().__init__(f"duplicated criterion: same text as rubrics.{first}.criterion")
        self.index = index
        self.first = first


class Task(BaseModel):
    """One ResearchRubrics task: the research prompt and its weighted criteria."""

    model_config = ConfigDict(extra="ignore")

    prompt: str = Field(min_length=1)
    sample_id: str = Field(min_length=1)
    domain: str | None = None
    conceptual_breadth: str | None = None
    logical_nesting: str | None = None
    exploration: str | None = None
    rubrics: list[Criterion] = Field(min_length=1)
    _origin: tuple[str, int] | None = PrivateAttr(default=None)

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("prompt is blank")
        return value

    @field_validator("sample_id")
    @classmethod
    def _sample_id(cls, value: str) -> str:
        if value != value.strip() or not value:
            raise ValueError(f"sample_id {value!r} has leading or trailing whitespace")
        if any(ch in value for ch in "/\\\x00") or value in (".", ".."):
            raise ValueError(f"sample_id {value!r} cannot name a report file (no '/', '\\\\', NUL, '.' or '..')")
        return value

    @model_validator(mode="after")
    def _some_reward(self) -> Task:
        if all(rubric.weight < 0 for rubric in self.rubrics):
            raise ValueError(f"all {len(self.rubrics)} criteria have negative weights (penalties only): compliance "
                             "(sum of weight x score / sum of positive weights) is undefined; give at least one "
                             "criterion a positive weight")
        return self

    @model_validator(mode="after")
    def _unique_criteria(self) -> Task:
        seen: dict[str, int] = {}
        for index, rubric in enumerate(self.rubrics):
            key = normalise_text(rubric.criterion)
            if key in seen:
                raise _DuplicateCriterion(index, seen[key])
            seen[key] = index
        return self

    def criterion_by_id(self) -> dict[str, Criterion]:
        """Criteria keyed by their id."""
        return {c.id: c for c in self.rubrics}

    def to_item(self, report: str, *, report_file: str | None = None) -> Item:
        """The scijudge item judged by the checklist judge: question = prompt, answer = report."""
        meta: dict[str, Any] = {"rubrics": [c.as_meta() for c in self.rubrics]}
        for name in ("domain", "conceptual_breadth", "logical_nesting", "exploration"):
            value = getattr(self, name)
            if value is not None:
                meta[name] = value
        if report_file is not None:
            meta["report_file"] = report_file
        return Item(id=self.sample_id, question=self.prompt, answer=report, meta=meta).set_origin(self._origin)


class Report(BaseModel):
    """One report's text and where it was read from."""

    sample_id: str
    text: str
    file: str
    line: int = 1


# --- tasks -------------------------------------------------------------------------------------------


def _task_error(exc: ValidationError, *, path: Path, line: int) -> InputError:
    first = exc.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, _DuplicateCriterion):
        return InputError(str(cause), file=path, line=line, field=f"rubrics.{cause.index}.criterion")
    error = from_validation_error(exc, file=path, line=line)
    if error.field is None and "negative weights" in error.reason:
        error = InputError(error.reason, file=path, line=line, field="rubrics")
    return error


def read_tasks(path: str | Path, *, skip_invalid: bool = False,
               any_axis: bool = False) -> tuple[list[Task], list[Skipped]]:
    """Read a ResearchRubrics task file; with ``skip_invalid`` bad lines are listed instead of raised.

    Args:
        any_axis: accept axis names outside the published set (kept as written) instead of failing.
    """
    path = Path(path)

    def parse(obj: dict[str, Any], line: int) -> Task:
        try:
            return Task.model_validate(obj, context={"any_axis": any_axis})
        except ValidationError as exc:
            raise _task_error(exc, path=path, line=line) from exc

    return read_records(path, parse, id_of=lambda task: task.sample_id, id_field="sample_id", what="task",
                        skip_invalid=skip_invalid)


def load_tasks(path: str | Path, *, any_axis: bool = False) -> list[Task]:
    """Read and validate a ResearchRubrics task file; the first bad line raises an error naming it."""
    return read_tasks(path, any_axis=any_axis)[0]


# --- reports -----------------------------------------------------------------------------------------


def _decode(raw: bytes, *, file: Path, line: int = 1) -> str:
    """UTF-8 text (a BOM is dropped); a bad byte raises an error naming its line."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = line + raw[: exc.start].count(b"\n")
        raise InputError(f"not UTF-8 text (byte {exc.start}: {exc.reason}); convert the file to UTF-8",
                         file=file, line=bad_line) from None


def clean_report(text: str, *, pdf_text: bool = False) -> str:
    """Normalise line ends; for PDF-extracted text also turn page breaks into blank lines and drop NULs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if pdf_text:
        text = text.replace("\x00", "").replace("\f", "\n\n")
    return text


def _report_error(message: str, *, file: Path, line: int = 1, field: str | None = None) -> InputError:
    return InputError(message, file=file, line=line, field=field)


def _read_report_file(path: Path) -> Report:
    text = clean_report(_decode(path.read_bytes(), file=path), pdf_text=path.suffix.lower() == ".txt")
    if not text.strip():
        raise _report_error("report is empty", file=path)
    return Report(sample_id=path.stem, text=text, file=str(path))


def _report_files(folder: Path) -> Iterable[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _from_folder(folder: Path, skip_invalid: bool) -> tuple[dict[str, Report], list[Skipped]]:
    reports: dict[str, Report] = {}
    skipped: list[Skipped] = []

    def fail(error: InputError) -> None:
        if not skip_invalid:
            raise error
        skipped.append(Skipped(file=error.file or str(folder), line=error.line or 1, field=error.field,
                               reason=error.reason))

    for path in _report_files(folder):
        if path.is_dir():
            continue
        suffix = path.suffix.lower()
        if suffix not in REPORT_SUFFIXES:
            hint = "; extract its text to <sample_id>.txt first (e.g. pdftotext)" if suffix == ".pdf" else ""
            fail(_report_error(f"not a report file (expected {', '.join(REPORT_SUFFIXES)}){hint}", file=path))
            continue
        try:
            report = _read_report_file(path)
        except InputError as error:
            fail(error)
            continue
        if report.sample_id in reports:
            fail(_report_error(f"two reports for sample_id {report.sample_id!r}: also {reports[report.sample_id].file}",
                               file=path, field="sample_id"))
            continue
        reports[report.sample_id] = report
    return reports, skipped


def _from_jsonl(path: Path, skip_invalid: bool) -> tuple[dict[str, Report], list[Skipped]]:
    reports: dict[str, Report] = {}
    skipped: list[Skipped] = []
    for line, obj in iter_jsonl(path):
        error = obj if isinstance(obj, InputError) else None
        if error is None:
            assert isinstance(obj, dict)
            sample_id, text = obj.get("sample_id"), obj.get("report")
            if not isinstance(sample_id, str) or not sample_id.strip():
                error = _report_error("sample_id must be a non-empty string", file=path, line=line, field="sample_id")
            elif not isinstance(text, str):
                error = _report_error("report must be a string (the report's markdown)", file=path, line=line,
                                      field="report")
            elif not text.strip():
                error = _report_error("report is empty", file=path, line=line, field="report")
            elif sample_id in reports:
                error = _report_error(f"duplicated sample_id {sample_id!r} (first on line {reports[sample_id].line})",
                                      file=path, line=line, field="sample_id")
            else:
                reports[sample_id] = Report(sample_id=sample_id, text=clean_report(text), file=str(path), line=line)
                continue
        if not skip_invalid:
            raise error
        skipped.append(Skipped(file=str(path), line=line, field=error.field, reason=error.reason))
    return reports, skipped


def load_reports(path: str | Path, *, skip_invalid: bool = False) -> tuple[dict[str, Report], list[Skipped]]:
    """Reports keyed by sample_id: a folder of ``<sample_id>.md|.markdown|.txt``, one such file, or a JSONL
    of ``{sample_id, report}``. Unreadable, empty or non-UTF-8 reports raise, or are listed with ``skip_invalid``."""
    path = Path(path)
    if not path.exists():
        raise InputError("reports path not found", file=path)
    if path.is_dir():
        return _from_folder(path, skip_invalid)
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return _from_jsonl(path, skip_invalid)
    if suffix in REPORT_SUFFIXES:
        try:
            report = _read_report_file(path)
        except InputError as error:
            if not skip_invalid:
                raise
            return {}, [Skipped(file=str(path), line=error.line or 1, field=error.field, reason=error.reason)]
        return {report.sample_id: report}, []
    raise InputError("reports must be a folder of <sample_id>.md files, one .md/.txt file, or a .jsonl of "
                     "{sample_id, report}", file=path)


# --- tasks + reports -> items ------------------------------------------------------------------------


def load_checklist_items(tasks_path: str | Path, reports_path: str | Path, *, skip_invalid: bool = False,
                         any_axis: bool = False) -> tuple[list[Item], list[Skipped]]:
    """Pair tasks with their reports as checklist items (id = sample_id, question = prompt, answer = report,
    ``meta["rubrics"]`` = the weighted criteria).

    A task without a report is always listed in the skipped list. A report without a task, an invalid task
    line and an unreadable report raise an error naming file, line and field, or are listed with
    ``skip_invalid``. Raises when no task has a report.
    """
    tasks_path, reports_path = Path(tasks_path), Path(reports_path)
    tasks, skipped = read_tasks(tasks_path, skip_invalid=skip_invalid, any_axis=any_axis)
    reports, skipped_reports = load_reports(reports_path, skip_invalid=skip_invalid)
    skipped.extend(skipped_reports)
    by_id = {t.sample_id: t for t in tasks}
    invalid_ids = _skipped_task_ids(tasks_path, skipped)
    for sample_id, unused in reports.items():
        if sample_id in by_id:
            continue
        if sample_id in invalid_ids:
            reason = f"its task (sample_id {sample_id!r}) was skipped as invalid"
        else:
            reason = f"no task with sample_id {sample_id!r} in {tasks_path}"
        error = InputError(reason, file=unused.file, line=unused.line, field="sample_id")
        if not skip_invalid:
            raise error
        skipped.append(Skipped(file=unused.file, line=unused.line, field="sample_id", reason=reason))
    items: list[Item] = []
    for task in tasks:
        report = reports.get(task.sample_id)
        if report is None:
            line = task._origin[1] if task._origin else 1
            skipped.append(Skipped(file=str(tasks_path), line=line, field="sample_id",
                                   reason=f"no report for sample_id {task.sample_id!r} in {reports_path}"))
            continue
        items.append(task.to_item(report.text, report_file=report.file))
    if not items:
        raise InputError(f"no task has a report (looked for <sample_id>.md in {reports_path})", file=tasks_path)
    return items, skipped


def _skipped_task_ids(tasks_path: Path, skipped: list[Skipped]) -> set[str]:
    """sample_ids of task lines that were skipped as invalid (so their reports are explained, not orphaned)."""
    wanted = {s.line for s in skipped if s.file == str(tasks_path)}
    if not wanted:
        return set()
    ids: set[str] = set()
    for line, obj in iter_jsonl(tasks_path):
        if line in wanted and isinstance(obj, dict) and isinstance(obj.get("sample_id"), str):
            ids.add(obj["sample_id"])
    return ids


# --- human verdicts ----------------------------------------------------------------------------------


class _VerdictLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sample_id: str = Field(min_length=1)
    criterion: str = Field(min_length=1)
    verdict: str
    annotator: str | None = None
    rationale: str | None = None

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, value: Any) -> str:
        return canonical_verdict(value)


def load_human_verdicts(path: str | Path, *, tasks: list[Task] | None = None,
                        judge: str = CHECKLIST_JUDGE) -> list[HumanLabel]:
    """Human verdicts JSONL ``{sample_id, criterion, verdict[, annotator, rationale]}`` → HumanLabels.

    ``criterion`` is a criterion id (``c`` + 10 hex digits) or the criterion's text; ``verdict`` is
    Satisfied / Partially Satisfied / Not Satisfied (stored as ``satisfied`` / ``partially`` /
    ``not_satisfied``). With ``tasks``, unknown sample_ids and criteria are errors naming file, line and field.
    Labels get ``judge`` = the checklist judge's name and ``part`` = the criterion id.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("human verdicts file not found", file=path)
    known = {t.sample_id: t.criterion_by_id() for t in tasks} if tasks is not None else None
    labels: list[HumanLabel] = []
    seen: dict[tuple[str, str, str], int] = {}
    for line, obj in iter_jsonl(path):
        if isinstance(obj, InputError):
            raise obj
        try:
            row = _VerdictLine.model_validate(obj)
        except ValidationError as exc:
            raise from_validation_error(exc, file=path, line=line) from None
        part = row.criterion if _ID_PATTERN.match(row.criterion) else criterion_id(row.criterion)
        if known is not None:
            if row.sample_id not in known:
                raise InputError(f"unknown sample_id {row.sample_id!r}: no such task", file=path, line=line,
                                 field="sample_id")
            if part not in known[row.sample_id]:
                raise InputError(f"task {row.sample_id!r} has no such criterion", file=path, line=line,
                                 field="criterion")
        key = (row.sample_id, part, row.annotator or "")
        if key in seen:
            raise InputError(f"duplicated verdict for this criterion (first on line {seen[key]})", file=path,
                             line=line, field="criterion")
        seen[key] = line
        label = HumanLabel(item_id=row.sample_id, judge=judge, part=part, verdict=row.verdict,
                           annotator=row.annotator, rationale=row.rationale)
        label._origin = (str(path), line)
        labels.append(label)
    if not labels:
        raise InputError("no verdicts in file", file=path)
    return labels


__all__ = [
    "AXES",
    "CHECKLIST_JUDGE",
    "VERDICTS",
    "Criterion",
    "Report",
    "Task",
    "canonical_verdict",
    "clean_report",
    "criterion_id",
    "load_checklist_items",
    "load_human_verdicts",
    "load_reports",
    "load_tasks",
    "normalise_text",
    "read_tasks",
]

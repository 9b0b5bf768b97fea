"""Canonical items (JSONL) and their loader: one item per line, errors located by file, line and field."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from scijudge.errors import InputError, from_validation_error

R = TypeVar("R")


class Paper(BaseModel):
    """A source paper as the judge sees it: title and abstract."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(description="Paper title.")
    abstract: str = Field(default="", description="Paper abstract (or the passage the judge should read).")


class Item(BaseModel):
    """One thing to judge: a question, its sources, an answer (and optionally a second answer).

    Judges read their inputs by name: ``question``, ``papers`` (rendered as a numbered list),
    ``answer``, ``answer_b``; any other input name is looked up in ``inputs`` and then ``meta``.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="Unique identifier of the item within its file.")
    question: str = Field(default="", description="The research question the answer addresses.")
    papers: list[Paper] = Field(default_factory=list,
                                description="Source papers in citation order: the first is [1], the second [2], ...")
    answer: str = Field(default="", description="The answer (synthesis, report) to judge.")
    answer_b: str | None = Field(default=None, description="A second answer, for pairwise judges.")
    inputs: dict[str, str] = Field(default_factory=dict,
                                   description="Other named judge inputs (e.g. source_text for materials judges).")
    meta: dict[str, Any] = Field(default_factory=dict, description="Anything else; judges may read inputs from here.")
    _origin: tuple[str, int] | None = PrivateAttr(default=None)

    @field_validator("papers", mode="before")
    @classmethod
    def _papers_mapping(cls, value: Any) -> Any:
        """Papers may also come as a ``{title: abstract}`` mapping (a common export format), in its order."""
        if isinstance(value, dict):
            return [{"title": title, "abstract": "" if abstract is None else abstract}
                    for title, abstract in value.items()]
        return value

    @field_validator("answer", "answer_b")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and value != "" and not value.strip():
            raise ValueError("answer is blank (only whitespace)")
        return value

    @property
    def origin(self) -> tuple[str | None, int | None]:
        """(file, line) the item was read from, for error messages; (None, None) for an item built in code."""
        return self._origin or (None, None)

    def set_origin(self, origin: tuple[str, int] | None) -> Item:
        """Record where the item was read from (importers that build items from other records)."""
        self._origin = origin
        return self

    def papers_text(self) -> str:
        """Sources as the judge reads them: ``[1] Title\\nAbstract`` blocks."""
        return "\n\n".join(f"[{i}] {p.title.strip()}\n{p.abstract.strip()}" for i, p in enumerate(self.papers, 1))

    def value(self, name: str) -> str | None:
        """The text of the named judge input, or None when this item does not have it."""
        if name == "papers":
            return self.papers_text() or None
        if name in ("question", "answer", "answer_b"):
            text = getattr(self, name)
            return text or None
        if name in self.inputs:
            return self.inputs[name]
        if name in self.meta:
            found = self.meta[name]
            return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
        return None


class Skipped(BaseModel):
    """An input line left out under ``--skip-invalid``, with why."""

    file: str
    line: int
    field: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + (f" field '{self.field}'" if self.field else "") + f": {self.reason}"


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any] | InputError]]:
    """Yield (line number, object) for every non-blank line; a bad line yields its InputError instead.

    A UTF-8 byte-order mark on line 1 is skipped; text that is not valid Unicode (lone surrogates such as
    ``"\\ud800"``) and JSON nested too deeply to read are bad lines naming the field, not crashes.
    """
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            obj = jsonl_line(raw, number, path)
            if obj is not None:
                yield number, obj


def jsonl_line(raw: bytes, number: int, path: Path) -> dict[str, Any] | InputError | None:
    """One line of a JSONL file as ``iter_jsonl`` reads it: its object, its InputError, or None when blank."""
    try:
        text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        return InputError(f"not UTF-8 (byte {exc.start})", file=path, line=number)
    if not text.strip():
        return None
    try:
        obj = _loads_line(text)
    except json.JSONDecodeError as exc:
        return InputError(f"malformed JSON: {exc.msg} (column {exc.colno})", file=path, line=number)
    except RecursionError:
        return InputError("JSON nested too deeply to read", file=path, line=number)
    if not isinstance(obj, dict):
        return InputError("each line must be a JSON object", file=path, line=number)
    bad = invalid_text_field(obj) if _may_be_invalid(text) else None
    if bad is not None:
        return InputError(bad[1], file=path, line=number, field=bad[0] or None)
    return obj


_DECODER = json.JSONDecoder()


def _loads_line(text: str) -> Any:
    """``json.loads(text)`` for one JSONL line: the decoder straight on a line that starts with its value and ends
    with it or a newline (most lines); any other line, or one the decoder refuses, goes through ``json.loads``
    itself, so a bad line raises exactly what it would have."""
    try:
        obj, end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):
        return json.loads(text)
    if end == len(text) or (end == len(text) - 1 and text[end] == "\n"):
        return obj
    return json.loads(text)


_MAX_DEPTH = 64


def _may_be_invalid(text: str) -> bool:
    """Whether JSON ``text`` could decode to something ``invalid_text_field`` refuses: a lone surrogate comes only
    from a ``\\u`` escape (valid UTF-8 holds none), and nesting deeper than ``_MAX_DEPTH`` needs more opening
    brackets than that. Most lines have neither, and skip the walk over every value."""
    return "\\u" in text or text.count("{") + text.count("[") > _MAX_DEPTH


def invalid_text_field(value: Any) -> tuple[str, str] | None:
    """(field path, problem) of the first string that is not valid Unicode text or the first part nested
    deeper than any item needs; None when the value is fine. Iterative, so depth cannot crash it."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        where, current, depth = stack.pop()
        if depth > _MAX_DEPTH:
            return where, f"nested more than {_MAX_DEPTH} levels deep"
        if isinstance(current, str):
            try:
                current.encode("utf-8")
            except UnicodeEncodeError as exc:
                return where, f"invalid text: lone surrogate {current[exc.start]!a} at character {exc.start}"
        elif isinstance(current, dict):
            for key, item in reversed(list(current.items())):
                bad_key = invalid_text_field(key) if isinstance(key, str) and not key.isascii() else None
                if bad_key is not None:
                    return where or "(key)", bad_key[1]
                stack.append((f"{where}.{key}" if where else str(key), item, depth + 1))
        elif isinstance(current, list):
            for index in range(len(current) - 1, -1, -1):
                stack.append((f"{where}.{index}" if where else str(index), current[index], depth + 1))
    return None


def read_records(path: str | Path, parse: Callable[[dict[str, Any], int], R], *, id_of: Callable[[R], str],
                 id_field: str, what: str, skip_invalid: bool = False) -> tuple[list[R], list[Skipped]]:
    """Read a JSONL file of records with unique ids; one place for the rules every importer follows.

    ``parse(obj, line)`` validates one object (raising InputError). A bad line stops the read unless
    ``skip_invalid``, which lists it instead; a repeated id is a bad line naming the first one. Each record that
    has an ``_origin`` attribute is told its (file, line), so later errors can point back to it.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{what} file not found", file=path)
    if path.is_dir():
        raise InputError(f"expected a JSONL {what} file, got a folder", file=path)
    records: list[R] = []
    skipped: list[Skipped] = []
    seen: dict[str, int] = {}
    for number, obj in iter_jsonl(path):
        error: InputError | None = obj if isinstance(obj, InputError) else None
        if not isinstance(obj, InputError):
            try:
                record = parse(obj, number)
            except InputError as exc:
                error = exc
            else:
                key = id_of(record)
                if key in seen:
                    error = InputError(f"duplicated {id_field} {key!r} (first on line {seen[key]})",
                                       file=path, line=number, field=id_field)
                else:
                    seen[key] = number
                    if hasattr(record, "_origin"):
                        record._origin = (str(path), number)
                    records.append(record)
                    continue
        assert error is not None  # every path above that did not ``continue`` set it
        if not skip_invalid:
            raise error
        skipped.append(Skipped(file=str(path), line=number, field=error.field, reason=error.reason))
    if not records and not skipped:
        raise InputError(f"no {what}s in file", file=path)
    return records, skipped


def load_items(path: str | Path, *, skip_invalid: bool = False) -> tuple[list[Item], list[Skipped]]:
    """Read canonical items. Stops at the first bad line unless ``skip_invalid``; ids must be unique."""
    path = Path(path)

    def parse(obj: dict[str, Any], line: int) -> Item:
        try:
            return Item.model_validate(obj)
        except ValidationError as exc:
            raise from_validation_error(exc, file=path, line=line) from exc

    return read_records(path, parse, id_of=lambda item: item.id, id_field="id", what="item",
                        skip_invalid=skip_invalid)


def item_json_schema() -> dict[str, Any]:
    """The JSON Schema of one item line, generated from the model (kept in datasets/items.schema.json)."""
    schema = Item.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "scijudge item"
    return schema

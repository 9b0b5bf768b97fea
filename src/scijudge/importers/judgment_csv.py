"""Judgment files in CSV or TSV as a ``JudgmentStream``: records as lists under one header (renamed once by
``--map``), each with the line it starts on (a quoted field may span several lines)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any
from collections.abc import Iterator, Mapping

from scijudge.errors import InputError
from scijudge.importers.judgments import JudgmentStream, _check_header


def csv_stream(path: Path, sha: str, mapping: Mapping[str, str] | None, sep: str) -> JudgmentStream:
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
    stream._rows = _records(handle, reader, header, path, stream)  # type: ignore[assignment]
    return stream


def _records(handle: IO[str], reader: Any, header: list[str], path: Path,
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

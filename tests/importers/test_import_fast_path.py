"""Chunks of common rows built column by column give the records and errors that reading each row gives."""

from __future__ import annotations

import itertools
import math

import pytest

from scijudge.errors import InputError
from scijudge.importers import judgments as J

TEXT = ["q1", "  q1  ", "", "   ", None, 7, 7.0, 2.5, True]
NUMBER = [None, "", "  ", "3", " 4.5 ", "0", "nan", "inf", "x", 3, 2.0, True, float("nan"), "0.42", "1.5", "-0.1"]
RATIONALE = [None, "", "  ", "Cites the papers.", "  padded  ", 12]


def _reference(pairs, stream):
    """What reading each row on its own gives: its record, or its error (duplicates named as the stream does)."""
    records, errors, first = [], [], {}
    for line, row in pairs:
        try:
            dump = J._record(row, stream.source, stream.sha256, line, stream._created_at)
        except InputError as exc:
            errors.append(str(exc))
            continue
        group = tuple(dump[c] for c in J._GROUP)
        if first.setdefault(group, line) != line:
            errors.append(f"second:{line}")
            continue
        records.append(dump)
    return records, errors


def _same(left: dict, right: dict) -> bool:
    if left.keys() != right.keys():
        return False
    for key in left:
        x, y = left[key], right[key]
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y or type(x) is not type(y):
            return False
    return True


def _rows():
    for item, judge, model in itertools.product(TEXT, ["j", " j "], ["m", ""]):
        yield {"item_id": item, "judge": judge, "model": model, "score": "3"}
    for score, confidence in itertools.product(NUMBER, NUMBER):
        yield {"item_id": "q", "judge": "j", "model": "m", "score": score, "confidence": confidence}
    for rationale in RATIONALE:
        yield {"item_id": "q", "judge": "j", "model": "m", "score": 2, "rationale": rationale, "annotator": "a"}
        yield {"item_id": "q", "judge": "j", "model": "m", "rationale": rationale}  # an abstention
    yield {"item_id": "q", "judge": "j", "model": "m"}  # no score column at all
    yield {"item_id": "q", "judge": "j", "model": "m", "score": "3", "part": "a"}
    yield {"item_id": "q", "judge": "j", "model": "m", "score": "3", "level": "subtle"}
    yield {"item_id": "q", "judge": "j", "model": "m", "verdict": "yes"}
    yield {"item_id": "q", "judge": "j", "model": "m", "reason": "timeout"}


def _cases():
    """Each row alone (one item id per row, so that only the rows made duplicates on purpose collide), then
    chunks of plain rows with one bad or duplicated row among them."""
    rows = [dict(row, item_id=f"{row['item_id']}-{n}") if isinstance(row.get("item_id"), str)
            and row["item_id"].strip() else row for n, row in enumerate(_rows())]
    yield rows, 1
    plain = [{"item_id": f"q{n}", "judge": "j", "model": "m", "score": str(1 + n % 5), "confidence": "0.5",
              "rationale": "why"} for n in range(40)]
    yield plain, 8
    yield plain[:10] + [{"item_id": "q3", "judge": "j", "model": "m", "score": "2"}] + plain[10:], 8  # duplicate
    yield plain[:5] + [{"item_id": "bad", "judge": "j", "model": "m", "score": "x"}] + plain[5:], 8
    yield plain[:5] + [{"item_id": "v", "judge": "j", "model": "m", "score": "1", "level": "subtle"}] + plain[5:], 16
    yield plain[:3] + [{"item_id": "n", "judge": "j", "model": "m", "score": "", "confidence": "0.9"}], 16


@pytest.mark.parametrize("case", range(6))
def test_chunks_give_the_records_and_errors_that_reading_each_row_gives(case):
    rows, size = list(_cases())[case]
    pairs = list(enumerate(rows, 2))
    stream = J.JudgmentStream(pairs, source="file.csv", sha256="abc")
    got = [dump for chunk in stream.chunks(size) for dump in chunk.dumps()]
    records, errors = _reference(pairs, stream)
    assert len(got) == len(records) and all(_same(a, b) for a, b in zip(got, records)), (got, records)
    assert len(stream.errors) == len(errors)
    for error, expected in zip(stream.errors, errors):
        assert str(error) == expected or ("second judgment" in str(error) and expected.startswith("second:"))
    assert stream.n_imported == len(records) and stream.n_rows == len(rows)
    assert stream.n_abstained == sum(r["status"] == "abstained" for r in records)


@pytest.mark.parametrize("case", range(6))
def test_csv_chunks_give_the_records_and_errors_that_reading_each_row_gives(case):
    """CSV rows come as lists under one header: every cell text, an absent one blank."""
    rows, size = list(_cases())[case]
    header = list(dict.fromkeys(name for row in rows for name in row))
    cells = [["" if row.get(name) is None else str(row[name]) for name in header] for row in rows]
    pairs = list(enumerate(cells, 2))
    stream = J.JudgmentStream(pairs, source="file.csv", sha256="abc")
    stream._header = header
    got = [dump for chunk in stream.chunks(size) for dump in chunk.dumps()]
    records, errors = _reference([(line, dict(zip(header, c))) for line, c in pairs], stream)
    assert len(got) == len(records) and all(_same(a, b) for a, b in zip(got, records)), (got, records)
    assert [str(e) for e in stream.errors if "second judgment" not in str(e)] == [
        e for e in errors if not e.startswith("second:")]


def test_plain_chunks_are_built_column_by_column():
    rows = [{"item_id": f"q{n}", "judge": "j", "model": "m", "score": "3"} for n in range(10)]

    def column(rows):
        return lambda name: [row.get(name) for row in rows]

    assert J._plain_chunk(list(range(2, 12)), column(rows), "f", "s", "t") is not None
    assert J._plain_chunk([2], column([{"item_id": "q", "judge": "j", "model": "m", "score": True}]), "f", "s",
                          "t") is None
    assert J._numbers(["1", 2, 3.5]) == [1.0, 2.0, 3.5] and J._numbers(["1", ""]) == [1.0, None]
    assert J._numbers(["1", "nan"]) is None and J._numbers([1, True]) is None and J._numbers(["x"]) is None


def test_a_variant_row_keeps_its_level_and_original():
    row = {"item_id": "q", "judge": "j", "model": "m", "score": "3", "level": "subtle", "part": ""}
    dump = J._record(row, "f", "s", 4, "t")
    assert dump["item_id"] == "q::subtle"
    assert dump["result"] == {"imported_from": "f", "sha256": "s", "line": 4, "variant_of": "q", "level": "subtle"}

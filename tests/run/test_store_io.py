"""The run store's edges: reads never write, newer schemas refused, record_many equals record, columns read
alone, exports redact stored credentials, a corrupt page and a full disk give one line."""

from __future__ import annotations

import hashlib
import json
import math
import random
import sqlite3

import pandas as pd
import pytest

from scijudge.errors import EXIT_STOPPED, InputError
from scijudge.records import RUN_COLUMNS, Attempt, JudgeResult
from scijudge.run.store import Run, StoreWriteError


def _result(n: int, **extra) -> JudgeResult:
    values = dict(item_id=f"q{n}", judge="j", family="likert", spec_hash="h", model="m", status="ok",
                  score=float(n % 5 + 1), result={"rating": n % 5 + 1}, rationale=f"r{n}",
                  attempts=[Attempt(strategy="json_schema", temperature=0.0, outcome="ok")],
                  created_at="2026-12-01T10:00:00+00:00")
    values.update(extra)
    return JudgeResult(**values)


def _store(path, n: int = 30) -> None:
    with Run(path) as run:
        for k in range(n):
            run.record(_result(k))
        run.record(_result(0, score=2.0, input_hash="new"))  # q0 again, other content: one history row
        run.set_meta(model="m")


def _files(folder) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


def test_reading_and_exporting_change_no_byte_of_the_store(tmp_path):
    folder = tmp_path / "store"
    folder.mkdir()
    path = folder / "r.sqlite"
    _store(path)
    before = _files(folder)
    with Run(path, create=False) as run:
        assert run.readonly and len(run) == 31 and run.meta()["model"] == "m"
        assert len(list(run.rows(history=True))) == 31 and len(run.to_pandas()) == 30
        for fmt in ("jsonl", "csv"):
            assert run.export(tmp_path / f"out.{fmt}", fmt) == 30
        run.completed_keys()
        run.current_index()
    assert _files(folder) == before  # no byte changed, no file added (no -wal, -shm, .lock)
    with Run(path) as run:  # opened for writing only when something is written
        assert run.readonly
        run.set_meta(note="x")
        assert not run.readonly
    assert _files(folder)["r.sqlite"] != before["r.sqlite"] or "r.sqlite-wal" in _files(folder)


def test_a_store_of_a_newer_schema_is_refused_with_both_versions(tmp_path):
    path = tmp_path / "new.sqlite"
    _store(path, 2)
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    before = path.read_bytes()
    for open_ in (lambda: Run(path, create=False), lambda: Run(path).record(_result(9))):
        with pytest.raises(InputError, match="schema version 3, newer than the version 2") as info:
            open_()
        assert str(path) in str(info.value)
    assert path.read_bytes() == before


def test_record_many_leaves_the_table_record_leaves(tmp_path):
    rng = random.Random(1)
    results = [JudgeResult(item_id=f"q{rng.randint(0, 40)}", judge=rng.choice("ab"), family="likert",
                           spec_hash="h", model="m", input_hash=f"in{rng.randint(0, 2)}", status="ok",
                           score=float(rng.randint(1, 5)), created_at=f"t{n}") for n in range(600)]

    def table(path):
        db = sqlite3.connect(path)
        try:
            return db.execute("SELECT rowid, * FROM judgments ORDER BY rowid").fetchall()
        finally:
            db.close()

    with Run(tmp_path / "one.sqlite") as run:
        for r in results:
            run.record(r)
    expected = table(tmp_path / "one.sqlite")
    assert 0 < sum(row[-1] for row in expected) < len(expected)  # history and replaced keys both occur
    for chunk in (1, 7, 5000):
        with Run(tmp_path / f"many{chunk}.sqlite") as run:
            assert run.record_many((r.model_dump(mode="json") for r in results[:300]), chunk=chunk) == 300
            with run.transaction():
                run.record_many((r.model_dump(mode="json") for r in results[300:]), chunk=chunk)
        assert table(tmp_path / f"many{chunk}.sqlite") == expected
        with Run(tmp_path / f"fresh{chunk}.sqlite") as run, run.transaction():  # empty: the group index is deferred
            run.record_many((r.model_dump(mode="json") for r in results), chunk=chunk)
        assert table(tmp_path / f"fresh{chunk}.sqlite") == expected
        indexes = sqlite3.connect(tmp_path / f"fresh{chunk}.sqlite").execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'judgments'").fetchall()
        assert ("judgments_group",) in indexes

    # the same judgments given column by column, in chunks of every kind: listed fields and shared ones
    from scijudge.records import Columns, Same

    dumps = [r.model_dump(mode="json") for r in results]
    for size in (1, 7, 600):
        chunks = []
        for start in range(0, len(dumps), size):
            chunk = Columns.of(dumps[start:start + size])
            chunk.values.update(family=Same("likert"), attempts=Same([]), reason=Same(None))
            chunks.append(chunk)
        with Run(tmp_path / f"columns{size}.sqlite") as run:
            assert run.record_columns(chunks) == len(dumps)
        assert table(tmp_path / f"columns{size}.sqlite") == expected


def test_columns_redact_and_encode_as_record_does(tmp_path, monkeypatch):
    from scijudge.records import Columns

    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-abcdefghijklmnop")
    results = [_result(1, reason="failed: Authorization: Bearer sk-abcdefghijklmnop", status="abstained", score=None,
                       attempts=[Attempt(strategy="json_schema", temperature=0.0, outcome="timeout",
                                         error="token=sk-abcdefghijklmnop")]),
               _result(2, probs={"1": float("nan"), "2": 0.5}, result={"x": "é", "n": None}),
               _result(3, attempts=[])]
    with Run(tmp_path / "one.sqlite") as run:
        for r in results:
            run.record(r)
    with Run(tmp_path / "cols.sqlite") as run:
        run.record_columns([Columns.of([r.model_dump(mode="json") for r in results])])
    rows = [sqlite3.connect(tmp_path / name).execute("SELECT * FROM judgments ORDER BY rowid").fetchall()
            for name in ("one.sqlite", "cols.sqlite")]
    assert rows[0] == rows[1]
    assert "sk-abcdefghijklmnop" not in repr(rows[1]) and "***" in rows[1][0][RUN_COLUMNS.index("reason")]
    assert rows[1][1][RUN_COLUMNS.index("probs")] == '{"1": NaN, "2": 0.5}'  # NaN kept, as json writes it


def test_a_transaction_is_undone_on_ctrl_c(tmp_path):
    path = tmp_path / "r.sqlite"
    _store(path, 3)

    def rows():
        for k in range(100, 120):
            yield _result(k).model_dump(mode="json")
        raise KeyboardInterrupt

    with Run(path) as run:
        with pytest.raises(KeyboardInterrupt), run.transaction():
            run.record_many(rows(), chunk=5)
        assert len(run) == 4


def test_to_pandas_reads_only_the_columns_asked_for_and_its_default_is_unchanged(tmp_path):
    path = tmp_path / "r.sqlite"
    _store(path)
    with Run(path, create=False) as run:
        full = run.to_pandas()
        expected = pd.DataFrame(list(run.rows()), columns=list(full.columns))  # the previous construction
        pd.testing.assert_frame_equal(full, expected)
        part = run.to_pandas(columns=["item_id", "judge", "score", "result"])
        assert list(part.columns) == ["item_id", "judge", "score", "result"]
        pd.testing.assert_frame_equal(part, expected[["item_id", "judge", "score", "result"]])
        assert len(run.to_pandas(history=True, columns=["key"])) == 31
        with pytest.raises(InputError, match="unknown run-store column 'nope'"):
            run.to_pandas(columns=["nope"])


def test_export_redacts_credentials_stored_before_redaction_in_every_free_text_field(tmp_path, monkeypatch):
    secret = 'quo"te-sécret-9876'
    monkeypatch.setenv("MY_SERVICE_API_KEY", secret)
    path = tmp_path / "old.sqlite"
    _store(path, 2)
    db = sqlite3.connect(path)  # as a release before redaction wrote them
    db.execute("UPDATE judgments SET rationale = ?, result = ?, attempts = ? WHERE item_id = 'q1'",
               (f"saw {secret}", json.dumps({"note": f"key {secret}", "url": "http://u:pw123456@h/v1"}),
                json.dumps([{"strategy": "json", "temperature": 0, "outcome": "server_error",
                             "error": "Authorization: Bearer abcdefghijkl"}])))
    db.commit()
    db.close()
    with Run(path, create=False) as run:
        for fmt in ("jsonl", "csv"):
            run.export(tmp_path / f"out.{fmt}", fmt)
    for fmt in ("jsonl", "csv"):
        text = (tmp_path / f"out.{fmt}").read_text(encoding="utf-8")
        for leaked in (secret, json.dumps(secret)[1:-1], "pw123456", "abcdefghijkl"):
            assert leaked not in text, (fmt, leaked)
    rows = {json.loads(line)["item_id"]: json.loads(line)
            for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()}
    assert rows["q1"]["result"] == {"note": "key ***", "url": "http://***@h/v1"}
    assert rows["q1"]["attempts"][0]["error"] == "Authorization: ***" and rows["q1"]["rationale"] == "saw ***"
    assert rows["q0"]["result"] == {"rating": 1} and rows["q0"]["attempts"][0]["outcome"] == "ok"


def test_a_corrupt_page_is_one_line(tmp_path):
    path = tmp_path / "r.sqlite"
    with Run(path) as run:
        run.record_many(_result(k, rationale="x" * 400).model_dump(mode="json") for k in range(400))
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 20 * page
    data[10 * page:12 * page] = b"\xa5" * (2 * page)  # two pages in the middle of the table
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="damaged run store .SQLite: database disk image is malformed.; judge into a new") as info:
        with Run(path) as run:
            run.completed_keys()
            list(run.rows())
    assert str(path) in str(info.value)


class _FullDisk:
    """A connection whose INSERTs fail as on a full disk once ``after`` have gone through."""

    def __init__(self, db: sqlite3.Connection, after: int) -> None:
        self._db, self.left = db, after

    def execute(self, sql: str, *args):
        if sql.startswith("INSERT OR REPLACE INTO judgments"):
            if self.left <= 0:
                raise sqlite3.OperationalError("database or disk is full")
            self.left -= 1
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._db, name)


@pytest.mark.slow  # seconds: 12,000 rows / a loopback judging run
def test_a_full_disk_stops_the_run_with_one_line_and_the_rerun_sends_only_what_was_not_stored(loopback, tmp_path):
    from test_result_integrity import items, judges, rating_from_prompt

    from scijudge import judge_items

    server = loopback(rating_from_prompt)
    judge = judges(server.url, names=("t.a",))[0]
    path = tmp_path / "r.sqlite"
    with Run(path) as run:
        run.claim_writer()
        run._db = _FullDisk(run._db, after=5)  # type: ignore[assignment]
        with pytest.raises(StoreWriteError, match="database or disk is full") as info:
            judge_items(items(40), [judge], run, concurrency=2)
        run._db = run._db._db  # type: ignore[attr-defined]
    assert info.value.exit_code == EXIT_STOPPED and "re-run to resume" in str(info.value)
    assert info.value.summary.judged == 5  # type: ignore[attr-defined]
    first = server.count
    assert first <= 5 + 1 + 2 * 2, "the run stopped at the failed write, not after sending everything"
    with Run(path, create=False) as run:
        assert len(run) == 5
    with Run(path) as run:
        summary = judge_items(items(40), [judge], run, concurrency=2)
    assert summary.skipped_done == 5 and summary.judged == 35 and server.count - first == 35


def test_jsonl_lines_are_the_same_bytes_with_or_without_orjson(tmp_path, monkeypatch):
    import orjson

    from scijudge.redaction import redactor
    from scijudge.run.export import _json_line, _orjson_line, _redact_row

    monkeypatch.setenv("MY_SERVICE_API_KEY", "sécret-value-42")
    path = tmp_path / "r.sqlite"
    with Run(path) as run:
        run.record(_result(1, rationale='é "quoted" sécret-value-42', result={"x": 0.1 + 0.2, "big": 1e20}))
        run.record(_result(2, probs={"1": 0.25, "2": 0.75}, verdict="Yes", score=None))
    with Run(path, create=False) as run:
        rows = list(run.raw_rows())
    one = redactor()
    fast = [_orjson_line(orjson)(row, _redact_row(row, one)) for row in [dict(r) for r in rows]]
    plain = [_json_line()(row, _redact_row(row, one)) for row in [dict(r) for r in rows]]
    assert fast == plain
    decoded = [json.loads(line) for line in fast]
    assert decoded[0]["rationale"] == 'é "quoted" ***' and decoded[0]["result"] == {"x": 0.1 + 0.2, "big": 1e20}
    assert decoded[1]["probs"] == {"1": 0.25, "2": 0.75} and decoded[1]["current"] is True


def test_dumps_each_gives_each_value_what_orjson_gives_it_alone():
    import orjson

    from scijudge.run._orjson import dumps_each

    values = [{"a": 1, "b": "x,\n,y"}, [1, 2.5, None], "é\t\"", 0.1 + 0.2, {"f": orjson.Fragment(b'{"z":1}')},
              {"g": orjson.Fragment(b'[1,\n,2]')}, True, {}]  # the last but two holds the separator itself
    assert dumps_each(values) == [orjson.dumps(v) for v in values]
    assert dumps_each(values[:1]) == [orjson.dumps(values[0])] and dumps_each([]) == []
    # what orjson refuses comes back as None, in its place (the caller encodes it another way)
    assert dumps_each([{1: "non-str key"}, {"a": 1}, object()]) == [None, orjson.dumps({"a": 1}), None]


def test_judgment_keys_are_judgment_key_of_each():
    from scijudge.records import judgment_key, judgment_keys

    rows = [("q1", "j", "", "h", "m", "", "", ""), ("q2", "j", "p", "h", "m", "http://e", "", ""),
            ("q3", "j", "", "h", "m", "", "in", ""), ("q4", "j", "", "h", "m", "", "", '{"t":0}'), ("é", "j", "", "", "m", "", "", "")]
    assert judgment_keys(*zip(*rows)) == [judgment_key(*row) for row in rows]
    assert judgment_key("q1", "j", "", "h", "m") == hashlib.sha256(b"q1\x1fj\x1f\x1fh\x1fm").hexdigest()[:32]


def test_to_pandas_decodes_json_columns_as_json_does_nan_and_corrupt_rows_included(tmp_path):
    path = tmp_path / "r.sqlite"
    with Run(path) as run:
        run.record(_result(1, probs={"1": 0.25, "2": 0.75}, result={"x": [1, {"y": "é"}]}))
        run.record(_result(2, probs={"1": float("nan")}, result=None))  # json writes NaN; orjson refuses it
        run.record(_result(3, probs=None, result={"big": 10**30}))
    db = sqlite3.connect(path)
    texts = db.execute("SELECT probs, result, attempts FROM judgments ORDER BY rowid").fetchall()
    db.close()
    with Run(path, create=False) as run:
        frame = run.to_pandas(columns=["item_id", "probs", "result", "attempts"])
    for column, at in (("probs", 0), ("result", 1), ("attempts", 2)):
        expected = [None if t[at] is None else json.loads(t[at]) for t in texts]
        got = list(frame[column])
        assert repr(got) == repr(expected), column  # repr: NaN equals NaN
    db = sqlite3.connect(path)
    db.execute("UPDATE judgments SET result = '{\"x\": ' WHERE item_id = 'q3'")
    db.commit()
    db.close()
    with Run(path, create=False) as run, pytest.raises(InputError, match="damaged run store: 1 row cannot be "
                                                       "read .item 'q3', judge '[^']*': result is not readable JSON"):
        run.to_pandas(columns=["result"])


def _reference_frame(path, columns) -> pd.DataFrame:
    """The frame by plain pandas: one DataFrame.from_records of the stored rows, JSON columns by json.loads."""
    db = sqlite3.connect(path)
    rows = db.execute(f"SELECT {', '.join(columns)} FROM judgments WHERE current = 1 ORDER BY rowid").fetchall()
    db.close()
    frame = pd.DataFrame.from_records(rows, columns=columns, coerce_float=True)
    for column in ("probs", "result", "attempts"):
        if column in columns:
            frame[column] = [None if v is None else json.loads(v) for v in frame[column].tolist()]
    if "current" in columns:
        frame["current"] = frame["current"].astype(bool)
    return frame


@pytest.mark.parametrize("odd", ["none", "sql"])
def test_to_pandas_is_the_plain_pandas_frame_of_the_stored_rows(tmp_path, odd):
    """to_pandas builds text columns by pyarrow and the rest by pandas, a column at a time: the same dtypes and
    values as one DataFrame.from_records of the rows, also where SQL wrote odd values the schema allows (a column
    of nothing but NULL, free text where none was, an empty text). Values the schema does not allow are refused
    (``test_to_pandas_refuses_a_value_the_schema_does_not_allow``)."""
    path = tmp_path / "r.sqlite"
    with Run(path) as run:
        for n in range(40):
            run.record(_result(n, part="p" if n % 3 else "", rationale=("é😀" if n % 2 else None)))
    if odd == "sql":
        db = sqlite3.connect(path)
        db.execute("UPDATE judgments SET reason = 'why' WHERE item_id = 'q5'")
        db.execute("UPDATE judgments SET verdict = NULL")
        db.execute("UPDATE judgments SET score = NULL WHERE item_id = 'q6'")
        db.execute("UPDATE judgments SET score = 3 WHERE item_id = 'q9'")
        db.execute("UPDATE judgments SET item_id = '' WHERE item_id = 'q7'")
        db.commit()
        db.close()
    for columns in (list(RUN_COLUMNS), ["score", "probs", "judge", "result", "current"], ["verdict"], ["tokens_in"]):
        with Run(path, create=False) as run:
            got = run.to_pandas(columns=columns)
        expected = _reference_frame(path, columns)
        assert got.dtypes.to_dict() == expected.dtypes.to_dict(), columns
        pd.testing.assert_frame_equal(got, expected)


@pytest.mark.parametrize(("sql", "column"), [
    ("judge = x'6a'", "judge"), ("score = 'high'", "score"), ("rationale = x'00ff'", "rationale"),
    ("status = ''", "status"), ("status = 'error'", "status"), ("tokens_in = 1.5", "tokens_in"),
])
def test_to_pandas_refuses_a_value_the_schema_does_not_allow(tmp_path, sql, column):
    """A value scijudge never writes (read back from a damaged page, or written by hand) is one line naming the
    store, the row's item and the column, from every reader; a reader of other columns is not stopped by it."""
    path = tmp_path / "r.sqlite"
    with Run(path) as run:
        for n in range(5):
            run.record(_result(n))
    db = sqlite3.connect(path)
    db.execute(f"UPDATE judgments SET {sql} WHERE item_id = 'q3'")
    db.commit()
    db.close()
    with Run(path, create=False) as run:
        for read in (run.to_pandas, lambda: list(run.rows()), lambda: run.export(tmp_path / "o.jsonl")):
            with pytest.raises(InputError, match=f"damaged run store: 1 row cannot be read .item 'q3', judge "
                                                 f"[^:]*: {column} ") as info:
                read()
            assert info.value.file == str(path) and info.value.field == column
        others = [c for c in ("item_id", "score", "tokens_in") if c != column]
        assert len(run.to_pandas(columns=others)) == 5
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("texts", [
    ['{"1": 0.25, "2": 0.75}', '{"x": [1, {"y": "\\u00e9"}]}', "null", '"text"', "[]"],
    ['{"n": -9223372036854775809}'], ['{"n": 18446744073709551616}'], ['{"n": 18446744073709551615}'],
    ['{"h": "1234567890123456789"}'], ['{"x": NaN}'], ['{"x": 1e400}'], ['{"x": -1e-400}'], ['"\\ud800"'],
    ['{"a": 1, "a": 2}'], ["[" * 2000 + "]" * 2000], ["1", "2.5", "-0", "-0.0", "1E5", "4.9406564584124654e-324"],
    ["1,2", "[3", "4]"], ['{"a": [1', '2]}'], ["", "1"], ["1 2"], [" {} "], ["123456789012", "1234567890"],
])
def test_loads_each_is_json_loads_of_each_text_or_stands_down(texts):
    """Run.to_pandas decodes a column's stored JSON with orjson where it reads it as json would: an integer beyond
    64 bits (orjson: a float), NaN, 1e400, a lone surrogate or a malformed text (orjson refuses) leave it to json.
    Each text alone: texts that would make a valid array together ('1,2', '[3', '4]') are still refused."""
    from scijudge.run._orjson import loads_each

    fast = loads_each(texts)
    try:
        expected = [json.loads(t) for t in texts]
    except (ValueError, RecursionError):
        assert fast is None
        return
    assert fast is None or repr(fast) == repr(expected)
    if any(s in "".join(texts) for s in ("9223372036854775809", "18446744073709551616", "NaN", "1e400", "ud800")):
        assert fast is None
    if texts == ["123456789012", "1234567890"]:  # 22 digits only if the texts ran together
        assert fast == [123456789012, 1234567890]


def test_to_pandas_refuses_stored_json_that_is_valid_only_joined_to_its_neighbours(tmp_path):
    path = tmp_path / "r.sqlite"
    with Run(path) as run:
        for n in range(3):
            run.record(_result(n, probs={"1": 1.0}))
    db = sqlite3.connect(path)
    for item, text in (("q0", "1,2"), ("q1", "[3"), ("q2", "4]")):
        db.execute("UPDATE judgments SET probs = ? WHERE item_id = ?", (text, item))
    db.commit()
    db.close()
    with Run(path, create=False) as run, pytest.raises(InputError, match="damaged run store: 3 rows cannot be read "
                                                       ".item 'q0', judge '[^']*': probs is not readable JSON"):
        run.to_pandas(columns=["item_id", "probs"])


def test_the_long_number_prefilter_finds_what_the_regex_finds():
    """loads_each searches a column's text with the 19-digit regex only where 19 ASCII digits stand in a row:
    the same answer on texts of digits, points and other characters, at memory speed."""
    from scijudge.run._orjson import _LONG_NUMBER, _may_hold_long_number

    rng = random.Random(3)
    alphabet = "0123456789" * 6 + ".e-+ ,:é\ud800"
    texts = ["", "1" * 18, "1" * 19, "0." + "1" * 40, "x" + "9" * 19, "." + "1" * 19, "1." + "2" * 30 + "," + "3" * 19]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120))) for _ in range(20_000)]
    assert [_may_hold_long_number(t) for t in texts] == [_LONG_NUMBER.search(t) is not None for t in texts]
    assert sum(map(_may_hold_long_number, texts)) > 100  # both answers occur often


def test_loads_each_reads_doubles_as_json_does():
    import struct

    from scijudge.run._orjson import loads_each

    rng = random.Random(7)
    doubles = [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(20_000)]
    texts = [t for x in doubles if math.isfinite(x) for t in (repr(x), f"{x:.17g}", f"{x:.15e}", f"{x:.6g}")]
    fast = loads_each(texts)
    assert fast is not None and repr(fast) == repr([json.loads(t) for t in texts])


_NASTY = ["", " ", " lead", "trail ", "a,b", 'say "hi"', '"', '""', ",", "\r", "\n", "\r\n", "x\ry", "l1\nl2",
          "tab\there", "é€😀", "'single'", "back\\slash", ";semi", "nul\x00inside", "x" * 5000, 'long "' * 800]
_CELL_ALPHABET = ['"', ",", "\r", "\n", " ", "\t", "a", "é", "😀", "\x00", "'", "\\", ";", "0"]


def _csv_writer_text(rows) -> str:
    import csv
    import io

    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def test_csv_lines_are_what_the_csv_writer_writes_for_any_values():
    from scijudge.run.export import _CURRENT, _csv_lines

    rng = random.Random(24)
    numbers = [0, -0.0, 0.0, 1e-300, -1e300, 0.1 + 0.2, 1 / 3, 2.5, float("inf"), float("-inf"), float("nan"), 2**63 - 1,
               -(2**63), 10**30, True, False]
    others = [None, b"by,tes", b'q"', bytearray(b"ba")]
    pool = _NASTY + numbers + others

    def row(draw):
        values = [draw() for _ in RUN_COLUMNS]
        values[_CURRENT] = rng.choice([0, 1, None, 2])
        return (*values, rng.choice([0, 1]))  # the well-formed flag after the columns: never written

    def random_text() -> str:
        return "".join(rng.choice(_CELL_ALPHABET) for _ in range(rng.randint(0, 12)))

    batches = [[row(lambda: rng.choice(pool)) for _ in range(rng.randint(1, 40))] for _ in range(60)]
    batches += [[row(random_text) for _ in range(rng.randint(1, 40))] for _ in range(200)]
    # whole columns of one kind: all text without anything to quote, all numbers, all NULL, numbers and NULLs
    for kinds in (["k1", "k2"], [1, 2.5, -0.0], [None], [None, 3, 0.1 + 0.2], [" ", ""]):
        batches.append([row(lambda kinds=kinds: rng.choice(kinds)) for _ in range(30)])
    for batch in batches:
        expected = _csv_writer_text([[*values[:_CURRENT], bool(values[_CURRENT])] for values in batch])
        assert _csv_lines(batch) == expected, batch


def test_csv_export_is_the_csv_writers_bytes_for_stored_nasty_values(tmp_path, monkeypatch):
    import csv
    import io

    from scijudge.run import export

    path = tmp_path / "r.sqlite"
    rng = random.Random(7)

    def text() -> str:
        return rng.choice(_NASTY) + "".join(rng.choice(_CELL_ALPHABET) for _ in range(rng.randint(0, 8)))

    with Run(path) as run:
        for k in range(600):  # several batches of rows with nothing to redact, one with a credential mid-batch
            run.record(_result(k, item_id=f"{text()}{k}", judge=text() or "j", part=text(), model=text() or "m",
                               rationale=text() if k % 3 else None, verdict=text() if k % 5 == 0 else None,
                               reason=text() if k % 7 == 0 else None, score=rng.choice([None, 1e-300, 0.1 + 0.2, -0.0]),
                               confidence=rng.choice([None, 1 / 3, 1.0]), probs={"1": 0.1 + 0.2} if k % 4 == 0 else None,
                               result={"note": text(), "x": [1.5, None, 10**20]}, tokens_in=2**62 + k,
                               cost=rng.choice([None, 1e300]), latency_s=rng.random(),
                               created_at=text() if k % 9 == 0 else "2026-12-01T10:00:00+00:00"))
            if k == 300:
                run.record(_result(k, item_id="with a credential", rationale="Authorization: Bearer abcdefghijkl"))
    db = sqlite3.connect(path)  # edge values of the schema's types (others are refused: test_to_pandas_refuses_...)
    db.execute("UPDATE judgments SET score = 1e308, tokens_out = -1, cost = -9e999 WHERE rowid % 50 = 1")
    db.execute("UPDATE judgments SET latency_s = 9e999, confidence = -0.0 WHERE rowid % 50 = 2")
    db.commit()
    db.close()
    written = []
    stored = export._Writer.stored
    monkeypatch.setattr(export._Writer, "stored", lambda self, batch: written.append(len(batch)) or stored(self, batch))
    with Run(path, create=False) as run:
        assert run.export(tmp_path / "out.csv", "csv") == 601
        tuples = list(run.raw_tuples())
        export.write_rows(run.raw_rows(), tmp_path / "rows.csv", "csv")  # every row as a dict, through csv.writer
    got = (tmp_path / "out.csv").read_bytes()
    assert sum(written) == 600 and len(written) > 3  # all but the redacted row went the fast way
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(RUN_COLUMNS)
    writer.writerows([[*values[:-2], bool(values[-2])] for values in tuples])
    expected = buffer.getvalue().replace("Bearer abcdefghijkl", "***").encode("utf-8")
    assert got == expected and got == (tmp_path / "rows.csv").read_bytes()
    assert b"abcdefghijkl" not in got

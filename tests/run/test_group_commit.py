"""The asyncio executor's group commit (issue 51): the answers that arrive in one turn of the event loop share one
store transaction, each row is committed before its judgment is counted or reported, and a commit that fails
falls back to one row at a time so that nothing storable is lost."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from scijudge import Run, judge_items

from test_result_integrity import items, judges, rating_from_prompt  # the same helpers, beside this file


def _committed(path: Any, key: str) -> bool:
    """Whether another connection sees the row: what a crash right now would keep."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT 1 FROM judgments WHERE key = ?", (key,)).fetchone() is not None


@pytest.mark.slow  # a second: 80 judgments at 50 ms
def test_answers_arriving_together_share_a_commit_and_are_stored_before_they_are_reported(loopback, tmp_path):
    server = loopback(rating_from_prompt, latency=0.05)
    path = tmp_path / "r.sqlite"
    unstored: list[str] = []
    with Run(path) as run:
        commits = 0
        commit = run._commit

        def counting() -> None:
            nonlocal commits
            commits += 1
            commit()

        run._commit = counting  # type: ignore[method-assign]

        def reported(result: Any, summary: Any) -> None:
            if not _committed(path, result.key):
                unstored.append(result.key)

        summary = judge_items(items(40, rating=2), judges(server.url), run=run, executor="async", concurrency=64,
                              on_result=reported)
    assert summary.ok == 80 and summary.complete
    assert unstored == []
    assert len(Run(path)) == 80
    assert commits < 40, f"{commits} commits for 80 judgments that arrive together: no grouping"


@pytest.mark.slow
def test_a_failing_group_commit_stores_each_answer_alone(loopback, tmp_path, monkeypatch):
    server = loopback(rating_from_prompt, latency=0.05)
    failures = []
    real = Run.transaction

    def failing(self: Run) -> Any:
        if not failures:  # the first group commit fails (a transient error), the rows go one by one
            failures.append(1)
            raise sqlite3.OperationalError("disk I/O error")
        return real(self)

    monkeypatch.setattr(Run, "transaction", failing)
    with Run(tmp_path / "r.sqlite") as run:
        summary = judge_items(items(40, rating=2), judges(server.url), run=run, executor="async", concurrency=64)
    assert failures == [1]
    assert summary.ok == 80 and summary.complete and len(Run(tmp_path / "r.sqlite")) == 80

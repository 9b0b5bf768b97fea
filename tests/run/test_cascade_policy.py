"""The judge-time cascade policy (``scijudge.run.cascade.judge_cascade``) with stand-in judges and a stand-in run
API: which units each member is asked to judge, by judge, and what a missing answer does."""

from __future__ import annotations

from pathlib import Path

from scijudge.data import Item
from scijudge.records import Identity, JudgeResult
from scijudge.run.cascade import Stage, Threshold, judge_cascade
from scijudge.run.store import Run
from scijudge.run.summary import RunSummary

PAPERS = [{"title": "t", "abstract": "a"}]
ITEMS = [Item(id=f"i{k}", question="Q?", papers=PAPERS, answer=f"A{k}") for k in range(6)]


class StandIn:
    """A judge named ``name`` for ``model`` whose confidence on item ``iK`` is ``conf[K]``."""

    def __init__(self, name: str, model: str, conf: list[float | None]) -> None:
        self.name, self.model, self.conf = name, model, conf

    def parts(self, item: Item) -> list[str]:
        return [""]

    def identity(self, item: Item, part: str = "") -> list[Identity]:
        return [Identity(item.id, self.name, part, "h", self.model)]

    def result(self, item: Item) -> JudgeResult | None:
        c = self.conf[int(item.id[1:])]
        if c is None:
            return None  # no answer: nothing stored
        return JudgeResult(item_id=item.id, judge=self.name, family="likert", spec_hash="h", model=self.model,
                           status="ok", score=3.0, probs={"3": c, "2": 1 - c})


def fake_run_api(calls: list[tuple[str, str, str]]):
    def judge(items, judges, store, *, select, **options) -> RunSummary:
        summary = RunSummary()
        for item in items:
            for j in judges:
                if select(item, j, ""):
                    calls.append((j.model, j.name, item.id))
                    result = j.result(item)
                    if result is None:
                        summary.no_answer += 1
                    else:
                        store.record(result)
                        summary.judged += 1
        return summary
    return judge


def test_each_member_is_asked_only_for_what_no_earlier_member_trusted(tmp_path: Path) -> None:
    cheap = [0.95, 0.5, 0.9, 0.2, None, 0.91]  # i4: no answer yet
    stages = [Stage("cheap", [StandIn("a", "cheap", cheap), StandIn("b", "cheap", [0.99] * 6)],
                    {"a": Threshold(0.9), "b": None}),  # no threshold for b: cheap is not asked for b
              Stage("strong", [StandIn("a", "strong", [0.8] * 6), StandIn("b", "strong", [0.8] * 6)],
                    {"a": Threshold(0.5), "b": Threshold(0.5)})]
    calls: list[tuple[str, str, str]] = []
    with Run(tmp_path / "r.sqlite") as store:
        out = judge_cascade(ITEMS, stages, store, judge=fake_run_api(calls))
    assert {c for c in calls if c[0] == "cheap"} == {("cheap", "a", i.id) for i in ITEMS}
    strong_a = sorted(i for m, j, i in calls if m == "strong" and j == "a")
    assert strong_a == ["i1", "i3"]  # 0.95, 0.9, 0.91 trusted at >= 0.9; i4 waits for cheap's answer
    assert sorted(i for m, j, i in calls if m == "strong" and j == "b") == [i.id for i in ITEMS]
    assert [m for m, _ in out.stages] == ["cheap", "strong"] and out.sent == {"cheap": 6, "strong": 8}


def test_ties_at_the_threshold_follow_the_tie_cut(tmp_path: Path) -> None:
    from scijudge.run.cascade import tie_key

    ties = {i.id: tie_key(0, i.id, "a", "") for i in ITEMS}
    cut = sorted(ties.values())[3]  # the three items with the highest tie keys are trusted
    stages = [Stage("cheap", [StandIn("a", "cheap", [0.7] * 6)], {"a": Threshold(0.7, cut)}),
              Stage("strong", [StandIn("a", "strong", [0.8] * 6)], {"a": Threshold(0.0)})]
    calls: list[tuple[str, str, str]] = []
    with Run(tmp_path / "r.sqlite") as store:
        judge_cascade(ITEMS, stages, store, seed=0, judge=fake_run_api(calls))
    assert sorted(i for m, _, i in calls if m == "strong") == sorted(i for i, t in ties.items() if t < cut)

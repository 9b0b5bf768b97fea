"""promptfoo result files (``promptfoo eval -o results.json``) as judgments: one per cell and graded assertion.

The file is promptfoo's ``OutputFile`` (``{evalId, results: EvaluateSummaryV3|V2, config, shareableUrl}``);
``results.results`` holds one ``EvaluateResult`` per (test, prompt x provider) cell, whose
``gradingResult.componentResults`` are the assertions' ``GradingResult`` values (``pass``, ``score``, ``reason``,
``assertion {type, metric, provider}``). Model-graded assertion types (``llm-rubric``, ``g-eval``,
``model-graded-closedqa``, ``factuality``, ...) become judgments; deterministic ones (``icontains``, ``equals``...)
are counted as skipped. The item is ``testCase.metadata.item_id``, ``vars.item_id``, ``vars.id``, the test's
description or ``test<i>`` (suffixed ``|p<n>`` when the file has several prompts: the n-th distinct ``promptId``), then ``|<provider>``: the
provider that answered is part of the judgment's identity, so two providers graded alike never replace each other;
the judge is the assertion's ``metric`` (else its type); the model is the assertion's grader provider, else the
suite's ``defaultTest.options.provider``, else ``promptfoo:default-grader`` (promptfoo does not record its
built-in default). A grader error is an abstention.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.importers._interop import (
    ForeignImport,
    ForeignRow,
    collect,
    expect_object,
    file_bytes,
    load_json,
    number,
    obj,
    text,
)

FORMAT = "promptfoo"
DEFAULT_GRADER = "promptfoo:default-grader"
MODEL_GRADED = frozenset({
    "llm-rubric", "g-eval", "model-graded-closedqa", "model-graded-factuality", "factuality", "answer-relevance",
    "context-faithfulness", "context-recall", "context-relevance", "conversation-relevance", "search-rubric",
    "select-best", "trajectory:goal-success",
})
"""promptfoo assertion types graded by an LLM (``src/types/index.ts``); a ``not-`` prefix grades the same way."""
ERROR_REASON = 2
"""``ResultFailureReason.ERROR``: the cell failed with an error (not an assertion failure)."""


def is_promptfoo(doc: Any) -> bool:
    """True for a promptfoo output file: ``results`` object with a ``results`` list and ``stats.successes``."""
    results = doc.get("results") if isinstance(doc, dict) else None
    return (isinstance(results, dict) and isinstance(results.get("results"), list)
            and isinstance(results.get("stats"), dict) and "successes" in results["stats"])


def _provider(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        found = value.get("label") or value.get("id")
        return str(found) if found else None
    return None


def _prompt_of(cell: dict[str, Any]) -> str:
    """A cell's prompt: its ``promptId`` (promptfoo's hash of the prompt), else the prompt's raw text."""
    return str(cell.get("promptId") or obj(cell.get("prompt")).get("raw") or cell.get("promptIdx", 0))


def _rows(doc: dict[str, Any], path: Path) -> Iterator[ForeignRow]:
    cells = doc["results"]["results"]
    options = obj(obj(obj(doc.get("config")).get("defaultTest")).get("options"))
    suite_grader = _provider(options.get("provider")) or DEFAULT_GRADER
    prompts: dict[str, int] = {}  # the distinct prompts (a column is a prompt x provider), in order of appearance
    for cell in cells:
        if isinstance(cell, dict):
            prompts.setdefault(_prompt_of(cell), len(prompts))
    for i, cell in enumerate(cells):
        where = f"results.results[{i}]"
        if not isinstance(cell, dict):
            yield ForeignRow(item_id=None, judge=None, model=None, position=where,
                             error=f"expected a JSON object, got {type(cell).__name__}")
            continue
        test = obj(cell.get("testCase"))
        variables = obj(cell.get("vars")) or obj(test.get("vars"))
        metadata = obj(test.get("metadata"))
        base = (metadata.get("item_id") or variables.get("item_id") or variables.get("id")
                or test.get("description") or f"test{cell.get('testIdx', i)}")
        answered_by = _provider(cell.get("provider"))
        item_id = f"{base}|p{prompts[_prompt_of(cell)]}" if len(prompts) > 1 else str(base)
        grading = cell.get("gradingResult") or {}
        if not isinstance(grading, dict):
            yield ForeignRow(item_id=item_id, judge=None, model=None, position=f"{where}.gradingResult",
                             error="gradingResult is not an object")
            continue
        components = grading.get("componentResults") or ([grading] if grading.get("assertion") else [])
        assertions = [obj(obj(c).get("assertion")) for c in components]
        names = [str(a.get("metric") or a.get("type") or "assertion") for a in assertions]
        for j, (component, assertion) in enumerate(zip(components, assertions)):
            position = f"{where}.gradingResult.componentResults[{j}]"
            if not isinstance(component, dict):
                yield ForeignRow(item_id=item_id, judge=None, model=None, position=position,
                                 error=f"expected a JSON object, got {type(component).__name__}")
                continue
            kind = str(assertion.get("type", ""))
            graded = kind.removeprefix("not-") in MODEL_GRADED
            judge = names[j] if names.count(names[j]) == 1 else f"{names[j]}[{j}]"
            score, error = number(component.get("score"))
            grader_error = bool(obj(component.get("metadata")).get("graderError"))
            yield ForeignRow(
                item_id=item_id, judge=judge, model=(_provider(assertion.get("provider")) or suite_grader) if graded
                else f"promptfoo:{kind or 'assertion'}", score=None if grader_error else score,
                rationale=text(component.get("reason")), llm_judged=graded,
                reason=f"grader error: {text(component.get('reason')) or 'no reason'}" if grader_error else None,
                position=position, error=None if grader_error else error, answered_by=answered_by,
                provenance={"answer_model": answered_by, "assertion_type": kind, "pass": component.get("pass")},
            )


def read_promptfoo(path: str | Path, *, include_deterministic: bool = False) -> ForeignImport:
    """Judgments of a promptfoo output file, with its own ``stats`` and the same counts recomputed from the cells.

    ``summary["stats"]`` is the file's ``{successes, failures, errors}``; ``summary["cells"]`` the same three
    counted the way promptfoo counts them (success; not success and not an error; failureReason ERROR).
    """
    path, data, sha = file_bytes(path)
    doc = expect_object(load_json(data, path), path, "(document)")
    if not is_promptfoo(doc):
        raise InputError("not a promptfoo output file: expected 'results.results' (a list) and 'results.stats'",
                         file=path, field="results")
    cells = [c for c in doc["results"]["results"] if isinstance(c, dict)]
    stats = doc["results"]["stats"]
    summary = {
        "eval_id": doc.get("evalId"), "version": doc["results"].get("version"),
        "stats": {k: stats.get(k) for k in ("successes", "failures", "errors")},
        "cells": {"successes": sum(1 for c in cells if c.get("success")),
                  "failures": sum(1 for c in cells if not c.get("success") and c.get("failureReason") != ERROR_REASON),
                  "errors": sum(1 for c in cells if not c.get("success") and c.get("failureReason") == ERROR_REASON)},
    }
    return collect(_rows(doc, path), source=str(path), sha256=sha, fmt=FORMAT, summary=summary,
                   include_deterministic=include_deterministic)

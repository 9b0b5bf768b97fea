"""promptfoo result files (``promptfoo eval -o results.json``) as judgments: one per cell and graded assertion.

The file is promptfoo's ``OutputFile`` (``{evalId, results: EvaluateSummaryV3|V2, config, shareableUrl}``);
``results.results`` holds one ``EvaluateResult`` per (test, prompt x provider) cell, whose
``gradingResult.componentResults`` are the assertions' ``GradingResult`` values (``pass``, ``score``, ``reason``,
``assertion {type, metric, provider}``). Model-graded assertion types (``llm-rubric``, ``g-eval``,
``model-graded-closedqa``, ``factuality``, ...) become judgments; deterministic ones (``icontains``, ``equals``...)
are counted as skipped. The item is ``testCase.metadata.item_id``, ``vars.item_id``, ``vars.id``, the test's
description or ``test<i>`` (suffixed ``|p<n>`` when the file has several prompts: the n-th distinct prompt), then ``|<provider>``: the
provider that answered is part of the judgment's identity, so two providers graded alike never replace each other;
the judge is the assertion's ``metric`` (else its type); the model is the assertion's grader provider, else the
test's ``options.provider`` (promptfoo merges ``defaultTest`` into it), else the suite's
``defaultTest.options.provider``, else ``promptfoo:default-grader`` (promptfoo does not record its built-in
default). A grader error is an abstention: ``metadata.graderError``, or (promptfoo <= 0.120) a failed
model-graded component written with ``assertion: null``, whose type is then the test's ``assert[j]``.

``promptfoo eval -o out.jsonl`` writes one ``EvaluateResult`` per line: read as the same cells (the counts the
``.json`` file's ``stats`` holds are then computed from them).
"""

from __future__ import annotations

import json
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
KNOWN_VERSIONS = (2, 3)
"""``results.version`` values of promptfoo's output file this reader was written for (EvaluateSummaryV2/V3)."""
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
    """A cell's prompt: its ``promptId`` (promptfoo's hash of the prompt; empty in ``-o out.jsonl``), else the
    prompt's ``label`` (its template), else its raw text."""
    prompt = obj(cell.get("prompt"))
    return str(cell.get("promptId") or prompt.get("label") or prompt.get("raw") or cell.get("promptIdx", 0))


def _rows(doc: dict[str, Any], path: Path, line_numbers: list[int] | None = None) -> Iterator[ForeignRow]:
    cells = doc["results"]["results"]
    options = obj(obj(obj(doc.get("config")).get("defaultTest")).get("options"))
    suite_grader = _provider(options.get("provider")) or DEFAULT_GRADER
    prompts: dict[str, int] = {}  # the distinct prompts (a column is a prompt x provider), in order of appearance
    for cell in cells:
        if isinstance(cell, dict):
            prompts.setdefault(_prompt_of(cell), len(prompts))
    for i, cell in enumerate(cells):
        line = line_numbers[i] if line_numbers is not None else None
        where = f"line {line}" if line is not None else f"results.results[{i}]"
        if not isinstance(cell, dict):
            yield ForeignRow(item_id=None, judge=None, model=None, position=where, line=line,
                             error="not valid JSON" if cell is None and line is not None else
                             f"expected a JSON object, got {type(cell).__name__}")
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
            yield ForeignRow(item_id=item_id, judge=None, model=None, position=f"{where}.gradingResult", line=line,
                             error="gradingResult is not an object")
            continue
        components = grading.get("componentResults") or ([grading] if grading.get("assertion") else [])
        given = test.get("assert")
        declared: list[Any] = given if isinstance(given, list) else []
        # promptfoo <= 0.120 writes a failed grading (a grader reply it cannot parse, a grader HTTP error) with
        # ``assertion: null``: the assertion is then the test's own assert[j] (componentResults follow its order)
        assertions = [obj(obj(c).get("assertion")) or (obj(declared[j]) if len(declared) == len(components) else {})
                      for j, c in enumerate(components)]
        names = [str(a.get("metric") or a.get("type") or "assertion") for a in assertions]
        test_grader = _provider(obj(test.get("options")).get("provider"))
        for j, (component, assertion) in enumerate(zip(components, assertions)):
            position = f"{where}.gradingResult.componentResults[{j}]"
            if not isinstance(component, dict):
                yield ForeignRow(item_id=item_id, judge=None, model=None, position=position, line=line,
                                 error=f"expected a JSON object, got {type(component).__name__}")
                continue
            kind = str(assertion.get("type", ""))
            graded = kind.removeprefix("not-") in MODEL_GRADED
            judge = names[j] if names.count(names[j]) == 1 else f"{names[j]}[{j}]"
            score, error = number(component.get("score"))
            grader_error = bool(obj(component.get("metadata")).get("graderError")) or (
                graded and component.get("assertion") is None and not component.get("pass"))
            grader = _provider(assertion.get("provider")) or test_grader or suite_grader
            yield ForeignRow(
                item_id=item_id, judge=judge, model=grader if graded else f"promptfoo:{kind or 'assertion'}",
                score=None if grader_error else score, rationale=text(component.get("reason")), llm_judged=graded,
                reason=f"grader error: {text(component.get('reason')) or 'no reason'}" if grader_error else None,
                position=position, line=line, error=None if grader_error else error, answered_by=answered_by,
                provenance={"answer_model": answered_by, "assertion_type": kind, "pass": component.get("pass")},
            )


def read_promptfoo(path: str | Path, *, include_deterministic: bool = False) -> ForeignImport:
    """Judgments of a promptfoo output file, with its own ``stats`` and the same counts recomputed from the cells.

    ``summary["stats"]`` is the file's ``{successes, failures, errors}``; ``summary["cells"]`` the same three
    counted the way promptfoo counts them (success; not success and not an error; failureReason ERROR).
    """
    path, data, sha = file_bytes(path)
    lines = jsonl_results(data)
    if lines is not None:
        doc: dict[str, Any] = {"results": {"results": [cell for _, cell in lines], "stats": {}}}
    else:
        doc = expect_object(load_json(data, path), path, "(document)")
        if not is_promptfoo(doc):
            raise InputError("not a promptfoo output file: expected 'results.results' (a list) and 'results.stats' "
                             "(promptfoo eval -o out.json), or one result per line (-o out.jsonl)",
                             file=path, field="results")
    version = doc["results"].get("version")
    if version is not None and version not in KNOWN_VERSIONS:
        raise InputError(f"promptfoo results version {version!r} is not one this reader knows "
                         f"({', '.join(map(str, KNOWN_VERSIONS))}): refusing to guess at its fields",
                         file=path, field="results.version")
    cells = [c for c in doc["results"]["results"] if isinstance(c, dict)]
    stats = doc["results"]["stats"]
    counted = {"successes": sum(1 for c in cells if c.get("success")),
               "failures": sum(1 for c in cells if not c.get("success") and c.get("failureReason") != ERROR_REASON),
               "errors": sum(1 for c in cells if not c.get("success") and c.get("failureReason") == ERROR_REASON)}
    summary = {
        "eval_id": doc.get("evalId"), "version": version, "layout": "jsonl" if lines is not None else "json",
        "stats": {k: stats.get(k) for k in ("successes", "failures", "errors")} if stats else dict(counted),
        "cells": counted,
    }
    numbers = [n for n, _ in lines] if lines is not None else None
    return collect(_rows(doc, path, numbers), source=str(path), sha256=sha, fmt=FORMAT, summary=summary,
                   include_deterministic=include_deterministic)


def is_result_line(value: Any) -> bool:
    """True for one line of ``promptfoo eval -o out.jsonl``: an ``EvaluateResult`` (provider, testCase, success)."""
    return isinstance(value, dict) and {"provider", "testCase", "success"} <= value.keys() and (
        "gradingResult" in value or "response" in value)


def jsonl_results(data: bytes) -> list[tuple[int, Any]] | None:
    """(file line, result) of a ``-o out.jsonl`` file (one ``EvaluateResult`` per line), or None when it is not
    one; a damaged line's result is None."""
    try:
        text_ = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    first = text_.lstrip().split("\n", 1)[0]
    try:
        if not is_result_line(json.loads(first)):
            return None
    except (ValueError, RecursionError):
        return None
    out: list[tuple[int, Any]] = []
    for lineno, raw in enumerate(text_.splitlines(), 1):
        if raw.strip():
            try:
                out.append((lineno, json.loads(raw)))
            except (ValueError, RecursionError):
                out.append((lineno, None))  # a damaged line: a bad row named by its line
    return out

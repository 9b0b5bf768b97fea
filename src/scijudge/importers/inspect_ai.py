"""inspect_ai eval logs (``.eval`` zip or ``.json``) as judgments: one per sample and model-graded scorer.

A scorer is model-graded when a model call was recorded inside its span (``span_begin`` of type ``scorer``; in the
logs of inspect_ai 0.3.58 and before, between its ``step`` begin and end events), or
when its score's metadata carries the grader's message (as ``model_graded_qa`` / ``model_graded_fact`` write
it); deterministic scorers (match, includes, exact) are counted as skipped. The item is the sample's id
(``<id>#epoch<n>`` when the task ran several epochs), the judge the scorer's name, the model the grader model,
the rationale the score's explanation. The solver model (``eval.model``) answered: it is part of the judgment's
identity, so the item is ``<sample id>|<solver model>`` (two logs of two solvers graded by one judge never
replace each other). Grades read as inspect's own ``value_to_float`` reads them (C=1, P=0.5,
I=0, N=0); an unscored sample (NaN) is an abstention; a boolean, list or dict value is a bad row named by its
position (``samples/q3_epoch_1.json.scores.model_graded_qa``).

inspect_ai's own reader is used when it is installed (the ``interop`` extra); without it a ``.json`` log is read
with the standard library, and a ``.eval`` log (zstd-compressed zip members) needs the extra.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.importers._interop import (
    INTEROP_EXTRA_HINT,
    ForeignImport,
    ForeignRow,
    collect,
    expect_object,
    file_bytes,
    forget_document,
    load_json,
    text,
)

FORMAT = "inspect"
DETERMINISTIC = "deterministic"
"""The model of a scorer that called no model (kept only with ``include_deterministic``)."""
GRADES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
"""inspect_ai.scorer's CORRECT / INCORRECT / PARTIAL / NOANSWER as its ``value_to_float()`` maps them."""


def _get(obj: Any, key: str, default: Any = None) -> Any:
    """A field of inspect's pydantic log models or of the same log read as plain JSON."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


EVAL_ZIP_MEMBERS = frozenset({"header.json", "_journal/start.json"})
"""Members one of which every ``.eval`` log holds (``_journal/start.json`` while it is being written)."""
KNOWN_LOG_VERSIONS = (1, 2)
"""The ``version`` values of inspect's log schema this reader was written for (2 since inspect_ai 0.3)."""


def is_eval_zip(data: bytes, path: Path) -> bool:
    """True for an inspect ``.eval`` log: a zip holding ``header.json`` or ``_journal/start.json``."""
    if not data.startswith(b"PK\x03\x04"):
        return False
    try:
        names = set(zipfile.ZipFile(path).namelist())
    except zipfile.BadZipFile:
        return False
    return bool(EVAL_ZIP_MEMBERS & names)


def _zip_version(path: Path) -> Any:
    """The ``version`` of an ``.eval`` log's header (or journal start), None when it records none."""
    with zipfile.ZipFile(path) as archive:
        for member in ("header.json", "_journal/start.json"):
            if member in archive.namelist():
                try:
                    return json.loads(archive.read(member)).get("version")
                except (ValueError, AttributeError, zipfile.BadZipFile, OSError, NotImplementedError):
                    return None  # NotImplementedError: zstd members, which only inspect_ai's reader opens
    return None


def _check_version(version: Any, path: Path) -> None:
    if version is not None and version not in KNOWN_LOG_VERSIONS:
        raise InputError(f"inspect_ai log version {version!r} is not one this reader knows "
                         f"({', '.join(map(str, KNOWN_LOG_VERSIONS))}): refusing to guess at its fields",
                         file=path, field="version")


def is_json_log(doc: Any) -> bool:
    """True for an inspect ``.json`` log: ``version`` and an ``eval`` object with ``task`` and an id (``eval_id``
    since 0.3.59; ``run_id`` / ``task_id`` in the logs of 0.3.58 and before)."""
    return (isinstance(doc, dict) and "version" in doc and isinstance(doc.get("eval"), dict)
            and "task" in doc["eval"] and not {"eval_id", "run_id", "task_id"}.isdisjoint(doc["eval"]))


def _read(path: Path, data: bytes) -> tuple[Any, list[tuple[str, Any]], str]:
    """(log, [(position, sample)], reader name), with inspect_ai's reader when it is installed."""
    zipped = is_eval_zip(data, path)
    if zipped:
        _check_version(_zip_version(path), path)
    else:
        head = re.match(rb'\s*\{\s*"version"\s*:\s*(\d+)', data[:256])
        if head:
            _check_version(int(head.group(1)), path)
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        have_inspect = False
    else:
        have_inspect = True
    if have_inspect:
        forget_document()  # inspect_ai parses the file itself
        try:
            log = read_eval_log(str(path))
        except Exception as exc:  # inspect raises pydantic/zip/json errors of many kinds
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise InputError(f"cannot be read as an inspect_ai log: {first}", file=path) from None
        _check_version(_get(log, "version"), path)
        samples = list(log.samples or [])
        if zipped:
            return log, [(f"samples/{s.id}_epoch_{s.epoch}.json", s) for s in samples], "inspect_ai"
        return log, [(f"samples[{i}]", s) for i, s in enumerate(samples)], "inspect_ai"
    if zipped:
        raise InputError(f"an inspect_ai .eval log needs inspect_ai to be read: {INTEROP_EXTRA_HINT} "
                         "(or write the log with --log-format json)", file=path)
    doc = expect_object(load_json(data, path), path, "(document)")
    _check_version(doc.get("version"), path)
    if not is_json_log(doc):
        raise InputError("not an inspect_ai log: no 'eval' object with 'task' and 'eval_id' (or 'run_id')", file=path)
    samples = doc.get("samples") or []
    if not isinstance(samples, list):
        raise InputError("expected a list", file=path, field="samples")
    return doc, [(f"samples[{i}]", s) for i, s in enumerate(samples)], "json"


def _scorer_models(events: list[Any], scorer: str) -> set[str]:
    """Models called inside the scorer's span (``span_begin`` type ``scorer``, inspect 0.3.59 on) or between its
    ``step`` begin and end events (0.3.58 and before, whose grader messages name no model)."""
    spans = {_get(e, "id") for e in events
             if _get(e, "event") == "span_begin" and _get(e, "type") == "scorer" and _get(e, "name") == scorer}
    models: set[str] = set()
    inside = 0
    for event in events:
        kind = _get(event, "event")
        if kind == "step" and _get(event, "type") == "scorer" and _get(event, "name") == scorer:
            inside += 1 if _get(event, "action") == "begin" else -1
        elif kind == "model" and (inside > 0 or (spans and _get(event, "span_id") in spans)):
            if _get(event, "model"):
                models.add(str(_get(event, "model")))
    return models


def _grader(sample: Any, scorer: str, score: Any, roles: dict[str, str]) -> str | None:
    """The grader model: model calls inside the scorer's span or step, else the grader message's ``model``, else
    (a grading message that names no model) the eval's ``grader`` model role."""
    models = sorted(_scorer_models(_get(sample, "events") or [], scorer))
    if models:
        return ",".join(models)  # a panel of graders inside one scorer is one judge with a composite model
    metadata = _get(score, "metadata") or {}
    grading = metadata.get("grading") if isinstance(metadata, dict) else None
    if isinstance(grading, list) and grading:
        model = _get(grading[-1], "model")
        return str(model) if model else roles.get("grader")
    return None


def _roles(evaluation: Any) -> dict[str, str]:
    """The eval's model roles (``eval.model_roles``: role -> model config) as role -> model name."""
    out = {}
    for role, config in (_get(evaluation, "model_roles") or {}).items():
        model = _get(config, "model") if not isinstance(config, str) else config
        if model:
            out[str(role)] = str(model)
    return out


def grade_value(value: Any) -> tuple[float | None, str | None]:
    """(score, error) of one inspect Score.value; (None, None) is an unscored sample (abstention)."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return None, f"score {value!r} is a boolean (give a number or a C/I/P/N grade)"
    if isinstance(value, (int, float)):
        return (None, None) if math.isnan(float(value)) else (float(value), None)
    if isinstance(value, str):
        letter = value.strip().upper()
        if letter in GRADES:
            return GRADES[letter], None
        try:
            number = float(value)
        except ValueError:
            return None, f"score {value!r} is not a number or a C/I/P/N grade"
        return (None, None) if math.isnan(number) else (number, None)
    return None, f"score of type {type(value).__name__} is not read (a list or dict value)"


def _rows(log: Any, samples: list[tuple[str, Any]]) -> Iterator[ForeignRow]:
    evaluation = _get(log, "eval")
    epochs = _get(_get(evaluation, "config"), "epochs") or 1
    solver = _get(evaluation, "model")
    solver = str(solver) if solver else None
    roles = _roles(evaluation)
    for position, sample in samples:
        sample_id, epoch = _get(sample, "id"), _get(sample, "epoch") or 1
        item_id = str(sample_id) if epochs == 1 else f"{sample_id}#epoch{epoch}"
        attachments = _get(sample, "attachments") or {}
        for scorer, score in (_get(sample, "scores") or {}).items():
            grader = _grader(sample, scorer, score, roles)
            value = _get(score, "value")
            number, error = grade_value(value)
            explanation = _get(score, "explanation")
            if isinstance(explanation, str) and explanation.startswith("attachment://"):
                explanation = attachments.get(explanation[len("attachment://"):], explanation)
            yield ForeignRow(
                item_id=item_id, judge=scorer, model=grader or DETERMINISTIC, llm_judged=grader is not None,
                score=number, rationale=text(explanation),
                reason=None if number is not None else f"unscored by {scorer} ({text(explanation) or 'no grade'})",
                position=f"{position}.scores.{scorer}", error=error, answered_by=solver,
                provenance={"raw_value": value if isinstance(value, (str, int, float)) else None, "epoch": epoch},
            )


def read_inspect(path: str | Path, *, include_deterministic: bool = False) -> ForeignImport:
    """Judgments of every model-graded scorer in an inspect_ai log, with the log's own per-scorer counts.

    ``summary["scorers"][name]`` holds the log's ``scored`` / ``unscored`` counts and metrics;
    ``summary["reader"]`` says whether inspect_ai or the standard library read it.
    """
    path, data, sha = file_bytes(path)
    log, samples, reader = _read(path, data)
    rows = list(_rows(log, samples))
    evaluation, results = _get(log, "eval"), _get(log, "results")
    scorers = {}
    for entry in _get(results, "scores") or []:
        metrics = {name: _get(metric, "value") for name, metric in (_get(entry, "metrics") or {}).items()}
        scorers[str(_get(entry, "name"))] = {"scored": _get(entry, "scored_samples"),
                                             "unscored": _get(entry, "unscored_samples"), "metrics": metrics}
    summary = {"reader": reader, "task": _get(evaluation, "task"), "eval_id": _get(evaluation, "eval_id"),
               "solver_model": _get(evaluation, "model"), "status": _get(log, "status"),
               "total_samples": _get(results, "total_samples"), "scorers": scorers}
    out = collect(rows, source=str(path), sha256=sha, fmt=FORMAT, summary=summary,
                  include_deterministic=include_deterministic)
    for name, values in _letter_graded(out).items():
        out.scales[name] = values
    return out


def _letter_graded(out: ForeignImport) -> dict[str, list[Any]]:
    """Scorers that gave C/P/I/N letters are on inspect's 0–1 grid in half steps."""
    letters = {r.judge for r in out.results if str((r.result or {}).get("raw_value", "")).strip().upper() in GRADES}
    return {name: [0.0, 1.0, 0.5] for name in letters}

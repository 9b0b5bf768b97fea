"""lm-evaluation-harness per-sample files (``--log_samples``) as judgments: one per document, filter and metric.

``lm_eval --output_path OUT --log_samples`` writes ``OUT/<model>/samples_<task>_<date>.jsonl`` (one line per
document and filter: ``doc_id, doc, target, arguments, resps, filtered_resps, filter, metrics [names]``, the hashes,
and one key per metric) beside ``results_<date>.json`` (``results[task]["<metric>,<filter>"]``, ``n-samples``,
``model_name``, ``config``). The item is ``<task>:<doc_id>``, the judge ``<task>/<metric>`` (``,<filter>`` added
for a filter other than ``none``), the model the results file's ``model_name`` (or ``config.model_args``). The
task comes from the file name, else ``task``. Harness metrics are computed by the harness: they are imported so
that they can be compared with human labels like any judge. Corpus-level metrics (``bleu``, ``chrf``, ``ter``,
``word_perplexity``, ``byte_perplexity``, ``bits_per_byte``, ``f1``...) store a per-sample tuple that only the
corpus aggregation turns into a score (``lm_eval/api/metrics.py``): they are skipped, counted as
``<task>/<metric> (corpus-level)``. The results file that names the model is recorded with its SHA-256.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.importers._interop import ForeignImport, ForeignRow, collect, file_bytes, load_json, number, obj

FORMAT = "lm-eval"
SAMPLE_KEYS = frozenset({"doc_id", "doc", "target", "filtered_resps", "filter", "metrics"})
"""Keys every lm-eval sample line has (``lm_eval/evaluator.py``)."""
_SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")


def is_sample_line(obj: Any) -> bool:
    """True for one line of an lm-eval samples file."""
    return isinstance(obj, dict) and SAMPLE_KEYS <= obj.keys()


def is_results_file(doc: Any) -> bool:
    """True for an lm-eval ``results_<date>.json`` (aggregates only: import its samples file instead)."""
    return isinstance(doc, dict) and isinstance(doc.get("results"), dict) and "n-samples" in doc and "versions" in doc


def _results_beside(path: Path) -> Path | None:
    match = _SAMPLES_NAME.match(path.name)
    if match is None:
        return None
    candidate = path.with_name(f"results_{match.group('date')}.json")
    return candidate if candidate.is_file() else None


def _rows(text_: str, path: Path, task: str, model: str, per_filter: dict[str, int]) -> Iterator[ForeignRow]:
    for line, raw in enumerate(text_.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            sample = json.loads(raw)
        except json.JSONDecodeError as exc:
            yield ForeignRow(item_id=None, judge=None, model=None, position=f"line {line}", line=line,
                             error=f"not valid JSON: {exc.msg} (column {exc.colno})")
            continue
        except RecursionError:
            yield ForeignRow(item_id=None, judge=None, model=None, position=f"line {line}", line=line,
                             error="JSON nested too deeply")
            continue
        if not is_sample_line(sample):
            missing = sorted(SAMPLE_KEYS - (sample.keys() if isinstance(sample, dict) else set()))
            yield ForeignRow(item_id=None, judge=None, model=None, position=f"line {line}", line=line,
                             error=f"not an lm-eval sample line (missing {', '.join(missing)})")
            continue
        flt = str(sample.get("filter") or "none")
        per_filter[flt] = per_filter.get(flt, 0) + 1
        metrics = sample.get("metrics")
        if not isinstance(metrics, list):
            yield ForeignRow(item_id=None, judge=None, model=None, position=f"line {line}.metrics", line=line,
                             error="metrics is not a list of names")
            continue
        for metric in metrics:
            value = sample.get(metric)
            judge = f"{task}/{metric}" + ("" if flt == "none" else f",{flt}")
            if isinstance(value, (list, tuple)):  # bleu, chrf, ter, perplexities, f1...: scored on the corpus
                yield ForeignRow(item_id=None, judge=judge, model=model, position=f"line {line}.{metric}", line=line,
                                 skip="corpus-level")
                continue
            score, error = number(value)
            if score is None and error is None:
                error = f"no value for metric {metric!r}"
            yield ForeignRow(
                item_id=f"{task}:{sample.get('doc_id')}", judge=judge,
                model=model, score=score, position=f"line {line}.{metric}", line=line, error=error,
                provenance={"doc_hash": sample.get("doc_hash"), "filter": flt},
            )


def read_lm_eval(path: str | Path, *, results: str | Path | None = None, task: str | None = None,
                 include_deterministic: bool = True) -> ForeignImport:
    """Judgments of an lm-eval samples file; ``results`` (default: ``results_<date>.json`` beside it) names the model.

    ``summary["lines_per_filter"]`` counts the sample lines per filter, ``summary["n_samples"]`` is the results
    file's ``n-samples[task]`` and ``summary["aggregated"]`` its ``"<metric>,<filter>"`` values.
    """
    path, data, sha = file_bytes(path)
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=path) from None
    match = _SAMPLES_NAME.match(path.name)
    task = task or (match.group("task") if match else None)
    if not task:
        raise InputError("cannot tell the task: name the file samples_<task>_<date>.jsonl as lm-eval does",
                         file=path)
    results_path = Path(results) if results is not None else _results_beside(path)
    doc: dict[str, Any] = {}
    results_sha = None
    if results_path is not None:
        results_path, results_data, results_sha = file_bytes(results_path)
        loaded = load_json(results_data, results_path)
        if not is_results_file(loaded):
            raise InputError("not an lm-eval results file (no 'results', 'n-samples', 'versions')", file=results_path)
        doc = loaded
    config = obj(doc.get("config"))
    model = str(doc.get("model_name") or config.get("model_args") or config.get("model") or "lm-eval:unknown-model")
    per_filter: dict[str, int] = {}
    rows = list(_rows(content, path, task, model, per_filter))
    aggregated = obj(obj(doc.get("results")).get(task))
    summary = {"task": task, "model": model, "results_file": str(results_path) if results_path else None,
               "results_sha256": results_sha,
               "n_samples": obj(doc.get("n-samples")).get(task), "lines_per_filter": per_filter,
               "aggregated": {k: v for k, v in aggregated.items() if "," in k and "_stderr" not in k}}
    out = collect(rows, source=str(path), sha256=sha, fmt=FORMAT, summary=summary,
                  include_deterministic=include_deterministic)
    if results_path is not None:  # where the model name came from: recorded with each import, hashed
        out.companions = [{"file": str(results_path), "sha256": results_sha, "role": "model name"}]
    return out

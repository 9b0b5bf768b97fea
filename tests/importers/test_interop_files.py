"""promptfoo, DeepEval and lm-eval-harness result files: imported counts equal each file's own summary.

The files are written here from the tools' documented schemas: promptfoo's ``OutputFile`` (src/types/index.ts:
EvaluateSummaryV3, EvaluateResult, GradingResult, stats summed from prompts[].metrics as Eval.getStats does),
DeepEval's ``TestRun`` dump (testCases[].metricsData[], metricsScores[]), lm-eval's ``samples_<task>_<date>.jsonl``
and ``results_<date>.json`` (EvaluationTracker). The expected counts are computed from the plans below, by hand,
independently of the readers.
"""

from __future__ import annotations

import hashlib
import json
import statistics

import pytest

from scijudge.errors import InputError
from scijudge.importers.deepeval import read_deepeval
from scijudge.importers.foreign import read_foreign
from scijudge.importers.lm_eval import read_lm_eval
from scijudge.importers.promptfoo import read_promptfoo
from scijudge.importers.sniff import sniff_format

RUBRIC = {"type": "llm-rubric", "value": "factually correct", "provider": "openai:gpt-4o-mini", "metric": "correctness"}
GEVAL = {"type": "g-eval", "value": "coherent", "metric": "coherence"}  # graded by defaultTest's provider
CONTAINS = {"type": "icontains", "value": "{{expected}}"}  # deterministic: not a judgment
PROVIDERS = [{"id": "openai:gpt-4o", "label": "gpt-4o"}, {"id": "ollama:chat:llama3", "label": "llama3"}]
# (test, provider) -> (rubric score, g-eval score, contains passed); None = the provider failed (an error cell)
PLAN = {(0, 0): (1.0, 0.9, True), (0, 1): (0.0, 0.4, False), (1, 0): (1.0, 0.8, True), (1, 1): None,
        (2, 0): (0.5, 0.7, True), (2, 1): (1.0, 0.95, True)}


def write_promptfoo(path, *, grader_error_cell=None):
    results, metrics = [], {p["label"]: {"testPassCount": 0, "testFailCount": 0, "testErrorCount": 0} for p in PROVIDERS}
    for (ti, pi), cell in PLAN.items():
        provider = PROVIDERS[pi]
        base = {"id": f"res-{ti}-{pi}", "promptIdx": pi, "testIdx": ti, "provider": provider,
                "testCase": {"description": f"t{ti}", "vars": {"item_id": f"q{ti}"}, "assert": [RUBRIC, GEVAL, CONTAINS]},
                "promptId": "p0", "prompt": {"raw": "Answer: {{q}}", "label": "Answer"}, "vars": {"item_id": f"q{ti}"},
                "latencyMs": 100, "namedScores": {}}
        if cell is None:
            results.append({**base, "error": "API error: 500", "failureReason": 2, "success": False, "score": 0,
                            "gradingResult": None, "response": {"error": "API error: 500"}})
            metrics[provider["label"]]["testErrorCount"] += 1
            continue
        rubric, geval, contains = cell
        components = [
            {"pass": rubric >= 0.5, "score": rubric, "reason": f"rubric {rubric}", "assertion": RUBRIC},
            {"pass": geval >= 0.5, "score": geval, "reason": f"coherence {geval}", "assertion": GEVAL},
            {"pass": contains, "score": 1 if contains else 0, "reason": "contains", "assertion": CONTAINS},
        ]
        if grader_error_cell == (ti, pi):
            components[1] = {"pass": False, "score": 0, "reason": "grader timed out", "assertion": GEVAL,
                             "metadata": {"graderError": True}}
        ok = all(c["pass"] for c in components)
        results.append({**base, "success": ok, "failureReason": 0 if ok else 1, "score": 0.5,
                        "response": {"output": "answer"},
                        "gradingResult": {"pass": ok, "score": 0.5, "reason": "", "componentResults": components}})
        metrics[provider["label"]]["testPassCount" if ok else "testFailCount"] += 1
    prompts = [{"raw": "Answer: {{q}}", "label": "Answer", "provider": p["label"], "metrics": metrics[p["label"]]}
               for p in PROVIDERS]
    stats = {"successes": sum(m["testPassCount"] for m in metrics.values()),
             "failures": sum(m["testFailCount"] for m in metrics.values()),
             "errors": sum(m["testErrorCount"] for m in metrics.values()), "tokenUsage": {}}
    doc = {"evalId": "eval-1", "results": {"version": 3, "timestamp": "2026-12-01T10:00:00Z", "prompts": prompts,
                                           "results": results, "stats": stats},
           "config": {"defaultTest": {"options": {"provider": "openai:gpt-4.1-mini"}}}, "shareableUrl": None}
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def test_promptfoo_counts_equal_its_stats(tmp_path):
    path = write_promptfoo(tmp_path / "results.json")
    assert sniff_format(path) == "promptfoo"
    imported = read_promptfoo(path)
    stats = imported.summary["stats"]
    assert stats == {"successes": 4, "failures": 1, "errors": 1}  # by hand from PLAN
    assert imported.summary["cells"] == stats
    non_error_cells = sum(1 for cell in PLAN.values() if cell is not None)
    assert len(imported.results) == 2 * non_error_cells  # two model-graded assertions per answered cell
    assert imported.skipped == {"icontains": non_error_cells}
    assert not imported.errors
    by_key = {(r.item_id, r.judge): r for r in imported.results}
    rubric = by_key[("q0|gpt-4o", "correctness")]
    assert (rubric.score, rubric.model, rubric.rationale) == (1.0, "openai:gpt-4o-mini", "rubric 1.0")
    assert by_key[("q2|llama3", "coherence")].model == "openai:gpt-4.1-mini"
    assert rubric.result["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert rubric.result["imported_from"] == str(path) and rubric.result["format"] == "promptfoo"
    assert rubric.result["position"] == "results.results[0].gradingResult.componentResults[0]"


def test_promptfoo_grader_error_abstains_and_bad_score_is_named_by_position(tmp_path):
    path = write_promptfoo(tmp_path / "results.json", grader_error_cell=(1, 0))
    doc = json.loads(path.read_text())
    doc["results"]["results"][0]["gradingResult"]["componentResults"][1]["score"] = "high"
    path.write_text(json.dumps(doc), encoding="utf-8")
    imported = read_promptfoo(path)
    (abstained,) = [r for r in imported.results if r.status == "abstained"]
    assert (abstained.item_id, abstained.judge) == ("q1|gpt-4o", "coherence")
    assert "grader timed out" in abstained.reason
    (error,) = imported.errors
    assert error.field == "results.results[0].gradingResult.componentResults[1]" and error.file == str(path)
    assert "'high' is not a number" in str(error)


def write_deepeval(path, *, wrapped=False):
    # (name, GEval score or error, code metric score or error); DeepEval's metricsScores lists scored values only
    plan = [("q1", 0.9, 1.0), ("q2", 0.2, 0.0), ("q3", 0.6, "timeout"), ("q4", "rate limited", 0.0)]
    cases, geval, code = [], [], []
    for i, (name, g, c) in enumerate(plan):
        metrics = []
        for metric_name, value, model, sink in (("Correctness [GEval]", g, "mock-judge-1", geval),
                                                ("Contains Expected", c, None, code)):
            data = {"name": metric_name, "threshold": 0.5, "strictMode": False, "evaluationModel": model}
            if isinstance(value, str):
                data.update(success=False, score=None, reason=None, error=value)
            else:
                data.update(success=value >= 0.5, score=value, reason=f"{metric_name} {value}")
                sink.append(value)
            metrics.append(data)
        cases.append({"name": name, "input": "?", "actualOutput": "!", "success": all(m["success"] for m in metrics),
                      "metricsData": metrics, "runDuration": 0.1, "order": i})

    def scores(metric, values, errors):
        return {"metric": metric, "scores": values, "passes": sum(v >= 0.5 for v in values),
                "fails": sum(v < 0.5 for v in values), "errors": errors}

    run = {"testCases": cases, "conversationalTestCases": [],
           "metricsScores": [scores("Correctness [GEval]", geval, 1), scores("Contains Expected", code, 1)],
           "testPassed": sum(c["success"] for c in cases), "testFailed": sum(not c["success"] for c in cases),
           "runDuration": 0.5}
    path.write_text(json.dumps({"testRunData": run} if wrapped else run), encoding="utf-8")
    return path


@pytest.mark.parametrize("wrapped", [False, True])
def test_deepeval_counts_equal_its_metrics_scores(tmp_path, wrapped):
    path = write_deepeval(tmp_path / "test_run.json", wrapped=wrapped)
    assert sniff_format(path) == "deepeval"
    imported = read_deepeval(path)
    own = imported.summary["metricsScores"]["Correctness [GEval]"]
    geval = [r for r in imported.results if r.judge == "Correctness [GEval]"]
    assert sum(r.status == "ok" for r in geval) == own["scores"] == 3
    assert sum(r.status == "abstained" for r in geval) == own["errors"] == 1
    assert statistics.fmean(r.score for r in geval if r.score is not None) == pytest.approx((0.9 + 0.2 + 0.6) / 3)
    assert {r.model for r in geval} == {"mock-judge-1"}
    assert imported.skipped == {"Contains Expected": 4}  # a metric without evaluationModel is computed
    assert "rate limited" in next(r.reason for r in geval if r.status == "abstained")
    kept = read_deepeval(path, include_deterministic=True)
    code = [r for r in kept.results if r.judge == "Contains Expected"]
    assert sum(r.status == "ok" for r in code) == kept.summary["metricsScores"]["Contains Expected"]["scores"] == 3
    assert imported.summary["testPassed"] + imported.summary["testFailed"] == imported.summary["test_cases"] == 4


def write_lm_eval(folder, *, bad_line=False):
    date = "2026-12-01T10-00-00.123456"
    folder.mkdir(parents=True, exist_ok=True)
    docs = [("72", "72", "72"), ("10", "10", "10"), ("5", "[invalid]", "5"), ("624", "600", "600")]
    lines = []
    for i, (target, strict, flexible) in enumerate(docs):
        for flt, prediction in (("strict-match", strict), ("flexible-extract", flexible)):
            lines.append(json.dumps({
                "doc_id": i, "doc": {"question": f"q{i}"}, "target": target, "arguments": {"gen_args_0": {"arg_0": "Q"}},
                "resps": [[prediction]], "filtered_resps": [prediction], "filter": flt, "metrics": ["exact_match"],
                "doc_hash": "h", "prompt_hash": "p", "target_hash": "t", "exact_match": float(prediction == target)}))
    if bad_line:
        lines.insert(3, "{broken")
    samples = folder / f"samples_gsm8k_{date}.jsonl"
    samples.write_text("\n".join(lines) + "\n", encoding="utf-8")
    results = {"results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": 0.5,
                                     "exact_match,flexible-extract": 0.75}},  # 2/4 and 3/4 by hand
               "n-samples": {"gsm8k": {"original": 1319, "effective": 4}}, "versions": {"gsm8k": 3.0},
               "config": {"model": "hf", "model_args": "pretrained=EleutherAI/pythia-70m"},
               "model_name": "EleutherAI/pythia-70m"}
    (folder / f"results_{date}.json").write_text(json.dumps(results), encoding="utf-8")
    return samples


def test_lm_eval_counts_equal_n_samples_and_means_equal_the_results_file(tmp_path):
    path = write_lm_eval(tmp_path / "EleutherAI__pythia-70m")
    assert sniff_format(path) == "lm-eval"
    assert sniff_format(next(path.parent.glob("results_*.json"))) == "lm-eval-results"
    imported = read_foreign(path)
    summary = imported.summary
    assert set(summary["lines_per_filter"].values()) == {summary["n_samples"]["effective"]} == {4}
    for flt in ("strict-match", "flexible-extract"):
        mine = [r.score for r in imported.results if r.judge == f"gsm8k/exact_match,{flt}"]
        assert len(mine) == 4
        assert statistics.fmean(mine) == summary["aggregated"][f"exact_match,{flt}"]
    assert {r.model for r in imported.results} == {"EleutherAI/pythia-70m"}
    assert {r.item_id for r in imported.results} == {"gsm8k:0", "gsm8k:1", "gsm8k:2", "gsm8k:3"}
    assert imported.results[0].result["line"] == 1


def test_lm_eval_bad_line_is_named_and_results_file_is_refused(tmp_path):
    path = write_lm_eval(tmp_path / "m", bad_line=True)
    imported = read_lm_eval(path)
    (error,) = imported.errors
    assert (error.file, error.line) == (str(path), 4) and "not valid JSON" in str(error)
    assert len(imported.results) == 8
    with pytest.raises(InputError, match="aggregates only"):
        read_foreign(next(path.parent.glob("results_*.json")))


def test_unknown_content_is_not_sniffed_and_named_formats_are_checked(tmp_path):
    generic = tmp_path / "j.jsonl"
    generic.write_text(json.dumps({"item_id": "a", "judge": "j", "model": "m", "score": 1}) + "\n", encoding="utf-8")
    assert sniff_format(generic) is None
    with pytest.raises(InputError, match="not a promptfoo output file"):
        read_foreign(generic, "promptfoo")
    with pytest.raises(InputError, match="not a DeepEval test run"):
        read_foreign(generic, "deepeval")
    with pytest.raises(InputError, match="unknown format"):
        read_foreign(generic, "braintrust")
    broken = tmp_path / "broken.json"
    broken.write_text('{"results": ', encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        read_foreign(broken, "promptfoo")


def test_deeply_nested_json_is_one_clear_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    assert sniff_format(deep) == "damaged"  # one line for the file, not one bad row per line
    with pytest.raises(InputError, match="nested too deeply"):
        read_foreign(deep, "promptfoo")

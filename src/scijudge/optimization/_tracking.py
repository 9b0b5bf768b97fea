"""Optional experiment tracking of optimizations (MLflow, imported only when asked for).

``--track mlflow`` logs one MLflow run per optimization: the recipe, model and split as parameters; each
candidate's validation score as the metric ``candidate_score`` with the LM calls spent so far as its
step; the before/after test statistics; the optimized spec, program and report as artifacts. Without
``MLFLOW_TRACKING_URI`` the runs go to a local file store (``<out>/mlruns``, else ``./mlruns``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from scijudge.errors import ScijudgeError

TRACKERS = ("mlflow",)


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flat(f"{prefix}.{key}" if prefix else str(key), inner, out)
    elif value is not None:
        out[prefix] = value


class MlflowTracker:
    """Logs optimization results to MLflow (see module docstring)."""

    def __init__(self, mlflow: Any, tracking_uri: str | None, experiment: str) -> None:
        self.mlflow = mlflow
        if tracking_uri:
            mlflow.set_tracking_uri(tracking_uri)
        mlflow.set_experiment(experiment)

    def log_result(self, result: Any) -> None:
        """One run per result: params, per-candidate scores, before/after metrics, artifacts."""
        mlflow = self.mlflow
        params: dict[str, Any] = {}
        prov = result.spec.provenance
        _flat("", {"judge": result.spec.name, "recipe": result.recipe.name, "optimizer": result.recipe.optimizer,
                   "metric": result.recipe.metric, "model": prov.get("model"), "prompt_model": prov.get("prompt_model"),
                   "seed": prov.get("seed"), "data_hash": prov.get("data_hash"), "split": prov.get("split"),
                   "settings": result.recipe.settings}, params)
        with mlflow.start_run(run_name=f"{result.spec.name}:{result.recipe.name}"):
            mlflow.log_params({k: str(v)[:500] for k, v in params.items()})
            mlflow.set_tags({"scijudge.stopped": result.stopped or "", "scijudge.base_spec_hash":
                             prov.get("base_spec_hash", "")})
            for trial in result.trials:
                if trial["score"] is not None:
                    mlflow.log_metric("candidate_score", float(trial["score"]), step=int(trial["first_seen_lm_calls"]))
            metrics: dict[str, float] = {}
            for role, values in (("before", result.before), ("after", result.after)):
                for key, value in values.items():
                    if isinstance(value, (int, float)) and math.isfinite(value):
                        metrics[f"test_{key}_{role}"] = float(value)
            for key in ("lm_calls", "optimization_lm_calls", "evaluation_lm_calls", "cost_usd"):
                value = result.budget.get(key)
                if isinstance(value, (int, float)):
                    metrics[key] = float(value)
            mlflow.log_metrics(metrics)
            for path in (result.spec_path, result.program_path, result.report_path):
                if path is not None and Path(path).exists():
                    mlflow.log_artifact(str(path))


def make_tracker(kind: str, *, tracking_uri: str | None = None, out: str | Path | None = None,
                 experiment: str = "scijudge-optimize") -> MlflowTracker:
    """A tracker by name; MLflow is imported here, with an install hint when it is missing."""
    if kind not in TRACKERS:
        raise ScijudgeError(f"unknown tracker {kind!r}; choose one of {', '.join(TRACKERS)}")
    try:
        import mlflow
    except ImportError as exc:
        raise ScijudgeError("tracking with MLflow needs the 'track' extra: pip install 'scijudge[track]'") from exc
    if tracking_uri is None and not os.environ.get("MLFLOW_TRACKING_URI"):
        base = Path(out) if out is not None else Path.cwd()
        folder = (base.parent if base.suffix == ".toml" else base) / "mlruns"
        tracking_uri = folder.resolve().as_uri()
    return MlflowTracker(mlflow, tracking_uri, experiment)

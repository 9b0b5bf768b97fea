"""What one optimization produced, and how it is written: spec TOML, program JSON, report JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.judges.base import Judge
from scijudge.optimization._recipes import Recipe
from scijudge.optimization._spec_io import save_spec
from scijudge.optimization._splits import ItemSplit
from scijudge.spec.judge_spec import JudgeSpec


INTERRUPTED = "interrupted by Ctrl-C"  # ``OptimizationResult.stopped`` after a Ctrl-C during the search


@dataclass
class OptimizationResult:
    """What one optimization produced: the optimized spec and program, and the held-out comparison."""

    spec: JudgeSpec
    base_spec: JudgeSpec
    program: Judge
    recipe: Recipe
    split: ItemSplit
    before: dict[str, Any]
    after: dict[str, Any]
    test_judgments: Any  # pandas DataFrame of run-store rows, column "role" = before | after
    calibration: Any  # scijudge.metrics.calibration.CalibrationResult
    trials: list[dict[str, Any]]
    budget: dict[str, Any]
    stopped: str | None = None
    variant_judgments: Any = None  # pandas DataFrame: perturbed test variants judged (robustness term only)
    notes: list[str] = field(default_factory=list)
    spec_path: Path | None = None
    program_path: Path | None = None
    report_path: Path | None = None
    unchanged: bool = False  # the optimizer returned the base judge's prompt (instructions and demos) as it was

    @property
    def interrupted(self) -> bool:
        """Ctrl-C stopped the search: what was kept is the best candidate so far (partial), not a finished one."""
        return self.stopped == INTERRUPTED

    @property
    def improvement(self) -> float:
        """Test metric score after minus before."""
        return float(self.after["score"] - self.before["score"])

    def summary(self) -> dict[str, Any]:
        """One flat row (used by experiment tables)."""
        split = self.spec.provenance.get("split", {})
        row: dict[str, Any] = {"judge": self.spec.name, "name": self.spec.provenance.get("display_name", ""),
                               "recipe": self.recipe.name, "optimizer": self.recipe.optimizer,
                               "metric": self.recipe.metric, "model": self.spec.provenance.get("model"),
                               "status": "stopped early" if self.stopped else "ok",
                               "split": f"{split.get('train', 0):g}/{split.get('dev', 0):g}/{split.get('test', 0):g}"
                                        f" seed {split.get('seed')}",
                               **{k: self.budget.get(k) for k in ("lm_calls", "optimization_lm_calls",
                                                                  "evaluation_lm_calls", "cost_usd")},
                               "stopped": self.stopped or "", "n_test": self.after.get("n_units"),
                               "reason": ""}
        for role, values in (("before", self.before), ("after", self.after)):
            for key in ("score", "exact", "within1", "mae", "kappa_w", "accuracy", "balanced_accuracy", "coverage",
                        "robustness", "n_variants"):
                if key in values:
                    row[f"{key}_{role}"] = values[key]
                    if role == "after":  # the held-out statistic's 95% interval (cluster bootstrap over items)
                        row[f"{key}_after_lo"] = values.get(f"{key}_lo", float("nan"))
                        row[f"{key}_after_hi"] = values.get(f"{key}_hi", float("nan"))
        for key in ("gain", "gain_lo", "gain_hi", "n_paired"):  # after minus before, paired on the test units
            if key in self.after:
                row[key] = self.after[key]
        row["spec_path"] = str(self.spec_path) if self.spec_path else ""
        return row



def write_outputs(result: OptimizationResult, out: Path) -> None:
    """Spec TOML, program JSON and a JSON report (calibration frames, trials, notes). After a Ctrl-C the files'
    names say ``partial`` (``<name>.partial.toml``): the best candidate so far, not a finished optimization."""
    from scijudge.metrics.calibration import frame_records

    name = result.spec.provenance.get("display_name") or f"{result.spec.name}@{result.recipe.name}"
    spec_path = out if out.suffix == ".toml" else out / f"{name}.toml"
    if result.interrupted:
        spec_path = spec_path.with_name(spec_path.stem + ".partial.toml")
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    save_spec(result.spec, spec_path)
    program_path = spec_path.with_name(spec_path.stem + ".program.json")
    result.program.save(str(program_path))
    report_path = spec_path.with_name(spec_path.stem + ".report.json")
    report = {"summary": result.summary(), "before": result.before, "after": result.after,
              "budget": result.budget, "stopped": result.stopped, "notes": result.notes, "trials": result.trials,
              "split": {k: list(getattr(result.split, k)) for k in ("train", "dev", "test")},
              "test_judgments": frame_records(result.test_judgments.drop(columns=["attempts"], errors="ignore")),
              "calibration": result.calibration.to_dict() if result.calibration is not None else None}
    report_path.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    result.spec_path, result.program_path, result.report_path = spec_path, program_path, report_path

"""Labels say where they came from; agreement with model-made labels is never called calibration against humans."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from scijudge.records import JudgeResult
from scijudge.run.store import Run


def test_calibrate_and_estimate_state_the_label_source_and_warn_on_llm_labels(tmp_path):
    store = tmp_path / "run.sqlite"
    with Run(store) as run:
        for i in range(30):
            run.record(JudgeResult(item_id=f"i{i}", judge="j", family="likert", spec_hash="h", model="m/x",
                                   status="ok", score=float(1 + i % 5)))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": f"i{i}", "judge": "j", "score": float(1 + (i + i // 7) % 5),
                                          "source": "llm" if i < 10 else "expert"}) + "\n" for i in range(30)))
    from scijudge.cli import app

    for command in (["calibrate", "--run", str(store), "--labels", str(labels), "--n-boot", "0"],
                    ["estimate", "--run", str(store), "--labels", str(labels)]):
        result = CliRunner().invoke(app, command, env={"COLUMNS": "250"})
        assert result.exit_code == 0, result.output
        assert "labels: 20 expert, 10 llm" in result.output
        assert "some labels come from a model (source llm)" in " ".join(result.output.split())

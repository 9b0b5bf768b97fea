"""Regenerate panel.jsonl and panel_rerun.jsonl (seeded; run from the repository root)."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS = HERE.parent / "yescieval_example" / "labels.jsonl"
JUDGES = {"judge-a": (0.4, 0.6, 0.05), "judge-b": (-0.2, 0.8, 0.08), "judge-c": (0.1, 1.0, 0.05)}  # bias, sd, abstain


def main() -> None:
    rng = random.Random(26)
    by_unit: dict[tuple[str, str], list[float]] = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        by_unit.setdefault((row["item_id"], row["judge"]), []).append(float(row["score"]))
    first, rerun = [], []
    for (item, judge), scores in sorted(by_unit.items()):
        human = statistics.median(scores)
        for model, (bias, sd, p_abstain) in JUDGES.items():
            base = {"item_id": item, "judge": judge, "model": model, "family": "likert"}
            if rng.random() < p_abstain:
                first.append({**base, "reason": "parse_error"})
                rerun.append({**base, "reason": "parse_error"})
                continue
            score = min(5, max(1, round(human + bias + rng.gauss(0, sd))))
            first.append({**base, "score": score})
            again = score
            if rng.random() < 0.15:  # the rerun changes about 15% of the answers, a few by 2 points
                step = 2 if rng.random() < 0.25 else 1
                again = score + step if score + step <= 5 else score - step
            rerun.append({**base, "score": again})
    for name, rows in (("panel.jsonl", first), ("panel_rerun.jsonl", rerun)):
        (HERE / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()

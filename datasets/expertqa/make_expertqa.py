"""Build scijudge's ExpertQA example from ExpertQA's validation split (``rand_val.jsonl``, MIT).

Usage: python datasets/expertqa/make_expertqa.py PATH/TO/rand_val.jsonl

Writes, beside this script: ``answers.jsonl`` (every answer, judged by ``expertqa.usefulness``), ``claims.jsonl``
(a seeded sample of CLAIMS claims in a seeded order, judged by ``expertqa.claim_correctness`` and ``expertqa.claim_support``) and
``labels.jsonl`` (the experts' labels on scijudge's numeric scales, ``source: "human"``). Every item carries
``meta.split`` (``train`` or ``dev``, fixed by SEED). Rerunning on the same file writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

SEED = 20240601
CLAIMS = 320
DEV_FRACTION = 0.4
HERE = Path(__file__).resolve().parent

# The experts' answers, in order from worst to best, as scijudge scale points.
USEFULNESS = {"Not useful at all": 1, "Partially useful": 2, "Useful": 3}
CORRECTNESS = {"Definitely incorrect": 1, "Likely incorrect": 2, "Unsure": 3, "Probably correct": 4,
               "Definitely correct": 5}
# "Partial" and "Incomplete" both say the evidence backs only part of the claim; the release does not order them,
# so both are the middle point. "N/A" (not a claim that needs support) has no label.
SUPPORT = {"Missing": 1, "Incomplete": 2, "Partial": 2, "Complete": 3}


def split_of(key: str) -> str:
    """train or dev, by a hash of the seed and the question (so a question's answer and claims share a split)."""
    digest = hashlib.sha256(f"{SEED}:{key}".encode()).digest()
    return "dev" if int.from_bytes(digest[:8], "big") / 2**64 < DEV_FRACTION else "train"


def evidence_text(evidence: list[str]) -> str:
    return "\n\n".join(e.strip() for e in evidence) if evidence else "(no evidence was cited for this claim)"


def build(rows: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    answers, claims, labels = [], [], []
    for number, row in enumerate(rows, 1):
        (system, answer), = row["answers"].items()
        meta = row.get("metadata") or {}
        split = split_of(row["question"])
        common = {"field": meta.get("field"), "specific_field": meta.get("specific_field"),
                  "question_type": meta.get("question_type"), "system": system, "split": split}
        answer_id = f"a{number:03d}"
        answers.append({"id": answer_id, "question": row["question"], "answer": answer["answer_string"],
                        "papers": [{"title": url.strip()} for url in answer.get("attribution") or []],
                        "meta": common})
        annotator = answer.get("annotator_id") or row.get("annotator_id")
        if answer.get("usefulness") in USEFULNESS:
            labels.append({"item_id": answer_id, "judge": "expertqa.usefulness",
                           "score": USEFULNESS[answer["usefulness"]], "annotator": annotator, "source": "human"})
        for index, claim in enumerate(answer["claims"], 1):
            claims.append(({"id": f"{answer_id}-c{index:02d}", "question": row["question"],
                            "answer": claim["claim_string"], "inputs": {"evidence": evidence_text(claim["evidence"])},
                            "meta": {**common, "answer_id": answer_id}}, claim, annotator))
    random.Random(SEED).shuffle(claims)
    kept = claims[:CLAIMS]  # in the shuffled order: the first few come from different questions
    for item, claim, annotator in kept:
        for judge, scale, value in (("expertqa.claim_correctness", CORRECTNESS, claim.get("correctness")),
                                    ("expertqa.claim_support", SUPPORT, claim.get("support"))):
            if value in scale:
                labels.append({"item_id": item["id"], "judge": judge, "score": scale[value], "annotator": annotator,
                               "source": "human"})
    return answers, [c[0] for c in kept], labels


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def main(source: str) -> None:
    rows = [json.loads(line) for line in Path(source).read_text(encoding="utf-8").splitlines() if line.strip()]
    answers, claims, labels = build(rows)
    write(HERE / "answers.jsonl", answers)
    write(HERE / "claims.jsonl", claims)
    write(HERE / "labels.jsonl", sorted(labels, key=lambda r: (r["judge"], r["item_id"])))
    print(f"{len(answers)} answers, {len(claims)} claims, {len(labels)} labels")


if __name__ == "__main__":
    main(sys.argv[1])

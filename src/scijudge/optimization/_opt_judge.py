"""The judge as optimizers see it: broken instructions are refused, every prediction names its candidate."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from scijudge.spec.demos import demo_to_spec
from scijudge.errors import ModelError
from scijudge.judges.base import Judge
from scijudge.optimization._budget import Gate, StopRun
from scijudge.optimization._guard import InstructionGuard
from scijudge.optimization._judge_metrics import Ledger
from scijudge.spec.judge_spec import JudgeSpec


class OptJudge(Judge):
    """The judge as optimizers see it: refuses candidates with broken instructions (an abstention, no LM
    call) and tags every prediction with the candidate it came from, for the ledger."""

    def __init__(self, spec: JudgeSpec, *, lm: Any, guard: InstructionGuard, ledger: Ledger, gate: Gate) -> None:
        super().__init__(spec, lm=lm)
        self._sj_guard = guard
        self._sj_ledger = ledger
        self._sj_gate = gate
        # (id of signature, ids of demos) -> (the objects themselves, candidate id); holding the objects keeps
        # their ids from being reused by later candidates while the optimization runs
        self._sj_seen: dict[tuple[int, tuple[int, ...]], tuple[Any, list[Any], str]] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> OptJudge:
        import copy

        shared = {"chain", "lm", "spec", "_sj_guard", "_sj_ledger", "_sj_gate", "_sj_seen"}
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = value if key in shared else copy.deepcopy(value, memo)
        return new

    def _candidate(self) -> str:
        """Stable id of this program's instructions + demos (content hash, computed once per object set)."""
        signature, demos = self.predict.signature, list(self.predict.demos)
        key = (id(signature), tuple(id(d) for d in demos))
        seen = self._sj_seen.get(key)
        if seen is not None:
            return seen[2]
        snapshot = {"instructions": signature.instructions, "demos": [demo_to_spec(d, self.spec) for d in demos]}
        cid = hashlib.sha256(json.dumps(snapshot, sort_keys=True).encode()).hexdigest()[:12]
        self._sj_ledger.register(cid, snapshot, self._sj_gate.budget.calls)
        self._sj_seen[key] = (signature, demos, cid)
        return cid

    def forward(self, **inputs: Any) -> Any:
        import dspy

        cid = self._candidate()
        problems = self._sj_guard.problems(self.predict.signature.instructions)
        if problems:
            return dspy.Prediction(judgment=None, abstained=True, attempts=[], candidate=cid,
                                   reason="instructions rejected: " + "; ".join(problems))
        try:
            prediction = super().forward(**inputs)
        except ModelError as exc:  # auth, billing, configuration: no candidate can do better, so stop now
            self._sj_gate.close(wait=0)
            raise StopRun(str(exc), exc) from exc
        prediction.candidate = cid
        return prediction

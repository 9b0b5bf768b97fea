"""A toy world for optimization experiments without a real model: synthetic items and labels, a scripted
judge whose bias depends on its prompt, and a scripted proposer for the optimizers' own LM calls.

The judge knows each synthetic answer's true quality (1-5, hidden in a lookup table, keyed by the
``T-123`` marker in the answer text) and rates it:

- with the calibration wording (``CALIBRATION_SENTENCE``) in its instructions: the true quality;
- else, with demonstrations in the prompt: true quality + the average offset the demonstrations show
  (a demo rated exactly like its human label teaches it to stop inflating);
- else: true quality + 2, clipped to 5 (the optimism of an untuned judge).

At a sampling temperature above 0.2 (optimizers resampling for variety) it adds noise of -1, 0 or +1. Asked for
a decision (an HTTP request with logprobs), it answers the same rating as one token, with a distribution over the
levels peaked at it (``decision_dist``).
The proposer answers every DSPy proposal signature (MIPROv2, COPRO, SIMBA, GEPA) in the format the
adapter asked for. Half its proposals add the calibration wording and half only rephrase, so an
optimizer has to evaluate candidates to find the good one; GEPA's feedback ("too high") always leads
it to the calibration wording. It is an illustration and a test double, not a model of real judges.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from scijudge.data import Item, Paper
from scijudge.labels import HumanLabel
from scijudge.spec.outputs import JudgeOutput, RunFields

CALIBRATION_SENTENCE = ("Start from the middle of the scale and reserve the two highest ratings for answers "
                        "whose claims you could check against the papers one by one.")
TRIGGER = "reserve the two highest ratings"
ROBUST_SENTENCE = "Lower the rating by two points for every claim that no paper states."
ROBUST_TRIGGER = "lower the rating by two points"
REPHRASE_SENTENCE = "Read the whole answer once before you rate it, then rate it."
_MARKER = re.compile(r"\bT-(\d{3})\b")
_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)(?:\nAll interactions|\n\n|$)", re.DOTALL)
_FIELD = re.compile(r"^\d+\. `([A-Za-z_][A-Za-z0-9_]*)`", re.MULTILINE)
_INSTRUCTION_FIELDS = ("proposed_instruction", "new_instruction", "improved_instruction", "instruction",
                       "shortened_instruction")


class ToyVerdict(JudgeOutput):
    """Output of the toy verdict judge: is the answer good enough (true quality 4 or 5)?"""

    reasoning: str = Field(description="Why.")
    verdict: Literal["yes", "no"] = Field(description="'yes' when the answer is good enough, else 'no'.")

    def run_fields(self) -> RunFields:
        return RunFields(score=1.0 if self.verdict == "yes" else 0.0, verdict=self.verdict, rationale=self.reasoning)


def toy_verdict_spec() -> Any:
    """A verdict judge (family checklist) whose output is ``ToyVerdict`` (registered as ``toy.verdict``)."""
    from scijudge.spec.judge_spec import InputSpec, JudgeSpec
    from scijudge.spec.output_types import register_output

    register_output("toy.verdict", ToyVerdict)

    return JudgeSpec(name="toy.good_enough", family="checklist", description="Is the answer good enough?",
                     instructions="Decide whether the answer to the question is good enough.",
                     output="toy.verdict",
                     inputs=[InputSpec(name="question"), InputSpec(name="answer")])


def make_items(n: int = 30, *, seed: int = 0, judge: str = "yescieval.qa.correctness",
               annotators: int = 1, rationale: bool = True,
               verdicts: bool = False) -> tuple[list[Item], list[HumanLabel], dict[str, int]]:
    """``n`` synthetic items with true qualities spread evenly over 1-5, and one label per annotator
    (a score, or with ``verdicts`` the verdict 'yes' for quality 4-5 and 'no' below)."""
    rng = random.Random(seed)
    qualities = [1 + (i % 5) for i in range(n)]
    rng.shuffle(qualities)
    items, labels, truth = [], [], {}
    for i, q in enumerate(qualities):
        marker = f"T-{i:03d}"
        truth[marker] = q
        item_id = f"toy{i:03d}"
        items.append(Item(
            id=item_id,
            question=f"What does study {marker} report about sample preparation?",
            papers=[Paper(title=f"Preparation study {marker}", abstract="Samples were annealed and measured.")],
            answer=f"Answer {marker}: the samples were annealed before measurement, which the study reports.",
        ))
        for a in range(annotators):
            value = {"verdict": "yes" if q >= 4 else "no"} if verdicts else {"score": float(q)}
            labels.append(HumanLabel(
                item_id=item_id, judge=judge, **value, annotator=f"ann{a + 1}",
                rationale=(f"The answer's claims earn a {q}: " + ("all verified." if q >= 4 else "some unsupported."))
                if rationale else None,
            ))
    return items, labels, truth


def _split_messages(messages: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]], str]:
    system = "\n".join(t for r, t in messages if r == "system")
    chat = [(r, t) for r, t in messages if r != "system"]
    final = chat[-1][1] if chat and chat[-1][0] == "user" else ""
    pairs = [(chat[i][1], chat[i + 1][1]) for i in range(0, len(chat) - 1, 2)
             if chat[i][0] == "user" and chat[i + 1][0] == "assistant"]
    return system, pairs, final


def output_fields(system: str) -> list[str]:
    """Output field names a DSPy adapter's system message announces."""
    found = _OUTPUTS.search(system)
    return _FIELD.findall(found.group(1)) if found else []


def _rating_of(text: str) -> int | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        match = re.search(r"\"rating\"\s*:\s*(\d)", text)
        return int(match.group(1)) if match else None
    value = data.get("judgment", data) if isinstance(data, dict) else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return int(value["rating"]) if isinstance(value, dict) and "rating" in value else None


@dataclass
class ToyWorld:
    """The scripted judge and proposer of one experiment (see module docstring)."""

    truth: dict[str, int]
    base_instructions: str = ""
    seed: int = 0
    originals: dict[str, str] = field(default_factory=dict)  # marker -> the original answer text
    robust_proposals: bool = False  # every other calibrated proposal also adds ROBUST_SENTENCE
    judge_calls: int = 0
    proposer_calls: int = 0
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    # --- the judge ----------------------------------------------------------------------------------
    def quality(self, text: str) -> int | None:
        """True quality of the item whose marker appears in ``text``."""
        for marker in _MARKER.findall(text):
            key = f"T-{marker}"
            if key in self.truth:
                return self.truth[key]
        return None

    def bias(self, system: str, demos: list[tuple[str, str]]) -> int:
        """How far above the truth the judge rates, given its instructions and demonstrations."""
        if TRIGGER in system.lower():
            return 0
        offsets = []
        for user, assistant in demos:
            q, shown = self.quality(user), _rating_of(assistant)
            if q is not None and shown is not None:
                offsets.append(shown - q)
        if offsets:
            return round(sum(offsets) / len(offsets))
        return 2

    def judge_reply(self, messages: list[tuple[str, str]], temperature: float | None) -> str:
        system, demos, final = _split_messages(messages)
        q = self.quality(final) or 3
        if "(ToyVerdict)" in system:  # the verdict judge: says "yes" to everything until calibrated
            verdict = ("yes" if q >= 4 else "no") if TRIGGER in system.lower() else "yes"
            with self._lock:
                self.judge_calls += 1
            return json.dumps({"judgment": {"reasoning": "Looked at the answer.", "verdict": verdict}})
        noise = 0
        with self._lock:
            self.judge_calls += 1
            if temperature is not None and temperature > 0.2:
                noise = self._rng.choice((-1, 0, 1))
        rating = min(5, max(1, q + self.bias(system, demos) + noise))
        if ROBUST_TRIGGER in system.lower() and self._perturbed(final):
            rating = max(1, rating - 2)
        return json.dumps({"judgment": {"rationale": f"Checked the claims; rating {rating}.", "rating": rating}})

    def decision_dist(self, messages: list[tuple[str, str]]) -> dict[str, float]:
        """The level distribution of a decision request: the rating ``judge_reply`` would give, most likely
        (weights e^-2|level - rating|), 5% of the mass left off the levels."""
        system, demos, final = _split_messages(messages)
        with self._lock:
            self.judge_calls += 1
        rating = min(5, max(1, (self.quality(final) or 3) + self.bias(system, demos)))
        weights = {str(k): math.exp(-2 * abs(k - rating)) for k in range(1, 6)}
        total = sum(weights.values()) / 0.95
        return {k: w / total for k, w in weights.items()}

    def _perturbed(self, text: str) -> bool:
        """True when the answer line in ``text`` differs from that item's original answer (a perturbed variant)."""
        for line in re.findall(r"Answer T-\d{3}:[^\n]*", text):
            original = self.originals.get(next(iter(markers(line))))
            if original is not None and line.strip() != original.strip():
                return True
        return False

    # --- the proposer -------------------------------------------------------------------------------
    def _proposal(self, text: str) -> str:
        with self._lock:
            self.proposer_calls += 1
            count = self.proposer_calls
        calibrate = "too high" in text.lower() or count % 2 == 0
        base = self.base_instructions.strip()
        head = CALIBRATION_SENTENCE if calibrate else REPHRASE_SENTENCE
        if self.robust_proposals and calibrate and count % 4 == 0:
            head = f"{CALIBRATION_SENTENCE} {ROBUST_SENTENCE}"
        return f"{head}\n\n{base}" if base else head

    def proposer_reply(self, messages: list[tuple[str, str]]) -> str:
        system = "\n".join(t for r, t in messages if r == "system")
        user = "\n".join(t for r, t in messages if r != "system")
        names = output_fields(system) or ["proposed_instruction"]
        values: dict[str, Any] = {}
        for name in names:
            if name in _INSTRUCTION_FIELDS:
                values[name] = self._proposal(user)
            elif name == "module_advice":
                values[name] = {"predict": self._proposal(user).split("\n\n")[0]}
            elif name == "observations" and "prior_observations" in system:
                values[name] = "COMPLETE"
            elif name == "proposed_prefix_for_output_field":
                values[name] = "Judgment:"
            else:
                values[name] = "Answers to research questions, each rated 1-5 by a human annotator."
        if "[[ ## completed ## ]]" in system:
            parts = [f"[[ ## {k} ## ]]\n{json.dumps(v) if isinstance(v, dict) else v}" for k, v in values.items()]
            return "\n\n".join(parts) + "\n\n[[ ## completed ## ]]"
        return json.dumps(values)

    # --- routing ------------------------------------------------------------------------------------
    def reply(self, messages: list[tuple[str, str]], temperature: float | None) -> str:
        """Answer a chat: the judge when the only output field is ``judgment``, else the proposer."""
        system = "\n".join(t for r, t in messages if r == "system")
        if output_fields(system) == ["judgment"]:
            return self.judge_reply(messages, temperature)
        return self.proposer_reply(messages)

    def respond(self, request: Any) -> str:
        """For ``scijudge.testing.scripted.scripted_lm``: answer a DSPy lm15 Request."""
        messages: list[tuple[str, str]] = []
        system = request.system
        if isinstance(system, str):
            messages.append(("system", system))
        elif system:
            messages.append(("system", "".join(getattr(p, "text", "") or "" for p in system)))
        for message in request.messages:
            messages.append((message.role, "".join(getattr(p, "text", "") or "" for p in message.parts)))
        return self.reply(messages, request.config.temperature)

    def http_handler(self, body: dict[str, Any]) -> Any:
        """For ``scijudge.testing.OpenAICompatServer``: answer an OpenAI chat-completions body (a decision
        request, one with logprobs, gets the rating token and its alternatives)."""
        from scijudge.chain.decision import MAX_TOKENS as DECISION_TOKENS
        from scijudge.testing.openai_server import Reply, level_logprobs

        messages = []
        for m in body.get("messages", []):
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            messages.append((m.get("role", "user"), str(content or "")))
        cap = body.get("max_completion_tokens") or body.get("max_tokens")
        if body.get("logprobs") and cap == DECISION_TOKENS:  # the judge asked for its rating alone
            dist = self.decision_dist(messages)
            return Reply(max(dist, key=lambda k: dist[k]), finish_reason="length", completion_tokens=1,
                         logprobs=level_logprobs(dist, lead=" "))
        return self.reply(messages, body.get("temperature"))


def toy_setup(n_items: int = 30, *, seed: int = 1, judge: str = "yescieval.qa.correctness",
              annotators: int = 1) -> tuple[Any, list[Item], list[HumanLabel], ToyWorld]:
    """(spec, items, labels, world) for a toy optimization of a shipped judge (or of ``toy.good_enough``)."""
    from scijudge.spec.signatures import render_instructions
    from scijudge.spec.judge_spec import get_spec

    spec = toy_verdict_spec() if judge == "toy.good_enough" else get_spec(judge)
    items, labels, truth = make_items(n_items, seed=seed, judge=spec.name, annotators=annotators,
                                      verdicts=spec.name == "toy.good_enough")
    originals = {next(iter(markers(i.answer))): i.answer for i in items if i.answer and markers(i.answer)}
    return spec, items, labels, ToyWorld(truth, base_instructions=render_instructions(spec), seed=seed,
                                         originals=originals)


def toy_variants(items: list[Item], *, seed: int = 0) -> list[Item]:
    """Extreme ``correctness`` perturbations of the toy items (``scijudge perturb``), as Items."""
    from scijudge.data.variants import perturb_items

    raw = perturb_items([i.model_dump(mode="json") for i in items], "extreme", seed, ["correctness"])
    return [Item.model_validate(r) for r in raw]


def markers(text: str) -> set[str]:
    """Item markers (``T-012``) that appear in a text."""
    return {f"T-{m}" for m in _MARKER.findall(text)}

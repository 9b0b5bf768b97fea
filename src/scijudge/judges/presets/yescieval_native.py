"""The ``yescieval-native`` preset: YESciEval's own prompts and answer format, for its released judges.

YESciEval's fine-tuned judge adapters (``SciKnowOrg/YESciEval-ASK-Llama-3.1-8B``, ``...-BioASQ-...``) were
trained on YESciEval's chat layout: a system message of tagged sections (``<Context>``, ``<Role>``,
``<Task-Description>``, ``<Evaluation-Characteristic>``, ``<Rating-Scale>``, ``<Response-Format>``, ``<Note>``),
a user message with the synthesis, the question and the papers (``"1. title\n\nabstract\n\n"`` each) in tags,
and a free-text answer holding ``{"Name": {"rating": "4", "rationale": "..."}}``.

The exact text comes from an installed ``yescieval`` package (``pip install 'scijudge[yescieval]'``, version
0.10.x), read without importing it (``_yescieval_source``); scijudge ships none of it. Without the package the
preset is refused with that install line. The package version is part of the judgments' spec hash (the prompt
text is part of what a judgment is). Deep-research prompts keep their ``{X_VOCAB}`` / ``{EXAMPLE_RESPONSES}``
placeholders as yescieval itself does when no domain is set. A user who needs another system text can pass it
in ``system_prompts`` (characteristic name -> text). The answer is parsed into the spec's typed output; when it
cannot be read, the judge falls back to the structured chain (``json_schema`` / ``json_object``), so the
result is typed either way and every request is recorded as an attempt.

Note on versions: yescieval 0.7 renamed ``<Evaluation-Characteristics>`` to ``<Evaluation-Characteristic>`` and
0.9 put newlines inside the user message's tags; the released adapters (May 2025) predate both changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from scijudge.errors import SpecError

NATIVE_STRATEGY = "native_text"
"""The ``strategy`` recorded on the attempt that sent the native prompt."""

TASK_CONTEXT = (
    "The synthesis under review was written to address one research problem, drawing on the titles and "
    "abstracts of a small set of papers. It is meant to be a single paragraph of no more than 200 words that combines "
    "the findings of those papers into one account instead of summarising each paper in turn. Every "
    "statement in it should be traceable to at least one of the given abstracts and should name that source "
    "with its citation marker; content from outside the abstracts is not expected."
)
"""YESciEval's task context in this project's words (also the QA rubrics' default ``task_context`` block)."""

_ROLE = "You review the quality of scientific syntheses."
_TASK = (
    "You receive a synthesis written as the answer to a research question, the research question itself, and "
    "the titles and abstracts of the papers it was built from. Rate the synthesis on the characteristic "
    "listed below. A good synthesis answers the question briefly, uses only what the abstracts report, and "
    "points to the abstract behind each claim."
)
_NOTE = (
    "Base the rating only on the synthesis and the abstracts provided, and support the rationale with "
    "concrete examples taken from them."
)
_LEVEL_LABELS = {1: "Very bad", 2: "Bad", 3: "Moderate", 4: "Good", 5: "Very good"}

USER_TEMPLATE = (
    "Evaluate and rate the quality of the following scientific synthesis according to the characteristics "
    "given in the system prompt.\n"
    "\n<scientific-synthesis>{answer}</scientific-synthesis>\n"
    "\n<research-question>{question}</research-question>\n"
    "\n<paper-titles-and-abstracts>\n{content}</paper-titles-and-abstracts>\n\n###"
)
"""YESciEval 0.1-0.8's user message (the released adapters' era); the preset uses the installed package's."""

_RESPONSE_FORMAT = (
    "For each characteristic rate the quality from 1 (very bad) to 5 (very good).  Provide a short rationale "
    "for each rating. \nReturn your response in JSON format: {characteristic : {\u2018rating\u2019 : \u2018\u2019, "
    "\u2018rationale\u2019 : \u2018\u2019}}"
)
_PAPER_HEAD = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)


def characteristic_name(spec: Any) -> str:
    """The characteristic's display name, as YESciEval writes it: the spec name's last part, capitalised."""
    return str(spec.name).rsplit(".", 1)[-1].replace("_", " ").capitalize()


def split_papers(papers: Any) -> list[tuple[str, str]]:
    """(title, abstract) pairs from a mapping, a list of {title, abstract}, or scijudge's ``[n] Title\\n...``
    text (numbered 1, 2, ... in order; anything else is read as one untitled paper)."""
    if papers is None or papers == "":
        return []
    if isinstance(papers, Mapping):
        return [(str(t), str(a)) for t, a in papers.items()]
    if isinstance(papers, list):
        return [(str(p.get("title", "")), str(p.get("abstract", ""))) for p in papers]
    text = str(papers)
    heads = list(_PAPER_HEAD.finditer(text))
    if not heads or [int(h.group(1)) for h in heads] != list(range(1, len(heads) + 1)):
        return [("", text.strip())]
    out = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[head.end():end]
        out.append((head.group(2).strip(), body.strip()))
    return out


def render_papers(papers: list[tuple[str, str]]) -> str:
    """Papers as the source numbers them: ``"1. title\\n\\nabstract\\n\\n"`` each."""
    return "".join(f"{i}. {title}\n\n{abstract}\n\n" for i, (title, abstract) in enumerate(papers, 1))


class YESciEvalNativePreset:
    """Build YESciEval's native chat for a Likert spec, and read its free-text answer into the typed output."""

    name = "yescieval-native"

    def __init__(self, system_prompts: Mapping[str, str] | None = None) -> None:
        from scijudge.judges.presets._yescieval_source import package_root

        self.system_prompts = dict(system_prompts or {})
        _, self.version = package_root()  # no package: a ModelError with the install line
        self.identity_tag = f"yescieval-native:{self.version}"

    def check(self, spec: Any) -> None:
        """Only 1-5 Likert rubrics with question, papers and answer have a native layout."""
        names = {i.name for i in spec.inputs}
        if spec.family != "likert" or not {"question", "papers", "answer"} <= names:
            raise SpecError(f"the yescieval-native preset needs a Likert rubric with question, papers and answer "
                            f"inputs; {spec.name} is a {spec.family} judge with inputs {sorted(names)}",
                            file=spec.source, field="preset")
        scale = spec.scale
        if scale is None or (scale.min, scale.max, scale.step) != (1, 5, 1):
            raise SpecError("the yescieval-native preset needs the 1-5 scale its judges were trained on",
                            file=spec.source, field="scale")

    # --- the prompt ----------------------------------------------------------------------------
    def system_prompt(self, spec: Any) -> str:
        """The rubric's system message, exactly as the installed yescieval package holds it."""
        name = characteristic_name(spec)
        if name in self.system_prompts:
            return self.system_prompts[name]
        from scijudge.judges.presets._yescieval_source import SPEC_CLASSES, system_prompt

        cls = SPEC_CLASSES.get(spec.name)
        if cls is not None:
            return system_prompt(cls, "pointwise", fill_placeholders=None)
        return self.own_system_prompt(spec)

    def own_system_prompt(self, spec: Any) -> str:
        """A system message in the source's section layout with this project's wording of the criteria (for a
        user's own 1-5 Likert rubric, which yescieval has no prompt for)."""
        name = characteristic_name(spec)
        anchors = spec.scale.anchors if spec.scale is not None else {}
        levels = "\n".join(f"Rating {k}. {_LEVEL_LABELS[k]}: {anchors.get(str(k), '').strip()}".rstrip()
                           for k in range(1, 6))
        example = json.dumps({name: {"rating": "4", "rationale": "One short sentence that cites the text."}})
        return (
            f"<Context>\n{TASK_CONTEXT}\n</Context>\n\n"
            f"<Role>\n{_ROLE}\n</Role>\n\n"
            f"<Task-Description>\n{_TASK}\n</Task-Description>\n\n"
            f"<Evaluation-Characteristics>\n1. {name}: {spec.description.strip()}\n</Evaluation-Characteristics>\n\n"
            f"<Rating-Scale>\nRate the characteristic from 1 (very bad) to 5 (very good), following the level "
            f"descriptions below.\n\n1. {name}\n{levels}\n</Rating-Scale>\n\n"
            f"<Response-Format>\n{_RESPONSE_FORMAT}\n\n<Example-Response>\n{example}\n</Example-Response>\n"
            f"</Response-Format>\n\n"
            f"<Note>\n{_NOTE}\n</Note>"
        )

    def user_prompt(self, inputs: Mapping[str, Any]) -> str:
        """The user message, exactly in the installed package's layout."""
        from scijudge.judges.presets._yescieval_source import user_templates

        return user_templates()["pointwise"].format(
            answer=inputs.get("answer") or "", question=inputs.get("question") or "",
            content=render_papers(split_papers(inputs.get("papers"))))

    def messages(self, spec: Any, inputs: Mapping[str, Any]) -> list[dict[str, str]]:
        """System and user messages, as the source's ``Rubric.instruct()`` returns them."""
        return [{"role": "system", "content": self.system_prompt(spec)},
                {"role": "user", "content": self.user_prompt(inputs)}]

    def decision_messages(self, spec: Any, inputs: Mapping[str, Any], *, prefill: bool) -> list[dict[str, str]]:
        """The native chat for decision mode. With ``prefill`` (a local model) the assistant's answer is opened
        as the adapters were trained to write it, ``{"Name": {"rating": "``, so the next token is the rating;
        without (an API, where an assistant prefill is not portable) the user message asks for the rating only."""
        messages = self.messages(spec, inputs)
        if prefill:
            name = _native_key(spec)
            return [*messages, {"role": "assistant", "content": '{"' + name + '": {"rating": "'}]
        messages[-1]["content"] += "\n\nAnswer with the rating only: one of 1, 2, 3, 4, 5."
        return messages

    # --- the answer ----------------------------------------------------------------------------
    def parse(self, text: str, spec: Any) -> Any:
        """The typed output from a native answer; ValueError when no rating can be read."""
        data = _json_in(text)
        entry: Any = data
        if isinstance(data, Mapping) and "rating" not in data:
            wanted = characteristic_name(spec).casefold()
            inner = [v for k, v in data.items() if isinstance(v, Mapping) and str(k).casefold() == wanted]
            inner = inner or [v for v in data.values() if isinstance(v, Mapping) and "rating" in v]
            entry = inner[0] if len(inner) == 1 else None
        if not isinstance(entry, Mapping) or "rating" not in entry:
            raise ValueError("no {characteristic: {rating, rationale}} object in the answer")
        rating = entry["rating"]
        if isinstance(rating, str):
            match = re.fullmatch(r"\s*([1-5])(?:\.0+)?\s*", rating)
            if not match:
                raise ValueError(f"rating {rating!r} is not a whole number from 1 to 5")
            rating = int(match.group(1))
        return spec.output_type().model_validate({"rating": rating, "rationale": str(entry.get("rationale", ""))})

    # --- the hook the judge calls ----------------------------------------------------------------
    def first_try(self, judge: Any, inputs: Mapping[str, Any], record: Any) -> Any:
        """Send the native prompt through the judge's chain transport; the typed output, or None to fall back
        to the structured chain (the attempt says why). Transport failures propagate as the chain's do."""
        response = judge.chain.send_free_text(judge.lm, self.messages(judge.spec, inputs), label=NATIVE_STRATEGY,
                                              record=record)
        if response is None:  # this free-text request was refused as a format: the structured chain takes over
            return None
        attempt = record.attempts[-1]
        try:
            value = self.parse(response.text or "", judge.spec)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError too
            attempt.outcome, attempt.error = "parse_error", str(exc)[:500]
            return None
        record.text = response.text
        return value


def _native_key(spec: Any) -> str:
    """The JSON key a native answer opens with: the yescieval class name (``Correctness``, ``CausalReasoning``)."""
    from scijudge.judges.presets._yescieval_source import SPEC_CLASSES

    return SPEC_CLASSES.get(spec.name) or characteristic_name(spec)


def _json_in(text: str) -> Any:
    """The first JSON object in a free-text answer; typographic quotes are read as plain ones."""
    plain = text.translate({ord(q): '"' for q in "\u2018\u2019\u201c\u201d"})
    decoder = json.JSONDecoder()
    for source in (text, plain):
        for match in re.finditer(r"\{", source):
            try:
                value, _ = decoder.raw_decode(source, match.start())
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    raise ValueError("no JSON object in the answer")


__all__ = ["NATIVE_STRATEGY", "TASK_CONTEXT", "USER_TEMPLATE", "YESciEvalNativePreset", "characteristic_name",
           "render_papers", "split_papers"]

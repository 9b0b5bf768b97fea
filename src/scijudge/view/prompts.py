"""The prompt a judgment was made from, rebuilt: the run store keeps no request, so the judge is built again from the
shipped spec whose hash the judgment stored, and its chain renders the messages for the item
(``StructuredChain.messages``: what every request of the fallback chain carries). A judgment whose spec is not
shipped (a spec file of the user's, since edited) or whose item is not in the items files says so instead."""

from __future__ import annotations

from typing import Any

from scijudge.errors import ScijudgeError
from scijudge.records import decoding_settings


def prompt_messages(spec: Any, item: Any, part: str, decoding: str = "") -> list[dict[str, str]]:
    """The chat messages (role, content) ``spec``'s judge sends for ``item`` (and ``part``); for a decision judgment
    (``decoding`` names ``mode: decision``), those of its rating-only request(s) (``judges.decision.decision_chats``)."""
    from scijudge.judges.build import build_judge

    judge = build_judge(spec)
    settings = decoding_settings(decoding)
    if settings.get("mode") == "decision":
        from scijudge.judges.decision import decision_chats

        judge.use_mode("decision", str(settings.get("decision_score") or "expected"))
        found: list[dict[str, str]] = []
        for system, chat in decision_chats(judge, item, part):
            found += [{"role": "system", "content": system}] if system else []
            found += [{"role": str(m.role), "content": "".join(getattr(p, "text", "") or "" for p in m.parts)}
                      for m in chat]
        return found
    messages = judge.chain.messages(judge.signature, judge.demos, judge.inputs_for(item, part))
    return [{"role": str(m.get("role", "")), "content": _text(m.get("content"))} for m in messages]


def is_decision(decoding: Any) -> bool:
    """A judgment's stored decoding settings say it was decided from level probabilities (``mode: decision``)."""
    return decoding_settings(decoding).get("mode") == "decision"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: their text, in order
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def rebuilt(specs: dict[str, Any], item: Any, judgment: dict[str, Any]) -> tuple[list[dict[str, str]], str]:
    """(the messages, "") or ([], why they cannot be shown)."""
    spec = specs.get(judgment.get("spec_hash") or "")
    if spec is None:
        return [], (f"the spec of this judgment (hash {judgment.get('spec_hash')}) is not one scijudge ships, so "
                    "its prompt cannot be rebuilt here")
    if isinstance(item, str):
        return [], item
    try:
        return prompt_messages(spec, item, judgment.get("part") or "", judgment.get("decoding") or ""), ""
    except (ScijudgeError, ValueError, TypeError, KeyError) as exc:
        return [], f"the prompt could not be rebuilt: {exc}"

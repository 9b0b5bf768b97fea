"""A loopback decision endpoint (``POST /v1/decisions``, the protocol of ``scijudge.lm.decisions``) with scripted
probabilities and the loopback OpenAI server's injected faults (``Fault``, ``Hang``, ``Html``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scijudge.testing.openai_server import Fault, Hang, Html, OpenAICompatServer


@dataclass
class Decision:
    """A decision answer: the probability of each option (as the server returns them), or a refusal."""

    probabilities: dict[str, float]
    input_tokens: int = 100
    refusal: str | None = None


DecisionHandler = Callable[[dict[str, Any]], "Decision | Fault | Hang | Html"]


def input_text(body: dict[str, Any]) -> str:
    """Every message text of a decision request's input (for routing in a handler)."""
    items = body.get("input") or []
    return "\n".join(str(m.get("content", "")) for m in items if isinstance(m, dict))


class DecisionServer(OpenAICompatServer):
    """Serve ``POST /v1/decisions`` from ``handler(body)``; ``requests`` records every body received."""

    def __init__(self, handler: DecisionHandler, *, latency: float = 0.0, port: int = 0) -> None:
        super().__init__(lambda body: "unused", latency=latency, port=port)
        self.decide = handler

    def _add_routes(self, app: Any) -> None:
        app.router.add_post("/v1/decisions", self._decisions)

    async def _decisions(self, request: Any) -> Any:
        from aiohttp import web

        body = await self._received(request)
        outcome = self.decide(body)
        if (fault := await self._fault_response(outcome)) is not None:
            return fault
        assert isinstance(outcome, Decision)
        question = (body.get("questions") or [{}])[0]
        if outcome.refusal is not None:
            answer: dict[str, Any] = {"type": "refusal", "name": question.get("name"), "refusal": outcome.refusal}
        else:
            answer = {"type": question.get("type", "score"), "name": question.get("name"),
                      "probabilities": [{"value": k, "probability": p} for k, p in outcome.probabilities.items()]}
        return web.json_response({"model": body.get("model", "decider"), "answers": [answer],
                                  "usage": {"input_tokens": outcome.input_tokens, "output_tokens": 0}})

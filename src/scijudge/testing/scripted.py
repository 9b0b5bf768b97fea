"""A scripted DSPy engine: answers come from a Python function of the request, no network involved.

Use it where the HTTP path does not matter (optimizer experiments, notebooks, unit tests):
``dspy.LM("scripted/judge", engine=ScriptedEngine(fn))``; ``fn(request) -> str``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class ScriptedEngine:
    """DSPy 3.4 engine whose completions are produced by ``respond(request)``; counts and keeps requests."""

    def __init__(self, respond: Callable[[Any], str], *, prompt_tokens: int = 100, completion_tokens: int = 20) -> None:
        self.respond = respond
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.requests: list[Any] = []
        self._lock = threading.Lock()

    def complete(self, request: Any) -> Any:
        from dspy import lm15

        with self._lock:
            self.requests.append(request)
        text = self.respond(request)
        return lm15.Response(
            id=None, model=request.model, message=lm15.Message.assistant(text), finish_reason="stop",
            usage=lm15.Usage(input_tokens=self.prompt_tokens, output_tokens=self.completion_tokens),
        )

    def stream(self, request: Any) -> Any:  # pragma: no cover - judges never stream
        raise NotImplementedError("the scripted engine does not stream")

    def close(self) -> None:
        return None


def request_text(request: Any) -> str:
    """System prompt plus every message's text of an lm15 Request (for routing in ``respond``)."""
    parts = []
    system = request.system
    if isinstance(system, str):
        parts.append(system)
    elif system:
        parts.extend(getattr(p, "text", "") or "" for p in system)
    for message in request.messages:
        parts.extend(getattr(p, "text", "") or "" for p in message.parts)
    return "\n".join(parts)


def scripted_lm(respond: Callable[[Any], str], model: str = "scripted/judge", **kwargs: Any) -> Any:
    """A dspy.LM backed by a ScriptedEngine (``lm.engine.requests`` holds what was sent)."""
    from scijudge.lm.dspy_compat import use_local_cost_map

    use_local_cost_map()
    import dspy

    return dspy.LM(model, engine=ScriptedEngine(respond), num_retries=0, **kwargs)

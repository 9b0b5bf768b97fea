"""A loopback OpenAI-compatible chat-completions server with scripted answers and injected faults.

Tests and benchmarks start it on 127.0.0.1 so that judges run through the real DSPy/litellm client,
HTTP and all. aiohttp (already a litellm dependency) serves it from a background event loop, so
hundreds of concurrent requests with injected latency cost no threads.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    """A successful completion: the assistant's text and how it ended."""

    content: str
    finish_reason: str = "stop"
    prompt_tokens: int = 50
    completion_tokens: int = 20
    logprobs: list[dict[str, Any]] | None = None


@dataclass
class Fault:
    """An HTTP error (status, body, headers), or a stall of ``delay`` seconds before answering."""

    status: int = 500
    message: str = "injected server error"
    error_type: str = "server_error"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Hang:
    """Accept the request and answer nothing for ``seconds`` (ends early when the server stops)."""

    seconds: float = 3600.0


@dataclass
class Html:
    """A 200 answer that is not a chat completion (a web page, as a wrong URL or a login proxy returns)."""

    body: str = "<html><body><h1>Welcome</h1></body></html>"


Handler = Callable[[dict[str, Any]], "Reply | Fault | Hang | Html | str"]


# --- ready-made fault modes -------------------------------------------------------------------------------
CONTENT_FILTER = Fault(400, "Invalid prompt: your prompt was flagged as potentially violating our usage policy",
                       "invalid_request_error")


def refuse_prompts_with(marker: str, then: Handler, fault: Fault = CONTENT_FILTER) -> Handler:
    """A handler that refuses (content-filter 400 by default) every request whose prompt contains ``marker``."""
    return lambda body: fault if marker in all_text(body) else then(body)


def fail_json_schema(fault: Fault, then: Handler) -> Handler:
    """A handler that answers ``fault`` (e.g. 404 or 503) to every ``json_schema`` request, ``then`` otherwise."""
    return lambda body: fault if (body.get("response_format") or {}).get("type") == "json_schema" else then(body)


def closed_port_url() -> str:
    """The URL of a loopback port nothing listens on (connection refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class OpenAICompatServer:
    """Serve ``POST /v1/chat/completions`` from a handler; record every request body received.

    Args:
        handler: maps the request JSON to a Reply, a Fault, or plain text (a Reply with that content).
        latency: seconds added before every answer (simulates a remote provider).
        port: the port on 127.0.0.1 (0: any free one; ``port`` holds it once started).
    """

    def __init__(self, handler: Handler, *, latency: float = 0.0, port: int = 0) -> None:
        self.handler = handler
        self.latency = latency
        self._asked_port = port
        self._start_error: BaseException | None = None
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: Any = None
        self._stopping = threading.Event()
        self.port: int | None = None

    @property
    def url(self) -> str:
        """Base URL to pass as ``api_base`` (ends with /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def count(self) -> int:
        """How many chat-completion requests have arrived."""
        with self._lock:
            return len(self.requests)

    def start(self) -> OpenAICompatServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(60):
            raise RuntimeError("loopback server did not start")
        if self._start_error is not None:  # e.g. the port is taken: raised here, in the caller's thread
            raise self._start_error
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._loop is None:
            return
        loop = self._loop

        async def _shutdown() -> None:
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(_shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> OpenAICompatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    max_request_bytes = 64 * 1024 * 1024

    def _add_routes(self, app: Any) -> None:
        """The endpoints served; subclasses add theirs (e.g. the batch API)."""
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)

    def _serve(self, ready: threading.Event) -> None:
        from aiohttp import web

        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        app = web.Application(client_max_size=self.max_request_bytes)
        self._add_routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", self._asked_port, backlog=1024)
        try:
            loop.run_until_complete(site.start())
        except OSError as exc:
            self._start_error = exc
            loop.run_until_complete(self._runner.cleanup())
            self._loop = None
            ready.set()
            return
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()
        loop.run_forever()

    async def _models(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"object": "list", "data": [{"id": "judge", "object": "model"}]})

    async def _received(self, request: Any) -> dict[str, Any]:
        """The request's JSON body, recorded with its Authorization header, after the server's latency."""
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            self.auth_headers.append(request.headers.get("Authorization", ""))
        if self.latency:
            await asyncio.sleep(self.latency)
        return body

    async def _fault_response(self, outcome: Any) -> Any:
        """The HTTP answer of an injected fault (a hang, an HTML page, an error status), or None for an answer."""
        from aiohttp import web

        if isinstance(outcome, Hang):
            ends = time.monotonic() + outcome.seconds
            while time.monotonic() < ends and not self._stopping.is_set():
                await asyncio.sleep(0.05)
            return web.Response(status=503, text="hang ended")
        if isinstance(outcome, Html):
            return web.Response(status=200, text=outcome.body, content_type="text/html")
        if isinstance(outcome, Fault):
            if outcome.delay:
                await asyncio.sleep(outcome.delay)
            payload = {"error": {"message": outcome.message, "type": outcome.error_type, "code": outcome.status}}
            return web.json_response(payload, status=outcome.status, headers=outcome.headers)
        return None

    async def _chat(self, request: Any) -> Any:
        from aiohttp import web

        body = await self._received(request)
        outcome = self.handler(body)
        if isinstance(outcome, str):
            outcome = Reply(outcome)
        if (fault := await self._fault_response(outcome)) is not None:
            return fault
        assert isinstance(outcome, Reply)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": outcome.content},
            "finish_reason": outcome.finish_reason,
        }
        if outcome.logprobs is not None:
            choice["logprobs"] = {"content": outcome.logprobs}
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "judge"),
                "choices": [choice],
                "usage": {
                    "prompt_tokens": outcome.prompt_tokens,
                    "completion_tokens": outcome.completion_tokens,
                    "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
                },
            }
        )


def level_logprobs(dist: dict[str, float], *, chosen: str | None = None, lead: str = "") -> list[dict[str, Any]]:
    """OpenAI ``logprobs.content`` for a one-token answer drawn from ``dist`` (token -> probability; the rest
    of the mass is simply not listed): the chosen token (default: the most likely) with ``dist`` as its top
    alternatives, each spelled with ``lead`` in front (e.g. a space). For decision-mode tests."""
    import math

    pick = chosen if chosen is not None else max(dist, key=lambda k: dist[k])
    top = [{"token": lead + token, "logprob": math.log(p), "bytes": None} for token, p in dist.items() if p > 0]
    return [{"token": lead + pick, "logprob": math.log(dist[pick]), "bytes": None, "top_logprobs": top}]


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a chat request (for handlers that route on content)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    return ""


def all_text(body: dict[str, Any]) -> str:
    """Every message's text joined, for handlers that look for markers anywhere in the prompt."""
    parts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            parts.extend(part.get("text", "") for part in content if isinstance(part, dict))
        else:
            parts.append(str(content))
    return "\n".join(parts)


__all__ = ["CONTENT_FILTER", "Fault", "Hang", "Html", "OpenAICompatServer", "Reply", "all_text", "closed_port_url",
           "fail_json_schema", "json", "last_user_text", "level_logprobs", "refuse_prompts_with"]

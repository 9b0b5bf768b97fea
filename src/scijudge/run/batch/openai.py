"""The OpenAI-compatible files + batches API (OpenAI, vLLM's batch runner, gateways that speak it).

Uses the ``openai`` SDK (a litellm dependency, so always installed) with the judge LM's ``api_base``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from scijudge.errors import ModelError

METADATA_KEY = "scijudge_client_id"


@dataclass
class BatchState:
    """What polling a batch returned; ``lines`` (custom_id → result line) only once it is final."""

    status: str
    completed: int = 0
    failed: int = 0
    lines: dict[str, dict[str, Any]] = field(default_factory=dict)


class OpenAIBatchAPI:
    """Submit, poll and read batches of chat-completion lines."""

    provider = "openai"
    strategies = ("json_schema", "json_object")

    def __init__(self, api_base: str | None, api_key: str | None, *, completion_window: str = "24h") -> None:
        import openai

        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ModelError("batch mode needs OPENAI_API_KEY (or an --api-base server, which takes any key)")
        self._client = openai.OpenAI(base_url=api_base, api_key=key, max_retries=4)
        self.api_base = api_base
        self.completion_window = completion_window

    def line(self, key: str, judge: Any, inputs: dict[str, Any], *, strategy: str, temperature: float,
             max_tokens: int) -> dict[str, Any]:
        """One batch line: the judgment key as custom_id and the body the chain sends at this stage."""
        lm = judge.lm
        body = judge.chain.chat_body(lm.model.split("/", 1)[-1], judge.signature, judge.demos,
                                     inputs, strategy=strategy, temperature=temperature, max_tokens=max_tokens)
        return {"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body}

    def outcome(self, line: dict[str, Any] | None) -> tuple[int | None, Any, str | None]:
        """(HTTP status, lm15 Response when 200, error text) of one result line; status None if unanswered."""
        from dspy import lm15

        status, body, error = line_outcome(line)
        return status, (lm15.response_from_openai_chat(body) if body is not None else None), error

    def submit(self, lines: list[dict[str, Any]], client_id: str) -> tuple[str, str]:
        """Upload the lines and create the batch; returns (remote id, status)."""
        payload = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
        try:
            uploaded = self._client.files.create(file=(f"{client_id}.jsonl", payload), purpose="batch")
            batch = self._client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                                completion_window=self.completion_window,
                                                metadata={METADATA_KEY: client_id})
        except Exception as exc:
            raise ModelError(f"could not create a batch: {_short(exc)}") from exc
        return batch.id, batch.status

    def find(self, record: Any) -> str | None:
        """The remote id of a batch created for this intent (a kill before its id was recorded), by metadata."""
        client_id = record.client_id
        try:
            for batch in self._client.batches.list(limit=100):
                if (batch.metadata or {}).get(METADATA_KEY) == client_id:
                    return batch.id
        except Exception as exc:
            raise ModelError(f"could not list batches: {_short(exc)}") from exc
        return None

    def poll(self, remote_id: str) -> BatchState:
        """The batch's status; when it has ended, every result line it produced."""
        try:
            batch = self._client.batches.retrieve(remote_id)
        except Exception as exc:
            raise ModelError(f"could not poll batch {remote_id}: {_short(exc)}") from exc
        counts = batch.request_counts
        state = BatchState(status=batch.status, completed=getattr(counts, "completed", 0) or 0,
                           failed=getattr(counts, "failed", 0) or 0)
        if batch.status in ("completed", "expired", "failed", "cancelled"):
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    text = self._client.files.content(file_id).text
                    for raw in text.splitlines():
                        if raw.strip():
                            line = json.loads(raw)
                            state.lines[line["custom_id"]] = line
        return state


def line_outcome(line: dict[str, Any] | None) -> tuple[int | None, dict[str, Any] | None, str | None]:
    """(HTTP status, chat.completion body when 200, error text) of one result line; status None if absent."""
    if line is None:
        return None, None, "no result for this line"
    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body") or {}
    if status == 200:
        return 200, body, None
    error = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
    error = error or (line.get("error") or {}).get("message") or "the line failed"
    return status or 500, None, str(error)[:300]


def _short(exc: Exception) -> str:
    return str(exc).replace("\n", " ")[:300]
